"""The project's private directory (`.nemo-rl`), atomic writes, and the project lock."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from nemo_rl import git_checkout, locks
from nemo_rl.errors import NemoRLError, command

STAGING_ROOT = ".nemo-rl"


def umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def state_root(project: Path, *, create: bool = False) -> Path:
    """<project>/.nemo-rl, proven a real directory (made with `create`)."""
    root = project / STAGING_ROOT
    if create:
        with contextlib.suppress(FileExistsError):
            root.mkdir()
    try:
        mode = os.lstat(root).st_mode
    except FileNotFoundError:
        return root
    if stat.S_ISDIR(mode):
        _refuse_tracked(project, root)
    if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):  # guard: rest-a-nemo-rl-link-or-file-is-refused
        link = os.readlink(root) if stat.S_ISLNK(mode) else None
        keep = (f"; to keep its content: "
                f"{command('rm {here} && cp -a {there} {here}', here=root, there=str(root.parent / link) + '/.')}"
                if link is not None and (root.parent / link).is_dir() else "")
        what = f"a symbolic link (to {link!r:.120})" if link is not None else "not a directory"
        raise NemoRLError(f"{root} is {what}",
                          f"run {command('rm {here}', here=root)} (if a commit added it, also "
                          f"{command('git rm --cached {state}', state=STAGING_ROOT)}){keep}")
    return root


_UNTRACKED: set[tuple[str, int, int]] = set()  # (project, device, inode)


def _refuse_tracked(project: Path, root: Path) -> None:
    info = os.stat(root)
    seen = (str(project), info.st_dev, info.st_ino)
    if seen in _UNTRACKED:
        return
    found = git_checkout.tracked(project, STAGING_ROOT)
    if found:  # guard: state-files-git-tracks-under-nemo-rl-are
        raise NemoRLError(f"{root} holds {len(found)} file(s) git tracks ({', '.join(found[:3])})",
                          "run " + command("git -C {project} rm -r --cached {state} && rm -rf {root}", project=project,
                                    state=STAGING_ROOT, root=root))
    _UNTRACKED.add(seen)


def write_atomic(path: Path, data: str | bytes, *, mode: int | None = None) -> None:
    """Write through a temporary file and os.replace; `mode`, else the file's own, else the umask's."""
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
        if isinstance(exc, OSError) and exc.errno and exc.filename is None:  # guard: full-disk-a-failed-write-names-the-file
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise


@contextlib.contextmanager
def project_lock(project: Path, *, wait: bool = True) -> Iterator[None]:
    """The project directory's lock, held by every command writing project files."""
    fd = os.open(project, os.O_RDONLY | os.O_DIRECTORY)
    try:
        message = f"waiting for another nemo-rl command in {project}"
        if not locks.acquire(fd, (lambda: message) if wait else None):
            raise NemoRLError(f"another nemo-rl command is changing {project}",
                              "wait for it to finish, or run without --no-wait")
        yield
    finally:
        os.close(fd)


def remove_empty(directory: Path) -> None:
    with contextlib.suppress(OSError):
        directory.rmdir()
