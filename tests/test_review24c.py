"""The third review of issue 24: an environment planted at this checkout's key by another user (or as a link) is
never used; files a commit put under .nemo-rl are never this machine's state; environment metadata naming
another project is no environment of this key."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from fakes import FLAGS, fake_env

from nemo_rl.cli import main
from nemo_rl.errors import NemoRLError
from nemo_rl.project import develop_state, state_dir
from nemo_rl.workers import bytecode, environments, verified


def _planted(path, project) -> None:
    """A complete-looking environment of `project`'s key at `path` (metadata and a site-packages)."""
    fake_env(path)
    bytecode.install(path, verified.sites(path))
    meta = {"key": path.name, "flags": FLAGS, "lock_hash": "x", "project": str(project.resolve())}
    (path / environments.META).write_text(json.dumps(meta))


def test_an_environment_an_older_nemo_rl_built_gets_private_bytecode_in_place(world, tmp_path, monkeypatch):
    """Its record may still hold: ensure adds what it lacks (never removing it first: a rebuild offline without a
    bundle would leave nothing) and verifies it in full."""
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    env = venvs / environments.key_for(world.project, FLAGS)
    _planted(env, world.project)
    shutil.rmtree(env / bytecode.DIR)
    for site in verified.sites(env):
        (site / bytecode.PTH).unlink()

    def build(*args, **kwargs):
        raise RuntimeError("rebuilt")

    checked = []
    monkeypatch.setattr(environments, "_build", build)
    monkeypatch.setattr(environments, "verify", lambda *args, **kwargs: checked.append(args))
    monkeypatch.setattr(verified, "still_verified", lambda *args: False)
    environments.ensure(world.project, FLAGS)
    assert checked and bytecode.problem(env, verified.sites(env)) is None


def test_a_link_at_the_key_is_never_used(world, tmp_path, monkeypatch):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    key = environments.key_for(world.project, FLAGS)
    target = tmp_path / "theirs" / key
    _planted(target, world.project)
    venvs.mkdir()
    (venvs / key).symlink_to(target)
    with pytest.raises(NemoRLError, match="is a symbolic link, not an environment this user built"):
        environments.ensure(world.project, FLAGS)
    assert (venvs / key).is_symlink() and (target / environments.META).exists()  # left as it was


@pytest.mark.skipif(os.getuid() != 0, reason="making a directory of another user needs root")
def test_another_users_environment_at_the_key_is_never_used(world, tmp_path, monkeypatch):
    """Its key is computed from readable inputs (the project's path, uv.lock, flags, Python): in a shared
    NEMO_RL_VENV_DIR a co-user plants it first, then adds a .pth that the verification's import would run."""
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    env = venvs / environments.key_for(world.project, FLAGS)
    _planted(env, world.project)
    os.chown(env, 54321, -1)
    with pytest.raises(NemoRLError, match="owned by uid 54321, not an environment this user built"):
        environments.ensure(world.project, FLAGS)
    # the files verification checks are this user's too: one of another owner is code they may change
    mine = fake_env(tmp_path / "mine")
    (mine / "bin").mkdir()
    planted = next((mine / "lib").glob("python*/site-packages")) / "zz_evil.pth"
    planted.write_text("import os\n")
    os.chmod(planted, 0o644)
    os.chown(planted, 54321, -1)
    assert verified.loose(mine) == [str(planted.relative_to(mine))]


def test_metadata_naming_another_project_is_no_environment_of_this_key(world, tmp_path, monkeypatch):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    env = venvs / environments.key_for(world.project, FLAGS)
    _planted(env, world.project)
    meta = json.loads((env / environments.META).read_text())
    (env / environments.META).write_text(json.dumps({**meta, "project": "relative/p"}))
    with pytest.raises(NemoRLError, match="is not worker-environment metadata"):
        environments.WorkerEnv.read(env)

    def build(*args, **kwargs):
        raise RuntimeError("rebuilt")

    monkeypatch.setattr(environments, "_build", build)
    (env / environments.META).write_text(json.dumps({**meta, "project": str(tmp_path / "elsewhere")}))
    with pytest.raises(RuntimeError, match="rebuilt"):  # not used as this checkout's
        environments.ensure(world.project, FLAGS)


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


@pytest.mark.skipif(os.getuid() != 0, reason="a checkout of another user needs root")
def test_a_checkout_git_will_not_read_is_refused_not_taken_for_untracked(world):
    """A runner's checkout, and a job's container running as root: git answers "dubious ownership" and lists
    nothing, which was read as "nothing tracked", so a commit's .nemo-rl files were state again."""
    project = world.project
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=project, check=True)
    (project / state_dir.STAGING_ROOT).mkdir()
    for path in [project, *project.rglob("*")]:
        os.lchown(path, 54321, -1)
    state_dir._UNTRACKED.clear()
    with pytest.raises(NemoRLError, match="git cannot list the files it tracks") as refused:
        state_dir.state_root(project)
    assert f"safe.directory {project}" in (refused.value.remedy or "")


def test_a_lock_file_swapped_each_time_it_is_locked_ends_in_an_error(tmp_path, monkeypatch):
    """lock_file locks again when its file was removed meanwhile; a path that never names the file locked (a
    co-user swapping it in a shared directory) must not spin the command for ever."""
    from nemo_rl import locks

    calls = []

    def never_names(path, fd):
        calls.append(fd)
        assert len(calls) < 10 * locks.LOCK_FILE_TRIES, "lock_file spins on a path that never names its file"
        return False

    monkeypatch.setattr(locks, "_names", never_names)
    with pytest.raises(NemoRLError, match=f"was replaced each of the {locks.LOCK_FILE_TRIES} times"):
        locks.lock_file(tmp_path / ".k.lock", None)
    assert len(calls) == locks.LOCK_FILE_TRIES
