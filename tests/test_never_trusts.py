"""Paths, links, state files and caches from the filesystem are data (issue: "Never hangs, never trusts"):
a path never becomes code, a planted link is never written through, a staged link is never landed, develop
state says what runs, and a filesystem that cannot lock or a damaged state file is the user's to fix (exit 1)."""

import errno
import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gitfixtures import git

from nemo_rl import locks, values
from nemo_rl.cli import main
from nemo_rl.errors import NemoRLError
from nemo_rl.project import develop_state, landing
from nemo_rl.workers import bundles, environments

NEWLINE_PATH = "co\nimport os; os.system('touch PWNED')\n"


def deps(world, *args):
    return main(["deps", *args, "--project", str(world.project)])


def fake_env(path: Path) -> Path:
    """An environment as far as the overlay and status are concerned: a site-packages directory."""
    (path / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages").mkdir(parents=True)
    (path / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return path


def fork_state(world, env, capsys) -> str:
    capsys.readouterr()
    code = deps(world, "status", "--json", "--env", str(env))
    out = capsys.readouterr()
    assert code == 0 and out.out, out.err
    rows = {r["distribution"]: r for r in json.loads(out.out)["forks"]}
    return rows["megatron-core"]["state"]


# --- 2. paths and links -------------------------------------------------------------------------------------------

def test_a_path_with_a_newline_never_reaches_a_pth(tmp_path):
    env = fake_env(tmp_path / "env")
    for checkout, shadow in ((tmp_path / NEWLINE_PATH, tmp_path / "shadow"), (tmp_path / "co", tmp_path / "a\rb")):
        with pytest.raises(NemoRLError, match="control character"):
            develop_state.install_overlay(env, "megatron-core", checkout, shadow)
    assert not list(env.rglob("*.pth"))
    develop_state.install_overlay(env, "megatron-core", tmp_path / "plain co", tmp_path / "shadow")
    assert len(list(env.rglob("*.pth"))) == 1


def test_a_worker_environment_path_with_a_newline_is_refused(world, tmp_path):
    root = tmp_path / "venvs\nimport os"
    root.mkdir()
    with pytest.raises(NemoRLError, match="control character"):
        environments._build(world.project, [], environments.Slot(root, "k"))
    assert list(root.iterdir()) == []


@pytest.mark.parametrize("planted", ["symlink", "hardlink", "directory"])
def test_a_planted_lock_file_is_never_written_through(tmp_path, planted):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    root = tmp_path / "venvs"
    root.mkdir()
    where = environments.Slot(root, "k")
    if planted == "symlink":
        where.lock_path.symlink_to(victim)
    elif planted == "hardlink":
        os.link(victim, where.lock_path)
    else:
        where.lock_path.mkdir()
    with pytest.raises(NemoRLError, match=f"lock file {where.lock_path}"):
        with where.locked():
            pass
    assert victim.read_text() == "precious"
    missing = tmp_path / "gone.txt"
    (root / ".j.lock").symlink_to(missing)  # a dangling link: O_CREAT would make the target
    with pytest.raises(NemoRLError, match="symbolic link"):
        with environments.Slot(root, "j").locked():
            pass
    assert not missing.exists()


def test_onto_leaves_a_users_clone_configuration_alone(world, tmp_path, monkeypatch, capsys):
    mine = tmp_path / "my-megatron"
    subprocess.run(["git", "clone", "-q", str(world.forks["megatron-core"].fork), str(mine)], check=True)
    assert deps(world, "develop", "megatron-core", str(mine)) == 0
    config = (mine / ".git" / "config").read_text()
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, "dev" if key.endswith("NAME") else "dev@nemo-rl.invalid")
    assert deps(world, "develop", "megatron-core", "--onto", "upstream/main") == 0, capsys.readouterr().err
    assert (mine / ".git" / "config").read_text() == config
    assert git(mine, "branch", "--show-current").startswith("rebase/megatron-core-onto-")


def test_onto_a_tree_or_blob_makes_no_branch(world, capsys):
    assert deps(world, "develop", "megatron-core") == 0
    checkout = world.project / ".nemo-rl/develop/megatron-core"
    branches, head = git(checkout, "branch", "--list"), git(checkout, "rev-parse", "HEAD")
    tree = git(checkout, "rev-parse", "HEAD^{tree}")
    blob = git(checkout, "rev-parse", "HEAD:pyproject.toml")
    for sha, kind in ((tree, "tree"), (blob, "blob")):
        capsys.readouterr()
        assert deps(world, "develop", "megatron-core", "--onto", sha) == 1
        assert f"is a {kind}, not a commit" in capsys.readouterr().err
        assert git(checkout, "branch", "--list") == branches and git(checkout, "rev-parse", "HEAD") == head


@pytest.mark.parametrize("planted", ["dir-link", "file-link", "link-inside"])
def test_recover_lands_no_staged_link(world, tmp_path, capsys, planted):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("theirs")
    staging = world.project / ".nemo-rl" / "staging-1-x"
    staging.mkdir(parents=True)
    records = world.project / "patches" / "megatron-core"
    before = sorted(p.name for p in records.iterdir())
    if planted == "dir-link":
        (staging / "patches").mkdir()
        (staging / "patches" / "megatron-core").symlink_to(outside)
        moves = ["patches/megatron-core"]
    elif planted == "file-link":
        (staging / "uv.lock").symlink_to(outside / "secret")
        moves = ["uv.lock"]
    else:
        (staging / "patches" / "megatron-core").mkdir(parents=True)
        (staging / "patches" / "megatron-core" / "index.toml").symlink_to(outside / "secret")
        moves = ["patches/megatron-core"]
    (staging / "LANDING.json").write_text(json.dumps({"moves": moves}))
    lock = (world.project / "uv.lock").read_text()
    assert deps(world, "recover") == 1
    assert "is not a file a landing moves" in capsys.readouterr().err
    assert not records.is_symlink() and sorted(p.name for p in records.iterdir()) == before
    assert not (world.project / "uv.lock").is_symlink() and (world.project / "uv.lock").read_text() == lock


def _other_filesystem(project: Path) -> Path:
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK) or os.stat(shm).st_dev == os.stat(project).st_dev:
        pytest.skip("needs /dev/shm on another filesystem than the test's temporary directory")
    import tempfile

    return Path(tempfile.mkdtemp(prefix="nemo-rl-exdev-", dir=shm))


def test_nemo_rl_dir_on_another_filesystem_is_refused_before_staging(world, capsys):
    elsewhere = _other_filesystem(world.project)
    try:
        (world.project / ".nemo-rl").symlink_to(elsewhere)
        with pytest.raises(NemoRLError, match="on another filesystem"):
            landing.require_renames(world.project)
        with pytest.raises(NemoRLError, match="on another filesystem"):
            landing.Staging(world.project, ["uv.lock"], [])
        assert [p.name for p in elsewhere.iterdir()] == []
        # a journal an older nemo-rl left there: recover finishes it (a copy), exit 0, never 3
        staging = elsewhere / "staging-1-x"
        staging.mkdir()
        (staging / "uv.lock").write_text("# landed\n")
        (staging / "LANDING.json").write_text(json.dumps({"moves": ["uv.lock"]}))
        assert deps(world, "recover") == 0, capsys.readouterr().err
        assert (world.project / "uv.lock").read_text() == "# landed\n"
    finally:
        import shutil

        shutil.rmtree(elsewhere, ignore_errors=True)


# --- 4. develop state is the truth --------------------------------------------------------------------------------

def test_status_does_not_say_developing_when_the_overlay_is_gone(world, tmp_path, monkeypatch, capsys):
    env = fake_env(tmp_path / "env")
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    assert deps(world, "develop", "megatron-core") == 0
    assert fork_state(world, env, capsys) == "developing"
    import shutil

    shutil.rmtree(develop_state.shadow_dir(world.project, "megatron-core"))  # what `git clean -fdx` removes
    assert fork_state(world, env, capsys) == "develop not applied"
    shutil.rmtree(world.project / ".nemo-rl")  # `rm -rf .nemo-rl`: the .pth is left, pointing at nothing
    assert fork_state(world, env, capsys) == "not installed"
    assert deps(world, "develop", "--stop", "megatron-core") == 0  # the dead .pth is still removed
    assert not list(env.rglob("*.pth"))


def test_stop_leaves_other_checkouts_worker_environments_alone(world, tmp_path, monkeypatch):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    theirs, ours = fake_env(venvs / "a"), fake_env(venvs / "b")
    for env, project in ((theirs, tmp_path / "checkout-a"), (ours, world.project)):
        (env / environments.META).write_text(json.dumps({"key": env.name, "flags": [], "project": str(project),
                                                          "lock_hash": "x"}))
    assert deps(world, "develop", "megatron-core") == 0
    shadow = develop_state.shadow_dir(world.project, "megatron-core")
    develop_state.install_overlay(theirs, "megatron-core", tmp_path / "a-checkout", shadow)
    develop_state.install_overlay(ours, "megatron-core", tmp_path / "b-checkout", shadow)
    assert deps(world, "develop", "--stop", "megatron-core") == 0
    assert develop_state.has_overlay(theirs, "megatron-core") and not develop_state.has_overlay(ours, "megatron-core")


def test_remove_keeps_ignored_files(world, capsys):
    assert deps(world, "develop", "megatron-core") == 0
    checkout = world.project / ".nemo-rl/develop/megatron-core"
    with open(checkout / ".git" / "info" / "exclude", "a") as fh:
        fh.write("data/\n__pycache__/\n")
    (checkout / "data").mkdir()
    (checkout / "data" / "shard-0.bin").write_text("weeks of work")
    (checkout / "megatron" / "core" / "__pycache__").mkdir()  # what running the checkout leaves is not work
    (checkout / "megatron" / "core" / "__pycache__" / "tokens.cpython-312.pyc").write_bytes(b"")
    capsys.readouterr()
    assert deps(world, "develop", "--stop", "megatron-core", "--remove") == 1
    err = capsys.readouterr().err
    assert "ignored file(s) (data/shard-0.bin)" in err and "--remove would lose them" in err
    assert (checkout / "data" / "shard-0.bin").exists()
    (checkout / "data" / "shard-0.bin").unlink()
    (checkout / "data").rmdir()
    assert deps(world, "develop", "--stop", "megatron-core", "--remove") == 0
    assert not checkout.exists()


# --- 5. exit 3 where the user can act -----------------------------------------------------------------------------

def test_a_filesystem_without_locks_is_the_users_to_fix(world, monkeypatch, capsys):
    real = fcntl.flock

    def no_lockd(fd, operation):
        if operation & fcntl.LOCK_UN:
            return real(fd, operation)
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_lockd)
    for args in (["recover"], ["develop", "--stop", "megatron-core"], ["patches", "megatron-core"]):
        assert deps(world, *args) == 1, args
        err = capsys.readouterr().err
        assert f"cannot lock {world.project}" in err and "does not support locks" in err, err
    with pytest.raises(NemoRLError, match="does not support locks"):
        locks.held(world.project)


DEEP = "[" * 100000


def test_deeply_nested_state_files_name_the_file(world, tmp_path, capsys):
    state = world.project / ".nemo-rl" / "develop.json"
    state.parent.mkdir(parents=True)
    state.write_text(DEEP)
    assert deps(world, "status") == 1
    assert f"cannot read {state}: it is nested too deeply" in capsys.readouterr().err
    state.unlink()
    staging = world.project / ".nemo-rl" / "staging-1-x"
    staging.mkdir()
    (staging / "LANDING.json").write_text(DEEP)
    assert deps(world, "recover") == 1
    assert f"landing journal {staging / 'LANDING.json'}: it is nested too deeply" in capsys.readouterr().err
    env = tmp_path / "venvs" / "k"
    env.mkdir(parents=True)
    (env / environments.META).write_text(DEEP)
    with pytest.raises(NemoRLError, match="nested too deeply"):
        environments.describe(env)
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / bundles.MANIFEST).write_text(DEEP)
    with pytest.raises(NemoRLError, match=f"{bundle / bundles.MANIFEST}.*nested too deeply"):
        bundles.read_manifest(bundle)


def test_state_json_passes_a_missing_file_through(tmp_path):
    with pytest.raises(FileNotFoundError):
        values.state_json(tmp_path / "absent.json", "fix")
    (tmp_path / "bad.json").write_bytes(b"\xff\xfe")
    with pytest.raises(NemoRLError, match="bad.json"):
        values.state_json(tmp_path / "bad.json", "fix")
