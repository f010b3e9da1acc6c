"""Signals always end a command, at once, and say what happened (nemo_rl/interrupt.py, nemo_rl/process.py).

The stress test at the bottom sends SIGINT, SIGTERM and SIGHUP at random moments into real fixture bumps and dry
runs. CI runs a handful;
`NEMO_RL_STRESS_SIGNALS=200 uv run --locked pytest -s tests/signals/test_interrupts.py -k stress` runs as many as
asked and prints a table (add `--timeout=0`: more than 600 s)."""

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
from fakes import FLAGS, _clone, deps, fake_bundle, fake_env
from gitfixtures import commit

from nemo_rl import interrupt
from nemo_rl.cli import main
from nemo_rl.project import develop_state, journal
from nemo_rl.project.model import Project
from nemo_rl.workers import bundle_copy, bundles

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


def exit_of(proc: subprocess.Popen, within: float = 30) -> int:
    """The exit status; a command still running `within` s after the signal fails the test (it is the bug that
    the test looks for, not a slow machine: the bound is several times the 5 s a command has)."""
    try:
        return proc.wait(timeout=within)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"still running {within:.0f} s after the signal")


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
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert exit_of(proc) == 143, proc.stderr.read()
    # the wait itself noticed the signal: the forced exit (FORCE_AFTER_S after it) would end it too, but later
    assert time.monotonic() - sent < interrupt.FORCE_AFTER_S - 1
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
        sent = time.monotonic()
        assert proc.wait(timeout=10) == 130, proc.stderr.read()
        # at the wait's own check, not the forced exit FORCE_AFTER_S later (which ends any command)
        assert time.monotonic() - sent < interrupt.FORCE_AFTER_S - 1
    finally:
        os.close(fd)


def test_a_signal_before_the_verb_runs_stops_it(tmp_path, capsys, monkeypatch):
    """A Ctrl-C while nemo-rl is still importing its verbs: the command does not start. Each verb has checkpoints
    of its own; this one keeps a verb from doing anything at all, before its first (a lock taken, a file read)."""
    from nemo_rl import cli
    from nemo_rl.deps import status

    entered = []
    monkeypatch.setattr(Project, "find", lambda path: entered.append("project") or tmp_path)
    monkeypatch.setattr(status, "run", lambda project, args: entered.append("verb") or 0)
    real_parser = cli.build_parser

    def parser_then_signal():  # the signal comes while the verbs' parsers are built (their modules imported)
        parser = real_parser()
        interrupt.record(signal.SIGINT)
        return parser

    monkeypatch.setattr(cli, "build_parser", parser_then_signal)
    assert main(["deps", "status", "--project", str(tmp_path / "no-such-project")]) == 130
    err = capsys.readouterr().err
    assert "nothing was changed" in err and "no-such-project" not in err, err
    assert entered == []  # neither the project was looked for nor the verb entered


def test_a_signal_after_the_landing_says_the_change_is_complete(world, capsys, monkeypatch):
    """SIGTERM just after the renames: the bump is complete, the exit is still 143, and the message says so."""
    new_head = commit(world.forks["megatron-core"].fork, "feat: late", {"megatron/core/late.py": "L = 1\n"})
    real_finish = journal.finish

    def finish_then_signal(project, staging):
        moves = real_finish(project, staging)
        interrupt.record(signal.SIGTERM)
        return moves

    monkeypatch.setattr(journal, "finish", finish_then_signal)
    assert main(["deps", "bump", "megatron-core", "--rev", new_head, "--project", str(world.project)]) == 143
    err = capsys.readouterr().err
    assert "interrupted after these steps were complete" in err and "uv.lock" in err
    assert "nothing was changed" not in err
    assert Project.read(world.project).fork("megatron-core").rev == new_head


def test_a_bump_into_a_closed_pipe_finishes(world):
    """`deps bump … 2>&1 | head -c 1`: the reader leaves at the first progress line; the bump still lands."""
    new_head = commit(world.forks["megatron-core"].fork, "feat: piped", {"megatron/core/piped.py": "P = 1\n"})
    command = (f"{sys.executable} -m nemo_rl deps bump megatron-core --rev {new_head} "
               f"--project {world.project} 2>&1 | head -c 1; exit ${{PIPESTATUS[0]}}")
    result = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert Project.read(world.project).fork("megatron-core").rev == new_head
    assert Project.read(world.project).packages["megatron-core"].commit == new_head


@pytest.mark.parametrize("how", ["pending", "recorded"])
def test_a_signal_after_the_command_returned_is_still_an_exit_of_ours(how):
    """Once main has returned, interpreter shutdown would restore the default actions: a signal there killed a
    bump that had landed (exit -1). It is blocked, answered as an interruption, and the process ends at once."""
    script = textwrap.dedent(f"""
        import os, signal
        import nemo_rl.cli as cli
        from nemo_rl import interrupt

        def finished(argv=None):
            if {how!r} == "pending":
                signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGHUP}})
                os.kill(os.getpid(), signal.SIGHUP)
            else:
                interrupt.record(signal.SIGHUP)
            return 0

        cli.main = finished
        from nemo_rl.__main__ import entry_point
        entry_point()
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 129, result.stderr
    assert "interrupted" in result.stderr


def test_a_child_dead_of_the_same_signal_is_an_interruption(tmp_path):
    """`scancel` and `systemctl stop` send SIGTERM to the whole tree: the child dies of it too, and the command is
    interrupted (143), not failed."""
    proc = run_script("""
        from nemo_rl.process import run
        run(["sh", "-c", "kill -TERM $PPID; kill -TERM $$"])
    """)
    assert proc.wait(timeout=30) == 143, proc.stderr.read()


def test_an_error_after_a_signal_exits_as_interrupted(monkeypatch, capsys):
    from nemo_rl.errors import NemoRLError

    def interrupted_while_failing(path):
        interrupt.record(signal.SIGTERM)
        raise NemoRLError("a child failed because it was ended")

    monkeypatch.setattr(Project, "find", interrupted_while_failing)
    assert main(["deps", "status"]) == 143
    assert "interrupted" in capsys.readouterr().err


def test_a_signal_before_the_landing_changes_nothing(world, capsys, monkeypatch):
    """Ctrl-C while the records are written (pure Python, no child): the landing does not start."""
    from nemo_rl.forks import records

    new_head = commit(world.forks["megatron-core"].fork, "feat: early", {"megatron/core/early.py": "E = 1\n"})
    before = world.files()
    real_write = records.write

    def write_then_signal(*args, **kwargs):
        real_write(*args, **kwargs)
        interrupt.record(signal.SIGINT)

    monkeypatch.setattr(records, "write", write_then_signal)
    assert main(["deps", "bump", "megatron-core", "--rev", new_head, "--project", str(world.project)]) == 130
    assert "nothing was changed" in capsys.readouterr().err
    assert world.files() == before


def busy_without_a_checkpoint() -> subprocess.Popen:
    """A command in pure Python work (no child, no lock), started and running."""
    proc = run_script("""
        print("busy", flush=True, file=sys.stderr)
        while True:
            pass
    """)
    assert proc.stderr.readline().strip() == "busy"
    return proc


def test_work_without_a_checkpoint_still_ends_within_seconds():
    """doctor's probes run in-process with no checkpoint: the forced exit comes FORCE_AFTER_S after the signal."""
    proc = busy_without_a_checkpoint()
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    assert exit_of(proc) == 130
    assert time.monotonic() - sent < interrupt.FORCE_AFTER_S + 1
    assert "ended at once" in proc.stderr.read()


def test_a_second_signal_ends_the_command_at_once():
    proc = busy_without_a_checkpoint()
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 143  # the first signal names the exit
    assert time.monotonic() - sent < 2


def test_nohup_keeps_sighup_ignored():
    """`nohup nemo-rl deps bump … &`: an ignored SIGHUP stays ignored; SIGINT is taken over all the same."""
    script = textwrap.dedent("""
        import os, signal, sys, time
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        from nemo_rl import interrupt
        interrupt.install()
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(0.2)
        print(interrupt.received(), signal.getsignal(signal.SIGINT) is not signal.SIG_IGN)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30).stdout
    assert out.split() == ["None", "True"]


def test_a_child_dead_of_the_signal_we_got_too_is_an_interruption(tmp_path):
    """A whole tree's SIGTERM reaches the child and nemo-rl at once. This child closed its output first, so the
    read of its pipes is over and its exit is noticed without another checkpoint: a run that does not check the
    exit status still unwinds at once, instead of handing back the result the signal made (or of waiting for the
    forced exit, which exits 143 too)."""
    sent_at = tmp_path / "sent"
    proc = run_script("""
        from nemo_rl.process import run
        child = ("import os, signal, sys, time; os.close(1); os.close(2); time.sleep(0.5); "
                 "open(sys.argv[1], 'w').write(repr(time.monotonic())); "
                 "os.kill(os.getppid(), signal.SIGTERM); os.kill(os.getpid(), signal.SIGTERM)")
        result = run([sys.executable, "-c", child, sys.argv[1]], check=False)
        print("returned", result.returncode, file=sys.stderr)
    """, str(sent_at))
    code = exit_of(proc)
    ended = time.monotonic()
    err = proc.stderr.read()
    assert code == 143 and "returned" not in err, err
    assert ended - float(sent_at.read_text()) < interrupt.FORCE_AFTER_S - 1, err  # unwound, not forced out


def test_children_run_in_a_session_of_their_own():
    """No controlling terminal: ssh asking for a passphrase fails at once instead of stopping (SIGTTIN)."""
    from nemo_rl.process import run

    out = run([sys.executable, "-c", "import os; print(os.getsid(0) == os.getpid())"]).stdout
    assert out.strip() == "True"


def test_a_collected_child_is_never_signalled(monkeypatch):
    """Its number may belong to another process group by then."""
    from nemo_rl import process

    sent = []
    monkeypatch.setattr(os, "killpg", lambda pid, signum: sent.append((pid, signum)))
    with pytest.raises(RuntimeError), process.start(["true"]) as running:
        running.wait()  # it ends what the child left in its group, before the child is reaped
        collected = list(sent)
        raise RuntimeError("after the wait")
    assert sent == collected


@pytest.mark.parametrize("timeout", [True, 0, -1, float("nan"), float("inf"), 10**400, "5"])
def test_a_timeout_that_cannot_be_right_is_refused_before_starting(timeout, tmp_path):
    from nemo_rl.errors import NemoRLError
    from nemo_rl.process import run

    marker = tmp_path / "started"
    with pytest.raises(NemoRLError, match="not a number of seconds above zero"):
        run(["touch", str(marker)], timeout=timeout)
    assert not marker.exists()


def test_a_streaming_child_writes_through_nemo_rl(capsys):
    """stderr of a `stream=True` child passes through nemo-rl's own (a reader that leaves costs the child
    nothing); stdout is captured."""
    from nemo_rl.process import run

    result = run(["sh", "-c", "echo out; echo progress >&2"], stream=True)
    assert result.stdout == "out\n"
    assert "progress" in capsys.readouterr().err


def test_started_with_stderr_closed(world):
    result = subprocess.run(f"{sys.executable} -m nemo_rl deps status --project {world.project} 2>&-",
                            shell=True, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout


def test_a_closed_stderr_is_never_the_next_file_opened():
    """Started with `2>&-`: without /dev/null at fd 2, the first file nemo-rl opens (a lock file, a state file)
    would become its stderr, and every warning, and every child's stderr, would be written into it."""
    script = ("import os, sys; os.close(2); from nemo_rl.__main__ import _guard_output; _guard_output(); "
              "fd = os.open(sys.argv[1], os.O_RDONLY); print(fd, os.path.realpath(f'/proc/self/fd/2'))")
    out = subprocess.run([sys.executable, "-c", script, __file__], capture_output=True, text=True,
                         timeout=60).stdout.split()
    assert int(out[0]) > 2 and out[1] == os.devnull, out


def test_a_git_lock_left_by_a_killed_git_is_removed(world):
    """A git SIGKILLed inside `git config` leaves config.lock in the shared fork cache: every later command would
    fail on it."""
    from nemo_rl.forks import fork_cache

    fork = Project.read(world.project).fork("megatron-core")
    repo = fork_cache.fetched(fork, fork.rev)
    (repo / "config.lock").write_text("")
    assert fork_cache.fetched(fork, fork.rev) == repo


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


def done_with_signals_blocked(proc: subprocess.Popen, signum: int) -> bool:
    """Whether the command had finished before the signal: exited (a zombie not yet reaped), or past its end, where
    nemo-rl blocks the signals and answers only those already pending (nemo_rl/__main__.py), so a signal now is
    rightly left unanswered and the exit is the command's own."""
    try:
        status = Path(f"/proc/{proc.pid}/status").read_text()
    except OSError:
        return True
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    blocked = int(fields.get("SigBlk", "0").strip(), 16)
    return fields.get("State", "").startswith("Z") or bool(blocked >> (signum - 1) & 1)


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
    finished_first = done_with_signals_blocked(proc, signum)
    sent = time.monotonic()
    os.kill(proc.pid, signum)  # not Popen.send_signal: it reaps first and sends nothing to a process that just ended
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
    moved = Project.read(world.project).fork("megatron-core").rev == new_head
    return {"signal": signal.Signals(signum).name, "dry_run": dry_run, "offset": offset, "code": code,
            "latency": latency, "left": left, "finished_first": finished_first, "stderr": stderr,
            "state": "old" if new == old else "new" if moved and not dry_run else "MIXED",
            "leftovers": sorted(p.name for p in (world.project / ".nemo-rl").glob("staging-*"))
            if (world.project / ".nemo-rl").exists() else []}


def before_start_up(trial: dict) -> bool:
    """Killed by the signal's default action (SIGTERM, SIGHUP), or Python's KeyboardInterrupt while `site` still ran
    the environment's .pth files: before nemo-rl's handler existed, with nothing changed."""
    untouched = trial["state"] == "old" and not trial["leftovers"]
    killed = trial["code"] == -signal.Signals[trial["signal"]]
    early_keyboard_interrupt = (trial["code"] in (1, -signal.SIGINT) and "KeyboardInterrupt" in trial["stderr"]
                                and "nemo_rl" not in trial["stderr"])
    return untouched and (killed or early_keyboard_interrupt)


def check_trial(trial: dict) -> list[str]:
    problems = []
    expected = CODES[signal.Signals[trial["signal"]]]
    if trial["code"] is None:
        problems.append("hung: alive 20 s after the signal")
    elif before_start_up(trial):
        pass  # before the interpreter ran nemo-rl's first line: Python's default action ended it, nothing had started
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
          f"| {sum(before_start_up(t) for t in trials)} "
          f"| {latencies[-1]:.2f} s | {latencies[len(latencies) // 2]:.2f} s |  (one bump: {span:.1f} s)")
    assert not failures, "\n\n".join(f"{problems}: {trial}" for trial, problems in failures[:5])


def test_a_signal_during_the_node_copy_ends_it_and_leaves_no_copy(world, tmp_path, monkeypatch):
    """A cancelled job sends SIGTERM while thousands of files are copied: it ends before the next file (empty
    files: no block read to end within, as test_tree_copy's large file does), and the copy is removed."""
    from nemo_rl import interrupt
    from nemo_rl.workers import tree_copy

    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    files = {f"archive-v0/abc/m{i:03}.py": "" for i in range(100)}
    bundle = fake_bundle(world, tmp_path / "bundle", files)
    manifest = bundles.check(bundle, Project.read(world.project), FLAGS)
    calls, real = [], tree_copy._linked  # each file, linked or copied

    def signalled_midway(*args):
        calls.append(args[0])
        if len(calls) == 10:
            interrupt.record(signal.SIGTERM)  # what the handler does when the signal comes
        return real(*args)

    monkeypatch.setattr(tree_copy, "_linked", signalled_midway)
    monkeypatch.setattr(interrupt, "_received", [])
    with pytest.raises(interrupt.Interrupted):
        bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", manifest)
    assert len(calls) < len(files) and not list(venvs.glob(f"{bundle_copy.NODE_COPY_PREFIX}*"))
    with pytest.raises(interrupt.Interrupted):  # and hashing a bundle (a pack's, a node's) ends the same way
        bundles.content_digest(bundle / bundles.CACHE)


def test_a_signal_after_the_worker_environment_is_built_says_so(world, tmp_path, monkeypatch, capsys):
    """SIGINT while the new environment is verified (after "worker environment ready"): exit 130 and the message
    names the environment as built, never "nothing was changed"; the environment is there for the next build."""
    from nemo_rl import interrupt, uv
    from nemo_rl.cli import main
    from nemo_rl.workers import environments

    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    monkeypatch.setattr(uv, "venv", lambda path, **_: fake_env(path))  # what a build installs is not the point
    monkeypatch.setattr(uv, "sync", lambda *_, **__: None)

    def interrupted_while_verifying(*_, **__):
        interrupt.record(signal.SIGINT)
        interrupt.check()

    monkeypatch.setattr(environments, "verify", interrupted_while_verifying)
    try:
        assert main(["envs", "build", "BASE", "--project", str(world.project)]) == 130
    finally:
        interrupt.reset()
    err = capsys.readouterr().err
    assert "nothing was changed" not in err and "interrupted after these steps were complete" in err, err
    built = environments.slot(environments.key_for(Project.read(world.project), ["--locked"])).path
    assert f"the worker environment {built} is built" in err and environments.describe(built) is not None


def test_a_signal_after_develop_wrote_its_overlay_names_what_was_done(world, tmp_path, monkeypatch, capsys):
    """SIGHUP while develop reads the checkout's facts (git, a checkpoint) after the overlay and develop.json were
    written: the exit is 129 and the message lists those steps, never "nothing was changed"."""
    env = fake_env(tmp_path / "env")
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    mine = _clone(world, tmp_path / "mine")
    facts = develop_state.checkout_facts

    def hangup_meanwhile(*args, **kwargs):
        interrupt.record(signal.SIGHUP)
        return facts(*args, **kwargs)

    monkeypatch.setattr(develop_state, "checkout_facts", hangup_meanwhile)
    try:
        assert deps(world, "develop", "megatron-core", str(mine)) == 129
    finally:
        interrupt.reset()
    err = capsys.readouterr().err
    assert "nothing was changed" not in err and "interrupted after these steps were complete" in err, err
    assert f"{env} imports megatron-core from {mine}" in err and "develop.json records megatron-core" in err
    assert develop_state.active_checkout(env, "megatron-core") == mine
