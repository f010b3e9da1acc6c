"""The fork's git source uv.lock names, held against [tool.uv.sources] (lockfile.LockedPackage.other_source): uv
fetches what the lock names and `uv lock --check` never compares it (pure, on parsed values); and project files
that do not read or have the wrong shape are an exit 1 naming the fix."""

from __future__ import annotations

import pytest
from fakes import run_cli

from nemo_rl.project.lockfile import Fork, LockedPackage

SHA = "a" * 40
URL = "https://github.com/NVIDIA/NeMo.git"


def fork(subdirectory: str | None = None) -> Fork:
    return Fork("nemo-toolkit", URL, SHA, None, None, "main", None, subdirectory=subdirectory)


def locked(url: str) -> LockedPackage:
    return LockedPackage.of("nemo-toolkit", "2.4.0", {"git": url})


def test_the_source_uv_wrote_from_pyproject_agrees():
    assert locked(f"{URL}?rev={SHA}#{SHA}").other_source(fork()) is None
    # a subdirectory pyproject names is in the URL uv writes: no difference (uv's order of the query is its own)
    assert locked(f"{URL}?subdirectory=pkg&rev={SHA}#{SHA}").other_source(fork("pkg")) is None
    assert locked(f"{URL}?rev={SHA}&subdirectory=pkg#{SHA}").other_source(fork("pkg")) is None


def test_another_host_or_query_is_named():
    evil = f"https://github.com/NVIDIA/NeMo-evil.git?rev={SHA}"
    assert locked(f"{evil}#{SHA}").other_source(fork()) == evil
    assert locked(f"{URL}?rev={SHA}&subdirectory=x#{SHA}").other_source(fork()) == f"{URL}?rev={SHA}&subdirectory=x"
    assert locked(f"{URL}?rev={SHA}#{SHA}").other_source(fork("pkg")) == f"{URL}?rev={SHA}"  # pyproject's is gone
    assert locked(f"{URL}?rev={SHA}&subdirectory=y#{SHA}").other_source(fork("pkg")) is not None
    registry = LockedPackage.of("nemo-toolkit", "1", {"registry": "https://pypi.org/simple"}).other_source(fork())
    assert registry == "{'registry': 'https://pypi.org/simple'} (not a git source)"


def test_a_locked_version_that_is_not_a_string_is_refused_where_uv_lock_is_read(tmp_path):
    import pytest

    from nemo_rl.errors import NemoRLError
    from nemo_rl.project import lockfile

    (tmp_path / "uv.lock").write_text('version = 1\n[[package]]\nname = "nemo-toolkit"\nversion = 2\n')
    with pytest.raises(NemoRLError, match="'nemo-toolkit' has a version that is not a string") as refused:
        lockfile.locked_packages(tmp_path)
    assert "uv lock" in (refused.value.remedy or "")
    (tmp_path / "uv.lock").write_text('version = 1\n[[package]]\nname = "nemo-toolkit"\nversion = "2"\n')
    assert lockfile.locked_packages(tmp_path)["nemo-toolkit"].version == "2"


@pytest.mark.parametrize("name, data, expected", [
    ("pyproject.toml", b"[tool.nemo-rl.forks.x]\nbranch = '\xff'\n", "not valid UTF-8"),
    ("pyproject.toml", b"[tool]\nuv = 3\n[tool.nemo-rl.forks]\n", "must be a table"),
    ("pyproject.toml", b"[tool.uv]\nsources = 'x'\n[tool.nemo-rl.forks.a]\n", "[tool.uv.sources] must be a table"),
    ("pyproject.toml", b"[tool.nemo-rl]\nforks = [1]\n", "[tool.nemo-rl.forks] must be a table"),
    ("uv.lock", b"version = 1\npackage = 'x'\n", "regenerate it with `uv lock`"),
    ("uv.lock", b"\xe9", "not valid UTF-8"),
])
def test_broken_project_files_exit_1(world, capsys, name, data, expected):
    (world.project / name).write_bytes(data)
    code, out = run_cli(capsys, "deps", "status", "--project", str(world.project))
    assert code == 1 and expected in out and "Traceback" not in out and "bug in nemo-rl" not in out
