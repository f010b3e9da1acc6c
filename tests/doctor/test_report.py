"""What `nemo-rl doctor` reports of each component (nemo_rl/doctor/report.py), run by the interpreter of an
environment that imports a fork from its develop checkout."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import forkworld

from nemo_rl.cli import main
from nemo_rl.project.model import Project

ROOT = Path(__file__).resolve().parents[2]


def test_doctor_says_developing_in_an_interpreter_that_has_the_fork(world, tmp_path, monkeypatch):
    env = tmp_path / "env"
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    forkworld.uv_run(world, "sync", "--quiet", "--extra", "mcore", env_dir=env)
    assert main(["deps", "develop", "megatron-core", "--project", str(world.project)]) == 0
    checkout = world.project / ".nemo-rl/develop/megatron-core"
    # doctor run by the environment's own interpreter: megatron.core comes from its site-packages (through the
    # overlay), nemo_rl and its light dependencies from this checkout's environment, appended after them
    ours = [p for p in sys.path if p.endswith("site-packages")]
    code = (f"import sys; sys.path[:0] = [{str(ROOT)!r}]; sys.path += {ours!r}; from nemo_rl.cli import main; "
            f"sys.exit(main(['doctor', '--json', '--project', {str(world.project)!r}]))")
    result = subprocess.run([env / "bin" / "python", "-c", code], capture_output=True, text=True)
    assert result.stdout, result.stderr
    report = json.loads(result.stdout)
    megatron = {c["distribution"]: c for c in report["components"]}["megatron-core"]
    assert megatron["state"] == "developing", result.stdout + result.stderr
    assert str(checkout) in megatron["remedy"]


def test_doctor_on_a_node_names_the_workers_mcore_environment(tmp_path, monkeypatch):
    from nemo_rl.doctor import report
    from nemo_rl.workers import housekeeping

    worker = housekeeping.Row("k1", tmp_path / "k1", ("--locked", "--extra", "mcore"), ROOT, "current", 1.0, None, ())
    others = [housekeeping.Row("k2", tmp_path / "k2", ("--locked",), ROOT, "current", 1.0, None, ()),
              housekeeping.Row("k3", tmp_path / "k3", ("--extra", "mcore"), ROOT, "stale", 1.0, None, ())]
    monkeypatch.setattr(housekeeping, "listing", lambda project: [worker, *others])
    monkeypatch.setattr(report.extras, "probe_component",  # this interpreter's environment: no mcore extra
                        lambda comp: report.extras.Probe(comp, False, False, None, None, "not installed"))
    notes = report.collect(Project.read(ROOT), "mcore").notes
    assert f"`uv run nemo-rl doctor --extra mcore --env {tmp_path / 'k1'}` checks it" in " ".join(notes)
    assert str(tmp_path / "k2") not in " ".join(notes) and str(tmp_path / "k3") not in " ".join(notes)
