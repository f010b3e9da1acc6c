import os
import signal
import subprocess
import sys
import time
import tomllib

import forkworld
import pytest
from gitfixtures import commit, git

from nemo_rl.cli import main
from nemo_rl.deps import lockfile


def bump(world, *args):
    return main(["deps", "bump", *args, "--project", str(world.project)])


def test_bump_updates_pin_lock_and_records_together(world, capsys):
    megatron = world.forks["megatron-core"]
    assert main(["deps", "patches", "--project", str(world.project)]) == 0
    before = (world.project / "pyproject.toml").read_text()
    new_head = commit(megatron.fork, "feat: fused tokens", {"megatron/core/fused.py": "FUSED = True\n"})
    capsys.readouterr()
    assert bump(world, "megatron-core", "--rev", new_head) == 0
    out = capsys.readouterr().out

    after = (world.project / "pyproject.toml").read_text()
    assert after == before.replace(megatron.head, new_head)  # only the rev changed; comments kept
    assert "# the forks: full SHAs only" in after
    assert lockfile.locked_packages(world.project)["megatron-core"].commit == new_head
    index = tomllib.loads((world.project / "patches/megatron-core/index.toml").read_text())
    assert index["pinned"] == new_head and index["base"] == megatron.base
    assert [c["commit"] for c in index["commit"]] == [*megatron.downstream, new_head]
    assert (world.project / "patches/megatron-core/0003-feat-fused-tokens.patch").exists()
    assert f"{megatron.head} -> {new_head}" in out
    assert "3 (1 added, 0 removed)" in out and "+ " + new_head[:12] + " feat: fused tokens" in out
    assert "base unchanged" in out
    assert main(["deps", "patches", "--check", "--offline", "--project", str(world.project)]) == 1  # why-note
    assert "why-note" in capsys.readouterr().out


def test_bump_to_the_pinned_commit_is_a_no_op(world, capsys):
    before = world.files()
    assert bump(world, "megatron-core", "--rev", world.forks["megatron-core"].head) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert world.files() == before


def test_bump_dry_run_writes_nothing(world, capsys):
    before = world.files()
    new_head = commit(world.forks["nemo-toolkit"].fork, "feat: x", {"nemo/x.py": "X = 1\n"})
    assert bump(world, "nemo-toolkit", "--rev", new_head, "--dry-run") == 0
    assert "dry run" in capsys.readouterr().out
    assert world.files() == before


def test_bump_branch_records_the_branch(world):
    megatron = world.forks["megatron-core"]
    git(megatron.fork, "checkout", "-q", "-b", "nemo-rl/next")
    new_head = commit(megatron.fork, "next thing", {"megatron/core/next.py": "N = 1\n"})
    assert bump(world, "megatron-core", "--branch", "nemo-rl/next") == 0
    fork = lockfile.fork(world.project, "megatron-core")
    assert fork.rev == new_head and fork.branch == "nemo-rl/next"


@pytest.mark.parametrize(
    "case, args, message",
    [
        ("nonexistent sha", ["--rev", "0123456789abcdef0123456789abcdef01234567"], "does not exist in"),
        ("short sha", ["--rev", "abc1234"], "full 40-hex"),
        ("unknown branch", ["--branch", "no/such-branch"], "branch 'no/such-branch' does not exist"),
    ],
)
def test_bump_failures_change_nothing(world, capsys, case, args, message):
    before = world.files()
    assert bump(world, "megatron-core", *args) == 1, case
    err = capsys.readouterr().err
    assert message in err and "what to do:" in err
    assert world.files() == before


def test_bump_unreachable_remote_changes_nothing(world, capsys, monkeypatch):
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "https://other.nemo-rl.invalid/x.git")  # drop the fork's mirror
    before = world.files()
    assert bump(world, "megatron-core", "--branch", "nemo-rl/main") == 1
    err = capsys.readouterr().err
    assert "insteadOf" in err and "forks.nemo-rl.invalid" in err
    assert world.files() == before


def test_bump_failing_uv_lock_changes_nothing(world, capsys):
    megatron = world.forks["megatron-core"]
    pyproject = (megatron.fork / "pyproject.toml").read_text()
    bad = commit(megatron.fork, "needs a future python",
                 {"pyproject.toml": pyproject.replace('requires-python = ">=3.10"', 'requires-python = ">=3.99"')})
    before = world.files()
    assert bump(world, "megatron-core", "--rev", bad) == 1
    err = capsys.readouterr().err
    assert "uv lock" in err and "what to do:" in err
    assert world.files() == before


def test_bump_interrupted_changes_nothing(world):
    """SIGINT while `uv lock` builds the fork's metadata: everything is restored and the exit code is 130."""
    megatron = world.forks["megatron-core"]
    slow = commit(megatron.fork, "dynamic metadata", {
        "pyproject.toml": "[build-system]\nrequires = ['setuptools']\nbuild-backend = 'setuptools.build_meta'\n",
        "setup.py": "import time\ntime.sleep(120)\nfrom setuptools import setup\n"
                    "setup(name='megatron-core', version='0.2.0', packages=['megatron', 'megatron.core'])\n",
    })
    before = world.files()
    proc = subprocess.Popen([sys.executable, "-m", "nemo_rl", "deps", "bump", "megatron-core", "--rev", slow,
                             "--project", str(world.project)], stderr=subprocess.PIPE, text=True, env=os.environ)
    deadline = time.monotonic() + 120
    while slow not in (world.project / "pyproject.toml").read_text():  # bump has begun writing
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    assert "interrupted" in proc.stderr.read()
    assert world.files() == before


def declare_metadata(world, version):
    pyproject = world.project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + "\n[[tool.uv.dependency-metadata]]\n"
                         f'name = "megatron-core"\nversion = "{version}"\nrequires-dist = []\n')
    forkworld.uv_run(world, "lock", "--quiet")


def test_bump_refuses_a_version_the_declared_metadata_does_not_have(world, capsys):
    declare_metadata(world, "0.1.0")
    megatron = world.forks["megatron-core"]
    pyproject = (megatron.fork / "pyproject.toml").read_text()
    newer = commit(megatron.fork, "release 0.2.0", {"pyproject.toml": pyproject.replace('"0.1.0"', '"0.2.0"')})
    before = world.files()
    assert bump(world, "megatron-core", "--rev", newer) == 1
    err = capsys.readouterr().err
    assert "declares version 0.2.0, but [[tool.uv.dependency-metadata]]" in err and "says 0.1.0" in err
    assert world.files() == before


def test_bump_reminds_when_the_fork_version_is_dynamic(world, capsys):
    declare_metadata(world, "0.1.0")
    megatron = world.forks["megatron-core"]
    pyproject = (megatron.fork / "pyproject.toml").read_text()
    dynamic_pyproject = pyproject.replace('version = "0.1.0"', 'dynamic = ["version"]').replace(
        "[tool.hatch.build", '[tool.hatch.version]\npath = "megatron/core/__init__.py"\n\n[tool.hatch.build')
    dynamic = commit(megatron.fork, "dynamic version", {"pyproject.toml": dynamic_pyproject})
    assert bump(world, "megatron-core", "--rev", dynamic) == 0
    assert "megatron-core's version is not static" in capsys.readouterr().out
