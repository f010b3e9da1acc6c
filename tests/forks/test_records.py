"""The offline check of one index entry against its record file (records._entry_differences), on files alone;
on fixture forks, a pin moved by hand without the records, and the online check of the recorded [declares]."""

from __future__ import annotations

from dataclasses import replace

import forkworld
from fakes import RECORD, deps, derived_world, entry, locked, make_index
from gitfixtures import commit

from nemo_rl.forks import records
from nemo_rl.project import lockfile


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


def test_a_hand_edited_rev_with_uv_lock_alone_is_caught(world, capsys):
    derived_world(world)
    fork = world.forks["megatron-core"].fork
    newer = commit(fork, "release 0.2.0", {"pyproject.toml": forkworld.fork_pyproject(
        world, version="0.2.0", dependencies=["nemo-toolkit", "pytest>=8"])})
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text().replace(lockfile.fork(world.project, "megatron-core").rev, newer))
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
    fork = lockfile.fork(world.project, "megatron-core")
    directory = records.records_dir(world.project, "megatron-core")
    base, recs = records.compute(fork_cache.fetched(fork, fork.rev), fork, fork.rev)
    wrong = declared.Declares("0.1.0", ">=3.10", ("nemo-toolkit", "pytest>=8", "nemo-toolkit-extra-fixture"),
                             fork.rev)
    index, noted = records.build(directory, records.read_index(directory), fork, fork.rev, base, recs, wrong)
    records.write(directory, index, noted)
    metadata_check.rewrite_pyproject(world.project, "megatron-core", wrong)
    capsys.readouterr()
    # records and entry agree; the lock does not (it was not made from the entry), and offline says so
    assert deps(world, "patches", "--check", "--offline") == 1
    assert "uv.lock" in capsys.readouterr().out
    assert deps(world, "patches", "--check") == 1
    assert "declares requires-dist" in capsys.readouterr().out
