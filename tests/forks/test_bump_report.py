"""The bump's report (forks/bump_report.py): commits counted by commit, the uv.lock changes, the lines."""

from __future__ import annotations

from dataclasses import replace

from fakes import RECORD, make_index

from nemo_rl.forks import bump_report
from nemo_rl.forks.record_files import Listed, Record
from nemo_rl.project import lockfile


def test_lock_changes_lists_changed_added_and_removed_in_order():
    old = {"torch": "2.7.0", "numpy": "1.26.4", "gone": "1.0"}
    new = {"torch": "2.7.0", "numpy": "1.26.5", "zeta": "0.1", "alpha": "2.0"}
    assert bump_report.lock_changes(old, new) == [
        "numpy: 1.26.4 -> 1.26.5", "alpha: added (2.0)", "zeta: added (0.1)", "gone: removed (was 1.0)"]
    assert bump_report.lock_changes(old, old) == []


def test_the_report_names_added_and_removed_commits_by_patch_id():
    kept, dropped = RECORD, replace(RECORD, commit="e" * 40, patch_id="f" * 40, subject="dropped upstream")
    added = replace(RECORD, commit="1" * 40, patch_id="2" * 40, subject="new work")
    index = make_index([kept, dropped])
    fork = lockfile.Fork("megatron-core", "https://forks.nemo-rl.invalid/megatron-lm.git", "c" * 40, "nemo-rl/main",
                         "https://upstream.nemo-rl.invalid/megatron-lm.git", "main", "d" * 40)
    text = bump_report.report(fork, "9" * 40, index, "8" * 40, [kept, added], ["numpy: 1 -> 2"], dry_run=True,
                       lock_mode="offline")
    lines = text.splitlines()
    assert lines[0] == "bump megatron-core (dry run: nothing written)"
    assert f"  upstream  base moved {'d' * 12} -> {'8' * 12}" in lines
    assert "  downstream commits: 2 (1 added, 1 removed)" in lines
    assert f"    + {'1' * 12} new work" in lines and f"    - {'e' * 12} dropped upstream" in lines
    assert lines[-2].startswith("  uv.lock: 1 change(s) (locked offline") and lines[-1] == "    numpy: 1 -> 2"


def record(number, sha, patch_id):
    return Record(number, sha * 40, "a <a@b>", "2026-01-01", f"subject {sha}", patch_id * 40, "")


def listed(sha, patch_id):
    return Listed(1, sha * 40, f"subject {sha}", patch_id * 40, "0001-x.patch", "sha256:" + "0" * 64)


def test_commits_are_counted_by_commit_not_by_patch_id():
    old = [listed("a", "1")]
    # b and c are one change twice (one patch-id); d is a rebased a (a's patch-id under a new SHA)
    new = [record(1, "d", "1"), record(2, "b", "2"), record(3, "c", "2")]
    added, removed, shared = bump_report.commit_changes(old, new)
    assert [r.commit[0] for r in added] == ["b", "c"] and removed == []
    assert shared == {"2" * 40: ["b" * 40, "c" * 40]}
    added, removed, _ = bump_report.commit_changes([*old, listed("e", "2")], new)
    assert [r.commit[0] for r in added] == ["c"] and removed == []
    added, removed, _ = bump_report.commit_changes(old, [record(1, "a", "1"), record(2, "b", "2")])
    assert [r.commit[0] for r in added] == ["b"] and removed == []  # a was there already
    added, removed, _ = bump_report.commit_changes(old, [record(1, "b", "2")])
    assert [r.commit[0] for r in added] == ["b"] and [e.commit[0] for e in removed] == ["a"]


def test_empty_commits_share_a_patch_id_without_being_one_change_twice():
    empty = bump_report.ZERO[0]
    _, _, shared = bump_report.commit_changes([], [record(1, "a", empty), record(2, "b", empty)])
    assert shared == {}
