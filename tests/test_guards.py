"""Checks that survived deletion in an earlier review, each with a test that fails without it."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import forkworld
from gitfixtures import commit, git

from nemo_rl import git as nemo_git
from nemo_rl.cli import main
from nemo_rl.forks import declared, fork_metadata, records
from nemo_rl.forks.record_files import Record

ROOT = Path(__file__).resolve().parent.parent


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purpose
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


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


def test_an_inherited_git_dir_does_not_redirect_git(tmp_path, monkeypatch):
    mine, other = tmp_path / "mine", tmp_path / "other"
    for repo in (mine, other):
        repo.mkdir()
        git(repo, "init", "-q")
    expected = commit(mine, "mine", {"a.txt": "a"})
    commit(other, "other", {"b.txt": "b"})
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))  # as inside a git hook
    assert nemo_git.rev_parse(mine, "HEAD") == expected


def test_notes_follow_a_rebased_commit(tmp_path):
    previous = tmp_path / "patches" / "megatron-core"
    previous.mkdir(parents=True)
    old = Record(1, "a" * 40, "A <a@x>", "2025-01-01T00:00:00+00:00", "fix: pad", "p" * 40, "", note="ours: why")
    (previous / old.filename).write_text(old.render())
    rebased = Record(1, "b" * 40, "A <a@x>", "2025-02-01T00:00:00+00:00", "fix: pad", "p" * 40, "")
    unrelated = Record(2, "c" * 40, "A <a@x>", "2025-02-01T00:00:00+00:00", "feat: new", "q" * 40, "")
    from nemo_rl.project.lockfile import Fork

    pin = Fork("megatron-core", "https://x.invalid/f.git", "b" * 40, "main", "https://x.invalid/u.git", "main", None)
    _, noted = records.build(previous, None, pin, "b" * 40, "d" * 40, [rebased, unrelated])
    assert [r.note for r in noted] == ["ours: why", ""]


def test_drift_reports_changes_and_leaves_out_extras():
    old = fork_metadata.Metadata("megatron-core", "0.1", fork_metadata._requirements(
        ["torch>=2", "einops", "pytest; extra == 'test'"]))
    new = fork_metadata.Metadata("megatron-core", "0.2", fork_metadata._requirements(
        ["torch>=2.1", "numpy<2", "wandb; extra == 'dev'"]))
    drift = fork_metadata.drift(old.requires.values(), new.requires.values(),
                                declared.Entry("megatron-core", "0.1", None, ("torch",)))
    assert drift.changed == (("torch>=2", "torch>=2.1"),)
    assert drift.added == ("numpy<2",) and drift.removed == ("einops",)  # extras' requirements are not imports
    assert drift.uncovered == ("numpy",)


def test_verify_uses_the_lock_as_it_is(world, capsys):
    """`deps verify` checks uv.lock, never a re-resolved set: a stale lock fails instead of being relocked."""
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text().replace("dependencies = []", 'dependencies = ["iniconfig"]'))
    lock_before = (world.project / "uv.lock").read_bytes()
    assert main(["deps", "verify", "megatron-core", "--project", str(world.project)]) == 1
    assert (world.project / "uv.lock").read_bytes() == lock_before


def test_doctor_says_developing_in_an_interpreter_that_has_the_fork(world, tmp_path, monkeypatch):
    env = tmp_path / "env"
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    forkworld.uv_run(world, "sync", "--quiet", "--extra", "mcore", env_dir=env)
    assert main(["deps", "develop", "megatron-core", "--project", str(world.project)]) == 0
    checkout = world.project / ".nemo-rl/develop/megatron-core"
    # doctor run by the environment's own interpreter: megatron.core comes from its site-packages (through the
    # overlay), nemo_rl and its light dependencies from this checkout's environment, appended after them
    ours = [p for p in sys.path if p.endswith("site-packages")]
    code = (f"import sys; sys.path[:0] = [{str(ROOT)!r}]; sys.path += {ours!r}; from nemo_rl.cli import main; "
            f"sys.exit(main(['doctor', '--json', '--project', {str(world.project)!r}]))")
    result = subprocess.run([env / "bin" / "python", "-c", code], capture_output=True, text=True)
    assert result.stdout, result.stderr
    report = json.loads(result.stdout)
    megatron = {c["distribution"]: c for c in report["components"]}["megatron-core"]
    assert megatron["state"] == "developing", result.stdout + result.stderr
    assert str(checkout) in megatron["remedy"]
