"""The bump's steps on values alone (forks/bump_steps.py): when it has nothing to do, when index.toml stands for
the old commit's metadata, the drift from two recorded declarations, and the staged pyproject.toml written once.
On fixture forks: the old side of the requirement drift read from [declares], or built when the index is not
the record of the pin."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import forkworld
import pytest
from fakes import RECORD, bump, derived_world, make_index, pin
from gitfixtures import commit, git

from nemo_rl.forks import bump_steps, declared, record_files
from nemo_rl.forks.record_files import Listed, Record
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
                             index_at(PIN) if index is None else index)


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


OLD_SHA, NEW_SHA = "a" * 40, "b" * 40
FORK_URL = "https://github.com/example/Megatron-LM.git"


def lock(fork_version="0.13.0rc0", rev=OLD_SHA, fork_deps=("numpy", "tensorstore"), packages=None, header=None,
         manifest_extra="", forks=1, other_entry="2.4.0rc0") -> str:
    packages = packages if packages is not None else {"numpy": "1.26.4", "tensorstore": "0.1.71"}
    lines = [header or 'version = 1\nrevision = 3\nrequires-python = ">=3.12"\n',
             "[manifest]\n" + manifest_extra,
             f'[[manifest.dependency-metadata]]\nname = "megatron-core"\nversion = "{fork_version}"\n'
             f"requires-dist = {list(fork_deps)!r}\n".replace("'", '"'),
             f'[[manifest.dependency-metadata]]\nname = "nemo-toolkit"\nversion = "{other_entry}"\n']
    for _ in range(forks):
        lines.append(f'[[package]]\nname = "megatron-core"\nversion = "{fork_version}"\n'
                     f'source = {{ git = "{FORK_URL}?rev={rev}#{rev}" }}\n'
                     "dependencies = [" + ", ".join(f'{{ name = "{d}" }}' for d in fork_deps) + "]\n")
    for name, version in packages.items():
        lines.append(f'[[package]]\nname = "{name}"\nversion = "{version}"\n'
                     'source = { registry = "https://pypi.org/simple" }\n')
    return "\n".join(lines)


def rejected(offline: str, committed: str | None = None) -> str | None:
    return bump_steps.rejected(committed or lock(), offline, "megatron-core", OLD_SHA, NEW_SHA)


def test_only_the_sha_moved_is_kept():
    assert rejected(lock(rev=NEW_SHA)) is None


def test_the_forks_new_version_and_requirements_are_kept_with_what_only_it_reached_dropped():
    """The real move's shape: 0.16.0rc0 needs numpy and packaging (both locked), no longer tensorstore."""
    committed = lock(packages={"numpy": "1.26.4", "packaging": "24.2", "tensorstore": "0.1.71"})
    offline = lock("0.16.0rc0", NEW_SHA, ("numpy", "packaging"), {"numpy": "1.26.4", "packaging": "24.2"})
    assert rejected(offline, committed) is None


def test_a_package_added_or_moved_needs_the_index():
    assert rejected(lock(rev=NEW_SHA, packages={"numpy": "1.26.4", "tensorstore": "0.1.71", "six": "1.17.0"})) == \
        "it adds or changes six 1.17.0"
    assert rejected(lock(rev=NEW_SHA, packages={"numpy": "2.0.0", "tensorstore": "0.1.71"})) == \
        "it adds or changes numpy 2.0.0"


def test_a_changed_header_or_manifest_needs_the_index():
    assert rejected(lock(rev=NEW_SHA, header='version = 1\nrevision = 3\nrequires-python = ">=3.11"\n')) == \
        "it changed uv.lock's 'requires-python'"
    assert rejected(lock(rev=NEW_SHA, manifest_extra='members = ["other"]\n')) == \
        "it changed uv.lock's [manifest] beyond the fork's entry"
    assert rejected(lock(rev=NEW_SHA, other_entry="2.5.0")) == "it changed uv.lock's [manifest] beyond the fork's entry"


def test_the_fork_must_be_locked_once_at_the_new_commit():
    assert rejected(lock()) == (f"it locks megatron-core from {{'git': '{FORK_URL}?rev={OLD_SHA}#{OLD_SHA}'}}, not "
                                f"{{'git': '{FORK_URL}?rev={NEW_SHA}#{NEW_SHA}'}}")
    assert rejected(lock(rev=NEW_SHA, forks=2)) == "it locks megatron-core 2 time(s), the committed lock 1"
    assert rejected(lock(rev=NEW_SHA, forks=0)) == "it locks megatron-core 0 time(s), the committed lock 1"


@pytest.mark.parametrize("text", ["[[package]\n", 'version = "1\n'])
def test_a_lock_that_does_not_parse_is_thrown_away(text):
    assert rejected(text).startswith("uv wrote a uv.lock that does not parse")
    # a committed one edited by hand into something that does not parse: named as such, and online
    assert bump_steps.rejected(text, lock(rev=NEW_SHA), "megatron-core", OLD_SHA, NEW_SHA).startswith(
        "the committed uv.lock does not parse")


@pytest.mark.parametrize("edit", ["manifest = 5\n", "package = 5\n", "package = [5]\n",
                                  "[manifest]\ndependency-metadata = [5]\n"])
def test_a_lock_in_a_shape_uv_does_not_write_is_named(edit):
    shape = "has a [[package]] or [manifest] uv does not write"
    assert rejected(lock(rev=NEW_SHA), edit) == f"the committed uv.lock {shape}"
    assert rejected(edit) == f"the uv.lock uv wrote {shape}"


def next_commit(world) -> str:
    megatron = world.forks["megatron-core"]
    return commit(megatron.fork, "fix: one more token", {"megatron/core/tokens.py": "def tokens():\n    return [3]\n"})


def test_bump_locks_offline_when_only_the_pin_moves(world, capsys):
    """With declared metadata nothing but the SHA can change: uv's offline run, checked to be exactly that."""
    forkworld.derive_metadata(world, {})
    before = (world.project / "uv.lock").read_text()
    new = next_commit(world)
    assert bump(world, "--rev", new) == 0
    assert "locked offline" in capsys.readouterr().out
    assert (world.project / "uv.lock").read_text() == before.replace(world.forks["megatron-core"].head, new)
    forkworld.uv_run(world, "lock", "--check")  # what an online lock gives


def test_bump_locks_online_when_more_than_the_pin_changes(world, capsys):
    """pyproject.toml changed since the last lock (the project's own version): offline is not the whole answer."""
    forkworld.derive_metadata(world, {})
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text().replace('name = "fixture-project"\nversion = "0.1.0"',
                                             'name = "fixture-project"\nversion = "0.1.1"'))
    assert bump(world, "--rev", next_commit(world)) == 0
    assert "locked offline" not in capsys.readouterr().out
    forkworld.uv_run(world, "lock", "--check")


def test_lock_changes_lists_changed_added_and_removed_in_order():
    old = {"torch": "2.7.0", "numpy": "1.26.4", "gone": "1.0"}
    new = {"torch": "2.7.0", "numpy": "1.26.5", "zeta": "0.1", "alpha": "2.0"}
    assert bump_steps.lock_changes(old, new) == [
        "numpy: 1.26.4 -> 1.26.5", "alpha: added (2.0)", "zeta: added (0.1)", "gone: removed (was 1.0)"]
    assert bump_steps.lock_changes(old, old) == []


def test_the_report_names_added_and_removed_commits_by_patch_id():
    kept, dropped = RECORD, replace(RECORD, commit="e" * 40, patch_id="f" * 40, subject="dropped upstream")
    added = replace(RECORD, commit="1" * 40, patch_id="2" * 40, subject="new work")
    index = make_index([kept, dropped])
    fork = lockfile.Fork("megatron-core", "https://forks.nemo-rl.invalid/megatron-lm.git", "c" * 40, "nemo-rl/main",
                         "https://upstream.nemo-rl.invalid/megatron-lm.git", "main", "d" * 40)
    text = bump_steps.report(fork, "9" * 40, index, "8" * 40, [kept, added], ["numpy: 1 -> 2"], dry_run=True,
                       lock_mode="offline")
    lines = text.splitlines()
    assert lines[0] == "bump megatron-core (dry run: nothing written)"
    assert f"  upstream  base moved {'d' * 12} -> {'8' * 12}" in lines
    assert "  downstream commits: 2 (1 added, 1 removed)" in lines
    assert f"    + {'1' * 12} new work" in lines and f"    - {'e' * 12} dropped upstream" in lines
    assert lines[-2].startswith("  uv.lock: 1 change(s) (locked offline") and lines[-1] == "    numpy: 1 -> 2"


def record(number, sha, patch_id):
    return Record(number, sha * 40, "a <a@b>", "2026-01-01", f"subject {sha}", patch_id * 40, "")


def listed(sha, patch_id):
    return Listed(1, sha * 40, f"subject {sha}", patch_id * 40, "0001-x.patch", "sha256:" + "0" * 64)


def test_commits_are_counted_by_commit_not_by_patch_id():
    old = [listed("a", "1")]
    # b and c are one change twice (one patch-id); d is a rebased a (a's patch-id under a new SHA)
    new = [record(1, "d", "1"), record(2, "b", "2"), record(3, "c", "2")]
    added, removed, shared = bump_steps.commit_changes(old, new)
    assert [r.commit[0] for r in added] == ["b", "c"] and removed == []
    assert shared == {"2" * 40: ["b" * 40, "c" * 40]}
    added, removed, _ = bump_steps.commit_changes([*old, listed("e", "2")], new)
    assert [r.commit[0] for r in added] == ["c"] and removed == []
    added, removed, _ = bump_steps.commit_changes(old, [record(1, "a", "1"), record(2, "b", "2")])
    assert [r.commit[0] for r in added] == ["b"] and removed == []  # a was there already
    added, removed, _ = bump_steps.commit_changes(old, [record(1, "b", "2")])
    assert [r.commit[0] for r in added] == ["b"] and [e.commit[0] for e in removed] == ["a"]


def test_empty_commits_share_a_patch_id_without_being_one_change_twice():
    empty = bump_steps.ZERO[0]
    _, _, shared = bump_steps.commit_changes([], [record(1, "a", empty), record(2, "b", empty)])
    assert shared == {}
