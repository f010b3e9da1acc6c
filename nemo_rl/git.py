"""The git commands nemo-rl needs, under the user's git configuration; GIT_DIR and kin (set in hooks) dropped."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from nemo_rl import values
from nemo_rl.errors import NemoRLError, command
from nemo_rl.process import Result, Running, start, waited
from nemo_rl.progress import progress

FILTER_IGNORED = "filtering not recognized by server"
MIRROR_SETTINGS = ("on the mirror run "
                   "`git config uploadpack.allowFilter true && git config uploadpack.allowAnySHA1InWant true`")
_MISLEADING = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_PREFIX")  # guard: fast-an-inherited-object-directory-is


def _env(index_file: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _MISLEADING}  # guard: guard-inherited-git-dir-dropped
    env["GIT_TERMINAL_PROMPT"] = "0"  # a credential prompt would hang a non-interactive bump
    env["LC_ALL"] = "C"
    if index_file is not None:
        env["GIT_INDEX_FILE"] = str(index_file)  # guard: fast-the-trial-index-is-git-s-own
    return env


def git_start(
    args: list[str], *, repo: Path | None = None, remedy: str | None = None, check: bool = True,
    input_text: str | None = None, timeout: float | None = None, stdin_file: BinaryIO | None = None,
    stdout_file: BinaryIO | None = None, index_file: Path | None = None,
) -> Running:
    prefix = ["git", "-C", str(repo)] if repo else ["git"]
    return start([*prefix, *args], env=_env(index_file), remedy=remedy, check=check, input_text=input_text,
                 timeout=timeout, stdin_file=stdin_file, stdout_file=stdout_file)


git = waited(git_start)


def unreachable(url: str) -> str:
    return "check the network, or point git at a mirror: " + command(
        "git config --global url.<mirror>.insteadOf {url}", url=url)


def git_said(result: Result) -> str:
    """git's error lines before its advice, printable."""
    said = []
    for line in result.stderr.strip().splitlines():
        if not line.strip():
            break
        said.append(values.printable(line.strip()))
    return "; ".join(said[-3:]) or f"git printed nothing (exit {result.returncode})"


def tried_url(where: str, repo: Path | None = None) -> str | None:
    """The URL git contacts for `where` (a URL or a remote of `repo`) after insteadOf."""
    result = git(["ls-remote", "--get-url", "--", where], repo=repo, check=False, timeout=20)
    return values.printable(result.stdout.strip()) if result.returncode == 0 and result.stdout.strip() else None


def reach_failure(failed: str, url: str, result: Result, *, where: str | None = None,
                  repo: Path | None = None) -> NemoRLError:
    """The error for a failed ls-remote or fetch of `url`, naming the URL git tried."""
    tried = tried_url(where or url, repo)
    via = f" (git tried {tried})" if tried and tried != url else ""
    return NemoRLError(f"{failed} {url}{via}: {git_said(result)}", unreachable(url))


def ls_remote(url: str, ref: str, timeout: float | None = None) -> str | None:
    """The commit `ref` names on `url`; None when there is no such ref."""
    result = git(["ls-remote", "--", url, ref], check=False, timeout=timeout)
    if result.returncode != 0:  # guard: git-a-failed-reach-is-an-error-with-git-s-words
        raise reach_failure("cannot reach", url, result)
    for line in result.stdout.splitlines():
        sha, _, name = line.partition("\t")
        if name == ref:
            return sha
    return None


def init_cache(path: Path) -> Path:
    if not (path / "HEAD").exists():
        path.mkdir(parents=True, exist_ok=True)
        git(["init", "--quiet", "--bare", str(path)])
        # a partial clone needs format version 1
        git(["config", "core.repositoryformatversion", "1"], repo=path)
    return path


def remove_stale_locks(repo: Path) -> None:
    """Remove lock files a killed git left in `repo`; only while no other git runs there."""
    if repo.is_dir():
        for path in [*repo.glob("*.lock"), *(repo / "refs").rglob("*.lock")]:
            if path.is_file() and not path.is_symlink():
                path.unlink(missing_ok=True)
        for path in repo.glob("worktrees/*/locked"):
            if path.is_file() and not path.is_symlink() and path.stat().st_size < 64 and \
                    path.read_text(errors="replace").strip() == "initializing":
                path.unlink(missing_ok=True)


def set_remote(repo: Path, name: str, url: str) -> None:
    """Point remote `name` at `url` (insteadOf applies) as a blob-less promisor."""
    git(["config", f"remote.{name}.url", url], repo=repo)
    git(["config", f"remote.{name}.promisor", "true"], repo=repo)
    git(["config", f"remote.{name}.partialclonefilter", "blob:none"], repo=repo)
    if git(["config", "extensions.partialClone"], repo=repo, check=False).returncode != 0:
        git(["config", "extensions.partialClone", name], repo=repo)


def fetch(repo: Path, remote: str, url: str, refspecs: list[str]) -> None:
    """Fetch blob-less; warn when the server ignores the filter."""
    result = git(["fetch", "--quiet", "--no-tags", "--filter=blob:none", "--end-of-options", remote, *refspecs],
                 repo=repo, check=False)
    if result.returncode != 0:  # guard: git-a-failed-fetch-is-an-error-with-git-s-words
        failure = reach_failure("cannot fetch from", url, result, where=remote, repo=repo)
        if "corruption on the remote side" in result.stderr and FILTER_IGNORED in result.stderr:
            raise NemoRLError(failure.what, f"re-sync the mirror, or {MIRROR_SETTINGS}")
        raise failure
    if FILTER_IGNORED in result.stderr:
        progress(f"warning: {url} ignored the blob filter; {MIRROR_SETTINGS}")


# noop negotiation: the cache's refs say nothing about which blobs it lacks
_FETCH_OBJECTS = ["-c", "fetch.negotiationAlgorithm=noop", "fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
                  "--recurse-submodules=no", "--filter=blob:none", "--stdin", "--end-of-options"]
UNSERVED = "remote error: upload-pack: not our ref"
_UNSERVED_ID = re.compile(r"not our ref ([0-9a-f]{40})")


def remote_url(repo: Path, name: str) -> str | None:
    result = git(["config", "--get", f"remote.{name}.url"], repo=repo, check=False)
    return (result.stdout.strip() or None) if result.returncode == 0 else None


def missing_objects(repo: Path, revs: Sequence[str]) -> set[str]:
    """The objects of these commits' trees that `repo` lacks; fetches nothing."""
    if not revs:
        return set()
    out = git(["rev-list", "--objects", "--no-walk", "--missing=print", "--stdin"], repo=repo,
              input_text="\n".join(revs) + "\n").stdout
    return {line[1:].strip() for line in out.splitlines() if line.startswith("?")}


def fetch_objects(repo: Path, remote: str, objects: set[str], *, refusals: int = 0) -> set[str]:
    """Fetch `objects` into `repo`; return those refused, up to `refusals`; any other failure raises."""
    refused: set[str] = set()
    while wanted := objects - refused:
        result = git([*_FETCH_OBJECTS, remote], repo=repo, input_text="\n".join(sorted(wanted)) + "\n",
                     check=False)
        named = set(_UNSERVED_ID.findall(result.stderr)) & wanted
        if result.returncode == 0:
            break
        if not named:
            git([*_FETCH_OBJECTS, remote], repo=repo, input_text="\n".join(sorted(wanted)) + "\n",
                remedy=unreachable(remote_url(repo, remote) or remote))  # fails again, with git's own words
            break
        if len(refused | named) > refusals:  # guard: fork-cache-a-refusal-is-an-error-unless
            raise NemoRLError(f"remote {remote!r} ({remote_url(repo, remote)}) does not serve "
                              f"{len(refused | named)} or more of the {len(objects)} object(s)",
                              "re-sync that mirror, or point git at one that has them (url.<base>.insteadOf)")
        refused |= named
    return refused


def served(url: str, sha: str, timeout: float | None = None) -> bool | None:
    """Whether `url` serves commit `sha` by SHA, as uv asks; None when unreachable."""
    with tempfile.TemporaryDirectory(prefix="nemo-rl-served-") as probe:
        git(["init", "--quiet", "--bare", probe])  # git never asks a server for an object it has
        try:
            result = git(["fetch", "--quiet", "--no-tags", "--depth=1", "--filter=tree:0", "--end-of-options", url,
                          sha], repo=Path(probe), check=False, timeout=timeout)
        except NemoRLError:  # past the timeout
            return None
    if result.returncode == 0:
        return True
    said = result.stderr.lower()
    return False if any(s in said for s in ("not our ref", "no such remote ref", "couldn't find remote ref")) else None


def ref_exists(repo: Path, ref: str) -> bool:
    return git(["show-ref", "--verify", "--quiet", ref], repo=repo, check=False).returncode == 0


def update_ref(repo: Path, ref: str, sha: str) -> None:
    git(["update-ref", "--end-of-options", ref, sha], repo=repo)


def delete_ref(repo: Path, ref: str) -> None:
    git(["update-ref", "-d", ref], repo=repo, check=False)


def object_type(repo: Path, sha: str) -> str:
    return git(["cat-file", "-t", sha], repo=repo).stdout.strip()


def is_ancestor(repo: Path, ancestor: str, descendant: str) -> bool:
    result = git(["merge-base", "--is-ancestor", "--end-of-options", ancestor, descendant], repo=repo, check=False)
    return result.returncode == 0


def rev_parse(repo: Path, rev: str) -> str:
    return git(["rev-parse", "--verify", "--end-of-options", f"{rev}^{{commit}}"], repo=repo).stdout.strip()


def count(repo: Path, revision_range: str) -> int:
    result = git(["rev-list", "--count", "--end-of-options", revision_range], repo=repo, check=False)
    return int(result.stdout.strip()) if result.returncode == 0 else -1  # -1: the pin is not in this checkout


def merge_base(repo: Path, a: str, b: str) -> str:
    return git(["merge-base", "--end-of-options", a, b], repo=repo).stdout.strip()


def rev_list(repo: Path, revision_range: str) -> list[str]:
    """Commits in `revision_range`, oldest first."""
    out = git(["rev-list", "--reverse", "--topo-order", "--end-of-options", revision_range], repo=repo).stdout
    return out.split()


def show_file(repo: Path, sha: str, path: str) -> str | None:
    """`path` at `sha`; None when absent."""
    result = git(["show", "--end-of-options", f"{sha}:{path}"], repo=repo, check=False)
    return result.stdout if result.returncode == 0 else None


def format_patch(repo: Path, revision_range: str, out_dir: Path) -> list[str]:
    return git(["format-patch", "-o", str(out_dir), "--end-of-options", revision_range], repo=repo).stdout.split()


def require_full_sha(rev: str) -> str:
    rev = rev.strip().lower()
    if not values.FULL_SHA.match(rev):
        raise NemoRLError(f"rev {rev!r} is not a full 40-hex commit SHA",
                          "pass the full SHA (`git rev-parse <rev>` in the fork), or use --branch NAME")
    return rev
