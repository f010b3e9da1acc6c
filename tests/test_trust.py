"""Everything read from disk is data: a hostile pyproject.toml, hand-edited state files and two commands at once
never run a command, reach outside the project, or lose work (issue: "Trust nothing you read")."""

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import forkworld
import pytest
from gitfixtures import commit, git

from nemo_rl.cli import main
from nemo_rl.project import journal, landing, lockfile, state_dir

HOSTILE_REV = "--upload-pack=touch {marker};git-upload-pack"


def deps(world, *args):
    return main(["deps", *args, "--project", str(world.project)])


def set_rev(world, distribution, rev, url=None):
    path = world.project / "pyproject.toml"
    fork = world.forks[distribution]
    text = path.read_text().replace(f'rev = "{fork.head}"', f'rev = "{rev}"')
    if url is not None:
        text = text.replace(f'git = "{fork.fork_url}"', f'git = "{url}"')
    path.write_text(text)


def test_a_path_source_a_pull_request_adds_is_never_built_to_check_the_lock(world, tmp_path, capsys):
    """`deps status` and `doctor` on a pull request that adds a path dependency with a setup.py: checking uv.lock
    would need its build (its own code); it is named, never run."""
    marker, evil = tmp_path / "pwned", tmp_path / "evil"
    evil.mkdir()
    (evil / "setup.py").write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
                                   "from setuptools import setup\nsetup(name='evil', version='0.1')\n")
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text().replace("dependencies = []", 'dependencies = ["evil"]', 1)
                    .replace("[tool.uv.sources]\n", f"[tool.uv.sources]\nevil = {{ path = {str(evil)!r} }}\n", 1))
    assert deps(world, "status", "--check") == 1
    out = capsys.readouterr().out
    assert "uv.lock was not checked against pyproject.toml: checking it needs a build" in out and "evil" in out
    assert main(["doctor", "--project", str(world.project)]) == 1
    assert "checking it needs a build, which nemo-rl never runs" in capsys.readouterr().out
    assert not marker.exists()


def _in_tree_backend(directory: Path, marker: Path) -> str:
    """A build backend in the checkout itself (nothing to fetch, so --offline cannot stop it) that records that it
    ran; the [build-system] table that names it."""
    (directory / "backend.py").write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
                                          "def prepare_metadata_for_build_wheel(*a, **k): raise SystemExit(1)\n"
                                          "def build_wheel(*a, **k): raise SystemExit(1)\n")
    return '\n[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'


@pytest.mark.parametrize("where", ["project", "member"])
def test_dynamic_metadata_a_pull_request_makes_is_never_built_to_check_the_lock(world, tmp_path, capsys, where):
    """The project's own [project] made dynamic, or a workspace member's: uv would run their build backend even
    with --no-build. Named; uv is not asked."""
    marker = tmp_path / "pwned"
    path = world.project / "pyproject.toml"
    text = path.read_text()
    if where == "project":
        text = text.replace("dependencies = []\n", 'dynamic = ["dependencies"]\n', 1)
        text = text.replace("package = false", "package = true") + _in_tree_backend(world.project, marker)
    else:
        member = world.project / "packages" / "member"
        member.mkdir(parents=True)
        (member / "pyproject.toml").write_text('[project]\nname = "member"\nversion = "0.1"\n'
                                               'dynamic = ["dependencies"]\n' + _in_tree_backend(member, marker))
        text = text.replace("dependencies = []", 'dependencies = ["member"]', 1).replace(
            "[tool.uv.sources]\n", "[tool.uv.sources]\nmember = { workspace = true }\n", 1)
        text += '\n[tool.uv.workspace]\nmembers = ["packages/*"]\n'
    path.write_text(text)
    assert deps(world, "status", "--check") == 1
    out = capsys.readouterr().out
    assert "uv.lock was not checked against pyproject.toml: pyproject.toml " in out and not marker.exists()
    assert ("has a dynamic [project] (['dependencies'])" if where == "project" else
            "declares a uv workspace ([tool.uv.workspace])") in out


def test_a_workspace_root_a_pull_request_puts_above_the_project_is_never_seen(world, tmp_path, capsys):
    """A pyproject.toml above the project that makes it a member of a workspace with a dynamic member: uv walks up
    to it from the project. The check runs on copies elsewhere, so uv never finds it."""
    marker, root = tmp_path / "pwned", world.project.parent
    evil = root / "evil"
    evil.mkdir()
    (evil / "pyproject.toml").write_text('[project]\nname = "evil"\nversion = "0.1"\ndynamic = ["dependencies"]\n'
                                         + _in_tree_backend(evil, marker))
    (root / "pyproject.toml").write_text('[project]\nname = "root"\nversion = "0.1"\n'
                                         f'[tool.uv.workspace]\nmembers = ["{world.project.name}", "evil"]\n')
    (root / "uv.lock").write_text((world.project / "uv.lock").read_text())
    deps(world, "status", "--check")
    main(["doctor", "--project", str(world.project)])
    capsys.readouterr()
    assert not marker.exists()


def _recording_python(path: Path, marker: Path) -> None:
    """An interpreter a pull request commits: records that it ran, then behaves as Python."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho ran >> {marker}\nexec {sys.executable} \"$@\"\n")
    path.chmod(0o755)


@pytest.mark.parametrize("where", [".python-version", ".venv"])
def test_an_interpreter_a_pull_request_names_never_runs_to_check_the_lock(world, tmp_path, capsys, where):
    """A .python-version naming a script of the checkout, or a committed .venv/bin/python: uv would run either to
    check uv.lock. It is given the interpreter running nemo-rl, and no project environment."""
    marker = tmp_path / "pwned"
    if where == ".python-version":
        _recording_python(world.project / "tools-py", marker)
        (world.project / ".python-version").write_text("./tools-py\n")
    else:
        _recording_python(world.project / ".venv" / "bin" / "python", marker)
        (world.project / ".venv" / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).parent}\n")
    deps(world, "status")
    main(["doctor", "--project", str(world.project)])
    capsys.readouterr()
    assert not marker.exists()


def test_the_lock_is_checked_with_the_python_running_nemo_rl(world, tmp_path, monkeypatch, capsys):
    """The copies sit where no .python-version is, and PATH may hold no Python (or a pyenv shim of another
    version): uv is given nemo-rl's own, and the check is made."""
    tools = tmp_path / "tools"
    tools.mkdir()
    os.symlink(shutil.which("git"), tools / "git")
    monkeypatch.setenv("PATH", str(tools))
    deps(world, "status")
    out = capsys.readouterr().out
    assert "uv.lock:" not in out and "megatron-core" in out


def test_a_workspace_above_nemo_rls_cache_is_never_taken_for_the_copies_root(world, tmp_path, monkeypatch, capsys):
    """nemo-rl's cache inside the checkout (a CI keeping its caches in the workspace), and a pull request's
    pyproject.toml above it whose workspace takes the copies for a member: named, and uv is not asked."""
    marker, cache = tmp_path / "pwned", world.project / ".cache"
    cache.mkdir()
    (cache / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "0.1"\ndynamic = ["dependencies"]\n'
                                          '[tool.uv.workspace]\nmembers = ["nemo-rl/lock-check/*"]\n'
                                          + _in_tree_backend(cache, marker))
    monkeypatch.setenv("NEMO_RL_CACHE_DIR", str(cache / "nemo-rl"))
    assert deps(world, "status", "--check") == 1
    out = capsys.readouterr().out
    assert f"{cache / 'pyproject.toml'} declares a uv workspace" in out and "NEMO_RL_CACHE_DIR" in out
    assert not marker.exists()


def test_a_cache_directory_nemo_rl_cannot_use_leaves_the_rest_of_status(world, tmp_path, monkeypatch, capsys):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("NEMO_RL_CACHE_DIR", str(tmp_path / "a-file"))
    assert deps(world, "status", "--check") == 1
    out = capsys.readouterr().out
    assert "uv.lock was not checked against pyproject.toml: NEMO_RL_CACHE_DIR" in out and "megatron-core" in out


def test_a_local_git_source_is_named_not_checked(world, tmp_path, capsys):
    """A repository the checkout may hold (a file: URL, or a path): uv would check it out into the user's cache."""
    path, local = world.project / "pyproject.toml", (tmp_path / "evil").as_uri()
    source = f'[tool.uv.sources]\nevil = {{ git = "{local}", rev = "{"a" * 40}" }}\n'
    path.write_text(path.read_text().replace("[tool.uv.sources]\n", source, 1))
    assert deps(world, "status", "--check") == 1
    assert f"[tool.uv.sources] evil is the local git repository '{local}'" in capsys.readouterr().out


def test_the_lock_check_writes_into_no_cache_the_checkout_names(world, tmp_path, monkeypatch, capsys):
    """A pull request's `[tool.uv] cache-dir` would have the check tag a directory as a cache (CACHEDIR.TAG: a
    backup skips it): uv is given the user's own cache (here without UV_CACHE_DIR, which would override it)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("UV_CACHE_DIR", raising=False)
    victim = tmp_path / "home-of-a-user"
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text().replace("[tool.uv]\n", f"[tool.uv]\ncache-dir = {str(victim)!r}\n", 1))
    deps(world, "status")
    capsys.readouterr()
    assert not victim.exists()


def test_uvs_refusal_to_build_is_read_with_colour_forced(world, tmp_path, capsys, monkeypatch):
    """FORCE_COLOR (many CI systems set it) colours uv's output: the refusal is still found, and the remedy is
    never `uv lock` (which would build the source)."""
    monkeypatch.setenv("FORCE_COLOR", "1")
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "setup.py").write_text("from setuptools import setup\nsetup(name='evil', version='0.1')\n")
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text().replace("dependencies = []", 'dependencies = ["evil"]', 1)
                    .replace("[tool.uv.sources]\n", f"[tool.uv.sources]\nevil = {{ path = {str(evil)!r} }}\n", 1))
    assert deps(world, "status", "--check") == 1
    out = capsys.readouterr().out
    assert "uv.lock was not checked against pyproject.toml: checking it needs a build" in out
    assert "\x1b" not in out and "\\x1b" not in out  # uv's colours asked off, not shown escaped


@pytest.mark.parametrize("url", [None, "."])
def test_a_hostile_rev_runs_no_command(world, tmp_path, capsys, url):
    marker = tmp_path / "pwned"
    set_rev(world, "megatron-core", HOSTILE_REV.format(marker=marker), url)
    new_head = commit(world.forks["nemo-toolkit"].fork, "feat: x", {"nemo/x.py": "X = 1\n"})
    attempts = [
        ["patches", "--check", "megatron-core"], ["patches", "megatron-core"],
        ["patches", "export", "megatron-core", str(tmp_path / "out")], ["develop", "megatron-core"],
        ["bump", "megatron-core", "--rev", new_head, "--dry-run"], ["verify", "megatron-core"],
    ]
    for args in attempts:
        assert deps(world, *args) == 1, args
        err = capsys.readouterr().err
        assert "megatron-core" in err and ("full 40-hex" in err or "git URL" in err), (args, err)
        assert not marker.exists(), args
    # status shows the bad pin as a row (exit 0 without --check) and hands it to nothing
    if url is None:
        assert deps(world, "status") == 0
        assert "megatron-core: bad pin" in capsys.readouterr().out
        assert deps(world, "status", "--check") == 1
    assert not marker.exists()


def test_a_fork_key_is_never_a_path(world, tmp_path, capsys):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine")
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text().replace("\nmegatron-core = {", '\n"../../victim" = {')
                    .replace("[tool.nemo-rl.forks.megatron-core]", '[tool.nemo-rl.forks."../../victim"]'))
    for args in (["patches"], ["patches", "--check"], ["status"], ["develop", "../../victim"]):
        assert deps(world, *args) == 1, args
        assert "is not a distribution name" in capsys.readouterr().err
    assert (victim / "keep.txt").read_text() == "mine"
    cache = tmp_path / "nemo-rl-cache"
    assert not any(".." in p.name for p in cache.rglob("*")) if cache.exists() else True
    assert not list(tmp_path.glob("victim-*"))


def test_a_landing_journal_moves_only_project_files(world, tmp_path, capsys):
    outside = world.project.parent / "outside.txt"
    outside.write_text("untouched")
    staging = world.project / ".nemo-rl" / "staging-1-x"
    staging.mkdir(parents=True)
    (staging / "../../outside.txt").resolve()  # the hostile target
    (staging / "outside.txt").write_text("overwritten")
    for moves in (["../outside.txt"], ["patches/../../outside.txt"], ["README.md"], "uv.lock"):
        (staging / "LANDING.json").write_text(json.dumps({"moves": moves}))
        assert deps(world, "recover") == 1, moves
        err = capsys.readouterr().err
        assert "names paths a landing never moves" in err and "git status" in err
    assert outside.read_text() == "untouched"
    (staging / "LANDING.json").write_text("{not json")  # a corrupt journal is no dead end
    assert deps(world, "recover") == 1
    assert "cannot read the landing journal" in capsys.readouterr().err


def test_a_landing_journal_never_moves_through_a_link_out_of_the_project(tmp_path):
    """patches/ a link to a directory of the user's: landing patches/megatron-core there would replace theirs."""
    from nemo_rl.errors import NemoRLError

    project, outside = tmp_path / "project", tmp_path / "outside"
    (outside / "megatron-core").mkdir(parents=True)
    (outside / "megatron-core" / "keep.txt").write_text("mine")
    project.mkdir()
    os.symlink(outside, project / "patches")
    staging = project / ".nemo-rl" / "staging-1-x"
    (staging / "patches" / "megatron-core").mkdir(parents=True)
    (staging / "patches" / "megatron-core" / "0001-x.patch").write_text("staged")
    (staging / "LANDING.json").write_text(json.dumps({"moves": ["patches/megatron-core"]}))
    try:
        with pytest.raises(NemoRLError, match="points outside"):
            journal.finish(project, staging)
    finally:
        assert [p.name for p in (outside / "megatron-core").iterdir()] == ["keep.txt"]  # theirs, untouched
    assert (staging / "LANDING.json").exists()  # nothing moved: recover says the same again


def test_a_landing_left_by_a_live_pid_is_recovered(world, capsys):
    """In a container the PID of a killed bump is alive again (often our own): liveness is the lock, not the PID."""
    new_pyproject = (world.project / "pyproject.toml").read_text() + "\n# landed\n"
    staging = world.project / ".nemo-rl" / f"staging-{os.getpid()}-reused"
    staging.mkdir(parents=True)
    (staging / "pyproject.toml").write_text(new_pyproject)
    before = {"pyproject.toml": journal.digest(world.project / "pyproject.toml")}
    (staging / "LANDING.json").write_text(json.dumps({"moves": ["pyproject.toml"], "before": before}))
    assert deps(world, "status", "--json") == 0
    assert {r["state"] for r in json.loads(capsys.readouterr().out)["forks"]} == {"landing interrupted"}
    assert deps(world, "recover") == 0
    assert "finished an interrupted landing" in capsys.readouterr().out
    assert (world.project / "pyproject.toml").read_text() == new_pyproject
    # while a command holds the project lock, its staging is its own, not a leftover
    staging.mkdir(parents=True)
    with state_dir.project_lock(world.project):
        assert journal.leftovers(world.project) == []
    assert journal.leftovers(world.project) == [journal.Leftover(staging, False)]


def test_develop_state_steers_no_delete(world, tmp_path, capsys):
    victim = tmp_path / "clean-repo"
    victim.mkdir()
    git(victim, "init", "-q")
    commit(victim, "mine", {"a.txt": "a"})
    state = world.project / ".nemo-rl" / "develop.json"
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps({"megatron-core": {"path": str(victim), "managed": True, "envs": []}}))
    assert deps(world, "develop", "--stop", "megatron-core", "--remove") == 1
    assert "only removes checkouts nemo-rl made under" in capsys.readouterr().err
    assert (victim / "a.txt").exists()
    for bad in ({"megatron-core": {"path": str(victim), "envs": "abc"}}, {"megatron-core": "x"},
                {"../x": {"path": str(victim)}}, {"megatron-core": {"path": "relative/dir"}}, ["list"]):
        state.write_text(json.dumps(bad))
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


def test_status_follows_what_the_environment_imports(world, tmp_path, monkeypatch, capsys):
    env = tmp_path / "env"
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    forkworld.uv_run(world, "sync", "--quiet", "--extra", "mcore", env_dir=env)

    def state():
        capsys.readouterr()
        deps(world, "status", "--json", "--env", str(env))
        return {r["distribution"]: r for r in json.loads(capsys.readouterr().out)["forks"]}["megatron-core"]["state"]

    assert deps(world, "develop", "megatron-core") == 0
    (world.project / ".nemo-rl" / "develop.json").unlink()  # `git clean -fdx` or `rm -rf .nemo-rl` takes the state
    assert state() == "developing"  # the overlay still puts the checkout first, so status says so
    assert deps(world, "develop", "--stop", "megatron-core") == 0  # and stop works without the state
    assert state() == "ok"
    assert deps(world, "develop", "megatron-core") == 0
    forkworld.uv_run(world, "venv", "--quiet", "--allow-existing", str(env))
    import shutil

    shutil.rmtree(env)
    forkworld.uv_run(world, "sync", "--quiet", "--extra", "mcore", env_dir=env)  # a rebuilt env runs the pin
    assert state() == "develop not applied"
    assert deps(world, "status", "--check", "--env", str(env)) == 1


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
        assert lockfile.fork(world.project, dist).rev == sha
        assert lockfile.locked_packages(world.project)[dist].commit == sha
    assert main(["deps", "patches", "--check", "--project", str(world.project)]) == 0
    assert main(["deps", "status", "--check", "--project", str(world.project)]) in (0, 1)


def test_another_command_waits_for_the_fork_cache(world):
    """Two commands of one user share the fork cache: the second waits, and says so, until the first is done."""
    from nemo_rl.forks import fork_cache

    fork = lockfile.fork(world.project, "megatron-core")
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


def test_no_wait_refuses_while_another_command_writes(world, capsys):
    with state_dir.project_lock(world.project):
        assert deps(world, "patches", "--no-wait") == 1
    assert "another nemo-rl command" in capsys.readouterr().err


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
    assert json.loads((world.project / ".nemo-rl" / "develop.json").read_text()).keys() == {"megatron-core"}


def test_mistakes_are_exit_1_or_2_never_3(world, tmp_path, capsys, monkeypatch):
    assert deps(world, "bump", "megatron-core", "--branch", "") == 2
    assert main(["deps", "status", "--project", str(world.project / "pyproject.toml")]) == 1
    assert main(["deps", "status", "--project", str(world.project / "no-such-dir")]) == 1
    lock = world.project / "uv.lock"
    good_lock = lock.read_text()
    lock.write_text(re.sub(r'(?m)^name = "megatron-core"', 'name = ["megatron-core"]', good_lock))
    assert deps(world, "status") == 1
    assert "without a name (a string)" in capsys.readouterr().err
    lock.write_text(good_lock)
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text().replace('mcore = ["megatron-core", "nemo-toolkit"]',
                                             'mcore = ["megatron-core", "nemo-toolkit", "not a requirement!"]')
                    .replace('requires-python = ">=3.10"', 'requires-python = "not a spec"'))
    assert deps(world, "verify", "megatron-core") == 1
    assert "has an invalid requirement" in capsys.readouterr().err
    assert main(["doctor", "--extra", "mcore", "--project", str(world.project)]) == 1
    assert "cannot read requires-python" in capsys.readouterr().out
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NEMO_RL_CACHE_DIR", "~/x")
    assert deps(world, "patches", "--check") in (0, 1)
    assert not (tmp_path / "~").exists()


def test_status_into_a_closed_pipe_is_no_error(world):
    result = subprocess.run(f"{sys.executable} -m nemo_rl deps status --project {world.project} | head -c 1",
                            shell=True, capture_output=True, text=True)
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr


def test_revs_that_are_not_fork_commits_are_answered_at_once(world, capsys):
    megatron = world.forks["megatron-core"]
    tree = git(megatron.fork, "rev-parse", "HEAD^{tree}")
    upstream_only = git(megatron.upstream, "rev-parse", "main")
    assert deps(world, "bump", "megatron-core", "--rev", tree) == 1
    err = capsys.readouterr().err
    assert "not a commit" in err or "does not exist in" in err
    assert deps(world, "bump", "megatron-core", "--rev", upstream_only) == 1
    assert "(it is a commit of upstream, not of the fork)" in capsys.readouterr().err


def test_records_survive_any_subject(world, capsys):
    megatron = world.forks["megatron-core"]
    new_head = commit(megatron.fork, "   indented: subject  ", {"megatron/core/s.py": "S = 1\n"})
    assert deps(world, "bump", "megatron-core", "--rev", new_head) == 0
    assert deps(world, "patches", "--check", "--offline", "megatron-core") == 0
    assert deps(world, "patches", "--check", "megatron-core") == 0


def test_status_and_doctor_see_the_lock_itself(world, capsys):
    path = world.project / "pyproject.toml"
    original = path.read_text()
    path.write_text(original.replace('version = "0.1.0"', 'version = "0.2.0"', 1))  # not relocked
    for command in (["deps", "status", "--check"], ["doctor"]):
        assert main([*command, "--project", str(world.project)]) == 1
        assert "uv.lock does not match pyproject.toml: run `uv lock` and commit it" in capsys.readouterr().out
    path.write_text(original)
    (world.project / "uv.lock").unlink()
    assert deps(world, "status", "--check") == 1
    assert "uv.lock is missing: `git checkout uv.lock`" in capsys.readouterr().out


def test_the_overlay_exposes_exactly_what_the_pin_ships(world, tmp_path, monkeypatch):
    env = tmp_path / "env"
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    forkworld.uv_run(world, "sync", "--quiet", "--extra", "mcore", env_dir=env)
    assert deps(world, "develop", "megatron-core") == 0
    checkout = world.project / ".nemo-rl/develop/megatron-core"
    # what the checkout has beyond the wheel (Megatron's training code, its tests and tools)
    (checkout / "megatron/training").mkdir()
    (checkout / "megatron/training/__init__.py").write_text("")
    (checkout / "tools").mkdir()
    (checkout / "tools/__init__.py").write_text("")
    (checkout / "megatron/core/tokens.py").write_text("def tokens():\n    return ['live']\n")
    probe = ("import importlib\nfor m in ('megatron.core.tokens', 'megatron.training', 'tools'):\n"
             "    try:\n        importlib.import_module(m); print(m, 'yes')\n"
             "    except ImportError:\n        print(m, 'no')\n"
             "from megatron.core.tokens import tokens; print(tokens())")
    out = forkworld.uv_run(world, "run", "--quiet", "--extra", "mcore", "python", "-c", probe, env_dir=env)
    assert out.split("\n")[:4] == ["megatron.core.tokens yes", "megatron.training no", "tools no", "['live']"]
    assert deps(world, "develop", "--stop", "megatron-core") == 0
    assert not (world.project / ".nemo-rl/develop/megatron-core.overlay").exists()


def test_a_killed_dry_run_leaves_nothing_behind_for_long(world, tmp_path, monkeypatch, capsys):
    """A dry run stages in this user's directory under nemo-rl's cache (never the shared temporary directory,
    where another user could put a uv workspace root above it); one killed with SIGKILL is removed by the next."""
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    dead = landing.dry_run_root() / "nemo-rl-dry-run-killed"
    (dead / "patches").mkdir(parents=True)  # what a SIGKILLed dry run leaves: a copy nobody holds
    long_ago = time.time() - 3600
    os.utime(dead, (long_ago, long_ago))
    live = landing.Staging(world.project, [], [], inside=False)  # a dry run still running holds its copy
    new_head = commit(world.forks["nemo-toolkit"].fork, "feat: y", {"nemo/y.py": "Y = 1\n"})
    assert deps(world, "bump", "nemo-toolkit", "--rev", new_head, "--dry-run") == 0
    assert not dead.exists() and live.path.exists() and live.path.parent == landing.dry_run_root()
    assert not list((tmp_path / "tmp").iterdir()) and oct(landing.dry_run_root().stat().st_mode & 0o777) == "0o700"
    live.__exit__(None, None, None)
    assert not live.path.exists()


@pytest.mark.parametrize("planted", ["open to all", "a link"])
def test_a_dry_runs_directory_that_is_not_this_users_alone_is_refused(world, tmp_path, monkeypatch, capsys, planted):
    """uv locks the dry run's copy there: a directory others may write, or a link planted in its place, could hold
    a workspace root above the copy."""
    root = landing.dry_run_root()
    root.rmdir()
    if planted == "open to all":
        root.mkdir()
        root.chmod(0o777)
    else:
        (tmp_path / "elsewhere").mkdir()
        root.symlink_to(tmp_path / "elsewhere")
    new_head = commit(world.forks["nemo-toolkit"].fork, "feat: y", {"nemo/y.py": "Y = 1\n"})
    assert deps(world, "bump", "nemo-toolkit", "--rev", new_head, "--dry-run") == 1
    err = capsys.readouterr().err
    assert f"{root} is {'mode 0777' if planted == 'open to all' else 'a symbolic link'}" in err
    assert f"rm -rf {root}" in err
    if planted == "a link":
        assert not list((tmp_path / "elsewhere").iterdir())  # nothing staged through the link


def test_a_dry_run_starting_while_another_sweeps_keeps_its_copy(world, monkeypatch):
    """The sweep of killed dry runs removes a copy only under its lock: one that a dry run holds is left, even
    when a probe of it came too early to see the hold."""
    live = landing.Staging(world.project, [], [], inside=False)
    try:
        monkeypatch.setattr(landing.locks, "held", lambda path: False)  # the probe before the live one took it
        landing.remove_dead_dry_runs(landing.dry_run_root())
        assert live.path.exists()
    finally:
        live.__exit__(None, None, None)


def test_an_immutable_file_names_the_right_fix(world, capsys):
    import shutil as sh

    lock = world.project / "uv.lock"
    if not sh.which("chattr") or subprocess.run(["chattr", "+i", str(lock)], capture_output=True).returncode:
        pytest.skip("chattr +i is not available on this filesystem")
    try:
        new_head = commit(world.forks["nemo-toolkit"].fork, "feat: z", {"nemo/z.py": "Z = 1\n"})
        assert deps(world, "bump", "nemo-toolkit", "--rev", new_head) == 1
        err = capsys.readouterr().err
        assert "chattr -i" in err and "chmod u+w" not in err
    finally:
        subprocess.run(["chattr", "-i", str(lock)])


@pytest.mark.parametrize("url", ["--upload-pack=touch {marker};git-upload-pack", "ext::sh -c touch% {marker}"])
def test_a_hostile_url_runs_no_command(world, tmp_path, capsys, url):
    marker = tmp_path / "pwned"
    megatron = world.forks["megatron-core"]
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text().replace(f'git = "{megatron.fork_url}"', f'git = "{url.format(marker=marker)}"'))
    for args in (["patches", "--check", "megatron-core"], ["develop", "megatron-core"], ["upstream", "megatron-core"]):
        assert deps(world, *args) == 1, args
        assert "is not a git URL" in capsys.readouterr().err
    assert not marker.exists()


def test_an_upstream_commit_already_in_the_cache_is_not_taken_for_a_fork_commit(world, capsys):
    """git never asks a server for an object it has: with upstream fetched, the fork's branch is the proof."""
    assert deps(world, "patches", "--check", "megatron-core") == 0  # fills the cache with upstream's branch
    upstream_only = git(world.forks["megatron-core"].upstream, "rev-parse", "main")
    capsys.readouterr()
    assert deps(world, "bump", "megatron-core", "--rev", upstream_only) == 1
    assert "(it is a commit of upstream, not of the fork)" in capsys.readouterr().err
