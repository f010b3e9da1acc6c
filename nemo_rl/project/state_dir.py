"""The project's private directory (`.nemo-rl`, proven a real directory inside the project), atomic writes, and
the project lock every command that writes project files holds."""

from __future__ import annotations

import contextlib
import os
import shlex
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from nemo_rl import git_checkout, locks
from nemo_rl.errors import NemoRLError

STAGING_ROOT = ".nemo-rl"


def umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def state_root(project: Path, *, create: bool = False) -> Path:
    """<project>/.nemo-rl, nemo-rl's private directory, proven a real directory of the project (made with
    `create`): a `.nemo-rl` link committed by a pull request would have bumps stage, and develop and builds keep
    their state, wherever it points, and a dangling one fails obscurely. Never follows a link: mkdir does not."""
    root = project / STAGING_ROOT
    if create:
        try:
            root.mkdir()
        except FileExistsError:
            pass
    try:
        mode = os.lstat(root).st_mode
    except FileNotFoundError:
        return root
    if stat.S_ISDIR(mode):
        _refuse_tracked(project, root)
    if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):  # guard: rest-a-nemo-rl-link-or-file-is-refused
        link = os.readlink(root) if stat.S_ISLNK(mode) else None
        here = shlex.quote(str(root))
        keep = (f"; to keep what the directory it names holds (an interrupted bump's staging copy), copy it in: "
                f"`rm {here} && cp -a {shlex.quote(str(root.parent / link) + '/.')} {here}`"
                if link is not None and (root.parent / link).is_dir() else "")
        what = f"a symbolic link (to {link!r:.120})" if link is not None else "not a directory"
        raise NemoRLError(f"{root} is {what}: nemo-rl keeps its private state there and never follows it out of "
                          "the project", f"remove it (`rm {here}`; if a commit added it, also `git rm --cached "
                          f"{STAGING_ROOT}` and keep `{STAGING_ROOT}/` in .gitignore): nemo-rl makes the "
                          f"directory{keep}")
    return root


_UNTRACKED: set[tuple[str, int, int]] = set()  # (project, device, inode) of state directories found untracked


def _refuse_tracked(project: Path, root: Path) -> None:
    """A commit's files under .nemo-rl are never this machine's state: a pull request that force-adds a staging copy
    with a journal, develop.json with an overlay, or a checkout id would have `deps recover` land its hidden files,
    workers import its code, or another job's environments pruned. Asked of git once per directory a process sees."""
    info = os.stat(root)
    seen = (str(project), info.st_dev, info.st_ino)
    if seen in _UNTRACKED:
        return
    found = git_checkout.tracked(project, STAGING_ROOT)
    if found:  # guard: state-files-git-tracks-under-nemo-rl-are
        raise NemoRLError(f"{root} holds {len(found)} file(s) git tracks ({', '.join(found[:3])}): a commit put them "
                          "there, and nemo-rl never takes a commit's files for this machine's own state",
                          f"untrack them (`git -C {shlex.quote(str(project))} rm -r --cached {STAGING_ROOT}`, keep "
                          f"`{STAGING_ROOT}/` in .gitignore) and remove what the commit brought (`rm -rf "
                          f"{shlex.quote(str(root))}`; nemo-rl makes the directory again), or check out a commit "
                          "without them")
    _UNTRACKED.add(seen)


def write_atomic(path: Path, data: str | bytes, *, mode: int | None = None) -> None:
    """Write through a temporary file in the same directory, then os.replace: readers never see half a file.
    The file gets `mode` when given; else an existing file keeps its mode and a new one gets the mode the
    user's umask gives (not mkstemp's 0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)
        if mode is None:
            mode = path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~umask()
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno and exc.filename is None:  # guard: full-disk-a-failed-write-names-the-file; a write on a full disk names no file
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise


@contextlib.contextmanager
def project_lock(project: Path, *, wait: bool = True) -> Iterator[None]:
    """Held by every command that writes project files, for its whole run. It locks the project directory
    itself: renames inside it (a landing) keep its inode, nothing is created (a read-only checkout can be
    locked), and the kernel releases it when the holder dies, whatever its PID becomes later."""
    fd = os.open(project, os.O_RDONLY | os.O_DIRECTORY)
    try:
        message = f"waiting for another nemo-rl command (bump, patches, develop or recover) in {project}"
        if not locks.acquire(fd, (lambda: message) if wait else None):
            raise NemoRLError(f"another nemo-rl command (bump, patches, develop or recover) is changing {project}",
                              "wait for it to finish, or run again without --no-wait to wait")
        yield
    finally:
        os.close(fd)


def remove_empty(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError:
        pass
