"""The offline check of one index entry against its record file (records._entry_differences), on files alone;
records committed as symbolic links, refused before anything is staged; on fixture forks, a pin moved by hand
without the records, and the online check of the recorded [declares]."""

from __future__ import annotations

import shutil
from dataclasses import replace

import forkworld
import pytest
from fakes import RECORD, deps, derived_world, entry, locked, make_index
from gitfixtures import commit

from nemo_rl.forks import records
from nemo_rl.forks.record_files import Record
from nemo_rl.project.model import Project


def entry_and_dir(tmp_path, record=RECORD):
    directory = tmp_path / "megatron-core"
    directory.mkdir()
    (directory / record.filename).write_text(record.render())
    return directory, make_index([record]).commits[0]


def fields(diffs: list[records.Difference]) -> list[str]:
    return [d.field for d in diffs]


def test_a_generated_entry_agrees_with_its_record(tmp_path):
    directory, entry = entry_and_dir(tmp_path)
    assert records._entry_differences(directory, RECORD.number, entry) == []


def test_each_fact_of_the_entry_is_compared(tmp_path):
    directory, entry = entry_and_dir(tmp_path)
    for key, attribute in (("commit", "commit"), ("patch-id", "patch_id"), ("subject", "subject")):
        edited = replace(entry, **{attribute: "edited"})
        assert key in fields(records._entry_differences(directory, RECORD.number, edited)), key
    assert fields(records._entry_differences(directory, RECORD.number + 1, entry)) == ["number", "record"]


def test_a_hand_edited_fact_in_the_record_breaks_its_digest(tmp_path):
    directory, entry = entry_and_dir(tmp_path)
    path = directory / RECORD.filename
    path.write_text(replace(RECORD, author="Someone Else <else@fixture.invalid>").render())
    diffs = records._entry_differences(directory, RECORD.number, entry)
    assert fields(diffs) == ["the facts' digest (a fact was edited by hand)"]
    assert diffs[0].file == RECORD.filename


def test_a_record_name_outside_the_directory_is_never_read(tmp_path):
    directory, entry = entry_and_dir(tmp_path)
    (tmp_path / "outside.patch").write_text(RECORD.render())
    for name in ("../outside.patch", "", ".", ".."):
        diffs = records._entry_differences(directory, RECORD.number, replace(entry, record=name))
        assert diffs[-1].expected == "a file name inside patches/megatron-core/", name


def test_a_missing_record_is_named(tmp_path):
    directory, entry = entry_and_dir(tmp_path)
    (directory / RECORD.filename).unlink()
    diffs = records._entry_differences(directory, RECORD.number, entry)
    assert [(d.field, d.found) for d in diffs] == [("record", "missing")]


def test_notes_follow_a_rebased_commit(tmp_path):
    previous = tmp_path / "patches" / "megatron-core"
    previous.mkdir(parents=True)
    old = Record(1, "a" * 40, "A <a@x>", "2025-01-01T00:00:00+00:00", "fix: pad", "p" * 40, "", note="ours: why")
    (previous / old.filename).write_text(old.render())
    rebased = Record(1, "b" * 40, "A <a@x>", "2025-02-01T00:00:00+00:00", "fix: pad", "p" * 40, "")
    unrelated = Record(2, "c" * 40, "A <a@x>", "2025-02-01T00:00:00+00:00", "feat: new", "q" * 40, "")
    from nemo_rl.project.lockfile import Fork

    pin = Fork("megatron-core", "https://x.invalid/f.git", "b" * 40, "main", "https://x.invalid/u.git", "main", None)
    _, noted = records.build(previous, None, pin, "b" * 40, "d" * 40, [rebased, unrelated])
    assert [r.note for r in noted] == ["ours: why", ""]
@pytest.mark.parametrize("kind", ["outside", "loop", "patches", "entry"])
def test_records_committed_as_links_are_refused_before_staging(world, tmp_path, capsys, kind):
    """A pull request makes patches/<dist> a link out of the project (or to `..`, which copying follows into
    itself), or patches/ a link to another project's, or a record a link: the offline check fails, `deps patches`
    and `deps bump` refuse before staging (exit 1, no journal left), and the fix given works."""
    patches = world.project / "patches"
    records = patches / "megatron-core"
    outside = tmp_path / "outside"
    if kind == "patches":
        shutil.copytree(patches, outside)
        shutil.rmtree(patches)
        patches.symlink_to(outside)
        link = patches
    elif kind == "entry":
        index = records / "index.toml"
        shutil.copy2(index, outside)
        index.unlink()
        index.symlink_to(outside)
        link = index
    else:
        shutil.copytree(records, outside)
        shutil.rmtree(records)
        records.symlink_to(outside if kind == "outside" else "..")
        link = records
    rev = Project.read(world.project).fork("megatron-core").rev
    for command in (["patches", "--check", "--offline"], ["patches", "megatron-core"],
                    ["bump", "megatron-core", "--rev", rev]):
        capsys.readouterr()
        assert deps(world, *command) == 1, command
        err = capsys.readouterr().err
        assert f"{link} is a symbolic link" in err and f"`rm {link}`" in err, (command, err)
        assert not list((world.project / ".nemo-rl").glob("staging-*")) if (world.project / ".nemo-rl").exists() \
            else True
    link.unlink()  # the fix: remove the link, write the records again
    if kind == "patches":
        patches.mkdir()
    assert deps(world, "patches", "megatron-core") == 0, capsys.readouterr().err
    assert records.is_dir() and not records.is_symlink() and (records / "index.toml").is_file()
def test_a_hand_edited_rev_with_uv_lock_alone_is_caught(world, capsys):
    derived_world(world)
    fork = world.forks["megatron-core"].fork
    newer = commit(fork, "release 0.2.0", {"pyproject.toml": forkworld.fork_pyproject(
        world, version="0.2.0", dependencies=["nemo-toolkit", "pytest>=8"])})
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text().replace(Project.read(world.project).fork("megatron-core").rev, newer))
    forkworld.uv_run(world, "lock", "--quiet", "--upgrade-package", "megatron-core")
    assert locked(world).commit == newer and locked(world).version == "0.1.0"  # the lie: the fork builds 0.2.0
    capsys.readouterr()
    assert deps(world, "patches", "--check", "--offline") == 1
    assert deps(world, "status", "--check") == 1
    assert "run `nemo-rl deps patches megatron-core`" in capsys.readouterr().out
    assert deps(world, "patches", "megatron-core") == 0
    assert locked(world).version == "0.2.0" and entry(world).version == "0.2.0"
    assert deps(world, "patches", "--check", "--offline") == 0


def test_online_check_finds_declares_the_fork_does_not_have(world, capsys):
    """Records, entry and lock agree with each other offline, but the recorded declarations are not the fork's."""
    from nemo_rl.forks import declared, fork_cache, metadata_check, records

    derived_world(world)
    fork = Project.read(world.project).fork("megatron-core")
    directory = records.records_dir(world.project, "megatron-core")
    base, recs = records.compute(fork_cache.fetched(fork, fork.rev), fork)
    wrong = declared.Declares("0.1.0", ">=3.10", ("nemo-toolkit", "pytest>=8", "nemo-toolkit-extra-fixture"),
                             fork.rev)
    index, noted = records.build(directory, records.read_index(directory), fork, fork.rev, base, recs, wrong)
    records.write(directory, index, noted)
    metadata_check.rewrite_pyproject(Project.read(world.project), "megatron-core", wrong)
    capsys.readouterr()
    # records and entry agree; the lock does not (it was not made from the entry), and offline says so
    assert deps(world, "patches", "--check", "--offline") == 1
    assert "uv.lock" in capsys.readouterr().out
    assert deps(world, "patches", "--check") == 1
    assert "declares requires-dist" in capsys.readouterr().out
