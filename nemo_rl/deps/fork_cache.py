"""A local bare cache per fork holding the fork's and its upstream's commits, so that merge-base,
patch-ids and format-patch run locally. Fetches go through git, so insteadOf mirrors apply."""

from __future__ import annotations

import hashlib
from pathlib import Path

from nemo_rl import git, settings
from nemo_rl.errors import NemoRLError
from nemo_rl.progress import progress
from nemo_rl.project.lockfile import Fork

UPSTREAM_REF = "refs/nemo-rl/upstream/{branch}"


def repo_for(fork: Fork) -> Path:
    key = hashlib.sha256(f"{fork.url}\n{fork.upstream_url}".encode()).hexdigest()[:16]
    repo = git.init_cache(settings.cache_dir() / "git" / f"{fork.distribution}-{key}")
    git.set_remote(repo, "fork", fork.url)
    if fork.upstream_url:
        git.set_remote(repo, "upstream", fork.upstream_url)
    return repo


def resolve_branch(fork: Fork, branch: str) -> str:
    progress(f"resolving branch {branch} of {fork.url}")
    sha = git.ls_remote(fork.url, f"refs/heads/{branch}")
    if sha is None:
        raise NemoRLError(f"branch {branch!r} does not exist in {fork.url}",
                          f"check the name with `git ls-remote --heads {fork.url}`")
    return sha


def _fetch(repo: Path, remote: str, url: str, refspecs: list[str]) -> None:
    if not git.fetch(repo, remote, url, refspecs):
        progress(f"warning: {url} ignored the blob filter and sent whole history; {git.MIRROR_SETTINGS}")


def fetch_commit(repo: Path, fork: Fork, sha: str) -> None:
    """Make `sha` (from the fork) and the upstream branch available in `repo`."""
    if not fork.upstream_url:
        raise NemoRLError(f"[tool.nemo-rl.forks.{fork.distribution}] has no upstream-url",
                          "add upstream-url and upstream-branch to the fork table")
    if not git.has_commit(repo, sha):
        progress(f"fetching {sha[:12]} from {fork.url} (can take a minute on a large fork)")
        git.ls_remote(fork.url, "HEAD")  # fails with the reachability remedy before a confusing fetch error
        try:
            _fetch(repo, "fork", fork.url, [sha])
        except NemoRLError as exc:
            # "not our ref" means either no such commit or a server that refuses fetches by SHA: fetching the
            # branch tells the two apart.
            if fork.branch and git.ls_remote(fork.url, f"refs/heads/{fork.branch}"):
                _fetch(repo, "fork", fork.url, [f"refs/heads/{fork.branch}"])
                if git.has_commit(repo, sha):
                    raise NemoRLError(f"{fork.url} has {sha[:12]} but refuses to serve it by SHA",
                                      f"{git.MIRROR_SETTINGS}\n  git said:\n{exc.what}") from exc
            raise NemoRLError(
                f"commit {sha} does not exist in {fork.url}",
                f"check the SHA in the fork, or pin its branch with --branch\n  git said:\n{exc.what}",
            ) from exc
    progress(f"fetching {fork.upstream_branch} of upstream {fork.upstream_url}")
    ref = UPSTREAM_REF.format(branch=fork.upstream_branch)
    _fetch(repo, "upstream", fork.upstream_url, [f"+refs/heads/{fork.upstream_branch}:{ref}"])
