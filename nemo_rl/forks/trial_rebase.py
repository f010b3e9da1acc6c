"""A trial rebase of downstream commits onto upstream's head, in trees only: what `deps upstream` calls "applies".

Each commit goes onto the tree the commits before it left, first by its own diff (`git apply --3way`: it reads
only the files the commit touches, which callers fetch in one request). Where that stops, the commit is merged as
`git cherry-pick` merges it (git's own `merge-tree`, against the commit's first parent), which follows a rename
on either side where the diff cannot: its verdict is the one given. Nothing touches a checkout or the
repository's index. The fork cache is blob-less, and git fetches what else a merge reads from the promisor
remotes; a mirror that lacks some large file cannot serve a blob such a merge reads: that commit keeps its diff's
verdict and is listed in `by_diff`.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from nemo_rl.errors import NemoRLError
from nemo_rl.forks.git_history import changes
from nemo_rl.git import git
from nemo_rl.process import Result, describe_failure

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's own, in every repository
_UNSERVED = ("from promisor remote", "not our ref")  # git's words for a blob no remote would send


class TrialIndex:
    """A tree outside any work tree, starting at a commit's tree, onto which commits are applied one by one."""

    def __init__(self, repo: Path, start: str) -> None:
        self.repo = repo
        fd, name = tempfile.mkstemp(prefix="nemo-rl-trial-", suffix=".index")
        os.close(fd)
        os.unlink(name)  # git creates it; an empty file is not an index
        self.index = Path(name)  # for the diff fallback and for taking a commit's side of a conflict
        self.tree = git(["rev-parse", "--verify", "--end-of-options", f"{start}^{{tree}}"], repo=repo).stdout.strip()
        self.by_diff: list[str] = []  # commits a merge could not read every blob of (see the module's docstring)

    def _git(self, args: list[str], *, input_text: str | None = None, check: bool = True) -> Result:
        return git(args, repo=self.repo, input_text=input_text, check=check, index_file=self.index)

    def apply(self, sha: str, resolve: bool = False) -> list[str]:
        """Apply `sha` on top; [] when it applies, else the paths git names as conflicting. On a conflict the
        tree is left as it was, or with `resolve` set to the commit's side of every path it touches (a rebase
        that resolves each conflict and goes on, so a later commit building on this one is tried on top of it)."""
        conflicts = self._by_diff(sha)
        if conflicts:  # a rename, an added file both sides have: git's merge may still apply it
            merged = self._merge(sha)
            if merged is None:
                self.by_diff.append(sha)
            else:
                conflicts = merged
        if conflicts and resolve:
            self._take(sha)
        return conflicts

    def _merge(self, sha: str) -> list[str] | None:
        """git's merge of `sha` onto the tree; None when a blob it reads is served by no remote."""
        parents = git(["rev-list", "--no-walk", "--parents", "--end-of-options", sha], repo=self.repo).stdout.split()
        base = parents[1] if len(parents) > 1 else self._commit(EMPTY_TREE)  # a root commit adds every file
        # merge-tree finds the merge base itself (git 2.39 takes no --merge-base): two commits whose one parent is
        # `base` make it exactly the base a cherry-pick of `sha` uses
        ours, theirs = self._commit(self.tree, base), self._commit(f"{sha}^{{tree}}", base)
        result = git(["merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", ours, theirs],
                     repo=self.repo, check=False)
        if result.returncode not in (0, 1):
            if any(mark in result.stderr for mark in _UNSERVED):
                return None
            raise NemoRLError(f"git could not merge downstream commit {sha[:12]} onto the trial tree:\n"
                              f"{describe_failure(result)}",
                              "run again; if it persists, remove the fork cache (its path is in the command above)")
        tree, *names = result.stdout.split("\0")
        if result.returncode == 0:
            self.tree = tree
            return []
        return sorted({name for name in names if name})

    def _commit(self, tree: str, parent: str | None = None) -> str:
        """A commit object of `tree` (on `parent`) for merge-tree to read; nothing refers to it afterwards."""
        return git(["-c", "user.name=nemo-rl", "-c", "user.email=trial@nemo-rl.invalid", "commit-tree",
                    *(["-p", parent] if parent else []), "-m", "nemo-rl trial rebase", "--end-of-options", tree],
                   repo=self.repo).stdout.strip()

    def _by_diff(self, sha: str) -> list[str]:
        """`sha`'s diff applied with `git apply --3way` (renames not followed): [] or the conflicting paths."""
        self._git(["read-tree", self.tree])
        if self._try(self._patch(sha)):
            self.tree = self._git(["write-tree", "--missing-ok"]).stdout.strip()
            return []
        conflicts = self._unmerged()
        if conflicts:
            return conflicts
        # git apply stopped before any 3-way merge (a path missing from the tree, or already in it) and named no
        # path: the paths whose own diff fails, each tried alone
        touched = [c.path for c in changes(self.repo, sha)]
        failing = []
        for path in touched:
            self._git(["read-tree", self.tree])
            if not self._try(self._patch(sha, path)):
                failing.append(path)
        return failing or touched

    def _patch(self, sha: str, path: str | None = None) -> str:
        return git(["diff-tree", "-p", "--binary", "--no-renames", "--root", "-m", "--first-parent", "--no-commit-id",
                    "--end-of-options", sha, *(["--", path] if path else [])], repo=self.repo).stdout

    def _try(self, patch: str) -> bool:
        if not patch.strip():
            return True
        result = self._git(["apply", "--cached", "--3way", "--whitespace=nowarn", "-"], input_text=patch, check=False)
        return result.returncode == 0 and not self._unmerged()

    def _unmerged(self) -> list[str]:
        return sorted({line.split("\t", 1)[1] for line in self._git(["ls-files", "-u"]).stdout.splitlines()})

    def _take(self, sha: str) -> None:
        """The commit's version of each path it touches (its deletions deleted), written as the new tree."""
        touched = changes(self.repo, sha)
        self._git(["read-tree", self.tree])
        entries = git(["ls-tree", "-r", "-z", "--full-tree", "--end-of-options", sha, "--",
                       *(c.path for c in touched)], repo=self.repo).stdout
        lines = [f"0 {'0' * 40}\t{c.path}" for c in touched if c.status == "D"]
        for entry in filter(None, entries.split("\0")):
            meta, _, path = entry.partition("\t")
            mode, _, blob = meta.split()
            lines.append(f"{mode} {blob}\t{path}")
        self._git(["update-index", "--index-info"], input_text="\n".join(lines) + "\n")
        self.tree = self._git(["write-tree", "--missing-ok"]).stdout.strip()

    def close(self) -> None:
        self.index.unlink(missing_ok=True)
