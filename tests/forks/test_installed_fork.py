"""The fork installed in an environment held against the lock and the fork (nemo_rl/forks/installed_fork.py)."""

from __future__ import annotations

import os
import sys

import forkworld
import pytest
from fakes import FIX, _never_hangs, derived_world, fixed, fork_with_extras, offline, status, synced_status

from nemo_rl import uv
from nemo_rl.cli import main
from nemo_rl.forks import installed_fork
from nemo_rl.project.model import Project


def test_a_fifo_pyvenv_cfg_gives_this_machines_markers(tmp_path):
    os.mkfifo(tmp_path / "pyvenv.cfg")
    out = _never_hangs(f"from pathlib import Path; from nemo_rl.forks import installed_fork; "
                       f"print(installed_fork._markers(Path({str(tmp_path)!r}))['python_version'])")
    assert out == f"{sys.version_info.major}.{sys.version_info.minor}"





def test_a_transitive_version_its_dependent_refuses_is_named_by_status(world, capsys, tmp_path):
    """uv.lock records no specifier for a registry package's own requirements: pysocks 1.5.7 pasted in (urllib3[socks],
    which megatron-core requires, refuses it) passes `uv lock --check --offline`, `uv lock --check` and the offline
    CI check, and `uv sync --locked` installs it. The installed metadata holds the specifier: status names it."""
    fork_with_extras(world)
    lock, path = world.project / "uv.lock", world.project / "pyproject.toml"
    good, pyproject = lock.read_text(), path.read_text()
    path.write_text(pyproject.replace("[tool.uv]\n", '[tool.uv]\noverride-dependencies = ["pysocks==1.5.7"]\n', 1))
    forkworld.uv_run(world, "lock", "--quiet")  # a real [[package]] for pysocks 1.5.7, to paste
    overridden = lock.read_text()
    path.write_text(pyproject)
    start = overridden.index('[[package]]\nname = "pysocks"')
    pysocks = overridden[start:overridden.index("[[package]]", start + 1)]
    g = good.index('[[package]]\nname = "pysocks"')
    lock.write_text(good[:g] + pysocks + good[good.index("[[package]]", g + 1):])
    forkworld.uv_run(world, "lock", "--check", "--offline")  # uv does not catch it (raises if it ever does)
    assert offline(world, capsys)[0] == 0  # nor can the offline check: nothing in uv.lock says what urllib3 needs
    env, out = synced_status(world, tmp_path, capsys)
    assert "megatron-core: installed differs" in out, out
    urllib3 = Project.read(world.project).packages["urllib3"].version
    said = f"pysocks 1.5.7 is installed but urllib3 {urllib3} (which megatron-core pulls in) requires pysocks"
    assert said in out and "!=1.5.7" in out.split(said)[1].split(":")[0], out
    assert "run `uv lock --upgrade-package pysocks`" in out
    lock.write_text(good)  # the committed lock, synced again: nothing refused
    forkworld.uv_run(world, "sync", "--quiet", "--locked", "--extra", "mcore", env_dir=env)
    assert not installed_fork.problems(Project.read(world.project), env, "megatron-core")


def test_records_that_agree_offline_but_not_with_the_fork_show_in_what_is_installed(world, capsys, tmp_path):
    """Recorded [declares], entry and lock agree with one another, so the offline check has nothing to see; the
    environment uv syncs from that lock holds the fork's own metadata, and status and verify compare with it."""
    from nemo_rl.forks import declared, fork_cache, metadata_check, records

    env = tmp_path / "env"
    derived_world(world)
    fork = Project.read(world.project).fork("megatron-core")
    directory = records.records_dir(world.project, "megatron-core")
    base, recs = records.compute(fork_cache.fetched(fork, fork.rev), fork)
    wrong = declared.Declares("0.0.9", ">=3.10", ("pytest>=8",), fork.rev)  # the fork builds 0.1.0, needs nemo-toolkit
    records.write(directory, *records.build(directory, records.read_index(directory), fork, fork.rev, base, recs,
                                            wrong))
    metadata_check.rewrite_pyproject(Project.read(world.project), "megatron-core", wrong)
    forkworld.uv_run(world, "lock", "--quiet", "--upgrade-package", "megatron-core")
    assert offline(world, capsys)[0] == 0  # nothing offline can prove: the fork is not at hand
    forkworld.uv_run(world, "sync", "--quiet", "--locked", "--extra", "mcore", env_dir=env)
    rc, out = status(world, env, capsys)
    assert rc == 1 and "megatron-core: installed differs" in out
    assert "megatron-core 0.1.0 is installed but uv.lock says 0.0.9" in out and "+nemo-toolkit" in out
    assert FIX in out and f"then `{uv.sync_command()}`" in out
    capsys.readouterr()
    assert main(["deps", "verify", "megatron-core", "--project", str(world.project)]) == 1
    out = capsys.readouterr().out
    assert "megatron-core: installed another version: megatron-core 0.1.0 is installed but uv.lock says 0.0.9" in out
    assert "megatron-core: installed requirements differ" in out and "+nemo-toolkit" in out
    assert "nemo-toolkit, which megatron-core requires, is not installed" not in out  # left out on purpose
    assert main(["deps", "patches", "--check", "--project", str(world.project)]) == 1  # online: the fork says so
    fixed(world, env, capsys)


def _break_metadata(env, directory: str, how: str) -> None:
    metadata = next(env.glob(f"lib/python3*/site-packages/{directory}-*.dist-info/METADATA"))
    lines = metadata.read_bytes().splitlines(keepends=True)
    broken = [*lines[:1], "Summary: café\n".encode("latin-1"), *lines[1:]] if how == "not-utf8" else [
        line for line in lines if not line.startswith(b"Version:")]
    with open(metadata, "r+b") as fh:  # in place: uv's cache holds the same file (a hard link)
        fh.write(b"".join(broken))
        fh.truncate()


@pytest.mark.parametrize("how", ["not-utf8", "no-version"])
@pytest.mark.parametrize("directory, name", [("megatron_core", "megatron-core"), ("six", "six")])
def test_an_installed_distribution_whose_metadata_cannot_be_read_is_reinstalled(world, capsys, tmp_path, monkeypatch,
                                                                               directory, name, how):
    fork_with_extras(world)
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))  # the fix cleans it
    env = tmp_path / "env"
    forkworld.uv_run(world, "sync", "--quiet", "--locked", "--extra", "mcore", env_dir=env)
    assert status(world, env, capsys)[0] == 0
    _break_metadata(env, directory, how)
    rc, out = status(world, env, capsys)
    fix = (f"uv cache clean {name} && uv run nemo-rl doctor --extra mcore --preflight && "
           f"uv sync --locked --extra mcore --reinstall-package {name}")
    assert rc == 1 and f"the installed {name}'s metadata cannot be read" in out and fix in out, out
    forkworld.uv_run(world, "cache", "clean", "--quiet", name)  # the fix, but the pre-flight (it needs a CUDA toolkit)
    forkworld.uv_run(world, "sync", "--quiet", "--locked", "--extra", "mcore", "--reinstall-package", name, env_dir=env)
    assert status(world, env, capsys)[0] == 0
