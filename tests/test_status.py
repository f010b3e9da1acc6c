"""`deps status`'s pure parts (deps/status.py): which state wins, what `--check` fails on, and the rendered
rows. No fixture world: rows are built by hand."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from nemo_rl.deps import status
from nemo_rl.project.develop_state import CheckoutFacts

CLEAN = dict(bad_pin=False, interrupted=False, lock_stale=False, records_stale=False, metadata_stale=False,
             checkout_unreadable=False, developing=False, checkout_gone=False, develop_recorded=False, installed=True)
ORDER = ["bad_pin", "interrupted", "lock_stale", "records_stale", "metadata_stale", "checkout_unreadable",
         "developing", "checkout_gone", "develop_recorded"]
ROW = status.ForkStatus("megatron-core", "https://forks.nemo-rl.invalid/m.git", "nemo-rl/main", "a" * 40, "a" * 40,
                        "a" * 40, "0.1.0", "https://upstream.nemo-rl.invalid/m.git", "b" * 40, 2, [], None, "ok",
                        None)


def test_nothing_wrong_leaves_the_state_to_the_environment():
    assert status.first_state(**CLEAN) is None
    assert status.first_state(**{**CLEAN, "installed": False}) == "not installed"


@pytest.mark.parametrize("n", range(len(ORDER)))
def test_the_most_fundamental_state_wins(n):
    """Each condition hides every later one: a bad pin before a landing cut short before a stale lock ..."""
    found = status.first_state(**{**CLEAN, **dict.fromkeys(ORDER[n:], True), "installed": False})
    assert found == ["bad pin", "landing interrupted", "lock stale", "records stale", "metadata stale",
                     "checkout unreadable", "developing", "checkout gone", "develop not applied"][n]
    assert found in status.FAILING and status.REMEDIES[found]


def test_check_fails_on_a_failing_state_a_lock_problem_or_an_orphan():
    assert not status.fails_check([ROW, replace(ROW, state="not installed")], None, [])
    assert status.fails_check([ROW, replace(ROW, state="env stale")], None, [])
    assert status.fails_check([ROW], "uv.lock needs to be updated", [])
    assert status.fails_check([ROW], None, ["patches/gone: no fork table"])


def test_render_shows_the_pins_the_checkout_and_at_most_five_record_problems():
    developing = CheckoutFacts(Path("/work/m"), "c" * 40, 3, dirty=True, rebasing=True)
    row = replace(ROW, state="developing", developing=developing, remedy="run `nemo-rl deps develop --stop x`",
                  records_problems=[f"problem {n}" for n in range(7)], installed_version=None)
    lines = status.render([row], []).splitlines()
    assert lines[0] == "megatron-core: developing"
    assert lines[2] == f"  pinned     {'a' * 12}   locked {'a' * 12}   installed not installed"
    assert lines[4] == (f"  developing /work/m at {'c' * 12}, 3 commit(s) ahead of the pin, dirty, "
                        "REBASING (stopped at a conflict)")
    assert lines[5:10] == [f"  records    problem {n}" for n in range(5)]
    assert lines[10] == "  records    ... and 2 more"
    assert lines[11] == "  fix        run `nemo-rl deps develop --stop x`"
    missing = replace(row, developing=CheckoutFacts(Path("/gone"), None, 0, False, missing=True), records_problems=[])
    assert "  developing /gone (missing)" in status.render([missing], []).splitlines()


def test_a_landing_cut_short_is_the_state_of_the_forks_it_changes_only(tmp_path):
    """A bump of megatron-core cut short says nothing about nemo-toolkit; a journal naming no records, or one that
    cannot be read, may touch any fork."""
    from nemo_rl.project.journal import CutShort

    bump = CutShort(tmp_path, ("pyproject.toml", "uv.lock", "patches/megatron-core"), (), None)
    assert status.touches(bump, "megatron-core") and not status.touches(bump, "nemo-toolkit")
    assert status.touches(replace(bump, moves=["pyproject.toml"]), "nemo-toolkit")
    assert status.touches(replace(bump, moves=[], unreadable="cannot read the landing journal"), "nemo-toolkit")


def test_a_landing_cut_short_says_what_moved_and_never_a_move_that_did_not_happen(tmp_path):
    from nemo_rl.project.journal import CutShort

    nothing = CutShort(tmp_path / "s", ("pyproject.toml", "uv.lock", "patches/megatron-core"), (), None)
    said = status.cut_remedy(nothing).format(dist="megatron-core", checkout=None)
    assert "cut short before any of them moved: the project is as before that command" in said
    assert f"`rm -rf {tmp_path / 's'}` drops them" in said and "mixes" not in said
    some = replace(nothing, moved=["uv.lock"])
    said = status.cut_remedy(some).format(dist="megatron-core", checkout=None)
    assert "with uv.lock moved and pyproject.toml, patches/megatron-core not (the project mixes" in said
    assert "nemo-rl deps recover" in said


def test_the_environment_beside_a_lock_problem_fails_check_too():
    beside = replace(ROW, state="not installed", environment=("installed differs: x: run `uv sync`",))
    assert status.fails_check([beside], None, [])
    lines = status.render([replace(beside, state="metadata stale", remedy="run `nemo-rl deps patches x`")], [])
    assert lines.splitlines()[-2:] == ["  fix        run `nemo-rl deps patches x`",
                                       "  then       installed differs: x: run `uv sync`"]


def test_a_landing_cut_short_after_every_move_says_the_project_is_whole(tmp_path):
    """Killed while removing its staging copy: every file moved, so nothing mixes; recover removes the copy."""
    from nemo_rl.project.journal import CutShort

    moves = ("pyproject.toml", "uv.lock", "patches/megatron-core")
    said = status.cut_remedy(CutShort(tmp_path / "s", moves, moves, None)).format(dist="megatron-core", checkout=None)
    assert "cut short after every file moved" in said and "the project is whole" in said, said
    assert "mixes" not in said and " and  not" not in said and "nemo-rl deps recover" in said
