"""`nemo-rl deps patches`: make, check and export the records of each fork's downstream commits."""

from __future__ import annotations

import argparse
from pathlib import Path

from nemo_rl.deps import forkrepo, git, lockfile
from nemo_rl.deps.files import write_atomic
from nemo_rl.deps.patch_records import Index, Record, read_index, read_records, render_index
from nemo_rl.errors import NemoRLError

WHY_PLACEHOLDER = "TODO: say what this fork adds over its upstream and why nemo-rl needs it."


def compute(repo: Path, fork: lockfile.Fork, pinned: str) -> tuple[str, list[Record]]:
    """(base, records) of `pinned` against the fork's upstream branch, both already fetched into `repo`."""
    base = git.merge_base(repo, pinned, forkrepo.UPSTREAM_REF.format(branch=fork.upstream_branch))
    records = []
    for number, sha in enumerate(git.rev_list(repo, f"{base}..{pinned}"), start=1):
        fields = git.commit_fields(repo, sha)
        records.append(Record(number, fields["commit"], fields["author"], fields["date"], fields["subject"],
                              git.patch_id(repo, sha), git.diffstat(repo, sha)))
    return base, records


def write(project: Path, fork: lockfile.Fork, pinned: str, base: str, records: list[Record]) -> Path:
    """Write patches/<dist>/ for `pinned`, keeping our why-note and per-record notes, dropping stale records."""
    directory = project / "patches" / fork.distribution
    old_index = read_index(directory)
    old_records = read_records(directory) if directory.exists() else {}
    old_notes_by_patch_id = {r.patch_id: r.note for r in old_records.values() if r.note}
    for record in records:
        # A rebased commit keeps its patch-id, so its note follows it even though its SHA changed.
        record.note = (old_records[record.commit].note if record.commit in old_records
                       else old_notes_by_patch_id.get(record.patch_id, ""))
    index = Index(fork.distribution, fork.url, fork.branch, pinned, fork.upstream_url, fork.upstream_branch, base,
                  old_index.why if old_index and old_index.why.strip() else WHY_PLACEHOLDER,
                  [{"number": r.number, "commit": r.commit, "subject": r.subject, "patch-id": r.patch_id,
                    "record": r.filename} for r in records])
    keep = {r.filename for r in records}
    for stale in directory.glob("[0-9][0-9][0-9][0-9]-*.patch") if directory.exists() else ():
        if stale.name not in keep:
            stale.unlink()
    for record in records:
        write_atomic(directory / record.filename, record.render())
    write_atomic(directory / "index.toml", render_index(index))
    return directory


def check_offline(project: Path, fork: lockfile.Fork, locked: dict, require_why: bool = True) -> list[str]:
    """Problems with patches/<dist>/ that need no network: pins agree, index complete, why-note written."""
    directory = project / "patches" / fork.distribution
    index = read_index(directory)
    if index is None:
        return [f"{directory}/index.toml is missing: run `nemo-rl deps patches {fork.distribution}`"]
    problems = []
    package = locked.get(fork.distribution)
    locked_commit = package.commit if package else None
    if index.pinned != fork.rev:
        problems.append(f"index pins {index.pinned[:12]} but pyproject.toml pins {fork.rev[:12]}")
    if locked_commit != fork.rev:
        problems.append(f"uv.lock has {str(locked_commit)[:12]} but pyproject.toml pins {fork.rev[:12]}")
    if fork.base and index.base != fork.base:
        problems.append(f"index base {index.base[:12]} differs from the fork table's base {fork.base[:12]}")
    if require_why and (not index.why.strip() or index.why.strip() == WHY_PLACEHOLDER):
        problems.append("the index has no why-note: say what the fork adds and why nemo-rl needs it")
    records = read_records(directory)
    listed = [entry.get("commit") for entry in index.commits]
    for entry in index.commits:
        path = directory / str(entry.get("record"))
        if not path.exists():
            problems.append(f"record {entry.get('record')} listed in the index is missing")
        elif entry.get("commit") not in records or records[entry["commit"]].patch_id != entry.get("patch-id"):
            problems.append(f"record {entry.get('record')} does not match its index entry")
    for sha, record in records.items():
        if sha not in listed:
            problems.append(f"record for {sha[:12]} ({record.subject}) is not in the index")
    return problems


def check_online(project: Path, fork: lockfile.Fork) -> list[str]:
    repo = forkrepo.repo_for(fork)
    forkrepo.fetch_commit(repo, fork, fork.rev)
    base, fresh = compute(repo, fork, fork.rev)
    index = read_index(project / "patches" / fork.distribution)
    recorded = {entry["commit"]: entry for entry in (index.commits if index else [])}
    problems = []
    if index and index.base != base:
        problems.append(f"upstream base moved: recorded {index.base[:12]}, now {base[:12]}")
    fresh_commits = {r.commit: r for r in fresh}
    recorded_by_patch_id = {entry["patch-id"]: entry for entry in recorded.values()}
    for record in fresh:
        entry = recorded.get(record.commit)
        if entry is None:
            what = "rewritten (same patch-id, new SHA)" if record.patch_id in recorded_by_patch_id else "added"
            problems.append(f"downstream commit {what}: {record.commit[:12]} {record.subject}")
        elif entry["patch-id"] != record.patch_id:
            problems.append(f"patch-id changed: {record.commit[:12]} {record.subject}")
    fresh_patch_ids = {r.patch_id for r in fresh}
    for sha, entry in recorded.items():
        if sha not in fresh_commits and entry["patch-id"] not in fresh_patch_ids:
            problems.append(f"recorded commit no longer in the fork: {sha[:12]} {entry['subject']}")
    if [r.commit for r in fresh] != [e["commit"] for e in (index.commits if index else [])] and not problems:
        problems.append("downstream commits are recorded in another order")
    return problems


def _export(project: Path, distribution: str, directory: Path) -> int:
    fork = lockfile.fork(project, distribution)
    repo = forkrepo.repo_for(fork)
    forkrepo.fetch_commit(repo, fork, fork.rev)
    base = git.merge_base(repo, fork.rev, forkrepo.UPSTREAM_REF.format(branch=fork.upstream_branch))
    directory.mkdir(parents=True, exist_ok=True)
    files = git.format_patch(repo, f"{base}..{fork.rev}", directory.resolve())
    print(f"wrote {len(files)} patch(es) to {directory}; apply onto {base} with `git am {directory}/*.patch`")
    return 0


def run(args: argparse.Namespace) -> int:
    project = lockfile.find_project(args.project)
    words = list(args.words)
    if words and words[0] == "export":
        if len(words) != 3:
            raise NemoRLError("`patches export` needs DIST and DIR", "run `nemo-rl deps patches export DIST DIR`")
        return _export(project, words[1], Path(words[2]))
    if len(words) > 1:
        raise NemoRLError(f"unexpected arguments {' '.join(words[1:])!r}", "see `nemo-rl deps patches --help`")
    if args.offline and not args.check:
        raise NemoRLError("--offline only applies to --check", "add --check, or drop --offline")
    forks = [lockfile.fork(project, words[0])] if words else lockfile.forks(project)
    if not args.check:
        for fork in forks:
            repo = forkrepo.repo_for(fork)
            forkrepo.fetch_commit(repo, fork, fork.rev)
            base, records = compute(repo, fork, fork.rev)
            directory = write(project, fork, fork.rev, base, records)
            print(f"{fork.distribution}: {len(records)} downstream commit(s) over {base[:12]} -> {directory}")
        return 0
    locked = lockfile.locked_packages(project)
    failed = False
    for fork in forks:
        problems = check_offline(project, fork, locked)
        if not args.offline:
            problems += check_online(project, fork)
        failed |= bool(problems)
        print(f"{fork.distribution}: {'ok' if not problems else 'DRIFT'}")
        for problem in problems:
            print(f"  - {problem}")
    if failed:
        print("fix: regenerate with `nemo-rl deps patches DIST` (and review the why-note), or re-pin the fork")
    return 1 if failed else 0


