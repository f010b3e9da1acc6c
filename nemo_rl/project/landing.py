"""A multi-file change staged away from the project and landed by renames.

A bump prepares pyproject.toml, uv.lock and patches/<dist>/ in a private staging directory inside the
project (same filesystem, so landing is a handful of renames). Before the first rename it writes a
LANDING journal (journal.py); if the process dies between the first and the last rename (microseconds), the
journal lets `nemo-rl deps recover` finish the landing, and `nemo-rl deps status` says so.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from nemo_rl import interrupt, locks, values
from nemo_rl.errors import NemoRLError
from nemo_rl.project import journal
from nemo_rl.project.state_dir import STAGING_ROOT, remove_empty, state_root

DRY_RUN_PREFIX = "nemo-rl-dry-run-"


def require_writable(paths: list[Path]) -> None:
    """Refuse before any work when a file or directory the change must replace is not writable by the user."""
    for path in paths:
        # the owner-write bit too: a user who made a file read-only meant it, even when root may still write
        if path.exists() and (not os.access(path, os.W_OK) or not path.stat().st_mode & 0o200):  # guard: bump-read-only-refusal
            # with the owner-write bit set, a refusal comes from elsewhere: an immutable file or a read-only mount
            fix = (f"`lsattr -d {path}`: if it is immutable (i), `chattr -i {path}` (as root); on a read-only mount, "
                   "run where you may write" if path.stat().st_mode & 0o200 else
                   f"make it writable (`chmod u+w {path}`) or run where you may write, then try again")
            raise NemoRLError(f"{path} is not writable, so it cannot be changed", fix)


def require_no_links(project: Path, names: Sequence[str]) -> None:
    """Refuse before any work when a path a landing replaces is a symbolic link: the staged file would land over
    the link, and what it points to (a file outside the project, a device) would be left as it was."""
    for name in names:
        path = project / name
        if path.is_symlink():  # guard: landing-a-linked-project-file-is-named
            target = os.readlink(path)
            copy = "cp -R" if path.is_dir() else "cp"
            raise NemoRLError(f"{path} is a symbolic link (to {target}): this command would land a new {name} over the "
                              f"link and leave {target} as it was; nothing was changed",
                              f"put the file itself in place of the link (`cd {shlex.quote(str(project))} && rm "
                              f"{shlex.quote(name)} && {copy} {shlex.quote(str(path.parent / target))} "
                              f"{shlex.quote(name)}`), then run again")


class _CopyFailed(Exception):
    """A file copy inside copytree failed: copytree turns an OSError into text in a shutil.Error (no errno, so a
    full disk would read as a bug), and lets any other exception through, carrying the error as it was."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error)
        self.error = error


SETTINGS_MAX = 1 << 20  # a .python-version or uv.toml


def _copy_setting(source: Path, target: Path) -> None:
    """A file uv reads beside pyproject.toml, as uv reads it (through a link: a .python-version shared by several
    checkouts), but only a regular file of a settings file's size: a link to /dev/zero, a FIFO or a device would
    fill the disk or hang the copy."""
    if not os.path.lexists(source):
        return
    try:
        data = values.read_plain_file(Path(os.path.realpath(source)), SETTINGS_MAX)  # guard: staging-a-settings-file-is-copied-only
    except OSError as exc:
        raise NemoRLError(f"cannot read {source}: {exc}", f"make {source} a regular file of uv settings (at most "
                          f"{SETTINGS_MAX} bytes), or remove it") from exc
    target.write_bytes(data)


def _copy(source: str, target: str) -> None:
    try:
        shutil.copy2(source, target)
    except OSError as exc:
        raise _CopyFailed(exc) from exc


class Staging:
    """A private copy of the files a change touches. Nothing in the project changes until `land()`."""

    def __init__(self, project: Path, files: list[str], directories: list[str], context: Sequence[str] = (),
                 inside: bool = True) -> None:
        self.project = project
        self.files = files  # landed by land()
        self.directories = directories  # landed by land()
        self.copied: dict[str, str | None] = {}  # landed path -> its digest when copied (__enter__)
        self.context = list(context)  # copied for the tools that run in the staging copy, never landed
        # Inside the project (same filesystem) when it will land by rename; a dry run never lands, so it stages
        # in a directory of this user's under nemo-rl's cache and works in a read-only checkout too. Never in the
        # shared temporary directory: uv looks for a workspace root above the directory it locks, and another
        # user could put one there.
        if inside:  # refused before anything is made: what landing replaces, and where it renames into
            require_no_links(project, [*files, *directories])
            landed = [project / name for name in (*files, *directories)]
            require_writable(sorted({project, *(parent for path in landed for parent in path.parents  # guard: staging-what-a-landing-replaces-is
                                                if parent.is_relative_to(project)), *landed}))
            require_renames(project, [*files, *directories])  # guard: never-renames-probed-before-staging
        root = state_root(project, create=True) if inside else dry_run_root()
        if not inside:
            remove_dead_dry_runs(root)
        self.path = Path(tempfile.mkdtemp(prefix=f"staging-{os.getpid()}-" if inside else DRY_RUN_PREFIX,
                                          dir=root))
        # Held until the staging copy is gone: a dry run killed with SIGKILL leaves its copy unlocked, and the
        # next dry run removes it (a bump's copy is the project lock's, see leftovers()).
        self._fd = locks.hold(self.path)

    def __enter__(self) -> Staging:
        # what each landed path held when copied: an editor or `uv add` in another terminal takes no project lock,
        # and landing over its edit would lose it
        try:
            self.copied = {name: journal.digest(self.project / name) for name in (*self.files, *self.directories)}
            for name in self.files:
                if (self.project / name).exists():
                    shutil.copy2(self.project / name, self.path / name)
            for name in self.context:
                _copy_setting(self.project / name, self.path / name)
            for name in self.directories:
                if (self.project / name).is_dir():
                    shutil.copytree(self.project / name, self.path / name, copy_function=_copy)  # guard: full-disk-a-copy-inside-copytree-keeps
        except BaseException as exc:  # __exit__ never runs for a failed __enter__: nothing may be left behind
            self.discard()  # guard: fixes-a-failed-staging-copy-removes
            os.close(self._fd)
            failed = exc.error if isinstance(exc, _CopyFailed) else exc  # guard: full-disk-staging-unwraps-the-copy-s-own
            if isinstance(failed, OSError) and failed.errno in (errno.ENOSPC, errno.EDQUOT):  # guard: fixes-a-full-disk-while-staging-says-to
                raise NemoRLError(f"cannot copy the files this command changes into {self.path.parent}: "
                                  f"{failed.strerror}", f"free space on the filesystem of {self.path.parent} (or "
                                  "raise the quota), then run again: nothing was changed") from failed
            if failed is not exc:
                raise failed from None
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if (self.path / journal.JOURNAL).exists():  # guard: bump-landing-journal-rolls-forward; interrupted while landing: roll forward, never leave a mix
                journal.finish(self.project, self.path)
            else:
                self.discard()
        finally:
            os.close(self._fd)

    def discard(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        remove_empty(self.project / STAGING_ROOT)

    def keep_mode(self, name: str) -> None:
        """A tool (uv) rewrote staged `name`: give it back the project file's mode."""
        original = self.project / name
        if original.exists() and (self.path / name).exists():
            os.chmod(self.path / name, original.stat().st_mode & 0o7777)

    def land(self) -> None:
        """Move every staged path into the project: the journal first, then one rename per path."""
        interrupt.check()  # guard: interrupt-no-landing-starts-after-a; the last point at which nothing has changed
        changed = [name for name, digest in self.copied.items() if journal.digest(self.project / name) != digest]
        if changed:  # guard: landing-an-edit-made-in-another-terminal
            raise NemoRLError(f"{', '.join(changed)} changed in {self.project} while this command ran (an editor or "
                              "another command); nothing landed, the project is as that change left it",
                              "run the command again")
        moves = [name for name in (*self.files, *self.directories) if (self.path / name).exists()]
        # what each path held when staged goes with the moves: `deps recover` lands nothing over a later edit either
        journal.write(self.path, moves, {n: self.copied[n] for n in moves})  # guard: bump-the-journal-records-what-each-path
        journal.finish(self.project, self.path)


def dry_run_root() -> Path:
    """This user's directory for dry runs' staging copies (mode 0700), under nemo-rl's cache."""
    from nemo_rl import settings

    return settings.private_dir("dry-runs")


def remove_dead_dry_runs(root: Path) -> None:
    """Remove the copies of dry runs that were killed (their lock is free); a running one keeps its lock."""
    for path in root.glob(f"{DRY_RUN_PREFIX}*"):
        locks.remove_left(path)  # under its lock, and not one just made: a dry run starting meanwhile keeps it


def mount_points() -> set[str]:
    """Every mount point this process sees (/proc/self/mountinfo, its octal escapes undone); empty where it cannot
    be read: a probe never raises."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return set()
    unescape = functools.partial(re.compile(r"\\([0-7]{3})").sub, lambda m: chr(int(m.group(1), 8)))
    return {unescape(fields[4]) for fields in (line.split(" ") for line in lines) if len(fields) > 4}  # guard: mountinfo-s-mount-points-are-read


def require_replaceable(project: Path, targets: Sequence[str]) -> None:
    """Refuse before any work when a path a landing replaces is a mount point (a container started with
    `-v $PWD/uv.lock:/w/uv.lock`): rename(2) onto it fails with EBUSY, after the paths before it have landed."""
    mounted = mount_points()
    for name in targets:
        target = project / name
        where = Path(os.path.realpath(target.parent)) / target.name
        if os.path.lexists(target) and (str(where) in mounted or os.path.ismount(target)):  # guard: a-landing-target-that-is-a-mount-point
            raise NemoRLError(f"{target} is a mount point (a bind mount, as `docker run -v` makes one), so a landing "
                              "could not replace it by a rename; nothing was changed",
                              f"mount the project's directory instead of {name} alone (or `umount {target}`), then "
                              "run again")


def require_renames(project: Path, targets: Sequence[str] = ()) -> None:
    """Refuse before any work when a landing could not rename staged files into the project: `.nemo-rl` (or
    patches/) on another filesystem or mount than the project (a link or a bind mount) fails with EXDEV, and a
    mounted target (`targets`, see require_replaceable) with EBUSY. A probe file is renamed from `.nemo-rl` into each
    directory a landing writes, and removed."""
    require_replaceable(project, targets)
    root = state_root(project, create=True)
    fd, probe = tempfile.mkstemp(prefix=".rename-probe-", dir=root)
    os.close(fd)
    here = Path(probe)
    try:
        for directory in (project, project / "patches"):
            if not directory.is_dir():
                continue
            target = directory / f".nemo-rl-rename-probe-{os.getpid()}"
            try:
                os.rename(here, target)
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
                raise NemoRLError(f"{root} is on another filesystem than {directory} (a link or a mount), so a "
                                  "landing could not rename files into the project",
                                  f"make {root} a plain directory inside the project (`rm -rf {root}` when no "
                                  "nemo-rl command runs; it is made again), then run again") from exc
            os.rename(target, here)
    finally:
        here.unlink(missing_ok=True)
