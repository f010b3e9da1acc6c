"""import hygiene, PY_EXECUTABLES, create_local_venv, the CLI's exit codes."""

import subprocess
import sys
from pathlib import Path

import pytest

from nemo_rl.cli import main
from nemo_rl.errors import NemoRLError
from nemo_rl.workers import executables

HEAVY = ("torch", "megatron", "nemo", "transformer_engine")


def test_import_nemo_rl_stays_light():
    code = ("import sys, nemo_rl, nemo_rl.extras, nemo_rl.workers.executables, nemo_rl.cli, nemo_rl.deps.status, "
            "nemo_rl.doctor.report, nemo_rl.models; "
            f"print([m for m in sys.modules if m.split('.')[0] in {HEAVY!r}])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_py_executables():
    assert executables.PY_EXECUTABLES.SYSTEM == sys.executable
    assert executables.PY_EXECUTABLES.BASE == "uv run --locked"
    assert executables.PY_EXECUTABLES.MCORE == "uv run --locked --extra mcore"
    assert "--reinstall" not in executables.PY_EXECUTABLES.MCORE


def test_create_local_venv_refuses_an_environment_without_the_drivers_ray(tmp_path, monkeypatch):
    """Workers are Ray actors: an environment whose Ray differs from the driver's is refused before use."""
    project = tmp_path / "tiny"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[project]\nname = "tiny"\nversion = "0.1.0"\nrequires-python = ">=3.10"\ndependencies = []\n'
        "[project.optional-dependencies]\nextra1 = []\n[tool.uv]\npackage = false\n")
    subprocess.run([sys.executable, "-m", "uv", "lock", "--quiet"], cwd=project, check=True)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    with pytest.raises(NemoRLError, match="Ray None there"):
        executables.create_local_venv("uv run --locked --extra extra1", "worker-1", project=project)
    built = [p for p in (tmp_path / "venvs").iterdir() if not p.name.startswith(".")]
    assert len(built) == 1 and (built[0] / "bin" / "python").exists()  # built once, keyed, then refused
    assert executables.create_local_venv(executables.PY_EXECUTABLES.SYSTEM, "ignored") == sys.executable


@pytest.mark.parametrize("py_executable, name", [("python3 -m foo", "ok"), ("uv run --reinstall", "ok")])
def test_create_local_venv_refuses_what_it_cannot_honour(py_executable, name):
    with pytest.raises(NemoRLError):
        executables.create_local_venv(py_executable, name)


def test_cli_maps_errors_to_exit_codes(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["deps", "status"]) == 1  # no project here: an expected error
    assert "no pyproject.toml with a [tool.nemo-rl.forks] table" in capsys.readouterr().err
    from nemo_rl.deps import status

    def explode(project, args):
        raise RuntimeError("boom")

    here = ["--project", str(Path(__file__).resolve().parent.parent)]  # handlers run once a project is found
    monkeypatch.setattr(status, "run", explode)
    assert main(["deps", "status", *here]) == 3
    assert "unexpected error: RuntimeError: boom" in capsys.readouterr().err

    def interrupt(project, args):
        raise KeyboardInterrupt

    monkeypatch.setattr(status, "run", interrupt)
    assert main(["deps", "status", *here]) == 130
