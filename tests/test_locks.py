"""Lock files (locks.py): never written through a planted link, hard link or directory, made readable by their
owner only, and a filesystem that cannot lock is the user's to fix (exit 1)."""

import os

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
