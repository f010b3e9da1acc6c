"""The landing journal: which staged paths a landing moves and what each held when staged, written before the
first rename. `finish` completes a landing from it (a bump, or `nemo-rl deps recover` after the process died
between the first and the last rename); `cut_short` finds the landings left unfinished."""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from nemo_rl import interrupt, locks, values
from nemo_rl.errors import NemoRLError
from nemo_rl.project import lockfile
from nemo_rl.project.state_dir import STAGING_ROOT, remove_empty, state_root

JOURNAL = "LANDING.json"
LANDABLE_FILES = ("pyproject.toml", "uv.lock")


def digest(path: Path) -> str | None:
    """The content of a file or a directory tree (each path and its bytes), as one hash; None when absent."""
    import hashlib

    if not path.exists() and not path.is_symlink():
        return None
    digest = hashlib.sha256()
    paths = sorted(p for p in path.rglob("*") if not p.is_dir()) if path.is_dir() else [path]  # guard: landing-a-directory-s-files-digested
    for item in paths:
        digest.update(str(item.relative_to(path)).encode() + b"\0")
        digest.update(os.readlink(item).encode() if item.is_symlink() else lockfile.read_bytes(item))
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
    fix = (f"nothing more was moved, but the landing may have moved some files before it was cut short: `git "  # guard: journal-an-unreadable-journal-says-files
           f"status` shows which of pyproject.toml, uv.lock and patches/ changed (`git checkout -- <file>` restores "
           f"one), then delete {staging}")
    try:
        journal = values.state_json(path, fix, "the landing journal")
        if not isinstance(journal, dict):
            raise TypeError("not a JSON object")
        moves, before = journal["moves"], journal.get("before")
    except (OSError, TypeError, KeyError) as exc:
        raise NemoRLError(f"cannot read the landing journal {path}: {exc}", fix) from exc
    if (not isinstance(moves, list) or len(moves) != len(set(map(str, moves))) or len(moves) > 8  # guard: trust-journal-names-landable-paths-only
            or not all(_landable(name) for name in moves)):  # a landing moves each of a handful of paths once
        raise NemoRLError(f"{path} names paths a landing never moves: {moves!r:.200}", fix)
    for name in moves:
        values.inside(project_of(staging), name, str(path))
    if before is not None and (not isinstance(before, dict) or set(before) != set(moves) or not all(  # guard: fast-a-journal-s-digests-one-per-move
            d is None or isinstance(d, str) and re.fullmatch(r"[0-9a-f]{64}", d) for d in before.values())):
        raise NemoRLError(f"{path} records digests that are not one per moved path: {before!r:.200}", fix)
    return moves, before


def _require_unchanged(project: Path, staging: Path, moves: list[str], before: dict[str, str | None] | None) -> None:
    """Refuse to move a path that changed in the project since it was staged (an editor, `uv add`, a `git checkout`
    in another terminal): landing over it would lose that change."""
    left = [name for name in moves if os.path.lexists(staging / name)]

    def unchanged(name: str) -> bool:
        held = digest(project / name)
        if before is None or held == before[name]:
            return before is not None  # guard: recover-a-journal-without-digests-lands
        old = staging / f".old-{Path(name).name}"  # a directory swap cut short: the project's copy is set aside
        return held is None and old.is_dir() and digest(old) == before[name]  # guard: recover-a-directory-swap-cut-short-is-no

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
class Leftover:
    """A staging copy no live command holds: with a landing journal (cut short while landing: `deps recover`
    finishes it), or without one (killed before landing: the project is unchanged, and the copy is garbage)."""

    staging: Path
    has_journal: bool


@dataclass(frozen=True)
class CutShort:
    """A landing whose journal was written and whose process died: what it moves, which of them had moved."""

    staging: Path
    moves: tuple[str, ...]
    moved: tuple[str, ...]
    unreadable: str | None  # the refusal, when the journal cannot be read (then moves are unknown)

    def touches(self, records: str) -> bool:
        """Whether this landing changes the fork whose records are `records` (patches/<dist>): it moves them (a bump
        or `deps patches` of it always does), or it names no records or cannot be read, so any fork may be in it."""
        records_moved = [name for name in self.moves if name.startswith("patches/")]
        return self.unreadable is not None or not records_moved or records in records_moved  # guard: fast-a-landing-cut-short-is-only-its


def cut_short(project: Path, *, locked: bool = False) -> list[CutShort]:
    """The landings left cut short in `project` (see leftovers()); never raises on what a journal holds."""
    found = []
    for left in leftovers(project, locked=locked):
        if not left.has_journal:
            continue
        staging = left.staging
        try:
            moves = read_journal(staging)
        except NemoRLError as exc:
            found.append(CutShort(staging, (), (), f"{exc.what}: {exc.remedy}"))
            continue
        moved = tuple(name for name in moves if not os.path.lexists(staging / name))
        found.append(CutShort(staging, tuple(moves), moved, None))
    return found


def refuse_cut_short(project: Path, *, locked: bool) -> None:
    """A command that reads the pins refuses over a landing cut short: it would read a mix of old and new files
    and land its own over them, after which `deps recover` refuses the newer files."""
    for cut in cut_short(project, locked=locked):
        if cut.unreadable is not None:  # guard: landing-an-unreadable-cut-short-journal; recover cannot finish it either: say what it says
            raise NemoRLError(f"a landing in {project} was cut short and its journal cannot be read: "
                              f"{cut.unreadable}", "follow that, then run this command again")
        raise NemoRLError(f"a landing in {project} was cut short ({cut.staging} is left; moved: "
                          f"{', '.join(cut.moved) or 'nothing'}): the project may mix old and new files",
                          "run `nemo-rl deps recover` (it finishes that landing), then run this command again")


def project_of(staging: Path) -> Path:
    return staging.parent.parent  # <project>/.nemo-rl/staging-*


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
    """os.replace, refused across filesystems or onto a mount point (a mount made since the command staged: staging
    checks both first, see landing.require_renames): a copy there could be cut short half-written, so the staged
    copy stays whole for `deps recover` once the mount is gone."""
    try:
        os.replace(source, target)
    except OSError as exc:
        if exc.errno == errno.EBUSY:  # guard: a-landing-onto-a-mount-point-says-so-and; a bind mount on the target (the landing's own check refuses it up front)
            raise NemoRLError(f"cannot move {source} to {target}: {target} is a mount point (a bind mount, as `docker "
                              "run -v` makes one); the staged files are kept", f"`umount {target}` (or run where it "
                              "is not mounted), then run `nemo-rl deps recover`") from exc
        if exc.errno != errno.EXDEV:  # guard: never-a-landing-across-filesystems-is
            raise
        raise NemoRLError(f"cannot move {source} to {target}: they are on different filesystems (a mount inside the "
                          "project); the staged files are kept", f"make {target.parent} a plain directory of the "
                          "project on its filesystem again, then run `nemo-rl deps recover`") from exc


def finish(project: Path, staging: Path) -> list[str]:
    """Complete a landing whose journal exists; idempotent, so a landing cut short can be run again. Returns the
    paths it moved (not those moved before it was cut short)."""
    moves, before = _read_journal(staging)
    for name in moves:
        if os.path.lexists(staging / name):  # guard: never-recover-checks-what-it-moves
            _check_staged(staging, name)
    _require_unchanged(project, staging, moves, before)  # guard: recover-no-landing-over-an-edit-made
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
    interrupt.completed(f"{', '.join(moves)} landed in {project}")  # guard: interrupt-a-landing-is-recorded-as
    shutil.rmtree(staging, ignore_errors=True)
    remove_empty(project / STAGING_ROOT)
    return moved


def leftovers(project: Path, *, locked: bool = False) -> list[Leftover]:
    """The staging copies left by commands that no longer run. A staging dir belongs to a
    live command only while the project lock is held, so with the lock held (`locked`) or free, every one is
    a leftover; while another command holds it, none is."""
    root = state_root(project)
    stagings = sorted(root.glob("staging-*")) if root.is_dir() else []
    if not stagings or (not locked and locks.held(project)):  # guard: trust-leftovers-only-while-no-command
        return []
    # any entry named like the journal is one (a dangling link too): read, and refused when unreadable, never taken
    # for a staging copy killed before it landed, which recover deletes
    return [Leftover(path, os.path.lexists(path / JOURNAL)) for path in stagings]  # guard: journal-a-dangling-link-is-a-journal
