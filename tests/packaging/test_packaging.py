"""The repository's own pins: no submodules, full SHAs, a current lock, an extra that stays opt-in, and
.ci/declares-changes."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from nemo_rl.process import run
from nemo_rl.project.model import Project
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
    locked = Project.read(ROOT).packages
    for name, source in git_sources.items():
        assert re.fullmatch(r"[0-9a-f]{40}", source["rev"]), name
        assert locked[name].commit == source["rev"], name
        assert str(locked[name].git).startswith(source["git"] + "?rev=" + source["rev"])


def test_fork_table_matches_sources():
    forks = {f.distribution: f for f in Project.read(ROOT).forks}
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
    locked = Project.read(ROOT).packages
    assert locked[name].version == {"torch": "2.7.0"}.get(name, "2.3.0")


HEAVY = ("torch", "megatron", "nemo", "transformer_engine")


def test_import_nemo_rl_stays_light():
    code = ("import sys, nemo_rl, nemo_rl.extras, nemo_rl.workers.executables, nemo_rl.cli, nemo_rl.deps.status, "
            "nemo_rl.doctor.report, nemo_rl.models; "
            f"print([m for m in sys.modules if m.split('.')[0] in {HEAVY!r}])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
def test_ci_prints_the_declares_a_change_edits_and_passes_without_history(tmp_path):
    """The offline check cannot prove [declares] (a consistent fake passes it): .ci/run shows a reviewer each
    change to it against the merge base, read from the parsed TOML (a header spelled another valid way is the
    same table), and a pin moved with [declares] kept; it never fails, with or without the history."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    repo = tmp_path / "clone"
    (repo / ".ci").mkdir(parents=True)
    shutil.copy2(Path(__file__).resolve().parents[2] / ".ci/declares-changes", repo / ".ci/declares-changes")
    index = repo / "patches/megatron-core/index.toml"
    index.parent.mkdir(parents=True)

    def git(*args: str) -> str:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", *args], cwd=repo,
                              check=True, capture_output=True, text=True).stdout

    def declares_changes() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(repo / ".ci/declares-changes")], capture_output=True, text=True)

    git("init", "-q", "-b", "main")
    assert "no merge base" in declares_changes().stdout and declares_changes().returncode == 0  # no commit yet
    index.write_text('pinned = "aaa"\n\n[declares]\nversion = "0.1.0"\nrequires-dist = ["six"]\n\n[other]\nx = 1\n')
    git("add", "-A")
    git("commit", "-qm", "base")
    git("checkout", "-qb", "pr")
    index.write_text('pinned = "bbb"\n\n[declares]\nversion = "0.1.0"\nrequires-dist = ["six", "torch"]\n\n'
                     '[other]\nx = 2\n')
    git("commit", "-qam", "a pr")
    found = declares_changes()
    assert found.returncode == 0
    assert "  patches/megatron-core/index.toml: requires-dist: +'torch'" in found.stdout, found.stdout
    assert "pinned" not in found.stdout and "x = " not in found.stdout and "version" not in found.stdout
    for header in (" [declares]", "[ declares ]", "[declares]  # reviewed", '["declares"]'):
        index.write_text(f'pinned = "aaa"\n\n{header}\nversion = "0.9.0"\nrequires-dist = ["six"]\n')
        found = declares_changes()
        assert "  patches/megatron-core/index.toml: version: '0.1.0' -> '0.9.0'" in found.stdout, (header, found)
    index.write_text('pinned = "ccc"\n\n[declares]\nversion = "0.1.0"\nrequires-dist = ["six"]\n')
    found = declares_changes()
    assert "pinned moved ('aaa' -> 'ccc') and [declares] did not" in found.stdout, found.stdout
    # an empty list against none (a fork's records added or removed) is no reordering
    other = repo / "patches/nemo-toolkit/index.toml"
    other.parent.mkdir(parents=True)
    other.write_text('pinned = "ddd"\n\n[declares]\nversion = "0.1.0"\nrequires-dist = []\n')
    found = declares_changes()
    assert "  patches/nemo-toolkit/index.toml: requires-dist: added (an empty list)" in found.stdout, found.stdout
    assert "reordered" not in found.stdout, found.stdout
    shutil.rmtree(other.parent)
    index.write_text("pinned = [\n")
    assert "does not parse as TOML" in declares_changes().stdout
    git("checkout", "-q", "--", ".")
    import os

    def based(name: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(repo / ".ci/declares-changes")], capture_output=True, text=True,
                              env={**os.environ, "NEMO_RL_CI_BASE": name})

    # a base that is HEAD itself compares nothing committed, and says so; git options are no base at all
    for name in ("pr", "HEAD"):
        found = based(name)
        assert f"the base {name!r} is HEAD itself" in found.stdout and "torch" not in found.stdout, (name, found)
    for name in ("--octopus", "--independent", "no-such-ref"):  # never main quietly instead
        found = based(name)
        assert found.returncode == 0 and f"NEMO_RL_CI_BASE={name!r} has no merge base" in found.stdout, (name, found)
    git("checkout", "-q", "main")
    found = declares_changes()
    assert "is HEAD itself" in found.stdout and "declares] changed" not in found.stdout  # nothing changed
