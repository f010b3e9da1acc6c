"""The verdicts of tests/check_mutations.py, as pure functions of pytest's junit-xml report (tests/
test_check_mutations.py feeds them real ones), and the pytest plugin each of its runs loads
(`-p mutation_verdicts`): stop at the first failing test body, as `-x` does, but go on past errors."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Run:
    """What one pytest run proved: the tests that failed in their own body, how many passed, and, when the run
    proved nothing, why (empty when it is conclusive); `failure` is the first failure's message."""

    failed: tuple[str, ...]
    passed: int
    inconclusive: str
    failure: str = ""


# A test body that fails on a timeout (pytest-timeout's, Ray's, subprocess's, process.run's) says the machine was
# slow, not that the code is wrong.
TIMEOUT_FAILURE = re.compile(r"^[\w.]*Timeout\w*\b|^Failed: Timeout|did not finish within \d")


def _node_id(case: ET.Element) -> str:
    """pytest's node id back from a junit testcase (xunit1: `file` is the test file, `classname` its dotted
    module followed by any classes)."""
    file, classname, name = case.get("file", ""), case.get("classname", ""), case.get("name", "")
    if not file:
        return ".".join(p for p in (classname, name) if p)
    module = file.removesuffix(".py").replace("/", ".")
    classes = classname[len(module) + 1:].split(".") if classname.startswith(module + ".") else []
    return "::".join([file, *classes, name])


def classify(report: str | None, returncode: int | None) -> Run:
    """A run's verdict from its junit-xml report (None: none was written) and pytest's exit status (None: the run
    was killed on its timeout). A pure function."""
    if returncode is None:
        return Run((), 0, "the run timed out")
    try:
        root = ET.fromstring(report) if report is not None else None
    except ET.ParseError as exc:
        return Run((), 0, f"unreadable junit report ({exc}); pytest exit {returncode}")
    if root is None:
        return Run((), 0, f"no junit report: pytest crashed (exit {returncode})")
    failed, failures, timeouts, errors, skipped, passed = [], [], [], [], [], 0
    for case in root.iter("testcase"):
        outcomes = [child for child in case if child.tag in ("failure", "error", "skipped")]
        for child in outcomes:
            message = ((child.get("message") or "").strip().splitlines() or [child.tag])[0]
            if child.tag == "failure" and not TIMEOUT_FAILURE.search(message):
                failed.append(_node_id(case))
                failures.append(message)
            elif child.tag == "failure":
                timeouts.append(f"{_node_id(case)}: {message}")
            elif child.tag == "error":
                errors.append(f"{_node_id(case)}: {message}")
            elif child.get("type") != "pytest.xfail":  # an xfail was meant; a skip may hide the guarding test
                skipped.append(f"{_node_id(case)}: {message}")
        passed += not outcomes
    if failed:
        return Run(tuple(dict.fromkeys(failed)), passed, "", f"{failures[0]:.120}")
    if timeouts:
        return Run((), passed, f"a test failed on a timeout: {timeouts[0]:.300}")
    if errors:
        return Run((), passed, f"{len(errors)} error(s) outside a test body, first {errors[0]:.300}")
    if returncode != 0:
        return Run((), passed, f"pytest exit {returncode} with no failed test")
    if not passed:
        return Run((), 0, "no test ran (all skipped or deselected)")
    if skipped:  # "survived" means every selected test ran and passed
        return Run((), passed, f"{len(skipped)} test(s) skipped, first {skipped[0]:.300}")
    return Run((), passed, "")


def judge(mutated: Run, baseline: Run | None = None, again: Run | None = None) -> tuple[str, str]:
    """(caught | flaky | inconclusive | survived, detail) from the run with the mutation and, when a test failed
    there, that test's runs alone, in the order they are made: `baseline` without the mutation, then `again` with
    it. The confirming run comes last, so a failure that clears with time (a busy machine) reads as flaky."""
    if mutated.inconclusive:
        return "inconclusive", mutated.inconclusive
    if not mutated.failed:
        return "survived", f"{mutated.passed} passed"
    test = mutated.failed[0]
    for run, alone in ((baseline, "without the mutation"), (again, "alone with the mutation")):
        if run is None:
            return "inconclusive", f"{test} failed, and was not run {alone}"
        if run.inconclusive:
            return "inconclusive", f"{test} failed; {alone}, {run.inconclusive}"
        if run is baseline and run.failed:
            return "flaky", f"{test} fails without the mutation too ({run.failure})"
        if run is again and not run.failed:
            return "flaky", f"{test} passes alone with the mutation (it failed with: {mutated.failure})"
    return "caught", f"{test} ({mutated.failure})"


def twice(attempt: Callable[[], tuple[str, str]]) -> tuple[str, str]:
    """An inconclusive attempt is made once more; a second inconclusive one is the answer."""
    outcome, detail = attempt()
    if outcome != "inconclusive":
        return outcome, detail
    outcome, again = attempt()
    return outcome, again if outcome != "inconclusive" else f"twice; last: {again}"


_SESSION = None


def pytest_sessionstart(session) -> None:
    global _SESSION
    _SESSION = session


def pytest_runtest_logreport(report) -> None:
    """As `-x`, but only for a failing test body: a fixture's error is no verdict, so the run goes on."""
    if report.when == "call" and report.failed and _SESSION is not None:
        _SESSION.shouldfail = f"{report.nodeid} failed"
