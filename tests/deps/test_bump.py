""""""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import forkworld
import pytest
from fakes import deps, derived_world, entry, locked, pin
from gitfixtures import commit, git

from nemo_rl.cli import main
from nemo_rl.forks import declared, metadata_check
from nemo_rl.project.model import Project


def bump(world, *args):
    return main(["deps", "bump", *args, "--project", str(world.project)])


def test_bump_updates_pin_lock_and_records_together(world, capsys):
    megatron = world.forks["megatron-core"]
    before = (world.project / "pyproject.toml").read_text()
    new_head = commit(megatron.fork, "feat: fused tokens", {"megatron/core/fused.py": "FUSED = True\n"})
    capsys.readouterr()
    assert bump(world, "megatron-core", "--rev", new_head) == 0
    out = capsys.readouterr().out

    after = (world.project / "pyproject.toml").read_text()
    assert after == before.replace(megatron.head, new_head)  # only the rev changed; comments kept
    assert "# the forks: full SHAs only" in after
    assert Project.read(world.project).packages["megatron-core"].commit == new_head
    index = tomllib.loads((world.project / "patches/megatron-core/index.toml").read_text())
    assert index["pinned"] == new_head and index["base"] == megatron.base
    assert [c["commit"] for c in index["commit"]] == [*megatron.downstream, new_head]
    assert (world.project / "patches/megatron-core/0003-feat-fused-tokens.patch").exists()
    assert f"{megatron.head} -> {new_head}" in out
    assert "3 (1 added, 0 removed)" in out and "+ " + new_head[:12] + " feat: fused tokens" in out
    assert "base unchanged" in out
    assert main(["deps", "patches", "--check", "--offline", "--project", str(world.project)]) == 0
    assert main(["deps", "patches", "--check", "--project", str(world.project)]) == 0


def test_bump_to_the_pinned_commit_is_a_no_op(world, capsys):
    before = world.files()
    assert bump(world, "megatron-core", "--rev", world.forks["megatron-core"].head) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert world.files() == before


def test_bump_dry_run_writes_nothing(world, capsys):
    def inodes():
        return {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in world.project.rglob("*") if p.is_file()}

    before, untouched = world.files(), inodes()
    new_head = commit(world.forks["nemo-toolkit"].fork, "feat: x", {"nemo/x.py": "X = 1\n"})
    project_mtime = world.project.stat().st_mtime_ns
    assert bump(world, "nemo-toolkit", "--rev", new_head, "--dry-run") == 0
    out = capsys.readouterr().out
    assert "dry run" in out and "+ " + new_head[:12] + " feat: x" in out
    assert world.files() == before
    assert inodes() == untouched  # no file was replaced or rewritten, not even with the same bytes
    assert world.project.stat().st_mtime_ns == project_mtime  # nothing created in the project, even briefly


def test_bump_branch_records_the_branch(world):
    megatron = world.forks["megatron-core"]
    git(megatron.fork, "checkout", "-q", "-b", "nemo-rl/next")
    new_head = commit(megatron.fork, "next thing", {"megatron/core/next.py": "N = 1\n"})
    assert bump(world, "megatron-core", "--branch", "nemo-rl/next") == 0
    fork = Project.read(world.project).fork("megatron-core")
    assert fork.rev == new_head and fork.branch == "nemo-rl/next"


@pytest.mark.parametrize("recorded", [True, False])
def test_bump_goes_on_when_the_old_pin_is_gone_from_the_fork(world, capsys, monkeypatch, tmp_path, recorded):
    """The fork's branch was rewritten and its old head collected: the bump still moves the pin. The old side of
    the requirement drift is index.toml's [declares] when it records the pin; without it (removed here) only the
    comparison of the fork's own requirements, old against new, is left out, and it says so."""
    import tomlkit

    megatron = world.forks["megatron-core"]
    if not recorded:
        path = world.project / "patches/megatron-core/index.toml"
        doc = tomlkit.parse(path.read_text())
        del doc["declares"]
        path.write_text(tomlkit.dumps(doc))
    git(megatron.fork, "reset", "-q", "--hard", megatron.downstream[0])
    new_head = commit(megatron.fork, "fix: pad tokens again",
                      {"megatron/core/tokens.py": "def tokens():\n    return [0]\n"})
    git(megatron.fork, "reflog", "expire", "--expire=now", "--all")
    git(megatron.fork, "gc", "-q", "--prune=now")
    monkeypatch.setenv("NEMO_RL_CACHE_DIR", str(tmp_path / "empty-cache"))
    assert bump(world, "megatron-core", "--branch", "nemo-rl/main") == 0
    assert ("requirements: not compared" in capsys.readouterr().out) is not recorded
    assert Project.read(world.project).fork("megatron-core").rev == new_head


@pytest.mark.parametrize(
    "case, args, message",
    [
        ("nonexistent sha", ["--rev", "0123456789abcdef0123456789abcdef01234567"], "does not exist in"),
        ("short sha", ["--rev", "abc1234"], "full 40-hex"),
        ("unknown branch", ["--branch", "no/such-branch"], "branch 'no/such-branch' does not exist"),
    ],
)
def test_bump_failures_change_nothing(world, capsys, case, args, message):
    before = world.files()
    assert bump(world, "megatron-core", *args) == 1, case
    err = capsys.readouterr().err
    assert message in err and "what to do:" in err
    assert world.files() == before


def test_bump_unreachable_remote_changes_nothing(world, capsys, monkeypatch):
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "https://other.nemo-rl.invalid/x.git")  # drop the fork's mirror
    before = world.files()
    assert bump(world, "megatron-core", "--branch", "nemo-rl/main") == 1
    err = capsys.readouterr().err
    assert "insteadOf" in err and "forks.nemo-rl.invalid" in err
    assert world.files() == before


def test_bump_failing_uv_lock_changes_nothing(world, capsys):
    megatron = world.forks["megatron-core"]
    pyproject = (megatron.fork / "pyproject.toml").read_text()
    bad = commit(megatron.fork, "needs a future python",
                 {"pyproject.toml": pyproject.replace('requires-python = ">=3.10"', 'requires-python = ">=3.99"')})
    before = world.files()
    assert bump(world, "megatron-core", "--rev", bad) == 1
    err = capsys.readouterr().err
    assert "uv lock" in err and "what to do:" in err
    assert world.files() == before


def slow_commit(world, seconds):
    """A fork commit whose metadata needs a setup.py run that sleeps: `uv lock` holds for `seconds`."""
    return commit(world.forks["megatron-core"].fork, "dynamic metadata", {
        "pyproject.toml": "[build-system]\nrequires = ['setuptools']\nbuild-backend = 'setuptools.build_meta'\n",
        "setup.py": f"import time\ntime.sleep({seconds})\nfrom setuptools import setup\n"
                    "setup(name='megatron-core', version='0.2.0', packages=['megatron', 'megatron.core'])\n",
    })


def state(world):
    """Bytes and mode of every file bump may touch: what "nothing changed" compares."""
    paths = [world.project / "pyproject.toml", world.project / "uv.lock", *(world.project / "patches").rglob("*")]
    return {str(p.relative_to(world.project)): (p.read_bytes(), p.stat().st_mode) for p in paths if p.is_file()}


def descendants(pid):
    children = {}
    for stat in os.listdir("/proc"):
        if stat.isdigit():
            try:
                fields = open(f"/proc/{stat}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(stat))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def start_bump_and_wait_for_uv_lock(world, rev):
    proc = subprocess.Popen([sys.executable, "-m", "nemo_rl", "deps", "bump", "megatron-core", "--rev", rev,
                             "--project", str(world.project)], stderr=subprocess.PIPE, text=True, env=os.environ)
    deadline = time.monotonic() + 120
    # staged, and the fork's metadata building: nemo-rl's read of it for [declares] (every fork), then uv lock's
    while not any((world.project / ".nemo-rl").glob("staging-*/pyproject.toml")) \
            or not any(os.path.exists(f"/proc/{c}/cmdline") for c in descendants(proc.pid)):
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    time.sleep(1.0)
    return proc


def wait_gone(pids, timeout=90):
    deadline = time.monotonic() + timeout
    while any(os.path.exists(f"/proc/{pid}") and "Z" not in open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1][:3]
              for pid in pids):
        assert time.monotonic() < deadline, "children outlived nemo-rl"
        time.sleep(0.2)


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_bump_interrupted_changes_nothing(world, signum, code):
    """A signal while `uv lock` builds the fork's metadata: no change, every child ended, 128+N."""
    before = state(world)
    proc = start_bump_and_wait_for_uv_lock(world, slow_commit(world, 120))
    children = descendants(proc.pid)
    proc.send_signal(signum)
    assert proc.wait(timeout=60) == code
    assert "interrupted" in proc.stderr.read()
    wait_gone(children, timeout=10)  # the 120 s build did not outlive nemo-rl
    assert state(world) == before
    assert not (world.project / ".nemo-rl").exists()


def test_bump_killed_changes_nothing_and_recover_cleans_up(world, capsys):
    before = state(world)
    proc = start_bump_and_wait_for_uv_lock(world, slow_commit(world, 8))
    children = descendants(proc.pid)
    proc.kill()
    proc.wait(timeout=30)
    wait_gone(children)  # whatever survived the kill has finished: nothing may change the project after
    assert state(world) == before
    assert main(["deps", "status", "--project", str(world.project), "--json"]) == 0
    assert "killed before it changed anything" in capsys.readouterr().err
    assert main(["deps", "recover", "--project", str(world.project)]) == 0
    assert not (world.project / ".nemo-rl").exists()


def strike_after_first_landed_move(monkeypatch, exception):
    """Raise `exception` right after the landing's first rename (the journal is already written)."""
    from nemo_rl.project import landing

    real_replace = os.replace
    landed = []

    def replace_then_strike(source, target):
        real_replace(source, target)
        if ".nemo-rl" in str(source) and "LANDING" not in str(source) and ".tmp" not in str(source):
            landed.append(target)
            if len(landed) == 1:
                raise exception

    monkeypatch.setattr(landing.os, "replace", replace_then_strike)
    return landed, lambda: monkeypatch.setattr(landing.os, "replace", real_replace)


def test_bump_killed_while_landing_is_finished_by_recover(world, capsys, monkeypatch):
    """The one window: between the first and the last rename. status names it, recover finishes it."""
    from nemo_rl.project import landing

    new_head = commit(world.forks["megatron-core"].fork, "feat: landing", {"megatron/core/landing.py": "L = 1\n"})
    _, restore = strike_after_first_landed_move(monkeypatch, SystemExit("killed"))  # journal written, 1 move done
    monkeypatch.setattr(landing.Staging, "__exit__", lambda self, *exc: False)  # a SIGKILL runs no clean-up
    with pytest.raises(SystemExit):
        bump(world, "megatron-core", "--rev", new_head)
    restore()
    # the staging carries its owner's pid (a live owner is a bump in progress); ours "died" in the landing
    dead = subprocess.Popen(["true"])
    dead.wait()
    for staging in (world.project / ".nemo-rl").glob(f"staging-{os.getpid()}-*"):
        staging.rename(staging.with_name(staging.name.replace(str(os.getpid()), str(dead.pid), 1)))
    capsys.readouterr()
    assert main(["deps", "status", "--json", "--project", str(world.project)]) == 0
    assert '"state": "landing interrupted"' in capsys.readouterr().out
    assert main(["deps", "status", "--check", "--project", str(world.project)]) == 1
    assert "nemo-rl deps recover" in capsys.readouterr().out
    assert main(["deps", "recover", "--project", str(world.project)]) == 0
    assert Project.read(world.project).fork("megatron-core").rev == new_head
    assert Project.read(world.project).packages["megatron-core"].commit == new_head
    assert main(["deps", "patches", "--check", "--offline", "--project", str(world.project)]) == 0


def test_bump_validation_after_writing_stops_a_bad_landing(world, capsys, monkeypatch):
    """A fault after the staged files were written (a record lost): validation refuses, nothing lands."""
    from nemo_rl.forks import records

    real_write = records.write

    def lose_a_record(directory, index, recs):
        real_write(directory, index, recs)
        (directory / recs[0].filename).unlink()

    monkeypatch.setattr(records, "write", lose_a_record)
    before = state(world)
    new_head = commit(world.forks["megatron-core"].fork, "feat: y", {"megatron/core/y.py": "Y = 1\n"})
    assert bump(world, "megatron-core", "--rev", new_head) == 1
    assert "do not validate" in capsys.readouterr().err
    assert state(world) == before


def test_bump_keeps_modes_and_refuses_read_only_files(world, capsys):
    (world.project / "pyproject.toml").chmod(0o640)
    (world.project / "uv.lock").chmod(0o600)
    new_head = commit(world.forks["megatron-core"].fork, "feat: z", {"megatron/core/z.py": "Z = 1\n"})
    assert bump(world, "megatron-core", "--rev", new_head) == 0
    assert (world.project / "pyproject.toml").stat().st_mode & 0o777 == 0o640
    assert (world.project / "uv.lock").stat().st_mode & 0o777 == 0o600
    new_record = world.project / "patches/megatron-core/0003-feat-z.patch"
    assert new_record.stat().st_mode & 0o777 == 0o644  # the umask's mode, not mkstemp's 0600
    (world.project / "uv.lock").chmod(0o444)
    before = state(world)
    newer = commit(world.forks["megatron-core"].fork, "feat: w", {"megatron/core/w.py": "W = 1\n"})
    assert bump(world, "megatron-core", "--rev", newer) == 1
    err = capsys.readouterr().err
    assert "uv.lock is not writable" in err and "chmod u+w" in err
    assert state(world) == before


def test_bump_refuses_a_renamed_distribution(world, capsys):
    megatron = world.forks["megatron-core"]
    pyproject = (megatron.fork / "pyproject.toml").read_text()
    renamed = commit(megatron.fork, "rename", {"pyproject.toml": pyproject.replace('name = "megatron-core"',
                                                                                   'name = "megatron-tron"')})
    before = state(world)
    assert bump(world, "megatron-core", "--rev", renamed) == 1
    err = capsys.readouterr().err
    assert "'megatron-tron'" in err and "'megatron-core'" in err
    assert state(world) == before


def test_bump_lands_the_version_the_fork_declares(world, capsys):
    """A fork with a derived entry moving 0.1.0 -> 0.2.0 (static): the landed entry and uv.lock say 0.2.0."""
    forkworld.derive_metadata(world, {})
    megatron = world.forks["megatron-core"]
    pyproject = (megatron.fork / "pyproject.toml").read_text()
    newer = commit(megatron.fork, "release 0.2.0", {"pyproject.toml": pyproject.replace('"0.1.0"', '"0.2.0"')})
    assert bump(world, "megatron-core", "--rev", newer) == 0
    assert "version: 0.1.0 -> 0.2.0" in capsys.readouterr().out
    assert metadata_check.entry(Project.read(world.project), "megatron-core").version == "0.2.0"
    assert Project.read(world.project).packages["megatron-core"].version == "0.2.0"


def test_a_signal_inside_the_landing_rolls_forward(world, monkeypatch):
    """Ctrl-C between two renames of the landing: the rest lands too, never a mix of old and new."""
    new_head = commit(world.forks["megatron-core"].fork, "feat: roll", {"megatron/core/roll.py": "R = 1\n"})
    landed, restore = strike_after_first_landed_move(monkeypatch, KeyboardInterrupt())
    assert bump(world, "megatron-core", "--rev", new_head) == 130
    restore()
    assert len(landed) >= 3  # the interrupted landing was finished
    assert Project.read(world.project).fork("megatron-core").rev == new_head
    assert Project.read(world.project).packages["megatron-core"].commit == new_head
    assert main(["deps", "patches", "--check", "--offline", "--project", str(world.project)]) == 0
    assert not (world.project / ".nemo-rl").exists()


def test_bump_counts_commits_and_names_a_shared_patch_id(world, capsys):
    """A change, its revert, the change again: three commits, two of them with one patch-id."""
    fork = world.forks["megatron-core"].fork
    path = "megatron/core/flag.py"
    commit(fork, "flag: base", {path: "FLAG = 0\n"})
    first = commit(fork, "flag on", {path: "FLAG = 1\n"})
    commit(fork, "Revert flag on", {path: "FLAG = 0\n"})
    again = commit(fork, "flag on again", {path: "FLAG = 1\n"})
    capsys.readouterr()
    assert bump(world, "megatron-core", "--rev", again) == 0
    out = capsys.readouterr().out
    assert "downstream commits: 6 (4 added, 0 removed)" in out
    assert f"is shared by 2 commits: {first[:12]}, {again[:12]}" in out


PIN = "c" * 40
URL = "https://forks.nemo-rl.invalid/megatron-lm.git"


def project(tmp_path: Path, locked: str = PIN) -> Path:
    """pyproject.toml pinning megatron-core at PIN on nemo-rl/main, and a uv.lock that locks `locked`."""
    (tmp_path / "pyproject.toml").write_text(
        "[project]\nname = 'fixture'\nversion = '0.1'\n"
        f"[tool.uv.sources]\nmegatron-core = {{ git = '{URL}', rev = '{PIN}' }}\n"
        "[tool.nemo-rl.forks.megatron-core]\nbranch = 'nemo-rl/main'\n"
        "upstream-url = 'https://upstream.nemo-rl.invalid/megatron-lm.git'\n")
    (tmp_path / "uv.lock").write_text(
        f'version = 1\n[[package]]\nname = "megatron-core"\nversion = "0.1.0"\n'
        f'source = {{ git = "{URL}?rev={PIN}#{locked}" }}\n')
    return tmp_path


def files(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def test_a_bump_to_the_pinned_and_locked_commit_has_nothing_to_do_and_writes_nothing(tmp_path, capsys):
    before = files(project(tmp_path))
    for extra in ([], ["--dry-run"]):
        assert main(["deps", "bump", "megatron-core", "--rev", PIN, *extra, "--project", str(tmp_path)]) == 0
        assert f"megatron-core is already pinned and locked at {PIN}; nothing to do" in capsys.readouterr().out
    assert files(tmp_path) == before and not (tmp_path / ".nemo-rl").exists()


def test_a_bad_branch_name_is_a_usage_error_before_anything_is_read(tmp_path, capsys):
    assert main(["deps", "bump", "megatron-core", "--branch", "a..b", "--project", str(project(tmp_path))]) == 2
    assert "--branch" in capsys.readouterr().err


def test_a_fork_the_project_does_not_pin_is_named_with_the_forks_it_has(tmp_path, capsys):
    assert main(["deps", "bump", "nemo-toolkit", "--rev", PIN, "--project", str(project(tmp_path))]) == 1
    err = capsys.readouterr().err
    assert "'nemo-toolkit' is not a fork pinned by this project" in err and "megatron-core" in err


def test_a_project_a_staging_copy_cannot_lock_is_refused_once_there_is_something_to_do(tmp_path, capsys):
    """A uv.toml would be read instead of [tool.uv] (the derived entry with it): refused before any fetch, but only
    when the bump has work to do: a bump to the pin it has is still nothing to do."""
    path = project(tmp_path, locked="e" * 40)  # uv.lock locks another commit: the bump would relock
    (path / "uv.toml").write_text("")
    assert main(["deps", "bump", "megatron-core", "--rev", PIN, "--dry-run", "--project", str(path)]) == 1
    assert "uv.toml exists: uv reads it instead of pyproject.toml's [tool.uv]" in capsys.readouterr().err
    path = project(tmp_path)
    assert main(["deps", "bump", "megatron-core", "--rev", PIN, "--dry-run", "--project", str(path)]) == 0


def test_bump_lands_a_dynamic_version_and_a_new_requirement(world, capsys):
    derived_world(world)
    fork = world.forks["megatron-core"].fork
    module_init = "megatron/core/__init__.py"
    dynamic = commit(fork, "dynamic version 0.2.0", {
        "pyproject.toml": forkworld.fork_pyproject(world, version=None, dependencies=["nemo-toolkit>=0.1",
                                                                                     "pytest>=8"]),
        module_init: '__version__ = "0.2.0"\n'})
    capsys.readouterr()
    pin(world, dynamic)
    out = capsys.readouterr().out
    assert locked(world).version == "0.2.0"
    assert entry(world) == declared.Entry("megatron-core", "0.2.0", ">=3.10", ("nemo-toolkit>=0.1",))
    assert "version: 0.1.0 -> 0.2.0" in out and "+ nemo-toolkit>=0.1" in out
    # the new requirement is one the lock holds already (the other fork): offline gives what online does
    assert "(locked offline: " in out
    assert deps(world, "patches", "--check", "--offline") == 0
    assert deps(world, "patches", "--check") == 0
    forkworld.uv_run(world, "lock", "--check")  # what an online lock gives


@pytest.mark.parametrize("setting", ["UV_FROZEN", "UV_LOCKED"])
def test_a_setting_that_stops_uv_relocking_is_named_and_the_command_it_prints_bumps(world, capsys, monkeypatch,
                                                                                       setting):
    """UV_FROZEN keeps the old lock and UV_LOCKED fails `uv lock`: either is named before any work, never a
    validation failure to report as a bug; the command printed runs the bump without it, as printed."""
    monkeypatch.chdir(world.project)  # where its fixes run as printed
    new_rev, before = world.forks["megatron-core"].downstream[0], world.files()
    monkeypatch.setenv(setting, "1")
    capsys.readouterr()
    assert bump(world, "megatron-core", "--rev", new_rev) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {setting}='1' in the environment stops the relock this command needs; "
                          "nothing was changed"), err
    assert "fetching" not in err and world.files() == before
    fix = re.search(r"what to do: run it without \w+: `([^`]+)`", err).group(1)
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # this environment's nemo-rl
    done = subprocess.run(fix, shell=True, capture_output=True, text=True, env={**os.environ, "PATH": path})
    assert done.returncode == 0, done.stderr
    assert Project.read(world.project).packages["megatron-core"].commit == new_rev


@pytest.mark.parametrize("setting", ["UV_RESOLUTION=lowest", "UV_PRERELEASE=allow", "UV_NO_SOURCES=1",
                                     "UV_EXCLUDE_NEWER=2020-01-01T00:00:00Z", "UV_INDEX_STRATEGY=unsafe-best-match"])
def test_a_uv_setting_that_changes_resolution_never_reaches_the_relock(world, capsys, monkeypatch, setting):
    """The bumped uv.lock is what plain `uv lock` makes: the one CI's `uv lock --check` compares."""
    name, value = setting.split("=", 1)
    new_rev = world.forks["megatron-core"].downstream[0]
    monkeypatch.setenv(name, value)
    assert bump(world, "megatron-core", "--rev", new_rev) == 0, capsys.readouterr().err
    monkeypatch.delenv(name)
    assert "options" not in tomllib.loads((world.project / "uv.lock").read_text())
    forkworld.uv_run(world, "lock", "--check")
    assert Project.read(world.project).packages["megatron-core"].commit == new_rev


def test_a_uv_configuration_that_changes_the_lock_s_options_is_refused_before_landing(world, capsys, monkeypatch,
                                                                                      tmp_path):
    """A uv.toml of the user's, which nemo-rl does not drop (it may name their index mirror), writes [options]:
    the staged lock is refused, naming the setting, and nothing lands."""
    config = tmp_path / "uv.toml"
    config.write_text('prerelease = "allow"\n')
    monkeypatch.setenv("UV_CONFIG_FILE", str(config))
    before = world.files()
    capsys.readouterr()
    assert bump(world, "megatron-core", "--rev", world.forks["megatron-core"].downstream[0]) == 1
    err = capsys.readouterr().err
    assert "error: uv lock wrote [options] prerelease-mode = 'allow' into the staged uv.lock" in err, err
    assert "what to do: remove prerelease from your uv.toml or $UV_CONFIG_FILE" in err
    assert world.files() == before
