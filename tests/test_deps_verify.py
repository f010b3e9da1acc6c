"""A fork commit that starts importing a new package: declared, it is locked with the pin; undeclared, verify fails
until it is added (the derived entry's add list)."""

import forkworld
import pytest
from gitfixtures import commit, write

from nemo_rl.cli import main
from nemo_rl.process import run
from nemo_rl.project import lockfile


@pytest.fixture
def wheels(tmp_path, monkeypatch):
    """A local directory of wheels (no network): tinydep 1.0, a pure-Python package built here."""
    source = tmp_path / "tinydep-src"
    write(source, {
        "pyproject.toml": '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
                          '[project]\nname = "tinydep"\nversion = "1.0"\n',
        "tinydep/__init__.py": "VALUE = 1\n",
    })
    out = tmp_path / "wheels"
    run([forkworld.uv_bin(), "build", "--wheel", "--quiet", "--out-dir", str(out), str(source)])
    monkeypatch.setenv("UV_FIND_LINKS", str(out))
    return out


def fork_commit(world, message, dependencies, body):
    fork = world.forks["megatron-core"].fork
    pyproject = (fork / "pyproject.toml").read_text()
    start = pyproject.index("requires-python")
    head = pyproject[:start] + f"dependencies = {dependencies!r}\n".replace("'", '"') + pyproject[start:]
    head = head.replace("dependencies = [", "dependencies = [", 1)
    if pyproject.count("dependencies = ") > 0:
        head = pyproject.split("dependencies = ")[0] + f"dependencies = {dependencies!r}\n".replace("'", '"') + \
            pyproject.split("dependencies = ", 1)[1].split("\n", 1)[1]
    return commit(fork, message, {"pyproject.toml": head, "megatron/core/__init__.py": body})


def test_a_module_the_fork_imports_undeclared_fails_verify_until_added(world, wheels, capsys):
    forkworld.derive_metadata(world, {})
    new = fork_commit(world, "feat: use tinydep", [], 'import tinydep\nVERSION = "0.1.0"\n')  # not declared
    assert main(["deps", "bump", "megatron-core", "--rev", new, "--project", str(world.project)]) == 0
    capsys.readouterr()
    assert main(["deps", "verify", "megatron-core", "--project", str(world.project)]) == 1
    out = capsys.readouterr().out
    assert "import megatron.core: FAILED: ModuleNotFoundError" in out
    assert 'add { requirement = "tinydep", why = "<what imports it>" } to add = [...] in ' \
           "[tool.nemo-rl.forks.megatron-core]" in out and "`nemo-rl deps patches megatron-core`" in out

    forkworld.derive_metadata(world, {}, {"tinydep>=1.0": "megatron.core imports it and does not declare it"})
    assert main(["deps", "verify", "megatron-core", "--project", str(world.project)]) == 0
    out = capsys.readouterr().out
    assert "import megatron.core: ok" in out
    # verifying one fork installs its closure only: the other fork is left out, and said so
    assert "skipped nemo-toolkit: not part of verifying megatron-core" in out


def test_a_requirement_the_fork_declares_is_locked_with_the_pin(world, wheels, capsys):
    forkworld.derive_metadata(world, {})
    new = fork_commit(world, "feat: use tinydep", ["tinydep>=1.0"], 'import tinydep\nVERSION = "0.1.0"\n')
    capsys.readouterr()
    assert main(["deps", "bump", "megatron-core", "--rev", new, "--project", str(world.project)]) == 0
    out = capsys.readouterr().out
    assert "+ tinydep>=1.0" in out and "NOT COVERED" not in out
    # a package the lock did not hold needs the index: uv's offline lock (or its failure) is not kept
    assert "(locked online: the offline lock was thrown away: " in out and "locked offline" not in out
    assert "tinydep" in lockfile.locked_packages(world.project)
    assert main(["deps", "verify", "megatron-core", "--project", str(world.project)]) == 0

    dropped = fork_commit(world, "drop tinydep", [], 'VERSION = "0.1.0"\n')
    assert main(["deps", "bump", "megatron-core", "--rev", dropped, "--project", str(world.project)]) == 0
    out = capsys.readouterr().out
    # the entry changed, yet every package left is locked as it was: offline gives the online lock
    assert "- tinydep>=1.0" in out and "(locked offline: " in out and "tinydep: removed (was 1.0)" in out
    assert "tinydep" not in lockfile.locked_packages(world.project)
    forkworld.uv_run(world, "lock", "--check")  # what an online lock gives


def test_unreadable_fork_metadata_is_a_clear_line(world, capsys):
    fork = world.forks["megatron-core"].fork
    pyproject = (fork / "pyproject.toml").read_text()
    broken = commit(fork, "broken backend",
                    {"pyproject.toml": pyproject.replace('build-backend = "hatchling.build"',
                                                         'build-backend = "no_such_backend.api"')})
    before = world.files()
    capsys.readouterr()
    # what the fork declares is recorded with every pin ([declares], derived entry or not): unreadable, no pin moves
    assert main(["deps", "bump", "megatron-core", "--rev", broken, "--project", str(world.project)]) == 1
    captured = capsys.readouterr()
    assert "the fork's build backend could not produce metadata" in captured.err and "what to do:" in captured.err
    assert "Traceback" not in captured.out + captured.err and world.files() == before


def test_unreadable_fork_metadata_stops_a_bump_that_must_derive_the_entry(world, capsys):
    forkworld.derive_metadata(world, {})
    fork = world.forks["megatron-core"].fork
    pyproject = (fork / "pyproject.toml").read_text()
    broken = commit(fork, "broken backend",
                    {"pyproject.toml": pyproject.replace('build-backend = "hatchling.build"',
                                                         'build-backend = "no_such_backend.api"')})
    before = world.files()
    capsys.readouterr()
    assert main(["deps", "bump", "megatron-core", "--rev", broken, "--project", str(world.project)]) == 1
    err = capsys.readouterr().err
    assert "[[tool.uv.dependency-metadata]] entry cannot be derived" in err and "Traceback" not in err
    assert world.files() == before
