"""The derived [[tool.uv.dependency-metadata]] entry (nemo_rl/forks/declared.py), bump's report and lock
helpers, and the installed fork against the lock: pure functions and a hand-made site-packages, no git, no uv;
and on fixture forks, the entry edited by hand, spelled differently, a drop the fork no longer needs, and a
direct reference the fork declares."""

import tomllib

import forkworld
import pytest
import tomlkit
from fakes import (
    _backend_commit,
    _state,
    deps,
    derived_world,
    entry,
    fake_installed_fork,
    fake_project,
    locked,
    offline,
    patches,
    pin,
)
from gitfixtures import commit

from nemo_rl import uv
from nemo_rl.errors import NemoRLError
from nemo_rl.forks import declared
from nemo_rl.project.model import Project

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


def test_a_direct_reference_the_fork_declares_is_refused_unless_dropped():
    """`evil @ <url>` in the fork's METADATA would be built (its setup.py run) by uv lock: refused before any
    lock; a dropped one is never locked, and kept by its name alone (no URL in index.toml)."""
    url = "evil @ https://evil.nemo-rl.invalid/evil-1.0.tar.gz"
    with pytest.raises(NemoRLError, match="the fork at aaaaaaaaaaaa declares a direct reference 'evil @ https:") \
            as caught:
        declared.declares_from("0.2.0", None, {"torch": "torch>=2", "evil": url}, "a" * 40, "megatron-core")
    assert declared.drop_line("evil") in caught.value.remedy
    found = declared.declares_from("0.2.0", None, {"torch": "torch>=2", "evil": url}, "a" * 40, "megatron-core",
                                   frozenset({"evil"}))
    assert found.requires_dist == ("torch>=2", "evil")
    assert declared.declares_from_table(found.as_table(), "index.toml") == found


FIX = "run `nemo-rl deps patches megatron-core`, then"






def kinds(project, env):
    from nemo_rl.forks import installed_fork

    return {p.kind: str(p) for p in installed_fork.problems(Project.read(project), env, "megatron-core")}


def test_the_installed_fork_as_locked_has_no_problem(tmp_path):
    # extras' requirements are the fork's options, and pytest is dropped: neither is a difference
    env = fake_installed_fork(tmp_path, "0.2.0", ["six>=1.16", "pytest>=8", "einops; extra == 'test'"])
    assert kinds(fake_project(tmp_path), env) == {}


def test_a_requirement_the_fork_lists_twice_is_one(tmp_path):
    """megatron-core's setup.py lists torch in two lists, so its METADATA has it twice; the entry has it once."""
    env = fake_installed_fork(tmp_path, "0.2.0", ["six>=1.16", "six>=1.16"])
    assert kinds(fake_project(tmp_path), env) == {}


def test_an_installed_version_uv_lock_does_not_say_is_named_with_its_fix(tmp_path):
    env = fake_installed_fork(tmp_path, "0.2.0", ["six>=1.16"])
    found = kinds(fake_project(tmp_path, version="0.1.0"), env)
    assert list(found) == ["another version"]
    assert "megatron-core 0.2.0 is installed but uv.lock says 0.1.0" in found["another version"]
    assert FIX in found["another version"] and f"`{uv.sync_command()}`" in found["another version"]


@pytest.mark.parametrize("installed_requires, expected", [
    (["six>=1.16", "numpy>=2"], "+numpy>=2"),  # the fork requires it, uv.lock's entry does not
    ([], "-six>=1.16"),  # the entry requires what the fork no longer does
    (["six>=1.17"], "+six>=1.17, -six>=1.16"),  # another bound
])
def test_installed_requirements_uv_lock_does_not_have_are_named(tmp_path, installed_requires, expected):
    found = kinds(fake_project(tmp_path),
                  fake_installed_fork(tmp_path, "0.2.0", installed_requires, others=("six", "numpy")))
    assert list(found) == ["requirements differ"] and expected in found["requirements differ"]
    assert FIX in found["requirements differ"]


def test_a_locked_requirement_not_installed_is_named(tmp_path):
    found = kinds(fake_project(tmp_path), fake_installed_fork(tmp_path, "0.2.0", ["six>=1.16"], others=()))
    assert found == {"requirement missing": "six, which megatron-core requires, is not installed: run "
                                            f"`{uv.sync_command()}`"}


def test_another_commit_installed_says_sync(tmp_path):
    found = kinds(fake_project(tmp_path), fake_installed_fork(tmp_path, "0.1.0", [], commit="d" * 40))
    assert list(found) == ["another commit"] and "uv sync --locked --extra mcore" in found["another commit"]
    found = kinds(fake_project(tmp_path / "b"),
                  fake_installed_fork(tmp_path / "b", "0.2.0", ["six>=1.16"], commit=None))
    assert "no git commit record" in found["another commit"]


def test_a_requirement_whose_marker_excludes_the_environment_is_no_problem(tmp_path):
    split = ['six>=1.16; python_version < "3.12"', 'six>=1.17; python_version >= "3.12"']
    project = fake_project(tmp_path, requires=split)
    # a Python 3.12 environment: only the second applies; the fork leaving out the first is not a difference
    assert kinds(project, fake_installed_fork(tmp_path, "0.2.0", [split[1]])) == {}
    found = kinds(project, fake_installed_fork(tmp_path / "311", "0.2.0", [split[1]], python="3.11.9"))
    assert "-six>=1.16" in found["requirements differ"]  # in a 3.11 environment it does apply
    assert "+six" not in found["requirements differ"]  # and the 3.12 one does not


def test_the_add_list_applies_to_what_is_installed(tmp_path):
    project = fake_project(tmp_path, requires=("numpy", "six>=1.16,<2"), depends=("numpy", "six"),
                           add=("numpy", "six>=1.16,<2"))
    assert kinds(project, fake_installed_fork(tmp_path, "0.2.0", ["six>=1.16"], others=("six", "numpy"))) == {}


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
    from nemo_rl.forks import metadata_check

    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "p"\nversion = "0"\n'
        '[[tool.uv.dependency-metadata]]\nname = "megatron-core"\nversion = "1"\n'
        '[[tool.uv.dependency-metadata]]\nname = "Megatron_Core"\nversion = "2"\n')
    with pytest.raises(NemoRLError, match="2 .*entries for megatron-core"):
        metadata_check.entry(Project.read(tmp_path), "megatron-core")


def lock_of(package, manifest):
    return {"package": [package], "manifest": {"dependency-metadata": [manifest]}}


@pytest.mark.parametrize("edit, expected", [
    (lambda p, m: p.update(version="9.9"), "version"),
    (lambda p, m: p.update(dependencies=[{"name": "torch"}]), "missing"),
    (lambda p, m: p["dependencies"].append({"name": "six"}), "also six"),
    (lambda p, m: m.update(version="9.9"), "[[manifest.dependency-metadata]] version"),
    (lambda p, m: m.update({"requires-dist": ["numpy>=2", "torch"]}), "missing numpy; not derived numpy>=2"),
    (lambda p, m: m.update({"requires-dist": ["torch"]}), "missing numpy"),
    (lambda p, m: m.update({"requires-dist": "torch"}), "a list of requirements"),
])
def test_a_hand_edit_of_the_forks_locked_package_is_caught(edit, expected):
    """uv does not check a git package's locked metadata against the entry: a hand edit of uv.lock would stand."""
    from nemo_rl.forks import locked_fork

    entry = declared.Entry("megatron-core", "0.1.0", None, ("numpy", "torch"))
    package = {"name": "megatron-core", "version": "0.1.0", "dependencies": [{"name": "numpy"}, {"name": "torch"}]}
    manifest = {"name": "megatron-core", "version": "0.1.0", "requires-dist": ["numpy", "torch"]}
    assert locked_fork.locked_differences(lock_of(package, manifest), entry) == []
    edit(package, manifest)
    found = locked_fork.locked_differences(lock_of(package, manifest), entry)
    assert found and expected in " ".join(" ".join(f) for f in found)


SPLIT = ('foo>=1; python_version < "3.12"', 'foo>=2; python_version >= "3.12"')


def test_requirements_of_one_name_split_by_marker_are_both_kept():
    fork = declared.Declares("1.0", None, ("torch", *SPLIT, "pytest"))
    deltas = declared.deltas_from_table({"drop": [{"name": "pytest", "why": "a test tool"}]}, "megatron-core")
    assert declared.derive("megatron-core", fork, deltas).requires_dist == (*SPLIT, "torch")
    # an add with a marker replaces the fork's requirement of that name and marker only
    tighter = declared.deltas_from_table({"add": [{"requirement": 'foo>=2.5; python_version >= "3.12"', "why": "a"}]},
                                         "megatron-core")
    assert declared.derive("megatron-core", fork, tighter).requires_dist == (
        SPLIT[0], 'foo>=2.5; python_version >= "3.12"', "pytest", "torch")
    # one without a marker replaces every requirement of its name
    one = declared.deltas_from_table({"add": [{"requirement": "foo>=3", "why": "a"}]}, "megatron-core")
    assert declared.derive("megatron-core", fork, one).requires_dist == ("foo>=3", "pytest", "torch")
    # dropped by name: both go
    both = declared.deltas_from_table({"drop": [{"name": "foo", "why": "a"}]}, "megatron-core")
    assert declared.derive("megatron-core", fork, both).requires_dist == ("pytest", "torch")
    # and the lock's manifest keeps both: one of them lost is named
    entry = declared.derive("megatron-core", fork, deltas)
    package = {"name": "megatron-core", "version": "1.0", "dependencies": [{"name": "foo"}, {"name": "torch"}]}
    manifest = {"name": "megatron-core", "version": "1.0", "requires-dist": [SPLIT[1], "torch"]}
    found = metadata_check_differences(package, manifest, entry)
    assert "missing foo>=1" in found


def metadata_check_differences(package, manifest, entry):
    from nemo_rl.forks import locked_fork

    return " ".join(" ".join(f) for f in locked_fork.locked_differences(lock_of(package, manifest), entry))


@pytest.mark.parametrize("adds", [
    ["foo>=2", 'foo>=3; python_version >= "3.12"'],
    ['foo>=3; python_version >= "3.12"', "foo>=2"],
    ['foo>=3; python_version >= "3.12"', 'foo>=4; python_version >= "3.12"'],
])
def test_one_name_added_twice_needs_distinct_markers(adds):
    with pytest.raises(NemoRLError, match="added twice for the same environments"):
        declared.deltas_from_table({"add": [{"requirement": r, "why": "a"} for r in adds]}, "megatron-core")


def test_one_name_added_for_two_markers_is_taken():
    found = declared.deltas_from_table({"add": [{"requirement": r, "why": "a"} for r in SPLIT]}, "megatron-core")
    assert [a.requirement for a in found.add] == list(SPLIT)
    fork = declared.Declares("1.0", None, ("foo", "torch"))
    assert declared.derive("megatron-core", fork, found).requires_dist == ("foo", *SPLIT, "torch")


def test_the_forks_metadata_keeps_requirements_split_by_marker():
    from nemo_rl.forks import fork_metadata

    found = fork_metadata._requirements([*SPLIT, "torch", "pytest; extra == 'test'", "foo[x]>=1"])
    assert sorted(found.values()) == sorted(['foo>=1; python_version < "3.12"', 'foo>=2; python_version >= "3.12"',
                                             "torch", "foo[x]>=1"])
    assert found["torch"] == "torch"  # an unconditional requirement is still found by its name


def test_without_an_entry_the_forks_own_requirements_must_be_locked(tmp_path):
    """No [[tool.uv.dependency-metadata]] entry: uv locks the fork's own metadata, so the names must be there."""
    project = fake_project(tmp_path, drop=())
    path = project / "pyproject.toml"
    doc = tomlkit.parse(path.read_text())
    del doc["tool"]["uv"]["dependency-metadata"]
    path.write_text(tomlkit.dumps(doc))
    lock = tomlkit.parse((project / "uv.lock").read_text())
    del lock["manifest"]
    (project / "uv.lock").write_text(tomlkit.dumps(lock))
    env = fake_installed_fork(tmp_path, "0.2.0", ["six>=1.16", "numpy"], others=("six", "numpy"))
    found = kinds(project, env)
    assert list(found) == ["not locked"] and "requires numpy, which uv.lock does not lock" in found["not locked"]
    assert "`uv lock --upgrade-package megatron-core`" in found["not locked"]


def test_a_requirement_met_where_the_lock_applies_must_be_locked():
    from nemo_rl.forks import locked_fork

    entry = declared.Entry("megatron-core", "0.1.0", None, ('numpy; python_version >= "3"', "torch"))
    package = {"name": "megatron-core", "version": "0.1.0", "dependencies": [{"name": "torch"}]}
    manifest = {"name": "megatron-core", "version": "0.1.0", "requires-dist": list(entry.requires_dist)}
    found = locked_fork.locked_differences(lock_of(package, manifest), entry)
    assert ("dependencies", "numpy among them", "missing") in found


def test_a_marker_that_cannot_be_evaluated_counts_as_met_and_never_raises(tmp_path):
    """`implementation_name ~= "1.0"` is a comparison packaging refuses: the probe says what it found instead."""
    odd = 'six>=1.16; implementation_name ~= "1.0"'
    found = kinds(fake_project(tmp_path, requires=(odd,)), fake_installed_fork(tmp_path, "0.2.0", []))
    assert list(found) == ["requirements differ"] and f"-{odd.split(';')[0]}" in found["requirements differ"]


def test_a_dependency_the_lock_omits_beside_an_entry_is_fixed_by_a_relock(tmp_path):
    """uv locked the entry: `uv sync` cannot install what the lock omits, so the fix relocks (never a loop)."""
    found = kinds(fake_project(tmp_path, depends=()), fake_installed_fork(tmp_path, "0.2.0", ["six>=1.16"], others=()))
    assert list(found) == ["not locked"] and "the lock omits six, which megatron-core requires" in found["not locked"]
    assert FIX in found["not locked"] and "upgrade-package" not in found["not locked"]


def extras_project(tmp_path, extra):
    project = fake_project(tmp_path, requires=("urllib3[socks]>=2",), depends=())
    lock = tomlkit.parse((project / "uv.lock").read_text())
    lock["package"][0]["dependencies"] = [{"name": "urllib3", **({"extra": ["socks"]} if extra else {})}]
    lock["package"].append({"name": "urllib3", "version": "2.0",
                            "optional-dependencies": {"socks": [{"name": "pysocks"}]}})
    (project / "uv.lock").write_text(tomlkit.dumps(lock))
    return project


def test_an_extras_requirements_are_installed_and_locked(tmp_path):
    env = fake_installed_fork(tmp_path, "0.2.0", ["urllib3[socks]>=2"], others=("urllib3",))
    found = kinds(extras_project(tmp_path / "locked", extra=True), env)
    assert list(found) == ["requirement missing"]
    assert "pysocks, which urllib3[socks] (a requirement of megatron-core) requires" in found["requirement missing"]
    found = kinds(extras_project(tmp_path / "stripped", extra=False), env)
    assert list(found) == ["not locked"] and "the lock omits urllib3[socks]" in found["not locked"]


def test_a_locked_requirement_the_environment_leaves_out_is_not_missing(tmp_path):
    from nemo_rl.forks import installed_fork

    project, env = fake_project(tmp_path), fake_installed_fork(tmp_path, "0.2.0", ["six>=1.16"], others=())
    found = installed_fork.problems(Project.read(project), env, "megatron-core")
    assert [p.kind for p in found] == ["requirement missing"]
    assert installed_fork.problems(Project.read(project), env, "megatron-core", left_out=["six"]) == []


def test_an_installed_requirement_at_a_version_the_fork_refuses_is_named(tmp_path):
    """uv installs what uv.lock says without checking it against the fork's requirement (an override, a pasted
    [[package]]): six 1.0 installed for a fork requiring six>=1.16."""
    found = kinds(fake_project(tmp_path), fake_installed_fork(tmp_path, "0.2.0", ["six>=1.16"], other_version="1.0"))
    assert "six 1.0 is installed but megatron-core requires six>=1.16" in found["version refused"], found


def test_a_version_refused_deep_in_the_forks_closure_is_named_and_another_forks_own_is_not(tmp_path):
    """megatron-core -> six -> helper, which requires leaf>=2 (installed 1.0): named two levels down. nemo-toolkit,
    another fork with its own derived entry, requiring leaf>=5, is its own check (its drop list applies)."""
    project = fake_project(tmp_path, requires=("six>=1.16", "nemo-toolkit"), depends=("six", "nemo-toolkit"))
    lock = tomlkit.parse((project / "uv.lock").read_text())
    lock["package"] += [{"name": "six", "version": "1.17", "dependencies": [{"name": "helper"}]},
                        {"name": "helper", "version": "1.0", "dependencies": [{"name": "leaf"}]},
                        {"name": "leaf", "version": "1.0"}, {"name": "nemo-toolkit", "version": "0.1"}]
    lock["manifest"]["dependency-metadata"].append({"name": "nemo-toolkit", "version": "0.1", "requires-dist": []})
    (project / "uv.lock").write_text(tomlkit.dumps(lock))
    env = fake_installed_fork(tmp_path, "0.2.0", ["six>=1.16", "nemo-toolkit"], others=("six", "leaf"))
    site = env / "lib/python3.12/site-packages"
    for name, version, requires in (("helper", "1.0", "leaf>=2"), ("nemo_toolkit", "0.1", "leaf>=5")):
        (site / f"{name}-{version}.dist-info").mkdir()
        (site / f"{name}-{version}.dist-info/METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nRequires-Dist: {requires}\n")
    found = kinds(project, env)
    assert found == {"version refused": "leaf 1.0 is installed but helper 1.0 (which megatron-core pulls in) requires "
                     "leaf>=2: remove any [tool.uv] override-dependencies entry for leaf, run `uv lock "
                     "--upgrade-package leaf`, then sync"}, found


def test_declares_keeps_the_extras_of_a_fork_without_a_derived_entry():
    """[declares] extras round-trip through index.toml's table; a damaged one is refused with its regeneration."""
    made = declared.declares_from("0.1.0", None, {"six": "six"}, "a" * 40, "nemo-toolkit",
                                  extras={"tron": ["idna; extra == 'tron'"], "dev": []})
    assert made.as_table()["extras"] == {"dev": [], "tron": ["idna; extra == 'tron'"]}
    assert declared.declares_from_table(made.as_table(), "index.toml") == made
    assert "extras" not in declared.declares_from("0.1.0", None, {"six": "six"}).as_table()  # none: not written
    for extras in ({"tron": "idna"}, ["tron"], {"tron": ["not a req ==="]}):
        with pytest.raises(NemoRLError, match="regenerate it"):
            declared.declares_from_table({**made.as_table(), "extras": extras}, "index.toml")


def test_an_entry_spelled_differently_is_named_and_rewritten_in_place(world, capsys):
    derived_world(world)
    path = world.project / "pyproject.toml"
    text = path.read_text()
    header = '[[tool.uv.dependency-metadata]]\nname = "megatron-core"'
    assert text.count(header) == 1
    path.write_text(text.replace(header, '[[tool.uv.dependency-metadata]]\nname = "Megatron_Core"'))
    rc, out = offline(world, capsys)
    assert rc == 1 and "'Megatron_Core' (the same distribution spelled differently)" in out, out
    rc, out = patches(world, capsys)
    assert rc == 0, out
    assert path.read_text().count("[[tool.uv.dependency-metadata]]") == text.count("[[tool.uv.dependency-metadata]]")
    assert header in path.read_text() and offline(world, capsys)[0] == 0


def test_a_hand_edited_entry_relocked_is_caught_and_one_command_fixes_it(world, capsys):
    derived_world(world)
    path = world.project / "pyproject.toml"
    head, marker, entry_text = path.read_text().partition("[[tool.uv.dependency-metadata]]")
    path.write_text(head + marker + entry_text.replace('version = "0.1.0"', 'version = "0.9.0"'))
    forkworld.uv_run(world, "lock", "--quiet")  # uv.lock now agrees with the hand edit: uv lock --check is green
    assert locked(world).version == "0.9.0"
    capsys.readouterr()
    assert deps(world, "patches", "--check", "--offline") == 1
    out = capsys.readouterr().out
    assert "[[tool.uv.dependency-metadata]] megatron-core version: expected '0.1.0'" in out and "found '0.9.0'" in out
    assert deps(world, "status", "--check") == 1
    out = capsys.readouterr().out
    assert "megatron-core: metadata stale" in out and "run `nemo-rl deps patches megatron-core`" in out
    assert deps(world, "patches", "megatron-core") == 0
    assert locked(world).version == "0.1.0" and entry(world).version == "0.1.0"
    assert deps(world, "patches", "--check", "--offline") == 0


def test_a_drop_the_fork_no_longer_needs_is_said_unnecessary(world, capsys):
    derived_world(world)
    fork = world.forks["megatron-core"].fork
    without = commit(fork, "drop pytest", {"pyproject.toml": forkworld.fork_pyproject(
        world, dependencies=["nemo-toolkit"])})
    capsys.readouterr()
    pin(world, without)
    assert "the drop of pytest is unnecessary (the fork no longer declares it): removed" in capsys.readouterr().out
    table = tomllib.loads((world.project / "pyproject.toml").read_text())["tool"]["nemo-rl"]["forks"]["megatron-core"]
    assert table["drop"] == []
    assert deps(world, "patches", "--check", "--offline") == 0
    # a drop put back by hand: the check says it is unnecessary
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text().replace("drop = []", 'drop = [{ name = "pytest", why = "back by hand" }]'))
    capsys.readouterr()
    assert deps(world, "patches", "--check", "--offline") == 1
    assert "drop pytest: expected a requirement megatron-core declares" in capsys.readouterr().out


def test_a_direct_reference_in_the_forks_metadata_is_never_built(world, capsys, tmp_path):
    """`evil @ file:///...` in the fork's METADATA: refused before uv lock could build it (run its setup.py);
    dropped, the bump lands without it and no URL reaches a project file."""
    evil, ran = tmp_path / "evil", tmp_path / "EVIL_RAN"
    evil.mkdir()
    (evil / "setup.py").write_text(f"open({str(ran)!r}, 'w').write('ran')\nfrom setuptools import setup\n"
                                   "setup(name='evil', version='1')\n")
    forkworld.derive_metadata(world, {})
    before = _state(world)
    rev = _backend_commit(world, "Metadata-Version: 2.1\nName: megatron-core\nVersion: 0.2.0\n"
                                 f"Requires-Dist: evil @ {evil.as_uri()}\n")
    capsys.readouterr()
    assert deps(world, "bump", "megatron-core", "--rev", rev) == 1
    err = capsys.readouterr().err
    assert f"the fork at {rev[:12]} declares a direct reference" in err and "fix the fork or drop it" in err
    assert not ran.exists() and _state(world) == before
    text = (world.project / "pyproject.toml").read_text()
    (world.project / "pyproject.toml").write_text(text.replace(
        "drop = []", 'drop = [{ name = "evil", why = "a direct reference nemo-rl never locks" }]'))
    assert deps(world, "bump", "megatron-core", "--rev", rev) == 0
    assert not ran.exists()
    assert all(evil.as_uri() not in p.read_text() for p in [world.project / "pyproject.toml", world.project / "uv.lock",
                                                             *(world.project / "patches").rglob("*.toml")])
    assert deps(world, "patches", "--check", "--offline") == 0
