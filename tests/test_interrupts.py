"""Signals always end a command, at once, and say what happened (nemo_rl/interrupt.py, nemo_rl/process.py).

The stress test at the bottom sends SIGINT, SIGTERM and SIGHUP at random moments into real fixture bumps and dry
runs. CI runs a handful; `NEMO_RL_STRESS_SIGNALS=200 uv run --locked pytest -s tests/test_interrupts.py -k stress`
runs as many as asked and prints a table.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import forkworld
import pytest
from gitfixtures import commit

from nemo_rl import interrupt
from nemo_rl.cli import main
from nemo_rl.project import landing, lockfile

CODES = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}


@pytest.fixture(autouse=True)
def no_signal_left():
    interrupt.reset()
    yield
    interrupt.reset()


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for_file(path: Path, proc: subprocess.Popen, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().strip()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    return path.read_text().strip()


def run_script(body: str, *args: str) -> subprocess.Popen:
    """`body` under the console script's handler; an Interrupted that reaches the top exits 128+N as nemo-rl does."""
    script = textwrap.dedent("""
        import sys
        from nemo_rl import interrupt
        interrupt.install()
        from nemo_rl.errors import Interrupted
        try:
        {body}
        except Interrupted as exc:
            sys.exit(128 + exc.signum)
    """).format(body=textwrap.indent(textwrap.dedent(body), "    "))
    return subprocess.Popen([sys.executable, "-c", script, *args], stderr=subprocess.PIPE, text=True)


def test_a_signal_while_a_child_runs_ends_its_whole_group(tmp_path):
    """The handler only records the signal; the wait notices it, ends the child's group (a grandchild too) and
    unwinds."""
    pid_file = tmp_path / "grandchild.pid"
    proc = run_script("""
        from nemo_rl.process import run
        run(["sh", "-c", "sleep 60 & echo $! > " + sys.argv[1] + "; wait"])
    """, str(pid_file))
    grandchild = int(wait_for_file(pid_file, proc))
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 143, proc.stderr.read()
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild), "the child's group outlived the interruption"


def test_input_reaches_a_child_that_reads_it_late():
    """The wait looks at the flag between slices of communicate(): the input is handed over once, and whole."""
    from nemo_rl.process import run

    text = "line\n" * 50_000  # more than a pipe holds
    assert run(["sh", "-c", "sleep 0.5; cat"], input_text=text).stdout == text


def test_a_signal_while_waiting_for_a_lock_ends_the_wait(tmp_path):
    """A blocking flock would be resumed after the handler and wait forever: the wait polls the flag."""
    held = tmp_path / "held"
    held.mkdir()
    fd = os.open(held, os.O_RDONLY | os.O_DIRECTORY)
    import fcntl

    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        ready = tmp_path / "ready"
        proc = run_script("""
            import os
            from pathlib import Path
            from nemo_rl import locks
            fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
            locks.acquire(fd, lambda: (Path(sys.argv[2]).write_text("waiting"), "waiting")[1])
        """, str(held), str(ready))
        wait_for_file(ready, proc)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 130, proc.stderr.read()
    finally:
        os.close(fd)


def test_a_signal_before_the_verb_runs_stops_it(tmp_path, capsys):
    """A Ctrl-C while nemo-rl is still importing its verbs: the command does not start."""
    interrupt._on_signal(signal.SIGINT, None)
    assert main(["deps", "status", "--project", str(tmp_path / "no-such-project")]) == 130
    assert "nothing was changed" in capsys.readouterr().err


def test_a_signal_after_the_landing_says_the_change_is_complete(world, capsys, monkeypatch):
    """SIGTERM just after the renames: the bump is complete, the exit is still 143, and the message says so."""
    new_head = commit(world.forks["megatron-core"].fork, "feat: late", {"megatron/core/late.py": "L = 1\n"})
    real_finish = landing.finish

    def finish_then_signal(project, staging):
        moves = real_finish(project, staging)
        interrupt._on_signal(signal.SIGTERM, None)
        return moves

    monkeypatch.setattr(landing, "finish", finish_then_signal)
    assert main(["deps", "bump", "megatron-core", "--rev", new_head, "--project", str(world.project)]) == 143
    err = capsys.readouterr().err
    assert "interrupted after the change was complete" in err and "uv.lock" in err
    assert "nothing was changed" not in err
    assert lockfile.fork(world.project, "megatron-core").rev == new_head


def test_a_bump_into_a_closed_pipe_finishes(world):
    """`deps bump … 2>&1 | head -c 1`: the reader leaves at the first progress line; the bump still lands."""
    new_head = commit(world.forks["megatron-core"].fork, "feat: piped", {"megatron/core/piped.py": "P = 1\n"})
    command = (f"{sys.executable} -m nemo_rl deps bump megatron-core --rev {new_head} "
               f"--project {world.project} 2>&1 | head -c 1; exit ${{PIPESTATUS[0]}}")
    result = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert lockfile.fork(world.project, "megatron-core").rev == new_head
    assert lockfile.locked_packages(world.project)["megatron-core"].commit == new_head


# --- the stress test -------------------------------------------------------------------------------------------

def tagged_alive(tag: str) -> list[int]:
    """Processes that carry `tag` in their environment: whatever a bump started inherits it."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if f"NEMO_RL_STRESS_TAG={tag}".encode() in Path(f"/proc/{entry}/environ").read_bytes() \
                        and alive(int(entry)):
                    found.append(int(entry))
            except OSError:
                continue
    return found


def one_trial(template, root: Path, rng: random.Random, signum: int, dry_run: bool, span: float) -> dict:
    world = forkworld.copy_world(template, root)
    new_head = commit(world.forks["megatron-core"].fork, "feat: stress", {"megatron/core/stress.py": "S = 1\n"})
    old = world.files()
    tag = uuid.uuid4().hex
    env = {**os.environ, **world.git_env(), "NEMO_RL_STRESS_TAG": tag}
    proc = subprocess.Popen([sys.executable, "-m", "nemo_rl", "deps", "bump", "megatron-core", "--rev", new_head,
                             "--project", str(world.project), *(["--dry-run"] if dry_run else [])],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    offset = rng.uniform(0.0, span)
    time.sleep(offset)
    finished_first = proc.poll() is not None
    sent = time.monotonic()
    proc.send_signal(signum)
    try:
        code = proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = None
    latency = time.monotonic() - sent
    stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    deadline = time.monotonic() + 3  # the watchdog leaves once nemo-rl has exited
    while (left := tagged_alive(tag)) and time.monotonic() < deadline:
        time.sleep(0.05)
    new = world.files()
    moved = lockfile.fork(world.project, "megatron-core").rev == new_head
    return {"signal": signal.Signals(signum).name, "dry_run": dry_run, "offset": offset, "code": code,
            "latency": latency, "left": left, "finished_first": finished_first, "stderr": stderr,
            "state": "old" if new == old else "new" if moved and not dry_run else "MIXED",
            "leftovers": sorted(p.name for p in (world.project / ".nemo-rl").glob("staging-*"))
            if (world.project / ".nemo-rl").exists() else []}


def check_trial(trial: dict) -> list[str]:
    problems = []
    expected = CODES[signal.Signals[trial["signal"]]]
    if trial["code"] is None:
        problems.append("hung: alive 20 s after the signal")
    elif trial["code"] == -signal.Signals[trial["signal"]] and trial["state"] == "old" and not trial["leftovers"]:
        pass  # before the interpreter ran nemo-rl's first line: the default action ended it, nothing had started
    elif trial["code"] != expected and not (trial["finished_first"] and trial["code"] == 0):
        problems.append(f"exit {trial['code']}, expected {expected}: {trial['stderr'][-300:]}")
    if trial["state"] == "MIXED" or (trial["dry_run"] and trial["state"] != "old"):
        problems.append(f"project state {trial['state']}")
    if trial["left"]:
        problems.append(f"processes left: {trial['left']}")
    if trial["leftovers"]:
        problems.append(f"staging copies left: {trial['leftovers']}")
    return problems


def test_stress_signals_at_random_moments(world_template, tmp_path, monkeypatch):
    count = int(os.environ.get("NEMO_RL_STRESS_SIGNALS", "6"))
    rng = random.Random(int(os.environ.get("NEMO_RL_STRESS_SEED", "0")) or None)
    # how long one bump takes here with the fork cache warm, as in every trial after the first: the signals land
    # anywhere inside it
    for attempt in ("cold", "warm"):
        started = time.monotonic()
        world = forkworld.copy_world(world_template, tmp_path / f"timing-{attempt}")
        head = commit(world.forks["megatron-core"].fork, "feat: stress", {"megatron/core/stress.py": "S = 1\n"})
        subprocess.run([sys.executable, "-m", "nemo_rl", "deps", "bump", "megatron-core", "--rev", head, "--project",
                        str(world.project)], env={**os.environ, **world.git_env()}, capture_output=True, check=True)
        span = time.monotonic() - started
    trials = []
    for n in range(count):
        signum = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)[n % 3]
        trials.append(one_trial(world_template, tmp_path / f"t{n}", rng, signum, dry_run=n % 2 == 1, span=span))
    failures = [(t, p) for t in trials if (p := check_trial(t))]
    latencies = sorted(t["latency"] for t in trials if t["code"] is not None)
    print(f"\n| signals | bumps / dry runs | hung | lost (exit 0 after a signal mid-run) | wrong state | processes "
          f"left | before start-up | slowest exit after the signal | median |\n|---|---|---|---|---|---|---|---|---|\n"
          f"| {len(trials)} | {sum(not t['dry_run'] for t in trials)} / {sum(t['dry_run'] for t in trials)} "
          f"| {sum(t['code'] is None for t in trials)} "
          f"| {sum(t['code'] == 0 and not t['finished_first'] for t in trials)} "
          f"| {sum(t['state'] == 'MIXED' for t in trials)} | {sum(bool(t['left']) for t in trials)} "
          f"| {sum(t['code'] is not None and t['code'] < 0 for t in trials)} "
          f"| {latencies[-1]:.2f} s | {latencies[len(latencies) // 2]:.2f} s |  (one bump: {span:.1f} s)")
    assert not failures, failures[:5]
