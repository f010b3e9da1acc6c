"""The fork cache's own bookkeeping (forks/fork_cache.py): one repository per fork and upstream, its lock file
kept, git's stale lock files removed under it. No fetch."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest
from fakes import deps
from gitfixtures import git

from nemo_rl.errors import NemoRLError
from nemo_rl.forks import fork_cache
from nemo_rl.project import lockfile
from nemo_rl.project.model import Project

FORK = lockfile.Fork("megatron-core", "https://forks.nemo-rl.invalid/m.git", "a" * 40, "main",
                     "https://upstream.nemo-rl.invalid/m.git", "main", None)


def test_one_cache_repository_per_fork_url_and_upstream_url(tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_RL_CACHE_DIR", str(tmp_path))
    path = fork_cache._path(FORK)
    assert path.parent == tmp_path / "git" and path.name.startswith("megatron-core-")
    assert fork_cache._path(replace(FORK, rev="b" * 40, branch="other")) == path  # a pin is not a repository
    assert fork_cache._path(replace(FORK, url="https://forks.nemo-rl.invalid/other.git")) != path
    assert fork_cache._path(replace(FORK, upstream_url="https://upstream.nemo-rl.invalid/o.git")) != path


def test_the_caches_lock_removes_stale_git_locks_and_keeps_its_own_lock_file(tmp_path):
    repo = tmp_path / "git" / "megatron-core-0123"
    (repo / "refs" / "heads").mkdir(parents=True)
    stale = [repo / "config.lock", repo / "packed-refs.lock", repo / "refs" / "heads" / "main.lock"]
    for path in stale:
        path.write_text("")
    (repo / "refs" / "heads" / "main").write_text("a" * 40 + "\n")
    with fork_cache.holding(repo):
        assert not any(path.exists() for path in stale)
        assert (repo / "refs" / "heads" / "main").exists()
    assert (tmp_path / "git" / "megatron-core-0123.lock").exists()  # never removed: see locked


def test_another_command_waits_for_the_fork_cache(world):
    """Two commands of one user share the fork cache: the second waits, and says so, until the first is done."""
    from nemo_rl.forks import fork_cache

    fork = Project.read(world.project).fork("megatron-core")
    repo = fork_cache.fetched(fork, fork.rev)
    other = ("import sys\nfrom pathlib import Path\nfrom nemo_rl.forks import fork_cache\n"
             "with fork_cache.holding(Path(sys.argv[1])):\n    print('in', flush=True)\n")
    with fork_cache.holding(repo):
        proc = subprocess.Popen([sys.executable, "-c", other, str(repo)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        said = proc.stderr.readline()  # its first line: waiting, or none when it went in and ended
        waiting = proc.poll() is None
    out, err = proc.communicate(timeout=60)
    assert f"waiting for another nemo-rl command using the fork cache {repo}" in said and waiting, said + err
    assert (proc.returncode, out) == (0, "in\n"), err  # and went in once the first was done


def test_revs_that_are_not_fork_commits_are_answered_at_once(world, capsys):
    megatron = world.forks["megatron-core"]
    tree = git(megatron.fork, "rev-parse", "HEAD^{tree}")
    upstream_only = git(megatron.upstream, "rev-parse", "main")
    assert deps(world, "bump", "megatron-core", "--rev", tree) == 1
    err = capsys.readouterr().err
    assert "not a commit" in err or "does not exist in" in err
    assert deps(world, "bump", "megatron-core", "--rev", upstream_only) == 1
    assert "(it is a commit of upstream, not of the fork)" in capsys.readouterr().err


def test_an_upstream_commit_already_in_the_cache_is_not_taken_for_a_fork_commit(world, capsys):
    """git never asks a server for an object it has: with upstream fetched, the fork's branch is the proof."""
    assert deps(world, "patches", "--check", "megatron-core") == 0  # fills the cache with upstream's branch
    upstream_only = git(world.forks["megatron-core"].upstream, "rev-parse", "main")
    capsys.readouterr()
    assert deps(world, "bump", "megatron-core", "--rev", upstream_only) == 1
    assert "(it is a commit of upstream, not of the fork)" in capsys.readouterr().err
def test_a_cached_proof_of_a_commit_force_pushed_away_is_asked_again(world):
    from gitfixtures import commit

    from nemo_rl.forks import fork_cache

    fork = Project.read(world.project).fork("megatron-core")
    server = world.forks["megatron-core"].fork
    gone = commit(server, "feat: pushed, then force-pushed away", {"megatron/core/gone.py": "G = 1\n"})
    fork_cache.fetched(fork, gone)  # a dry run proves it and caches the proof
    git(server, "reset", "-q", "--hard", "HEAD~1")
    git(server, "reflog", "expire", "--expire=now", "--all")
    git(server, "gc", "-q", "--prune=now")
    with pytest.raises(NemoRLError, match="no longer on"):
        fork_cache.fetched(fork, gone)
    assert fork_cache.fetched(fork, fork.rev)  # the pin itself: no question asked
