"""A fork commit that starts importing a new package: the bump report names it, verify fails until it is declared."""

import forkworld
import pytest
from gitfixtures import commit, write

from nemo_rl.cli import main
from nemo_rl.process import run


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


def declare(world, requires):
    pyproject = world.project / "pyproject.toml"
    text = pyproject.read_text()
    if "[[tool.uv.dependency-metadata]]" in text:
        text = text[:text.index("\n[[tool.uv.dependency-metadata]]")]
    pyproject.write_text(text + "\n[[tool.uv.dependency-metadata]]\n"
                         f'name = "megatron-core"\nversion = "0.1.0"\nrequires-dist = {requires!r}\n'.replace("'", '"'))
    forkworld.uv_run(world, "lock", "--quiet")


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


def test_new_requirement_is_reported_and_verify_fails_until_declared(world, wheels, capsys):
    declare(world, [])
    new = fork_commit(world, "feat: use tinydep", ["tinydep>=1.0"], 'import tinydep\nVERSION = "0.1.0"\n')
    capsys.readouterr()
    assert main(["deps", "bump", "megatron-core", "--rev", new, "--project", str(world.project)]) == 0
    out = capsys.readouterr().out
    assert "+ tinydep>=1.0   NOT COVERED" in out
    assert "not covered by [[tool.uv.dependency-metadata]] megatron-core: tinydep" in out

    assert main(["deps", "verify", "megatron-core", "--project", str(world.project)]) == 1
    out = capsys.readouterr().out
    assert "import megatron.core: FAILED: ModuleNotFoundError" in out
    assert 'add "tinydep>=1.0" to requires-dist of the [[tool.uv.dependency-metadata]] entry for megatron-core' in out

    declare(world, ["tinydep>=1.0"])
    assert main(["deps", "verify", "megatron-core", "--project", str(world.project)]) == 0
    out = capsys.readouterr().out
    assert "import megatron.core: ok" in out
    # verifying one fork installs its closure only: the other fork is left out, and said so
    assert "skipped nemo-toolkit: not part of verifying megatron-core" in out

    dropped = fork_commit(world, "drop tinydep", [], 'VERSION = "0.1.0"\n')
    assert main(["deps", "bump", "megatron-core", "--rev", dropped, "--project", str(world.project)]) == 0
    assert "- tinydep>=1.0" in capsys.readouterr().out


def test_unreadable_fork_metadata_is_a_clear_line(world, capsys):
    declare(world, [])
    fork = world.forks["megatron-core"].fork
    pyproject = (fork / "pyproject.toml").read_text()
    broken = commit(fork, "broken backend",
                    {"pyproject.toml": pyproject.replace('build-backend = "hatchling.build"',
                                                         'build-backend = "no_such_backend.api"')})
    assert main(["deps", "bump", "megatron-core", "--rev", broken, "--project", str(world.project)]) == 0
    out = capsys.readouterr().out
    assert "requirements: not compared: the fork's build backend could not produce metadata" in out
    assert "Traceback" not in out.split("requirements: not compared")[0]
