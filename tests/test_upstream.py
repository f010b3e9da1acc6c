"""`deps upstream`'s report as text (deps/upstream.py render): one line per fact, each commit's verdict."""

from __future__ import annotations

from nemo_rl.deps import upstream
from nemo_rl.forks.upstream_report import CommitReport, ForkReport


def commit(number: int, **fields) -> CommitReport:
    base = dict(number=number, commit=f"{number}" * 40, subject=f"change {number}", touched=("a.py", "b.py"),
                shipped=("a.py",), upstreamed="no", upstream_commit=None, upstream_evidence=None, applies=True,
                conflicts=(), gone_upstream=())
    return CommitReport(**{**base, **fields})


def report(*commits: CommitReport, **fields) -> ForkReport:
    base = dict(distribution="megatron-core", pinned="a" * 40, base="b" * 40, base_date="2025-01-02T03:04:05",
                upstream_url="https://upstream.nemo-rl.invalid/m.git", upstream_branch="main", upstream_head="c" * 40,
                upstream_head_date="2025-06-07T00:00:00", behind_commits=12, behind_days=156,
                upstream_distribution="megatron-core", upstream_version="0.20.0", upstream_builds_ours=True,
                problems=(), commits=commits, identical_to_base=False, summary="1 commit still needed")
    return ForkReport(**{**base, **fields})


def test_the_header_says_where_upstream_stands_and_what_it_builds():
    lines = upstream.render(report()).splitlines()
    assert lines == [
        "megatron-core: 1 commit still needed",
        f"  upstream   https://upstream.nemo-rl.invalid/m.git main at {'c' * 12} (2025-06-07)",
        f"  base       {'b' * 12} (2025-01-02): 12 commit(s), 156 day(s) behind upstream",
        "  upstream builds megatron-core 0.20.0"]
    renamed = upstream.render(report(upstream_distribution="megatron-tron", upstream_builds_ours=False))
    assert renamed.splitlines()[3] == "  upstream builds megatron-tron 0.20.0  (not megatron-core: a rename)"
    assert upstream.render(report(upstream_distribution=None, upstream_version=None)).splitlines()[3] == \
        "  upstream builds ?"


def test_each_commit_says_what_ships_whether_it_is_upstream_and_whether_it_applies():
    rows = [commit(1), commit(2, shipped=(), upstreamed="yes", upstream_commit="d" * 40, upstream_evidence="patch-id",
                                applies=None),
            commit(3, shipped=None, upstreamed="probably", upstream_commit="e" * 40, upstream_evidence="trailer",
                   applies=False, conflicts=("a.py",), gone_upstream=("b.py (moved by f00)",)),
            commit(4, fails_without_earlier=True, conflicts_without_earlier=("a.py", "b.py"))]
    lines = upstream.render(report(*rows, problems=("no wheel",))).splitlines()[4:]
    assert lines == [
        f"     1 {'1' * 12} change 1", "       1 of 2 file(s) shipped; not upstream; applies on upstream's head",
        f"     2 {'2' * 12} change 2", f"       ships nothing; upstreamed as {'d' * 12} (patch-id)",
        f"     3 {'3' * 12} change 3",
        f"       unknown; probably upstreamed as {'e' * 12} (trailer); CONFLICTS on upstream's head: a.py",
        "       upstream since the base: b.py (moved by f00)",
        f"     4 {'4' * 12} change 4",
        "       1 of 2 file(s) shipped; not upstream; applies on upstream's head after the commits before it, but "
        "not without the earlier conflicting ones (then: a.py, b.py)",
        "  note       no wheel"]


def test_a_merge_commit_is_said_to_be_dropped_and_is_not_counted_as_needed():
    from nemo_rl.forks.upstream_report import summary

    merge = commit(2, applies=None, merge=True)
    text = upstream.render(report(commit(1), merge))
    assert "a merge commit: git rebase drops it" in text
    assert "applies on upstream's head" in text.split("change 2")[0]  # commit 1's own line, not the merge's
    assert summary([commit(1), merge], "c" * 40, False).startswith("1 commit(s) still needed, 0 conflict")
