"""The project's side of the derived entries (forks/metadata_check.py): whether a fork derives its entry, the
locked package held against the derived entry, and the report's and the refusal's lines. A pyproject.toml in a
temporary directory, no fork; and end to end on fixture forks: [declares] at another commit or missing, a fork
without a derived entry held against [declares], and sequences of commands and hand edits, each reported by
the offline check and `deps status` and fixed by the command they name."""

from __future__ import annotations

import textwrap
import tomllib
from pathlib import Path

import forkworld
from fakes import FIX, block, deps, derived_world, fixed, offline, patches, status, synced_status
from gitfixtures import commit

from nemo_rl.cli import main
from nemo_rl.forks import locked_fork, metadata_check
from nemo_rl.forks.declared import Entry
from nemo_rl.project.model import Project

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
    assert not metadata_check.derives(Project.read(project(tmp_path / "bare")), "megatron-core")
    assert metadata_check.derives(Project.read(project(tmp_path / "entry", entry=True)), "megatron-core")
    dropping = project(tmp_path / "drop", 'drop = [{ name = "wandb", why = "logging only" }]\n')
    assert metadata_check.derives(Project.read(dropping), "megatron-core")
    assert [d.name for d in metadata_check.deltas(Project.read(dropping), "megatron-core").drop] == ["wandb"]
    assert metadata_check.derived(Project.read(dropping), "megatron-core") == metadata_check.deltas(
        Project.read(dropping), "megatron-core")
    assert metadata_check.derived(Project.read(tmp_path / "bare"), "megatron-core") is None
    assert metadata_check.entry(Project.read(project(tmp_path / "e2", entry=True)), "megatron-core") == Entry(
        "megatron-core", "0.1.0", None, ("numpy",))


LINUX = ["platform_machine == 'x86_64' and sys_platform == 'linux'",
         "platform_machine == 'aarch64' and sys_platform == 'linux'"]


def lock(version, *names, recorded=DERIVED.requires_dist, dependencies=None):
    """uv.lock as uv writes it for the project's [tool.uv] environments (Linux x86_64 and aarch64)."""
    return {"requires-python": ">=3.10", "supported-markers": LINUX,
            "package": [{"name": "megatron-core", "version": version,
                         "dependencies": dependencies if dependencies is not None else [{"name": n} for n in names]},
                        {"name": "numpy"}],
            "manifest": {"dependency-metadata": [{"name": "megatron-core", "version": "0.2.0",
                                                  "requires-dist": list(recorded)}]}}


def test_the_locked_package_is_held_against_the_derived_entry():
    assert locked_fork.locked_differences(lock("0.2.0", "numpy", "torch"), DERIVED) == []
    # torch's marker is met on every supported platform (uv leaves it out), so it must be locked
    assert locked_fork.locked_differences(lock("0.2.0", "numpy"), DERIVED) == [
        ("dependencies", "torch among them", "missing")]
    assert locked_fork.locked_differences(lock("0.1.0", "torch", "einops"), DERIVED) == [
        ("version", "0.2.0", "0.1.0"), ("dependencies", "numpy among them", "missing"),
        ("dependencies", "only what the entry requires", "also einops")]
    assert locked_fork.locked_differences({"package": []}, DERIVED) == [("entries", "one", "0")]
    # the entry uv recorded, edited by hand
    assert locked_fork.locked_differences(lock("0.2.0", "numpy", "torch", recorded=["numpy>=1.26"]), DERIVED) == [
        ("[[manifest.dependency-metadata]] requires-dist", "the derived list",
         "missing torch; sys_platform == \"linux\"")]


EXTRAS = Entry("megatron-core", "0.2.0", ">=3.10", ("numpy>=1.26", "urllib3[socks]>=2",
                                                    "idna; platform_machine == 'aarch64'"))
EXTRAS_LOCKED = [{"name": "idna", "marker": "platform_machine == 'aarch64'"}, {"name": "numpy"},
                 {"name": "urllib3", "extra": ["socks"]}]


def gaps(dependencies, recorded=EXTRAS.requires_dist):
    return locked_fork.locked_differences(lock("0.2.0", dependencies=dependencies, recorded=recorded), EXTRAS)


def test_a_locked_dependency_is_compared_with_its_extras_and_marker():
    assert gaps(EXTRAS_LOCKED) == []
    # an extra removed by hand: uv would not install pysocks
    assert gaps([*EXTRAS_LOCKED[:2], {"name": "urllib3"}]) == [("dependencies", "urllib3[socks] among them",
                                                               "missing")]
    # one added, or given as a second entry of the name (uv's other spelling): the first is caught, the second is not
    assert gaps([*EXTRAS_LOCKED[:2], {"name": "urllib3", "extra": ["socks", "brotli"]}]) == [
        ("dependencies", "only what the entry requires", "also urllib3[brotli]")]
    assert gaps([*EXTRAS_LOCKED, {"name": "urllib3"}]) == []


def test_a_marker_narrowed_in_the_lock_is_caught():
    narrowed = [{"name": "idna", "marker": "platform_machine == 'aarch64'"},
                {"name": "numpy", "marker": "python_full_version < '3'"}, {"name": "urllib3", "extra": ["socks"]}]
    assert gaps(narrowed) == [("dependencies", "numpy among them", "missing")]
    widened = [{"name": "idna"}, *EXTRAS_LOCKED[1:]]
    assert gaps(widened) == [("dependencies", "only what the entry requires",
                              "also idna (on linux x86_64 Python 3.10)")]


def test_a_dependency_of_another_platform_is_required_on_every_machine(monkeypatch):
    """The lock covers aarch64: its dependency deleted is caught on x86_64 too, whatever this machine is."""
    import platform

    for machine in ("x86_64", "aarch64"):
        monkeypatch.setattr(platform, "machine", lambda machine=machine: machine)
        assert gaps(EXTRAS_LOCKED[1:]) == [("dependencies", "idna among them",
                                            "missing")]


def test_a_marker_edited_in_the_manifest_is_caught_and_uvs_spelling_is_not():
    uv_spelling = ["idna ; platform_machine == 'aarch64'", "numpy>=1.26", "urllib3[socks]>=2"]
    assert gaps(EXTRAS_LOCKED, recorded=uv_spelling) == []
    narrowed = ["idna ; platform_machine == 'aarch64'", "numpy>=1.26 ; python_full_version < '3'",
                "urllib3[socks]>=2"]
    assert gaps(EXTRAS_LOCKED, recorded=narrowed) == [
        ("[[manifest.dependency-metadata]] requires-dist", "the derived list",
         "missing numpy>=1.26; not derived numpy>=1.26; python_full_version < \"3\"")]


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


def test_an_entry_spelled_differently_is_named_so_and_rewritten_in_place(tmp_path):
    import tomlkit

    from nemo_rl.forks import declared

    path = project(tmp_path, entry=True) / "pyproject.toml"
    path.write_text(path.read_text().replace('name = "megatron-core"\nversion', 'name = "Megatron_Core"\nversion'))
    found = metadata_check.entry(Project.read(tmp_path), "megatron-core")
    assert found is not None and found.name == "Megatron_Core"
    assert declared.differences(found, DERIVED)[0] == (
        "name", "'megatron-core'", "'Megatron_Core' (the same distribution spelled differently)")
    doc = tomlkit.parse(path.read_text())
    assert declared.write_entry(doc, DERIVED)
    entries = doc["tool"]["uv"]["dependency-metadata"]
    assert [e["name"] for e in entries] == ["megatron-core"] and entries[0]["version"] == "0.2.0"


def test_a_bound_inside_a_minor_version_is_sampled_on_both_sides():
    """Sampled only at X.0 and X.99, `< '3.12.3' or >= '3.13'` would apply wherever no marker does."""
    inside = "python_full_version < '3.12.3' or python_full_version >= '3.13'"
    narrowed = [EXTRAS_LOCKED[0], {"name": "numpy", "marker": inside}, EXTRAS_LOCKED[2]]
    assert gaps(narrowed) == [("dependencies", "numpy (on linux x86_64 Python 3.12) among them", "missing")]
    through = [EXTRAS_LOCKED[0], {"name": "numpy", "marker": inside.replace("< '3.12.3'", "<= '3.12.3'")},
               EXTRAS_LOCKED[2]]  # met at the literal itself: the micro after it is where it is not
    assert gaps(through) == [("dependencies", "numpy (on linux x86_64 Python 3.12) among them", "missing")]
    recorded = ["idna ; platform_machine == 'aarch64'", f"numpy>=1.26 ; {inside}", "urllib3[socks]>=2"]
    assert gaps(EXTRAS_LOCKED, recorded=recorded)[0][0] == "[[manifest.dependency-metadata]] requires-dist"


def test_a_locked_version_the_requirement_refuses_is_named():
    def versions(numpy, *more, overrides=()):
        found = lock("0.2.0", "numpy", "torch")
        found["package"] = [found["package"][0], {"name": "numpy", "version": numpy},
                            *({"name": "numpy", "version": v} for v in more)]
        found["manifest"]["overrides"] = [{"name": "numpy", "specifier": s} for s in overrides]
        return locked_fork.locked_differences(found, DERIVED)

    assert versions("1.26.0") == [] and versions("2.0.0rc1") == []
    assert versions("1.25.2") == [("locked numpy", "numpy>=1.26", "1.25.2 (run `uv lock --upgrade-package numpy`)")]
    assert versions("1.25.2", overrides=["<1.26"]) == [
        ("locked numpy", "numpy>=1.26", "1.25.2 (pyproject.toml [tool.uv] override-dependencies sets numpy<1.26: "
         "remove it or widen it to allow >=1.26, then run `uv lock`)")]
    # two versions locked: the one the fork's dependency names
    found = lock("0.2.0", dependencies=[{"name": "numpy", "version": "1.25.2"}, {"name": "torch"}])
    found["package"] += [{"name": "numpy", "version": "2.1.0"}]
    found["package"][1]["version"] = "1.25.2"
    assert [d[0] for d in locked_fork.locked_differences(found, DERIVED)] == ["locked numpy"]


def test_a_requirement_an_override_replaced_names_the_override():
    found = lock("0.2.0", dependencies=[EXTRAS_LOCKED[0], EXTRAS_LOCKED[1], {"name": "urllib3"}],
                 recorded=EXTRAS.requires_dist)
    found["manifest"]["overrides"] = [{"name": "urllib3", "specifier": ">=2"}]
    assert locked_fork.locked_differences(found, EXTRAS) == [
        ("dependencies", "urllib3[socks] among them",
         "missing (pyproject.toml [tool.uv] override-dependencies replaces urllib3: edit it, then run `uv lock`)")]


def test_every_locked_entry_of_a_dependency_is_checked_in_either_order():
    """A lock forked by platform locks numpy twice (1.25.2 on aarch64, 2.1.0 elsewhere): the refused one is
    named whichever the fork's dependencies list first; the last one alone passed when listed last."""
    aarch = {"name": "numpy", "version": "1.25.2", "marker": "platform_machine == 'aarch64'"}
    rest = {"name": "numpy", "version": "2.1.0", "marker": "platform_machine != 'aarch64'"}
    for order in ([aarch, rest], [rest, aarch]):
        found = lock("0.2.0", dependencies=[*order, {"name": "torch"}])
        found["package"][1]["version"] = "1.25.2"
        found["package"] += [{"name": "numpy", "version": "2.1.0"}]
        assert ("locked numpy", "numpy>=1.26", "1.25.2 (run `uv lock --upgrade-package numpy`)") in \
            locked_fork.locked_differences(found, DERIVED), order


def test_a_locked_marker_that_cannot_be_evaluated_is_a_difference():
    """`platform_release >= '99'` decides nothing here (no release is sampled): counting it as installed hid a
    dependency uv never installs; it is named, so `deps patches` relocks."""
    found = lock("0.2.0", dependencies=[{"name": "numpy", "marker": "platform_release >= '99'"}, {"name": "torch"}])
    assert locked_fork.locked_differences(found, DERIVED) == [
        ("dependencies", "markers that decide in every environment the lock supports",
         "numpy (marker \"platform_release >= '99'\"): not what the entry locks")]
    # the fork's own requirement carries it: uv wrote it from the entry, nothing to relock
    own = Entry("megatron-core", "0.2.0", ">=3.10", ("numpy>=1.26; platform_release >= '99'", "torch"))
    found["manifest"]["dependency-metadata"][0]["requires-dist"] = list(own.requires_dist)
    assert not any(d[0] == "dependencies" and "decide" in d[1] for d in locked_fork.locked_differences(found, own))


def test_a_locked_marker_naming_extra_is_a_difference():
    """`extra == ''` on a base dependency: packaging says true with no extra, uv installs nothing for it, so it
    hid a missing requirement; it is named, and `deps patches` relocks. One the fork's own requirement carries
    (a base requirement whose marker merely mentions an extra) is what uv wrote: no difference."""
    found = lock("0.2.0", dependencies=[{"name": "numpy", "marker": "extra == ''"}, {"name": "torch"}])
    assert locked_fork.locked_differences(found, DERIVED) == [
        ("dependencies", "markers that decide in every environment the lock supports",
         "numpy (marker \"extra == ''\"): not what the entry locks")]
    # uv never writes a marker naming extra into [[package]] dependencies, whatever the fork's own requirement says
    # (a base requirement whose marker merely mentions an extra locks with the extra clause gone)
    own = Entry("megatron-core", "0.2.0", ">=3.10", ("numpy>=1.26; python_version >= '3' or extra == 'x'", "torch"))
    found["manifest"]["dependency-metadata"][0]["requires-dist"] = list(own.requires_dist)
    for marker in ("extra == ''", "'' == extra", "extra != 'x' and extra == ''"):
        found["package"][0]["dependencies"][0]["marker"] = marker
        assert ("dependencies", "markers that decide in every environment the lock supports",
                f"numpy (marker {marker!r}): not what the entry locks") in locked_fork.locked_differences(
                    found, own), marker
    del found["package"][0]["dependencies"][0]["marker"]
    assert locked_fork.locked_differences(found, own) == []


def test_pythons_named_only_by_the_supported_markers_are_sampled():
    """[tool.uv] environments narrowed inside a minor version (3.11.1 to 3.11.49): the samples at X.Y.0 and X.Y.99
    meet none of it, and every comparison ran over nothing; the versions it names are sampled too."""
    found = lock("0.2.0", "numpy")
    found["supported-markers"] = ["python_full_version >= '3.11.1' and python_full_version < '3.11.50'"]
    assert ("dependencies", "torch among them", "missing") in locked_fork.locked_differences(found, DERIVED)


def test_a_lock_no_sampled_environment_meets_is_a_difference():
    """Nothing compared is never "no difference": a lock whose supported environments none of the samples meets
    says so."""
    found = lock("0.2.0", "numpy", "torch")
    found["supported-markers"] = ["sys_platform == 'freebsd'"]
    assert [d[0] for d in locked_fork.locked_differences(found, DERIVED)] == ["supported environments"]


def test_the_machine_markers_are_sampled_as_machines_report_them():
    """platform_release and platform_version were sampled as "" only, which no usual machine reports: a locked
    `platform_release == ''` passed for a dependency uv then never installs, and a fork's `idna; platform_release !=
    ''` was no base requirement, so [declares] left it out."""
    from packaging.requirements import Requirement

    from nemo_rl.forks import lock_markers

    found = lock("0.2.0", dependencies=[{"name": "numpy", "marker": "platform_release == '' and python_full_version "
                                                                  ">= '3.10'"}, {"name": "torch"}])
    assert ("dependencies", "numpy (on linux x86_64 Python 3.10) among them", "missing") in \
        locked_fork.locked_differences(found, DERIVED)
    assert lock_markers.base_requirement(Requirement("idna; platform_release != ''"))
    assert lock_markers.base_requirement(Requirement("idna; platform_version != ''"))
    assert not lock_markers.base_requirement(Requirement("idna; extra == 'x'"))


def test_locked_optional_dependencies_of_a_derived_fork_are_a_difference():
    """The derived entry declares no extras, so uv locks none: `megatron-core[evil]` with a pasted
    [package.optional-dependencies] installs its list unless it is named."""
    found = lock("0.2.0", "numpy", "torch")
    assert locked_fork.locked_differences(found, DERIVED) == []
    found["package"][0]["optional-dependencies"] = {"evil": [{"name": "six"}]}
    assert locked_fork.locked_differences(found, DERIVED) == [
        ("optional-dependencies", "none (the derived entry declares no extras)", "evil")]


def test_a_fork_without_a_derived_entry_is_held_against_what_it_declares_alone():
    """uv built the fork's metadata itself: it records no manifest entry and locks the fork's own extras; the
    version and the dependencies are still compared with what the fork declares."""
    found = lock("0.2.0", "numpy", "torch")
    del found["manifest"]
    dev = (("dev", ("six; extra == 'dev'",)),)
    found["package"][0]["optional-dependencies"] = {"dev": [{"name": "six"}]}
    assert locked_fork.locked_differences(found, DERIVED, False, dev) == []
    assert ("[[manifest.dependency-metadata]] entries", "one", "0") in locked_fork.locked_differences(found, DERIVED)
    found["package"][0]["version"] = "0.7.0"
    found["package"][0]["dependencies"] = [{"name": "numpy"}]
    assert locked_fork.locked_differences(found, DERIVED, False, dev) == [
        ("version", "0.2.0", "0.7.0"), ("dependencies", "torch among them", "missing")]


def test_the_extras_of_a_fork_without_a_derived_entry_are_what_it_declares_for_them():
    """uv locks such a fork's own extras: one edited by hand (its list shortened or lengthened) or pasted (an extra
    the fork does not declare, asked for as `fork[evil]`) installs what the fork never asked for, or not what it
    did; an extra nothing asks for is not locked and no difference."""
    found = lock("0.2.0", "numpy", "torch")
    del found["manifest"]
    declared_extras = (("dev", ("six; extra == 'dev'",)),
                       ("tron", ("idna; extra == 'tron'", "einops; extra == 'tron'")))
    optional = found["package"][0]["optional-dependencies"] = {"tron": [{"name": "idna"}, {"name": "einops"}]}
    assert locked_fork.locked_differences(found, DERIVED, False, declared_extras) == []  # dev: not asked for
    optional["tron"] = [{"name": "einops"}, {"name": "six"}]
    assert locked_fork.locked_differences(found, DERIVED, False, declared_extras) == [
        ("optional-dependencies tron", "idna among them", "missing"),
        ("optional-dependencies tron", "only what the fork's extra tron requires", "also six")]
    found["package"][0]["optional-dependencies"] = {"evil": [{"name": "six"}]}
    assert locked_fork.locked_differences(found, DERIVED, False, declared_extras) == [
        ("optional-dependencies evil", "only the extras the fork declares ([declares] extras)",
         "an extra the fork does not declare")]


def test_a_locked_marker_on_the_kernel_is_a_difference_whatever_the_samples_say():
    """`platform_release in '<the sampled releases>'` holds at every sample and on no other machine: no sample
    decides a marker on the kernel, so a locked one is named unless the fork's own requirement carries it."""
    for marker in ("platform_release in '6.1.0-18-amd64 23.1.0 10'", "platform_version != 'x'"):
        found = lock("0.2.0", dependencies=[{"name": "numpy", "marker": marker}, {"name": "torch"}])
        assert ("dependencies", "markers that decide in every environment the lock supports",
                f"numpy (marker {marker!r}): not what the entry locks") in locked_fork.locked_differences(
                    found, DERIVED), marker
    own = Entry("megatron-core", "0.2.0", ">=3.10", ("numpy>=1.26; platform_release != ''", "torch"))
    found = lock("0.2.0", dependencies=[{"name": "numpy", "marker": "platform_release != ''"}, {"name": "torch"}],
                 recorded=own.requires_dist)
    assert not any(d[0] == "dependencies" for d in locked_fork.locked_differences(found, own))


def test_a_marker_of_uvs_conflicting_extras_is_named_as_such():
    """[tool.uv] conflicts makes uv write `extra == 'extra-15-fixture-project-olds'` into a fork's dependencies:
    not a hand edit, and not compared per conflicting extra here: said so, with what to do."""
    found = lock("0.2.0", dependencies=[{"name": "numpy", "marker": "extra == 'extra-15-fixture-project-olds'"},
                                        {"name": "torch"}])
    (difference,) = [d for d in locked_fork.locked_differences(found, DERIVED) if "conflicts" in d[1]]
    assert "take the fork's dependencies out of the conflict" in difference[2], difference
    assert not any("decide in every environment" in d[1] for d in locked_fork.locked_differences(found, DERIVED))


def test_a_locked_python_marker_uv_never_writes_is_a_difference_whatever_the_samples_say():
    """A Python version spelled otherwise than uv spells it (`v3.11.7`, `03.11.7`, an `in` list) can be false on
    exactly one Python: it is a hand edit, named as such, and each of its literals is sampled too."""
    from nemo_rl.forks import lock_markers

    for marker in ("python_full_version != 'v3.11.7'", "python_full_version != '03.11.7'",
                   "python_full_version not in '3.0 3.11.7'", "'3.11.7' != python_full_version"):
        found = lock("0.2.0", dependencies=[{"name": "numpy", "marker": marker}, {"name": "torch"}])
        (hand,) = [d for d in locked_fork.locked_differences(found, DERIVED) if "as uv writes them" in d[1]]
        assert hand[2].startswith("numpy (") and hand[2].endswith("edited by hand"), (marker, hand)
        assert "3.11.7" in lock_markers._literal_points([marker]), marker
    for marker in ("python_full_version < '3.11.7'", "python_full_version == '3.11.*'", "python_version >= '3'"):
        assert lock_markers.unwritten(marker) is None, marker


ROOT = {"name": "p", "source": {"virtual": "."},
        "optional-dependencies": {"mcore": [{"name": "megatron-core"}, {"name": "nemo-toolkit", "extra": ["tron"]}]},
        "metadata": {"requires-dist": [{"name": "megatron-core", "marker": "extra == 'mcore'"},
                                       {"name": "nemo-toolkit", "extras": ["tron"], "marker": "extra == 'mcore'"}],
                     "provides-extras": ["mcore"]}}


def test_the_projects_own_locked_edges_to_a_fork_are_what_its_metadata_asks():
    """uv checks [package.metadata] against pyproject.toml, never the edges against it: an edge deleted, its extra
    dropped or given a marker installs less than pyproject asks."""
    import copy

    from nemo_rl.forks import root_edges

    def edges(mcore):
        root = copy.deepcopy(ROOT)
        root["optional-dependencies"]["mcore"] = mcore
        found = lock("0.2.0", "numpy", "torch")
        found["package"].append(root)
        return {d: root_edges.differences(found, d) for d in ("megatron-core", "nemo-toolkit")}

    assert edges(ROOT["optional-dependencies"]["mcore"]) == {"megatron-core": [], "nemo-toolkit": []}
    where = "[[package]] p optional-dependencies mcore"
    assert edges([{"name": "megatron-core"}, {"name": "nemo-toolkit"}])["nemo-toolkit"] == [
        (where, "nemo-toolkit[tron] among them", "missing")]
    assert edges([{"name": "nemo-toolkit", "extra": ["tron"]}])["megatron-core"] == [
        (where, "megatron-core among them", "missing")]
    narrowed = edges([{"name": "megatron-core", "marker": "python_full_version != '3.11.7'"},
                      {"name": "nemo-toolkit", "extra": ["tron"]}])["megatron-core"]
    assert narrowed == [(where, "megatron-core (on linux x86_64 Python 3.11) among them", "missing")]
    widened = copy.deepcopy(ROOT)  # moved from the extra's list to the base: installed with mcore all the same
    widened["dependencies"] = [{"name": "megatron-core"}]
    widened["optional-dependencies"]["mcore"] = [{"name": "nemo-toolkit", "extra": ["tron"]}]
    found = lock("0.2.0", "numpy", "torch")
    found["package"].append(widened)
    assert root_edges.differences(found, "megatron-core") == [
        ("[[package]] p dependencies", "only what pyproject.toml asks of megatron-core", "also megatron-core")]


def test_an_extra_the_project_asks_of_a_fork_is_locked_even_when_its_table_is_deleted():
    """A fork without a derived entry: `nemo-toolkit[tron]` asked, its whole locked tron list deleted."""
    found = lock("0.2.0", "numpy", "torch")
    del found["manifest"]
    declared_extras = (("tron", ("idna; extra == 'tron'",)), ("dev", ("six; extra == 'dev'",)))
    found["package"][0]["optional-dependencies"] = {"tron": [{"name": "idna"}]}
    root = {**ROOT, "optional-dependencies": {"mcore": [{"name": "megatron-core", "extra": ["tron"]}]}}
    found["package"].append(root)
    assert locked_fork.locked_differences(found, DERIVED, False, declared_extras) == []
    del found["package"][0]["optional-dependencies"]
    assert locked_fork.locked_differences(found, DERIVED, False, declared_extras) == [
        ("optional-dependencies tron", "idna among them", "missing")]


def test_a_git_source_pinned_by_rev_without_a_fork_table_is_named(tmp_path):
    """However it is pinned (rev, branch, tag; one table or a list): with its table goes every check of it."""
    from nemo_rl.forks import records

    path = project(tmp_path)
    with (path / "pyproject.toml").open("a") as f:
        f.write('[tool.uv.sources]\nnemo-toolkit = { git = "https://example.invalid/nemo.git", rev = "' + "a" * 40
                + '" }\nsix = { git = "https://example.invalid/six.git", branch = "main" }\n'
                'idna = [{ git = "https://example.invalid/idna.git", tag = "v1", marker = "os_name == \'posix\'" }]\n'
                'numpy = { index = "pytorch" }\n')
    orphans = records.orphans(Project.read(path), [])
    assert [o.field.split()[1] for o in orphans] == ["idna", "nemo-toolkit", "six"]
    assert all(o.found == "missing" for o in orphans)
    assert "[tool.nemo-rl.forks.nemo-toolkit]" in records.orphan_fix(orphans[1])


def _moved_pin_kept_declares(world) -> str:
    """A new fork commit (0.2.0, requires idna) pinned by hand in pyproject.toml and index.toml, relocked with
    `uv lock --upgrade-package`, the index's digest pasted: [declares] (and so uv.lock) still says 0.1.0."""
    from nemo_rl.forks import record_files

    derived_world(world)
    fork = world.forks["megatron-core"].fork
    old = Project.read(world.project).fork("megatron-core").rev
    new = commit(fork, "0.2.0", {"pyproject.toml": forkworld.fork_pyproject(
        world, version="0.2.0", dependencies=["nemo-toolkit", "pytest>=8", "idna"])})
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text().replace(old, new))
    forkworld.uv_run(world, "lock", "--quiet", "--upgrade-package", "megatron-core")
    directory = world.project / "patches/megatron-core"
    index_path = directory / "index.toml"
    index_path.write_text(index_path.read_text().replace(f'pinned = "{old}"', f'pinned = "{new}"'))
    index = record_files.read_index(directory)
    index_path.write_text(index_path.read_text().replace(str(index.digest), index.expected_digest()))
    return new


def test_a_pin_moved_with_the_old_declares_fails_the_offline_check(world, capsys):
    new = _moved_pin_kept_declares(world)
    assert Project.read(world.project).packages["megatron-core"].version == "0.1.0"  # uv.lock lies
    rc, out = offline(world, capsys)
    assert rc == 1, out
    assert f"declares commit: expected {new} (the pin" in out, out
    assert "pinned: expected " in out and "(the last [[commit]]" in out, out
    rc, out = patches(world, capsys)  # the one command reads the fork at the new pin
    assert rc == 0, out
    assert Project.read(world.project).packages["megatron-core"].version == "0.2.0"
    assert offline(world, capsys)[0] == 0


def test_a_fork_without_a_derived_entry_is_checked_against_its_declares(world, capsys, tmp_path, monkeypatch):
    """nemo-toolkit has no [[tool.uv.dependency-metadata]] entry: uv locks the metadata it builds itself, and a hand
    edit of its locked version or dependencies is caught against [declares] and relocked by `deps patches`."""
    monkeypatch.chdir(world.project)  # where its fixes run as printed
    import tomllib

    fork = world.forks["nemo-toolkit"].fork
    rev = commit(fork, "require six", {"pyproject.toml": forkworld.fork_pyproject(
        world, "nemo-toolkit", dependencies=["six>=1.16"])})
    assert main(["deps", "bump", "nemo-toolkit", "--rev", rev, "--project", str(world.project)]) == 0
    assert metadata_check.entry(Project.read(world.project), "nemo-toolkit") is None
    index = tomllib.loads((world.project / "patches/nemo-toolkit/index.toml").read_text())
    assert index["declares"] == {"commit": rev, "version": "0.1.0", "requires-python": ">=3.10",
                                 "requires-dist": ["six>=1.16"]}
    assert offline(world, capsys)[0] == 0
    lock = world.project / "uv.lock"
    good = lock.read_text()
    start, end = block(good, "nemo-toolkit")
    text = good[start:end]
    assert 'version = "0.1.0"' in text and '{ name = "six" }' in text, text
    edits = {"version: expected 0.1.0": text.replace('version = "0.1.0"', 'version = "0.7.0"', 1),
             "dependencies: expected six": "\n".join(line for line in text.splitlines()
                                                      if '{ name = "six" }' not in line) + "\n"}
    for said, edited in edits.items():
        lock.write_text(good[:start] + edited + good[end:])
        rc, out = offline(world, capsys)
        assert rc == 1 and f"[[package]] nemo-toolkit {said}" in out, out
        assert "patches/nemo-toolkit/index.toml [declares]" in out and "derived" not in out, out
        capsys.readouterr()
        rc = main(["deps", "patches", "nemo-toolkit", "--project", str(world.project)])
        out = capsys.readouterr().out
        assert rc == 0 and "relocked" in out and "[declares]" in out, out
        assert lock.read_text() == good, said
        assert offline(world, capsys)[0] == 0
    # synced from the lie: status names the relock, and no entry that does not exist
    lock.write_text(good[:start] + edits["version: expected 0.1.0"] + good[end:])
    env, out = synced_status(world, tmp_path, capsys)
    mine = out.split("nemo-toolkit:", 1)[-1]
    assert "nemo-rl deps patches nemo-toolkit" in mine and "dependency-metadata" not in mine, out
    assert "derived" not in mine, out


OPEN = "requires-dist = ["


def both_report(world, env, capsys, state, *found):
    """Both checks fail, status in `state`, each naming the fix; the CI check's output names each of `found`."""
    rc, out = status(world, env, capsys)
    assert rc == 1 and f"megatron-core: {state}" in out and FIX in out, out
    rc, out = offline(world, capsys)
    assert rc == 1 and "megatron-core: DRIFT" in out and f"fix: {FIX}" in out, out
    for text in found:
        assert text in out, (text, out)


def edit(path, old, new):
    text = path.read_text()
    assert text.count(old) == 1, (old, text)
    path.write_text(text.replace(old, new))


def locked(world):
    lock = tomllib.loads((world.project / "uv.lock").read_text())
    return next(p for p in lock["package"] if p["name"] == "megatron-core")


# One sequence on fixture forks: deps commands, `uv lock` and hand edits, each leaving a uv.lock whose fork
# differs from what the fork builds; after each, `deps status` and the offline CI check (`nemo-rl deps
# patches --check --offline`, what .ci/run runs) both say so and name the command that fixes it; that
# command is run and both are green again, with the environment synced from the lock.
def test_no_sequence_of_commands_and_edits_leaves_a_lying_lock_unreported(world, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(world.project)  # where its fixes run as printed
    env = tmp_path / "env"
    derived_world(world)
    forkworld.uv_run(world, "sync", "--quiet", "--locked", "--extra", "mcore", env_dir=env)
    assert status(world, env, capsys) == (0, status(world, env, capsys)[1]) and offline(world, capsys)[0] == 0
    pyproject, lock = world.project / "pyproject.toml", world.project / "uv.lock"
    fork = world.forks["megatron-core"].fork

    # 1. the rev edited by hand, then `uv lock --upgrade-package`: the fork builds 0.2.0 and requires six, the
    #    lock still says 0.1.0 without six
    newer = commit(fork, "release 0.2.0, needs six", {"pyproject.toml": forkworld.fork_pyproject(
        world, version="0.2.0", dependencies=["nemo-toolkit", "pytest>=8", "six>=1; python_version < '3.11'",
                                              "six>=1.16; python_version >= '3.11'"])})
    edit(pyproject, Project.read(world.project).fork("megatron-core").rev, newer)
    forkworld.uv_run(world, "lock", "--quiet", "--upgrade-package", "megatron-core")
    assert locked(world)["version"] == "0.1.0"
    both_report(world, env, capsys, "records stale", "patches/megatron-core/index.toml")
    fixed(world, env, capsys)
    assert locked(world)["version"] == "0.2.0"
    # both requirements of six (split by marker) are locked
    manifest = tomllib.loads(lock.read_text())["manifest"]["dependency-metadata"]
    requires = next(e for e in manifest if e["name"] == "megatron-core")["requires-dist"]
    assert sum(r.startswith("six") for r in requires) == 2, requires

    # 2. uv.lock's fork version edited by hand
    package = '[[package]]\nname = "megatron-core"\nversion = '
    edit(lock, package + '"0.2.0"', package + '"0.3.0"')
    both_report(world, env, capsys, "metadata stale", "uv.lock: [[package]] megatron-core version: expected 0.2.0")
    fixed(world, env, capsys)

    # 3. uv.lock's fork dependencies edited by hand: six left out
    package = locked(world)
    assert {d["name"] for d in package["dependencies"]} >= {"six", "nemo-toolkit"}
    text = lock.read_text()
    start = text.index('[[package]]\nname = "megatron-core"')
    block = text[start:text.index("[[package]]", start + 1)]
    six = next(line for line in block.splitlines() if '{ name = "six"' in line)
    lock.write_text(text.replace(block, block.replace(six + "\n", "")))
    both_report(world, env, capsys, "metadata stale", "[[package]] megatron-core dependencies")
    fixed(world, env, capsys)

    # 4. the requires-dist uv.lock recorded for the entry edited by hand
    text = lock.read_text()
    manifest_at = text.index("[[manifest.dependency-metadata]]\nname = \"megatron-core\"")
    requires_at = text.index(OPEN, manifest_at)
    lock.write_text(text[:requires_at] + 'requires-dist = ["rich", ' + text[requires_at + len(OPEN):])
    both_report(world, env, capsys, "metadata stale", "[[manifest.dependency-metadata]] requires-dist")
    fixed(world, env, capsys)

    # 5. the dependency-metadata entry edited by hand (a requirement the fork does not declare), then `uv lock`
    entry_at = pyproject.read_text().index('[[tool.uv.dependency-metadata]]\nname = "megatron-core"')
    text = pyproject.read_text()
    requires_at = text.index(OPEN, entry_at)
    pyproject.write_text(text[:requires_at] + 'requires-dist = ["rich", ' + text[requires_at + len(OPEN):])
    forkworld.uv_run(world, "lock", "--quiet")
    both_report(world, env, capsys, "metadata stale", "[[tool.uv.dependency-metadata]] megatron-core requires-dist")
    fixed(world, env, capsys)
    assert "rich" not in str(metadata_check.entry(Project.read(world.project), "megatron-core").requires_dist)

    # 6. a `deps bump` to a fork commit that moves the version again lands a lock that says it
    release = commit(fork, "release 0.4.0", {"pyproject.toml": forkworld.fork_pyproject(
        world, version="0.4.0", dependencies=["nemo-toolkit", "pytest>=8", "six>=1.16"])})
    assert main(["deps", "bump", "megatron-core", "--rev", release, "--project", str(world.project)]) == 0
    assert locked(world)["version"] == "0.4.0"
    assert offline(world, capsys)[0] == 0
    rc, out = status(world, env, capsys)
    assert rc == 1 and "megatron-core: env stale" in out and "uv sync --locked --extra mcore" in out
    forkworld.uv_run(world, "sync", "--quiet", "--locked", "--extra", "mcore", env_dir=env)
    assert status(world, env, capsys)[0] == 0


def test_bump_refuses_a_requirement_uv_cannot_lock_with_the_drop_line(world, capsys, monkeypatch):
    derived_world(world)
    fork = world.forks["megatron-core"].fork
    unknown = commit(fork, "needs a package no index has", {"pyproject.toml": forkworld.fork_pyproject(
        world, dependencies=["nemo-toolkit", "pytest>=8", "nemo-rl-no-such-fixture-dist>=1.16"])})
    monkeypatch.setenv("UV_OFFLINE", "1")  # the index is never asked: the name is resolvable nowhere
    before = world.files()
    assert deps(world, "bump", "megatron-core", "--rev", unknown) == 1
    err = capsys.readouterr().err
    assert '{ name = "nemo-rl-no-such-fixture-dist", why = "<why nemo-rl does not need it>" },' in err
    assert "[tool.nemo-rl.forks.megatron-core]" in err
    assert world.files() == before


def test_an_entry_without_recorded_declarations_is_caught(world, capsys):
    """An index generated before [declares] existed (or by hand): the entry cannot be proved derived offline."""
    from nemo_rl.forks import fork_cache, records

    derived_world(world)
    fork = Project.read(world.project).fork("megatron-core")
    directory = records.records_dir(world.project, "megatron-core")
    base, recs = records.compute(fork_cache.fetched(fork, fork.rev), fork)
    records.write(directory, *records.build(directory, records.read_index(directory), fork, fork.rev, base, recs,
                                            None))
    capsys.readouterr()
    assert deps(world, "patches", "--check", "--offline") == 1
    assert "declares: expected what megatron-core declares at" in capsys.readouterr().out
    assert deps(world, "status", "--check") == 1
    assert "metadata stale" in capsys.readouterr().out
