"""Mutate each guarded line once and see its test fail.

    uv run --locked python tests/guards/run_guards.py                # every guard
    uv run --locked python tests/guards/run_guards.py -k digest      # guards whose name contains "digest"
    uv run --locked python tests/guards/run_guards.py --list         # guards, operators and tests; runs nothing

A guarded line carries a marker comment, `# guard: NAME`; tests/guards/guards.toml names, for each NAME, the test
that must fail when the line is mutated, and the operator (`skip` unless it says otherwise):

- skip: a condition (`if`, `elif`, `while`, a comprehension's `if`) becomes False; any other statement does nothing
  (`pass`; a `return` returns None);
- negate: a condition, a returned or an assigned value becomes `not (...)`;
- return: the function returns None just before the line.

On the marked line, the operator takes the condition of an `if`/`while` that starts there, else the first
comprehension filter that starts there, else the innermost statement that starts there.

Each guard's test runs alone, with the mutation, in a copy of the checkout's files (`git ls-files`). Verdicts:
caught (the test fails in its body), survived (it passes), inconclusive (an error outside the body, a skip, a
timeout, no report, or a NameError / UnboundLocalError: the mutation left a name unbound, which proves no check;
tried twice), broken (the test fails without any mutation: every listed test runs once unmutated first), not run
here (it skips without a mutation: a CUDA toolkit, say), not applicable (no marker, or the operator does not fit
the marked line). Results go to a JSON file outside the checkout. Exit 0 only when every selected guard was
caught; 2 when no guard is selected.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tokenize
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIST = Path(__file__).with_name("guards.toml")
MARKER = re.compile(r"#\s*guard:\s*([a-z0-9][a-z0-9-]*)(;|\s*$)")
OPERATORS = ("skip", "negate", "return")
UNBOUND = ("NameError", "UnboundLocalError")
LOCK = "owner.lock"  # held for a run's life: a work directory whose lock is free is a killed run's
# Tests that start Ray or time signals run one at a time, after the rest: two at once slow each other past limits.
ALONE = ("tests/signals/", "tests/workers/test_ray_actors.py")


@dataclass(frozen=True)
class Guard:
    name: str
    test: str
    operator: str = "skip"


class NotApplicable(Exception):
    """The operator does not fit the marked line, or the marker is missing."""


def read_list(path: Path = LIST) -> dict[str, Guard]:
    """guards.toml: `NAME = "TEST"` or `NAME = {test = "TEST", op = "negate"}`."""
    guards = {}
    for name, value in tomllib.loads(path.read_text()).items():
        test, operator = (value, "skip") if isinstance(value, str) else (value["test"], value.get("op", "skip"))
        if operator not in OPERATORS:
            raise ValueError(f"{path}: guard {name!r}: unknown operator {operator!r} (one of {', '.join(OPERATORS)})")
        guards[name] = Guard(name, test, operator)
    return guards


def find_markers(root: Path = ROOT) -> dict[str, tuple[str, int]]:
    """Every `# guard: NAME` under nemo_rl/: NAME -> (path relative to `root`, line). A name used twice is an error."""
    found: dict[str, tuple[str, int]] = {}
    for path in sorted((root / "nemo_rl").rglob("*.py")):
        with path.open() as source:
            comments = [t for t in tokenize.generate_tokens(source.readline) if t.type == tokenize.COMMENT]
        for comment in comments:
            match = MARKER.search(comment.string)
            if match:
                name, where = match.group(1), (str(path.relative_to(root)), comment.start[0])
                if name in found:
                    raise ValueError(f"guard {name!r} is marked twice: {found[name]} and {where}")
                found[name] = where
    return found


def _span(lines: list[str], node: ast.AST) -> tuple[int, int]:
    """Offsets of `node` in the text made of `lines` (kept ends)."""
    start = sum(len(line) for line in lines[: node.lineno - 1]) + _col(lines[node.lineno - 1], node.col_offset)
    last = node.end_lineno or node.lineno
    end = sum(len(line) for line in lines[: last - 1]) + _col(lines[last - 1], node.end_col_offset)
    return start, end


def _col(line: str, utf8_offset: int | None) -> int:
    return len(line.encode()[: utf8_offset or 0].decode())


def mutate(source: str, line: int, operator: str) -> str:
    """`source` with the construct that starts on `line` mutated by `operator`; raises NotApplicable."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    statements = [n for n in ast.walk(tree) if isinstance(n, ast.stmt) and n.lineno == line]
    filters = [f for n in ast.walk(tree) if isinstance(n, ast.comprehension) for f in n.ifs if f.lineno == line]
    statement = min(statements, key=lambda n: n.end_lineno - n.lineno, default=None)
    if statement is None and not filters:
        raise NotApplicable(f"no statement or comprehension filter starts on line {line}")
    condition = (statement.test if isinstance(statement, (ast.If, ast.While)) else filters[0] if filters
                 else None)
    if operator == "return":
        if statement is None:
            raise NotApplicable("`return` needs a statement on the line")
        indent = lines[line - 1][: len(lines[line - 1]) - len(lines[line - 1].lstrip())]
        return _checked("".join(lines[: line - 1]) + f"{indent}return None\n" + "".join(lines[line - 1:]))
    if condition is not None:
        negated = f"not ({ast.get_source_segment(source, condition)})"
        target, text = condition, "False" if operator == "skip" else negated
    elif operator == "skip":
        target, text = statement, "return None" if isinstance(statement, ast.Return) else "pass"
    elif isinstance(statement, (ast.Return, ast.Assign, ast.AnnAssign)) and statement.value is not None:
        target, text = statement.value, f"not ({ast.get_source_segment(source, statement.value)})"
    else:
        raise NotApplicable(f"`{operator}` fits no {type(statement).__name__} statement")
    start, end = _span(lines, target)
    return _checked(source[:start] + text + source[end:])


def _checked(source: str) -> str:
    try:
        compile(source, "<mutated>", "exec")
    except SyntaxError as exc:
        raise NotApplicable(f"the mutated file does not compile: {exc}") from exc
    return source


def verdict(report: str | None, returncode: int | None) -> tuple[str, str]:
    """One run's verdict from pytest's junit-xml report: (caught | survived | inconclusive, why)."""
    if returncode is None:
        return "inconclusive", "timed out"
    if report is None:
        return "inconclusive", f"no report (pytest exit {returncode})"
    cases = list(ET.fromstring(report).iter("testcase"))
    outcomes = [(child.tag, child.get("message", "")) for case in cases for child in case
                if child.tag in ("failure", "error", "skipped")]
    passed = sum(1 for case in cases if not any(c.tag in ("failure", "error", "skipped") for c in case))
    failures = [message for tag, message in outcomes if tag == "failure" and not message.startswith("Failed: Timeout")]
    if failures and failures[0].startswith(UNBOUND):
        return "inconclusive", f"the mutation left a name unbound: {failures[0][:160]}"
    if failures:
        return "caught", failures[0][:160]
    if outcomes:
        tag, message = outcomes[0]
        return "inconclusive", f"{tag}: {message[:160]}"
    if passed <= 0:
        return "inconclusive", "no test ran"
    return "survived", "the test passed"


class Runner:
    """Runs pytest in copies of one snapshot of the checkout; SIGINT/SIGTERM end every run it started."""

    def __init__(self, work: Path, timeout: float, root: Path = ROOT) -> None:
        self.work, self.timeout = work, timeout
        self.snapshot = work / "snapshot"
        for name in _files(root):
            (self.snapshot / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / name, self.snapshot / name, follow_symlinks=False)
        self.running: set[int] = set()
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    def pytest(self, copy: Path, tests: list[str], scratch: Path,
               timeout: float | None = None) -> tuple[str | None, int | None]:
        scratch.mkdir(parents=True, exist_ok=True)
        report = scratch / "junit.xml"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(copy), str(copy / "tests")]),
               "PYTHONPYCACHEPREFIX": str(scratch / "pycache")}  # a mutated file and the original share an mtime
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *tests]
        if self.stopping.is_set():
            return None, None
        proc = subprocess.Popen(argv, cwd=copy, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        with self.lock:
            self.running.add(proc.pid)
        try:
            returncode: int | None = proc.wait(timeout=timeout or self.timeout)
        except subprocess.TimeoutExpired:
            returncode = None
        finally:
            _kill_group(proc.pid)  # what the run left behind (Ray) goes with it
            proc.wait()
            with self.lock:
                self.running.discard(proc.pid)
        return (report.read_text() if report.exists() else None), returncode

    def unmutated(self, tests: list[str]) -> dict[str, str]:
        """Each test that does not pass without any mutation: "broken" (it fails) or "not run here" (it skips)."""
        report, _ = self.pytest(self.snapshot, tests, self.work / "baseline", timeout=max(self.timeout, 3600))
        if report is None:
            return dict.fromkeys(tests, "broken")
        outcome = {}
        for case in ET.fromstring(report).iter("testcase"):
            tags = {child.tag for child in case} & {"failure", "error", "skipped"}
            key = (case.get("classname", "").rsplit(".", 1)[-1], case.get("name"))
            outcome[key] = "passed" if not tags else "not run here" if tags == {"skipped"} else "broken"
        found = {t: outcome.get((Path(t.split("::")[0]).stem, t.split("::")[-1]), "broken") for t in tests}
        return {t: v for t, v in found.items() if v != "passed"}

    def judge(self, guard: Guard, where: tuple[str, int] | None) -> tuple[str, str]:
        if where is None:
            return "not applicable", "no `# guard:` marker in nemo_rl/"
        path, line = where
        try:
            mutated = mutate((self.snapshot / path).read_text(), line, guard.operator)
        except NotApplicable as exc:
            return "not applicable", f"{path}:{line}: {exc}"
        result = ("inconclusive", "")
        for attempt in range(2):
            copy = self.work / f"{guard.name}-{attempt}"
            shutil.copytree(self.snapshot, copy, symlinks=True)
            (copy / path).write_text(mutated)
            result = verdict(*self.pytest(copy, [guard.test], copy / ".guard-run"))
            shutil.rmtree(copy, ignore_errors=True)
            if result[0] != "inconclusive" or self.stopping.is_set():
                break
        return result

    def stop(self, *_: object) -> None:
        self.stopping.set()
        with self.lock:
            for pid in list(self.running):
                _kill_group(pid)


def _files(root: Path) -> list[str]:
    """The checkout's files as git sees them (tracked, and untracked ones it does not ignore); every file below
    `root` where it is no git checkout."""
    if (root / ".git").exists():
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "-co", "--exclude-standard"],
                                capture_output=True, check=True).stdout
        return [name for name in listed.decode().split("\0") if name and (root / name).is_file()]
    return [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()]


def clear_killed_runs(parent: Path) -> None:
    """Remove what runs killed outright left under `parent`: their work directories (their locks are free) and
    the pytest runs still going in them."""
    for work in parent.glob("nemo-rl-guards-*"):
        try:
            fd = os.open(work / LOCK, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue  # not a run's directory, or one still making its lock
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # a live run holds it
        finally:
            os.close(fd)
        for proc in Path("/proc").iterdir():
            with contextlib.suppress(OSError):
                if proc.name.isdigit() and os.readlink(proc / "cwd").startswith(str(work)):
                    os.kill(int(proc.name), signal.SIGKILL)
        shutil.rmtree(work, ignore_errors=True)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def results_path(selected: bool) -> Path:
    """Where a run's verdicts go: a whole run's to results.json, a selection's (-k) to results-selected.json."""
    base = os.environ.get("NEMO_RL_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "nemo-rl")
    return Path(base) / "guards" / ("results-selected.json" if selected else "results.json")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", action="append", default=[], help="only guards whose name contains this (repeatable)")
    parser.add_argument("--jobs", type=int, default=2, help="guards judged at once (default 2)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds one pytest run may take (default 600)")
    parser.add_argument("--list", action="store_true", help="print the guards and run nothing")
    args = parser.parse_args(argv)
    guards = [g for g in read_list().values() if not args.k or any(k in g.name for k in args.k)]
    if not guards:
        print(f"no guard's name holds {' or '.join(map(repr, args.k))}: see --list", file=sys.stderr)
        return 2
    markers = find_markers()
    if args.list:
        for g in guards:
            print(f"{g.name}\t{g.operator}\t{':'.join(map(str, markers.get(g.name, ('no marker', 0))))}\t{g.test}")
        return 0
    started = time.monotonic()
    results: dict[str, dict[str, str]] = {}
    parent = Path(tempfile.gettempdir()).resolve()
    if parent.is_relative_to(ROOT.resolve()):
        print(f"the temporary directory {parent} is inside the checkout: set TMPDIR outside it", file=sys.stderr)
        return 2
    clear_killed_runs(parent)
    with tempfile.TemporaryDirectory(prefix="nemo-rl-guards-", dir=parent) as work:
        held = os.open(Path(work) / LOCK, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        fcntl.flock(held, fcntl.LOCK_EX)
        runner = Runner(Path(work), args.timeout)
        previous = {s: signal.signal(s, runner.stop) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        try:
            unmutated = runner.unmutated(sorted({g.test for g in guards}))

            def one(guard: Guard) -> None:
                began = time.monotonic()
                if guard.test in unmutated:
                    outcome = (unmutated[guard.test], f"{guard.test} does not pass without a mutation")
                else:
                    outcome = runner.judge(guard, markers.get(guard.name))
                if runner.stopping.is_set():
                    return
                why = " ".join(outcome[1].split())
                results[guard.name] = {"verdict": outcome[0], "why": why, "test": guard.test,
                                       "seconds": round(time.monotonic() - began, 1)}
                print(f"{outcome[0]:<15} {guard.name:<44} {why[:160]}", flush=True)

            shared = [g for g in guards if not g.test.startswith(ALONE)]
            with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
                list(pool.map(one, shared))
            for guard in (g for g in guards if g.test.startswith(ALONE)):
                one(guard)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            os.close(held)
    counts: dict[str, int] = {}
    for r in results.values():
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    elapsed = time.monotonic() - started
    summary = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
    print(f"{len(results)} of {len(guards)} guards judged in {elapsed / 60:.1f} min: {summary or 'none'}")
    out = results_path(bool(args.k))
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.{os.getpid()}")
    partial.write_text(json.dumps({"elapsed_s": round(elapsed), "results": results}, indent=1))
    os.replace(partial, out)
    print(f"results: {out}")
    if runner.stopping.is_set():
        return 130
    return 0 if len(results) == len(guards) and counts.get("caught", 0) == len(guards) else 1


if __name__ == "__main__":
    sys.exit(main())
