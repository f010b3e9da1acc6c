"""`deps recover` (deps/recover.py) on a project directory with what a killed bump leaves: nothing, a staging
copy that never landed, a landing cut short, a landing cut short whose files were edited since. Files in a
temporary directory, no fork."""

from __future__ import annotations

import json

import pytest

from nemo_rl.deps import recover
from nemo_rl.errors import NemoRLError
from nemo_rl.project import journal, state_dir


def test_nothing_to_recover(tmp_path, capsys):
    assert recover._recover(tmp_path) == 0
    assert "nothing to recover" in capsys.readouterr().out


def cut_short(project, moves, staged, name="staging-2-b"):
    """A landing killed after its journal: `staged` ({path: text}) still in the staging copy, the digests the
    journal records taken from the project as it is now (as land() takes them when staging)."""
    staging = project / state_dir.STAGING_ROOT / name
    staging.mkdir(parents=True)
    for path, text in staged.items():
        (staging / path).parent.mkdir(parents=True, exist_ok=True)
        (staging / path).write_text(text)
    before = {path: journal.digest(project / path) for path in moves}
    (staging / journal.JOURNAL).write_text(json.dumps({"version": 1, "moves": moves, "before": before}))
    return staging


def test_a_copy_that_never_landed_is_removed_and_a_cut_short_landing_finished(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text("old\n")
    (tmp_path / "uv.lock").write_text("old lock\n")
    root = tmp_path / state_dir.STAGING_ROOT
    unused = root / "staging-1-a"
    unused.mkdir(parents=True)
    (unused / "pyproject.toml").write_text("never landed\n")
    # uv.lock moved before the kill: only pyproject.toml is left
    cut_short(tmp_path, ["uv.lock", "pyproject.toml"], {"pyproject.toml": "new\n"})
    assert recover._recover(tmp_path) == 0
    out = capsys.readouterr().out
    assert "finished an interrupted landing: moved pyproject.toml (uv.lock had moved before the interruption)" in out
    assert f"removed {unused} (left by a bump or `deps patches` killed before it changed anything)" in out
    assert (tmp_path / "pyproject.toml").read_text() == "new\n"
    assert (tmp_path / "uv.lock").read_text() == "old lock\n"
    assert not root.exists()


def test_a_landing_cut_short_before_any_move_says_nothing_had_moved(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text("old\n")
    cut_short(tmp_path, ["pyproject.toml", "uv.lock"], {"pyproject.toml": "new\n", "uv.lock": "lock\n"})
    assert recover._recover(tmp_path) == 0
    out = capsys.readouterr().out
    assert "moved pyproject.toml, uv.lock (nothing had moved before the interruption" in out, out
    assert "had moved before" not in out.replace("nothing had moved before", "")


@pytest.mark.parametrize("edited", ["pyproject.toml", "uv.lock", "patches/megatron-core/index.toml"])
def test_recover_never_lands_over_an_edit_made_since_the_files_were_staged(tmp_path, edited):
    """The landing's own check, made again: another terminal's edit after the kill is kept, and the fix says how."""
    (tmp_path / "patches/megatron-core").mkdir(parents=True)
    for name in ("pyproject.toml", "uv.lock", "patches/megatron-core/index.toml"):
        (tmp_path / name).write_text(f"{name} before\n")
    staging = cut_short(tmp_path, ["pyproject.toml", "uv.lock", "patches/megatron-core"], {
        "pyproject.toml": "staged\n", "uv.lock": "staged\n", "patches/megatron-core/index.toml": "staged\n"})
    (tmp_path / edited).write_text("the other terminal's edit\n")
    with pytest.raises(NemoRLError, match=f"{edited.split('/index')[0]} changed in the project since they were "
                                          "staged.*nothing more was moved") as raised:
        recover._recover(tmp_path)
    assert f"rm -rf {staging}" in raised.value.remedy and "nemo-rl deps status" in raised.value.remedy
    assert (tmp_path / edited).read_text() == "the other terminal's edit\n"
    assert all("staged" not in p.read_text() for p in tmp_path.rglob("*") if p.is_file() and staging not in p.parents)
    assert (staging / journal.JOURNAL).exists()  # status and recover say the same again


def test_a_landed_path_edited_since_is_no_refusal_and_a_directory_swap_cut_short_finishes(tmp_path, capsys):
    """Only paths still to move are compared: one that landed before the kill is the landing's own; a directory
    set aside (.old-<name>) is the project's copy, not a deletion."""
    (tmp_path / "patches/megatron-core").mkdir(parents=True)
    (tmp_path / "patches/megatron-core/index.toml").write_text("records before\n")
    (tmp_path / "uv.lock").write_text("landed lock\n")
    staging = cut_short(tmp_path, ["uv.lock", "patches/megatron-core"], {"patches/megatron-core/index.toml": "new\n"})
    (tmp_path / "patches/megatron-core").rename(staging / ".old-megatron-core")  # the swap's first rename
    (tmp_path / "uv.lock").write_text("edited after it landed\n")
    assert recover._recover(tmp_path) == 0
    assert (tmp_path / "patches/megatron-core/index.toml").read_text() == "new\n"
    assert (tmp_path / "uv.lock").read_text() == "edited after it landed\n"
    assert "moved patches/megatron-core (uv.lock had moved before" in capsys.readouterr().out


def test_a_journal_without_digests_lands_nothing(tmp_path):
    (tmp_path / "pyproject.toml").write_text("old\n")
    staging = tmp_path / state_dir.STAGING_ROOT / "staging-1-a"
    staging.mkdir(parents=True)
    (staging / "pyproject.toml").write_text("new\n")
    (staging / journal.JOURNAL).write_text(json.dumps({"moves": ["pyproject.toml"]}))
    with pytest.raises(NemoRLError, match="is a landing journal of another nemo-rl \\(no version;"):
        recover._recover(tmp_path)
    assert (tmp_path / "pyproject.toml").read_text() == "old\n"
