"""Liveness as a held flock, never a PID: the kernel drops it however a process dies."""

from __future__ import annotations

import errno
import fcntl
import functools
import os
import pwd
import shutil
import stat
import time
from collections.abc import Callable
from pathlib import Path

from nemo_rl import interrupt
from nemo_rl.errors import NemoRLError, command
from nemo_rl.progress import progress

_POLL_S = 0.1  # a blocking flock is resumed after a signal's handler (PEP 475)
LOCK_FILE_TRIES = 50


def _flock(fd: int, operation: int) -> None:
    try:
        fcntl.flock(fd, operation)
    except OSError as exc:
        if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP):  # guard: never-enolck-is-the-user-s-to-fix
            raise
        try:
            where = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            where = f"file descriptor {fd}"
        raise NemoRLError(f"cannot lock {where}: its filesystem does not support locks ({exc.strerror})",
                          "mount it with locking (NFSv4, or NFSv3 with lockd), or point the setting that names it "
                          "(NEMO_RL_VENV_DIR, NEMO_RL_CACHE_DIR) or the checkout at a local disk") from exc


def open_lock_file(path: Path, not_yours: str | None = None) -> int:
    """Open or create lock file `path`, never through a link; with `not_yours` (the fix), refuse another user's."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)  # guard: never-lock-files-opened-without
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR):
            raise _planted(path, "a symbolic link" if exc.errno == errno.ELOOP else "a directory") from exc
        if exc.errno == errno.EACCES:  # guard: a-lock-file-refused-with-eacces-is-named
            _refuse_planted(path, exc, not_yours)
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:  # guard: never-lock-files-are-plain-one-link
        os.close(fd)
        raise _planted(path, "hard-linked" if stat.S_ISREG(info.st_mode) else "not a regular file")
    if not_yours is not None and info.st_uid != os.geteuid():  # guard: locks-another-user-s-file-is-refused-where-shared
        os.close(fd)
        raise _theirs(path, info.st_uid, not_yours)  # guard: toolchain-another-user-s-lock-names-the
    if stat.S_IMODE(info.st_mode) != 0o600:  # guard: locks-a-lock-file-of-ours-is-made
        os.fchmod(fd, 0o600)  # a umask's 0400
    return fd


def _refuse_planted(path: Path, exc: OSError, not_yours: str | None = None) -> None:
    """Raise what a sticky directory's EACCES refused at `path`, if known."""
    try:
        info = os.lstat(path)
    except OSError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise _planted(path, f"a symbolic link owned by {_user(info.st_uid)}") from exc
    if os.geteuid() != info.st_uid:
        raise _theirs(path, info.st_uid, not_yours) from exc
    if stat.S_ISREG(info.st_mode) and not info.st_mode & stat.S_IWUSR:
        raise NemoRLError(f"lock file {path} is yours but not writable (mode {stat.S_IMODE(info.st_mode):04o})",
                          f"run {command('chmod 600 {path}', path=path)}") from exc


def _planted(path: Path, kind: str) -> NemoRLError:
    return NemoRLError(f"lock file {path} is {kind}", f"remove {path}")


def _theirs(path: Path, uid: int, fix: str | None) -> NemoRLError:
    return NemoRLError(f"lock file {path} belongs to {_user(uid)}, not to you", fix or f"have its owner remove {path}")


def _user(uid: int) -> str:
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def held(directory: Path) -> bool:
    """Whether a process holds `directory`'s lock; one that cannot be opened or locked counts as held."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def acquire(fd: int, waiting: Callable[[], str] | None) -> bool:
    """Take `fd`'s exclusive lock; when busy, print `waiting()` and wait, or without it return False."""
    try:
        _flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        if waiting is None:
            return False
    progress(waiting())
    while True:
        interrupt.check()  # guard: interrupt-a-wait-for-a-lock-looks-at-the
        try:
            _flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            time.sleep(_POLL_S)


def lock_file(path: Path, waiting: Callable[[int], str] | None, not_yours: str | None = None) -> int | None:
    """Open and lock `path`: the descriptor, or None when busy and not `waiting`."""
    for _ in range(LOCK_FILE_TRIES):
        fd = open_lock_file(path, not_yours)
        try:
            if not acquire(fd, functools.partial(waiting, fd) if waiting else None):
                os.close(fd)
                return None
            if _names(path, fd):  # guard: rest-a-lock-whose-file-was-removed
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    raise NemoRLError(f"lock file {path} was replaced {LOCK_FILE_TRIES} times while nemo-rl locked it",
                      f"stop what writes in {path.parent}, or remove {path}")


def remove_locked(path: Path, fd: int) -> bool:
    """Remove the lock file `path` that `fd` holds; False when the path names another file now."""
    if _names(path, fd):
        path.unlink()
        return True
    return False


def remove_free(path: Path, unused: Callable[[], bool] = lambda: True, not_yours: str | None = None) -> bool:
    """Remove the lock file `path` when no process holds it and `unused()`, asked under its lock, agrees."""
    try:
        fd = lock_file(path, None, not_yours)
    except (OSError, NemoRLError):
        return False
    if fd is None:
        return False
    try:
        return unused() and remove_locked(path, fd)
    finally:
        os.close(fd)


def _names(path: Path, fd: int) -> bool:
    try:
        return os.path.samestat(os.lstat(path), os.fstat(fd))
    except FileNotFoundError:
        return False


def hold(directory: Path) -> int:
    """Lock `directory` while the returned descriptor is open."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    return fd


def try_hold(directory: Path, *, shared: bool = False) -> int | None:
    """`hold` at once (`shared` keeps a remover out), or None when held, gone or unlockable."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        _flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)  # guard: locks-a-shared-hold-keeps-a-remover-out
    except BaseException as exc:
        os.close(fd)
        if isinstance(exc, BlockingIOError | NemoRLError):
            return None
        raise
    return fd


def share(fd: int) -> None:
    _flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)


SWEEP_AGE_S = 120.0  # a copy made moments ago is not yet held


def remove_left(directory: Path) -> bool:
    """`remove_unheld` for a copy older than SWEEP_AGE_S."""
    try:
        if time.time() - os.lstat(directory).st_mtime < SWEEP_AGE_S:  # guard: locks-a-copy-just-made-is-left-to-the
            return False
    except OSError:
        return False
    return remove_unheld(directory)


def remove_unheld(directory: Path) -> bool:
    held = try_hold(directory)  # guard: bundles-a-live-node-build-s-cache-is
    if held is None:
        return False
    try:
        shutil.rmtree(directory, ignore_errors=True)
        return True
    finally:
        os.close(held)
