"""The repository's own pins: no submodules, full SHAs, a lock that matches, and an extra that stays opt-in
(importing nemo_rl never imports torch, megatron, nemo or transformer_engine)."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from nemo_rl.process import run
from nemo_rl.project import lockfile
from nemo_rl.uv import find_uv_bin

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SOURCES = PYPROJECT["tool"]["uv"]["sources"]


def uv(*args: str) -> str:
    return run([find_uv_bin(), *args], cwd=ROOT).stdout


def test_no_submodules_or_vendored_code():
    assert not (ROOT / ".gitmodules").exists()
    assert not (ROOT / "3rdparty").exists()
    tracked = run(["git", "-C", str(ROOT), "ls-files"], check=False).stdout.split()
    assert not [p for p in tracked if p.startswith(("megatron/", "nemo/", "3rdparty/"))]


def test_every_git_source_is_a_full_sha_and_locked_at_it():
    git_sources = {name: s for name, s in SOURCES.items() if "git" in s}
    assert set(git_sources) == {"megatron-core", "nemo-toolkit"}
    locked = lockfile.locked_packages(ROOT)
    for name, source in git_sources.items():
        assert re.fullmatch(r"[0-9a-f]{40}", source["rev"]), name
        assert locked[name].commit == source["rev"], name
        assert str(locked[name].git).startswith(source["git"] + "?rev=" + source["rev"])


def test_fork_table_matches_sources():
    forks = {f.distribution: f for f in lockfile.forks(ROOT)}
    assert set(forks) == {"megatron-core", "nemo-toolkit"}
    for fork in forks.values():
        assert fork.branch and fork.upstream_url and re.fullmatch(r"[0-9a-f]{40}", fork.base)


def test_lock_is_current_offline():
    uv("lock", "--check", "--offline")


def test_patch_records_match_the_pins_offline(capsys):
    from nemo_rl.cli import main

    assert main(["deps", "patches", "--check", "--offline", "--project", str(ROOT)]) == 0
    assert capsys.readouterr().out.splitlines() == ["megatron-core: ok", "nemo-toolkit: ok"]


def test_default_export_has_no_git_requirement_and_mcore_has_exactly_the_pins():
    default = uv("export", "--frozen", "--no-hashes", "--no-emit-project")
    assert "git+" not in default and "megatron" not in default and "nemo-toolkit" not in default
    mcore = uv("export", "--frozen", "--no-hashes", "--no-emit-project", "--extra", "mcore")
    git_lines = sorted(line.split(";")[0].strip() for line in mcore.splitlines() if "git+" in line)
    assert git_lines == sorted(
        f"{name} @ git+{SOURCES[name]['git']}@{SOURCES[name]['rev']}" for name in ("megatron-core", "nemo-toolkit")
    )


@pytest.mark.parametrize("name", ["torch", "transformer-engine", "transformer-engine-torch"])
def test_torch_and_transformer_engine_are_locked_together(name):
    locked = lockfile.locked_packages(ROOT)
    assert locked[name].version == {"torch": "2.7.0"}.get(name, "2.3.0")


HEAVY = ("torch", "megatron", "nemo", "transformer_engine")


def test_import_nemo_rl_stays_light():
    code = ("import sys, nemo_rl, nemo_rl.extras, nemo_rl.workers.executables, nemo_rl.cli, nemo_rl.deps.status, "
            "nemo_rl.doctor.report, nemo_rl.models; "
            f"print([m for m in sys.modules if m.split('.')[0] in {HEAVY!r}])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
