"""tests/check_mutations.py counts a mutation caught only when a test body fails because of it: its verdicts
(tests/mutation_verdicts.py) on real pytest reports made in-process with pytester, and on runs that leave none."""

import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import check_mutations as cm
import mutation_places as places
import mutation_verdicts as mv
import pytest

pytest_plugins = ["pytester"]
REAL_MACHINE_LOCK_PATH = places.machine_lock_path


@pytest.fixture(autouse=True)
def private_machine(tmp_path, monkeypatch):
    """The runners these tests start hold a machine of their own: a row of a real run that runs these tests holds
    the real one, and a runner inside it waiting for the same lock could wait on that row for ever."""
    monkeypatch.setattr(places, "machine_lock_path", lambda: tmp_path / "machine.lock")


def waiting_copy(tmp_path: Path, pid_file: Path, first: str = "pass") -> Path:
    """A checkout copy with the runner in it and one row's test that runs `first`, starts a child (its pid written
    to `pid_file`) and waits."""
    copy = copy_with(tmp_path, textwrap.dedent(f"""\
        import os, subprocess, time
        from pathlib import Path
        # the mutation point
        def test_waits():
            {first}
            child = subprocess.Popen(["sleep", "300"])
            Path({str(pid_file)!r}).write_text(str(child.pid))
            time.sleep(300)
        """))
    for runner_file in (cm.__file__, places.__file__):
        shutil.copy(Path(runner_file), copy / "tests" / Path(runner_file).name)
    return copy


def started_child(pid_file: Path, runner: subprocess.Popen) -> int:
    """The pid of the inner test's child, once the test has started it (the runner still running)."""
    deadline = time.monotonic() + 120
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline and runner.poll() is None, "the inner test never started"
        time.sleep(0.1)
    return int(pid_file.read_text())


def runner_driver(copy: Path, tmp_path: Path) -> str:
    """A runner over `copy`'s one row `waits`, started as its own process, with a machine of its own."""
    return (f"import sys; sys.path.insert(0, {str(copy / 'tests')!r}); import check_mutations as cm; "
            "import mutation_places as places; "
            f"from pathlib import Path; cm.ROOT = Path({str(copy)!r}); "
            f"places.machine_lock_path = lambda: Path({str(tmp_path / 'machine.lock')!r}); "
            "cm.MUTATIONS = [('waits', 'tests/test_inner.py', '# the mutation point', '# mutated', "
            "'tests/test_inner.py')]; sys.argv = ['check_mutations.py']; sys.exit(cm.main())")

BROKEN_FIXTURE = textwrap.dedent("""\
    import pytest

    @pytest.fixture
    def cluster():
        raise RuntimeError("the Ray cluster did not start")  # what a busy machine does to a fixture

    def test_uses_the_cluster(cluster):
        assert False, "never reached"
    """)
PASSES = "def test_passes():\n    assert 1 + 1 == 2\n"
ASSERTS = "def test_asserts():\n    assert [1, 2] == [1, 2, 0]\n"


def verdict(pytester, *sources: str, args: tuple[str, ...] = ()) -> mv.Run:
    """Run pytest as the runner does (its plugin, a junit report) over `sources`, and classify the run."""
    pytester.makepyfile(test_inner="\n".join(sources))
    report = pytester.path / "report.xml"
    result = pytester.runpytest("-p", "mutation_verdicts", "-p", "no:cacheprovider", f"--junitxml={report}",
                                "-o", "junit_family=xunit1", *args)
    return mv.classify(report.read_text() if report.exists() else None, result.ret)


def test_a_broken_fixture_proves_nothing(pytester):
    run = verdict(pytester, BROKEN_FIXTURE, PASSES)
    assert run.failed == () and run.passed == 1
    assert "test_inner.py::test_uses_the_cluster: failed on setup" in run.inconclusive
    assert "the Ray cluster did not start" in run.inconclusive


def test_a_failing_body_counts_after_a_broken_fixture_too(pytester):
    """The run goes on past an error (unlike -x) and stops at the first failing body."""
    run = verdict(pytester, BROKEN_FIXTURE, ASSERTS, ASSERTS.replace("test_asserts", "test_never_run"))
    assert (run.failed, run.inconclusive) == (("test_inner.py::test_asserts",), "")
    assert run.failure == "assert [1, 2] == [1, 2, 0]"


@pytest.mark.parametrize("body", ["raise KeyError('megatron-core')", "import json; json.loads('{not json')"],
                         ids=["KeyError", "JSONDecodeError"])
def test_an_error_raised_in_the_body_is_a_failure(pytester, body):
    run = verdict(pytester, f"def test_raises():\n    {body}\n")
    assert (run.failed, run.inconclusive) == (("test_inner.py::test_raises",), "")


@pytest.mark.parametrize("source", [
    "import subprocess\ndef test_slow():\n    raise subprocess.TimeoutExpired(['uv', 'sync'], 600)\n",
    "def test_slow():\n    raise TimeoutError('ray.get')\n",
    "import time\ndef test_slow():\n    time.sleep(30)\n",  # pytest-timeout's --timeout below
], ids=["subprocess", "ray.get", "pytest-timeout"])
def test_a_body_that_fails_on_a_timeout_proves_nothing(pytester, source):
    run = verdict(pytester, source, args=("--timeout=0.5",))
    assert run.failed == () and run.inconclusive.startswith("a test failed on a timeout: test_inner.py::test_slow")


def test_a_collection_error_proves_nothing(pytester):
    run = verdict(pytester, "def test_x(:\n    pass\n")
    assert run.failed == () and "collection failure" in run.inconclusive


def test_skips_prove_nothing_and_passes_survive(pytester):
    run = verdict(pytester, "import pytest\n@pytest.mark.skip(reason='no GPU')\ndef test_gpu():\n    pass\n")
    assert run.inconclusive == "no test ran (all skipped or deselected)"
    assert verdict(pytester, PASSES, "def test_also():\n    pass\n") == mv.Run((), 2, "")


def test_a_skipped_test_beside_a_passing_one_proves_nothing(pytester):
    """The test that guards a check may skip here (no CUDA 12 nvcc): one unrelated pass must not read as survived."""
    run = verdict(pytester, PASSES, "import pytest\n@pytest.mark.skip(reason='no nvcc')\ndef test_guard():\n    pass\n")
    assert run.inconclusive and "skipped" in run.inconclusive and "no nvcc" in run.inconclusive


def test_node_ids_of_classes_and_parameters_run_again(pytester):
    """The failing test is run again without the mutation by the node id read back from the report."""
    source = "import pytest\nclass TestIt:\n    @pytest.mark.parametrize('n', [1, 2])\n    def test_n(self, n):\n" \
             "        assert n == 1\n"
    run = verdict(pytester, source)
    assert run.failed == ("test_inner.py::TestIt::test_n[2]",)
    again = pytester.runpytest("-q", "-p", "no:cacheprovider", run.failed[0])
    again.assert_outcomes(failed=1)


def test_a_mutation_is_caught_only_when_its_test_passes_without_it_and_fails_again_alone(pytester):
    failing, passing, broken = verdict(pytester, ASSERTS), verdict(pytester, PASSES), verdict(pytester, BROKEN_FIXTURE)
    assert mv.judge(failing, passing, failing) == ("caught", "test_inner.py::test_asserts (assert [1, 2] == [1, 2, 0])")
    assert mv.judge(failing, failing)[1].startswith("test_inner.py::test_asserts fails without the mutation")
    assert mv.judge(failing, passing, passing)[1].startswith(
        "test_inner.py::test_asserts passes alone with the mutation")
    assert mv.judge(failing, passing)[0] == "inconclusive"  # not run alone with the mutation: no verdict
    assert mv.judge(failing)[0] == "inconclusive"  # not run without the mutation: no verdict
    for baseline, again, said in [(broken, None, "without the mutation, 1 error(s) outside a test body"),
                                  (passing, broken, "alone with the mutation, 1 error(s) outside a test body")]:
        outcome, detail = mv.judge(failing, baseline, again)
        assert outcome == "inconclusive" and said in detail, detail
    assert mv.judge(broken)[0] == "inconclusive"
    assert mv.judge(passing) == ("survived", "1 passed")


@pytest.mark.slow
def test_a_failure_that_clears_with_time_is_flaky_not_caught(tmp_path):
    """A test that fails on its first two runs and passes later (a busy machine that calms down): the runner's
    real runs, in the order it makes them, call it flaky. Were the run without the mutation made last, the
    failure would have cleared by then and the mutation would read as caught."""
    count = tmp_path / "runs"
    copy = copy_with(tmp_path, textwrap.dedent(f"""\
        from pathlib import Path
        RUNS = Path({str(count)!r})
        # the mutation point
        def test_transient():
            runs = int(RUNS.read_text()) + 1 if RUNS.exists() else 1
            RUNS.write_text(str(runs))
            assert runs > 2, f"run {{runs}} of a busy machine"
        """))
    target = copy / "tests" / "test_inner.py"
    mutated = target.read_text().replace("# the mutation point", "# mutated")
    outcome, detail = cm.verdict_of(copy, "tests/test_inner.py", mutated, "tests/test_inner.py", tmp_path / "s", 300)
    assert (outcome, count.read_text()) == ("flaky", "2"), detail
    assert "fails without the mutation too" in detail


def test_an_inconclusive_attempt_is_made_once_more():
    def attempts(*answers):
        calls = []

        def attempt():
            calls.append(1)
            return answers[len(calls) - 1]
        return attempt, calls

    attempt, calls = attempts(("inconclusive", "setup error"), ("caught", "tests/test_x.py::test_y"))
    assert mv.twice(attempt) == ("caught", "tests/test_x.py::test_y") and len(calls) == 2
    attempt, calls = attempts(("inconclusive", "setup error"), ("inconclusive", "timed out"))
    assert mv.twice(attempt) == ("inconclusive", "twice; last: timed out") and len(calls) == 2
    attempt, calls = attempts(("flaky", "tests/test_x.py::test_y fails without the mutation too"))
    assert mv.twice(attempt)[0] == "flaky" and len(calls) == 1


def end_left_over(tmp: Path, pid_file: Path) -> None:
    """What an inner runner that failed its test left running: the pytest runs of its run directories, and the
    group of the inner test's child (found so even where the run carries no mark)."""
    for run in tmp.glob(places.RUN_PREFIX + "*"):
        places.end_work_inside(run)
    try:
        group = os.getpgid(int(pid_file.read_text()))
    except (OSError, ValueError):
        return
    if group not in (0, 1, os.getpgrp()):
        os.killpg(group, signal.SIGKILL)


def copy_with(tmp_path: Path, source: str) -> Path:
    """A checkout copy as the runner makes one: tests/ holding the runner's plugin and one test file."""
    copy = tmp_path / "repo"
    (copy / "tests").mkdir(parents=True)
    shutil.copy(Path(mv.__file__), copy / "tests" / "mutation_verdicts.py")
    (copy / "tests" / "test_inner.py").write_text(source)
    return copy


@pytest.mark.slow
def test_a_run_past_its_timeout_or_a_crash_proves_nothing(tmp_path):
    """Real pytest processes through the runner's own run_pytest: one killed on the run's timeout, one that dies."""
    copy = copy_with(tmp_path, "import time\ndef test_hangs():\n    time.sleep(300)\n")
    started = time.monotonic()
    run = cm.run_pytest(copy, ["tests/test_inner.py"], tmp_path / "scratch", timeout=5)
    assert run == mv.Run((), 0, "the run timed out") and time.monotonic() - started < 60
    (copy / "tests" / "test_inner.py").write_text("import os\ndef test_dies():\n    os.kill(os.getpid(), 9)\n")
    assert cm.run_pytest(copy, ["tests/test_inner.py"], tmp_path / "scratch", timeout=300) == \
        mv.Run((), 0, "no junit report: pytest crashed (exit -9)")
    (copy / "tests" / "test_inner.py").write_text(ASSERTS)
    run = cm.run_pytest(copy, ["tests/test_inner.py"], tmp_path / "scratch", timeout=300)
    assert run.failed == ("tests/test_inner.py::test_asserts",) and run.inconclusive == ""


def test_an_empty_selection_is_no_success(monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["check_mutations.py", "-k", "no check is named this"])
    assert cm.main() == 1
    assert "0 mutation(s): 0 caught, 0 inconclusive, 0 survived, 0 flaky" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_an_interrupted_runner_ends_its_pytest_runs(tmp_path, signum):
    """A cancelled job sends SIGTERM: the runner exits 130 at once and leaves no pytest run (each in a session
    of its own) behind, nor the process that run started."""
    pid_file = tmp_path / "child.pid"
    driver = runner_driver(waiting_copy(tmp_path, pid_file), tmp_path)
    (tmp_path / "tmp").mkdir()
    runner = subprocess.Popen([sys.executable, "-c", driver], stdout=subprocess.PIPE, text=True,
                              start_new_session=True, env={**os.environ, "TMPDIR": str(tmp_path / "tmp")})
    try:
        child = started_child(pid_file, runner)
        runner.send_signal(signum)
        deadline = time.monotonic() + 30
        while runner.poll() is None:
            assert time.monotonic() < deadline, "the runner waited for its pytest run to end by itself"
            time.sleep(0.1)
        assert runner.returncode == 130
        assert "interrupted after 0 of 1 mutation(s)" in runner.stdout.read()
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{child}") and "Z" not in open(f"/proc/{child}/stat").read().split(")")[-1][:3]:
            assert time.monotonic() < deadline, "the pytest run's child outlived the runner"
            time.sleep(0.1)
    finally:
        os.killpg(runner.pid, signal.SIGKILL) if runner.poll() is None else None
        end_left_over(tmp_path / "tmp", pid_file)


@pytest.mark.slow
def test_a_hint_runs_the_killer_first_and_the_selection_only_when_it_passes(tmp_path):
    """The test that caught a mutation last time runs alone first; the whole selection (here a slow test that
    records that it ran) only when the hint no longer fails."""
    ran = tmp_path / "whole selection ran"
    copy = copy_with(tmp_path, textwrap.dedent(f"""\
        from pathlib import Path
        GUARDED = True  # the mutation point
        def test_records_that_the_selection_ran():
            Path({str(ran)!r}).write_text("yes")
        def test_passes_anyway():
            assert True
        def test_guard():
            assert GUARDED
        """))
    target = copy / "tests" / "test_inner.py"
    original = target.read_text()
    mutated = original.replace("GUARDED = True  # the mutation point", "GUARDED = False")
    killer = "tests/test_inner.py::test_guard"
    outcome, detail = cm.verdict_of(copy, "tests/test_inner.py", mutated, "tests/test_inner.py", tmp_path / "s", 300,
                                    first=killer)
    assert (outcome, detail.split(" (")[0], ran.exists()) == ("caught", killer, False)
    target.write_text(original)  # verdict_of leaves its copy mutated: run_one throws the copy away
    outcome, detail = cm.verdict_of(copy, "tests/test_inner.py", mutated, "tests/test_inner.py", tmp_path / "s", 300,
                                    first="tests/test_inner.py::test_passes_anyway")
    assert (outcome, detail.split(" (")[0], ran.exists()) == ("caught", killer, True)


def test_hints_are_kept_per_selection_and_written_as_rows_are_caught(tmp_path, monkeypatch):
    monkeypatch.setattr(cm, "MUTATIONS", [("row", "f.py", "a", "b", "tests/test_x.py"),
                                          ("other", "f.py", "c", "d", "tests/test_y.py")])
    path = tmp_path / "hints.json"
    path.write_text('{"row": {"tests": "tests/test_x.py", "killer": "tests/test_x.py::test_a"}, '
                    '"gone": {"tests": "t", "killer": "k"}, "bad": 3}')
    hints = cm.Hints(path, use=True)
    assert hints.first("row", "tests/test_x.py") == "tests/test_x.py::test_a"
    assert hints.first("row", "tests/test_x.py -k other") is None  # the selection changed: the hint may lie
    assert cm.Hints(path, use=False).first("row", "tests/test_x.py") is None
    hints.caught("other", "tests/test_y.py", "tests/test_y.py::test_b")
    written = json.loads(path.read_text())
    assert written == {"other": {"tests": "tests/test_y.py", "killer": "tests/test_y.py::test_b"},
                       "row": {"tests": "tests/test_x.py", "killer": "tests/test_x.py::test_a"}}  # "gone" dropped


def test_a_mutation_that_does_not_compile_is_not_applied(monkeypatch):
    """A replacement that leaves a line half-cut (its comment's rest behind `if True:`) is a broken row, named."""
    monkeypatch.setattr(cm, "ROOT", Path(cm.__file__).resolve().parent.parent)
    outcome, detail = cm.run_one("nemo_rl/errors.py", "class NemoRLError(Exception):", "class NemoRLError(Exception",
                                 "tests/test_values.py", 60)
    assert (outcome, detail.split(":")[0]) == ("not applied", "the mutated file does not compile"), detail


def test_every_row_applies_once_to_the_code_as_it_is_and_compiles():
    """A row whose text the code no longer holds is "not applied" only when a run reaches it, hours in: every row's
    original text occurs exactly once in its file, and the mutated file still compiles."""
    for name, file, original, mutated, *_ in cm.MUTATIONS:
        text = (cm.ROOT / file).read_text()
        assert text.count(original) == 1, f"{name}: {file} holds its text {text.count(original)} time(s)"
        if file.endswith(".py"):
            compile(text.replace(original, mutated), file, "exec")
    assert len({row[0] for row in cm.MUTATIONS}) == len(cm.MUTATIONS), "two rows share a name"


def test_rows_no_hint_names_run_first(tmp_path):
    """A run cut short (2 cores take hours over the whole list) has judged the rows least known: new, changed and
    never-caught ones before the rows a hint says were caught, each group in list order."""
    path = tmp_path / "hints.json"
    path.write_text('{"b": {"tests": "t_b.py", "killer": "t_b.py::k"}, "d": {"tests": "changed.py", '
                    '"killer": "changed.py::k"}}')
    rows = [(name, "f.py", "x", "y", f"t_{name}.py") for name in "abcd"]
    assert [m[0] for m in cm.run_order(rows, cm.Hints(path, use=True))] == ["a", "c", "d", "b"]
    assert [m[0] for m in cm.run_order(rows, cm.Hints(path, use=False))] == ["a", "b", "c", "d"]


@pytest.mark.slow
def test_a_failing_hint_stands_for_the_selection_and_a_baseline_is_made_once(tmp_path):
    """Two rows caught by one hinted test: the first makes three runs (with the mutation, without it, with it
    again), the second two (the run without the mutation is known)."""
    runs = tmp_path / "runs"
    copy = copy_with(tmp_path, textwrap.dedent(f"""\
        from pathlib import Path
        GUARDED = True  # the mutation point
        def test_guard():
            with open({str(runs)!r}, "a") as f:
                f.write(str(GUARDED)[0])
            assert GUARDED
        """))
    target = copy / "tests" / "test_inner.py"
    original = target.read_text()
    mutated = original.replace("GUARDED = True  # the mutation point", "GUARDED = False")
    killer = "tests/test_inner.py::test_guard"
    baselines = cm.Baselines()
    said = []
    for _ in range(2):
        target.write_text(original)
        said.append(cm.verdict_of(copy, "tests/test_inner.py", mutated, "tests/test_inner.py", tmp_path / "s", 300,
                                  first=killer, baselines=baselines)[0])
    assert (said, runs.read_text()) == (["caught"] * 2, "FTF" + "FF")


@pytest.mark.slow
def test_a_hint_that_fails_only_once_is_flaky_not_caught(tmp_path):
    """A hinted test that fails on its first run only (a busy moment), under a mutation that changes nothing: the
    hint's run is confirmed after the run without the mutation, as a row without a hint is, so the verdict does
    not depend on whether a hint exists."""
    marker = tmp_path / "ran"
    copy = copy_with(tmp_path, textwrap.dedent(f"""\
        from pathlib import Path
        MARK = Path({str(marker)!r})
        # the mutation point
        def test_once():
            first = not MARK.exists()
            MARK.write_text("ran")
            assert not first, "the first run fails"
        """))
    target = copy / "tests" / "test_inner.py"
    mutated = target.read_text().replace("# the mutation point", "# mutated")
    outcome, detail = cm.verdict_of(copy, "tests/test_inner.py", mutated, "tests/test_inner.py", tmp_path / "s", 300,
                                    first="tests/test_inner.py::test_once", baselines=cm.Baselines())
    assert outcome == "flaky" and "passes alone with the mutation" in detail, (outcome, detail)


@pytest.mark.slow
def test_a_hint_that_ran_after_another_test_is_not_its_run_alone(tmp_path):
    """A hint naming a file runs a polluting test before the one that fails: that failure needs the polluter; run
    alone with the (empty) mutation the test passes: flaky, not caught."""
    copy = copy_with(tmp_path, textwrap.dedent("""\
        import os
        # the mutation point
        def test_polluter():
            os.environ["POLLUTED"] = "1"
        def test_victim():
            assert "POLLUTED" not in os.environ
        """))
    target = copy / "tests" / "test_inner.py"
    mutated = target.read_text().replace("# the mutation point", "# mutated")
    outcome, detail = cm.verdict_of(copy, "tests/test_inner.py", mutated, "tests/test_inner.py", tmp_path / "s", 300,
                                    first="tests/test_inner.py", baselines=cm.Baselines())
    assert outcome == "flaky" and "passes alone with the mutation" in detail, (outcome, detail)


def test_an_inconclusive_or_failing_run_without_the_mutation_is_not_kept(tmp_path, monkeypatch):
    answers = [mv.Run((), 0, "the run timed out"), mv.Run(("t",), 0, "", "boom"), mv.Run((), 1, "")]
    calls = []
    monkeypatch.setattr(cm, "run_pytest", lambda copy, selection, scratch, timeout: calls.append(selection)
                        or answers[len(calls) - 1])
    baselines = cm.Baselines()
    said = [baselines.run(tmp_path, "tests/test_x.py::t", tmp_path, 60) for _ in range(4)]
    assert said == answers + [answers[2]] and len(calls) == 3  # only the pass is kept


@pytest.mark.slow
def test_rows_are_judged_on_the_snapshot_taken_at_the_start(tmp_path, monkeypatch):
    """The checkout changes after the snapshot (a merge, a checkout in a second terminal): rows still copy the
    snapshot, so the mutation applies to what the run started with."""
    checkout = copy_with(tmp_path / "checkout", "GUARDED = True  # the mutation point\ndef test_guard():\n"
                                                "    assert GUARDED\n")
    monkeypatch.setattr(cm, "ROOT", checkout)
    snap = cm.snapshot(tmp_path / "snap" / "repo")
    (checkout / "tests" / "test_inner.py").write_text("def test_guard():\n    assert True\n")  # edited meanwhile
    outcome, detail = cm.run_one("tests/test_inner.py", "GUARDED = True  # the mutation point", "GUARDED = False",
                                 "tests/test_inner.py", 300, source=snap)
    assert (outcome, detail.split(" (")[0]) == ("caught", "tests/test_inner.py::test_guard"), detail


def test_a_hint_is_usable_only_as_a_test_of_the_rows_own_files(tmp_path):
    tests = "tests/test_x.py -k fast"
    assert cm.usable_hint("tests/test_x.py::test_a[1-2]", tests) and cm.usable_hint("tests/test_x.py::C::t", tests)
    for killer in ("--basetemp=/tmp/victim", "tests/test_x.py", "tests/test_y.py::test_a", "-k", "tests/test_x.py::",
                   "fast::x", "tests/test_x.py::t\x00", "-tests/test_x.py::t"):
        assert not cm.usable_hint(killer, tests), killer
    one = "tests/test_x.py::test_a"  # a selection that is a node id: the hint is that test, or one of its cases
    assert cm.usable_hint(one, one) and cm.usable_hint(one + "[2]", one) and cm.usable_hint(one + "::case", one)
    assert not cm.usable_hint("tests/test_x.py::test_ab", one) and not cm.usable_hint("tests/test_x.py::test_b", one)
    path = tmp_path / "hints.json"
    path.write_text(json.dumps({"row": {"tests": tests, "killer": "--basetemp=/tmp/victim"},
                                "ok": {"tests": tests, "killer": "tests/test_x.py::test_a"}}))
    hints = cm.Hints(path, use=True)
    assert (hints.first("row", tests), hints.first("ok", tests)) == (None, "tests/test_x.py::test_a")


def test_a_second_runner_s_hints_are_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(cm, "MUTATIONS", [("row", "f.py", "a", "b", "tests/test_x.py"),
                                          ("other", "f.py", "c", "d", "tests/test_y.py")])
    path = tmp_path / "hints.json"
    first, second = cm.Hints(path, use=True), cm.Hints(path, use=True)  # two terminals, each read the file
    first.caught("row", "tests/test_x.py", "tests/test_x.py::test_a")
    second.caught("other", "tests/test_y.py", "tests/test_y.py::test_b")
    assert set(json.loads(path.read_text())) == {"row", "other"}
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".hints.json.") and "lock" not in p.name] == []


def test_a_hint_that_cannot_be_written_costs_only_the_hint(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cm, "MUTATIONS", [("row", "f.py", "a", "b", "tests/test_x.py")])
    (tmp_path / "a-file").write_text("")
    hints = cm.Hints(tmp_path / "a-file" / "hints.json", use=True)  # its directory is a file
    hints.caught("row", "tests/test_x.py", "tests/test_x.py::test_a")
    assert hints.first("row", "tests/test_x.py") == "tests/test_x.py::test_a"
    assert "warning: the hint for 'row' was not recorded" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["link", "fifo", "not json", "too large"])
def test_a_hints_file_that_is_not_hints_is_left_alone(tmp_path, monkeypatch, capsys, kind):
    monkeypatch.setattr(cm, "MUTATIONS", [("row", "f.py", "a", "b", "tests/test_x.py")])
    path, elsewhere = tmp_path / "hints.json", tmp_path / "elsewhere.json"
    elsewhere.write_text('{"row": {"tests": "tests/test_x.py", "killer": "tests/test_x.py::test_a"}}')
    if kind == "link":
        path.symlink_to(elsewhere)
    elif kind == "fifo":
        os.mkfifo(path)  # opened without blocking: the runner neither hangs nor reads it
    else:
        path.write_text("{not json" if kind == "not json" else " " * (cm.HINTS_LIMIT + 1) + "{}")
    before = os.lstat(path)
    hints = cm.Hints(path, use=True)
    assert hints.first("row", "tests/test_x.py") is None
    hints.caught("row", "tests/test_x.py", "tests/test_x.py::test_b")
    after = os.lstat(path)
    assert (after.st_ino, after.st_size, after.st_mode) == (before.st_ino, before.st_size, before.st_mode)
    assert "is not a plain file of hints" in capsys.readouterr().err
    assert "test_a" in elsewhere.read_text()


def test_main_judges_every_row_on_one_snapshot_and_removes_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    checkout = tmp_path / "checkout"
    (checkout / "tests").mkdir(parents=True)
    (checkout / "tests" / "test_x.py").write_text("")
    monkeypatch.setattr(cm, "ROOT", checkout)
    monkeypatch.setattr(cm, "HINTS", tmp_path / "hints.json")
    monkeypatch.setattr(cm, "MUTATIONS", [(f"row {n}", "tests/test_x.py", "a", "b", "tests/test_x.py") for n in "12"])
    sources = []

    def judged(file, original, mutated, tests, timeout, first=None, baselines=None, source=None, under=None):
        sources.append(source)
        assert source is not None and source != checkout and (source / "tests" / "test_x.py").exists()
        assert under is not None and under.name.startswith(places.RUN_PREFIX) and source.is_relative_to(under)
        return "survived", "1 passed"

    monkeypatch.setattr(cm, "run_one", judged)
    monkeypatch.setattr(sys, "argv", ["check_mutations.py", "-k", "row"])
    assert cm.main() == 1
    assert len(sources) == 2 and sources[0] == sources[1] and not sources[0].exists()
    assert [p.name for p in (tmp_path / "tmp").iterdir() if p.name.startswith(places.RUN_PREFIX)] == []
    assert "2 mutation(s): 0 caught, 0 inconclusive, 2 survived" in capsys.readouterr().out


@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_a_hints_lock_that_is_not_a_plain_file_is_never_opened(tmp_path, monkeypatch, capsys, kind):
    """A link planted at the lock would have the runner create or write another file; a FIFO would have an open for
    writing wait for ever. Either costs the hint only."""
    monkeypatch.setattr(cm, "MUTATIONS", [("row", "f.py", "a", "b", "tests/test_x.py")])
    path, lock, elsewhere = tmp_path / "hints.json", tmp_path / ".hints.json.lock", tmp_path / "elsewhere"
    lock.symlink_to(elsewhere) if kind == "link" else os.mkfifo(lock)
    writer = threading.Thread(target=cm.Hints(path, use=True).caught,
                              args=("row", "tests/test_x.py", "tests/test_x.py::test_a"), daemon=True)
    writer.start()
    writer.join(timeout=20)
    if writer.is_alive():
        os.close(os.open(lock, os.O_RDONLY | os.O_NONBLOCK))  # lets the waiting open go on
        pytest.fail("the hint's write waited on the FIFO at its lock")
    assert not elsewhere.exists() and not path.exists()
    assert "warning: the hint for 'row' was not recorded" in capsys.readouterr().err


def test_an_abandoned_run_directory_is_removed_and_its_work_ended(tmp_path):
    """A runner killed with SIGKILL leaves its copies and the pytest runs it started: the next runner ends those
    (by the directory they carry, even one that left it) and removes the directory; a live runner's directory and
    runs, a run of a directory whose name only starts the same, and a shell standing in the dead directory stay."""
    live, held = places.claim_run_dir(tmp_path)
    dead, lost = places.claim_run_dir(tmp_path)
    os.close(lost)  # its runner was killed: the lock went with it
    beside = Path(f"{dead}-beside")  # its name starts with the dead one's
    beside.mkdir()

    def started(cwd: Path, run: Path | None) -> subprocess.Popen:
        env = {**os.environ, places.MARK: places.mark(run)} if run else {k: v for k, v in os.environ.items()
                                                                          if k != places.MARK}
        return subprocess.Popen(["sleep", "300"], cwd=cwd, env=env, start_new_session=True)

    procs = {"dead's run": started(tmp_path, dead), "live run": started(live, live),
             "beside's run": started(beside, beside), "a shell in the dead one": started(dead, None)}
    try:
        assert places.clear_abandoned(tmp_path) == [dead]
        assert not dead.exists() and live.exists() and beside.exists()
        deadline = time.monotonic() + 10
        while procs["dead's run"].poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert procs["dead's run"].returncode == -signal.SIGKILL, "what the killed runner started still runs"
        time.sleep(0.5)  # a SIGKILL sent in the same sweep to another group would have ended it by now
        assert [name for name, proc in procs.items() if proc.poll() is not None] == ["dead's run"]
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()
        places.release_run_dir(live, held)
    assert not live.exists()


def test_a_directory_left_while_it_was_being_made_is_removed_once_old(tmp_path):
    young = Path(tempfile.mkdtemp(prefix=places.MAKING_PREFIX, dir=tmp_path))
    (young / places.OWNER).write_text("")  # made, not locked yet: its runner is about to
    old = Path(tempfile.mkdtemp(prefix=places.MAKING_PREFIX, dir=tmp_path))
    long_ago = time.time() - places.UNOWNED_GRACE_S - 1
    os.utime(old, (long_ago, long_ago))
    assert places.clear_abandoned(tmp_path) == [old] and young.exists()


@pytest.mark.slow
def test_a_runner_killed_outright_is_cleaned_up_by_the_next(tmp_path):
    """SIGKILL to the runner alone: its pytest run (a session of its own) goes on; the next runner's start ends it,
    and what it started, and removes the run's directory."""
    pid_file = tmp_path / "child.pid"
    left = 'os.chdir("/")  # a test that left the run\'s directory'
    driver = runner_driver(waiting_copy(tmp_path, pid_file, first=left), tmp_path)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    runner = subprocess.Popen([sys.executable, "-c", driver], stdout=subprocess.DEVNULL,
                              env={**os.environ, "TMPDIR": str(tmp)})
    try:
        child = started_child(pid_file, runner)
        runner.kill()
        runner.wait()
        assert os.path.exists(f"/proc/{child}")  # left running, as a killed runner leaves it
        assert [p.name.startswith(places.RUN_PREFIX) for p in tmp.iterdir()] == [True]
        places.clear_abandoned(tmp)
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{child}") and "Z" not in open(f"/proc/{child}/stat").read().split(")")[-1][:3]:
            assert time.monotonic() < deadline, "the killed runner's pytest run still runs"
            time.sleep(0.1)
        assert list(tmp.iterdir()) == []
    finally:
        runner.kill()
        runner.wait()
        end_left_over(tmp, pid_file)


def test_alone_rows_hold_the_machine_against_other_runners(tmp_path, monkeypatch):
    import fcntl

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    path = tmp_path / "machine.lock"
    with places.machine_share(alone=True, path=path):
        other = os.open(path, os.O_RDWR)  # another runner's row
        with pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_SH | fcntl.LOCK_NB)
    with places.machine_share(alone=False, path=path):
        fcntl.flock(other, fcntl.LOCK_SH | fcntl.LOCK_NB)  # shared rows run side by side
        fcntl.flock(other, fcntl.LOCK_UN)
        with pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # each row's hold ends with it
    os.close(other)
    assert REAL_MACHINE_LOCK_PATH().parent == Path("/tmp")  # one machine, whatever TMPDIR says


def in_thread(target) -> tuple[threading.Thread, list]:
    said: list = []

    def body():
        try:
            said.append(target())
        except BaseException as exc:
            said.append(exc)
    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, said


def test_a_row_waiting_for_the_machine_keeps_new_rows_out_and_ends_on_an_interrupt(tmp_path):
    """Another runner's shared rows keep coming (--jobs 2): an alone row waiting behind them holds the gate, so a
    new shared row waits after it, not before; an interrupt ends both waits."""
    import fcntl

    path = tmp_path / "machine.lock"
    going_on = os.open(path, os.O_RDWR | os.O_CREAT)
    fcntl.flock(going_on, fcntl.LOCK_SH)  # a shared row of another runner
    entered = []

    def row(name, alone):
        def body():
            with places.machine_share(alone=alone, path=path):
                entered.append(name)
                time.sleep(0.3)
        return body
    try:
        alone, _ = in_thread(row("alone", True))
        time.sleep(1)
        shared, _ = in_thread(row("shared", False))
        time.sleep(1)
        assert entered == []  # the new shared row does not pass the waiting alone row
        fcntl.flock(going_on, fcntl.LOCK_UN)
        alone.join(10)
        shared.join(10)
        assert entered == ["alone", "shared"]
        fcntl.flock(going_on, fcntl.LOCK_EX)  # now a row that holds the machine for ever
        waiting, said = in_thread(row("never", False))
        time.sleep(0.5)
        places.STOPPING.set()
        waiting.join(5)
        assert not waiting.is_alive() and isinstance(said[0], places.Stopped), said
    finally:
        places.STOPPING.clear()
        os.close(going_on)


def test_an_ignored_sigint_is_taken_back_and_an_ignored_sighup_kept(tmp_path, monkeypatch, capsys):
    """Started with `&` from a script, the runner inherits SIGINT ignored: `kill -INT` must still end it. Under
    `nohup`, SIGHUP stays ignored: that is what nohup asked for."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr("sys.argv", ["check_mutations.py", "-k", "no check is named this"])
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    during = {}
    pool = concurrent.futures.ThreadPoolExecutor

    def seen(*args):  # the rows' pool starts once the runner's handlers are set
        during.update({signum: signal.getsignal(signum) for signum in previous})
        return pool(*args)

    monkeypatch.setattr(concurrent.futures, "ThreadPoolExecutor", seen)
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        cm.main()
        assert during[signal.SIGINT] is signal.default_int_handler
        assert during[signal.SIGHUP] == signal.SIG_IGN
        # and back as the caller had them
        assert [signal.getsignal(s) for s in previous] == [signal.SIG_IGN, previous[signal.SIGTERM], signal.SIG_IGN]
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def test_an_interrupt_before_any_verdict_says_nothing_was_judged(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(cm, "HINTS", tmp_path / "hints.json")
    monkeypatch.setattr(cm, "MUTATIONS", [("row", "tests/test_x.py", "a", "b", "tests/test_x.py")])

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cm, "run_one", interrupted)
    monkeypatch.setattr("sys.argv", ["check_mutations.py", "-k", "row"])
    before = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)]
    assert cm.main() == 130
    # the cleanup ignores further signals; left so in pytest's process, every later test's children inherited
    # SIGHUP ignored and the interruption tests waited for bumps that never ended
    assert [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)] == before
    assert "interrupted after 0 of 1 mutation(s): nothing judged" in capsys.readouterr().out
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(places.RUN_PREFIX)] == []


def test_a_signal_while_the_dispositions_are_put_back_meets_the_callers_handler(monkeypatch):
    """A SIGTERM arriving just after SIGINT is put back, while SIGTERM is still the runner's: it waits until all
    three are the caller's, then reaches the caller's handler; nothing raises out of the restore."""
    received: list[int] = []
    previous = {s: signal.getsignal(s) for s in cm.CAUGHT_SIGNALS}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])

    def recording(signum, frame):
        received.append(signum)

    def runner_sets_its_handlers() -> int:
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, cm._interrupted)
        return 0

    real_signal = signal.signal

    def signal_then_sigterm(signum, handler):
        done = real_signal(signum, handler)
        if signum == signal.SIGINT and handler is previous[signal.SIGINT]:
            os.kill(os.getpid(), signal.SIGTERM)
        return done

    real_signal(signal.SIGTERM, recording)
    try:
        callers = {s: signal.getsignal(s) for s in cm.CAUGHT_SIGNALS}
        monkeypatch.setattr(cm, "_main", runner_sets_its_handlers)
        monkeypatch.setattr(signal, "signal", signal_then_sigterm)
        try:
            returned = cm.main()
        except KeyboardInterrupt:
            pytest.fail("the SIGTERM was taken by the runner's handler, in the middle of the restore")
        finally:
            monkeypatch.setattr(signal, "signal", real_signal)
        # delivered once unblocked, to whichever thread of this process the kernel picks: the handler itself runs
        # in the main thread at its next check, which may come a little after main() returned
        deadline = time.monotonic() + 5
        while not received and time.monotonic() < deadline:
            time.sleep(0.01)
        assert returned == 0 and received == [signal.SIGTERM]
        assert {s: signal.getsignal(s) for s in cm.CAUGHT_SIGNALS} == callers
        assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == mask
    finally:
        real_signal(signal.SIGTERM, recording)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a SIGTERM still pending meets `recording`
        for signum, handler in previous.items():
            real_signal(signum, handler)


def test_a_signal_just_before_the_block_still_puts_the_dispositions_back(monkeypatch):
    """A job cancelled as the run ends: the SIGTERM lands before the signals are blocked and the runner's handler
    raises there. The KeyboardInterrupt goes on to the caller, with the caller's dispositions and mask back."""
    previous = {s: signal.getsignal(s) for s in cm.CAUGHT_SIGNALS}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])

    def runner_sets_its_handlers() -> int:
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, cm._interrupted)
        return 0

    real_mask, fired = signal.pthread_sigmask, []

    def sigterm_before_the_block(how, signals):
        if how == signal.SIG_BLOCK and tuple(signals) == cm.CAUGHT_SIGNALS and not fired:
            fired.append(how)
            os.kill(os.getpid(), signal.SIGTERM)  # delivered here, to the runner's handler, which raises
        return real_mask(how, signals)

    try:
        monkeypatch.setattr(cm, "_main", runner_sets_its_handlers)
        monkeypatch.setattr(signal, "pthread_sigmask", sigterm_before_the_block)
        with pytest.raises(KeyboardInterrupt):
            cm.main()
        monkeypatch.setattr(signal, "pthread_sigmask", real_mask)
        assert fired and {s: signal.getsignal(s) for s in cm.CAUGHT_SIGNALS} == previous
        assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == mask
    finally:
        signal.pthread_sigmask = real_mask
        real_mask(signal.SIG_SETMASK, mask)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def test_a_claim_whose_directory_was_cleared_away_meanwhile_claims_again(tmp_path, monkeypatch):
    """A runner stopped (Ctrl-Z) past the grace between making its directory and naming it: another runner removed
    the directory meanwhile; the claim starts over instead of a traceback."""
    real_rename, calls = os.rename, []

    def cleared_first(source, target):
        calls.append(source)
        if len(calls) == 1:
            shutil.rmtree(source)
        return real_rename(source, target)

    monkeypatch.setattr(places.os, "rename", cleared_first)
    where, fd = places.claim_run_dir(tmp_path)
    try:
        assert len(calls) == 2 and where.is_dir() and (where / places.OWNER).exists()
    finally:
        places.release_run_dir(where, fd)
