"""`nemo-rl deps bump DIST (--rev SHA | --branch NAME) [--dry-run]`: move a fork pin in one safe step.

Everything is prepared in a private staging copy (pyproject.toml, `uv lock`, patches/DIST) and lands by
renames at the very end, so no signal, SIGKILL included, leaves the project half-bumped.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from nemo_rl import git, uv, values
from nemo_rl.errors import NemoRLError, UsageError
from nemo_rl.forks import bump_steps, declared, fork_cache, fork_metadata, offline_lock, records
from nemo_rl.forks.bump_steps import commit_changes
from nemo_rl.progress import progress
from nemo_rl.project import journal, landing, lockfile, state_dir, uv_inputs

LANDED = ["pyproject.toml", "uv.lock"]


OFFLINE_FIRST = True  # the benchmark turns it off to show the bump with uv's network round trips


class StagedLock:
    """`uv lock --upgrade-package DIST` in the staging copy, started as a child once the staged pyproject.toml is
    final (the pin, and the entry derived from the fork's metadata at the new commit) and collected by `result()`
    after the fork's history is read; leaving its `with` block by an exception ends it (and the build it runs).

    With a declared [[tool.uv.dependency-metadata]] entry, uv first runs offline (its cache, no index requests: a
    fraction of a second instead of seconds); its lock is kept exactly when it moves the fork and nothing else
    (offline_lock: every other package the committed one), and anything else (a package missing from the
    cache, one added or moved) is thrown away, with its reason, and uv runs online from the committed lock.
    Without an entry uv builds the fork's metadata itself: online at once."""

    def __init__(self, staged: Path, before: bump_steps.Before, new_rev: str,
                 changed: bump_steps.EntryChange | None) -> None:
        self.staged, self.fork, self.new_rev, self.changed = staged, before.fork, new_rev, changed
        self.committed = before.lock_text
        self.offline = OFFLINE_FIRST and self.committed is not None and before.entry is not None
        # "offline", or "online: <why>" once an offline run was thrown away
        self.mode = "online"
        self.running = uv.lock_started(staged, upgrade_package=self.fork.distribution, offline=self.offline)

    def advance(self) -> None:
        """Without waiting: once the offline run has ended and its lock is thrown away, start the online one now,
        so that it too runs while the fork's history is read."""
        if self.offline and self.running.done():
            self._settle_offline()

    def _settle_offline(self) -> None:
        assert self.committed is not None
        self.offline = False
        try:
            self.running.wait()
            why = offline_lock.rejected(self.committed, (self.staged / "uv.lock").read_text(),
                                        self.fork.distribution, self.fork.rev, self.new_rev)
            if why is None:
                self.mode = "offline"
                return
        except NemoRLError as exc:
            why = f"uv failed offline: {_last_line(exc.what)[:200]}"
        self.mode = f"online: the offline lock was thrown away: {why}"
        state_dir.write_atomic(self.staged / "uv.lock", self.committed)  # online starts from the committed lock
        self.running = uv.lock_started(self.staged, upgrade_package=self.fork.distribution)

    def result(self) -> str:
        """How it locked: "offline", "online", or "online: <why not offline>"."""
        if self.offline:
            self._settle_offline()
        if self.mode != "offline":
            try:
                self.running.wait()
            except NemoRLError as exc:
                if self.changed is None:
                    raise
                raise bump_steps.lock_refused(self.fork, self.changed, exc) from exc
        return self.mode

    def __enter__(self) -> StagedLock:
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if exc is not None:
            self.running.end()


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip() and line.strip() != "(nothing)"]
    return lines[-1] if lines else "no message"


def lock_versions(packages: dict[str, lockfile.LockedPackage]) -> dict[str, str]:
    return {name: (p.commit or str(p.version)) for name, p in packages.items()}


def lock_changes(old: dict[str, str], new: dict[str, str]) -> list[str]:
    common = sorted(old.keys() & new.keys())
    changes = [f"{name}: {old[name]} -> {new[name]}" for name in common if old[name] != new[name]]
    changes += [f"{name}: added ({new[name]})" for name in sorted(new.keys() - old.keys())]
    changes += [f"{name}: removed (was {old[name]})" for name in sorted(old.keys() - new.keys())]
    return changes


def report(fork: lockfile.Fork, new_rev: str, old_index, base: str, recs, changes: list[str], dry_run: bool,
           lock_mode: str) -> str:
    added, removed, shared = commit_changes(old_index.commits if old_index else [], recs)
    old_base = old_index.base if old_index else fork.base
    moved = f"moved {str(old_base)[:12]} -> {base[:12]}" if old_base != base else f"unchanged {base[:12]}"
    lines = [
        f"bump {fork.distribution}{' (dry run: nothing written)' if dry_run else ''}",
        f"  commit    {fork.rev} -> {new_rev}",
        f"  upstream  base {moved}",
        f"  downstream commits: {len(recs)} ({len(added)} added, {len(removed)} removed)",
    ]
    lines += [f"    + {r.commit[:12]} {r.subject}" for r in added]
    lines += [f"    - {e['commit'][:12]} {e['subject']}" for e in removed]
    lines += [f"    patch-id {pid[:12]} is shared by {len(shas)} commits: {', '.join(s[:12] for s in shas)} (the same "
              "change, carried twice)" for pid, shas in shared.items()]
    how = (" (locked offline: every other package as committed)" if lock_mode == "offline" else
           f" (locked online: {lock_mode.removeprefix('online: ')})" if lock_mode.startswith("online: ") else "")
    lines.append(f"  uv.lock: {len(changes)} change(s){how}" if changes else f"  uv.lock: no other change{how}")
    lines += [f"    {change}" for change in changes]
    return "\n".join(lines)


def requirement_drift(before: bump_steps.Before, repo: Path, new_rev: str, new: declared.Declares | None
                      ) -> list[str]:
    """The bump report's requirement lines: what the fork itself declares, old commit against new. With a derived
    entry, as [declares] records it (`new`: at the new commit; the old side is index.toml's record of the pin when
    it is one, or else built from the old commit); without one, the fork's own metadata at both commits, built. A
    fork whose history was rewritten may have lost the old commit: the bump goes on without it, and the drift says
    it could not compare."""
    fork = before.fork
    old, built = before.recorded_at_pin(), []
    try:
        if old is None or new is None:
            progress("reading the fork's own metadata at the old commit (its build backend)")
            fork_cache.fetched(fork, fork.rev)  # the fork's history may have been rewritten since
            built = fork_metadata.read_all(repo, [fork.rev] if new else [fork.rev, new_rev])
        if new is None:
            old_lines, new_lines = (tuple(m.requires.values()) for m in built)
        else:  # both as [declares] records them
            old_lines = (old or fork_metadata.declares(built[0], fork.rev, fork.distribution, before.dropped)
                         ).requires_dist
            new_lines = new.requires_dist
    except NemoRLError as problem:
        return [f"  requirements: not compared: {problem.what.splitlines()[0]}",
                f"    ({problem.remedy.splitlines()[0] if problem.remedy else 'see above'}); check them by "
                f"hand, then run `nemo-rl deps verify {fork.distribution}`"]
    # a derived entry follows the fork by construction, and without one uv locks the fork's own metadata: nothing
    # the fork adds is left uncovered
    return fork_metadata.drift(old_lines, new_lines, None).lines(fork.distribution)


def validate(staged: Path, fork: lockfile.Fork, new_rev: str) -> dict:
    """The staged state must be exactly what we meant before anything lands; returns its locked packages."""
    locked = lockfile.locked_packages(staged)
    problems = []
    if fork.rev != new_rev:
        problems.append(f"pyproject.toml pins {fork.rev}, not {new_rev}")
    problems += [str(d) for d in records.check_offline(staged, fork, locked, require_why=False)]
    if problems:
        raise NemoRLError("the bumped files do not validate: " + "; ".join(problems),
                          "report this as a bug in nemo-rl; nothing was changed")
    return locked


def run(project: Path, args: argparse.Namespace) -> int:
    if args.branch is not None:
        try:
            values.branch_name(args.branch, "--branch")
        except NemoRLError as exc:
            raise UsageError(exc.what, exc.remedy) from exc
    if args.dry_run:  # writes nothing, so it needs no lock (and works in a read-only checkout)
        return bump(project, args)
    # Taken before anything is read: a second bump waits, then starts from what the first one landed.
    with state_dir.project_lock(project, wait=not args.no_wait):
        return bump(project, args)


def bump(project: Path, args: argparse.Namespace) -> int:
    journal.refuse_cut_short(project, locked=not args.dry_run)  # the pins read below may be half moved
    patch_dir = records.records_dir(project, args.distribution)
    before = bump_steps.read_before(project, args.distribution, patch_dir)
    fork = before.fork
    new_rev = fork_cache.resolve_branch(fork, args.branch) if args.branch else git.require_full_sha(args.rev)
    locked = before.locked.get(fork.distribution)
    if new_rev == fork.rev and locked and locked.commit == new_rev and (args.branch or fork.branch) == fork.branch:
        print(f"{fork.distribution} is already pinned and locked at {new_rev}; nothing to do")
        return 0
    if not args.dry_run:
        landing.require_writable([project, *(project / name for name in LANDED), patch_dir.parent, patch_dir])
    uv_inputs.require_stageable(project, "deps bump")
    relative_patches = records.relative_dir(fork.distribution)
    with landing.Staging(project, LANDED, [relative_patches], uv.SETTINGS_FILES, inside=not args.dry_run) as staging:
        # a --rev must be on the branch pyproject.toml records, or the record would name the wrong branch
        repo = fork_cache.fetched(fork, new_rev, on_branch=not args.branch)
        fork_metadata.require_builds(git.show_file(repo, new_rev, "pyproject.toml"), fork.distribution,
                                     f"the fork at {new_rev[:12]}")
        progress("computing the downstream commits over upstream")
        base, shas, blobs = records.downstream_started(repo, fork, new_rev)
        # Each step waits on other processes: the diffs' blobs come while the fork's metadata at the new commit is
        # built, and uv locks the final staged pyproject.toml while the records are computed. Any failure (the
        # commit is not the fork's, its backend fails) ends what is still running.
        with blobs:
            declares = bump_steps.declares_for(before, repo, new_rev)
            entry_lines, changed = bump_steps.write_pyproject(staging.path, before, new_rev, args.branch, base,
                                                              declares)
            progress(f"uv lock --upgrade-package {fork.distribution}")
            with StagedLock(staging.path, before, new_rev, changed) as locking:
                blobs.wait()
                locking.advance()
                recs = records.describe(repo, shas)
                locking.advance()
                drift_lines = requirement_drift(before, repo, new_rev, declares)
                lock_mode = locking.result()
        progress(f"writing {relative_patches}/")
        new_fork = lockfile.fork(staging.path, fork.distribution)
        index, noted = records.build(staging.path / relative_patches, before.index, new_fork, new_rev, base, recs,
                                     declares)
        records.write(staging.path / relative_patches, index, noted)
        staging.keep_mode("uv.lock")
        locked_after = validate(staging.path, new_fork, new_rev)
        changes = lock_changes(lock_versions(before.locked), lock_versions(locked_after))
        changes = [c for c in changes if not c.startswith(f"{fork.distribution}:")]  # shown as the commit
        if not args.dry_run:
            staging.land()
    # commit subjects and requirements come from the fork: shown, never acted on
    print(values.printable(report(fork, new_rev, before.index, base, noted, changes, args.dry_run, lock_mode),
                           lines=True))
    print(values.printable("\n".join(drift_lines + entry_lines), lines=True))
    if not args.dry_run:
        print(f"next: review {relative_patches}/index.toml (why-note), run `nemo-rl deps verify {fork.distribution}`, "
              f"then commit pyproject.toml, uv.lock and {relative_patches}/ together")
    return 0
