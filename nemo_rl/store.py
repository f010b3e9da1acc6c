"""nemo-rl's store: directories of this user's alone (this user's, mode 0700, not a link, in no directory others
may rename it out of, on a filesystem that locks), checked when first opened and pinned by (st_dev, st_ino): a
later open re-checks it against the pin. What is inside is trusted."""

from __future__ import annotations

import fcntl
import getpass
import os
import stat
import sys
from pathlib import Path

from nemo_rl import locks
from nemo_rl.errors import NemoRLError, command

_pinned: dict[Path, tuple[int, int]] = {}  # each store this process opened: its (st_dev, st_ino)


def open_store(path: Path, setting: str) -> Path:
    """`path` (named by `setting`), made mode 0700 when missing, then checked."""
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
        raise NemoRLError(f"{path} is a symbolic link, not a directory of yours",
                          f"replace it with a directory: {command('rm {path} && mkdir -m 700 {path}', path=path)}")
    pin = _pinned.get(path)
    if pin is not None and pin != (info.st_dev, info.st_ino):  # guard: store-a-swapped-store-is-refused
        raise NemoRLError(f"{path} was replaced by another directory since this process opened it",
                          "run the command again: a new process checks the directory it finds")
    if info.st_uid != os.geteuid():  # guard: store-another-owner-is-refused
        raise NemoRLError(f"{path} belongs to uid {info.st_uid}, not to you (share environments as bundles)",
                          "make it yours: " + command("sudo chown -R {user} {path}", user=_user(), path=path)
                          + f", or point {setting} at a directory of your own")
    if info.st_mode & 0o077:  # guard: store-a-looser-mode-is-refused
        # yours already: a looser mode is a leftover of an earlier layout, not someone else's doing
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
    """This user's name, or uid where the system has none (a container's user without a passwd entry)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.geteuid())  # guard: store-a-user-without-a-name-is-named-by-uid


def _parents_checked(path: Path, setting: str) -> None:
    """Refuse a store in a directory others may write (unless sticky, as /tmp), or reached through a link another
    user owns: they could swap the store."""
    for link in (p for p in path.absolute().parents if p.is_symlink()):
        if (owner := os.lstat(link).st_uid) not in (0, os.geteuid()):  # guard: store-another-user-s-link-above-is-refused
            raise NemoRLError(f"{path} is reached through {link}, a symbolic link of uid {owner}, who may point it "
                              "elsewhere", f"point {setting} at a directory only you may write in")
    parent = Path(os.path.realpath(path.parent))
    for directory in (parent, *parent.parents):
        info = os.stat(directory)
        others = info.st_mode & 0o002 or (info.st_mode & 0o020 and info.st_gid != os.getegid())
        if others and not info.st_mode & stat.S_ISVTX:  # guard: store-a-parent-others-may-write-is-refused
            raise NemoRLError(f"{path} is inside {directory} (mode {stat.S_IMODE(info.st_mode):04o}), where others "
                              "may rename or replace it", f"point {setting} at a directory only you may write in")
