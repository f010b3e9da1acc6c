"""A trial rebase of downstream commits onto upstream's head, in trees only."""

from __future__ import annotations

import codecs
import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from nemo_rl.errors import NemoRLError
from nemo_rl.forks.git_history import changes, ls_tree
from nemo_rl.git import UNSERVED, git
from nemo_rl.process import Result, describe_failure

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


def _unquoted(path: str) -> str:
    """A path git quoted, unquoted (non-UTF-8 bytes as U+FFFD)."""
    if not (path.startswith('"') and path.endswith('"')):
        return path
    return codecs.escape_decode(path[1:-1].encode())[0].decode(errors="replace")


@dataclass(frozen=True)
class Merge:
    """What `git merge-tree --write-tree` said."""

    tree: str
    clean: bool
    stages: Mapping[str, tuple[str, str] | None]
    conflicts: tuple[str, ...]

    @classmethod
    def parse(cls, out: str, clean: bool, commits: tuple[str, ...]) -> Merge:
        """Paths stay quoted, so update-index reads non-UTF-8 bytes back."""
        tree, _, rest = out.partition("\n")
        entries, _, messages = rest.partition("\n\n") if not rest.startswith("\n") else ("", "", rest[1:])
        stages: dict[str, tuple[str, str] | None] = {}
        for entry in filter(None, entries.split("\n")):
            meta, _, path = entry.partition("\t")
            mode, blob, stage = meta.split()
            if stage == "3" or path not in stages:
                stages[path] = (mode, blob) if stage == "3" else stages.get(path)
        if clean:
            return cls(tree, True, {}, ())
        # git names a file it moved aside after the commit it merged: ours are throwaway ones
        names = {_unquoted(re.sub(rf"~(?:{'|'.join(commits)})(\"?)$", r"\1", path)) for path in stages}  # guard: upstream-git-names-a-moved-aside-file
        # a conflict on no one path (a directory renamed into several): git's own words
        said = [] if names else sorted(set(re.findall(r"CONFLICT \([^)]*\):[^\n]*", messages)))
        return cls(tree, False, stages, tuple(sorted(names) or said or ["(a conflict git names no file for)"]))


class TrialIndex:
    """A tree outside any work tree, from `start`'s, that commits are applied onto one by one: close it."""

    def __init__(self, repo: Path, start: str) -> None:
        self.repo = repo
        self._dir = Path(tempfile.mkdtemp(prefix="nemo-rl-trial-"))
        self.index = self._dir / "index"
        self.tree = git(["rev-parse", "--verify", "--end-of-options", f"{start}^{{tree}}"], repo=repo).stdout.strip()
        self.by_diff: list[str] = []
        self.merges: set[str] = set()
        self._promisors: int | None = None

    def _git(self, args: list[str], *, input_text: str | None = None, check: bool = True) -> Result:
        return git(args, repo=self.repo, input_text=input_text, check=check, index_file=self.index)

    def apply(self, sha: str, resolve: bool = False) -> list[str]:
        """Apply `sha` on top; [] when it applies, else the conflicting paths."""
        parents = git(["rev-list", "--no-walk", "--parents", "--end-of-options", sha], repo=self.repo).stdout.split()
        if len(parents) > 2:  # guard: upstream-a-merge-commit-is-dropped-as
            self.merges.add(sha)
            return []
        merged = self._merge(sha, parents[1] if len(parents) > 1 else self._commit(EMPTY_TREE))  # guard: upstream-merged-against-the-commit-s-own
        if merged is None:
            self.by_diff.append(sha)
            conflicts = self._by_diff(sha)
            if conflicts and resolve:
                self._take(sha)
            return conflicts
        if merged.clean:  # guard: upstream-a-conflict-on-no-one-path-is-a
            self.tree = merged.tree
            return []
        if resolve:
            self._resolve(merged)
        return list(merged.conflicts)  # guard: upstream-git-s-own-conflicting-files

    def _merge(self, sha: str, base: str) -> Merge | None:
        """`sha` merged against its parent `base`; None when a blob is unserved."""
        # git 2.39's merge-tree takes no --merge-base: two commits on `base` make it the base
        ours, theirs = self._commit(self.tree, base), self._commit(f"{sha}^{{tree}}", base)
        result = git(["-c", "core.quotePath=true", "merge-tree", "--write-tree", ours, theirs], repo=self.repo,  # guard: upstream-conflicting-paths-kept-as-git
                     check=False)
        if result.returncode not in (0, 1) and result.stderr.count(UNSERVED) >= self._promisor_count():  # guard: upstream-a-blob-no-server-has-sends-the
            return None
        if result.returncode not in (0, 1):  # guard: upstream-a-failed-merge-is-an-error-not
            raise NemoRLError(f"git could not merge downstream commit {sha[:12]} onto the trial tree:\n"
                              f"{describe_failure(result)}",
                              "check that both servers are reachable, or remove the fork cache named above")
        return Merge.parse(result.stdout, result.returncode == 0, (ours, theirs))  # guard: upstream-a-conflict-is-a-conflict

    def _promisor_count(self) -> int:
        if self._promisors is None:
            out = git(["config", "--get-regexp", r"^remote\..*\.promisor$"], repo=self.repo, check=False).stdout
            self._promisors = max(1, sum(line.split()[-1] == "true" for line in out.splitlines()))
        return self._promisors

    def _commit(self, tree: str, parent: str | None = None) -> str:
        return git(["-c", "user.name=nemo-rl", "-c", "user.email=trial@nemo-rl.invalid", "commit-tree",
                    *(["-p", parent] if parent else []), "-m", "nemo-rl trial rebase", "--end-of-options", tree],
                   repo=self.repo).stdout.strip()

    def _by_diff(self, sha: str) -> list[str]:
        """`sha`'s diff applied with `git apply --3way`: [] or the conflicting paths."""
        self._git(["read-tree", self.tree])
        if self._try(self._patch(sha)):
            self.tree = self._git(["write-tree", "--missing-ok"]).stdout.strip()
            return []
        conflicts = self._unmerged()
        if conflicts:
            return conflicts
        # git apply stopped before any 3-way merge and named no path: try each path alone
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
        out = self._git(["ls-files", "-u", "-z"]).stdout
        return sorted({entry.split("\t", 1)[1] for entry in out.split("\0") if "\t" in entry})

    def _take(self, sha: str) -> None:
        """After `_by_diff`: take the commit's side of every path it touches."""
        touched = changes(self.repo, sha)
        self._git(["read-tree", self.tree])
        lines = [f"0 {'0' * 40}\t{c.path}" for c in touched if c.status == "D"]
        self._update(lines + [f"{mode} {blob}\t{path}"
                              for mode, _, blob, path in ls_tree(self.repo, sha, [c.path for c in touched])])

    def _resolve(self, merged: Merge) -> None:
        """Set each conflicting path to the commit's side, removed where it has none."""
        self._git(["read-tree", merged.tree])
        lines = []
        for path, theirs in merged.stages.items():
            lines.append(f"0 {'0' * 40}\t{path}")
            if theirs is not None:  # guard: upstream-a-conflict-is-resolved-to-the
                lines.append(f"{theirs[0]} {theirs[1]}\t{path}")
        self._update(lines, quoted=True)

    def _update(self, lines: list[str], quoted: bool = False) -> None:
        if lines:
            end = "\n" if quoted else "\0"
            self._git(["update-index", *([] if quoted else ["-z"]), "--index-info"], input_text=end.join(lines) + end)
        self.tree = self._git(["write-tree", "--missing-ok"]).stdout.strip()

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)
