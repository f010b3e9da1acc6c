"""Lock files (nemo_rl/locks.py): never written through a planted link, readable by their owner only, never held
twice when swapped, and a filesystem that cannot lock is the user's to fix."""

from __future__ import annotations

import os
import time

import pytest
from fakes import deps

from nemo_rl import locks
from nemo_rl.errors import NemoRLError
from nemo_rl.workers import environments


@pytest.mark.parametrize("planted", ["symlink", "hardlink", "directory"])
def test_a_planted_lock_file_is_never_written_through(tmp_path, planted):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    root = tmp_path / "venvs"
    root.mkdir()
    where = environments.Slot(root, "k")
    if planted == "symlink":
        where.lock_path.symlink_to(victim)
    elif planted == "hardlink":
        os.link(victim, where.lock_path)
    else:
        where.lock_path.mkdir()
    with pytest.raises(NemoRLError, match=f"lock file {where.lock_path}"):
        with where.locked():
            pass
    assert victim.read_text() == "precious"
    missing = tmp_path / "gone.txt"
    (root / ".j.lock").symlink_to(missing)  # a dangling link: O_CREAT would make the target
    with pytest.raises(NemoRLError, match="symbolic link"):
        with environments.Slot(root, "j").locked():
            pass
    assert not missing.exists()


def test_a_filesystem_without_locks_is_the_users_to_fix(world, no_lockd, capsys):
    for args in (["recover"], ["develop", "--stop", "megatron-core"], ["patches", "megatron-core"]):
        assert deps(world, *args) == 1, args
        err = capsys.readouterr().err
        assert f"cannot lock {world.project}" in err and "does not support locks" in err, err
    assert locks.held(world.project)  # a probe never raises: what it cannot tell is held, so nothing acts on it


def test_a_lock_file_only_its_owner_may_open(tmp_path):
    """flock needs only a descriptor: a lock file another user may read is one they may hold for ever (a build
    waiting with no end). Made 0600 whatever the umask, and an older one of ours made so when opened."""
    from nemo_rl import locks

    old = os.umask(0o002)
    try:
        fd = locks.open_lock_file(tmp_path / "new.lock")
    finally:
        os.umask(old)
    os.close(fd)
    assert (tmp_path / "new.lock").stat().st_mode & 0o777 == 0o600
    older = tmp_path / "older.lock"
    older.write_text("pid 1\n")
    older.chmod(0o644)
    os.close(locks.open_lock_file(older))
    assert older.stat().st_mode & 0o777 == 0o600

    if os.geteuid() != 0:  # root opens a read-only file anyway
        older.chmod(0o400)
        with pytest.raises(NemoRLError, match="is yours but not writable") as refused:
            locks.open_lock_file(older)
        assert f"chmod 600 {older}" in refused.value.remedy
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


def test_a_lock_file_swapped_each_time_it_is_locked_ends_in_an_error(tmp_path, monkeypatch):
    """lock_file locks again when its file was removed meanwhile; a path that never names the file locked (a
    co-user swapping it in a shared directory) must not spin the command for ever."""
    from nemo_rl import locks

    calls = []

    def never_names(path, fd):
        calls.append(fd)
        assert len(calls) < 10 * locks.LOCK_FILE_TRIES, "lock_file spins on a path that never names its file"
        return False

    monkeypatch.setattr(locks, "_names", never_names)
    with pytest.raises(NemoRLError, match=f"was replaced {locks.LOCK_FILE_TRIES} times"):
        locks.lock_file(tmp_path / ".k.lock", None)
    assert len(calls) == locks.LOCK_FILE_TRIES


@pytest.mark.skipif(os.geteuid() != 0, reason="a link owned by another user needs root (lchown)")
def test_a_planted_lock_file_link_is_named_whatever_errno_the_kernel_gives(tmp_path):
    """In a 1777 directory (a shared NEMO_RL_BUNDLE_DIR) some kernels refuse O_CREAT|O_NOFOLLOW on a co-user's link
    with EACCES, not ELOOP: the refusal names the link (and its owner where it is that answer), never only the
    directory."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    lock = shared / ".bundle.pack-lock"
    victim = tmp_path / "victim"
    victim.write_text("mine\n")
    lock.symlink_to(victim)
    os.lchown(lock, 54321, 54321)
    with pytest.raises(NemoRLError, match=f"lock file {lock} is a symbolic link"):
        locks.open_lock_file(lock)
    assert victim.read_text() == "mine\n" and lock.is_symlink()
