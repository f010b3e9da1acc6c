"""Atomic writes, and a multi-file change staged away from the project and landed by renames.

A bump prepares pyproject.toml, uv.lock and patches/<dist>/ in a private staging directory inside the
project (same filesystem, so landing is a handful of renames). Before the first rename it writes a
LANDING journal; if the process dies between the first and the last rename (microseconds), the journal
lets `nemo-rl deps recover` finish the landing, and `nemo-rl deps status` says so.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shlex
import shutil
import stat
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from nemo_rl import interrupt, locks, values
from nemo_rl.errors import NemoRLError

STAGING_ROOT = ".nemo-rl"
JOURNAL = "LANDING.json"
LANDABLE_FILES = ("pyproject.toml", "uv.lock")
DRY_RUN_PREFIX = "nemo-rl-dry-run-"


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
    if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):
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


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write through a temporary file in the same directory, then os.replace: readers never see half a file.
    An existing file keeps its mode; a new one gets the mode the user's umask gives (not mkstemp's 0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)
        os.chmod(tmp, path.stat().st_mode & 0o7777 if path.exists() else 0o666 & ~umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def require_writable(paths: list[Path]) -> None:
    """Refuse before any work when a file or directory the change must replace is not writable by the user."""
    for path in paths:
        # the owner-write bit too: a user who made a file read-only meant it, even when root may still write
        if path.exists() and (not os.access(path, os.W_OK) or not path.stat().st_mode & 0o200):
            # with the owner-write bit set, a refusal comes from elsewhere: an immutable file or a read-only mount
            fix = (f"`lsattr -d {path}`: if it is immutable (i), `chattr -i {path}` (as root); on a read-only mount, "
                   "run where you may write" if path.stat().st_mode & 0o200 else
                   f"make it writable (`chmod u+w {path}`) or run where you may write, then try again")
            raise NemoRLError(f"{path} is not writable, so it cannot be changed", fix)


class Staging:
    """A private copy of the files a change touches. Nothing in the project changes until `land()`."""

    def __init__(self, project: Path, files: list[str], directories: list[str], context: Sequence[str] = (),
                 inside: bool = True) -> None:
        self.project = project
        self.files = files  # landed by land()
        self.directories = directories  # landed by land()
        self.copied: dict[str, str | None] = {}  # landed path -> its digest when copied (__enter__)
        self.context = list(context)  # copied for the tools that run in the staging copy, never landed
        # Inside the project (same filesystem) when it will land by rename; a dry run never lands, so it
        # stages in the system's temporary directory and works in a read-only checkout too.
        root = state_root(project, create=True) if inside else Path(tempfile.gettempdir())
        root.mkdir(exist_ok=True)
        if inside:
            require_renames(project)
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
            self.copied = {name: _digest(self.project / name) for name in (*self.files, *self.directories)}
            for name in (*self.files, *self.context):
                if (self.project / name).exists():
                    shutil.copy2(self.project / name, self.path / name)
            for name in self.directories:
                if (self.project / name).is_dir():
                    shutil.copytree(self.project / name, self.path / name, copy_function=shutil.copy2)
        except BaseException as exc:  # __exit__ never runs for a failed __enter__: nothing may be left behind
            self.discard()
            os.close(self._fd)
            if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise NemoRLError(f"cannot copy the files this command changes into {self.path.parent}: "
                                  f"{exc.strerror}", f"free space on the filesystem of {self.project} (or raise "
                                  "the quota), then run again: nothing was changed") from exc
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if (self.path / JOURNAL).exists():  # interrupted while landing: roll forward, never leave a mix
                finish(self.project, self.path)
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
        interrupt.check()  # the last point at which nothing has changed
        changed = [name for name, digest in self.copied.items() if _digest(self.project / name) != digest]
        if changed:
            raise NemoRLError(f"{', '.join(changed)} changed in {self.project} while this command ran (an editor or "
                              "another command); nothing landed, the project is as that change left it",
                              "run the command again")
        moves = [name for name in (*self.files, *self.directories) if (self.path / name).exists()]
        # what each path held when staged goes with the moves: `deps recover` lands nothing over a later edit either
        write_atomic(self.path / JOURNAL, json.dumps({"moves": moves, "before": {n: self.copied[n] for n in moves}}))
        finish(self.project, self.path)


def _digest(path: Path) -> str | None:
    """The content of a file or a directory tree (each path and its bytes), as one hash; None when absent."""
    import hashlib

    if not path.exists() and not path.is_symlink():
        return None
    digest = hashlib.sha256()
    paths = sorted(p for p in path.rglob("*") if not p.is_dir()) if path.is_dir() else [path]
    for item in paths:
        digest.update(str(item.relative_to(path)).encode() + b"\0")
        digest.update(item.read_bytes() if item.is_file() else os.readlink(item).encode())
        digest.update(b"\0")
    return digest.hexdigest()


def _landable(name: object) -> bool:
    """What a landing may move: the project files a bump or a records regeneration changes, nothing else."""
    if name in LANDABLE_FILES:
        return True
    parts = name.split("/") if isinstance(name, str) else []
    return len(parts) == 2 and parts[0] == "patches" and bool(values.DISTRIBUTION_NAME.match(parts[1]))


def read_journal(staging: Path) -> list[str]:
    """The moves a journal names, checked: a hand-edited or corrupt journal can never move anything else."""
    return _read_journal(staging)[0]


def _read_journal(staging: Path) -> tuple[list[str], dict[str, str | None] | None]:
    """The moves, and the digest each moved path had when staged (None: a journal that records none)."""
    path = staging / JOURNAL
    fix = (f"nothing was moved; `git status` shows which of pyproject.toml, uv.lock and patches/ changed "
           f"(`git checkout -- <file>` restores one), then delete {staging}")
    try:
        journal = values.state_json(path, fix, "the landing journal")
        if not isinstance(journal, dict):
            raise TypeError("not a JSON object")
        moves, before = journal["moves"], journal.get("before")
    except (OSError, TypeError, KeyError) as exc:
        raise NemoRLError(f"cannot read the landing journal {path}: {exc}", fix) from exc
    if (not isinstance(moves, list) or len(moves) != len(set(map(str, moves))) or len(moves) > 8
            or not all(_landable(name) for name in moves)):  # a landing moves each of a handful of paths once
        raise NemoRLError(f"{path} names paths a landing never moves: {moves!r:.200}", fix)
    for name in moves:
        values.inside(project_of(staging), name, str(path))
    if before is not None and (not isinstance(before, dict) or set(before) != set(moves) or not all(
            d is None or isinstance(d, str) and re.fullmatch(r"[0-9a-f]{64}", d) for d in before.values())):
        raise NemoRLError(f"{path} records digests that are not one per moved path: {before!r:.200}", fix)
    return moves, before


def _require_unchanged(project: Path, staging: Path, moves: list[str], before: dict[str, str | None] | None) -> None:
    """Refuse to move a path that changed in the project since it was staged (an editor, `uv add`, a `git checkout`
    in another terminal): landing over it would lose that change."""
    left = [name for name in moves if os.path.lexists(staging / name)]

    def unchanged(name: str) -> bool:
        held = _digest(project / name)
        if before is None or held == before[name]:
            return before is not None
        old = staging / f".old-{Path(name).name}"  # a directory swap cut short: the project's copy is set aside
        return held is None and old.is_dir() and _digest(old) == before[name]

    changed = [name for name in left if not unchanged(name)]
    if not changed:
        return
    landed = [name for name in moves if name not in left]
    why = ("the journal records nothing to compare with (written by an older nemo-rl)" if before is None else
           "changed in the project since they were staged (an editor or another command)")
    raise NemoRLError(f"cannot finish the landing in {staging}: {', '.join(changed)} {why}; nothing more was moved"
                      + (f" ({', '.join(landed)} had landed before the interruption)" if landed else ""),
                      f"to keep the project's files, `rm -rf {staging}`, then `nemo-rl deps status` names what to fix "
                      f"and the command can run again; the staged files stay in {staging} until then (compare with "
                      f"`diff -r {project}/<path> {staging}/<path>`)")


@dataclass(frozen=True)
class CutShort:
    """A landing whose journal was written and whose process died: what it moves, which of them had moved."""

    staging: Path
    moves: list[str]
    moved: list[str]
    unreadable: str | None  # the refusal, when the journal cannot be read (then moves are unknown)


def cut_short(project: Path, *, locked: bool = False) -> list[CutShort]:
    """The landings left cut short in `project` (see leftovers()); never raises on what a journal holds."""
    found = []
    for staging, journal in leftovers(project, locked=locked):
        if not journal:
            continue
        try:
            moves = read_journal(staging)
        except NemoRLError as exc:
            found.append(CutShort(staging, [], [], f"{exc.what}: {exc.remedy}"))
            continue
        moved = [name for name in moves if not os.path.lexists(staging / name)]
        found.append(CutShort(staging, moves, moved, None))
    return found


def refuse_cut_short(project: Path, *, locked: bool) -> None:
    """A command that reads the pins refuses over a landing cut short: it would read a mix of old and new files
    and land its own over them, after which `deps recover` refuses the newer files."""
    for cut in cut_short(project, locked=locked):
        if cut.unreadable is not None:  # recover cannot finish it either: say what it says
            raise NemoRLError(f"a landing in {project} was cut short and its journal cannot be read: "
                              f"{cut.unreadable}", "follow that, then run this command again")
        raise NemoRLError(f"a landing in {project} was cut short ({cut.staging} is left; moved: "
                          f"{', '.join(cut.moved) or 'nothing'}): the project may mix old and new files",
                          "run `nemo-rl deps recover` (it finishes that landing), then run this command again")


def project_of(staging: Path) -> Path:
    return staging.parent.parent  # <project>/.nemo-rl/staging-*


def remove_dead_dry_runs(root: Path) -> None:
    """Remove the copies of dry runs that were killed (their lock is free); a running one keeps its lock."""
    for path in root.glob(f"{DRY_RUN_PREFIX}*"):
        if not locks.held(path):
            shutil.rmtree(path, ignore_errors=True)


def require_renames(project: Path) -> None:
    """Refuse before any work when a landing could not rename staged files into the project: `.nemo-rl` (or
    patches/) on another filesystem or mount than the project (a link or a bind mount) fails with EXDEV. A probe
    file is renamed from `.nemo-rl` into each directory a landing writes, and removed."""
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


def _check_staged(staging: Path, name: str) -> None:
    """What a landing moves must be what a bump stages: a regular file, or a directory tree of regular files,
    all ours; a link (to outside the project) or a device planted in the staging copy is refused."""
    fix = (f"nothing more was moved; delete {staging} and check `git status` (`git checkout -- <file>` restores "
           "one), then run the command again")
    top = staging / name
    paths = [top]
    if top.is_dir() and not top.is_symlink():
        for dirpath, dirnames, filenames in os.walk(top):
            paths += [Path(dirpath) / n for n in (*dirnames, *filenames)]
    for path in paths:
        info = path.lstat()
        regular, directory = stat.S_ISREG(info.st_mode), stat.S_ISDIR(info.st_mode)
        # patches/<dist> is a directory of files and directories; pyproject.toml and uv.lock are files
        kind_ok = (directory if path == top else regular or directory) if name.startswith("patches/") else regular
        if not kind_ok or info.st_uid != os.geteuid() or (regular and info.st_nlink != 1):
            raise NemoRLError(f"{path} is not a file a landing moves (a link, a device, a hard link or another "
                              "user's file)", fix)


def _move(source: Path, target: Path) -> None:
    """os.replace; across filesystems (a journal left by an older nemo-rl), a copy then a delete, which a landing
    run again repeats from the start of the path."""
    try:
        os.replace(source, target)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        shutil.move(source, target)


def finish(project: Path, staging: Path) -> list[str]:
    """Complete a landing whose journal exists; idempotent, so a landing cut short can be run again. Returns the
    paths it moved (not those moved before it was cut short)."""
    moves, before = _read_journal(staging)
    for name in moves:
        if os.path.lexists(staging / name):
            _check_staged(staging, name)
    _require_unchanged(project, staging, moves, before)
    moved = []
    for name in moves:
        source, target = staging / name, project / name
        if not source.exists():
            continue  # landed before the interruption
        if source.is_dir():
            old = staging / f".old-{Path(name).name}"
            if target.exists():
                shutil.rmtree(old, ignore_errors=True)
                _move(target, old)
            target.parent.mkdir(parents=True, exist_ok=True)
        _move(source, target)
        moved.append(name)
    interrupt.completed(f"{', '.join(moves)} landed in {project}")
    shutil.rmtree(staging, ignore_errors=True)
    remove_empty(project / STAGING_ROOT)
    return moved


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


def leftovers(project: Path, *, locked: bool = False) -> list[tuple[Path, bool]]:
    """(staging dir, has a landing journal) left by commands that no longer run. A staging dir belongs to a
    live command only while the project lock is held, so with the lock held (`locked`) or free, every one is
    a leftover; while another command holds it, none is."""
    root = state_root(project)
    stagings = sorted(root.glob("staging-*")) if root.is_dir() else []
    if not stagings or (not locked and locks.held(project)):
        return []
    return [(path, (path / JOURNAL).exists()) for path in stagings]


def remove_empty(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError:
        pass
