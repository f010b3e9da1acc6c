"""What runs side by side inside one command, and the shortcuts that make a bump fast: `uv lock` beside the fork's
history (offline when only the pin moves), threads sharing a fork cache, one scratch checkout moved from commit to
commit (scratch trees: tests/test_scratch.py)."""

from __future__ import annotations

import os
import time

import forkworld
from gitfixtures import commit

from nemo_rl.cli import main
from nemo_rl.forks import fork_cache, fork_metadata
from nemo_rl.project import lockfile


def bump(world, *args: str) -> int:
    return main(["deps", "bump", "megatron-core", *args, "--project", str(world.project)])


def next_commit(world) -> str:
    megatron = world.forks["megatron-core"]
    return commit(megatron.fork, "fix: one more token", {"megatron/core/tokens.py": "def tokens():\n    return [3]\n"})


def test_bump_locks_offline_when_only_the_pin_moves(world, capsys):
    """With declared metadata nothing but the SHA can change: uv's offline run, checked to be exactly that."""
    forkworld.derive_metadata(world, {})
    before = (world.project / "uv.lock").read_text()
    new = next_commit(world)
    assert bump(world, "--rev", new) == 0
    assert "locked offline" in capsys.readouterr().out
    assert (world.project / "uv.lock").read_text() == before.replace(world.forks["megatron-core"].head, new)
    forkworld.uv_run(world, "lock", "--check")  # what an online lock gives


def test_bump_locks_online_when_more_than_the_pin_changes(world, capsys):
    """pyproject.toml changed since the last lock (the project's own version): offline is not the whole answer."""
    forkworld.derive_metadata(world, {})
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text().replace('name = "fixture-project"\nversion = "0.1.0"',
                                             'name = "fixture-project"\nversion = "0.1.1"'))
    assert bump(world, "--rev", next_commit(world)) == 0
    assert "locked offline" not in capsys.readouterr().out
    forkworld.uv_run(world, "lock", "--check")


def test_a_refusal_while_uv_locks_ends_the_lock(world, capsys, tmp_path):
    """The fork's commit renames the distribution, and its build (run by uv lock meanwhile) would take two minutes:
    the refusal ends uv and the build at once; nothing changes."""
    started_build = tmp_path / "build.pid"
    renamed = commit(world.forks["megatron-core"].fork, "rename, with a slow build", {
        "pyproject.toml": "[build-system]\nrequires = ['setuptools']\nbuild-backend = 'setuptools.build_meta'\n"
                          "[project]\nname = 'megatron-tron'\ndynamic = ['version']\n",
        "setup.py": f"import os, time\nopen({str(started_build)!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)\n"
                    "from setuptools import setup\nsetup(version='0.2.0', packages=['megatron', 'megatron.core'])\n",
    })
    before = world.files()
    started = time.monotonic()
    assert bump(world, "--rev", renamed) == 1
    assert time.monotonic() - started < 60
    assert "'megatron-tron'" in capsys.readouterr().err
    assert world.files() == before and not list((world.project / ".nemo-rl").glob("staging-*"))
    if started_build.exists():  # uv had reached the fork's build: it did not outlive the bump
        pid, deadline = int(started_build.read_text()), time.monotonic() + 10
        while os.path.exists(f"/proc/{pid}") and "Z" not in open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1][:3]:
            assert time.monotonic() < deadline, "the build outlived the bump"
            time.sleep(0.1)


def test_metadata_through_a_moved_checkout_equals_a_fresh_build(world, tmp_path, monkeypatch):
    """One checkout serves both commits of a bump's drift; what the first build left there must not reach the
    second (this build adds a requirement when it finds a file the build of another commit wrote; PEP 517 runs
    setup.py once per hook, so the same commit's file is no sign)."""
    setup = ("import os\nfrom setuptools import setup\n"
             "stale = os.path.exists('left-by-a-build') and open('left-by-a-build').read() != '{v}'\n"
             "if not os.path.exists('left-by-a-build'):\n    open('left-by-a-build', 'w').write('{v}')\n"
             "setup(name='megatron-core', version='{v}', packages=['megatron', 'megatron.core'],\n"
             "      install_requires=['stale-dep'] if stale else [])\n")
    build = "[build-system]\nrequires = ['setuptools']\nbuild-backend = 'setuptools.build_meta'\n"
    megatron = world.forks["megatron-core"]
    first = commit(megatron.fork, "setuptools 0.2.0", {"pyproject.toml": build, "setup.py": setup.format(v="0.2.0")})
    second = commit(megatron.fork, "setuptools 0.2.1", {"setup.py": setup.format(v="0.2.1")})
    fork = lockfile.fork(world.project, "megatron-core")
    fork_cache.fetched(fork, first)
    both = fork_metadata.read_all(fork_cache.fetched(fork, second), [first, second])
    assert [m.version for m in both] == ["0.2.0", "0.2.1"]
    assert all("stale-dep" not in m.requires for m in both), both
