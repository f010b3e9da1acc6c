"""The one runner (nemo_rl/process.py) against children that misbehave: what a finished child leaves in its
group is ended, pipes a process outside the group still holds are not waited on, `keep` bounds what is kept
of a loud child's output, and a program that is not installed is named as such."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from fakes import run_cli

from nemo_rl import process
from nemo_rl.errors import NemoRLError
from nemo_rl.process import run


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for init to reap it has ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


LEAVES_A_CHILD = """
import os, sys, time
if os.fork() == 0:
    if sys.argv[2] == "session":
        os.setsid()
    else:
        fd = os.open(os.devnull, os.O_RDWR)
        for i in (0, 1, 2):
            os.dup2(fd, i)
    open(sys.argv[1], "w").write(str(os.getpid()))
    time.sleep(20)
    os._exit(0)
while not os.path.exists(sys.argv[1]) or not open(sys.argv[1]).read():
    time.sleep(0.01)
print("done")
"""


def test_what_a_finished_child_left_in_its_group_is_ended(tmp_path):
    """A build backend's helper, still running when the backend returned, would go on writing files."""
    pidfile = tmp_path / "pid"
    result = process.run([sys.executable, "-c", LEAVES_A_CHILD, str(pidfile), "group"])
    assert result.stdout == "done\n"
    assert _gone(int(pidfile.read_text()))


def test_pipes_held_by_a_process_outside_the_group_are_not_waited_on(tmp_path):
    """A child of its own session (a daemon) holding stdout open is beyond the group's reach: the run returns
    once its child exited, with what the child wrote, instead of waiting for the daemon."""
    pidfile = tmp_path / "pid"
    result = process.run([sys.executable, "-c", LEAVES_A_CHILD, str(pidfile), "session"])
    daemon = int(pidfile.read_text())
    try:
        assert result.stdout == "done\n"
        assert _alive(daemon), "the run waited for the daemon to end"
    finally:
        os.kill(daemon, 9)


def test_keep_bounds_what_is_kept_of_a_loud_childs_output():
    loud = "import sys\nfor _ in range(64): sys.stdout.write('x' * 65535 + '\\n')\nsys.stdout.write('end\\n')\n"
    result = process.run([sys.executable, "-c", loud], keep=1000)
    assert result.stdout.endswith("x\nend\n") and f"[{64 * 65536 + 4 - 1000} bytes before this left out]" in \
        result.stdout
    assert len(result.stdout) < 1100
    assert len(process.run([sys.executable, "-c", loud]).stdout) == 64 * 65536 + 4  # without it: all of it
    kept = process.Kept(1000)
    for _ in range(100):
        kept.add(b"y" * 999)
    assert len(kept.data) <= 2000  # bounded while it is read, not only at the end


def test_a_command_that_fails_on_a_full_disk_says_to_free_space(tmp_path):
    """uv's "No space left on device (os error 28)" is no network problem, whatever the caller's remedy says."""
    from nemo_rl.errors import NemoRLError

    code = "import sys; sys.stderr.write('error: failed to flush: No space left on device (os error 28)'); sys.exit(2)"
    try:
        process.run([sys.executable, "-c", code], cwd=tmp_path, remedy="configure a mirror")
    except NemoRLError as exc:
        assert "free space" in str(exc.remedy) and "mirror" not in str(exc.remedy), exc.remedy
    else:
        raise AssertionError("a failed command passed")
    try:
        process.run([sys.executable, "-c", "import sys; sys.exit(2)"], cwd=tmp_path, remedy="configure a mirror")
    except NemoRLError as exc:
        assert exc.remedy == "configure a mirror"


def test_a_streamed_failure_on_a_full_disk_says_so(capfd):
    """A streamed stderr goes to the terminal as it comes; its end is still read for the cause (uv on a full
    NEMO_RL_VENV_DIR), and the message does not claim it said nothing."""
    with pytest.raises(NemoRLError) as failed:
        run(["sh", "-c", "echo 'error: No space left on device (os error 28)' >&2; exit 2"], stream=True)
    assert "df -h" in failed.value.remedy and "(passed on to stderr as it came" in failed.value.what
    assert "No space left on device" in capfd.readouterr().err


def test_a_child_dies_with_nemo_rl_not_after(tmp_path):
    """The watchdog: a SIGKILLed nemo-rl takes its child's whole group along at once (it has no chance to clean
    up), the grandchild too (uv lock's build backend)."""
    script = textwrap.dedent("""
        import sys
        from nemo_rl.process import run
        run(["sh", "-c", "sleep 60 & echo $! > " + sys.argv[1] + "; wait"])
    """)
    pid_file = tmp_path / "child.pid"
    parent = subprocess.Popen([sys.executable, "-c", script, str(pid_file)])
    for _ in range(200):
        if pid_file.exists() and pid_file.read_text().strip():
            break
        time.sleep(0.05)
    child = int(pid_file.read_text())
    assert _alive(child)
    time.sleep(0.5)  # the group is told to the watchdog just after the child starts (nemo_rl/process.py)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the child outlived nemo-rl"
def test_missing_git_is_named_not_the_network(world, capsys, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    code, out = run_cli(capsys, "deps", "bump", "megatron-core", "--branch", "nemo-rl/main",
                        "--project", str(world.project))
    assert code == 1 and "cannot run git" in out and "install git" in out and "network" not in out
