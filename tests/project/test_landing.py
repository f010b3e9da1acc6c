"""The landing journal, read back after an interruption: it may only name the paths a landing moves, inside the
project; anything else (a hand edit, a corrupt file) is refused before anything moves. An edit made while a
command runs is never landed over."""

from __future__ import annotations

import json

import pytest
from fakes import NARROWED, block, fork_with_extras, offline, patches

from nemo_rl.errors import NemoRLError
from nemo_rl.project import journal, landing, state_dir


@pytest.fixture
def staging(tmp_path):
    path = tmp_path / "project" / state_dir.STAGING_ROOT / "staging-1-x"
    path.mkdir(parents=True)
    return path


def write_journal(staging, content) -> None:
    (staging / journal.JOURNAL).write_text(content if isinstance(content, str) else json.dumps(content))


def test_a_journal_of_landable_paths_is_read(staging):
    write_journal(staging, {"moves": ["pyproject.toml", "uv.lock", "patches/megatron-core"]})
    assert journal.read_journal(staging) == ["pyproject.toml", "uv.lock", "patches/megatron-core"]
    assert journal.project_of(staging) == staging.parent.parent


@pytest.mark.parametrize("moves", [
    [".git/config"], ["../outside"], ["patches/../../x"], ["patches/megatron-core/extra"], ["patches/"],
    ["/etc/passwd"], [7], "pyproject.toml", {"a": 1},
])
def test_a_journal_naming_anything_else_is_refused(staging, moves):
    write_journal(staging, {"moves": moves})
    with pytest.raises(NemoRLError, match="names paths a landing never moves"):
        journal.read_journal(staging)


@pytest.mark.parametrize("content", ["{not json", '{"other": []}', "[]", ""])
def test_an_unreadable_journal_is_refused_saying_nothing_more_moved(staging, content):
    """Nothing more is moved, and the landing cut short may have moved some files already: `git status` says."""
    write_journal(staging, content)
    with pytest.raises(NemoRLError, match="cannot read the landing journal") as caught:
        journal.read_journal(staging)
    assert "nothing more was moved, but the landing may have moved some files" in caught.value.remedy


@pytest.mark.parametrize("before", [[], {"pyproject.toml": None}, {"uv.lock": "x" * 64, "pyproject.toml": None},
                                    {"uv.lock": "0" * 63, "pyproject.toml": None},
                                    {"uv.lock": 7, "pyproject.toml": None}])
def test_a_journal_whose_digests_are_not_one_per_move_is_refused(staging, before):
    write_journal(staging, {"moves": ["uv.lock", "pyproject.toml"], "before": before})
    with pytest.raises(NemoRLError, match="records digests that are not one per moved path"):
        journal.read_journal(staging)
    valid = {"uv.lock": "0" * 64, "pyproject.toml": None}
    write_journal(staging, {"moves": ["uv.lock", "pyproject.toml"], "before": valid})
    assert journal.read_journal(staging) == ["uv.lock", "pyproject.toml"]


def test_a_missing_journal_is_refused(staging):
    with pytest.raises(NemoRLError, match="cannot read the landing journal"):
        journal.read_journal(staging)


@pytest.mark.parametrize("edited", ["pyproject.toml", "uv.lock", "patches/megatron-core/index.toml", "new file"])
def test_an_edit_made_while_staged_is_never_landed_over(tmp_path, edited):
    """An editor or `uv add` in another terminal takes no project lock: a landing over its edit would lose it."""
    project = tmp_path / "project"
    (project / "patches/megatron-core").mkdir(parents=True)
    for name in ("pyproject.toml", "uv.lock", "patches/megatron-core/index.toml"):
        (project / name).write_text(f"{name} before\n")
    with landing.Staging(project, ["pyproject.toml", "uv.lock"], ["patches/megatron-core"]) as staged:
        for name in ("pyproject.toml", "uv.lock", "patches/megatron-core/index.toml"):
            (staged.path / name).write_text(f"{name} staged\n")
        other = project / ("patches/megatron-core/other.md" if edited == "new file" else edited)
        other.write_text("the other terminal's edit\n")
        with pytest.raises(NemoRLError, match="changed .* while this command ran.*nothing landed") as raised:
            staged.land()
        assert raised.value.remedy == "run the command again"
    assert other.read_text() == "the other terminal's edit\n"
    assert all("staged" not in p.read_text() for p in project.rglob("*") if p.is_file())
    assert not (project / state_dir.STAGING_ROOT).exists()


def test_an_unchanged_project_lands(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("before\n")
    with landing.Staging(project, ["pyproject.toml", "uv.lock"], ["patches/megatron-core"]) as staged:
        (staged.path / "pyproject.toml").write_text("staged\n")
        staged.land()
    assert (project / "pyproject.toml").read_text() == "staged\n"


def test_a_cut_short_landing_whose_journal_cannot_be_read_is_refused_with_its_own_fix(tmp_path):
    """recover cannot finish a landing whose journal does not read: the refusal says what recover would, never
    to run recover."""
    from nemo_rl.errors import NemoRLError
    from nemo_rl.project import journal, state_dir

    staging = tmp_path / state_dir.STAGING_ROOT / "staging-1-a"
    staging.mkdir(parents=True)
    (staging / journal.JOURNAL).write_text("garbage{")
    try:
        journal.refuse_cut_short(tmp_path, locked=True)
    except NemoRLError as exc:
        assert "journal cannot be read" in exc.what and "deps recover` (it finishes" not in str(exc.remedy), exc
    else:
        raise AssertionError("a landing cut short was not refused")


def test_a_journal_that_is_a_dangling_link_is_a_journal_that_cannot_be_read(staging):
    """A journal replaced by a link to nowhere: taken for "no journal", the landing cut short read as a staging
    copy killed before it changed anything, which `deps recover` deletes although files had moved."""
    import os

    os.symlink("/nonexistent/LANDING.json", staging / journal.JOURNAL)
    project = journal.project_of(staging)
    assert journal.leftovers(project, locked=True) == [journal.Leftover(staging, True)]
    (cut,) = journal.cut_short(project, locked=True)
    assert cut.unreadable is not None and "cannot read the landing journal" in cut.unreadable


def test_an_edit_in_another_terminal_during_a_relock_is_kept(world, capsys, monkeypatch):
    fork_with_extras(world)
    lock = world.project / "uv.lock"
    text = lock.read_text()
    start, end = block(text)
    lied = text[:start] + text[start:end].replace('{ name = "six" }', NARROWED) + text[end:]
    lock.write_text(lied)
    from nemo_rl.deps import patches as patches_verb

    real = patches_verb.uv.lock
    path = world.project / "pyproject.toml"

    def other_terminal(*args, **kwargs):
        # `uv add` in another terminal while the relock runs: it takes no nemo-rl lock
        path.write_text(path.read_text().replace("dependencies = []", 'dependencies = ["colorama"]', 1))
        return real(*args, **kwargs)

    monkeypatch.setattr(patches_verb.uv, "lock", other_terminal)
    rc, out = patches(world, capsys)
    assert rc == 1 and "pyproject.toml changed" in out and "nothing landed" in out, out
    assert 'dependencies = ["colorama"]' in path.read_text() and lock.read_text() == lied
    monkeypatch.setattr(patches_verb.uv, "lock", real)
    assert offline(world, capsys)[0] == 1  # the lie is still named
