"""The bump's steps on values alone (forks/bump_steps.py): when it has nothing to do, when index.toml stands for
the old commit's metadata, the drift from two recorded declarations, and the staged pyproject.toml written once.
On fixture forks: the old side of the requirement drift read from [declares], or built when the index is not
the record of the pin."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import forkworld
from fakes import derived_world, pin
from gitfixtures import commit, git

from nemo_rl.forks import bump_steps, declared, record_files
from nemo_rl.project import lockfile
from nemo_rl.project.model import Project

PIN, NEW = "c" * 40, "9" * 40
FORK = lockfile.Fork("megatron-core", "https://forks.nemo-rl.invalid/megatron-lm.git", PIN, "nemo-rl/main",
                     "https://upstream.nemo-rl.invalid/megatron-lm.git", "main", "d" * 40)
AT_PIN = declared.Declares("0.1.0", ">=3.10", ("torch>=2.6", "einops"), PIN)


def locked_at(commit: str) -> dict[str, lockfile.LockedPackage]:
    return {"megatron-core": lockfile.LockedPackage.of("megatron-core", "0.1.0",
                                                       {"git": f"{FORK.url}?rev={commit}#{commit}"})}


def index_at(pinned: str, declares: declared.Declares | None = AT_PIN) -> record_files.Index:
    return record_files.index_for(FORK.distribution, FORK.url, FORK.branch, pinned, FORK.upstream_url, "main",
                                  "d" * 40, "why", [], declares.as_table() if declares else None)


def before(locked=None, index=None, entry=None) -> bump_steps.Before:
    return bump_steps.Before(FORK, locked_at(PIN) if locked is None else locked, "", entry, declared.Deltas(),
                             index_at(PIN) if index is None else index, Path("patches/megatron-core"), {})


def test_a_bump_has_nothing_to_do_only_at_the_pinned_and_locked_commit_on_its_branch():
    assert before().at(PIN, None) and before().at(PIN, "nemo-rl/main")
    assert not before().at(NEW, None)
    assert not before().at(PIN, "another-branch")  # the pin stays, the recorded branch moves
    assert not before(locked=locked_at("e" * 40)).at(PIN, None)  # uv.lock is another commit: relocked
    assert not before(locked={}).at(PIN, None)


def test_index_toml_stands_for_the_old_commit_only_as_the_record_of_the_pin():
    assert before().recorded_at_pin() == AT_PIN
    assert before(index=index_at("e" * 40)).recorded_at_pin() is None  # the index is of another commit
    assert before(locked=locked_at("e" * 40)).recorded_at_pin() is None  # uv.lock locks another commit
    assert before(index=replace(index_at(PIN), digest="sha256:edited")).recorded_at_pin() is None
    assert before(index=index_at(PIN, None)).recorded_at_pin() is None  # nothing recorded: built instead
    assert before(index=replace(index_at(PIN), problems=("[[commit]] #1 has x",))).recorded_at_pin() is None


def test_the_drift_of_two_recorded_declarations_needs_no_build():
    new = declared.Declares("0.2.0", ">=3.10", ("torch>=2.7", "numpy"), NEW)
    lines = bump_steps.requirement_drift(before(), Path("/nonexistent"), NEW, new)
    assert lines[0] == "  requirements (the fork's own metadata): 1 added, 1 removed, 1 changed"
    assert "    + numpy" in lines and "    - einops" in lines and "    ~ torch>=2.6 -> torch>=2.7" in lines


def test_the_staged_pyproject_gets_the_pin_branch_base_and_derived_entry_in_one_write(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        "[project]\nname = 'x'\nversion = '0'\n"
        f"[tool.uv.sources]\nmegatron-core = {{ git = '{FORK.url}', rev = '{PIN}' }}  # the pin\n"
        "[[tool.uv.dependency-metadata]]\nname = 'megatron-core'\nversion = '0.1.0'\nrequires-dist = ['torch>=2.6']\n"
        f"[tool.nemo-rl.forks.megatron-core]\nbranch = 'nemo-rl/main'\nupstream-url = '{FORK.upstream_url}'\n")
    entry = declared.Entry("megatron-core", "0.1.0", None, ("torch>=2.6",))
    new = declared.Declares("0.2.0", None, ("torch>=2.7",), NEW)
    lines, change = bump_steps.write_pyproject(tmp_path, before(entry=entry), NEW, "feature", "b" * 40, new)
    written = lockfile.load_toml(tmp_path / "pyproject.toml")
    assert written["tool"]["uv"]["sources"]["megatron-core"]["rev"] == NEW
    assert written["tool"]["nemo-rl"]["forks"]["megatron-core"] | {"upstream-url": None} == {
        "branch": "feature", "base": "b" * 40, "upstream-url": None}
    assert written["tool"]["uv"]["dependency-metadata"][0]["requires-dist"] == ["torch>=2.7"]
    assert "# the pin" in (tmp_path / "pyproject.toml").read_text()  # comments stay
    assert change == (entry, declared.Entry("megatron-core", "0.2.0", None, ("torch>=2.7",)))
    assert "rewritten (version 0.2.0)" in lines[0] and "    + torch>=2.7" in lines


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
    path.write_text(path.read_text().replace(Project.read(world.project).fork("megatron-core").rev, moved))
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
