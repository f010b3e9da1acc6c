"""`nemo-rl deps bump DIST (--rev SHA | --branch NAME) [--dry-run]`: move a fork pin in one safe step.

Everything is prepared in a private staging copy (pyproject.toml, `uv lock`, patches/DIST) and lands by
renames at the very end, so no signal, SIGKILL included, leaves the project half-bumped.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from nemo_rl import git, uv, values
from nemo_rl.errors import NemoRLError, UsageError
from nemo_rl.forks import bump_steps, fork_cache, fork_metadata, metadata_check, records
from nemo_rl.forks.bump_steps import commit_changes
from nemo_rl.forks.record_files import read_index
from nemo_rl.progress import progress
from nemo_rl.project import landing, lockfile

LANDED = ["pyproject.toml", "uv.lock"]
CONTEXT = [".python-version"]  # read by uv lock in the staging copy, never landed


def write_pin(project: Path, distribution: str, rev: str, branch: str | None, base: str | None) -> None:
    """Set the source's rev and the fork table's base (when known; uv never reads it) and branch (when given);
    comments and layout stay."""
    import tomlkit

    path = project / "pyproject.toml"
    doc = tomlkit.parse(lockfile.read_text(path))
    doc["tool"]["uv"]["sources"][distribution]["rev"] = rev
    table = doc["tool"]["nemo-rl"]["forks"][distribution]
    if branch:
        table["branch"] = branch
    if base is not None and table.get("base") != base:
        table["base"] = base
    landing.write_atomic(path, tomlkit.dumps(doc))



OFFLINE_FIRST = True  # the benchmark turns it off to show the bump with uv's network round trips


class StagedLock:
    """`uv lock --upgrade-package DIST` in the staging copy, started as a child once the staged pyproject.toml is
    final (the pin, and the entry derived from the fork's metadata at the new commit) and collected by `result()`
    after the fork's history is read; leaving its `with` block by an exception ends it (and the build it runs).

    With a declared [[tool.uv.dependency-metadata]] entry that did not change, moving the pin changes no
    requirement, so every locked version still fits and uv keeps them all: the lock can only change by the SHA.
    uv's offline run (its cache, no index requests: a fraction of a second instead of seconds) is kept exactly
    when it gives that; anything else (a package missing from the cache, any other change) is thrown away, with
    its reason, and uv runs online from the committed lock. An entry that changed brings requirements uv must
    resolve against the index: uv runs online at once."""

    def __init__(self, staged: Path, project: Path, fork: lockfile.Fork, new_rev: str,
                 changed: bump_steps.EntryChange | None) -> None:
        self.staged, self.fork, self.new_rev, self.changed = staged, fork, new_rev, changed
        lock_path = project / "uv.lock"
        self.before = lock_path.read_text() if lock_path.exists() else None
        self.offline = (OFFLINE_FIRST and self.before is not None and changed is None
                        and lockfile.declared_metadata(project, fork.distribution) is not None)
        # "offline", or "online: <why>" once an offline run was thrown away or never tried
        self.mode = "online: the fork's own metadata changed the entry uv locks" if changed else "online"
        self.running = uv.lock_started(staged, upgrade_package=fork.distribution, offline=self.offline)

    def advance(self) -> None:
        """Without waiting: once the offline run has ended and its lock is thrown away, start the online one now,
        so that it too runs while the fork's history is read."""
        if self.offline and self.running.done():
            self._settle_offline()

    def _settle_offline(self) -> None:
        assert self.before is not None
        self.offline = False
        try:
            self.running.wait()
            why = offline_lock_rejected(self.before, (self.staged / "uv.lock").read_text(), self.fork.rev,
                                        self.new_rev)
            if why is None:
                self.mode = "offline"
                return
        except NemoRLError as exc:
            why = f"uv failed offline: {_last_line(exc.what)[:200]}"
        self.mode = f"online: the offline lock was thrown away: {why}"
        landing.write_atomic(self.staged / "uv.lock", self.before)  # online starts from the committed lock
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


def offline_lock_rejected(before: str, offline: str, old_rev: str, new_rev: str) -> str | None:
    """Why the offline lock is not the committed one with only the SHA moved (None when it is): its first
    differing line."""
    expected = before.replace(old_rev, new_rev)
    if offline == expected:
        return None
    for number, (want, got) in enumerate(zip(expected.splitlines(), offline.splitlines(), strict=False), start=1):
        if want != got:
            return f"it changed more than the SHA (uv.lock line {number}: {got.strip()[:120]!r})"
    return "it changed more than the SHA (the lock's length differs)"


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
    how = (" (locked offline: only the pin moved, and uv's cache had the rest)" if lock_mode == "offline" else
           f" (locked online: {lock_mode.removeprefix('online: ')})" if lock_mode.startswith("online: ") else "")
    lines.append(f"  uv.lock: {len(changes)} change(s){how}" if changes else f"  uv.lock: no other change{how}")
    lines += [f"    {change}" for change in changes]
    return "\n".join(lines)


def requirement_drift(project: Path, repo: Path, fork: lockfile.Fork, new_rev: str) -> list[str]:
    """The bump report's requirement lines: what the fork itself declares, old commit against new (the new
    commit's metadata is cached already when the entry was derived from it)."""
    progress("reading the fork's own metadata at the old commit (its build backend)")
    try:
        fork_cache.fetched(fork, fork.rev)  # says why when the old commit is gone from the fork (a force-push)
        old, new = fork_metadata.read_all(repo, [fork.rev, new_rev])
    except NemoRLError as exc:
        return [f"  requirements: not compared: {exc.what.splitlines()[0]}",
                f"    ({exc.remedy.splitlines()[0] if exc.remedy else 'see above'}); check them by "
                f"hand, then run `nemo-rl deps verify {fork.distribution}`"]
    # a derived entry follows the fork by construction: nothing it adds is left uncovered
    entry = (None if metadata_check.derives(project, fork.distribution)
             else lockfile.declared_metadata(project, fork.distribution))
    return fork_metadata.drift(old, new, entry).lines(fork.distribution)


def old_commit_fetched(fork: lockfile.Fork) -> bool:
    """Whether the commit pinned now is in the cache; a fork whose history was rewritten may have lost it, and
    the bump goes on without it (the requirement drift then says it could not compare)."""
    try:
        fork_cache.fetched(fork, fork.rev)
        return True
    except NemoRLError:
        return False


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


def check_on_branch(repo: Path, fork: lockfile.Fork, new_rev: str, branch_argument: str | None) -> None:
    """A --rev must be on the branch pyproject.toml records, or the record would name the wrong branch."""
    if branch_argument or not fork.branch:
        return
    head = fork_cache.fetch_branch(repo, fork, fork.branch)
    if not git.is_ancestor(repo, new_rev, head):
        raise NemoRLError(
            f"{new_rev[:12]} is not on {fork.branch}, the branch pyproject.toml records for {fork.distribution}",
            "pin the head of the branch it is on with `--branch NAME` (that records the branch too), or push it "
            f"to {fork.branch} first")


def run(project: Path, args: argparse.Namespace) -> int:
    if args.branch is not None:
        try:
            values.branch_name(args.branch, "--branch")
        except NemoRLError as exc:
            raise UsageError(exc.what, exc.remedy) from exc
    if args.dry_run:  # writes nothing, so it needs no lock (and works in a read-only checkout)
        return bump(project, args)
    # Taken before anything is read: a second bump waits, then starts from what the first one landed.
    with landing.project_lock(project, wait=not args.no_wait):
        return bump(project, args)


def bump(project: Path, args: argparse.Namespace) -> int:
    landing.refuse_cut_short(project, locked=not args.dry_run)  # the pins read below may be half moved
    fork = lockfile.fork(project, args.distribution)
    new_rev = fork_cache.resolve_branch(fork, args.branch) if args.branch else git.require_full_sha(args.rev)
    locked_before = lockfile.locked_packages(project)
    locked = locked_before.get(fork.distribution)
    if new_rev == fork.rev and locked and locked.commit == new_rev and (args.branch or fork.branch) == fork.branch:
        print(f"{fork.distribution} is already pinned and locked at {new_rev}; nothing to do")
        return 0
    patch_dir = records.records_dir(project, fork.distribution)
    if not args.dry_run:
        landing.require_writable([project, *(project / name for name in LANDED), patch_dir.parent, patch_dir])
    relative_patches = records.relative_dir(fork.distribution)
    with landing.Staging(project, LANDED, [relative_patches], CONTEXT, inside=not args.dry_run) as staging:
        repo = fork_cache.fetched(fork, new_rev)
        check_on_branch(repo, fork, new_rev, args.branch)
        fork_table = fork_metadata.project_table(git.show_file(repo, new_rev, "pyproject.toml"))
        fork_metadata.require_builds(fork_table, fork.distribution, f"the fork at {new_rev[:12]}")
        progress("computing the downstream commits over upstream")
        base, shas, blobs = records.downstream_started(repo, fork, new_rev, bump_steps.prefetched_trees(
            project, fork, repo, new_rev, old_commit_fetched(fork)))
        # Each step waits on other processes: the diffs' blobs come while the fork's metadata at the new commit is
        # built, and uv locks the final staged pyproject.toml while the records are computed. Any failure (the
        # commit is not the fork's, its backend fails) ends what is still running.
        with blobs:
            declares = bump_steps.declares_for(project, fork, repo, new_rev)
            write_pin(staging.path, fork.distribution, new_rev, args.branch, base)
            entry_lines, changed = bump_steps.write_entry(staging.path, fork, declares)
            progress(f"uv lock --upgrade-package {fork.distribution}")
            with StagedLock(staging.path, project, fork, new_rev, changed) as locking:
                blobs.wait()
                locking.advance()
                recs = records.describe(repo, shas)
                locking.advance()
                drift_lines = requirement_drift(project, repo, fork, new_rev)
                old_index = read_index(patch_dir)
                lock_mode = locking.result()
        progress(f"writing {relative_patches}/")
        new_fork = lockfile.fork(staging.path, fork.distribution)
        index, noted = records.build(staging.path / relative_patches, new_fork, new_rev, base, recs, declares)
        records.write(staging.path / relative_patches, index, noted)
        staging.keep_mode("uv.lock")
        locked_after = validate(staging.path, new_fork, new_rev)
        changes = lock_changes(lock_versions(locked_before), lock_versions(locked_after))
        changes = [c for c in changes if not c.startswith(f"{fork.distribution}:")]  # shown as the commit
        if not args.dry_run:
            staging.land()
    print(report(fork, new_rev, old_index, base, noted, changes, args.dry_run, lock_mode))
    print("\n".join(drift_lines + entry_lines))
    if not args.dry_run:
        print(f"next: review {relative_patches}/index.toml (why-note), run `nemo-rl deps verify {fork.distribution}`, "
              f"then commit pyproject.toml, uv.lock and {relative_patches}/ together")
    return 0
