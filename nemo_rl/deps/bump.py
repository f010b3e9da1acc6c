"""`nemo-rl deps bump DIST (--rev SHA | --branch NAME) [--dry-run]`: move a fork pin in one safe step."""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path

from nemo_rl.deps import forkrepo, git, lockfile, patches, uv
from nemo_rl.deps.files import Transaction, write_atomic
from nemo_rl.deps.patch_records import read_index
from nemo_rl.errors import NemoRLError


def write_pin(project: Path, distribution: str, rev: str, branch: str | None, base: str) -> None:
    """Set the source's rev and the fork table's base (and branch, when given); comments and layout stay."""
    import tomlkit  # noqa: PLC0415 - only bump writes TOML

    path = project / "pyproject.toml"
    doc = tomlkit.parse(path.read_text())
    doc["tool"]["uv"]["sources"][distribution]["rev"] = rev
    table = doc["tool"]["nemo-rl"]["forks"][distribution]
    if branch:
        table["branch"] = branch
    if table.get("base") != base:
        table["base"] = base
    write_atomic(path, tomlkit.dumps(doc))


def check_declared_metadata(project: Path, repo: Path, distribution: str, rev: str) -> str | None:
    """Refuse a bump that would lock a version the fork no longer has; a reminder when that cannot be known."""
    declared = lockfile.declared_metadata(project, distribution)
    if declared is None:
        return None
    text = git.show_file(repo, rev, "pyproject.toml")
    try:
        project_table = tomllib.loads(text).get("project", {}) if text else {}
    except tomllib.TOMLDecodeError:
        project_table = {}
    fork_version = None if "version" in project_table.get("dynamic", []) else project_table.get("version")
    if fork_version and fork_version != declared.get("version"):
        raise NemoRLError(
            f"{distribution} at {rev[:12]} declares version {fork_version}, but [[tool.uv.dependency-metadata]] "
            f"in pyproject.toml says {declared.get('version')}: uv would lock metadata the fork no longer has",
            "update that entry's version (and requires-dist) to the fork's, then run the bump again",
        )
    if fork_version is None:
        return (f"{distribution}'s version is not static at {rev[:12]}; [[tool.uv.dependency-metadata]] declares "
                f"{declared.get('version')}: check that version and requires-dist against the fork before committing")
    return None


def lock_versions(packages: dict[str, lockfile.LockedPackage]) -> dict[str, str]:
    return {name: (p.commit[:12] if p.commit else str(p.version)) for name, p in packages.items()}


def lock_changes(old: dict[str, str], new: dict[str, str]) -> list[str]:
    common = sorted(old.keys() & new.keys())
    changes = [f"{name}: {old[name]} -> {new[name]}" for name in common if old[name] != new[name]]
    changes += [f"{name}: added ({new[name]})" for name in sorted(new.keys() - old.keys())]
    changes += [f"{name}: removed (was {old[name]})" for name in sorted(old.keys() - new.keys())]
    return changes


def report(fork: lockfile.Fork, new_rev: str, old_index, base: str, records, changes: list[str], dry_run: bool) -> str:
    old_commits = {e["patch-id"]: e for e in (old_index.commits if old_index else [])}
    new_commits = {r.patch_id: r for r in records}
    added = [r for pid, r in new_commits.items() if pid not in old_commits]
    removed = [e for pid, e in old_commits.items() if pid not in new_commits]
    old_base = old_index.base if old_index else fork.base
    moved = f"moved {str(old_base)[:12]} -> {base[:12]}" if old_base != base else f"unchanged {base[:12]}"
    lines = [
        f"bump {fork.distribution}{' (dry run: nothing written)' if dry_run else ''}",
        f"  commit    {fork.rev} -> {new_rev}",
        f"  upstream  base {moved}",
        f"  downstream commits: {len(records)} ({len(added)} added, {len(removed)} removed)",
    ]
    lines += [f"    + {r.commit[:12]} {r.subject}" for r in added]
    lines += [f"    - {e['commit'][:12]} {e['subject']}" for e in removed]
    lines.append(f"  uv.lock: {len(changes)} change(s)" if changes else "  uv.lock: no other change")
    lines += [f"    {change}" for change in changes]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    project = lockfile.find_project(args.project)
    fork = lockfile.fork(project, args.distribution)
    new_rev = forkrepo.resolve_branch(fork, args.branch) if args.branch else git.require_full_sha(args.rev)
    locked_before = lockfile.locked_packages(project)
    locked = locked_before.get(fork.distribution)
    if new_rev == fork.rev and locked and locked.commit == new_rev and (args.branch or fork.branch) == fork.branch:
        print(f"{fork.distribution} is already pinned and locked at {new_rev}; nothing to do")
        return 0
    repo = forkrepo.repo_for(fork)
    forkrepo.fetch_commit(repo, fork, new_rev)
    forkrepo.progress("computing the downstream commits over upstream")
    base, records = patches.compute(repo, fork, new_rev)
    metadata_note = check_declared_metadata(project, repo, fork.distribution, new_rev)
    patch_dir = project / "patches" / fork.distribution
    old_index = read_index(patch_dir)
    old_lock = lock_versions(locked_before)
    with Transaction([project / "pyproject.toml", project / "uv.lock"], [patch_dir]) as transaction:
        write_pin(project, fork.distribution, new_rev, args.branch, base)
        forkrepo.progress(f"uv lock --upgrade-package {fork.distribution}")
        uv.lock(project, upgrade_package=fork.distribution)
        forkrepo.progress(f"writing patches/{fork.distribution}/")
        new_fork = lockfile.fork(project, fork.distribution)
        patches.write(project, new_fork, new_rev, base, records)
        # The why-note may still be a placeholder for a new fork: the report asks the maintainer to write it.
        locked_after = lockfile.locked_packages(project)
        problems = patches.check_offline(project, new_fork, locked_after, require_why=False)
        if problems:
            raise NemoRLError("the bumped records do not validate: " + "; ".join(problems),
                              "report this as a bug in nemo-rl; nothing was changed")
        changes = lock_changes(old_lock, lock_versions(locked_after))
        changes = [c for c in changes if not c.startswith(f"{fork.distribution}:")]  # shown as the commit line
        if args.dry_run:
            transaction.rollback()
    print(report(fork, new_rev, old_index, base, records, changes, args.dry_run))
    if metadata_note:
        print(f"  metadata: {metadata_note}")
    if not args.dry_run:
        print(f"next: review patches/{fork.distribution}/index.toml (why-note), then commit pyproject.toml, "
              f"uv.lock and patches/{fork.distribution}/ together")
    return 0
