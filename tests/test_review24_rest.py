"""What the hostile review of issue 24 left: a develop checkout whose git data is broken or gone while its files
stay (a report, not git's raw error, and not "gone"), an `envs build` interrupted after its environment was ready,
a relative NEMO_RL_BUNDLE_DIR, `envs prune` and what it cannot attribute, and a committed `.nemo-rl` link."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from fakes import deps, fake_env

from nemo_rl.project import develop_state


def _clone(world, where: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(world.forks["megatron-core"].fork), str(where)], check=True)
    return where


def _rows(world, env, capsys) -> dict:
    capsys.readouterr()
    assert deps(world, "status", "--json", "--env", str(env)) == 0, capsys.readouterr().err
    return {r["distribution"]: r for r in json.loads(capsys.readouterr().out)["forks"]}


def _break(kind: str, clone: Path, worktree: Path) -> None:
    if kind == "main repository moved":
        clone.rename(clone.with_name("clone-moved"))
    elif kind == "empty .git file":
        (worktree / ".git").write_text("")
    else:
        shutil.move(worktree / ".git", worktree.with_name("git-aside"))


@pytest.mark.parametrize("kind", ["main repository moved", "empty .git file", ".git removed"])
def test_a_checkout_git_cannot_read_is_a_state_with_a_fix(world, tmp_path, monkeypatch, capsys, kind):
    """A worktree whose main repository moved, an empty `.git` file, a `.git` moved away: the files are still what
    Python imports, so the fork is "checkout unreadable" (not "gone", not git's raw error), every fork's row is
    shown, --check fails, and the fix given (--stop) works."""
    env = fake_env(tmp_path / "env")
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    clone = _clone(world, tmp_path / "clone")
    worktree = tmp_path / "wtree"
    subprocess.run(["git", "-C", str(clone), "worktree", "add", "-q", str(worktree), "HEAD"], check=True)
    assert deps(world, "develop", "megatron-core", str(worktree)) == 0
    _break(kind, clone, worktree)
    assert develop_state.active_checkout(env, "megatron-core") == worktree  # its files are imported
    rows = _rows(world, env, capsys)
    assert set(rows) == set(world.forks), rows  # the other forks are still reported
    row = rows["megatron-core"]
    assert row["state"] == "checkout unreadable", row
    assert row["developing"]["problem"] and not row["developing"]["missing"]
    assert f"megatron-core is imported from the files of {worktree}" in row["remedy"]
    assert "deps develop --stop megatron-core" in row["remedy"]
    assert ("worktree repair" if kind != ".git removed" else ".git is missing") in row["remedy"]
    assert deps(world, "status", "--env", str(env)) == 0
    assert "(unreadable: " in capsys.readouterr().out
    assert deps(world, "status", "--check", "--env", str(env)) == 1
    capsys.readouterr()
    assert deps(world, "develop", "megatron-core", "--onto", "HEAD") == 1
    err = capsys.readouterr().err
    assert "cannot be rebased" in err and "what to do" in err and "command failed" not in err, err
    shutil.rmtree(develop_state.shadow_dir(world.project, "megatron-core"))  # `git clean -fdx`: the pin runs
    row = _rows(world, env, capsys)["megatron-core"]
    assert row["state"] == "checkout unreadable" and "megatron-core runs the pin" in row["remedy"], row
    assert deps(world, "develop", "--stop", "megatron-core") == 0  # the fix it gives works
    assert develop_state.active_checkout(env, "megatron-core") is None and worktree.is_dir()


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
    built = environments.slot(environments.key_for(world.project, ["--locked"])).path
    assert f"the worker environment {built} is built" in err and environments.describe(built) is not None


@pytest.mark.parametrize("setting", ["bundles", "./bundles", "../shared/bundles"])
def test_a_relative_bundle_dir_is_refused_everywhere_it_is_read(world, tmp_path, monkeypatch, capsys, setting):
    """Like NEMO_RL_CACHE_DIR: a relative NEMO_RL_BUNDLE_DIR names another directory from each working directory
    (a worker's is not the driver's), so it is refused with the absolute path it names from here."""
    from nemo_rl.cli import main
    from nemo_rl.errors import NemoRLError
    from nemo_rl.workers import bundles, housekeeping

    (tmp_path / "bundles").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", setting)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    for read in (lambda: bundles.find(world.project, ["--locked"]), bundles.configured, housekeeping._prune_packs,
                 lambda: housekeeping.bundle_rows(world.project)):
        with pytest.raises(NemoRLError, match="is not an absolute path") as refused:
            read()
        assert f"NEMO_RL_BUNDLE_DIR={os.path.normpath(tmp_path / setting)!r}" in refused.value.remedy
    for verb in ("list", "prune"):
        capsys.readouterr()
        assert main(["envs", verb, "--project", str(world.project)]) == 1
        assert "not an absolute path" in capsys.readouterr().err
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", str(tmp_path / "bundles"))  # the fix it gives works
    assert main(["envs", "list", "--project", str(world.project)]) == 0


@pytest.mark.parametrize("kind", ["link", "dangling link", "file"])
def test_a_committed_nemo_rl_link_is_never_followed(world, tmp_path, monkeypatch, capsys, kind):
    """A pull request commits `.nemo-rl -> /some/dir` (or a dangling link, or a file): staging, develop, status and
    the checkout id refuse it with what to do, and nothing is written where it points."""
    from nemo_rl.errors import NemoRLError
    from nemo_rl.project import identity, landing

    env = fake_env(tmp_path / "env")
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    outside = tmp_path / "outside"
    root = world.project / ".nemo-rl"
    shutil.rmtree(root, ignore_errors=True)
    if kind == "file":
        root.write_text("not a directory\n")
    else:
        if kind == "link":
            outside.mkdir()
        root.symlink_to(outside)
    expected = "is a symbolic link" if kind != "file" else "is not a directory"
    with pytest.raises(NemoRLError, match=expected) as refused:
        landing.Staging(world.project, ["pyproject.toml"], ["patches"])
    assert f"rm {root}" in refused.value.remedy and "git rm --cached .nemo-rl" in refused.value.remedy
    with pytest.raises(NemoRLError, match=expected):
        identity.ensure_checkout_id(world.project)
    assert identity.checkout_id(world.project) is None
    mine = _clone(world, tmp_path / "mine")
    capsys.readouterr()
    assert deps(world, "develop", "megatron-core", str(mine)) == 1
    assert expected in capsys.readouterr().err
    assert deps(world, "status", "--env", str(env)) == 1
    assert expected in capsys.readouterr().err
    assert not outside.exists() or not list(outside.iterdir())  # nothing was staged or kept out there
    assert develop_state.active_checkout(env, "megatron-core") is None
    root.unlink()  # the fix it gives works
    assert deps(world, "develop", "megatron-core", str(mine)) == 0
    assert root.is_dir() and not root.is_symlink()


def _broken_envs(world, venvs: Path) -> dict[str, Path]:
    from fakes import planted_env as _planted_env

    from nemo_rl.project import identity
    from nemo_rl.workers import environments

    ours = identity.ensure_checkout_id(world.project)
    made = {"bad metadata": fake_env(venvs / "bad")}
    (made["bad metadata"] / environments.META).write_text("{")
    made["fifo metadata"] = fake_env(venvs / "fifo")
    os.mkfifo(made["fifo metadata"] / environments.META)
    made["linked metadata"] = fake_env(venvs / "linked")
    (venvs / "meta-elsewhere.json").write_text("{}")
    (made["linked metadata"] / environments.META).symlink_to(venvs / "meta-elsewhere.json")
    original = _planted_env(venvs, "1" * 24, world.project, ours)
    made["a cp -a backup"] = venvs / f"{'1' * 24}-backup"
    subprocess.run(["cp", "-a", str(original), str(made["a cp -a backup"])], check=True)
    return made


def test_prune_removes_only_what_it_proves_ours_and_lists_the_rest(world, tmp_path, monkeypatch, capsys):
    """Broken entries (metadata that does not read, a FIFO or a link for it, a key that is not the directory's
    name: a user's `cp -a` backup) are listed with the exact `rm -rf`, never removed; a stale environment of this
    checkout is removed, and with it its key's lock file."""
    from nemo_rl.cli import main
    from nemo_rl.workers import environments, housekeeping

    venvs = tmp_path / "venvs"
    venvs.mkdir()
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    broken = _broken_envs(world, venvs)
    stale = venvs / ("1" * 24)
    with environments.Slot(venvs, stale.name).locked():  # a build of it once made its lock file
        pass
    rows = {r.path: r for r in housekeeping.listing(world.project)}
    for kind, path in broken.items():
        assert rows[path].state == "broken", (kind, rows[path])
        assert f"rm -rf {path}" in rows[path].detail, (kind, rows[path].detail)
    capsys.readouterr()
    assert main(["envs", "prune", "--project", str(world.project)]) == 0
    out = capsys.readouterr().out
    for kind, path in broken.items():
        assert path.exists() and f"left {path} (broken)" in out, (kind, out)
    assert not stale.exists() and not (venvs / f".{stale.name}.lock").exists(), out
    assert f"removed {stale}" in out


def test_prune_removes_free_lock_files_and_leaves_held_ones(world, tmp_path, monkeypatch):
    """A key's lock file with no environment, and a bundle destination's pack lock, are removed when nobody holds
    them; one held (a build or a pack starting now) stays, and so does the lock of a key whose environment is there."""
    from nemo_rl import locks
    from nemo_rl.workers import housekeeping

    venvs, bundles_dir = tmp_path / "venvs", tmp_path / "bundles"
    bundles_dir.mkdir()
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", str(bundles_dir))
    fake_env(venvs / ("2" * 24))
    lock = {name: root / name for root, name in ((venvs, f".{'2' * 24}.lock"), (venvs, f".{'3' * 24}.lock"),
                                                 (venvs, f".{'4' * 24}.lock"), (bundles_dir, ".b1.pack-lock"),
                                                 (bundles_dir, ".b2.pack-lock"))}
    lock["not a key's"] = venvs / ".notes.lock"  # a user's own file in the directory: not ours to remove
    for path in lock.values():
        path.write_text("")
    held = [locks.lock_file(lock[f".{'4' * 24}.lock"], None), locks.lock_file(lock[".b2.pack-lock"], None)]
    try:
        removed = housekeeping.prune(world.project)
    finally:
        for fd in held:
            os.close(fd)
    assert set(removed) == {lock[f".{'3' * 24}.lock"], lock[".b1.pack-lock"]}, removed
    assert {p.name for p in lock.values() if p.exists()} == {f".{'2' * 24}.lock", f".{'4' * 24}.lock",
                                                              ".b2.pack-lock", ".notes.lock"}


def test_a_lock_file_removed_while_another_waits_for_it_is_never_held_twice(tmp_path):
    """The race a removed lock file invites: B opened the file and waits for its lock; A, holding it, removes it.
    B must then lock the file the path names now, never the removed one (a third process would lock the new
    file and both would build one key)."""
    import threading

    from nemo_rl import locks

    path = tmp_path / ".k.lock"
    first = locks.lock_file(path, None)
    got: list[int] = []
    waiter = threading.Thread(target=lambda: got.append(locks.lock_file(path, lambda fd: "waiting")))
    waiter.start()
    deadline = time.monotonic() + 20
    while not any(f"-> {path}" in line for line in _open_files()) and time.monotonic() < deadline:
        time.sleep(0.01)  # until the waiter has the file open (then it polls for the lock)
    time.sleep(0.3)
    assert locks.remove_locked(path, first)
    os.close(first)
    waiter.join(20)
    assert got and os.fstat(got[0]).st_ino == os.stat(path).st_ino  # the file the path names, not the removed one
    third = locks.lock_file(path, None)
    assert third is None  # so a third process waits instead of locking a second file
    os.close(got[0])


def _open_files() -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.append(f"{fd} -> {os.readlink(f'/proc/self/fd/{fd}')}")
        except OSError:
            continue
    return found
