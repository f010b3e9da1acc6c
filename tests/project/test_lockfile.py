"""The fork's git source uv.lock names, held against [tool.uv.sources] (lockfile.LockedPackage.other_source): uv
fetches what the lock names and `uv lock --check` never compares it. Pure, on parsed values; and end to end on
fixture forks: an edited source fails the offline check and `deps status`, and `deps patches` relocks."""

from __future__ import annotations

from fakes import offline

from nemo_rl.cli import main
from nemo_rl.project import lockfile
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


def test_a_fork_source_edited_in_uv_lock_is_caught_and_relocked(world, capsys):
    """uv fetches a git package from the source uv.lock names, and `uv lock --check` never compares it with
    [tool.uv.sources]: another host, or a subdirectory added, with the commit kept, passed CI."""
    lock = world.project / "uv.lock"
    good = lock.read_text()
    rev = lockfile.fork(world.project, "nemo-toolkit").rev
    url = lockfile.fork(world.project, "nemo-toolkit").url
    assert f'{url}?rev={rev}#{rev}' in good
    for edited in (f"{url.removesuffix('.git')}-evil.git?rev={rev}#{rev}", f"{url}?rev={rev}&subdirectory=sub#{rev}"):
        lock.write_text(good.replace(f"{url}?rev={rev}#{rev}", edited))
        rc, out = offline(world, capsys)
        assert rc == 1 and "nemo-toolkit source" in out and edited.split("#")[0] in out, out
        assert main(["deps", "status", "--check", "--project", str(world.project)]) == 1
        assert "nemo-toolkit: lock stale" in capsys.readouterr().out
        assert main(["deps", "patches", "nemo-toolkit", "--project", str(world.project)]) == 0
        assert "relocked" in capsys.readouterr().out
        assert lock.read_text() == good, edited
