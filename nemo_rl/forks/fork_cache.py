"""A local bare cache per fork of the fork's and its upstream's commits."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from nemo_rl import git, locks, settings
from nemo_rl.errors import NemoRLError, command
from nemo_rl.progress import progress
from nemo_rl.project.lockfile import Fork

UPSTREAM_REF = "refs/nemo-rl/upstream/{branch}"
FORK_COMMIT_REF = "refs/nemo-rl/fork-commits/{sha}"
FORK_BRANCH_REF = "refs/nemo-rl/fork/{branch}"


def _path(fork: Fork) -> Path:
    key = hashlib.sha256(f"{fork.url}\n{fork.upstream_url}".encode()).hexdigest()[:16]
    return settings.private_dir("git") / f"{fork.distribution}-{key}"


@contextlib.contextmanager
def holding(repo: Path) -> Iterator[None]:
    repo.parent.mkdir(parents=True, exist_ok=True)
    fd = locks.open_lock_file(repo.parent / f"{repo.name}.lock")
    try:
        locks.acquire(fd, lambda: f"waiting for another nemo-rl command using the fork cache {repo}")  # guard: fork-cache-the-file-lock-is-taken
        git.remove_stale_locks(repo)  # guard: fork-cache-a-killed-git-s-lock-files-are
        yield
    finally:
        os.close(fd)


def fetched(fork: Fork, sha: str, *, on_branch: bool = False) -> Path:
    """The fork's cache repository, holding `sha` (proved to be in the fork) and the upstream branch."""
    if not fork.upstream_url:
        raise NemoRLError(f"[tool.nemo-rl.forks.{fork.distribution}] has no upstream-url",
                          "add upstream-url and upstream-branch to that table")
    repo = _path(fork)
    pin_ref = FORK_COMMIT_REF.format(sha=sha)
    upstream_ref = UPSTREAM_REF.format(branch=fork.upstream_branch)
    upstream_refspec = f"+refs/heads/{fork.upstream_branch}:{upstream_ref}"
    # each asking fetches the branch from the fork
    on_fork_branch = functools.cache(lambda: _on_branch(repo, fork, sha))
    with holding(repo):
        git.init_cache(repo)
        git.set_remote(repo, "fork", fork.url)
        git.set_remote(repo, "upstream", fork.upstream_url)
        if (not git.ref_exists(repo, pin_ref) and fork.branch and git.ref_exists(repo, upstream_ref)
                and git.is_ancestor(repo, sha, upstream_ref)):
            # git never asks a server for an object it has, so prove it is the fork's
            if not on_fork_branch():  # guard: trust-upstream-commit-is-not-a-fork
                raise NemoRLError(f"commit {sha} is not on {fork.url}'s branch {fork.branch} (it is a commit of "
                                  "upstream, not of the fork)", "pin a fork commit, or use --branch NAME")
            git.update_ref(repo, pin_ref, sha)
        elif git.ref_exists(repo, pin_ref) and sha != fork.rev:
            # a proof cached earlier (a dry run) of a commit about to be pinned
            if git.served(fork.url, sha) is False and not (  # guard: never-a-cached-proof-of-a-new-pin-is
                    fork.branch and on_fork_branch()):
                git.delete_ref(repo, pin_ref)
                raise NemoRLError(f"commit {sha} is no longer on {fork.url} (force-pushed away)",
                                  "pin a commit the fork has now (`git ls-remote` lists its branches), or push this "
                                  "one to a fork branch again")
        if not git.ref_exists(repo, pin_ref):
            progress(f"fetching {sha[:12]} from {fork.url}")
            git.ls_remote(fork.url, "HEAD")
            try:
                git.fetch(repo, "fork", fork.url, [f"+{sha}:{pin_ref}"])
            except NemoRLError as exc:
                # "not our ref": no such commit, or a server that refuses fetches by SHA
                if fork.branch and git.ls_remote(fork.url, f"refs/heads/{fork.branch}"):
                    if on_fork_branch():
                        raise NemoRLError(f"{fork.url} has {sha[:12]} but refuses to serve it by SHA",
                                          f"{git.MIRROR_SETTINGS}\n  git said:\n{exc.what}") from exc
                git.fetch(repo, "upstream", fork.upstream_url, [upstream_refspec])
                upstream_only = git.is_ancestor(repo, sha, upstream_ref)
                raise NemoRLError(
                    f"commit {sha} does not exist in {fork.url}"
                    + (" (it is a commit of upstream, not of the fork)" if upstream_only else ""),
                    f"check the SHA, or use --branch NAME\n  git said:\n{exc.what}",
                ) from exc
        kind = git.object_type(repo, sha)
        if kind != "commit":
            git.delete_ref(repo, pin_ref)
            raise NemoRLError(f"{sha} is a {kind} in {fork.url}, not a commit",
                              "pass a commit SHA, or use --branch NAME")
        progress(f"fetching {fork.upstream_branch} of upstream {fork.upstream_url}")
        git.fetch(repo, "upstream", fork.upstream_url, [upstream_refspec])
        if on_branch and fork.branch and not on_fork_branch():  # guard: trust-rev-on-the-recorded-branch
            raise NemoRLError(f"{sha[:12]} is not on {fork.branch}, the branch pyproject.toml records for "
                              f"{fork.distribution}", f"use --branch NAME, or push it to {fork.branch} first")
    return repo


def resolve_branch(fork: Fork, branch: str) -> str:
    progress(f"resolving branch {branch} of {fork.url}")
    sha = git.ls_remote(fork.url, f"refs/heads/{branch}")
    if sha is None:
        raise NemoRLError(f"branch {branch!r} does not exist in {fork.url}",
                          f"check the name with {command('git ls-remote --heads {url}', url=fork.url)}")
    return sha


def _on_branch(repo: Path, fork: Fork, sha: str) -> bool:
    ref = FORK_BRANCH_REF.format(branch=fork.branch)
    git.fetch(repo, "fork", fork.url, [f"+refs/heads/{fork.branch}:{ref}"])
    return git.is_ancestor(repo, sha, ref)
