"""Whose worker environment it is: the checkout that built it (its id, beyond its path: two containers at one
path), the user who owns it, never a link's target; and the last files read from disk through the one safe
reader (the verification record, pyvenv.cfg, the CUDA toolkit's stamp, the fork's pyproject.toml, the patch-id
cache). Issue 24, the third round."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from fakes import env_row, planted_env

from nemo_rl.errors import NemoRLError
from nemo_rl.project import identity
from nemo_rl.workers import environments, housekeeping

HANG_S = 20  # a read of a few bytes takes milliseconds; a FIFO blocks forever






def test_an_environment_another_checkout_at_this_path_built_is_left_to_it(world, tmp_path, monkeypatch):
    """Containers A and B hold different checkouts at one path and share NEMO_RL_VENV_DIR, no develop running:
    A's environment is stale to B's uv.lock, and B's /proc does not show A's workers. Its checkout id says whose."""
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    theirs, ours = "a" * 32, identity.ensure_checkout_id(world.project)
    env_a = planted_env(venvs, "0" * 24, world.project, theirs)
    row = env_row(world.project, env_a)
    assert row.state == "other checkout" and "not this checkout's .nemo-rl/checkout-id" in (row.detail or ""), row
    assert env_a not in housekeeping.prune(world.project) and env_a.exists()
    (world.project / identity.ID_FILE).write_text(theirs + "\n")  # A itself: its own stale environment goes
    assert env_row(world.project, env_a).state == "stale"
    assert env_a in housekeeping.prune(world.project) and not env_a.exists()
    assert ours != theirs


def test_a_checkout_without_an_id_prunes_no_environment_that_has_one(world, tmp_path, monkeypatch):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    env = planted_env(venvs, "0" * 24, world.project, "b" * 32)
    assert identity.checkout_id(world.project) is None
    assert env_row(world.project, env).state == "other checkout"
    assert env not in housekeeping.prune(world.project)
    older = planted_env(venvs, "1" * 24, world.project, None)  # built before ids: this path's, as before
    assert env_row(world.project, older).state == "stale"


@pytest.mark.skipif(os.getuid() != 0, reason="making a directory of another user needs root")
def test_another_users_environment_is_never_pruned(world, tmp_path, monkeypatch):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    env = planted_env(venvs, "0" * 24, world.project, None)  # stale by its metadata
    os.chown(env, 54321, -1)
    row = env_row(world.project, env)
    assert row.state == "not ours" and "owned by uid 54321" in (row.detail or "")
    assert env not in housekeeping.prune(world.project) and (env / environments.META).exists()


def test_a_link_in_the_venv_directory_is_never_followed_or_removed(world, tmp_path, monkeypatch):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    target = planted_env(tmp_path / "elsewhere", "0" * 24, world.project, None)
    venvs.mkdir()
    (venvs / target.name).symlink_to(target)
    row = env_row(world.project, venvs / target.name)
    assert row.state == "not ours" and "symbolic link" in (row.detail or "")
    housekeeping.prune(world.project)
    assert (target / environments.META).exists() and (venvs / target.name).is_symlink()


def test_a_damaged_checkout_id_is_named_and_two_builds_agree_on_a_new_one(tmp_path):
    (tmp_path / identity.ID_FILE).parent.mkdir()
    (tmp_path / identity.ID_FILE).write_text("not hex\n")
    with pytest.raises(NemoRLError, match="not a checkout id"):
        identity.ensure_checkout_id(tmp_path)
    (tmp_path / identity.ID_FILE).unlink()
    made: list[str] = []
    failed: list[BaseException] = []

    def build():
        try:
            made.append(identity.ensure_checkout_id(tmp_path))
        except BaseException as exc:
            failed.append(exc)

    threads = [threading.Thread(target=build) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failed and len(made) == 8
    assert len(set(made)) == 1 and made[0] == identity.checkout_id(tmp_path)
    assert [p.name for p in (tmp_path / identity.ID_FILE).parent.iterdir()] == ["checkout-id"]  # no temporaries


def test_an_id_another_build_linked_first_is_read(tmp_path, monkeypatch):
    """Another build links its id into place after this one read none there: this build's own link then fails,
    and it reads theirs (never calls it damaged, never keeps its own)."""
    theirs, real_link = "a" * 32, os.link

    def link_second(src, dst):
        (tmp_path / identity.ID_FILE).write_text(theirs + "\n")  # the other build, just before this one links
        return real_link(src, dst)

    monkeypatch.setattr(os, "link", link_second)
    assert identity.ensure_checkout_id(tmp_path) == theirs
    assert [p.name for p in (tmp_path / identity.ID_FILE).parent.iterdir()] == ["checkout-id"]  # no temporaries


def test_an_id_linked_in_just_after_the_read_is_read(tmp_path, monkeypatch):
    """Another build links its id right after this one read nothing there: what was read decides (no second look
    that would see a file and call it damaged)."""
    from nemo_rl import values

    theirs, real, reads = "b" * 32, values.read_plain_file, []

    def read_then_linked(path, limit=values.STATE_FILE_MAX):
        reads.append(path)
        try:
            return real(path, limit)
        finally:
            if len(reads) == 1:
                (tmp_path / identity.ID_FILE).parent.mkdir(exist_ok=True)
                (tmp_path / identity.ID_FILE).write_text(theirs + "\n")

    monkeypatch.setattr(values, "read_plain_file", read_then_linked)
    assert identity.ensure_checkout_id(tmp_path) == theirs


def test_a_nemo_rl_link_is_refused_not_read_through(tmp_path):
    """A `.nemo-rl` link (committed by a pull request) to a directory holding someone's id: never this checkout's."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / identity.ID_FILE.name).write_text("c" * 32 + "\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / identity.ID_FILE.parent).symlink_to(elsewhere)
    with pytest.raises(NemoRLError, match="is a symbolic link"):
        identity.ensure_checkout_id(project)
    assert identity.checkout_id(project) is None


def _nemo_rl_removed_after_made(monkeypatch, times: int) -> None:
    """A bump or recover in another terminal removes the empty .nemo-rl right after this build made it."""
    from nemo_rl.project import state_dir

    real, removed = state_dir.state_root, []

    def state_root(project, *, create=False):
        root = real(project, create=create)
        if create and len(removed) < times:
            removed.append(root)
            state_dir.remove_empty(root)
        return root

    monkeypatch.setattr(state_dir, "state_root", state_root)


def test_a_nemo_rl_directory_removed_meanwhile_is_made_again(tmp_path, monkeypatch):
    _nemo_rl_removed_after_made(monkeypatch, times=1)
    made = identity.ensure_checkout_id(tmp_path)
    assert identity.ID.fullmatch(made) and identity.checkout_id(tmp_path) == made


def test_the_last_try_that_links_the_id_returns_it(tmp_path, monkeypatch):
    """Every try but the last lost: the last one's id is read back, not called gone."""
    _nemo_rl_removed_after_made(monkeypatch, times=identity.ATTEMPTS - 1)
    made = identity.ensure_checkout_id(tmp_path)
    assert identity.ID.fullmatch(made) and identity.checkout_id(tmp_path) == made


def test_a_nemo_rl_directory_removed_with_its_files_before_the_link_is_made_again(tmp_path, monkeypatch):
    """`rm -rf .nemo-rl` in another terminal between the id's write and its link: tried again, no raw error."""
    real_link, removed = os.link, []

    def link(source, target, *args, **kwargs):
        if not removed:
            removed.append(source)
            shutil.rmtree(tmp_path / identity.ID_FILE.parent)
        return real_link(source, target, *args, **kwargs)

    monkeypatch.setattr(os, "link", link)
    made = identity.ensure_checkout_id(tmp_path)
    assert removed and identity.checkout_id(tmp_path) == made and identity.ID.fullmatch(made)
    assert sorted(p.name for p in (tmp_path / identity.ID_FILE.parent).iterdir()) == [identity.ID_FILE.name]


def test_a_nemo_rl_directory_removed_every_time_is_a_clear_error(tmp_path, monkeypatch):
    _nemo_rl_removed_after_made(monkeypatch, times=identity.ATTEMPTS)
    with pytest.raises(NemoRLError, match="gone again before it was read") as caught:
        identity.ensure_checkout_id(tmp_path)
    assert "run again once nothing else removes" in caught.value.remedy


@pytest.mark.parametrize("checkout", ["../x", 12345678901234567890123456789012])
def test_a_metadata_checkout_id_that_is_not_hex_is_broken(world, tmp_path, monkeypatch, checkout):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    env = planted_env(venvs, "0" * 24, world.project, checkout)
    row = env_row(world.project, env)
    assert row.state == "broken" and "checkout id" in (row.detail or "")


def test_a_read_only_checkout_builds_without_an_id(tmp_path, monkeypatch):
    """A checkout in an image or on a read-only mount: no id can be written, and none is needed to build."""
    real_mkdir = Path.mkdir

    def read_only(self, *args, **kwargs):
        if self == tmp_path / identity.ID_FILE.parent:
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", read_only)
    assert identity.ensure_checkout_id(tmp_path) == "" and not (tmp_path / identity.ID_FILE.parent).exists()


# --- the last files read from disk --------------------------------------------------------------------------------

def _never_hangs(code: str) -> str:
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung on a planted FIFO: {code}")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_fifo_verification_record_is_no_record(tmp_path):
    from nemo_rl.workers import verified

    os.mkfifo(tmp_path / verified.RECORD)
    assert _never_hangs(f"from pathlib import Path; from nemo_rl.workers import verified; "
                        f"print(verified.read(Path({str(tmp_path)!r})))") == "None"


def test_a_fifo_pyvenv_cfg_gives_this_machines_markers(tmp_path):
    os.mkfifo(tmp_path / "pyvenv.cfg")
    out = _never_hangs(f"from pathlib import Path; from nemo_rl.forks import installed_fork; "
                       f"print(installed_fork._markers(Path({str(tmp_path)!r}))['python_version'])")
    assert out == f"{sys.version_info.major}.{sys.version_info.minor}"


def test_a_fifo_toolkit_stamp_is_no_stamp(tmp_path):
    from nemo_rl.cudakit import assemble

    os.mkfifo(tmp_path / assemble.STAMP)
    assert _never_hangs(f"from pathlib import Path; from nemo_rl.cudakit import assemble; "
                        f"print(assemble._stamp(Path({str(tmp_path)!r})))") == "None"


def test_a_fifo_patch_id_cache_is_an_empty_cache(tmp_path):
    from nemo_rl.forks import patch_ids

    os.mkfifo(tmp_path / patch_ids.CACHE)
    assert _never_hangs(f"from pathlib import Path; from nemo_rl.forks import patch_ids; "
                        f"print(patch_ids._read(Path({str(tmp_path)!r})))") == "{}"


def test_a_forks_pyproject_that_is_a_link_is_refused(tmp_path):
    from nemo_rl.forks import pep517

    (tmp_path / "elsewhere.toml").write_text('[build-system]\nbuild-backend = "setuptools.build_meta"\n')
    (tmp_path / "pyproject.toml").symlink_to(tmp_path / "elsewhere.toml")
    with pytest.raises(NemoRLError, match="not a plain file"):  # a link to /dev/zero would be read forever
        pep517._build_system(tmp_path, "0" * 40)
