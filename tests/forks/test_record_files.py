"""patches/<dist>/ files on their own: a record and an index survive render and parse, the digest covers every
fact, and what does not parse is refused with the file named (file names against git format-patch:
tests/deps/test_patches.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from fakes import RECORD, deps, make_index
from gitfixtures import commit

from nemo_rl.errors import NemoRLError
from nemo_rl.forks import record_files
from nemo_rl.forks.record_files import INDEX


def test_a_record_without_a_note_or_diffstat_parses(tmp_path):
    bare = replace(RECORD, diffstat="", note="")
    (tmp_path / "notes").write_text(bare.render())
    assert record_files.read_record(tmp_path / "notes") == replace(bare, number=0)  # the number is the file name's


def test_a_record_missing_a_fact_is_refused_with_its_name(tmp_path):
    (tmp_path / "0003.patch").write_text(RECORD.render().replace(f"patch-id: {RECORD.patch_id}\n", ""))
    with pytest.raises(NemoRLError, match="0003.patch is missing patch-id") as refused:
        record_files.read_record(tmp_path / "0003.patch")
    assert "(its note goes too)" in str(refused.value.remedy)


def test_read_record_numbers_it_from_the_file_name(tmp_path):
    path = tmp_path / RECORD.filename
    path.write_text(RECORD.render())
    assert record_files.read_record(path) == RECORD
    assert record_files.read_records(tmp_path) == {RECORD.commit: RECORD}


def test_an_index_survives_render_and_read(tmp_path):
    index = make_index([RECORD])
    (tmp_path / INDEX).write_text(record_files.render_index(index))
    found = record_files.read_index(tmp_path)
    assert found is not None
    assert (found.facts(), found.commits, found.digest) == (index.facts(), index.commits, index.digest)
    assert found.why.strip() == index.why and found.expected_digest() == found.digest


def test_no_index_is_none_and_one_out_of_shape_names_its_problems(tmp_path):
    """Read as data: what a hand edit put out of shape is named (the checks report it), never a refusal that would
    stop status and `deps patches` itself."""
    assert record_files.read_index(tmp_path) is None
    (tmp_path / INDEX).write_text('commit = "not a table"\npinned = 7\nwhy = "kept"\ndeclares = 1\n')
    found = record_files.read_index(tmp_path)
    assert found is not None
    assert found.problems[:2] == ("[[commit]] is not an array of tables", "pinned is not a string")
    assert found.problems[2].startswith("index.toml [declares] must hold commit and version")
    assert (found.commits, found.pinned, found.why, found.declares) == ((), "", "kept", None)


def test_an_index_that_does_not_parse_or_holds_a_declares_nemo_rl_does_not_read_is_named_why_kept(tmp_path):
    """Merge-conflict markers (two branches bumped), a [declares] requirement that is a direct reference, a why-note
    typed below the last [[commit]] (TOML puts it in that table): each named, the why-note kept."""
    text = record_files.render_index(make_index([RECORD]))
    (tmp_path / INDEX).write_text(text.replace("[[commit]]", "<<<<<<< HEAD\n[[commit]]", 1))
    found = record_files.read_index(tmp_path)
    assert found is not None and found.problems[0].startswith("does not parse as TOML")
    assert found.why.strip() == "Ours: why the fork exists." and found.commits == ()
    declares = '[declares]\nversion = "1"\nrequires-dist = ["evil @ https://x.invalid/e.tar.gz"]\n'
    (tmp_path / INDEX).write_text(text.replace("[[commit]]", declares + "[[commit]]", 1))
    found = record_files.read_index(tmp_path)
    assert found is not None and found.declares is None
    assert found.problems == ("index.toml [declares] requires-dist: 'evil @ https://x.invalid/e.tar.gz' is not a "
                              "requirement nemo-rl locks (a direct reference)",)
    below = text.replace('why = """Ours: why the fork exists.\n"""\n', "") + 'why = "typed last"\n'
    (tmp_path / INDEX).write_text(below)
    found = record_files.read_index(tmp_path)
    assert found is not None and found.why == "typed last" and found.problems == ("[[commit]] #1 has why, which "
                                                                                   "nemo-rl does not write",)


def test_a_commit_entry_edited_out_of_shape_is_named_where_it_is_read(tmp_path):
    """[[commit]] tables are typed when read (Listed): a record name that is no string, a number that is no
    integer, a key left out or one nemo-rl does not write is named with the entry, the rest read as it is."""
    text = record_files.render_index(make_index([RECORD]))
    for edit, said, problem in (
            (f'record = "{RECORD.filename}"', "record = 7", "record is 7, not a string"),
            ("number = 3", 'number = "3"', "number is '3', not an integer"),
            ("number = 3", "number = true", "number is True, not an integer"),
            (f'patch-id = "{RECORD.patch_id}"', "", "patch-id is None, not a string"),
            ("number = 3", "number = 3\nextra = 1", "has extra, which nemo-rl does not write")):
        (tmp_path / INDEX).write_text(text.replace(edit, said, 1))
        found = record_files.read_index(tmp_path)
        assert found is not None and found.problems == (f"[[commit]] #1 {problem}",), said
        assert found.commits[0].commit == RECORD.commit  # the rest as it is
    (tmp_path / INDEX).write_text(text)
    assert record_files.read_index(tmp_path).problems == ()


def test_the_digest_covers_every_fact_and_no_note():
    index = make_index([RECORD])
    for key in record_files.INDEX_FACTS:
        field = key.replace("-", "_")
        assert replace(index, **{field: "edited"}).expected_digest() != index.digest, key
    for key in RECORD.facts():
        field = key.replace("-", "_")
        assert make_index([replace(RECORD, **{field: "edited"})]).digest != index.digest, key
    assert make_index([replace(RECORD, note="another note")]).digest == index.digest
    assert replace(index, why="another why").expected_digest() == index.digest


def test_records_survive_any_subject(world, capsys):
    megatron = world.forks["megatron-core"]
    new_head = commit(megatron.fork, "   indented: subject  ", {"megatron/core/s.py": "S = 1\n"})
    assert deps(world, "bump", "megatron-core", "--rev", new_head) == 0
    assert deps(world, "patches", "--check", "--offline", "megatron-core") == 0
    assert deps(world, "patches", "--check", "megatron-core") == 0


ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.mark.parametrize("fork", sorted(p.name for p in (ROOT / "patches").iterdir() if (p / INDEX).is_file()))
def test_a_committed_index_renders_back_byte_for_byte(fork):
    directory = ROOT / "patches" / fork
    assert record_files.render_index(record_files.read_index(directory)) == (directory / INDEX).read_text()
