"""The derived [[tool.uv.dependency-metadata]] entry (nemo_rl/forks/declared.py), bump's report and lock
helpers, and the installed fork against the lock: pure functions and a hand-made site-packages, no git, no uv."""

import pytest
import tomlkit

from nemo_rl.deps import bump
from nemo_rl.errors import NemoRLError
from nemo_rl.forks import bump_steps, declared
from nemo_rl.forks.record_files import Record
from nemo_rl.project import installed

FORK = declared.Declares("0.16.0rc0", None, ("einops", "pytest", "wandb", "tensorstore!=0.1.46", "torch", "six>=1.16"))
DELTAS = declared.deltas_from_table({
    "drop": [{"name": "pytest", "why": "a test tool"}, {"name": "wandb", "why": "logging we do not use"}],
    "add": [{"requirement": "numpy", "why": "imported, undeclared"},
            {"requirement": "tensorstore!=0.1.46,<0.1.72", "why": "numpy<2"}],
}, "megatron-core")


def test_derive_drops_adds_and_keeps_the_forks_version():
    entry = declared.derive("megatron-core", FORK, DELTAS)
    assert entry == declared.Entry("megatron-core", "0.16.0rc0", None,
                                   ("einops", "numpy", "six>=1.16", "tensorstore!=0.1.46,<0.1.72", "torch"))


def test_differences_name_each_field():
    derived = declared.derive("megatron-core", FORK, DELTAS)
    stale = declared.Entry("megatron-core", "0.13.0rc0", ">=3.10", ("einops", "numpy", "torch"))
    found = {field: detail for field, _, detail in declared.differences(stale, derived)}
    assert found["version"] == "'0.13.0rc0'" and found["requires-python"] == "'>=3.10'"
    assert "missing six>=1.16, tensorstore!=0.1.46,<0.1.72" in found["requires-dist"]
    assert declared.differences(derived, derived) == []
    assert declared.differences(None, derived)[0][2] == "missing"


def test_a_drop_the_fork_no_longer_declares_is_unnecessary():
    fork = declared.Declares("1", None, ("einops", "wandb"))
    assert declared.unnecessary_drops(fork, DELTAS) == ["pytest"]
    assert declared.unnecessary_drops(FORK, DELTAS) == []


@pytest.mark.parametrize("table, message", [
    ({"drop": [{"name": "pytest"}]}, "needs name and a non-empty why"),
    ({"drop": [{"name": "pytest", "why": " "}]}, "needs name and a non-empty why"),
    ({"add": [{"requirement": "six", "why": "a"}], "drop": [{"name": "six", "why": "b"}]}, "listed twice"),
    ({"drop": [{"name": "six>=1", "why": "b"}]}, "is more than a name"),
    ({"add": [{"requirement": "six >=", "why": "b"}]}, "is not a requirement"),
    ({"drop": "pytest"}, "must be an array"),
])
def test_deltas_are_checked_where_read(table, message):
    with pytest.raises(NemoRLError, match=message):
        declared.deltas_from_table(table, "megatron-core")


def test_write_entry_keeps_comments_and_says_whether_it_changed():
    text = ('[tool.uv]\n\n# why the entries exist\n[[tool.uv.dependency-metadata]]\nname = "megatron-core"\n'
            'version = "0.13.0rc0"  # derived\nrequires-python = ">=3.10"\nrequires-dist = ["torch"]\n')
    doc = tomlkit.parse(text)
    derived = declared.derive("megatron-core", FORK, DELTAS)
    assert declared.write_entry(doc, derived)
    out = tomlkit.dumps(doc)
    assert "# why the entries exist" in out and "requires-python" not in out
    entry = tomlkit.parse(out)["tool"]["uv"]["dependency-metadata"][0]
    assert entry["version"] == "0.16.0rc0" and list(entry["requires-dist"]) == list(derived.requires_dist)
    assert not declared.write_entry(tomlkit.parse(out), derived)


def test_declares_table_round_trips_and_is_checked():
    assert declared.declares_from_table(FORK.as_table(), "index.toml") == FORK
    assert declared.declares_from_table(None, "index.toml") is None
    with pytest.raises(NemoRLError, match=r"\[declares\] must hold"):
        declared.declares_from_table({"version": "1", "requires-dist": "torch"}, "index.toml")


def record(number, sha, patch_id):
    return Record(number, sha * 40, "a <a@b>", "2026-01-01", f"subject {sha}", patch_id * 40, "")


def test_bump_report_counts_commits_not_patch_ids():
    old = [{"commit": "a" * 40, "patch-id": "1" * 40, "subject": "subject a"}]
    # b and c are one change twice (one patch-id); a' is a rebased a (a's patch-id under a new SHA)
    new = [record(1, "d", "1"), record(2, "b", "2"), record(3, "c", "2")]
    added, removed, shared = bump_steps.commit_changes(old, new)
    assert [r.commit[0] for r in added] == ["b", "c"] and removed == []
    assert shared == {"2" * 40: ["b" * 40, "c" * 40]}
    e = {"commit": "e" * 40, "patch-id": "2" * 40, "subject": "e"}
    added, removed, _ = bump_steps.commit_changes([*old, e], new)
    assert [r.commit[0] for r in added] == ["c"] and removed == []
    added, removed, _ = bump_steps.commit_changes(old, [record(1, "a", "1"), record(2, "b", "2")])
    assert [r.commit[0] for r in added] == ["b"] and removed == []  # a was there already
    added, removed, _ = bump_steps.commit_changes(old, [record(1, "b", "2")])
    assert [r.commit[0] for r in added] == ["b"] and [e["commit"][0] for e in removed] == ["a"]


def test_the_offline_lock_says_why_it_was_thrown_away():
    before = "version = 1\nsource = old\n"
    assert bump.offline_lock_rejected(before, "version = 1\nsource = new\n", "old", "new") is None
    why = bump.offline_lock_rejected(before, "version = 2\nsource = new\n", "old", "new")
    assert "uv.lock line 1" in why and "version = 2" in why


def fake_env(tmp_path, version, requires):
    site = tmp_path / "env/lib/python3.12/site-packages"
    info = site / f"megatron_core-{version}.dist-info"
    info.mkdir(parents=True)
    lines = "".join(f"Requires-Dist: {r}\n" for r in requires)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: megatron-core\nVersion: {version}\n{lines}")
    six = site / "six-1.17.0.dist-info"
    six.mkdir()
    (six / "METADATA").write_text("Metadata-Version: 2.1\nName: six\nVersion: 1.17.0\n")
    (tmp_path / "env/pyvenv.cfg").write_text("home = /usr\n")
    return tmp_path / "env"


def test_installed_fork_against_lock_and_records(tmp_path):
    env = fake_env(tmp_path, "0.2.0", ["six>=1.16", "pytest; extra == 'test'"])
    assert installed.metadata_problems(env, "megatron-core", "0.2.0", ["six>=1.16"], ["six>=1.16"]) == []
    version, = installed.metadata_problems(env, "megatron-core", "0.1.0", None, None)
    assert "megatron-core 0.2.0 is installed but uv.lock says 0.1.0" in version and "deps patches megatron-core" \
        in version
    requires, = installed.metadata_problems(env, "megatron-core", "0.2.0", [], None)
    assert "+six>=1.16" in requires and "deps patches megatron-core" in requires
    missing, = installed.metadata_problems(env, "megatron-core", "0.2.0", None, ["six", "einops"])
    assert missing.startswith("einops, which uv.lock requires") and "uv sync --locked" in missing


@pytest.mark.parametrize("key, value, expected", [
    ("add", "evil @ https://example.invalid/evil.tar.gz", "is a direct reference"),
    ("drop", "pytest ; python_version < '3'", "is more than a name"),
    ("drop", "pytest @ https://example.invalid/pytest.tar.gz", "is more than a name"),
])
def test_a_delta_that_would_run_or_hide_something_is_refused(key, value, expected):
    from nemo_rl.errors import NemoRLError

    field = "requirement" if key == "add" else "name"
    with pytest.raises(NemoRLError, match=expected):
        declared.deltas_from_table({key: [{field: value, "why": "a reason"}]}, "megatron-core")


@pytest.mark.parametrize("line", ["--index-url http://evil", "evil @ https://example.invalid/evil.tar.gz"])
def test_declares_of_a_hand_edited_index_are_requirements_or_refused(line):
    from nemo_rl.errors import NemoRLError

    with pytest.raises(NemoRLError, match="is not a requirement nemo-rl locks"):
        declared.declares_from_table({"version": "1.0", "requires-dist": [line]}, "patches/megatron-core/index.toml")


def test_two_entries_for_one_fork_are_refused(tmp_path):
    """uv would ignore the derived entry and lock the fork's own metadata, silently."""
    from nemo_rl.errors import NemoRLError
    from nemo_rl.project import lockfile

    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "p"\nversion = "0"\n'
        '[[tool.uv.dependency-metadata]]\nname = "megatron-core"\nversion = "1"\n'
        '[[tool.uv.dependency-metadata]]\nname = "Megatron_Core"\nversion = "2"\n')
    with pytest.raises(NemoRLError, match="2 .*entries for megatron-core"):
        lockfile.declared_metadata(tmp_path, "megatron-core")


@pytest.mark.parametrize("edit, expected", [
    (lambda p: p.update(version="9.9"), "version"),
    (lambda p: p.update(dependencies=[{"name": "torch"}]), "missing"),
    (lambda p: p["dependencies"].append({"name": "six"}), "also six"),
])
def test_a_hand_edit_of_the_forks_locked_package_is_caught(edit, expected):
    """uv does not check a git package's locked metadata against the entry: a hand edit of uv.lock would stand."""
    from nemo_rl.forks import metadata_check

    entry = declared.Entry("megatron-core", "0.1.0", None, ("numpy", "torch"))
    package = {"name": "megatron-core", "version": "0.1.0", "dependencies": [{"name": "numpy"}, {"name": "torch"}]}
    assert metadata_check.locked_differences({"package": [package]}, entry) == []
    edit(package)
    found = metadata_check.locked_differences({"package": [package]}, entry)
    assert found and expected in " ".join(" ".join(f) for f in found)
