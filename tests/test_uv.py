"""The lock check uv makes for `deps status` and `doctor` (nemo_rl/uv.py): no build, no interpreter or cache the
checkout names, and uv's words read with its colours off."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fakes import deps

import nemo_rl
from nemo_rl import uv
from nemo_rl.cli import main


def _recording_python(path: Path, marker: Path) -> None:
    """An interpreter a pull request commits: records that it ran, then behaves as Python."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho ran >> {marker}\nexec {sys.executable} \"$@\"\n")
    path.chmod(0o755)


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


def test_the_process_holding_an_environments_uv_lock_is_named(tmp_path):
    """`uv sync` holds `<env>/.lock` exclusively for a whole build, and every `uv run` there waits on it."""
    import fcntl

    from nemo_rl import uv

    env = tmp_path / "venv"
    env.mkdir()
    assert uv.environment_lock_holder(env) is None  # no lock file yet
    lock = env / ".lock"
    lock.touch()
    assert uv.environment_lock_holder(env) is None
    for operation in (fcntl.LOCK_EX, fcntl.LOCK_SH):  # uv waits for either to take its exclusive one
        with lock.open() as held:
            fcntl.flock(held, operation)
            holder = uv.environment_lock_holder(env)
        assert holder is not None and holder.startswith(f"process {os.getpid()} (") and "pytest" in holder
    assert uv.environment_lock_holder(env) is None  # released
    lock.unlink()
    os.mkfifo(lock)  # never opened for a read that would wait
    assert uv.environment_lock_holder(env) is None


def test_uv_run_waits_on_a_held_environment_lock_and_no_sync_does_not(tmp_path):
    """What doctor's note says, run: while the lock is held, `uv run` waits and `uv run --no-sync` does not."""
    import fcntl
    import subprocess

    from nemo_rl import uv

    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0"\ndependencies = []\n')
    uv.venv(project / ".venv", python=sys.executable)
    command = [uv.find_uv_bin(), "run", "--offline", "--project", str(project), "python", "-c", "print('ran')"]
    with (project / ".venv" / ".lock").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert uv.environment_lock_holder(project / ".venv") is not None
        with pytest.raises(subprocess.TimeoutExpired):
            subprocess.run(command, cwd=project, capture_output=True, timeout=5)
        ran = subprocess.run([*command[:2], "--no-sync", *command[2:]], cwd=project, capture_output=True, text=True,
                             timeout=60)
    assert ran.returncode == 0 and ran.stdout == "ran\n"
    released = subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=60)
    assert released.returncode == 0 and released.stdout == "ran\n"  # it was the lock that it waited on


@pytest.mark.parametrize("setting", ["UV_RESOLUTION=lowest", "UV_PRERELEASE=allow", "UV_NO_SOURCES=1"])
def test_a_uv_setting_that_changes_resolution_never_reaches_the_lock_check(world, capsys, monkeypatch, setting):
    """uv.lock matches pyproject.toml as the project's own settings resolve it, whatever this shell sets."""
    monkeypatch.setenv(*setting.split("=", 1))
    assert deps(world, "status", "--check") == 0, capsys.readouterr()


def test_a_sync_follows_the_lock_whatever_resolution_setting_this_shell_has(tmp_path, monkeypatch):
    from nemo_rl import uv

    seen = {}
    monkeypatch.setattr(uv, "run", lambda args, **kwargs: seen.update(kwargs["env"]))
    monkeypatch.setenv("UV_EXCLUDE_NEWER", "2020-01-01T00:00:00Z")
    uv.sync(tmp_path, flags=["--locked"], environment=tmp_path / "env", extra_env={"UV_RESOLUTION": "lowest"})
    assert seen["UV_PROJECT_ENVIRONMENT"] == str(tmp_path / "env")
    assert "UV_EXCLUDE_NEWER" not in seen and "UV_RESOLUTION" not in seen
_SYNC_EXTRA = re.compile(r"`([^`]*\buv sync\b[^`]*--extra[^`]*)`")


def test_every_printed_sync_of_an_extra_runs_the_preflight_first():
    commands = {text for path in sorted((Path(nemo_rl.__file__).parent).rglob("*.py"))
                for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.Constant) and isinstance(node.value, str)
                for text in _SYNC_EXTRA.findall(node.value)}
    commands.add(uv.sync_command())
    assert [c for c in commands if not c.startswith("uv run nemo-rl doctor --extra mcore --preflight && ")] == []


def test_the_printed_sync_never_starts_the_build_on_a_no_go(tmp_path):
    stub = tmp_path / "uv"
    stub.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path}/calls\ncase "$*" in *--preflight*) exit 1;; esac\n')
    stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    done = subprocess.run(["sh", "-c", uv.sync_command()], env=env, check=False)
    assert done.returncode == 1
    assert (tmp_path / "calls").read_text() == "run nemo-rl doctor --extra mcore --preflight\n"
