"""History questions for the blob-less fork cache, in few round trips."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from nemo_rl import git
from nemo_rl.errors import NemoRLError

ZERO = "0" * 40
REFUSALS_MAX = 64


@dataclass(frozen=True)
class Change:
    """A path a commit changes against its first parent; a blob is ZERO when absent."""

    path: str
    old_blob: str
    new_blob: str
    status: str


def changes(repo: Path, sha: str) -> list[Change]:
    """What `sha` changes against its first parent; fetches no blob."""
    out = git.git(["diff-tree", "-r", "-z", "--no-renames", "--root", "-m", "--first-parent", "--no-commit-id",
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
    """Each commit of `revision_range` -> the paths it changes against its first parent."""
    out = git.git(["log", "--format=%x01%H", "--name-only", "-z", "--no-renames", "--first-parent", "-m",
               "--end-of-options", revision_range], repo=repo).stdout
    result: dict[str, frozenset[str]] = {}
    for chunk in out.split("\x01")[1:]:
        sha, _, rest = chunk.partition("\0")
        result[sha.strip()] = frozenset(p.strip("\n") for p in rest.split("\0") if p.strip("\n"))
    return result


def first_parents(repo: Path, shas: list[str]) -> list[str]:
    if not shas:
        return []
    out = git.git(["rev-list", "--no-walk=unsorted", "--parents", "--stdin"], repo=repo,
              input_text="\n".join(shas) + "\n").stdout
    return [line.split()[1] for line in out.splitlines() if len(line.split()) > 1]


def changes_many(repo: Path, shas: list[str]) -> dict[str, list[Change]]:
    """`changes` of each of `shas` (full SHAs), in one process."""
    if not shas:
        return {}
    # --root and --diff-merges: what the user's log.showRoot and log.diffMerges would otherwise decide
    out = git.git(["log", "--no-walk=unsorted", "--raw", "--no-abbrev", "-z", "--no-renames", "--root",
                   "--diff-merges=first-parent", "--first-parent", "--format=%x01%H", "--stdin"],
                  repo=repo, input_text="\n".join(shas) + "\n").stdout
    result: dict[str, list[Change]] = {sha: [] for sha in shas}
    for chunk in out.split("\x01")[1:]:
        sha, _, raw = chunk.partition("\0")
        result[sha.strip()] = _parse_raw(raw.lstrip("\n"))
    return result


def fetch_for_diffs(repo: Path, remote: str, shas: list[str], trees: Sequence[str] = ()) -> None:
    """Fetch the missing blobs of the diffs of `shas` and the files of `trees`, in one request."""
    blobs = {b for found in changes_many(repo, shas).values() for c in found for b in (c.old_blob, c.new_blob)}
    wanted = blobs & git.missing_objects(repo, [*shas, *first_parents(repo, shas)])
    try:
        git.fetch_objects(repo, remote, wanted | git.missing_objects(repo, trees))
    except NemoRLError:
        refused = git.fetch_objects(repo, remote, wanted, refusals=REFUSALS_MAX)
        if refused:  # guard: records-a-diff-blob-no-server-has-stops
            raise NemoRLError(f"{remote} does not serve {len(refused)} blob(s) of the downstream diffs "
                              f"({few(sorted(refused))})", "re-sync the mirror from the fork") from None


def few(items: Sequence[str]) -> str:
    return ", ".join(items[:3]) + (", ..." if len(items) > 3 else "")


def commit_date(repo: Path, sha: str) -> str:
    return git.git(["show", "-s", "--format=%cI", "--end-of-options", sha], repo=repo).stdout.strip()


def ls_tree(repo: Path, sha: str, paths: Sequence[str] = ()) -> list[tuple[str, str, str, str]]:
    """(mode, kind, object, path) of each entry of `sha`'s tree, or of those under `paths`."""
    out = git.git(["ls-tree", "-r", "-z", "--end-of-options", sha, *(["--", *paths] if paths else [])],
                  repo=repo).stdout
    entries = []
    for entry in filter(None, out.split("\0")):
        meta, _, path = entry.partition("\t")
        mode, kind, oid = meta.split()
        entries.append((mode, kind, oid, path))
    return entries


def tree_blobs(repo: Path, sha: str, paths: list[str]) -> dict[str, str]:
    """path -> blob id at `sha`, for those of `paths` present."""
    return {path: oid for _, kind, oid, path in ls_tree(repo, sha, paths) if kind == "blob"} if paths else {}


@dataclass(frozen=True)
class CommitFacts:
    author: str
    date: str
    subject: str


def commits(repo: Path, shas: list[str]) -> dict[str, CommitFacts]:
    """sha -> author, author date and subject."""
    if not shas:
        return {}
    out = git.git(["log", "--no-walk=unsorted", "--first-parent", "--format=%x01%H%n%an <%ae>%x00%aI%x00%s", "--stdin"],
                  repo=repo, input_text="\n".join(shas) + "\n").stdout
    result = {}
    for chunk in out.split("\x01")[1:]:
        sha, _, text = chunk.partition("\n")
        result[sha.strip()] = CommitFacts(*text.rstrip("\n").split("\0", 2))
    return result


@dataclass(frozen=True)
class Tree:
    """A commit's files, their blobs in the cache but `lacking` (no remote serves them)."""

    rev: str
    blobs: Mapping[str, str]
    lacking: frozenset[str]
    size: int
    gitlinks: tuple[str, ...] = ()

    @property
    def placeholders(self) -> list[str]:
        """The paths a checkout writes empty."""
        return sorted(path for path, oid in self.blobs.items() if oid in self.lacking)


def fetched_tree(repo: Path, rev: str, remotes: Sequence[str]) -> Tree:
    """The tree of `rev`, its blobs fetched from each remote in turn."""
    entries = ls_tree(repo, rev)
    blobs = {path: oid for _, kind, oid, path in entries if kind == "blob"}
    gitlinks = [path for _, kind, _, path in entries if kind == "commit"]
    lacking = git.missing_objects(repo, [rev])
    for number, remote in enumerate(remotes):
        if not lacking:
            break
        try:
            lacking = git.fetch_objects(repo, remote, lacking, refusals=REFUSALS_MAX)
        except NemoRLError as exc:
            if number == 0:
                raise
            raise NemoRLError(f"{remotes[0]}'s server lacks {len(lacking)} blob(s) of {rev[:12]}, and {remote} could "  # guard: fork-cache-a-remote-after-the-first-that
                              f"not be asked for them: {exc.what.splitlines()[0]}",
                              f"check the network or the mirror of {remote}") from exc
    present = sorted(set(blobs.values()) - lacking)
    listed = git.git(["cat-file", "--batch-check=%(objectname) %(objectsize)"], repo=repo,
                     input_text="\n".join(present) + "\n").stdout if present else ""
    sizes = dict(line.split() for line in listed.splitlines())
    return Tree(rev, blobs, frozenset(lacking), sum(int(sizes.get(oid, 0)) for oid in blobs.values()),  # guard: fork-cache-a-tree-s-size-counts-every
                tuple(gitlinks))


def check_out(repo: Path, tree: Tree, dest: Path) -> None:
    """Make `dest` a clean worktree of the cache at `tree.rev`."""
    git.git(["worktree", "add", "--quiet", "--detach", "--force", "--no-checkout", str(dest), tree.rev], repo=repo)
    git.git(["read-tree", "--end-of-options", tree.rev], repo=dest,
            remedy="the fork's tree holds a path git will not check out: pick another commit")
    present = [path for path, oid in tree.blobs.items() if oid not in tree.lacking]
    if present:
        git.git(["checkout-index", "--force", "-z", "--stdin"], repo=dest, input_text="\0".join(present) + "\0")
    if tree.placeholders:
        git.git(["update-index", "--skip-worktree", "-z", "--stdin"], repo=dest,  # guard: metadata-placeholders-are-skip-worktree
                input_text="\0".join(tree.placeholders) + "\0")
    for path in tree.placeholders:
        _make(dest, path, directory=False)
    for path in tree.gitlinks:
        _make(dest, path, directory=True)


def _make(dest: Path, path: str, *, directory: bool) -> None:
    """An empty file or directory at `path` inside `dest`, never through a link."""
    where = dest
    for part in Path(path).parts[:-1]:
        where = where / part
        if where.is_symlink() or (where.exists() and not where.is_dir()):  # guard: metadata-a-placeholder-is-never-written
            raise NemoRLError(f"the fork's tree at {path!r:.200} holds a link or a file where a directory belongs",
                              "pick another commit, or fix the fork")
        where.mkdir(exist_ok=True)
    target = where / Path(path).name
    if directory:
        if not target.is_dir() or target.is_symlink():
            target.mkdir()
    else:
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644))
