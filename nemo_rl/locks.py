"""Liveness as a held lock, never a PID (PIDs repeat in containers): a process that owns a directory holds an
exclusive flock on it until it is done, and the kernel drops it however the process dies."""

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
from nemo_rl.errors import NemoRLError
from nemo_rl.progress import progress

_POLL_S = 0.1  # a blocking flock would be resumed after a signal's handler (PEP 475) and wait on forever
# Each retry of lock_file follows a holder's removal of the file: a few under contention, never this many unless
# something keeps swapping the path (a co-user in a shared directory), which must not spin a command for ever.
LOCK_FILE_TRIES = 50


def _flock(fd: int, operation: int) -> None:
    """flock, with a filesystem that cannot lock (NFS without lockd: ENOLCK) named as the user's to fix."""
    try:
        fcntl.flock(fd, operation)
    except OSError as exc:
        if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP):  # guard: never-enolck-is-the-user-s-to-fix
            raise
        try:
            where = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            where = f"file descriptor {fd}"
        raise NemoRLError(f"cannot lock {where}: its filesystem does not support locks ({exc.strerror}; NFS mounted "
                          "without lockd, or with `nolock`)",
                          "mount it with locking (NFSv4, or NFSv3 with lockd running), or point the setting that "
                          "names it (NEMO_RL_VENV_DIR, NEMO_RL_CACHE_DIR) or the checkout at a local disk") from exc


def open_lock_file(path: Path, not_yours: str | None = None) -> int:
    """Open (creating) the lock file `path`, never through a link: a symlink or a hard link planted there would make
    whoever locks write into another file. Nor another user's file: its owner could hold the lock for ever and
    read what a holder writes into it. Raises OSError as os.open does, and NemoRLError for a planted file
    (`not_yours`: the fix for another user's, where the caller knows a better one than the settings)."""
    try:
        # 0600: flock needs only a descriptor, so whoever may read a lock file may hold it for ever
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)  # guard: never-lock-files-opened-without
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR):
            kind = "a symbolic link" if exc.errno == errno.ELOOP else "a directory"
            raise NemoRLError(f"lock file {path} is {kind}, which nemo-rl never makes",
                              f"remove {path} (and find out who planted it); it is made again") from exc
        if exc.errno == errno.EACCES:  # guard: a-lock-file-refused-with-eacces-is-named; a sticky directory (1777): the kernel refuses a co-user's link or file
            _refuse_planted(path, exc, not_yours)
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:  # guard: never-lock-files-are-plain-one-link
        os.close(fd)
        raise NemoRLError(f"lock file {path} is not a plain file nemo-rl made ("
                          f"{'hard-linked to another file' if stat.S_ISREG(info.st_mode) else 'not a regular file'})",
                          f"remove {path} (and find out who planted it); it is made again")
    if info.st_uid != os.geteuid():  # guard: terminal-another-user-s-lock-file-is
        os.close(fd)  # a co-user's, made first in a shared directory (NEMO_RL_VENV_DIR at mode 1777)
        raise NemoRLError(f"lock file {path} belongs to {_user(info.st_uid)}, not to you: nemo-rl never waits on "  # guard: toolchain-another-user-s-lock-names-the
                          "or writes into another user's lock file", not_yours or _not_yours_fix(path))
    if stat.S_IMODE(info.st_mode) != 0o600:  # guard: locks-a-lock-file-of-ours-is-made
        os.fchmod(fd, 0o600)  # an older nemo-rl's 0644, or a umask's 0400: ours to write, nobody else's to open
    return fd


def _refuse_planted(path: Path, exc: OSError, not_yours: str | None = None) -> None:
    """EACCES opening `path` in a sticky directory (fs.protected_symlinks, fs.protected_regular): name what is
    there, a link or another user's file, rather than blame the directory. Returns when it is neither."""
    try:
        info = os.lstat(path)
    except OSError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise NemoRLError(f"lock file {path} is a symbolic link owned by {_user(info.st_uid)}, which nemo-rl never "
                          "makes", f"remove {path} (and find out who planted it); it is made again") from exc
    if os.geteuid() != info.st_uid:
        raise NemoRLError(f"lock file {path} belongs to {_user(info.st_uid)}, not to you: nemo-rl never waits on "
                          "or writes into another user's lock file", not_yours or _not_yours_fix(path)) from exc
    if stat.S_ISREG(info.st_mode) and not info.st_mode & stat.S_IWUSR:  # made under a umask such as 0277
        raise NemoRLError(f"lock file {path} is yours but not writable (mode {stat.S_IMODE(info.st_mode):04o})",
                          f"`chmod 600 {path}`, then run again") from exc


def _not_yours_fix(path: Path) -> str:
    return (f"point the setting that names {path.parent} (NEMO_RL_VENV_DIR, NEMO_RL_BUNDLE_DIR, NEMO_RL_CACHE_DIR) "
            f"at a directory only you can write, or have its owner remove {path}")


def _user(uid: int) -> str:
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def held(directory: Path) -> bool:
    """Whether a process holds `directory`'s lock now. A shared, non-blocking probe: it never waits, never blocks
    a holder, and two probes do not see each other. A directory that cannot be opened (gone meanwhile, another
    user's) or locked (NFS without lockd) counts as held, so nothing acts on it."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError:  # held (EWOULDBLOCK), or a filesystem without locks (ENOLCK): a probe cannot tell, so held
        return True
    finally:
        os.close(fd)


def acquire(fd: int, waiting: Callable[[], str] | None) -> bool:
    """Take `fd`'s exclusive lock: at once when it is free; else, given `waiting`, print what it says and wait;
    without it, return False (the caller refuses or skips)."""
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


def lock_file(path: Path, waiting: Callable[[int], str] | None) -> int | None:
    """Open (creating) and lock the lock file `path`: the descriptor holding it, or None when busy and not
    `waiting` (given the descriptor, it says what is waited for). A lock file may be removed by whoever holds its
    lock (`remove_locked`); a process that opened it before that finds, once it has the lock, that the path no
    longer names its file, and locks the one the path names now: two processes never hold one path's lock."""
    for _ in range(LOCK_FILE_TRIES):
        fd = open_lock_file(path)
        try:
            if not acquire(fd, functools.partial(waiting, fd) if waiting else None):
                os.close(fd)
                return None
            if _names(path, fd):  # guard: rest-a-lock-whose-file-was-removed
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # removed (or replaced) while this process waited for it: lock what is there now
    raise NemoRLError(f"lock file {path} was replaced each of the {LOCK_FILE_TRIES} times nemo-rl locked it: "
                      "something keeps removing or swapping it",
                      f"find out what writes in {path.parent}; if nothing should, remove {path} and run again")


def remove_locked(path: Path, fd: int) -> bool:
    """Remove the lock file `path` whose lock `fd` holds (from `lock_file`): safe for those who follow
    `lock_file`, see there. False when the path no longer names that file (then it is left)."""
    if not _names(path, fd):
        return False
    path.unlink()
    return True


def remove_free(path: Path, unused: Callable[[], bool] = lambda: True) -> bool:
    """Remove the lock file `path` when no process holds its lock and `unused()`, asked under that lock, agrees
    (`lock_file`, `remove_locked`); False when held, in use, gone meanwhile or planted (a link, a hard link)."""
    try:
        fd = lock_file(path, None)
    except (OSError, NemoRLError):
        return False
    if fd is None:
        return False
    try:
        return unused() and remove_locked(path, fd)
    finally:
        os.close(fd)


def _names(path: Path, fd: int) -> bool:
    """Whether `path` still names the file `fd` has open (not removed, nor replaced by another)."""
    mine = os.fstat(fd)
    try:
        now = os.lstat(path)
    except FileNotFoundError:
        return False
    return (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino)


def hold(directory: Path) -> int:
    """Lock `directory` for as long as the returned descriptor is open (the caller closes it): the mark of a
    directory in use, which `held` sees."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    return fd


def try_hold(directory: Path, *, shared: bool = False) -> int | None:
    """`hold`, at once or not at all: None when another process holds it (`shared`: exclusively, as a remover
    does), it is gone, or its filesystem cannot lock (as `held` counts it held: nothing acts on it). Several
    processes may hold a directory shared at once; none can hold it exclusively (`remove_unheld`) meanwhile."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        _flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)  # guard: locks-a-shared-hold-keeps-a-remover-out
        return fd
    except (BlockingIOError, NemoRLError):  # held; or ENOLCK: NFS without lockd
        pass
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return None


def share(fd: int) -> None:
    """Turn the exclusive hold `fd` into a shared one: others may now hold the directory too, a remover still
    cannot. Linux (4.1 on) swaps the two under one spinlock, so no remover's try gets in between."""
    _flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)


SWEEP_AGE_S = 120.0  # a copy made moments ago is not yet held (made, then locked): a sweep leaves it


def remove_left(directory: Path) -> bool:
    """`remove_unheld` for a copy a killed command left: only one older than SWEEP_AGE_S, so a copy another
    command has just made, and is about to hold, is never taken."""
    try:
        if time.time() - os.lstat(directory).st_mtime < SWEEP_AGE_S:  # guard: locks-a-copy-just-made-is-left-to-the
            return False
    except OSError:
        return False
    return remove_unheld(directory)


def remove_unheld(directory: Path, remove: Callable[[], bool] = lambda: True) -> bool:
    """Remove `directory` when no process holds it (`hold`) and `remove()`, asked under the hold, agrees; False
    when held, gone, or left."""
    held = try_hold(directory)  # guard: bundles-a-live-node-build-s-cache-is
    if held is None:
        return False
    try:
        if not remove():
            return False
        shutil.rmtree(directory, ignore_errors=True)
        return True
    finally:
        os.close(held)
