"""The shared guard of tests/conftest.py (signals_as_found), run on inner pytest sessions with that conftest: a
test that leaves pytest's process taking signals otherwise fails, and the next test finds them as they were."""

from __future__ import annotations

from pathlib import Path

pytest_plugins = ["pytester"]

INNER = '''
import os, signal


def test_a_leaves_sighup_ignored():
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


def test_b_leaves_sighup_blocked():
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGHUP])


def test_c_finds_them_as_they_were():
    assert signal.getsignal(signal.SIGHUP) == signal.SIG_DFL
    assert signal.SIGHUP not in signal.pthread_sigmask(signal.SIG_BLOCK, [])
'''


def test_a_test_that_leaves_signals_changed_fails_and_they_are_put_back(pytester):
    pytester.makeconftest((Path(__file__).parent / "conftest.py").read_text())
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, errors=2)
    out = result.stdout.str()
    assert "the test left pytest's process taking signals otherwise: SIGHUP: <Handlers.SIG_DFL: 0> -> " \
           "<Handlers.SIG_IGN: 1>" in out
    assert "blocked ['SIGHUP'] instead of []" in out
