"""The derived [[tool.uv.dependency-metadata]] entry end to end: fixture forks whose version and requirements
move, the project's drop/add lists, `deps patches`, `deps bump`, `deps status`, and hand edits with `uv lock`."""

import tomllib

import forkworld
from fakes import deps, derived_world, pin
from gitfixtures import commit, git

from nemo_rl.forks import declared, metadata_check
from nemo_rl.project import lockfile


def entry(world):
    return metadata_check.entry(world.project, "megatron-core")


def locked(world):
    return lockfile.locked_packages(world.project)["megatron-core"]




def test_patches_derives_the_entry_and_records_what_the_fork_declares(world, capsys):
    derived_world(world)
    assert entry(world) == declared.Entry("megatron-core", "0.1.0", ">=3.10", ("nemo-toolkit",))
    index = tomllib.loads((world.project / "patches/megatron-core/index.toml").read_text())
    assert index["declares"] == {"commit": lockfile.fork(world.project, "megatron-core").rev, "version": "0.1.0",
                                 "requires-python": ">=3.10",
                                 "requires-dist": ["nemo-toolkit", "pytest>=8"]}
    assert "# derived by `nemo-rl deps patches`" in (world.project / "pyproject.toml").read_text()
    lock = (world.project / "uv.lock").read_text()
    assert 'requires-dist = ["nemo-toolkit"]' in lock
    capsys.readouterr()
    assert deps(world, "patches", "--check", "--offline") == 0
    assert deps(world, "patches", "--check") == 0
    assert deps(world, "status", "--check") == 0


def test_a_hand_edited_entry_relocked_is_caught_and_one_command_fixes_it(world, capsys):
    derived_world(world)
    path = world.project / "pyproject.toml"
    head, marker, entry_text = path.read_text().partition("[[tool.uv.dependency-metadata]]")
    path.write_text(head + marker + entry_text.replace('version = "0.1.0"', 'version = "0.9.0"'))
    forkworld.uv_run(world, "lock", "--quiet")  # uv.lock now agrees with the hand edit: uv lock --check is green
    assert locked(world).version == "0.9.0"
    capsys.readouterr()
    assert deps(world, "patches", "--check", "--offline") == 1
    out = capsys.readouterr().out
    assert "[[tool.uv.dependency-metadata]] megatron-core version: expected '0.1.0'" in out and "found '0.9.0'" in out
    assert deps(world, "status", "--check") == 1
    out = capsys.readouterr().out
    assert "megatron-core: metadata stale" in out and "run `nemo-rl deps patches megatron-core`" in out
    assert deps(world, "patches", "megatron-core") == 0
    assert locked(world).version == "0.1.0" and entry(world).version == "0.1.0"
    assert deps(world, "patches", "--check", "--offline") == 0


def test_a_hand_edited_rev_with_uv_lock_alone_is_caught(world, capsys):
    derived_world(world)
    fork = world.forks["megatron-core"].fork
    newer = commit(fork, "release 0.2.0", {"pyproject.toml": forkworld.fork_pyproject(
        world, version="0.2.0", dependencies=["nemo-toolkit", "pytest>=8"])})
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text().replace(lockfile.fork(world.project, "megatron-core").rev, newer))
    forkworld.uv_run(world, "lock", "--quiet", "--upgrade-package", "megatron-core")
    assert locked(world).commit == newer and locked(world).version == "0.1.0"  # the lie: the fork builds 0.2.0
    capsys.readouterr()
    assert deps(world, "patches", "--check", "--offline") == 1
    assert deps(world, "status", "--check") == 1
    assert "run `nemo-rl deps patches megatron-core`" in capsys.readouterr().out
    assert deps(world, "patches", "megatron-core") == 0
    assert locked(world).version == "0.2.0" and entry(world).version == "0.2.0"
    assert deps(world, "patches", "--check", "--offline") == 0


def test_bump_lands_a_dynamic_version_and_a_new_requirement(world, capsys):
    derived_world(world)
    fork = world.forks["megatron-core"].fork
    module_init = "megatron/core/__init__.py"
    dynamic = commit(fork, "dynamic version 0.2.0", {
        "pyproject.toml": forkworld.fork_pyproject(world, version=None, dependencies=["nemo-toolkit>=0.1",
                                                                                     "pytest>=8"]),
        module_init: '__version__ = "0.2.0"\n'})
    capsys.readouterr()
    pin(world, dynamic)
    out = capsys.readouterr().out
    assert locked(world).version == "0.2.0"
    assert entry(world) == declared.Entry("megatron-core", "0.2.0", ">=3.10", ("nemo-toolkit>=0.1",))
    assert "version: 0.1.0 -> 0.2.0" in out and "+ nemo-toolkit>=0.1" in out
    # the new requirement is one the lock holds already (the other fork): offline gives what online does
    assert "(locked offline: " in out
    assert deps(world, "patches", "--check", "--offline") == 0
    assert deps(world, "patches", "--check") == 0
    forkworld.uv_run(world, "lock", "--check")  # what an online lock gives


def test_bump_refuses_a_requirement_uv_cannot_lock_with_the_drop_line(world, capsys, monkeypatch):
    derived_world(world)
    fork = world.forks["megatron-core"].fork
    unknown = commit(fork, "needs a package no index has", {"pyproject.toml": forkworld.fork_pyproject(
        world, dependencies=["nemo-toolkit", "pytest>=8", "nemo-rl-no-such-fixture-dist>=1.16"])})
    monkeypatch.setenv("UV_OFFLINE", "1")  # the index is never asked: the name is resolvable nowhere
    before = world.files()
    assert deps(world, "bump", "megatron-core", "--rev", unknown) == 1
    err = capsys.readouterr().err
    assert '{ name = "nemo-rl-no-such-fixture-dist", why = "<why nemo-rl does not need it>" },' in err
    assert "[tool.nemo-rl.forks.megatron-core]" in err
    assert world.files() == before


def test_a_drop_the_fork_no_longer_needs_is_said_unnecessary(world, capsys):
    derived_world(world)
    fork = world.forks["megatron-core"].fork
    without = commit(fork, "drop pytest", {"pyproject.toml": forkworld.fork_pyproject(
        world, dependencies=["nemo-toolkit"])})
    capsys.readouterr()
    pin(world, without)
    assert "the drop of pytest is unnecessary (the fork no longer declares it): removed" in capsys.readouterr().out
    table = tomllib.loads((world.project / "pyproject.toml").read_text())["tool"]["nemo-rl"]["forks"]["megatron-core"]
    assert table["drop"] == []
    assert deps(world, "patches", "--check", "--offline") == 0
    # a drop put back by hand: the check says it is unnecessary
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text().replace("drop = []", 'drop = [{ name = "pytest", why = "back by hand" }]'))
    capsys.readouterr()
    assert deps(world, "patches", "--check", "--offline") == 1
    assert "drop pytest: expected a requirement megatron-core declares" in capsys.readouterr().out


def test_online_check_finds_declares_the_fork_does_not_have(world, capsys):
    """Records, entry and lock agree with each other offline, but the recorded declarations are not the fork's."""
    from nemo_rl.forks import declared, fork_cache, metadata_check, records

    derived_world(world)
    fork = lockfile.fork(world.project, "megatron-core")
    directory = records.records_dir(world.project, "megatron-core")
    base, recs = records.compute(fork_cache.fetched(fork, fork.rev), fork, fork.rev)
    wrong = declared.Declares("0.1.0", ">=3.10", ("nemo-toolkit", "pytest>=8", "nemo-toolkit-extra-fixture"),
                             fork.rev)
    index, noted = records.build(directory, records.read_index(directory), fork, fork.rev, base, recs, wrong)
    records.write(directory, index, noted)
    metadata_check.rewrite_pyproject(world.project, "megatron-core", wrong)
    capsys.readouterr()
    # records and entry agree; the lock does not (it was not made from the entry), and offline says so
    assert deps(world, "patches", "--check", "--offline") == 1
    assert "uv.lock" in capsys.readouterr().out
    assert deps(world, "patches", "--check") == 1
    assert "declares requires-dist" in capsys.readouterr().out


def test_an_entry_without_recorded_declarations_is_caught(world, capsys):
    """An index generated before [declares] existed (or by hand): the entry cannot be proved derived offline."""
    from nemo_rl.forks import fork_cache, records

    derived_world(world)
    fork = lockfile.fork(world.project, "megatron-core")
    directory = records.records_dir(world.project, "megatron-core")
    base, recs = records.compute(fork_cache.fetched(fork, fork.rev), fork, fork.rev)
    records.write(directory, *records.build(directory, records.read_index(directory), fork, fork.rev, base, recs,
                                            None))
    capsys.readouterr()
    assert deps(world, "patches", "--check", "--offline") == 1
    assert "declares: expected what megatron-core declares at" in capsys.readouterr().out
    assert deps(world, "status", "--check") == 1
    assert "metadata stale" in capsys.readouterr().out


def _backend_commit(world, metadata: str, pyproject_name: str | None = "megatron-core") -> str:
    """A fork commit whose in-tree build backend writes `metadata` as its METADATA."""
    project = f'[project]\nname = "{pyproject_name}"\nversion = "0.2.0"\n' if pyproject_name else ""
    backend = f'''import os
def prepare_metadata_for_build_wheel(d, config_settings=None):
    os.makedirs(os.path.join(d, "megatron_core-0.2.0.dist-info"))
    with open(os.path.join(d, "megatron_core-0.2.0.dist-info", "METADATA"), "w") as f:
        f.write({metadata!r})
    return "megatron_core-0.2.0.dist-info"
'''
    return commit(world.forks["megatron-core"].fork, "backend", {
        "pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n' + project,
        "backend.py": backend})


def _state(world):
    paths = [world.project / "pyproject.toml", world.project / "uv.lock", *(world.project / "patches").rglob("*")]
    return {str(p): p.read_bytes() for p in paths if p.is_file()}


def test_a_direct_reference_in_the_forks_metadata_is_never_built(world, capsys, tmp_path):
    """`evil @ file:///...` in the fork's METADATA: refused before uv lock could build it (run its setup.py);
    dropped, the bump lands without it and no URL reaches a project file."""
    evil, ran = tmp_path / "evil", tmp_path / "EVIL_RAN"
    evil.mkdir()
    (evil / "setup.py").write_text(f"open({str(ran)!r}, 'w').write('ran')\nfrom setuptools import setup\n"
                                   "setup(name='evil', version='1')\n")
    forkworld.derive_metadata(world, {})
    before = _state(world)
    rev = _backend_commit(world, "Metadata-Version: 2.1\nName: megatron-core\nVersion: 0.2.0\n"
                                 f"Requires-Dist: evil @ {evil.as_uri()}\n")
    capsys.readouterr()
    assert deps(world, "bump", "megatron-core", "--rev", rev) == 1
    err = capsys.readouterr().err
    assert f"the fork at {rev[:12]} declares a direct reference" in err and "fix the fork or drop it" in err
    assert not ran.exists() and _state(world) == before
    text = (world.project / "pyproject.toml").read_text()
    (world.project / "pyproject.toml").write_text(text.replace(
        "drop = []", 'drop = [{ name = "evil", why = "a direct reference nemo-rl never locks" }]'))
    assert deps(world, "bump", "megatron-core", "--rev", rev) == 0
    assert not ran.exists()
    assert all(evil.as_uri() not in p.read_text() for p in [world.project / "pyproject.toml", world.project / "uv.lock",
                                                             *(world.project / "patches").rglob("*.toml")])
    assert deps(world, "patches", "--check", "--offline") == 0


def test_metadata_naming_another_distribution_is_not_bumped_to(world, capsys):
    """A fork without a static [project] name (setup.py style) whose METADATA says megatron-tron."""
    forkworld.derive_metadata(world, {})
    before = _state(world)
    rev = _backend_commit(world, "Metadata-Version: 2.1\nName: megatron-tron\nVersion: 0.2.0\n", pyproject_name=None)
    capsys.readouterr()
    assert deps(world, "bump", "megatron-core", "--rev", rev) == 1
    assert "builds distribution 'megatron-tron', not 'megatron-core'" in capsys.readouterr().err
    assert _state(world) == before


def test_a_version_that_is_not_pep_440_is_not_bumped_to(world, capsys):
    forkworld.derive_metadata(world, {})
    before = _state(world)
    rev = _backend_commit(world, "Metadata-Version: 2.1\nName: megatron-core\nVersion: 0.2.0 garbage\n")
    capsys.readouterr()
    assert deps(world, "bump", "megatron-core", "--rev", rev) == 1
    assert "not a PEP 440 version" in capsys.readouterr().err
    assert _state(world) == before


def _tightened(world):
    """A fork commit that declares nemo-toolkit>=0.1 where derived_world's pin declares nemo-toolkit."""
    pyproject = forkworld.fork_pyproject(world, dependencies=["nemo-toolkit>=0.1", "pytest>=8"])
    return commit(world.forks["megatron-core"].fork, "tighten nemo-toolkit", {"pyproject.toml": pyproject})


def test_bump_compares_against_the_recorded_declares_when_the_old_commit_is_gone(world, capsys, monkeypatch,
                                                                                 tmp_path):
    """index.toml's [declares] is the record of what the fork declares at the pin: the bump's requirement drift
    reads its old side there, so it holds even when the old commit can no longer be fetched or built (the fork's
    history was rewritten and the commit collected, and no cache keeps its metadata)."""
    old = derived_world(world)
    fork = world.forks["megatron-core"].fork
    git(fork, "reset", "-q", "--hard", f"{old}^")
    new = _tightened(world)
    git(fork, "reflog", "expire", "--expire=now", "--all")
    git(fork, "gc", "-q", "--prune=now")
    monkeypatch.setenv("NEMO_RL_CACHE_DIR", str(tmp_path / "empty-cache"))
    capsys.readouterr()
    pin(world, new)
    out = capsys.readouterr().out
    assert "requirements (the fork's own metadata): 0 added, 0 removed, 1 changed" in out
    assert "~ nemo-toolkit -> nemo-toolkit>=0.1" in out and "not compared" not in out


def test_bump_builds_the_old_side_when_the_index_is_not_the_record_of_the_pin(world, capsys):
    """A pin moved by hand (pyproject.toml and `uv lock` alone) leaves index.toml describing the commit before:
    its [declares] is not what the fork declares at the pin, so the old commit's own metadata is built."""
    derived_world(world)
    moved = _tightened(world)
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text().replace(lockfile.fork(world.project, "megatron-core").rev, moved))
    forkworld.uv_run(world, "lock", "--quiet", "--upgrade-package", "megatron-core")
    new = commit(world.forks["megatron-core"].fork, "no requirement changes", {"README.md": "same requirements\n"})
    capsys.readouterr()
    pin(world, new)
    assert "requirements (the fork's own metadata): 0 added, 0 removed, 0 changed" in capsys.readouterr().out


def test_bump_builds_the_old_side_when_the_recorded_declares_were_edited(world, capsys):
    """A [declares] edited by hand no longer matches the index's digest: the old commit's own metadata is built."""
    derived_world(world)
    path = world.project / "patches/megatron-core/index.toml"
    path.write_text(path.read_text().replace('"pytest>=8",', '"pytest>=8",\n    "einops",', 1))
    assert "einops" in path.read_text()
    new = commit(world.forks["megatron-core"].fork, "no requirement changes", {"README.md": "same requirements\n"})
    capsys.readouterr()
    pin(world, new)
    assert "requirements (the fork's own metadata): 0 added, 0 removed, 0 changed" in capsys.readouterr().out
