"""upstream_report's pure parts: which touched files ship in the wheel, the age of a base, and the summary line."""

from __future__ import annotations

from dataclasses import replace

from nemo_rl.forks import upstream_report
from nemo_rl.forks.upstream_report import CommitReport

WHEEL = frozenset({"megatron/core/tokens.py", "megatron/core/datasets/helpers.cpython-312-x86_64-linux-gnu.so",
                   "pkg/mod.py"})


def test_shipped_files_match_by_path_source_root_or_compiled_directory():
    touched = ["megatron/core/tokens.py", "src/pkg/mod.py", "megatron/core/datasets/helpers.cpp", "docs/x.md",
               "tests/test_tokens.py", "helpers.cpp"]
    assert upstream_report._shipped(touched, WHEEL) == [
        "megatron/core/tokens.py", "src/pkg/mod.py", "megatron/core/datasets/helpers.cpp"]
    assert upstream_report._shipped(["anything.py"], frozenset()) == []


def test_days_between_two_iso_dates():
    assert upstream_report._days("2025-05-01T12:00:00+00:00", "2025-06-01T11:00:00+02:00") == 30
    assert upstream_report._days("2025-05-01T12:00:00+00:00", "2025-05-01T12:00:00+00:00") == 0


ROW = CommitReport(1, "a" * 40, "fix: pad tokens", ("megatron/core/tokens.py",), ("megatron/core/tokens.py",),
                   "no", None, None, True, (), ())


def test_the_summary_says_what_to_do():
    head = "b" * 40
    assert upstream_report.summary([], head, None) == (
        f"no downstream commit: pin upstream {head[:12]} instead of the fork")
    assert upstream_report.summary([replace(ROW, upstreamed="yes")], head, False).startswith(
        "every downstream commit is upstreamed")
    assert upstream_report.summary([ROW], head, True).startswith("no downstream commit touches a shipped file")
    rows = [ROW, replace(ROW, number=2, applies=False), replace(ROW, number=3, upstreamed="probably"),
            replace(ROW, number=4, shipped=()), replace(ROW, number=5, upstreamed="yes")]
    assert upstream_report.summary(rows, head, False) == (
        "4 commit(s) still needed, 1 conflict on upstream's head; 1 probably upstreamed (check by hand); "
        "1 change(s) nothing the distribution ships")
