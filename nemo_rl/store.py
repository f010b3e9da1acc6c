"""Directories of this user's alone, checked when first opened; what is inside is trusted."""

from __future__ import annotations

import fcntl
import getpass
import os
import stat
import sys
from pathlib import Path

from nemo_rl import locks
from nemo_rl.errors import NemoRLError, command

_pinned: dict[Path, tuple[int, int]] = {}  # (st_dev, st_ino) of each store this process opened


def open_store(path: Path, setting: str) -> Path:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=0o700, exist_ok=True)  # guard: settings-a-private-directory-is-made
    except (FileExistsError, NotADirectoryError, PermissionError) as exc:
        raise NemoRLError(f"{setting} {path} cannot be used: {exc.strerror or exc}",
                          f"point {setting} at a directory you may write") from exc
    return _checked(path, setting)


def _checked(path: Path, setting: str) -> Path:
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):  # guard: store-a-link-is-refused
        raise NemoRLError(f"{path} is a symbolic link", f"run {command('rm {path} && mkdir -m 700 {path}', path=path)}")
    pin = _pinned.get(path)
    if pin is not None and pin != (info.st_dev, info.st_ino):  # guard: store-a-swapped-store-is-refused
        raise NemoRLError(f"{path} was replaced by another directory since this process opened it",
                          "run the command again")
    if info.st_uid != os.geteuid():  # guard: store-another-owner-is-refused
        raise NemoRLError(f"{path} belongs to uid {info.st_uid}, not to you",
                          "run " + command("sudo chown -R {user} {path}", user=_user(), path=path)
                          + f", or point {setting} at a directory of your own")
    if info.st_mode & 0o077:  # guard: store-a-looser-mode-is-refused
        os.chmod(path, 0o700)
        sys.stderr.write(f"nemo-rl: {path} had mode {stat.S_IMODE(info.st_mode):04o}; made it 0700 (yours alone)\n")
    if pin is None:
        _parents_checked(path, setting)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            locks._flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pass
        finally:
            os.close(fd)
        _pinned[path] = (info.st_dev, info.st_ino)
    return path


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.geteuid())  # guard: store-a-user-without-a-name-is-named-by-uid


def _parents_checked(path: Path, setting: str) -> None:
    """Refuse a store another user could swap: under a directory they may write or a link of theirs."""
    for link in (p for p in path.absolute().parents if p.is_symlink()):
        if (owner := os.lstat(link).st_uid) not in (0, os.geteuid()):  # guard: store-another-user-s-link-above-is-refused
            raise NemoRLError(f"{path} is reached through {link}, a symbolic link of uid {owner}",
                              f"point {setting} at a directory only you may write in")
    parent = Path(os.path.realpath(path.parent))
    for directory in (parent, *parent.parents):
        info = os.stat(directory)
        others = info.st_mode & 0o002 or (info.st_mode & 0o020 and info.st_gid != os.getegid())
        if others and not info.st_mode & stat.S_ISVTX:  # guard: store-a-parent-others-may-write-is-refused
            raise NemoRLError(f"{path} is inside {directory} (mode {stat.S_IMODE(info.st_mode):04o}), where others "
                              "may write", f"point {setting} at a directory only you may write in")
