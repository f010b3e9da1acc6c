"""The project's side of the derived entries (forks/metadata_check.py): whether a fork derives its entry, the
locked package held against the derived entry, and the report's and the refusal's lines. A pyproject.toml in a
temporary directory, no fork."""

from __future__ import annotations

import textwrap
from pathlib import Path

from nemo_rl.forks import metadata_check
from nemo_rl.forks.declared import Entry

DERIVED = Entry("megatron-core", "0.2.0", ">=3.10", ("numpy>=1.26", "torch; sys_platform == 'linux'"))


def project(tmp_path: Path, fork_table: str = "", entry: bool = False) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent('''\
        [project]
        name = "p"
        version = "0"
        [tool.nemo-rl.forks.megatron-core]
        ''') + fork_table + ('\n[[tool.uv.dependency-metadata]]\nname = "megatron-core"\nversion = "0.1.0"\n'
                             'requires-dist = ["numpy"]\n' if entry else ""))
    return tmp_path


def test_a_fork_derives_its_entry_when_it_has_one_or_deltas_that_need_one(tmp_path):
    assert not metadata_check.derives(project(tmp_path / "bare"), "megatron-core")
    assert metadata_check.derives(project(tmp_path / "entry", entry=True), "megatron-core")
    dropping = project(tmp_path / "drop", 'drop = [{ name = "wandb", why = "logging only" }]\n')
    assert metadata_check.derives(dropping, "megatron-core")
    assert [d.name for d in metadata_check.deltas(dropping, "megatron-core").drop] == ["wandb"]
    assert metadata_check.entry(project(tmp_path / "e2", entry=True), "megatron-core") == Entry(
        "megatron-core", "0.1.0", None, ("numpy",))


def test_the_locked_package_is_held_against_the_derived_entry():
    def lock(version, *names, recorded=DERIVED.requires_dist):
        return {"package": [{"name": "megatron-core", "version": version,
                             "dependencies": [{"name": n} for n in names]}, {"name": "numpy"}],
                "manifest": {"dependency-metadata": [{"name": "megatron-core", "version": "0.2.0",
                                                      "requires-dist": list(recorded)}]}}

    assert metadata_check.locked_differences(lock("0.2.0", "numpy", "torch"), DERIVED) == []
    # torch's marker is met here (Linux), so it must be locked; numpy is unconditional
    assert metadata_check.locked_differences(lock("0.2.0", "numpy"), DERIVED) == [
        ("dependencies", "torch among them", "missing")]
    assert metadata_check.locked_differences(lock("0.1.0", "torch", "einops"), DERIVED) == [
        ("version", "0.2.0", "0.1.0"), ("dependencies", "numpy among them", "missing"),
        ("dependencies", "only what the entry requires", "also einops")]
    assert metadata_check.locked_differences({"package": []}, DERIVED) == [("entries", "one", "0")]
    # the entry uv recorded, edited by hand
    assert metadata_check.locked_differences(lock("0.2.0", "numpy", "torch", recorded=["numpy>=1.26"]), DERIVED) == [
        ("[[manifest.dependency-metadata]] requires-dist", "the derived list", "missing torch")]


def test_the_report_names_what_a_rewritten_entry_changed():
    before = Entry("megatron-core", "0.1.0", None, ("numpy>=1.26", "einops"))
    assert metadata_check.entry_changes(before, DERIVED) == [
        "    version: 0.1.0 -> 0.2.0", "    requires-python: None -> >=3.10",
        "    + torch; sys_platform == 'linux'", "    - einops"]
    assert metadata_check.entry_changes(None, DERIVED)[0] == "    version: None -> 0.2.0"


def test_a_refused_lock_names_the_drop_line_of_each_added_requirement():
    before = Entry("megatron-core", "0.1.0", None, ("numpy",))
    remedy = metadata_check.refusal_remedy(before, DERIVED)
    assert '    { name = "torch", why = "<why nemo-rl does not need it>" },' in remedy
    assert "numpy" not in remedy and "[tool.nemo-rl.forks.megatron-core]" in remedy
    assert metadata_check.refusal_remedy(DERIVED, DERIVED).startswith("uv's message above names the requirement")
