"""The guard run's rules: where a marker is, what each operator does to a line, and the verdict of a report."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import textwrap

import pytest
import run_guards as guards

SOURCE = textwrap.dedent('''\
    def f(x, ys):
        if x > 1 and \\
                x < 3:
            raise ValueError("x")
        z = [y for y in ys
             if y != x]
        ok = x == 2
        print("é", x)
        for y in ys:
            pass
        return ok and z
    ''')


@pytest.mark.parametrize(("line", "operator", "expected"), [
    (2, "skip", "    if False:\n        raise"),
    (2, "negate", "    if not (x > 1 and \\\n            x < 3):"),
    (4, "skip", "        pass\n    z ="),
    (6, "skip", "         if False]"),
    (6, "negate", "         if not (y != x)]"),
    (7, "negate", "    ok = not (x == 2)"),
    (8, "skip", "    pass\n    for"),
    (9, "skip", "    pass\n    return ok and z"),
    (11, "skip", "    return None\n"),
    (11, "negate", "    return not (ok and z)\n"),
    (8, "return", "    return None\n    print("),
])
def test_each_operator_mutates_the_construct_that_starts_on_the_marked_line(line, operator, expected):
    mutated = guards.mutate(SOURCE, line, operator)
    assert expected in mutated and mutated != SOURCE
    compile(mutated, "<mutated>", "exec")


@pytest.mark.parametrize(("line", "operator"), [(3, "skip"), (8, "negate"), (9, "negate"), (12, "skip")])
def test_an_operator_that_fits_nothing_on_the_line_is_not_applicable(line, operator):
    with pytest.raises(guards.NotApplicable):
        guards.mutate(SOURCE, line, operator)


def test_markers_are_found_with_or_without_a_comment_after_them(tmp_path):
    (tmp_path / "nemo_rl" / "sub").mkdir(parents=True)
    (tmp_path / "nemo_rl" / "sub" / "m.py").write_text(
        "a = 1  # guard: first\nb = 2  # guard: second; why it matters\nc = 3  # guards: none here\n"
        'd = """\n# guard: in-a-string\n"""\n')
    assert guards.find_markers(tmp_path) == {"first": ("nemo_rl/sub/m.py", 1), "second": ("nemo_rl/sub/m.py", 2)}
    (tmp_path / "nemo_rl" / "n.py").write_text("d = 4  # guard: first\n")
    with pytest.raises(ValueError, match="marked twice"):
        guards.find_markers(tmp_path)


def test_the_list_takes_a_test_or_a_test_and_an_operator_and_refuses_other_operators(tmp_path):
    listed = tmp_path / "guards.toml"
    listed.write_text('a = "tests/t.py::test_a"\nb = { test = "tests/t.py::test_b", op = "negate" }\n')
    assert guards.read_list(listed) == {"a": guards.Guard("a", "tests/t.py::test_a"),
                                        "b": guards.Guard("b", "tests/t.py::test_b", "negate")}
    listed.write_text('a = { test = "tests/t.py::test_a", op = "delete" }\n')
    with pytest.raises(ValueError, match="unknown operator 'delete'"):
        guards.read_list(listed)


def test_every_marker_is_listed_and_every_listed_guard_names_a_test_that_exists():
    listed, markers = guards.read_list(), guards.find_markers()
    assert sorted(set(listed) ^ set(markers)) == []
    missing = []
    for guard in listed.values():
        file, _, name = guard.test.partition("::")
        path = guards.ROOT / file
        if not path.is_file() or f"def {name.split('[')[0]}(" not in path.read_text():
            missing.append(guard.test)
    assert missing == []


CASES = textwrap.dedent('''\
    import pytest

    @pytest.fixture
    def broken():
        raise RuntimeError("fixture")

    def test_fails():
        assert 1 == 2

    def test_passes():
        pass

    def test_errors(broken):
        pass

    def test_skips():
        pytest.skip("no")
    ''')


@pytest.mark.parametrize(("test", "expected"), [
    ("test_fails", "caught"), ("test_passes", "survived"), ("test_errors", "inconclusive"),
    ("test_skips", "inconclusive"), ("test_absent", "inconclusive"),
])
def test_a_verdict_comes_from_pytests_own_report(tmp_path, test, expected):
    (tmp_path / "test_cases.py").write_text(CASES)
    report = tmp_path / "report.xml"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
                           f"test_cases.py::{test}"], cwd=tmp_path, capture_output=True)
    assert guards.verdict(report.read_text() if report.exists() else None, done.returncode)[0] == expected


def test_a_run_that_timed_out_or_left_no_report_is_inconclusive():
    assert guards.verdict("<testsuites/>", None)[0] == "inconclusive"
    assert guards.verdict(None, 3) == ("inconclusive", "no report (pytest exit 3)")


def test_a_failure_that_only_says_a_name_is_unbound_proves_no_check():
    report = ('<testsuites><testsuite><testcase classname="t" name="test_x"><failure message="NameError: name '
              "'text' is not defined\"/></testcase></testsuite></testsuites>")
    assert guards.verdict(report, 1)[0] == "inconclusive"
    assert guards.verdict(report.replace("NameError", "AssertionError"), 1)[0] == "caught"


def test_an_empty_selection_runs_nothing_and_is_no_success(capsys):
    assert guards.main(["-k", "no-guard-is-named-so"]) == 2
    assert "no guard's name holds 'no-guard-is-named-so'" in capsys.readouterr().err


def test_a_temporary_directory_inside_the_checkout_is_refused(monkeypatch, capsys):
    monkeypatch.setattr(guards.tempfile, "gettempdir", lambda: str(guards.ROOT / "tests"))
    assert guards.main(["-k", "a"]) == 2
    assert "inside the checkout" in capsys.readouterr().err


def test_what_a_run_killed_outright_left_is_removed_and_a_live_runs_directory_kept(tmp_path):
    killed, live = tmp_path / "nemo-rl-guards-killed", tmp_path / "nemo-rl-guards-live"
    for work in (killed, live):
        (work / "snapshot").mkdir(parents=True)
        (work / guards.LOCK).touch()
    held = os.open(live / guards.LOCK, os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_EX)
    left = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], cwd=killed / "snapshot")
    try:
        guards.clear_killed_runs(tmp_path)
        assert left.wait(timeout=10) == -signal.SIGKILL
        assert not killed.exists() and live.is_dir()
    finally:
        left.kill()
        os.close(held)


TINY_CODE = textwrap.dedent('''\
    def check(value):
        if not value:  # guard: tiny-value-required
            raise ValueError("empty")
        name = value.strip()  # guard: tiny-unbound
        return name
    ''')
TINY_TEST = textwrap.dedent('''\
    import pytest

    from nemo_rl.tiny import check

    def test_an_empty_value_is_refused():
        with pytest.raises(ValueError):
            check("")

    def test_a_value_is_kept():
        assert check(" a ") == "a"

    def test_unrelated():
        assert check("b") == "b"

    def test_broken():
        assert check("c") == "d"

    def test_skipped():
        pytest.skip("needs what this machine lacks")
    ''')


def test_a_guard_is_caught_by_its_test_and_survives_a_test_that_does_not_reach_it(tmp_path):
    checkout = tmp_path / "checkout"
    (checkout / "nemo_rl").mkdir(parents=True)
    (checkout / "tests").mkdir()
    (checkout / "nemo_rl" / "__init__.py").write_text("")
    (checkout / "nemo_rl" / "tiny.py").write_text(TINY_CODE)
    (checkout / "tests" / "test_tiny.py").write_text(TINY_TEST)
    markers = guards.find_markers(checkout)
    runner = guards.Runner(tmp_path / "work", timeout=120, root=checkout)
    refused = "tests/test_tiny.py::test_an_empty_value_is_refused"
    assert runner.judge(guards.Guard("tiny-value-required", refused), markers["tiny-value-required"])[0] == "caught"
    assert runner.judge(guards.Guard("tiny-value-required", "tests/test_tiny.py::test_unrelated"),
                        markers["tiny-value-required"])[0] == "survived"
    unbound = runner.judge(guards.Guard("tiny-unbound", "tests/test_tiny.py::test_a_value_is_kept"),
                           markers["tiny-unbound"])
    assert unbound[0] == "inconclusive" and "unbound" in unbound[1]
    assert runner.judge(guards.Guard("tiny-unbound", "tests/test_tiny.py::test_a_value_is_kept", "negate"),
                        markers["tiny-unbound"])[0] == "caught"
    assert runner.judge(guards.Guard("tiny-value-required", refused), None)[0] == "not applicable"
    assert runner.unmutated([refused, "tests/test_tiny.py::test_broken", "tests/test_tiny.py::test_skipped"]) == {
        "tests/test_tiny.py::test_broken": "broken", "tests/test_tiny.py::test_skipped": "not run here"}
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["baseline", "snapshot"]
