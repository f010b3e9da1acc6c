"""A multi-file change staged in `.nemo-rl` and landed by renames."""

from __future__ import annotations

import errno
import functools
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from nemo_rl import interrupt, locks, settings, values
from nemo_rl.errors import NemoRLError, command
from nemo_rl.project import journal
from nemo_rl.project.state_dir import STAGING_ROOT, remove_empty, state_root

DRY_RUN_PREFIX = "nemo-rl-dry-run-"


def require_writable(paths: list[Path]) -> None:
    """Refuse a path to replace that is not writable, or read-only by its mode."""
    for path in paths:
        if path.exists() and (not os.access(path, os.W_OK) or not path.stat().st_mode & 0o200):  # guard: bump-read-only-refusal
            fix = (f"if {command('lsattr -d {path}', path=path)} shows it immutable (i), run "
                   f"{command('chattr -i {path}', path=path)} as root, else run where you may write"
                   if path.stat().st_mode & 0o200 else f"run {command('chmod u+w {path}', path=path)}")
            raise NemoRLError(f"{path} is not writable", fix)


def require_no_links(project: Path, names: Sequence[str]) -> None:
    for name in names:
        path = project / name
        if path.is_symlink():  # guard: landing-a-linked-project-file-is-named
            target = os.readlink(path)
            copy = "cp -R" if path.is_dir() else "cp"
            raise NemoRLError(f"{path} is a symbolic link (to {target}), which a landing would replace",
                              "run " + command("cd {project} && rm {name} && " + copy + " {target} {name}",
                                               project=project, name=name, target=path.parent / target))


class _CopyFailed(Exception):
    """A copy's OSError, carried whole through copytree."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error)
        self.error = error


SETTINGS_MAX = 1 << 20


def _copy_setting(source: Path, target: Path) -> None:
    """Copy a settings file uv reads, if any: a regular file of bounded size, through a link."""
    if not os.path.lexists(source):
        return
    try:
        data = values.read_plain_file(Path(os.path.realpath(source)), SETTINGS_MAX)  # guard: staging-a-settings-file-is-copied-only
    except OSError as exc:
        raise NemoRLError(f"cannot read {source}: {exc}", f"make {source} a regular file, or remove it") from exc
    target.write_bytes(data)


def _copy(source: str, target: str) -> None:
    try:
        shutil.copy2(source, target)
    except OSError as exc:
        raise _CopyFailed(exc) from exc


class Staging:
    """A private copy of the files a change touches; the project changes only at `land()`."""

    def __init__(self, project: Path, files: list[str], directories: list[str], context: Sequence[str] = (),
                 inside: bool = True) -> None:
        self.project = project
        self.files = files
        self.directories = directories
        self.copied: dict[str, str | None] = {}  # landed path -> its digest when copied
        self.context = list(context)  # copied for the tools, never landed
        # a dry run never lands: it stages under nemo-rl's cache, so a read-only checkout works too
        if inside:
            require_no_links(project, [*files, *directories])
            landed = [project / name for name in (*files, *directories)]
            require_writable(sorted({project, *(parent for path in landed for parent in path.parents  # guard: staging-what-a-landing-replaces-is
                                                if parent.is_relative_to(project)), *landed}))
            require_renames(project, [*files, *directories])  # guard: never-renames-probed-before-staging
        root = state_root(project, create=True) if inside else dry_run_root()
        if not inside:
            remove_dead_dry_runs(root)
        self.path = Path(tempfile.mkdtemp(prefix=f"staging-{os.getpid()}-" if inside else DRY_RUN_PREFIX, dir=root))
        # a dry run killed with SIGKILL leaves its copy unlocked, and the next dry run removes it
        self._fd = locks.hold(self.path)

    def __enter__(self) -> Staging:
        # an editor or `uv add` takes no project lock: land() compares these digests
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
        except BaseException as exc:  # __exit__ never runs for a failed __enter__
            self.discard()  # guard: fixes-a-failed-staging-copy-removes
            os.close(self._fd)
            failed = exc.error if isinstance(exc, _CopyFailed) else exc  # guard: full-disk-staging-unwraps-the-copy-s-own
            if isinstance(failed, OSError) and failed.errno in (errno.ENOSPC, errno.EDQUOT):  # guard: fixes-a-full-disk-while-staging-says-to
                raise NemoRLError(f"cannot copy the files this command changes into {self.path.parent}: "
                                  f"{failed.strerror}; nothing was changed",
                                  f"free space on the filesystem of {self.path.parent}") from failed
            if failed is not exc:
                raise failed from None
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if (self.path / journal.JOURNAL).exists():  # guard: bump-landing-journal-rolls-forward
                journal.finish(self.project, self.path)
            else:
                self.discard()
        finally:
            os.close(self._fd)

    def discard(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        remove_empty(self.project / STAGING_ROOT)

    def keep_mode(self, name: str) -> None:
        """Give staged `name` the project file's mode."""
        original = self.project / name
        if original.exists() and (self.path / name).exists():
            os.chmod(self.path / name, original.stat().st_mode & 0o7777)

    def land(self) -> None:
        """Write the journal, then rename every staged path into the project."""
        interrupt.check()  # guard: interrupt-no-landing-starts-after-a
        changed = [name for name, digest in self.copied.items() if journal.digest(self.project / name) != digest]
        if changed:  # guard: landing-an-edit-made-in-another-terminal
            raise NemoRLError(f"{', '.join(changed)} changed in {self.project} while this command ran; nothing landed",
                              "run the command again")
        moves = [name for name in (*self.files, *self.directories) if (self.path / name).exists()]
        journal.write(self.path, moves, {n: self.copied[n] for n in moves})  # guard: bump-the-journal-records-what-each-path
        journal.finish(self.project, self.path)


def dry_run_root() -> Path:
    return settings.private_dir("dry-runs")


def remove_dead_dry_runs(root: Path) -> None:
    for path in root.glob(f"{DRY_RUN_PREFIX}*"):
        locks.remove_left(path)


def mount_points() -> set[str]:
    """Every mount point this process sees; empty when /proc/self/mountinfo is unreadable."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return set()
    unescape = functools.partial(re.compile(r"\\([0-7]{3})").sub, lambda m: chr(int(m.group(1), 8)))
    return {unescape(fields[4]) for fields in (line.split(" ") for line in lines) if len(fields) > 4}  # guard: mountinfo-s-mount-points-are-read


def require_replaceable(project: Path, targets: Sequence[str]) -> None:
    """Refuse a path to replace that is a mount point."""
    mounted = mount_points()
    for name in targets:
        target = project / name
        where = Path(os.path.realpath(target.parent)) / target.name
        if os.path.lexists(target) and (str(where) in mounted or os.path.ismount(target)):  # guard: a-landing-target-that-is-a-mount-point
            raise NemoRLError(f"{target} is a mount point, which a landing cannot replace; nothing was changed",
                              f"mount the project's directory instead, or {command('umount {target}', target=target)}")


def require_renames(project: Path, targets: Sequence[str] = ()) -> None:
    """Refuse when a probe file cannot be renamed from `.nemo-rl` into each directory a landing writes."""
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
                raise NemoRLError(f"{root} is on another filesystem than {directory}",
                                  f"make it a plain directory: {command('rm -rf {root}', root=root)} while no nemo-rl "
                                  "command runs") from exc
            os.rename(target, here)
    finally:
        here.unlink(missing_ok=True)
