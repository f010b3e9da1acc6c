"""State and record files a co-user could plant (a shared NEMO_RL_VENV_DIR, a bundle directory) are read by one
reader that a FIFO, a device, a link or a huge file cannot hang, flood or redirect; and a worker environment
another checkout at the same path wrote is never this checkout's to change (issue 24, second review)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakes import FLAGS, deps, fake_bundle, fake_env

from nemo_rl import values
from nemo_rl.errors import NemoRLError
from nemo_rl.project import develop_state
from nemo_rl.workers import bundle_copy, bundles, environments, housekeeping

HANG_S = 60  # a read that blocks on a FIFO never returns: far past any honest run of these commands


def _python(code: str, env: dict[str, str]) -> tuple[int, str]:
    """`code` in a fresh interpreter, so that a read which would block forever fails the test instead of the run."""
    try:
        done = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True,
                              text=True, timeout=HANG_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung on a planted FIFO: {code}")
    return done.returncode, done.stdout + done.stderr


def _cli(world, env: dict[str, str], *args: str) -> tuple[int, str]:
    argv = [*args, "--project", str(world.project)]
    return _python(f"import sys; from nemo_rl.cli import main; sys.exit(main({argv!r}))", env)


# --- the one reader -----------------------------------------------------------------------------------------------

def test_the_reader_refuses_what_is_not_a_plain_file(tmp_path):
    fifo, link, big = tmp_path / "fifo", tmp_path / "link", tmp_path / "big"
    os.mkfifo(fifo)
    (tmp_path / "real").write_text("{}")
    link.symlink_to(tmp_path / "real")
    big.write_bytes(b"x" * 101)
    for path, said in ((fifo, "not a regular file"), (Path("/dev/null"), "not a regular file"),
                       (link, "symbolic link"), (big, "larger than 100 bytes")):
        with pytest.raises(values.NotAPlainFile, match=said):
            values.read_plain_file(path, 100)
    assert values.read_plain_file(tmp_path / "real", 100) == b"{}"
    with pytest.raises(FileNotFoundError):
        values.read_plain_file(tmp_path / "absent")


def test_the_reader_checks_the_file_it_opened(tmp_path, monkeypatch):
    """A file swapped for a FIFO between the look and the open is refused (O_NONBLOCK: the open does not block)."""
    (tmp_path / "plain").write_text("{}")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    real_lstat = os.lstat
    monkeypatch.setattr(values.os, "lstat", lambda p: real_lstat(tmp_path / "plain") if p == fifo else real_lstat(p))
    with pytest.raises(values.NotAPlainFile, match="replaced"):
        values.read_plain_file(fifo)


# --- each state file a co-user can plant --------------------------------------------------------------------------

def test_a_fifo_worker_metadata_is_broken_not_a_hang(world, tmp_path):
    venvs = tmp_path / "venvs"
    (venvs / "evil").mkdir(parents=True)
    os.mkfifo(venvs / "evil" / environments.META)
    code, out = _cli(world, {"NEMO_RL_VENV_DIR": str(venvs)}, "envs", "list")
    assert code == 0 and "broken" in out and "not a regular file" in out, out


def test_a_fifo_bundle_manifest_is_refused_not_a_hang(world, tmp_path):
    bundle = fake_bundle(world, tmp_path / "bundles" / "b")
    (bundle / bundles.MANIFEST).unlink()
    os.mkfifo(bundle / bundles.MANIFEST)
    code, out = _python(f"from pathlib import Path; from nemo_rl.workers import manifests; "
                        f"manifests.read_manifest(Path({str(bundle)!r}))", {})
    assert code != 0 and "NemoRLError" in out and "not a regular file" in out, out


def test_a_fifo_cuda_record_is_refused_not_a_hang(world, tmp_path):
    bundle = fake_bundle(world, tmp_path / "b")
    (bundle / bundles.cuda_archs.SIDECAR).unlink()
    os.mkfifo(bundle / bundles.cuda_archs.SIDECAR)
    code, out = _python(f"from pathlib import Path; from nemo_rl.workers import cuda_archs; "
                        f"cuda_archs.read_record(Path({str(bundle)!r}))", {})
    assert code != 0 and "NemoRLError" in out and "not a regular file" in out, out


@pytest.mark.parametrize("where", ["worker", "driver"])
def test_a_fifo_overlay_never_hangs_stop(world, tmp_path, where):
    """A FIFO at an overlay's name, in a planted worker environment naming this checkout or in the driver's own."""
    venvs, driver = tmp_path / "venvs", fake_env(tmp_path / "driver")
    env = {"NEMO_RL_VENV_DIR": str(venvs), "UV_PROJECT_ENVIRONMENT": str(driver)}
    assert _cli(world, env, "deps", "develop", "megatron-core")[0] == 0
    planted = driver
    if where == "worker":
        planted = fake_env(venvs / "evil")
        (planted / environments.META).write_text(json.dumps({"key": "evil", "flags": [], "lock_hash": "x",
                                                             "project": str(world.project)}))
    site = next(planted.rglob("site-packages"))
    (site / develop_state.overlay_name("megatron-core")).unlink(missing_ok=True)
    os.mkfifo(site / develop_state.overlay_name("megatron-core"))
    code, out = _cli(world, env, "deps", "status", "--env", str(planted))  # which overlays are live
    assert code in (0, 1) and "Traceback" not in out, out
    code, out = _cli(world, env, "deps", "develop", "--stop", "megatron-core")
    assert code == 0, out


# --- whose worker environment it is -------------------------------------------------------------------------------

@pytest.mark.skipif(os.getuid() != 0, reason="making a directory of another user needs root")
def test_stop_leaves_another_users_worker_environment_alone(world, tmp_path, monkeypatch):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(fake_env(tmp_path / "driver")))
    theirs = fake_env(venvs / "theirs")
    (theirs / environments.META).write_text(json.dumps({"key": "theirs", "flags": [], "lock_hash": "x",
                                                        "project": str(world.project)}))
    assert deps(world, "develop", "megatron-core") == 0
    develop_state.install_overlay(theirs, "megatron-core", tmp_path / "co",
                                  develop_state.shadow_dir(world.project, "megatron-core"))  # tokenless: anyone's
    os.chown(theirs, 54321, -1)
    assert deps(world, "develop", "--stop", "megatron-core") == 0
    assert develop_state.has_overlay(theirs, "megatron-core")


def test_an_overlay_that_cannot_be_removed_is_the_users_to_fix(tmp_path, monkeypatch):
    env = fake_env(tmp_path / "env")
    develop_state.install_overlay(env, "megatron-core", tmp_path / "co", tmp_path / "shadow")

    def refused(self, missing_ok=False):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "unlink", refused)
    with pytest.raises(NemoRLError, match="cannot remove the overlay"):
        develop_state.remove_overlay(env, "megatron-core")


def test_a_checkout_at_the_same_path_in_another_container_keeps_its_environments(world, tmp_path, monkeypatch):
    """Containers A and B at one checkout path share NEMO_RL_VENV_DIR; /proc in B does not show A's workers. A's
    environment carries A's develop token: B lists it as another checkout's and never prunes it."""
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(fake_env(tmp_path / "driver")))
    assert deps(world, "develop", "megatron-core") == 0
    key_a = "0" * 24  # stale to B: not the key of B's uv.lock
    env_a = fake_env(venvs / key_a)
    (env_a / environments.META).write_text(json.dumps({"key": key_a, "flags": FLAGS, "lock_hash": "x",
                                                       "project": str(world.project)}))
    environments._overlay_developed(world.project, env_a)  # A's token
    state = develop_state.read(world.project)  # B: the same path, its own .nemo-rl
    develop_state.write(world.project, {d: e.__class__(e.distribution, e.checkout, e.managed, e.envs,
                                                       develop_state.new_token()) for d, e in state.items()})
    rows = {r.path: r for r in housekeeping.listing(world.project)}
    assert rows[env_a].state == "other checkout"
    assert "another container's checkout at this path" in (rows[env_a].detail or "")
    assert env_a not in housekeeping.prune(world.project) and env_a.exists()
    develop_state.write(world.project, state)  # A itself: its own environment, stale, is pruned
    assert housekeeping.listing(world.project)[0].state == "stale"


# --- tokens -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("token", ["ab\n", "\n"])
def test_a_token_with_a_newline_is_refused(world, tmp_path, monkeypatch, token):
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(fake_env(tmp_path / "env")))
    assert deps(world, "develop", "megatron-core") == 0
    path = world.project / develop_state.STATE
    data = json.loads(path.read_text())
    data["megatron-core"]["token"] = token
    path.write_text(json.dumps(data))
    with pytest.raises(NemoRLError, match="token must be hex digits"):
        develop_state.read(world.project)
    with pytest.raises(ValueError, match="not hex"):
        develop_state.install_overlay(fake_env(tmp_path / "w"), "megatron-core", tmp_path, tmp_path, token)


def test_an_empty_owner_line_is_nobodys_not_tokenless(tmp_path):
    env = fake_env(tmp_path / "env")
    path = develop_state.install_overlay(env, "megatron-core", tmp_path / "co", tmp_path / "shadow", "ab" * 16)
    assert develop_state.overlay_owner(path) == "ab" * 16
    path.write_text(path.read_text().replace("ab" * 16, ""))
    assert develop_state.overlay_owner(path) is None
    assert not develop_state.remove_overlay(env, "megatron-core", "") and path.exists()
    path.write_text("".join(line for line in path.read_text().splitlines(True) if "owner" not in line))
    assert develop_state.overlay_owner(path) == ""  # written before tokens


# --- a bundle changed after its check -----------------------------------------------------------------------------

def test_a_fifo_planted_after_the_check_is_named(world, tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    bundle = fake_bundle(world, tmp_path / "bundle")
    bundles.check(bundle, world.project, FLAGS)
    os.mkfifo(bundle / bundles.CACHE / "simple-v1" / "pipe")
    with pytest.raises(NemoRLError, match="cannot copy .*pipe"):
        bundles.sync_from(bundle, world.project, FLAGS, tmp_path / "env")
    venvs = tmp_path / "venvs"
    assert [p.name for p in venvs.iterdir()] == [bundle_copy.node_lock(venvs).name]  # only the node's lock


def test_stop_says_a_deleted_checkout_is_gone(world, tmp_path, monkeypatch, capsys):
    import shutil

    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(fake_env(tmp_path / "env")))
    assert deps(world, "develop", "megatron-core") == 0
    checkout = develop_state.read(world.project)["megatron-core"].checkout
    shutil.rmtree(checkout)
    capsys.readouterr()
    assert deps(world, "develop", "--stop", "megatron-core") == 0
    out = capsys.readouterr().out
    assert f"the checkout {checkout} is already gone" in out and "stays at" not in out, out


def test_an_archive_pointer_is_keyed_by_its_path_and_every_hash_counts(tmp_path):
    """uv reads the pointer at `<name>/<stem>.http` whatever file name is written inside it; with two hash
    entries it may take either."""
    from fakes import LOCK, uv_pointer
    from fakes import msgpack_str as _mp

    from nemo_rl.workers import archive_hashes

    project, cache = tmp_path / "project", tmp_path / "cache"
    project.mkdir()
    wheel = "1" * 64
    (project / "uv.lock").write_text(LOCK.format(wheel=wheel, sdist="2" * 64))
    pointer = cache / "wheels-v8/pypi/tiny-pkg/1.0-py3-none-any.http"
    pointer.parent.mkdir(parents=True)
    pointer.write_bytes(uv_pointer("A1", wheel, "tiny_pkg-1.0-py3-none-any.whl"))
    assert archive_hashes.check(cache, project, "bundle b")[0] == 1
    pointer.write_bytes(uv_pointer("A1", "0" * 64, "not_in_lock-1.0-py3-none-any.whl"))
    with pytest.raises(NemoRLError, match="lies where another wheel.s pointer lies: it records .not_in_lock-1.0"):
        archive_hashes.check(cache, project, "bundle b")
    for first, second in ((wheel, "0" * 64), ("0" * 64, wheel)):
        entries = b"".join(bytes([0x81]) + _mp("Sha256") + _mp(h) for h in (first, second))
        pointer.write_bytes(bytes([0x95]) + _mp("A1") + bytes([0x92]) + entries
                            + _mp("tiny_pkg-1.0-py3-none-any.whl") + b"\x00\xc0")
        with pytest.raises(NemoRLError, match=f"records sha256 {'0' * 64}, {wheel}"):
            archive_hashes.check(cache, project, "bundle b")


def test_an_empty_directory_at_the_checkout_is_a_gone_checkout(world, tmp_path, monkeypatch, capsys):
    """The user's clone became an empty directory (a mount that did not come up): no git's raw error."""
    import shutil

    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(fake_env(tmp_path / "env")))
    mine = tmp_path / "my-megatron"
    subprocess.run(["git", "clone", "-q", str(world.forks["megatron-core"].fork), str(mine)], check=True)
    assert deps(world, "develop", "megatron-core", str(mine)) == 0
    shutil.rmtree(mine)
    mine.mkdir()
    capsys.readouterr()
    deps(world, "status")
    out = capsys.readouterr()
    assert "checkout gone" in out.out and "not a git repository" not in out.out + out.err, out


def test_onto_during_a_merge_says_to_finish_it(world, monkeypatch, capsys):
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, "dev" if key.endswith("NAME") else "dev@nemo-rl.invalid")
    assert deps(world, "develop", "megatron-core") == 0
    checkout = develop_state.read(world.project)["megatron-core"].checkout

    def git(*args):
        return subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True)

    conflicted = checkout / "megatron/core/conflict.py"
    git("switch", "-q", "-c", "other")
    conflicted.write_text("A\n")
    git("add", ".")
    git("commit", "-qm", "a")
    git("switch", "-q", "-")
    conflicted.write_text("B\n")
    git("add", ".")
    git("commit", "-qm", "b")
    assert git("merge", "other").returncode != 0  # stopped at the conflict
    capsys.readouterr()
    assert deps(world, "develop", "megatron-core", "--onto", "upstream/main") == 1
    err = capsys.readouterr().err
    assert "a merge is under way" in err and f"git -C {checkout} merge --abort" in err and "stash" not in err, err


# --- settings and arguments ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("end, named", [(" ", "a space"), ("\r", "a carriage return"), ("\t", "a tab")])
def test_a_bundle_dir_with_whitespace_is_named(world, tmp_path, monkeypatch, capsys, end, named):
    from nemo_rl.cli import main

    (tmp_path / "bundles").mkdir()
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", str(tmp_path / "bundles") + end)
    capsys.readouterr()
    assert main(["envs", "list", "--project", str(world.project)]) == 1
    err = capsys.readouterr().err
    assert f"ends with {named}" in err and repr(str(tmp_path / "bundles") + end) in err, err


@pytest.mark.parametrize("quote", ['"', "'"])
def test_a_quoted_digest_says_to_drop_the_quotes(quote):
    with pytest.raises(NemoRLError, match="in quotes: drop them"):
        values.bundle_digest(f"{quote}sha256:{'ab' * 32}{quote}", "--digest")


def test_a_decimal_timeout_is_refused_by_its_type():
    from decimal import Decimal

    with pytest.raises(NemoRLError, match="is a Decimal, not a real number"):
        values.timeout_seconds(Decimal("30"), "t")


# --- working caches left without a marker -------------------------------------------------------------------------

def test_an_empty_unmarked_working_cache_is_a_killed_builds(world, tmp_path, monkeypatch):
    import tempfile

    from nemo_rl.workers import bundle_trust

    venvs = tmp_path / "venvs"
    venvs.mkdir()
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    killed = Path(tempfile.mkdtemp(prefix=bundle_trust.WORK_CACHE_PREFIX, dir=venvs))  # SIGKILL before the marker
    assert bundle_trust.why_not_ours(killed) is None
    assert killed in housekeeping.prune(world.project) and not killed.exists()
    (venvs / f"{bundle_trust.WORK_CACHE_PREFIX}planted").mkdir()
    (venvs / f"{bundle_trust.WORK_CACHE_PREFIX}planted" / "x").write_text("x")
    assert bundle_trust.why_not_ours(venvs / f"{bundle_trust.WORK_CACHE_PREFIX}planted")  # not empty: not ours
