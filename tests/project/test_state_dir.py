"""The project lock (nemo_rl/project/state_dir.py): commands that write the project wait for one another, or
refuse at once with --no-wait."""

from __future__ import annotations

import os
import subprocess
import sys

from fakes import deps
from gitfixtures import commit

from nemo_rl.cli import main
from nemo_rl.project import lockfile, state_dir


def test_two_bumps_at_once_lose_nothing(world):
    heads = {d: commit(f.fork, f"feat: {d} next", {f"{f.module.replace('.', '/')}/next.py": "N = 1\n"})
             for d, f in world.forks.items()}
    env = {**os.environ, "PYTHONPATH": str(world.root)}
    procs = [subprocess.Popen([sys.executable, "-m", "nemo_rl", "deps", "bump", d, "--rev", sha, "--project",
                               str(world.project)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for d, sha in heads.items()]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert [code for code, _ in results] == [0, 0], results
    assert any("waiting for another nemo-rl command" in err for _, err in results)
    for dist, sha in heads.items():
        assert lockfile.fork(world.project, dist).rev == sha
        assert lockfile.locked_packages(world.project)[dist].commit == sha
    assert main(["deps", "patches", "--check", "--project", str(world.project)]) == 0
    assert main(["deps", "status", "--check", "--project", str(world.project)]) in (0, 1)


def test_no_wait_refuses_while_another_command_writes(world, capsys):
    with state_dir.project_lock(world.project):
        assert deps(world, "patches", "--no-wait") == 1
    assert "another nemo-rl command" in capsys.readouterr().err
