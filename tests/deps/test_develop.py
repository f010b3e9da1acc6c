"""The submodule edit loop without submodules: develop -> edit -> run -> push -> bump -> stop."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess

import forkworld
import pytest
from fakes import _clone, deps, fake_env
from gitfixtures import commit, git, init

from nemo_rl.cli import main
from nemo_rl.deps import develop
from nemo_rl.errors import NemoRLError
from nemo_rl.process import run
from nemo_rl.project import develop_state, installed, state_dir
from nemo_rl.project.model import Project
from nemo_rl.workers import environments

TOKENS = "megatron/core/tokens.py"


@pytest.fixture
def env(world, tmp_path, monkeypatch):
    """The project's environment with the mcore extra, as `uv sync --extra mcore` makes it."""
    path = tmp_path / "env"
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(path))
    forkworld.uv_run(world, "sync", "--quiet", "--extra", "mcore", env_dir=path)
    return path


def tokens_in(world, env):
    """What the next process sees: `uv run` (which syncs first) in the project's environment."""
    return forkworld.uv_run(world, "run", "--quiet", "--extra", "mcore", "python", "-c",
                            "from megatron.core.tokens import tokens; print(tokens())", env_dir=env).strip()


def status_row(world, env, capsys):
    capsys.readouterr()
    main(["deps", "status", "--json", "--project", str(world.project), "--env", str(env)])
    return {r["distribution"]: r for r in json.loads(capsys.readouterr().out)["forks"]}["megatron-core"]


def test_develop_edit_run_push_bump_stop(world, env, capsys, tmp_path, monkeypatch):
    megatron = world.forks["megatron-core"]
    pinned_files = world.files()
    pinned_key = environments.key_for(Project.read(world.project), ["--locked", "--extra", "mcore"])
    assert tokens_in(world, env) == "[1, 2, 0]"
    assert deps(world, "develop", "megatron-core") == 0
    checkout = world.project / ".nemo-rl/develop/megatron-core"
    assert git(checkout, "rev-parse", "HEAD") == megatron.head
    assert git(checkout, "config", "remote.origin.url") == megatron.fork_url  # public URLs; insteadOf applies
    assert git(checkout, "config", "remote.upstream.url") == megatron.upstream_url
    assert git(checkout, "branch", "--show-current") == "develop/megatron-core"

    (checkout / TOKENS).write_text("def tokens():\n    return ['edited']\n")
    assert tokens_in(world, env) == "['edited']"  # live at the next process start, through uv run
    row = status_row(world, env, capsys)
    assert row["state"] == "developing" and row["developing"]["dirty"] is True
    assert row["developing"]["ahead"] == 0 and row["developing"]["path"] == str(checkout)
    assert deps(world, "status", "--check", "--env", str(env)) == 1
    capsys.readouterr()
    main(["doctor", "--project", str(world.project)])
    # doctor runs here, in an interpreter without the overlay: it says so instead of claiming "developing"
    out = capsys.readouterr().out
    assert f"megatron-core is under `nemo-rl deps develop` ({checkout}), but this interpreter" in out
    # worker environments run the checkout's code too, under a key of their own (the fixture has no Ray, so
    # the build is called without the Ray check that ensure() adds; tests/workers/test_ray_actors.py covers that)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    (tmp_path / "venvs").mkdir(mode=0o700)
    flags = ["--locked", "--extra", "mcore"]
    developing_key = environments.key_for(Project.read(world.project), flags)
    assert developing_key != pinned_key
    environments._build(Project.read(world.project), flags, environments.Slot(tmp_path / "venvs", developing_key),
                        None, None)
    worker_python = tmp_path / "venvs" / developing_key / "bin" / "python"
    out = run([worker_python, "-c", "from megatron.core.tokens import tokens; print(tokens())"]).stdout.strip()
    assert out == "['edited']"

    work = commit(checkout, "feat: edited tokens", {})
    row = status_row(world, env, capsys)
    assert row["developing"]["ahead"] == 1 and row["developing"]["dirty"] is False
    assert world.files() == pinned_files  # pyproject.toml, uv.lock and patches/ never changed
    forkworld.uv_run(world, "lock", "--check", "--quiet")

    git(checkout, "push", "-q", "origin", "HEAD:refs/heads/work")  # the fork gets the work
    # --rev of a commit on another branch than the recorded one is refused: the record would name the wrong branch
    assert deps(world, "bump", "megatron-core", "--rev", work) == 1
    assert "is not on nemo-rl/main, the branch pyproject.toml records" in capsys.readouterr().err
    assert deps(world, "bump", "megatron-core", "--branch", "work") == 0
    assert Project.read(world.project).fork("megatron-core").branch == "work"
    assert deps(world, "develop", "--stop", "megatron-core") == 0
    assert checkout.exists()  # the developer's checkout stays
    assert not list(env.glob("lib/python3*/site-packages/_nemo_rl_develop_*.pth"))
    assert not list((tmp_path / "venvs").glob("*/lib/python3*/site-packages/_nemo_rl_develop_*.pth"))
    forkworld.uv_run(world, "sync", "--quiet", "--extra", "mcore", env_dir=env)
    assert status_row(world, env, capsys)["state"] == "ok"
    pinned = Project.read(world.project).fork("megatron-core").rev
    assert installed.installed(env, "megatron-core").commit == work == pinned
    assert tokens_in(world, env) == "['edited']"  # now from the pin, not the checkout


def test_stop_returns_to_the_locked_code(world, env, capsys):
    assert deps(world, "develop", "megatron-core") == 0
    checkout = world.project / ".nemo-rl/develop/megatron-core"
    (checkout / TOKENS).write_text("def tokens():\n    return ['local']\n")
    assert tokens_in(world, env) == "['local']"
    assert deps(world, "develop", "--stop", "megatron-core", "--remove") == 1  # dirty: --remove would lose work
    assert "uncommitted changes" in capsys.readouterr().err
    assert deps(world, "develop", "--stop", "megatron-core") == 0
    assert tokens_in(world, env) == "[1, 2, 0]"
    assert installed.installed(env, "megatron-core").commit == world.forks["megatron-core"].head
    assert status_row(world, env, capsys)["state"] == "ok"
    assert deps(world, "develop", "--stop", "megatron-core") == 1  # nothing developing
    assert "is not being developed" in capsys.readouterr().err


def test_develop_with_a_path_and_its_refusals(world, env, capsys, tmp_path):
    megatron = world.forks["megatron-core"]
    mine = tmp_path / "my-megatron"
    run(["git", "clone", "-q", str(megatron.fork), str(mine)])
    assert deps(world, "develop", "megatron-core", str(mine)) == 0
    assert status_row(world, env, capsys)["developing"]["path"] == str(mine)
    assert deps(world, "develop", "--stop", "megatron-core", "--remove") == 1  # not ours to delete
    assert deps(world, "develop", "--stop", "megatron-core") == 0 and mine.exists()

    assert deps(world, "develop", "megatron-core", str(tmp_path)) == 1
    assert "is not a git checkout" in capsys.readouterr().err
    assert deps(world, "develop", "megatron-core", str(world.forks["nemo-toolkit"].fork)) == 1
    assert "lacks the pinned commit" in capsys.readouterr().err
    pyproject = (mine / "pyproject.toml").read_text()
    commit(mine, "rename", {"pyproject.toml": pyproject.replace('name = "megatron-core"', 'name = "megatron-tron"')})
    assert deps(world, "develop", "megatron-core", str(mine)) == 1
    err = capsys.readouterr().err
    assert "'megatron-tron'" in err and "'megatron-core'" in err


@pytest.mark.parametrize("unsaved", ["uncommitted changes", "untracked files"])
def test_onto_refuses_a_checkout_with_unsaved_work(world, capsys, monkeypatch, unsaved):
    """--onto switches branches and rebases in the develop checkout: work not in a commit is refused first."""
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Maintainer")  # so that only the refusal can stop a rebase
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "maintainer@fixture.invalid")
    assert deps(world, "develop", "megatron-core") == 0
    checkout = world.project / ".nemo-rl/develop/megatron-core"
    edited = checkout / (TOKENS if unsaved == "uncommitted changes" else "megatron/core/new_module.py")
    edited.write_text("def tokens():\n    return ['unsaved']\n")
    capsys.readouterr()
    assert deps(world, "develop", "megatron-core", "--onto", "upstream/main") == 1
    err = capsys.readouterr().err
    assert f"has {unsaved}" in err and "stash push --include-untracked" in err, err
    assert git(checkout, "branch", "--show-current") == "develop/megatron-core"
    assert git(checkout, "rev-parse", "HEAD") == world.forks["megatron-core"].head
    assert git(checkout, "branch", "--list", "rebase/*") == ""
    assert edited.read_text() == "def tokens():\n    return ['unsaved']\n"


def test_onto_again_over_its_own_branch_says_how_to_go_on(world, capsys, monkeypatch):
    """A second --onto (the first interrupted, or done): git's raw "a branch named ... already exists" becomes how
    to go on with that branch or start over."""
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Maintainer")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "maintainer@fixture.invalid")
    assert deps(world, "develop", "megatron-core") == 0
    checkout = world.project / ".nemo-rl/develop/megatron-core"
    deps(world, "develop", "megatron-core", "--onto", "upstream/main")
    work = git(checkout, "branch", "--list", "rebase/*").strip(" *\n")
    assert work.startswith("rebase/megatron-core-onto-")
    git(checkout, "switch", "--quiet", "develop/megatron-core")
    capsys.readouterr()
    assert deps(world, "develop", "megatron-core", "--onto", "upstream/main") == 1
    err = capsys.readouterr().err
    assert f"already has the branch {work}" in err and f"branch -D {work}" in err, err


@pytest.mark.skipif(os.geteuid() != 0, reason="a venv directory of another user needs root (chown)")
def test_stop_with_a_refused_venv_directory_changes_nothing(world, env, capsys, tmp_path, monkeypatch):
    """The worker environments are looked up before anything is removed: a NEMO_RL_VENV_DIR that is refused
    leaves the develop in place (overlay and state), so the fix and a second --stop finish the job."""
    from nemo_rl.project import develop_state

    assert deps(world, "develop", "megatron-core") == 0
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, 4242, 4242)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(theirs))
    assert deps(world, "develop", "--stop", "megatron-core") == 1
    assert "belongs to uid 4242, not to you" in capsys.readouterr().err
    assert "megatron-core" in develop_state.read(world.project)
    assert develop_state.has_overlay(env, "megatron-core")
    monkeypatch.delenv("NEMO_RL_VENV_DIR")
    assert deps(world, "develop", "--stop", "megatron-core") == 0
    assert not develop_state.has_overlay(env, "megatron-core")


def test_remove_is_blocked_by_unsaved_work_submodules_and_ignored_files_but_not_bytecode():
    assert develop.removal_blockers([], False, ["pkg/__pycache__/m.cpython-312.pyc", "x.pyc"]) == []
    assert develop.removal_blockers(["1 stash"], True, []) == [
        "1 stash", "submodules"]
    ignored = ["data/a", "data/b", ".env", "notes.txt", "pkg/__pycache__/m.pyc"]
    assert develop.removal_blockers([], False, ignored) == ["4 ignored file(s) (data/a, data/b, .env, ...)"]
    assert develop.removal_blockers([], False, ["data/a"]) == ["1 ignored file(s) (data/a)"]


def test_develop_state_steers_no_delete(world, tmp_path, capsys):
    victim = tmp_path / "clean-repo"
    victim.mkdir()
    git(victim, "init", "-q")
    commit(victim, "mine", {"a.txt": "a"})
    state = world.project / ".nemo-rl" / "develop.json"
    state.parent.mkdir(parents=True, exist_ok=True)
    def entry(**fields: object) -> dict:
        return {"distribution": "megatron-core", "checkout": str(victim), "managed": False, "envs": [], **fields}

    state.write_text(json.dumps({"version": 1, "developed": [entry(managed=True)]}))
    assert deps(world, "develop", "--stop", "megatron-core", "--remove") == 1
    assert "only removes checkouts nemo-rl made under" in capsys.readouterr().err
    assert (victim / "a.txt").exists()
    for bad in ([entry(envs="abc")], ["x"], [entry(distribution="../x")], [entry(checkout="relative/dir")], "list"):
        state.write_text(json.dumps({"version": 1, "developed": bad}))
        for args in (["status"], ["develop", "--stop", "megatron-core"]):
            assert deps(world, *args) == 1, (bad, args)
            assert str(state) in capsys.readouterr().err
        assert main(["doctor", "--project", str(world.project)]) in (0, 1)  # never 3: a note names the file
        assert str(state) in capsys.readouterr().out


def test_remove_deletes_a_clean_checkout_nemo_rl_made(world, capsys):
    assert deps(world, "develop", "megatron-core") == 0
    checkout = world.project / ".nemo-rl/develop/megatron-core"
    assert deps(world, "develop", "--stop", "megatron-core", "--remove") == 0, capsys.readouterr().err
    assert not checkout.exists() and f"removed {checkout}" in capsys.readouterr().out


@pytest.mark.parametrize("unsaved", ["untracked", "unpushed", "stash"])
def test_remove_refuses_unsaved_work(world, capsys, unsaved):
    assert deps(world, "develop", "megatron-core") == 0
    checkout = world.project / ".nemo-rl/develop/megatron-core"
    if unsaved == "untracked":
        (checkout / "new_module.py").write_text("NEW = 1\n")
    elif unsaved == "unpushed":
        commit(checkout, "local only", {"megatron/core/local.py": "L = 1\n"})
    else:
        (checkout / "megatron/core/tokens.py").write_text("stashed\n")
        git(checkout, "stash", "-q")
    capsys.readouterr()
    assert deps(world, "develop", "--stop", "megatron-core", "--remove") == 1
    assert "--remove would lose them" in capsys.readouterr().err
    assert checkout.exists()


def test_develop_waits_for_the_project_lock(world, capsys):
    """develop writes develop.json, the overlay and its checkout under the project: one command at a time."""
    with state_dir.project_lock(world.project):
        for mode in ([], ["--onto", "upstream/main"]):
            assert deps(world, "develop", "megatron-core", *mode, "--no-wait") == 1, mode
            assert "another nemo-rl command" in capsys.readouterr().err, mode
        assert not (world.project / ".nemo-rl").exists()  # refused before the checkout or the state
    assert deps(world, "develop", "megatron-core") == 0
    with state_dir.project_lock(world.project):
        assert deps(world, "develop", "--stop", "megatron-core", "--no-wait") == 1
        assert "another nemo-rl command" in capsys.readouterr().err
    assert develop_state.read(world.project).keys() == {"megatron-core"}
def test_stop_leaves_other_checkouts_worker_environments_alone(world, tmp_path, monkeypatch):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    theirs, ours = fake_env(venvs / "a"), fake_env(venvs / "b")
    for env, project in ((theirs, tmp_path / "checkout-a"), (ours, world.project)):
        (env / environments.META).write_text(json.dumps({"key": env.name, "flags": [], "project": str(project),
                                                          "version": 1, "lock_hash": "x"}))
    assert deps(world, "develop", "megatron-core") == 0
    develop_state.install_overlay(theirs, world.project, "megatron-core", tmp_path / "a-checkout")
    token = develop_state.read(world.project)["megatron-core"].token
    develop_state.install_overlay(ours, world.project, "megatron-core", tmp_path / "b-checkout", token)
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


def test_develop_failures_say_what_to_do(world, tmp_path, capsys):
    assert deps(world, "develop", "megatron-core") == 0
    checkout = world.project / ".nemo-rl/develop/megatron-core"
    capsys.readouterr()
    assert deps(world, "develop", "megatron-core", "--onto", "upstream/no-such-branch") == 1
    err = capsys.readouterr().err
    assert "has no branch 'no-such-branch'" in err and "git ls-remote --heads" in err
    (checkout / ".git" / "rebase-merge").mkdir()  # a rebase stopped earlier and not finished
    assert deps(world, "develop", "megatron-core", "--onto", "upstream/main") == 1
    err = capsys.readouterr().err
    assert "in the middle of a rebase" in err and "rebase --abort" in err
    (checkout / ".git" / "rebase-merge").rmdir()
    import shutil

    shutil.rmtree(checkout / ".git")  # git would now answer for whatever repository is above it
    (checkout / "notes.txt").write_text("mine")
    assert deps(world, "develop", "--stop", "megatron-core", "--remove") == 1
    assert "no longer a git checkout" in capsys.readouterr().err
    assert (checkout / "notes.txt").exists()


def test_remove_refuses_a_checkout_with_submodules(world, capsys):
    """A submodule's local commits and stashes live in .git/modules: `--remove` would delete them unseen."""
    assert deps(world, "develop", "megatron-core") == 0
    checkout = world.project / ".nemo-rl" / "develop" / "megatron-core"
    (checkout / ".git" / "modules" / "sub").mkdir(parents=True)
    capsys.readouterr()
    assert deps(world, "develop", "--stop", "megatron-core", "--remove") == 1
    assert "submodules" in capsys.readouterr().err
    assert checkout.exists()
def test_stop_says_a_deleted_checkout_is_gone(world, tmp_path, monkeypatch, capsys):
    import shutil

    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(fake_env(tmp_path / "env")))
    assert deps(world, "develop", "megatron-core") == 0
    checkout = develop_state.read(world.project)["megatron-core"].checkout
    shutil.rmtree(checkout)
    capsys.readouterr()
    assert deps(world, "develop", "--stop", "megatron-core") == 0
    out = capsys.readouterr().out
    assert f"the checkout {checkout} is already gone" in out and "stays at" not in out, out
def test_develop_before_uv_sync_gives_advice_that_works(world, tmp_path, monkeypatch, capsys):
    """No environment yet: develop records the checkout and says to run develop again after `uv sync`; doing so
    puts that checkout in front, never answering "already developed" for an overlay not yet applied."""
    env = tmp_path / "env"
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    mine = _clone(world, tmp_path / "my megatron")
    assert deps(world, "develop", "megatron-core", str(mine)) == 0
    assert "after `uv sync`, run `nemo-rl deps develop megatron-core` again" in capsys.readouterr().out
    fake_env(env)  # what `uv sync` makes
    assert deps(world, "develop", "megatron-core") == 0, capsys.readouterr().err
    assert develop_state.active_checkout(env, "megatron-core") == mine.resolve()
    assert deps(world, "develop", "megatron-core") == 1  # now it is applied: the answer is "already developed"
    assert "already developed" in capsys.readouterr().err


def test_develop_after_uv_sync_refuses_a_recorded_checkout_that_is_gone(world, tmp_path, monkeypatch, capsys):
    env = tmp_path / "env"
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    mine = _clone(world, tmp_path / "my megatron")
    assert deps(world, "develop", "megatron-core", str(mine)) == 0
    fake_env(env)
    shutil.rmtree(mine)
    capsys.readouterr()
    assert deps(world, "develop", "megatron-core") == 1
    err = capsys.readouterr().err
    assert "is gone" in err and "deps develop --stop megatron-core" in err, err
    assert not develop_state.has_overlay(env, "megatron-core")


@pytest.mark.parametrize("present", [True, False])
def test_a_checkout_path_with_a_line_break_is_refused_before_anything_is_written(world, tmp_path, monkeypatch,
                                                                                capsys, present):
    env = tmp_path / "env"
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    if present:
        fake_env(env)
    mine = _clone(world, tmp_path / "nl\u2028clone")
    monkeypatch.chdir(mine)  # typed as ".", only the resolved path holds the line break (typed, the parser's exit 2)
    assert deps(world, "develop", "megatron-core", ".") == 1
    assert "control character" in capsys.readouterr().err
    assert not (world.project / ".nemo-rl/develop.json").exists()
    assert not develop_state.shadow_dir(world.project, "megatron-core").exists()


def test_a_tree_or_blob_is_refused_and_a_commit_or_an_unknown_sha_is_let_through(tmp_path):
    repo = init(tmp_path / "fork")
    head = commit(repo, "one", {"pkg/a.py": "A = 1\n"})
    tree = git(repo, "rev-parse", f"{head}^{{tree}}")
    blob = git(repo, "rev-parse", f"{head}:pkg/a.py")
    for sha, kind in ((tree, "tree"), (blob, "blob")):
        with pytest.raises(NemoRLError) as refused:
            develop._refuse_non_commit(repo, sha, sha[:12])
        assert refused.value.what == f"--onto {sha[:12]} is a {kind}, not a commit"
        assert "upstream/BRANCH" in refused.value.remedy
    assert develop._refuse_non_commit(repo, head, "main") is None
    assert develop._refuse_non_commit(repo, "b" * 40, "b" * 40) is None  # not here yet: the fetch decides


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
def test_the_stash_advice_of_onto_works_when_followed(world, monkeypatch, capsys):
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, "dev" if key.endswith("NAME") else "dev@nemo-rl.invalid")
    assert deps(world, "develop", "megatron-core") == 0
    checkout = world.project / ".nemo-rl/develop/megatron-core"
    (checkout / "megatron/core/feature.py").write_text("FEATURE = 2  # unsaved\n")
    (checkout / "notes.txt").write_text("untracked\n")
    capsys.readouterr()
    assert deps(world, "develop", "megatron-core", "--onto", "upstream/main") == 1
    err = capsys.readouterr().err
    advice = re.findall(r"`(git -C [^`]+)`", err)
    assert len(advice) == 2 and "stash push" in advice[0] and "stash pop" in advice[1], err
    subprocess.run(shlex.split(advice[0]), check=True, capture_output=True)  # as the user would type it
    assert deps(world, "develop", "megatron-core", "--onto", "upstream/main") == 0, capsys.readouterr().err
    subprocess.run(shlex.split(advice[1]), check=True, capture_output=True)
    assert (checkout / "megatron/core/feature.py").read_text() == "FEATURE = 2  # unsaved\n"
    assert (checkout / "notes.txt").read_text() == "untracked\n"
    assert git(checkout, "branch", "--show-current").startswith("rebase/megatron-core-onto-")


def test_onto_during_a_merge_says_to_finish_it(world, monkeypatch, capsys):
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, "dev" if key.endswith("NAME") else "dev@nemo-rl.invalid")
    assert deps(world, "develop", "megatron-core") == 0
    checkout = develop_state.read(world.project)["megatron-core"].checkout

    def git(*args):
        return subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True)

    conflicted = checkout / "megatron/core/conflict.py"
    git("switch", "-q", "-c", "other")
    conflicted.write_text("A\n")
    git("add", ".")
    git("commit", "-qm", "a")
    git("switch", "-q", "-")
    conflicted.write_text("B\n")
    git("add", ".")
    git("commit", "-qm", "b")
    assert git("merge", "other").returncode != 0  # stopped at the conflict
    capsys.readouterr()
    assert deps(world, "develop", "megatron-core", "--onto", "upstream/main") == 1
    err = capsys.readouterr().err
    assert "a merge is under way" in err and f"git -C {checkout} merge --abort" in err and "stash" not in err, err
def test_onto_advice_names_a_path_with_spaces_as_one_word(world, tmp_path, monkeypatch, capsys):
    """The advice is pasted into a shell: `git -C /tmp/my clone ü rebase --abort` would be three words."""
    env = fake_env(tmp_path / "env")
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    mine = _clone(world, tmp_path / "my clone ü")
    assert deps(world, "develop", "megatron-core", str(mine)) == 0
    (mine / ".git" / "rebase-merge").mkdir()  # a rebase under way
    capsys.readouterr()
    assert deps(world, "develop", "megatron-core", "--onto", "main") == 1
    err = capsys.readouterr().err
    assert f"git -C {shlex.quote(str(mine))} rebase --abort" in err, err
    assert f"`git -C {mine} rebase" not in err


def test_onto_without_a_committer_identity_changes_nothing_and_its_fix_works(world, monkeypatch, capsys):
    """No identity (none set, and git told not to guess one from the host name): the rebase would stop after its
    branch was made. It is checked first, the checkout stays as it was, and the two commands printed set one."""
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL", "EMAIL"):
        monkeypatch.delenv(key, raising=False)
    count = int(os.environ.get("GIT_CONFIG_COUNT", "0"))
    monkeypatch.setenv(f"GIT_CONFIG_KEY_{count}", "user.useConfigOnly")
    monkeypatch.setenv(f"GIT_CONFIG_VALUE_{count}", "true")
    monkeypatch.setenv("GIT_CONFIG_COUNT", str(count + 1))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    assert deps(world, "develop", "megatron-core") == 0
    checkout = develop_state.read(world.project)["megatron-core"].checkout
    branches, head = git(checkout, "branch", "--list"), git(checkout, "rev-parse", "HEAD")
    capsys.readouterr()
    assert deps(world, "develop", "megatron-core", "--onto", "upstream/main") == 1
    err = capsys.readouterr().err
    assert f"error: git cannot name a committer for the rebased commits in {checkout}: " in err, err
    assert git(checkout, "branch", "--list") == branches and git(checkout, "rev-parse", "HEAD") == head
    assert not develop.git_checkout.rebasing(checkout)
    advice = re.findall(r"`(git -C [^`]+)`", err)
    assert [shlex.split(a)[3:5] for a in advice] == [["config", "user.name"], ["config", "user.email"]], err
    for command in advice:
        subprocess.run(shlex.split(command), check=True)
    assert deps(world, "develop", "megatron-core", "--onto", "upstream/main") == 0, capsys.readouterr().err
    assert git(checkout, "branch", "--show-current").startswith("rebase/megatron-core-onto-")
