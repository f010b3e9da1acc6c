"""The project's private directory and lock (nemo_rl/project/state_dir.py): `.nemo-rl` is a real, untracked
directory, and commands that write the project wait for one another or refuse with --no-wait."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from fakes import _clone, deps, fake_env
from gitfixtures import commit

from nemo_rl.cli import main
from nemo_rl.errors import NemoRLError
from nemo_rl.project import develop_state, state_dir
from nemo_rl.project.model import Project


def test_two_bumps_at_once_lose_nothing(world):
    heads = {d: commit(f.fork, f"feat: {d} next", {f"{f.module.replace('.', '/')}/next.py": "N = 1\n"})
             for d, f in world.forks.items()}
    env = {**os.environ, "PYTHONPATH": str(world.root)}
    procs = [subprocess.Popen([sys.executable, "-m", "nemo_rl", "deps", "bump", d, "--rev", sha, "--project",
                               str(world.project)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for d, sha in heads.items()]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert [code for code, _ in results] == [0, 0], results
    assert any("waiting for another nemo-rl command" in err for _, err in results)
    for dist, sha in heads.items():
        assert Project.read(world.project).fork(dist).rev == sha
        assert Project.read(world.project).packages[dist].commit == sha
    assert main(["deps", "patches", "--check", "--project", str(world.project)]) == 0
    assert main(["deps", "status", "--check", "--project", str(world.project)]) in (0, 1)


def test_no_wait_refuses_while_another_command_writes(world, capsys):
    with state_dir.project_lock(world.project):
        assert deps(world, "patches", "--no-wait") == 1
    assert "another nemo-rl command" in capsys.readouterr().err






@pytest.mark.parametrize("kind", ["link", "dangling link", "file"])
def test_a_committed_nemo_rl_link_is_never_followed(world, tmp_path, monkeypatch, capsys, kind):
    """A pull request commits `.nemo-rl -> /some/dir` (or a dangling link, or a file): staging, develop, status and
    the checkout id refuse it with what to do, and nothing is written where it points."""
    from nemo_rl.errors import NemoRLError
    from nemo_rl.project import identity, landing

    env = fake_env(tmp_path / "env")
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    outside = tmp_path / "outside"
    root = world.project / ".nemo-rl"
    shutil.rmtree(root, ignore_errors=True)
    if kind == "file":
        root.write_text("not a directory\n")
    else:
        if kind == "link":
            outside.mkdir()
        root.symlink_to(outside)
    expected = "is a symbolic link" if kind != "file" else "is not a directory"
    with pytest.raises(NemoRLError, match=expected) as refused:
        landing.Staging(world.project, ["pyproject.toml"], ["patches"])
    assert f"rm {root}" in refused.value.remedy and "git rm --cached .nemo-rl" in refused.value.remedy
    with pytest.raises(NemoRLError, match=expected):
        identity.ensure_checkout_id(world.project)
    assert identity.checkout_id(world.project) is None
    mine = _clone(world, tmp_path / "mine")
    capsys.readouterr()
    assert deps(world, "develop", "megatron-core", str(mine)) == 1
    assert expected in capsys.readouterr().err
    assert deps(world, "status", "--env", str(env)) == 1
    assert expected in capsys.readouterr().err
    assert not outside.exists() or not list(outside.iterdir())  # nothing was staged or kept out there
    assert develop_state.active_checkout(env, "megatron-core") is None
    root.unlink()  # the fix it gives works
    assert deps(world, "develop", "megatron-core", str(mine)) == 0
    assert root.is_dir() and not root.is_symlink()


@pytest.mark.parametrize("committed", ["develop.json", "checkout-id", "staging-4242-x/LANDING.json"])
def test_files_a_commit_put_under_nemo_rl_are_never_state(world, capsys, committed):
    """A pull request force-adds them: a staging copy with a journal (`deps recover`, as advised, would land its
    hidden pyproject.toml), develop.json with an overlay (workers would import its code), a checkout id (two jobs at
    one path would prune each other's environments)."""
    project = world.project

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", *args], cwd=project, check=True,
                       capture_output=True)

    git("init", "-q", "-b", "main")
    path = project / state_dir.STAGING_ROOT / committed
    path.parent.mkdir(parents=True)
    path.write_text("{}\n")
    git("add", "-f", str(path))
    git("commit", "-qm", "a pull request")
    state_dir._UNTRACKED.clear()
    with pytest.raises(NemoRLError, match=r"holds 1 file\(s\) git tracks"):
        state_dir.state_root(project)
    with pytest.raises(NemoRLError, match="git tracks"):
        develop_state.read(project)
    for command in (["deps", "status"], ["deps", "recover"]):
        capsys.readouterr()
        assert main([*command, "--project", str(project)]) == 1
        assert "rm -r --cached .nemo-rl" in capsys.readouterr().err
    git("rm", "-q", "-r", "--cached", state_dir.STAGING_ROOT)
    assert state_dir.state_root(project) == project / state_dir.STAGING_ROOT  # untracked: state again
