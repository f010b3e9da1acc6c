"""`deps bump` before it stages anything (deps/bump.py), on a project of files alone: no git, no uv, no network.
What it stages and lands: tests/test_deps_bump.py."""

from __future__ import annotations

from pathlib import Path

from nemo_rl.cli import main

PIN = "c" * 40
URL = "https://forks.nemo-rl.invalid/megatron-lm.git"


def project(tmp_path: Path, locked: str = PIN) -> Path:
    """pyproject.toml pinning megatron-core at PIN on nemo-rl/main, and a uv.lock that locks `locked`."""
    (tmp_path / "pyproject.toml").write_text(
        "[project]\nname = 'fixture'\nversion = '0.1'\n"
        f"[tool.uv.sources]\nmegatron-core = {{ git = '{URL}', rev = '{PIN}' }}\n"
        "[tool.nemo-rl.forks.megatron-core]\nbranch = 'nemo-rl/main'\n"
        "upstream-url = 'https://upstream.nemo-rl.invalid/megatron-lm.git'\n")
    (tmp_path / "uv.lock").write_text(
        f'version = 1\n[[package]]\nname = "megatron-core"\nversion = "0.1.0"\n'
        f'source = {{ git = "{URL}?rev={PIN}#{locked}" }}\n')
    return tmp_path


def files(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def test_a_bump_to_the_pinned_and_locked_commit_has_nothing_to_do_and_writes_nothing(tmp_path, capsys):
    before = files(project(tmp_path))
    for extra in ([], ["--dry-run"]):
        assert main(["deps", "bump", "megatron-core", "--rev", PIN, *extra, "--project", str(tmp_path)]) == 0
        assert f"megatron-core is already pinned and locked at {PIN}; nothing to do" in capsys.readouterr().out
    assert files(tmp_path) == before and not (tmp_path / ".nemo-rl").exists()


def test_a_bad_branch_name_is_a_usage_error_before_anything_is_read(tmp_path, capsys):
    assert main(["deps", "bump", "megatron-core", "--branch", "a..b", "--project", str(project(tmp_path))]) == 2
    assert "--branch" in capsys.readouterr().err


def test_a_fork_the_project_does_not_pin_is_named_with_the_forks_it_has(tmp_path, capsys):
    assert main(["deps", "bump", "nemo-toolkit", "--rev", PIN, "--project", str(project(tmp_path))]) == 1
    err = capsys.readouterr().err
    assert "'nemo-toolkit' is not a fork pinned by this project" in err and "megatron-core" in err


def test_a_project_a_staging_copy_cannot_lock_is_refused_once_there_is_something_to_do(tmp_path, capsys):
    """A uv.toml would be read instead of [tool.uv] (the derived entry with it): refused before any fetch, but only
    when the bump has work to do: a bump to the pin it has is still nothing to do."""
    path = project(tmp_path, locked="e" * 40)  # uv.lock locks another commit: the bump would relock
    (path / "uv.toml").write_text("")
    assert main(["deps", "bump", "megatron-core", "--rev", PIN, "--dry-run", "--project", str(path)]) == 1
    assert "uv.toml exists: uv reads it instead of pyproject.toml's [tool.uv]" in capsys.readouterr().err
    path = project(tmp_path)
    assert main(["deps", "bump", "megatron-core", "--rev", PIN, "--dry-run", "--project", str(path)]) == 0
