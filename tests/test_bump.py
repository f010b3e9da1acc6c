"""bump's pure parts: the uv.lock changes it reports and the report's lines (deps/bump.py, read only)."""

from __future__ import annotations

from dataclasses import replace

from test_record_files import RECORD, make_index

from nemo_rl.deps import bump
from nemo_rl.project import lockfile


def test_lock_changes_lists_changed_added_and_removed_in_order():
    old = {"torch": "2.7.0", "numpy": "1.26.4", "gone": "1.0"}
    new = {"torch": "2.7.0", "numpy": "1.26.5", "zeta": "0.1", "alpha": "2.0"}
    assert bump.lock_changes(old, new) == [
        "numpy: 1.26.4 -> 1.26.5", "alpha: added (2.0)", "zeta: added (0.1)", "gone: removed (was 1.0)"]
    assert bump.lock_changes(old, old) == []


def test_the_report_names_added_and_removed_commits_by_patch_id():
    kept, dropped = RECORD, replace(RECORD, commit="e" * 40, patch_id="f" * 40, subject="dropped upstream")
    added = replace(RECORD, commit="1" * 40, patch_id="2" * 40, subject="new work")
    index = make_index([kept, dropped])
    fork = lockfile.Fork("megatron-core", "https://forks.nemo-rl.invalid/megatron-lm.git", "c" * 40, "nemo-rl/main",
                         "https://upstream.nemo-rl.invalid/megatron-lm.git", "main", "d" * 40)
    text = bump.report(fork, "9" * 40, index, "8" * 40, [kept, added], ["numpy: 1 -> 2"], dry_run=True,
                       lock_mode="offline")
    lines = text.splitlines()
    assert lines[0] == "bump megatron-core (dry run: nothing written)"
    assert f"  upstream  base moved {'d' * 12} -> {'8' * 12}" in lines
    assert "  downstream commits: 2 (1 added, 1 removed)" in lines
    assert f"    + {'1' * 12} new work" in lines and f"    - {'e' * 12} dropped upstream" in lines
    assert lines[-2].startswith("  uv.lock: 1 change(s) (locked offline") and lines[-1] == "    numpy: 1 -> 2"
