"""A bundle's uv cache hard-linked or copied file by file, each file hashed as it is read."""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat
import threading
from collections.abc import Callable
from pathlib import Path

from nemo_rl import interrupt
from nemo_rl.errors import NemoRLError

BLOCK = 1 << 20  # hashlib releases the GIL on an update this large
# a link refused: another filesystem or mount (a read-only bind mount), fs.protected_hardlinks, too many links
LINK_FALLBACK = {errno.EXDEV, errno.EPERM, errno.EACCES, errno.EMLINK, errno.EROFS, errno.ENOTSUP, errno.EOPNOTSUPP}
Identity = tuple[int, int, int, int, int, int, int]  # st_ dev, ino, size, mtime_ns, mode, ctime_ns, nlink
Copied = tuple[int, str, Identity]  # a file of the copy: size, sha256, its identity once made


def identity(info: os.stat_result) -> Identity:
    """What a kept file is checked by; the ctime catches an edit whose mtime was put back (`cp -p`)."""
    changed = 0
    changed = info.st_ctime_ns  # guard: node-copy-identity-holds-the-ctime
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_mode, changed, info.st_nlink


def copy_cache(source: Path, target: Path, bundle: Path) -> dict[str, Copied]:
    """Copy `source` into `target`, linking where `linkable`, else copying without group/other write, setuid or setgid;
    returns each file's (size, sha256, identity) by relative path. Raises NemoRLError on a FIFO or device."""
    from concurrent.futures import ThreadPoolExecutor

    files = _tree(source, target, bundle)
    device = os.stat(target).st_dev
    skip = len(str(source)) + 1

    failed = threading.Event()

    def copied(pair: tuple[str, str]) -> tuple[str, Copied]:
        if failed.is_set():
            return "", (0, "", (0, 0, 0, 0, 0, 0, 0))
        try:
            interrupt.check()  # guard: node-copy-a-signal-ends-the-copy-within; a signal ends the copy within a file, and the copy is removed as it unwinds
            made = _linked(pair[0], pair[1], device)
            return pair[0][skip:], made if made is not None else _copy_file(pair[0], pair[1], bundle)
        except BaseException:
            failed.set()
            raise

    with ThreadPoolExecutor(max_workers=2 * (os.cpu_count() or 1)) as pool:
        return dict(pool.map(copied, files))


def others_may_write(info: os.stat_result) -> bool:
    """Whether a user but this one and root may write `info`'s file: never hashed and trusted, never packed."""
    if info.st_uid not in (0, os.geteuid()):  # guard: node-copy-links-only-files-of-this-user-or-root
        return True
    return bool(info.st_mode & 0o022)  # guard: node-copy-links-no-file-others-may-write


def linkable(info: os.stat_result, device: int, names: int = 1) -> bool:
    """Whether a bundle file may be hard-linked: a regular file on `device`, not setuid or setgid, others may not write,
    with `names` links (1 before the link)."""
    if info.st_nlink != names:  # guard: node-copy-links-no-file-linked-elsewhere
        return False
    if others_may_write(info) or info.st_mode & (stat.S_ISUID | stat.S_ISGID):  # guard: node-copy-links-no-setuid-file
        return False
    return stat.S_ISREG(info.st_mode) and info.st_dev == device


def _linked(path: str, target: str, device: int) -> Copied | None:
    """Hard-link `path` at `target` and hash it; None, with nothing at `target`, when it may not be linked."""
    if not linkable(os.lstat(path), device):
        return None
    try:
        os.link(path, target, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in LINK_FALLBACK:
            raise
        return None
    info = os.lstat(target)
    if linkable(info, device, names=2):  # guard: node-copy-a-name-swapped-before-the-link-is; the name may have been swapped since the look
        with open(target, "rb") as fh:  # only this user or root writes it: what is hashed is what stays
            size, sha = _hash_and_write(fh.fileno(), None)
        return size, sha, identity(info)
    os.unlink(target)
    return None


_buffers = threading.local()  # one block per thread: no allocation per read


def _hash_and_write(source: int, target: int | None) -> tuple[int, str]:
    """(size, sha256) of `source` from its offset, each block written to `target` when given."""
    if len(buffer := getattr(_buffers, "block", b"")) != BLOCK:
        buffer = _buffers.block = memoryview(bytearray(BLOCK))
    digest, size = hashlib.sha256(), 0
    while count := os.readv(source, [buffer]):
        interrupt.check()  # guard: node-copy-a-signal-ends-a-large-file-s-copy; a file of gigabytes outlasts the forced exit
        block = buffer[:count]
        digest.update(block)  # releases the GIL: the other threads read and write meanwhile
        size += count
        while target is not None and block:
            block = block[os.write(target, block):]
    return size, digest.hexdigest()


def _copy_file(path: str, target: str, bundle: Path) -> Copied:
    if not stat.S_ISREG(os.lstat(path).st_mode):  # guard: a-fifo-in-a-bundle-is-refused-by-the; looked at before it is opened: opening a device acts on it
        raise _not_a_file(path, bundle)
    try:  # never follows a link swapped in, never waits on a FIFO swapped in
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENXIO, errno.ENODEV):
            raise
        raise _not_a_file(path, bundle) from exc  # swapped for a link or a device since it was looked at
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # guard: a-file-swapped-for-a-fifo-after-the-look
            raise _not_a_file(path, bundle)
        out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,  # guard: copies-into-the-working-cache-lose-group
                      info.st_mode & 0o755)  # uv keeps a cached file's mode in the environment
        try:
            size, sha = _hash_and_write(fd, out)
            os.utime(out, ns=(info.st_atime_ns, info.st_mtime_ns))
            return size, sha, identity(os.fstat(out))
        finally:
            os.close(out)
    finally:
        os.close(fd)


def _tree(source: Path, target: Path, bundle: Path) -> list[tuple[str, str]]:
    """Make `source`'s directories and links in `target`; returns each file's path and its path there."""
    files = []
    todo = [(str(source), str(target))]
    while todo:  # by the listing's type: no lstat per file
        directory, here = todo.pop()
        try:  # a directory swapped for a link since its parent was listed is refused, never followed
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise _unlisted(directory, bundle, exc) from exc
        try:  # the entries look their type up through `fd` where the filesystem does not give it
            with os.scandir(fd) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
            for entry in entries:
                path, there = os.path.join(directory, entry.name), os.path.join(here, entry.name)
                try:
                    is_dir, link = entry.is_dir(follow_symlinks=False), None
                    if not is_dir and entry.is_symlink():
                        link = os.readlink(entry.name, dir_fd=fd)
                except OSError as exc:
                    raise _unlisted(directory, bundle, exc) from exc
                if is_dir:
                    os.mkdir(there, 0o755)
                    todo.append((path, there))
                elif link is not None:
                    os.symlink(link, there)
                else:
                    files.append((path, there))
        finally:
            os.close(fd)
    return files


def _unlisted(directory: str, bundle: Path, exc: OSError) -> NemoRLError:
    return NemoRLError(f"cannot list {directory} of bundle {bundle}: {exc.strerror}",
                       f"copy the bundle again from the builder: {bundle}")


def _not_a_file(path: str, bundle: Path) -> NemoRLError:
    return NemoRLError(f"cannot copy {path} of bundle {bundle}: not a regular file",
                       f"copy the bundle again from the builder: {bundle}")


def link_tree(source: Path, target: Path) -> None:
    """Make `target` hold hard links to `source`'s files, its links and directories, and nothing else."""
    todo = [(str(source), str(target))]
    while todo:  # a list, not recursion: a tree of any depth
        directory, here = todo.pop()
        try:
            if not stat.S_ISDIR(os.lstat(here).st_mode):  # guard: working-cache-directories-are-real
                remove(here)
                os.mkdir(here, 0o755)
        except FileNotFoundError:
            os.mkdir(here, 0o755)
        with os.scandir(directory) as entries:
            wanted = {entry.name: entry for entry in entries}
        with os.scandir(here) as entries:
            found = {entry.name: entry for entry in entries}
        for extra in found.keys() - wanted.keys():  # guard: working-cache-holds-nothing-else
            remove(os.path.join(here, extra))
        for name, want in wanted.items():
            there = os.path.join(here, name)
            if want.is_dir(follow_symlinks=False):
                todo.append((want.path, there))
                continue
            have = found.get(name)
            if have is not None:
                if _same(want, have):  # guard: working-cache-names-are-the-copy-s-files
                    continue
                remove(there)
            if want.is_symlink():
                os.symlink(os.readlink(want.path), there)
            else:
                os.link(want.path, there)


def _same(want: os.DirEntry[str], have: os.DirEntry[str]) -> bool:
    if want.is_symlink():
        return have.is_symlink() and os.readlink(want.path) == os.readlink(have.path)
    # by lstat, never the listing's inode: FUSE, overlayfs and a name mounted over each list another
    mine, theirs = want.stat(follow_symlinks=False), have.stat(follow_symlinks=False)
    return (theirs.st_dev, theirs.st_ino) == (mine.st_dev, mine.st_ino)


def remove(path: str) -> None:
    """Remove the name or tree `path` if there, opening up directories inside it that refuse."""
    top, opened = os.path.abspath(path), set()

    def open_up(function: Callable[[str], object], failed: str, exc: BaseException) -> None:
        if isinstance(exc, FileNotFoundError):
            return
        # the directory itself cannot be read (open, scandir, lstat), or the one holding the name cannot be written
        directory = failed if function in (os.open, os.scandir, os.lstat) else os.path.dirname(failed)
        if (not isinstance(exc, PermissionError) or directory in opened  # guard: remove-opens-up-only-what-refuses-inside
                or not (directory == top or directory.startswith(top + os.sep))):
            raise exc
        opened.add(directory)
        os.chmod(directory, 0o700)
        if directory == failed:
            shutil.rmtree(failed, onexc=open_up)
        else:
            function(failed)

    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, onexc=open_up)
    elif os.path.lexists(path):
        os.unlink(path)
