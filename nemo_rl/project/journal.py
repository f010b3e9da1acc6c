"""The landing journal, written before the first rename: the staged paths and their digests."""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from nemo_rl import codec, interrupt, locks, values
from nemo_rl.errors import NemoRLError, command
from nemo_rl.project import lockfile
from nemo_rl.project.state_dir import STAGING_ROOT, remove_empty, state_root

JOURNAL = "LANDING.json"
VERSION = 1
LANDABLE_FILES = ("pyproject.toml", "uv.lock")


@dataclass(frozen=True)
class Journal:
    moves: tuple[str, ...]
    before: dict[str, str | None]  # each moved path's digest when staged (None: absent)


def write(staging: Path, moves: list[str], before: dict[str, str | None]) -> None:
    codec.write(staging / JOURNAL, Journal(tuple(moves), before), VERSION)


def digest(path: Path) -> str | None:
    """One hash of a file or a directory tree; None when absent."""
    if not path.exists() and not path.is_symlink():
        return None
    digest = hashlib.sha256()
    paths = sorted(p for p in path.rglob("*") if not p.is_dir()) if path.is_dir() else [path]  # guard: landing-a-directory-s-files-digested
    for item in paths:
        digest.update(str(item.relative_to(path)).encode() + b"\0")
        digest.update(os.readlink(item).encode() if item.is_symlink() else lockfile.read_bytes(item))
        digest.update(b"\0")
    return digest.hexdigest()


def _landable(name: str) -> bool:
    records = name.removeprefix("patches/")
    return name in LANDABLE_FILES or (records != name and bool(values.DISTRIBUTION_NAME.match(records)))


def read_journal(staging: Path) -> Journal:
    """The journal in `staging`, checked."""
    path = staging / JOURNAL
    fix = (f"nothing more was moved, but the landing may have moved some files: check `git status` "  # guard: journal-an-unreadable-journal-says-files
           f"(`git checkout -- <file>` restores one), then delete {staging}")
    record = codec.read(path, Journal, VERSION, fix=fix, name="a landing journal")
    if record is None:
        raise NemoRLError(f"cannot read {path}: not a landing journal this nemo-rl writes", fix)
    moves = record.moves
    if len(moves) != len(set(moves)) or len(moves) > 8 or not all(map(_landable, moves)):  # guard: trust-journal-names-landable-paths-only
        raise NemoRLError(f"{path} names paths a landing never moves: {moves!r:.200}", fix)
    for name in moves:
        values.inside(project_of(staging), name, str(path))
    if set(record.before) != set(moves) or not all(  # guard: fast-a-journal-s-digests-one-per-move
            d is None or re.fullmatch(r"[0-9a-f]{64}", d) for d in record.before.values()):
        raise NemoRLError(f"{path} records digests that are not one per moved path: {record.before!r:.200}", fix)
    return record


def _require_unchanged(project: Path, staging: Path, record: Journal) -> None:
    left = [name for name in record.moves if os.path.lexists(staging / name)]

    def unchanged(name: str) -> bool:
        held = digest(project / name)
        if held == record.before[name]:
            return True
        old = staging / f".old-{Path(name).name}"  # a directory swap cut short: the project's copy is set aside
        return held is None and old.is_dir() and digest(old) == record.before[name]  # guard: recover-a-directory-swap-cut-short-is-no

    changed = [name for name in left if not unchanged(name)]
    if not changed:
        return
    landed = [name for name in record.moves if name not in left]
    raise NemoRLError(f"cannot finish the landing in {staging}: {', '.join(changed)} changed in the project since "
                      "they were staged; nothing more was moved"
                      + (f" ({', '.join(landed)} had landed before the interruption)" if landed else ""),
                      f"to keep the project's files, run {command('rm -rf {staging}', staging=staging)}, then "
                      "`nemo-rl deps status`")


@dataclass(frozen=True)
class Leftover:
    staging: Path
    has_journal: bool


@dataclass(frozen=True)
class CutShort:
    staging: Path
    moves: tuple[str, ...]
    moved: tuple[str, ...]
    unreadable: str | None  # why the journal cannot be read

    def touches(self, records: str) -> bool:
        """Whether this landing may change the records `records` (patches/<dist>)."""
        records_moved = [name for name in self.moves if name.startswith("patches/")]
        return self.unreadable is not None or not records_moved or records in records_moved  # guard: fast-a-landing-cut-short-is-only-its


def cut_short(project: Path, *, locked: bool = False) -> list[CutShort]:
    """The landings cut short in `project`; never raises on a journal's content."""
    found = []
    for staging in (left.staging for left in leftovers(project, locked=locked) if left.has_journal):
        try:
            moves = read_journal(staging).moves
        except NemoRLError as exc:
            found.append(CutShort(staging, (), (), f"{exc.what}: {exc.remedy}"))
            continue
        moved = tuple(name for name in moves if not os.path.lexists(staging / name))
        found.append(CutShort(staging, moves, moved, None))
    return found


def refuse_cut_short(project: Path, *, locked: bool) -> None:
    for cut in cut_short(project, locked=locked):
        if cut.unreadable is not None:  # guard: landing-an-unreadable-cut-short-journal
            raise NemoRLError(f"a landing in {project} was cut short and its journal cannot be read: "
                              f"{cut.unreadable}", "follow that, then run this command again")
        raise NemoRLError(f"a landing in {project} was cut short ({cut.staging} is left; moved: "
                          f"{', '.join(cut.moved) or 'nothing'})", "run `nemo-rl deps recover`, then this again")


def project_of(staging: Path) -> Path:
    return staging.parent.parent  # <project>/.nemo-rl/staging-*


def _check_staged(staging: Path, name: str) -> None:
    fix = f"delete {staging}, check `git status` (`git checkout -- <file>` restores one), then run the command again"
    top = staging / name
    paths = [top]
    if top.is_dir() and not top.is_symlink():
        for dirpath, dirnames, filenames in os.walk(top):
            paths += [Path(dirpath) / n for n in (*dirnames, *filenames)]
    for path in paths:
        info = path.lstat()
        regular, directory = stat.S_ISREG(info.st_mode), stat.S_ISDIR(info.st_mode)
        kind_ok = (directory if path == top else regular or directory) if name.startswith("patches/") else regular
        if not kind_ok or (regular and info.st_nlink != 1):
            raise NemoRLError(f"{path} is not a file a landing moves (a link, a device or a hard link)", fix)


def _move(source: Path, target: Path) -> None:
    """os.replace, refused across filesystems or onto a mount point."""
    try:
        os.replace(source, target)
    except OSError as exc:
        if exc.errno == errno.EBUSY:  # guard: a-landing-onto-a-mount-point-says-so-and
            raise NemoRLError(f"cannot move {source} to {target}: {target} is a mount point; the staged files are "
                              "kept",
                              f"{command('umount {target}', target=target)}, then run `nemo-rl deps recover`") from exc
        if exc.errno != errno.EXDEV:  # guard: never-a-landing-across-filesystems-is
            raise
        raise NemoRLError(f"cannot move {source} to {target}: they are on different filesystems (a mount inside the "
                          "project); the staged files are kept", f"make {target.parent} a plain directory of the "
                          "project again, then run `nemo-rl deps recover`") from exc


def finish(project: Path, staging: Path) -> list[str]:
    """Complete a landing whose journal exists; idempotent. The paths it moved."""
    record = read_journal(staging)
    for name in record.moves:
        if os.path.lexists(staging / name):  # guard: never-recover-checks-what-it-moves
            _check_staged(staging, name)
    _require_unchanged(project, staging, record)  # guard: recover-no-landing-over-an-edit-made
    moved = []
    for name in record.moves:
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
    interrupt.completed(f"{', '.join(record.moves)} landed in {project}")  # guard: interrupt-a-landing-is-recorded-as
    shutil.rmtree(staging, ignore_errors=True)
    remove_empty(project / STAGING_ROOT)
    return moved


def leftovers(project: Path, *, locked: bool = False) -> list[Leftover]:
    """The staging copies of commands no longer running; none while another command holds the lock."""
    root = state_root(project)
    stagings = sorted(root.glob("staging-*")) if root.is_dir() else []
    if not stagings or (not locked and locks.held(project)):  # guard: trust-leftovers-only-while-no-command
        return []
    # a dangling link named like the journal is an unreadable journal, never "killed before landing"
    return [Leftover(path, os.path.lexists(path / JOURNAL)) for path in stagings]  # guard: journal-a-dangling-link-is-a-journal
