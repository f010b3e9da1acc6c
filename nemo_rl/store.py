"""nemo-rl's store: directories of this user's alone, checked once per process when opened (this user's, mode
0700, not a link, on a filesystem that locks). What is inside is trusted."""

from __future__ import annotations

import fcntl
import functools
import os
import stat
from pathlib import Path

from nemo_rl import locks
from nemo_rl.errors import NemoRLError, command


def open_store(path: Path, setting: str) -> Path:
    """`path` (named by `setting`), made mode 0700 when missing, then checked once per process."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=0o700, exist_ok=True)  # guard: settings-a-private-directory-is-made
    except (FileExistsError, NotADirectoryError, PermissionError) as exc:
        raise NemoRLError(f"{setting} {path} cannot be used: {exc.strerror or exc}",
                          f"point {setting} at a directory you may write") from exc
    return _checked(path, setting)


@functools.cache
def _checked(path: Path, setting: str) -> Path:
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):  # guard: store-a-link-is-refused
        raise NemoRLError(f"{path} is a symbolic link, not a directory of yours",
                          f"replace it with a directory: {command('rm {path} && mkdir -m 700 {path}', path=path)}")
    if info.st_uid != os.geteuid():  # guard: store-another-owner-is-refused
        raise NemoRLError(f"{path} belongs to uid {info.st_uid}, not to you (share environments as bundles)",
                          f"point {setting} at a directory of your own")
    if info.st_mode & 0o077:  # guard: store-a-looser-mode-is-refused
        raise NemoRLError(f"{path} has mode {stat.S_IMODE(info.st_mode):04o}: others may reach into it",
                          command("chmod 700 {path}", path=path))
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        locks._flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        pass
    finally:
        os.close(fd)
    return path
