"""What each downstream commit of a fork still does against its upstream."""

from __future__ import annotations

import datetime
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from nemo_rl import git
from nemo_rl.errors import NemoRLError
from nemo_rl.forks import fork_cache, fork_metadata, git_history, patch_ids
from nemo_rl.forks.trial_rebase import TrialIndex
from nemo_rl.progress import progress
from nemo_rl.project.lockfile import Fork

COMPILED_SOURCES = (".c", ".cc", ".cpp", ".cxx", ".cu", ".h", ".hpp", ".cuh")


@dataclass(frozen=True)
class CommitReport:
    number: int
    commit: str
    subject: str
    touched: tuple[str, ...]
    shipped: tuple[str, ...] | None
    upstreamed: str
    upstream_commit: str | None
    upstream_evidence: str | None
    applies: bool | None
    conflicts: tuple[str, ...]
    gone_upstream: tuple[str, ...]
    fails_without_earlier: bool = False
    conflicts_without_earlier: tuple[str, ...] = ()
    merge: bool = False


@dataclass(frozen=True)
class ForkReport:
    distribution: str
    pinned: str
    base: str
    base_date: str
    upstream_url: str
    upstream_branch: str
    upstream_head: str
    upstream_head_date: str
    behind_commits: int
    behind_days: int
    upstream_distribution: str | None
    upstream_version: str | None
    upstream_builds_ours: bool | None
    problems: tuple[str, ...]
    commits: tuple[CommitReport, ...]
    identical_to_base: bool | None
    summary: str


def _shipped(touched: list[str], wheel: frozenset[str]) -> list[str]:
    """Touched source files the wheel ships, also below a source root (src/pkg/x)."""
    directories = {f.rsplit("/", 1)[0] for f in wheel if "/" in f}
    shipped = []
    for path in touched:
        parts = path.split("/")
        if path in wheel or "/".join(parts[1:]) in wheel:  # guard: upstream-shipped-from-the-wheel
            shipped.append(path)
        elif path.endswith(COMPILED_SOURCES) and len(parts) > 1 and "/".join(parts[:-1]) in directories:
            shipped.append(path)
    return shipped


def _days(start: str, end: str) -> int:
    return (datetime.datetime.fromisoformat(end) - datetime.datetime.fromisoformat(start)).days


def _upstreamed(repo: Path, downstream: list[str], touched: dict[str, frozenset[str]], base: str, head: str,
                subjects: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str | None, str | None]]:
    """sha -> (yes | probably | no, upstream commit, evidence)."""
    upstream = git_history.paths_by_commit(repo, f"{base}..{head}")
    wanted = {paths for sha, paths in touched.items() if sha in downstream}
    candidates = [sha for sha, paths in upstream.items() if paths in wanted and paths]
    ours = patch_ids.cached(repo, "fork", downstream)
    theirs = patch_ids.cached(repo, "upstream", candidates)
    by_id = {theirs[sha]: sha for sha in reversed(candidates)}
    log = git.git(["log", "--format=%x01%H%x00%an <%ae>%x00%s%x00%B", "--end-of-options", f"{base}..{head}"],
                  repo=repo).stdout
    upstream_subjects: dict[tuple[str, str], str] = {}
    trailers: dict[str, str] = {}
    for entry in log.split("\x01")[1:]:
        sha, author, subject, body = (entry.split("\0") + ["", "", ""])[:4]
        upstream_subjects.setdefault((subject.strip(), author), sha)
        for line in body.splitlines():
            if "cherry picked from commit" in line:
                trailers.setdefault(line.rsplit(" ", 1)[-1].strip(" ()."), sha)
    result: dict[str, tuple[str, str | None, str | None]] = {}
    for sha in downstream:
        if ours[sha] != git_history.ZERO and ours[sha] in by_id:  # guard: upstream-same-patch-id
            result[sha] = ("yes", by_id[ours[sha]], "same patch-id")
        elif sha in trailers:
            result[sha] = ("probably", trailers[sha], "cherry-pick trailer")
        elif subjects[sha] in upstream_subjects:  # guard: upstream-subject-and-author
            result[sha] = ("probably", upstream_subjects[subjects[sha]], "same subject and author")
        else:
            result[sha] = ("no", None, None)
    return result


def _gone(repo: Path, base: str, head: str, paths: set[str]) -> dict[str, str]:
    """path -> "deleted in SHA" or "moved to X in SHA", for paths upstream's head lacks."""
    at_base = git_history.tree_blobs(repo, base, sorted(paths))
    at_head = git_history.tree_blobs(repo, head, sorted(paths))
    missing = {p: blob for p, blob in at_base.items() if p not in at_head}  # guard: upstream-deleted-upstream
    if not missing:
        return {}
    where = {oid: path for _, _, oid, path in reversed(git_history.ls_tree(repo, head))}
    deleted = git.git(["log", "--format=%x01%H", "--name-only", "-z", "--diff-filter=D", "--no-renames",
                       "--end-of-options", f"{base}..{head}", "--", *sorted(missing)], repo=repo).stdout
    by: dict[str, str] = {}
    for chunk in deleted.split("\x01")[1:]:
        sha, _, names = chunk.partition("\n")
        for name in filter(None, names.strip("\n").split("\0")):
            by.setdefault(name.strip("\n"), sha.strip())
    commit = {p: f" in {by[p][:12]}" if p in by else "" for p in missing}  # guard: upstream-the-commit-that-deleted-a-file
    return {p: (f"moved to {where[blob]}" if blob in where else "deleted") + commit[p] for p, blob in missing.items()}


def _or_problem(work):
    try:
        return work(), None
    except NemoRLError as exc:
        return None, exc.what.splitlines()[0]


def report(fork: Fork) -> ForkReport:
    repo = fork_cache.fetched(fork, fork.rev)
    head = git.rev_parse(repo, fork_cache.UPSTREAM_REF.format(branch=fork.upstream_branch))
    base = git.merge_base(repo, fork.rev, head)
    downstream = git.rev_list(repo, f"{base}..{fork.rev}")
    problems = []
    touched = {sha: frozenset(c.path for c in found)
               for sha, found in git_history.changes_many(repo, downstream).items()}
    commits = git_history.commits(repo, downstream)
    progress(f"{fork.distribution}: {len(downstream)} downstream commit(s), upstream "
             f"{git.count(repo, f'{base}..{head}')} commit(s) past the base")
    upstreamed = _upstreamed(repo, downstream, touched, base, head,
                             {sha: (facts.subject.strip(), facts.author) for sha, facts in commits.items()})
    progress(f"{fork.distribution}: building the wheel at the pin and upstream's metadata")
    pinned, wheel_problem = _or_problem(lambda: fork_metadata.files(repo, fork.rev))
    wheel = frozenset(pinned.files) if pinned else None
    # a downstream commit that deletes a shipped module ships its absence
    base_wheel, base_problem = _or_problem(lambda: fork_metadata.shipped_files(repo, base))
    metadata, metadata_problem = _or_problem(lambda: fork_metadata.read(repo, head))
    if base_problem:
        problems.append(f"what ships at the base is unknown: {base_problem}")
    if wheel is not None and base_wheel is not None:
        wheel = wheel | base_wheel  # guard: upstream-shipped-at-the-base-too
    if wheel_problem:
        problems.append(f"what ships is unknown: {wheel_problem}")
    elif missing := pinned.placeholders:
        problems.append(f"the fork's server lacks {len(missing)} blob(s) of the pinned tree "
                        f"({git_history.few(missing)}): the wheel was built with them empty")
    if metadata_problem:
        problems.append(f"upstream's head could not be built: {metadata_problem}")
    upstream_name, upstream_version = (metadata.name, metadata.version) if metadata else (None, None)
    if metadata and (stand_ins := metadata.placeholders):
        problems.append(f"upstream's head was built with {len(stand_ins)} placeholder file(s) for missing blobs")
    gone = _gone(repo, base, head, set().union(*touched.values()) if touched else set())
    # a rebase in order, conflicts resolved; beside it, each conflicting commit left out, for knock-on failures
    with closing(TrialIndex(repo, head)) as trial, closing(TrialIndex(repo, head)) as alone:
        remaining = [sha for sha in downstream if upstreamed[sha][0] != "yes"]
        paths = sorted(set().union(*(touched[sha] for sha in remaining))) if remaining else []
        git.fetch_objects(repo, "upstream", set(git_history.tree_blobs(repo, head, paths).values()))
        conflicts = {sha: trial.apply(sha, resolve=True) for sha in remaining}  # guard: upstream-a-rebase-resolves-each-conflict
        left_out = {sha: alone.apply(sha) for sha in remaining}
    if by_diff := sorted(set(trial.by_diff + alone.by_diff), key=downstream.index):
        problems.append(f"the server lacks blob(s) that git's merge of {len(by_diff)} commit(s) reads "
                        f"({git_history.few([sha[:12] for sha in by_diff])}): a rename there may show as a conflict")
    rows = []
    for number, sha in enumerate(downstream, start=1):
        state, upstream_commit, evidence = upstreamed[sha]
        rows.append(CommitReport(
            number, sha, commits[sha].subject, tuple(sorted(touched[sha])),
            tuple(_shipped(sorted(touched[sha]), wheel)) if wheel is not None else None, state, upstream_commit,
            evidence, None if state == "yes" or sha in trial.merges else not conflicts[sha],
            tuple(conflicts.get(sha, ())),
            tuple(f"{p}: {gone[p]}" for p in sorted(touched[sha]) if p in gone),
            bool(left_out.get(sha)) and not conflicts.get(sha),
            tuple(left_out.get(sha, ())) if left_out.get(sha) and not conflicts.get(sha) else (),
            sha in trial.merges))
    identical = _identical_shipped(repo, base, fork.rev, wheel) if wheel is not None else None
    head_date, base_date = git_history.commit_date(repo, head), git_history.commit_date(repo, base)
    builds_ours = None if upstream_name is None else canonicalize_name(upstream_name) == canonicalize_name(
        fork.distribution)
    return ForkReport(fork.distribution, fork.rev, base, base_date, fork.upstream_url or "", fork.upstream_branch,
                      head, head_date, git.count(repo, f"{base}..{head}"), _days(base_date, head_date),
                      upstream_name, upstream_version, builds_ours, tuple(problems), tuple(rows), identical,
                      summary(rows, head, identical))


def _identical_shipped(repo: Path, base: str, pinned: str, wheel: frozenset[str]) -> bool:
    changed = git.git(["diff", "--name-only", "-z", "--no-renames", "--end-of-options", base, pinned],
                      repo=repo).stdout.split("\0")
    return not _shipped([p for p in changed if p], wheel)  # guard: upstream-identical-shipped-trees


def summary(rows: list[CommitReport], head: str, identical: bool | None) -> str:
    if not rows:
        return f"no downstream commit: pin upstream {head[:12]} instead of the fork"
    if all(r.upstreamed == "yes" for r in rows):
        return f"every downstream commit is upstreamed: pin upstream {head[:12]} instead of the fork"
    if identical:
        return ("no downstream commit touches a shipped file: the distribution at the pin is identical to upstream "
                "at the base (every shipped file has the base's blob)")
    needed = [r for r in rows if r.upstreamed != "yes" and not r.merge]  # guard: upstream-a-merge-commit-is-not-counted
    conflicting = [r for r in needed if r.applies is False]
    probably = [r for r in needed if r.upstreamed == "probably"]
    text = f"{len(needed)} commit(s) still needed, {len(conflicting)} conflict on upstream's head"
    knock_on = [r for r in needed if r.fails_without_earlier]
    if knock_on:
        text += f" ({len(knock_on)} more fail only when an earlier conflicting commit is left out)"
    if probably:
        text += f"; {len(probably)} probably upstreamed (check by hand)"
    unshipped = [r for r in needed if r.shipped == ()]
    if unshipped:
        text += f"; {len(unshipped)} change(s) nothing the distribution ships"
    return text
