"""`nemo-rl deps upstream`: each downstream commit classified against upstream, on fixture forks built for it."""

from __future__ import annotations

import json
import os

import pytest
from gitfixtures import commit, git

from nemo_rl.cli import main
from nemo_rl.deps import upstream
from nemo_rl.forks.upstream_report import CommitReport, ForkReport

M = "megatron/core"


@pytest.fixture
def scenario(world, capsys):
    """megatron-core's fork gets one downstream commit per case; upstream moves on to match each case."""
    megatron = world.forks["megatron-core"]
    fork, upstream = megatron.fork, megatron.upstream
    # files both sides start from: upstream adds them, the fork rebases its work onto upstream (a linear fork)
    commit(upstream, "shared files", {f"{M}/c.py": "VALUE = 1\n", f"{M}/e.py": "E = 1\n", "tests/test_x.py": "X = 1\n"})
    git(fork, "fetch", "-q", str(upstream), "main")
    git(fork, "rebase", "-q", "FETCH_HEAD")
    picked = commit(fork, "fix: a", {f"{M}/a.py": "A = 2\n"})
    squashed = commit(fork, "fix: b", {f"{M}/b.py": "B = 2\n"})
    conflicting = commit(fork, "fix: c", {f"{M}/c.py": "VALUE = 2\n"})
    clean = commit(fork, "feat: d", {f"{M}/d.py": "D = 1\n"})
    tests_only = commit(fork, "test: x", {"tests/test_x.py": "X = 2\n"})
    deleted = commit(fork, "fix: e", {f"{M}/e.py": "E = 2\n"})
    # upstream: takes `a` by cherry-pick (same diff, a trailer), `b` squash-merged under another subject,
    # changes c's line its own way, deletes e.py
    git(upstream, "fetch", "-q", str(fork), "nemo-rl/main")
    git(upstream, "cherry-pick", "-x", picked)
    commit(upstream, "Squashed: the b fix (#123)", {f"{M}/b.py": "B = 2\n"})
    commit(upstream, "upstream: c its own way", {f"{M}/c.py": "VALUE = 3\n"})
    git(upstream, "rm", "-q", f"{M}/e.py")
    git(upstream, "commit", "-q", "-m", "upstream: drop e")
    head = git(fork, "rev-parse", "HEAD")
    assert main(["deps", "bump", "megatron-core", "--rev", head, "--project", str(world.project)]) == 0
    capsys.readouterr()
    return world, {"picked": picked, "squashed": squashed, "conflicting": conflicting, "clean": clean,
                   "tests_only": tests_only, "deleted": deleted}


def upstream_json(world, capsys) -> dict:
    capsys.readouterr()
    assert main(["deps", "upstream", "megatron-core", "--json", "--project", str(world.project)]) == 0
    (report,) = json.loads(capsys.readouterr().out)["forks"]
    return report


def test_each_downstream_commit_is_classified(scenario, capsys):
    world, shas = scenario
    report = upstream_json(world, capsys)
    rows = {r["commit"]: r for r in report["commits"]}
    assert rows[shas["picked"]]["upstreamed"] == "yes" and rows[shas["picked"]]["upstream_evidence"] == "same patch-id"
    assert rows[shas["squashed"]]["upstreamed"] == "yes"  # another subject, the same diff
    assert rows[shas["conflicting"]]["upstreamed"] == "no"
    assert rows[shas["conflicting"]]["applies"] is False and rows[shas["conflicting"]]["conflicts"] == [f"{M}/c.py"]
    assert rows[shas["clean"]]["applies"] is True and rows[shas["clean"]]["upstreamed"] == "no"
    assert rows[shas["tests_only"]]["shipped"] == []  # the wheel has megatron/ only
    assert rows[shas["clean"]]["shipped"] == [f"{M}/d.py"]
    dropped_e = git(world.forks["megatron-core"].upstream, "rev-parse", "main")  # "upstream: drop e", the last
    assert rows[shas["deleted"]]["gone_upstream"] == [f"{M}/e.py: deleted in {dropped_e[:12]}"]
    assert rows[shas["deleted"]]["applies"] is False
    assert rows[shas["picked"]]["applies"] is None  # upstreamed: not tried again
    assert report["upstream_builds_ours"] is True and report["upstream_distribution"] == "megatron-core"
    assert report["behind_commits"] == 4  # the pick, the squash, c, e
    assert len(rows) == 8  # the fork's two earlier commits and the six above
    assert report["summary"] == "6 commit(s) still needed, 2 conflict on upstream's head; 1 change(s) nothing the " \
                                "distribution ships"


def test_text_report_and_nothing_touched(scenario, capsys):
    world, _ = scenario
    before = world.files()
    assert main(["deps", "upstream", "--project", str(world.project)]) == 0
    out = capsys.readouterr().out
    assert "megatron-core: " in out and "CONFLICTS on upstream's head: megatron/core/c.py" in out
    assert "upstreamed as" in out and "ships nothing" in out and "nemo-toolkit: " in out
    assert world.files() == before


def test_probably_upstreamed_by_subject_and_author(world, capsys):
    megatron = world.forks["megatron-core"]
    mine = commit(megatron.fork, "perf: faster tokens", {f"{M}/tokens.py": "def tokens():\n    return [9]\n"})
    commit(megatron.upstream, "perf: faster tokens", {f"{M}/tokens.py": "def tokens():\n    return [8]\n"})
    assert main(["deps", "bump", "megatron-core", "--rev", mine, "--project", str(world.project)]) == 0
    rows = {r["commit"]: r for r in upstream_json(world, capsys)["commits"]}
    assert rows[mine]["upstreamed"] == "probably" and rows[mine]["upstream_evidence"] == "same subject and author"


def test_every_commit_upstreamed_says_pin_upstream(world, capsys):
    megatron = world.forks["megatron-core"]
    git(megatron.upstream, "fetch", "-q", str(megatron.fork), "nemo-rl/main")
    for sha in megatron.downstream:
        git(megatron.upstream, "cherry-pick", "-x", sha)
    report = upstream_json(world, capsys)
    assert report["summary"].startswith("every downstream commit is upstreamed: pin upstream")


def test_a_fork_that_ships_nothing_of_its_own_is_proved_identical(world, capsys):
    megatron = world.forks["megatron-core"]
    # a fork whose only downstream commits touch files outside the distribution
    git(megatron.fork, "checkout", "-q", "-b", "docs-only", megatron.base)
    head = commit(megatron.fork, "docs: notes", {"docs/notes.md": "notes\n"})
    assert main(["deps", "bump", "megatron-core", "--branch", "docs-only", "--project", str(world.project)]) == 0
    report = upstream_json(world, capsys)
    assert report["identical_to_base"] is True and report["pinned"] == head
    assert report["summary"].startswith("no downstream commit touches a shipped file")


def test_onto_starts_the_rebase_and_leaves_the_project_alone(scenario, capsys, monkeypatch):
    world, shas = scenario
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Maintainer")  # a rebase writes commits: git needs an identity
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "maintainer@fixture.invalid")
    before = world.files()
    assert main(["deps", "develop", "megatron-core", "--onto", "upstream/main", "--project", str(world.project)]) == 1
    out = capsys.readouterr().out
    assert "stopped at a conflict" in out and "rebase --continue" in out
    checkout = world.project / ".nemo-rl/develop/megatron-core"
    assert f"UU {M}/c.py" in git(checkout, "status", "--porcelain")
    assert world.files() == before
    capsys.readouterr()
    main(["deps", "status", "--project", str(world.project)])
    assert "REBASING (stopped at a conflict)" in capsys.readouterr().out
    # upstreamed commits are dropped, not replayed; the rebase stopped at the conflicting one
    state = checkout / ".git" / "rebase-merge"
    done, todo = (state / "done").read_text(), (state / "git-rebase-todo").read_text()
    assert shas["picked"][:7] not in done + todo and shas["squashed"][:7] not in done + todo
    assert done.strip().splitlines()[-1].split()[1].startswith(shas["conflicting"][:7])
    assert git(checkout, "rev-parse", "--abbrev-ref", "HEAD") == "HEAD"  # mid-rebase, as git leaves it


def test_onto_says_why_a_rebase_stopped_without_a_conflict(scenario, tmp_path, monkeypatch, capsys):
    """A pre-rebase hook that refuses: git's reason, not "a conflict", and no `rebase --continue` of a rebase that
    never started."""
    world, _ = scenario
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "pre-rebase").write_text("#!/bin/sh\necho 'rebases wait for the release' >&2\nexit 1\n")
    (hooks / "pre-rebase").chmod(0o755)
    count = int(os.environ.get("GIT_CONFIG_COUNT", "0"))
    for key, value in (("GIT_CONFIG_KEY", "core.hooksPath"), ("GIT_CONFIG_VALUE", str(hooks))):
        monkeypatch.setenv(f"{key}_{count}", value)
    monkeypatch.setenv("GIT_CONFIG_COUNT", str(count + 1))
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, "dev" if key.endswith("NAME") else "dev@nemo-rl.invalid")
    assert main(["deps", "develop", "megatron-core", "--onto", "upstream/main", "--project", str(world.project)]) == 1
    err = capsys.readouterr().err
    assert "refused the rebase, so it did not start" in err and "rebases wait for the release" in err, err
    assert "--continue" not in err and "--abort" not in err, err


def test_a_server_without_some_blobs_still_answers_what_ships(world, capsys, monkeypatch, tmp_path):
    """As a mirror without large files: the wheel's file list is built with placeholders, and the report says so."""
    megatron = world.forks["megatron-core"]
    commit(megatron.upstream, "docs: a large figure", {"docs/figure.bin": "x" * 5000})
    git(megatron.fork, "fetch", "-q", str(megatron.upstream), "main")
    git(megatron.fork, "rebase", "-q", "FETCH_HEAD")
    assert main(["deps", "bump", "megatron-core", "--rev", git(megatron.fork, "rev-parse", "HEAD"),
                 "--project", str(world.project)]) == 0
    blob = git(megatron.fork, "rev-parse", "HEAD:docs/figure.bin")
    for repo in (megatron.fork, megatron.upstream):  # neither server has it any more
        (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    monkeypatch.setenv("NEMO_RL_CACHE_DIR", str(tmp_path / "fresh-cache"))
    report = upstream_json(world, capsys)
    problems = report["problems"]
    assert any("lacks 1 blob(s) of the pinned tree (docs/figure.bin)" in p for p in problems), problems
    assert all(row["shipped"] is not None for row in report["commits"])
    assert report["upstream_distribution"] == "megatron-core"


def bumped(world, capsys, head):
    assert main(["deps", "bump", "megatron-core", "--rev", head, "--project", str(world.project)]) == 0
    return upstream_json(world, capsys)


TOKENS = "def tokens():\n    return [1, 2, 0]\n"


@pytest.mark.parametrize("case, files", [
    ("deleted", {f"{M}/tokens.py": None}),
    ("renamed out of the package", {f"{M}/tokens.py": None, "tools/tokens.py": TOKENS}),
    ("renamed within the package", {f"{M}/tokens.py": None, f"{M}/tok.py": TOKENS}),
])
def test_a_commit_that_removes_a_shipped_module_ships_its_absence(world, capsys, case, files):
    """The base's wheel has megatron/core/tokens.py and the pin's does not: the commit ships something."""
    fork = world.forks["megatron-core"].fork
    git(fork, "checkout", "-q", "-b", "remove", world.forks["megatron-core"].base)
    commit(fork, "add tokens", {f"{M}/tokens.py": TOKENS})
    git(world.forks["megatron-core"].upstream, "fetch", "-q", str(fork), "remove")
    git(world.forks["megatron-core"].upstream, "merge", "-q", "--no-edit", "FETCH_HEAD")  # upstream has it too
    git(fork, "fetch", "-q", str(world.forks["megatron-core"].upstream), "main")
    git(fork, "reset", "-q", "--hard", "FETCH_HEAD")
    for path, text in files.items():
        if text is None:
            git(fork, "rm", "-q", path)
    head = commit(fork, f"refactor: tokens {case}", {p: t for p, t in files.items() if t is not None})
    report = bumped_on(world, capsys, "remove", head)
    (row,) = [r for r in report["commits"] if r["commit"] == head]
    assert f"{M}/tokens.py" in row["shipped"], case
    if case == "renamed within the package":
        assert f"{M}/tok.py" in row["shipped"]
    assert report["identical_to_base"] is False
    assert not report["summary"].startswith("no downstream commit touches a shipped file")


def bumped_on(world, capsys, branch, head):
    assert main(["deps", "bump", "megatron-core", "--branch", branch, "--project", str(world.project)]) == 0
    report = upstream_json(world, capsys)
    assert report["pinned"] == head
    return report


def test_a_rebase_in_order_resolves_each_conflict_and_names_gits_files(world, capsys):
    """Commit 2 conflicts on upstream's head, commit 3 builds on it (a file commit 2 adds, a line commit 2 wrote),
    commit 4 edits a file upstream deleted beside a clean new one: git names c.py, then nothing, then gone.py."""
    megatron = world.forks["megatron-core"]
    fork, upstream = megatron.fork, megatron.upstream
    commit(upstream, "shared", {f"{M}/c.py": "VALUE = 1\n", f"{M}/gone.py": "G = 1\n"})
    git(fork, "fetch", "-q", str(upstream), "main")
    git(fork, "rebase", "-q", "FETCH_HEAD")
    one = commit(fork, "one", {f"{M}/one.py": "ONE = 1\n"})
    two = commit(fork, "two", {f"{M}/c.py": "VALUE = 2\n", f"{M}/new.py": "N = 1\n"})
    three = commit(fork, "three builds on two", {f"{M}/c.py": "VALUE = 2\nMORE = 1\n", f"{M}/new.py": "N = 2\n"})
    four = commit(fork, "four", {f"{M}/gone.py": "G = 2\n", f"{M}/fresh.py": "F = 1\n"})
    commit(upstream, "upstream: c its own way", {f"{M}/c.py": "VALUE = 3\n"})
    git(upstream, "rm", "-q", f"{M}/gone.py")
    git(upstream, "commit", "-q", "-m", "upstream: drop gone")
    report = bumped(world, capsys, four)
    rows = {r["commit"]: r for r in report["commits"]}
    assert rows[one]["applies"] is True
    assert rows[two]["applies"] is False and rows[two]["conflicts"] == [f"{M}/c.py"]
    assert rows[three]["applies"] is True and rows[three]["fails_without_earlier"] is True
    # without commit two, git stops on c.py (commit two's line) and new.py (a file commit two adds)
    assert rows[three]["conflicts_without_earlier"] == [f"{M}/c.py", f"{M}/new.py"]
    assert rows[four]["applies"] is False and rows[four]["conflicts"] == [f"{M}/gone.py"]  # not fresh.py
    assert "2 conflict on upstream's head (1 more fail only when an earlier conflicting commit is left out)" in \
        report["summary"]


def commit_report(number: int, **fields) -> CommitReport:
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
    rows = [commit_report(1),
            commit_report(2, shipped=(), upstreamed="yes", upstream_commit="d" * 40, upstream_evidence="patch-id",
                          applies=None),
            commit_report(3, shipped=None, upstreamed="probably", upstream_commit="e" * 40, upstream_evidence="trailer",
                   applies=False, conflicts=("a.py",), gone_upstream=("b.py (moved by f00)",)),
            commit_report(4, fails_without_earlier=True, conflicts_without_earlier=("a.py", "b.py"))]
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

    merge = commit_report(2, applies=None, merge=True)
    text = upstream.render(report(commit_report(1), merge))
    assert "a merge commit: git rebase drops it" in text
    assert "applies on upstream's head" in text.split("change 2")[0]  # commit 1's own line, not the merge's
    assert summary([commit_report(1), merge], "c" * 40, False).startswith("1 commit(s) still needed, 0 conflict")
