"""History questions for the blob-less fork cache, answered with as few round trips as possible.

A blob-less (partial) clone has every commit and tree but fetches a blob the first time something reads it,
one request per object. Patch-ids and trial applications read many blobs, so these functions list what the
answers need from trees alone (which the cache has), fetch those blobs in one request, and only then read
them. Everything here takes commits as validated full SHAs or after `--end-of-options`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from nemo_rl.errors import NemoRLError
from nemo_rl.git import git, git_start
from nemo_rl.process import Result

ZERO = "0" * 40


@dataclass(frozen=True)
class Change:
    """One path a commit changes (against its first parent): blob ids before and after (ZERO when absent)."""

    path: str
    old_blob: str
    new_blob: str
    status: str  # A, M, D, T (renames are a D and an A: no blob content is needed to list them)


def changes(repo: Path, sha: str) -> list[Change]:
    """What `sha` changes against its first parent, from trees only (no blob is fetched)."""
    out = git(["diff-tree", "-r", "-z", "--no-renames", "--root", "-m", "--first-parent", "--no-commit-id",
               "--end-of-options", sha], repo=repo).stdout
    return _parse_raw(out)


def _parse_raw(out: str) -> list[Change]:
    fields = out.split("\0")
    result = []
    for i in range(0, len(fields) - 1, 2):
        meta, path = fields[i], fields[i + 1]
        if not meta.startswith(":"):
            continue
        _, _, old, new, status = meta[1:].split(" ")
        result.append(Change(path, old, new, status[0]))
    return result


def paths_by_commit(repo: Path, revision_range: str) -> dict[str, frozenset[str]]:
    """Every commit of `revision_range` (first-parent diffs) with the set of paths it changes; trees only."""
    out = git(["log", "--format=%x01%H", "--name-only", "-z", "--no-renames", "--first-parent", "-m",
               "--end-of-options", revision_range], repo=repo).stdout
    result: dict[str, frozenset[str]] = {}
    for chunk in out.split("\x01")[1:]:
        sha, _, rest = chunk.partition("\0")
        result[sha.strip()] = frozenset(p.strip("\n") for p in rest.split("\0") if p.strip("\n"))
    return result


def fetch_blobs(repo: Path, remote: str, blobs: set[str]) -> None:
    """Fetch `blobs` from `remote` in one request (what git's own lazy fetch does per object)."""
    wanted = blobs - {ZERO}
    if wanted:
        _fetch_objects(repo, remote, wanted)


_FETCH_OBJECTS = ["-c", "fetch.negotiationAlgorithm=noop", "fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
                  "--recurse-submodules=no", "--filter=blob:none", "--stdin", "--end-of-options"]


def _fetch_objects(repo: Path, remote: str, objects: set[str], check: bool = True) -> Result:
    # noop negotiation: the cache's refs say nothing about which blobs it lacks
    return git([*_FETCH_OBJECTS, remote], repo=repo, input_text="\n".join(sorted(objects)) + "\n", check=check)


def missing_blobs(repo: Path, revs: list[str]) -> set[str]:
    """The objects of these commits' trees that this blob-less cache lacks, listed without fetching any (reading
    one would fetch it: git 2.39 has no GIT_NO_LAZY_FETCH)."""
    if not revs:
        return set()
    out = git(["rev-list", "--objects", "--no-walk", "--missing=print", "--stdin"], repo=repo,
              input_text="\n".join(revs) + "\n").stdout
    return {line[1:].strip() for line in out.splitlines() if line.startswith("?")}


def first_parents(repo: Path, shas: list[str]) -> list[str]:
    if not shas:
        return []
    out = git(["rev-list", "--no-walk=unsorted", "--parents", "--stdin"], repo=repo,
              input_text="\n".join(shas) + "\n").stdout
    return [line.split()[1] for line in out.splitlines() if len(line.split()) > 1]


def changes_many(repo: Path, shas: list[str]) -> dict[str, list[Change]]:
    """`changes` of every commit of `shas`, in one process (trees only)."""
    if not shas:
        return {}
    out = git(["log", "--no-walk=unsorted", "--raw", "--no-abbrev", "-z", "--no-renames", "-m", "--first-parent",
               "--format=%x01%H", "--stdin"], repo=repo, input_text="\n".join(shas) + "\n").stdout
    result: dict[str, list[Change]] = {sha: [] for sha in shas}
    for chunk in out.split("\x01")[1:]:
        sha, _, raw = chunk.partition("\0")
        result[sha.strip()] = _parse_raw(raw.lstrip("\n"))
    return result


def prefetch_diffs(repo: Path, remote: str, shas: list[str], trees: Sequence[str] = ()) -> None:
    """`Prefetch` of these, waited for at once."""
    with Prefetch(repo, remote, shas, trees) as blobs:
        blobs.wait()


class Prefetch:
    """One request, started now and collected by `wait()`, for every blob the diffs of `shas` read (before and
    after each change) that the cache lacks, and for the files of `trees` (commits whose checkout follows) if the
    server has them all; when it refuses some of those, the diffs' blobs alone. Leaving its `with` block by an
    exception ends the fetch."""

    def __init__(self, repo: Path, remote: str, shas: list[str], trees: Sequence[str] = ()) -> None:
        self.repo, self.remote, self.trees = repo, remote, list(trees)
        blobs = {b for found in changes_many(repo, shas).values() for c in found for b in (c.old_blob, c.new_blob)}
        self.wanted = (blobs & missing_blobs(repo, [*shas, *first_parents(repo, shas)])) - {ZERO}
        objects = self.wanted | (missing_blobs(repo, self.trees) - {ZERO})
        self.running = git_start([*_FETCH_OBJECTS, remote], repo=repo,
                                 input_text="\n".join(sorted(objects)) + "\n") if objects else None

    def wait(self) -> None:
        if self.running is None:
            return
        try:
            self.running.wait()
        except NemoRLError:
            if not self.trees:
                raise
            fetch_blobs(self.repo, self.remote, self.wanted)  # a mirror without some large file: the checkout copes
        finally:
            self.running = None

    def __enter__(self) -> Prefetch:
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if exc is not None and self.running is not None:
            self.running.end()


def message(repo: Path, sha: str) -> str:
    return git(["show", "-s", "--format=%B", "--end-of-options", sha], repo=repo).stdout


def commit_date(repo: Path, sha: str) -> str:
    return git(["show", "-s", "--format=%cI", "--end-of-options", sha], repo=repo).stdout.strip()


def fetch_trees(repo: Path, remote: str, revs: list[str]) -> int:
    """Fetch the files of `revs` this blob-less cache lacks, in one request (git's own checkout of a blob-less tree
    asks again and again); the bytes of the largest tree."""
    fetch_blobs(repo, remote, missing_blobs(repo, revs))
    sizes = [git(["ls-tree", "-r", "-l", "-z", "--end-of-options", rev], repo=repo).stdout for rev in revs]
    return max(sum(int(entry.split()[3]) for entry in filter(None, out.split("\0")) if entry.split()[3].isdigit())
               for out in sizes)


def tree_blobs(repo: Path, sha: str, paths: list[str]) -> dict[str, str]:
    """path -> blob id at `sha` for those of `paths` that exist there (trees only)."""
    if not paths:
        return {}
    out = git(["ls-tree", "-r", "-z", "--end-of-options", sha, "--", *paths], repo=repo).stdout
    result = {}
    for entry in filter(None, out.split("\0")):
        meta, _, path = entry.partition("\t")
        kind, blob = meta.split()[1:3]
        if kind == "blob":
            result[path] = blob
    return result


def _log(repo: Path, shas: list[str], options: list[str], separator: str) -> dict[str, str]:
    """One `git log --no-walk` over `shas` (fed on stdin), its output split per commit at `separator` + SHA."""
    if not shas:
        return {}
    out = git(["log", "--no-walk=unsorted", "--first-parent", *options, "--stdin"], repo=repo,
              input_text="\n".join(shas) + "\n").stdout
    result = {}
    for chunk in out.split(separator)[1:]:
        sha, _, rest = chunk.partition("\n")
        result[sha.strip()] = rest
    return result


def commits(repo: Path, shas: list[str]) -> dict[str, tuple[str, str, str]]:
    """sha -> (author "Name <email>", author date, subject), in one process."""
    out = _log(repo, shas, ["--format=%x01%H%n%an <%ae>%x00%aI%x00%s"], "\x01")
    result: dict[str, tuple[str, str, str]] = {}
    for sha, text in out.items():
        author, date, subject = text.rstrip("\n").split("\0", 2)
        result[sha] = (author, date, subject)
    return result


def checkout_allowing_missing(repo: Path, rev: str, dest: Path, remotes: list[str]) -> list[str]:
    """Write the tree of `rev` into `dest` (a worktree without checkout, then the files), fetching its blobs in
    one request per remote; a blob no remote serves (a mirror without large files) becomes an empty placeholder.
    Returns the placeholders' paths. For questions that need the tree's shape, not every byte (a wheel's file
    list), when a plain checkout fails."""
    import re

    git(["worktree", "add", "--quiet", "--detach", "--force", "--no-checkout", str(dest), rev], repo=repo)
    out = git(["ls-tree", "-r", "-z", "--end-of-options", rev], repo=repo).stdout
    blobs = {}
    for entry in filter(None, out.split("\0")):
        meta, _, path = entry.partition("\t")
        mode, kind, oid = meta.split()
        if kind == "blob":
            blobs[path] = oid
    missing: set[str] = set()
    for remote in remotes:
        for _ in range(10):  # each refusal names one object; ask again without it
            wanted = set(blobs.values()) - missing
            result = _fetch_objects(repo, remote, wanted, check=False)
            refused = set(re.findall(r"not our ref ([0-9a-f]{40})", result.stderr))
            if result.returncode == 0 or not refused - missing:
                break
            missing |= refused
        if result.returncode == 0:
            break
    placeholders = sorted(path for path, oid in blobs.items() if oid in missing)
    git(["read-tree", "--end-of-options", rev], repo=dest)  # the worktree's own index, then what exists
    present = [path for path, oid in blobs.items() if oid not in missing]
    if present:
        git(["checkout-index", "--force", "-z", "--stdin"], repo=dest, input_text="\0".join(present) + "\0")
    for path in placeholders:
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"")
    return placeholders
