"""The hostile review of "Never hangs, never trusts": a deleted checkout, two containers with one checkout path,
planted working caches, advice that must work when followed, digests as sites spell them, hard links inside one
bundle, one timeout rule, an empty NEMO_RL_BUNDLE_DIR, and index archives against uv.lock's own hashes."""

import dataclasses
import json
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from fakes import FLAGS, LOCK, deps, fake_bundle, fake_env, fork_state, uv_pointer
from gitfixtures import git

from nemo_rl import values
from nemo_rl.cli import main
from nemo_rl.errors import NemoRLError
from nemo_rl.project import develop_state
from nemo_rl.workers import archive_hashes, bundle_trust, bundles, environments, housekeeping

DIGEST = "sha256:" + "ab12" * 16


def _status_row(world, env, capsys) -> dict:
    capsys.readouterr()
    assert deps(world, "status", "--json", "--env", str(env)) == 0
    return {r["distribution"]: r for r in json.loads(capsys.readouterr().out)["forks"]}["megatron-core"]


# --- 1. a deleted checkout ----------------------------------------------------------------------------------------

def test_a_deleted_checkout_is_said_to_be_gone(world, tmp_path, monkeypatch, capsys):
    from nemo_rl.doctor import report

    env = fake_env(tmp_path / "env")
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    mine = tmp_path / "my-megatron"
    subprocess.run(["git", "clone", "-q", str(world.forks["megatron-core"].fork), str(mine)], check=True)
    assert deps(world, "develop", "megatron-core", str(mine)) == 0
    assert fork_state(world, env, capsys) == "developing"
    shutil.rmtree(mine)  # the user's own clone, deleted: the overlay's links lead nowhere and the pin runs
    assert develop_state.active_checkout(env, "megatron-core") is None
    row = _status_row(world, env, capsys)
    assert row["state"] == "checkout gone", row
    assert f"the develop checkout {mine} is gone" in row["remedy"]
    assert "deps develop --stop megatron-core" in row["remedy"]
    assert deps(world, "status", "--check", "--env", str(env)) == 1
    assert any(f"its checkout {mine} is gone" in note for note in report.develop_notes(world.project))
    capsys.readouterr()
    assert deps(world, "develop", "megatron-core", str(tmp_path / "another")) == 1
    assert "which is gone" in capsys.readouterr().err
    assert deps(world, "develop", "--stop", "megatron-core") == 0  # the fix it gives works
    assert fork_state(world, env, capsys) == "not installed" and not list(env.rglob("*.pth"))


# --- 2. two containers, one checkout path, one NEMO_RL_VENV_DIR ---------------------------------------------------

def test_two_containers_with_one_checkout_path_keep_their_own_overlays(world, tmp_path, monkeypatch):
    """Container A and container B run the same checkout path against a shared NEMO_RL_VENV_DIR; each has its own
    .nemo-rl (its own develop state). B's --stop must leave A's worker environment as A made it."""
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(fake_env(tmp_path / "driver")))
    assert deps(world, "develop", "megatron-core") == 0
    state_a = develop_state.read(world.project)
    key_a = environments.key_for(world.project, FLAGS)

    def worker_env(name: str) -> Path:
        env = fake_env(venvs / name)
        (env / environments.META).write_text(json.dumps({"key": name, "flags": FLAGS, "project": str(world.project),
                                                         "lock_hash": "x"}))
        environments._overlay_developed(world.project, env)  # what a build does while the fork is developed
        return env

    env_a = worker_env("a")
    # container B: the same path, its own .nemo-rl (here: develop.json as B's `develop` writes it)
    develop_state.write(world.project, {"megatron-core": dataclasses.replace(state_a["megatron-core"],
                                                                             token=develop_state.new_token())})
    assert environments.key_for(world.project, FLAGS) != key_a  # B's workers never reuse A's environment
    env_b = worker_env("b")
    assert deps(world, "develop", "--stop", "megatron-core") == 0  # B stops
    assert develop_state.has_overlay(env_a, "megatron-core"), "B stripped A's overlay"
    assert not develop_state.has_overlay(env_b, "megatron-core")
    assert develop_state.overlay_owner(next(env_a.rglob("*.pth"))) == state_a["megatron-core"].token


def test_stop_without_state_leaves_other_containers_overlays(world, tmp_path, monkeypatch):
    """`rm -rf .nemo-rl` loses the token: the overlays that carry one may be another container's, and are left."""
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    env = fake_env(venvs / "w")
    (env / environments.META).write_text(json.dumps({"key": "w", "flags": [], "project": str(world.project),
                                                     "lock_hash": "x"}))
    develop_state.install_overlay(env, "megatron-core", tmp_path / "co", tmp_path / "shadow", "cd" * 16)
    develop_state.install_overlay(fake_env(tmp_path / "own"), "megatron-core", tmp_path / "co", tmp_path / "shadow")
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(tmp_path / "own"))
    assert deps(world, "develop", "--stop", "megatron-core") == 0
    assert develop_state.has_overlay(env, "megatron-core")
    assert not develop_state.has_overlay(tmp_path / "own", "megatron-core")


# --- 3. planted working caches ------------------------------------------------------------------------------------

def test_only_working_caches_we_made_are_counted_or_removed(world, tmp_path, monkeypatch, capsys):
    venvs = tmp_path / "venvs"
    venvs.mkdir()
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious").write_text("mine")
    (venvs / f"{bundles.WORK_CACHE_PREFIX}link").symlink_to(victim)  # planted: a link to someone's directory
    plain = venvs / f"{bundles.WORK_CACHE_PREFIX}plain"  # a directory with the name, not made by nemo-rl
    (plain / bundles.CACHE).mkdir(parents=True)
    (plain / "notes").write_text("someone's")
    planted = {venvs / f"{bundles.WORK_CACHE_PREFIX}link": "a symbolic link", plain: "no nemo-rl-work-cache file"}
    if os.geteuid() == 0:  # another user's, marker and all (only root can make one here)
        theirs, held_theirs = bundle_trust.new_work_cache(venvs)
        os.close(held_theirs)
        for path in (theirs, theirs / bundle_trust.MARKER):
            os.chown(path, 4242, 4242)
        planted[theirs] = "owned by uid 4242"
    ours, held = bundle_trust.new_work_cache(venvs)
    os.close(held)  # a killed build's
    rows = {row.path: row for row in housekeeping.listing(world.project)}
    assert rows[ours].state == "unfinished build"
    for path, why in planted.items():
        assert rows[path].state == "not ours" and why in rows[path].detail, rows[path]
    assert housekeeping.prune(world.project) == [ours]
    assert (victim / "precious").read_text() == "mine" and (plain / "notes").exists()
    assert all(path.exists() or path.is_symlink() for path in planted)


# --- 4. advice that works when followed ---------------------------------------------------------------------------

def test_the_stash_advice_of_onto_works_when_followed(world, monkeypatch, capsys):
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, "dev" if key.endswith("NAME") else "dev@nemo-rl.invalid")
    assert deps(world, "develop", "megatron-core") == 0
    checkout = world.project / ".nemo-rl/develop/megatron-core"
    (checkout / "megatron/core/feature.py").write_text("FEATURE = 2  # unsaved\n")
    (checkout / "notes.txt").write_text("untracked\n")
    capsys.readouterr()
    assert deps(world, "develop", "megatron-core", "--onto", "upstream/main") == 1
    err = capsys.readouterr().err
    advice = re.findall(r"`(git -C [^`]+)`", err)
    assert len(advice) == 2 and "stash push" in advice[0] and "stash pop" in advice[1], err
    subprocess.run(shlex.split(advice[0]), check=True, capture_output=True)  # as the user would type it
    assert deps(world, "develop", "megatron-core", "--onto", "upstream/main") == 0, capsys.readouterr().err
    subprocess.run(shlex.split(advice[1]), check=True, capture_output=True)
    assert (checkout / "megatron/core/feature.py").read_text() == "FEATURE = 2  # unsaved\n"
    assert (checkout / "notes.txt").read_text() == "untracked\n"
    assert git(checkout, "branch", "--show-current").startswith("rebase/megatron-core-onto-")


# --- 5. digests as sites spell them -------------------------------------------------------------------------------

@pytest.mark.parametrize(("given", "expected"), [
    (DIGEST, DIGEST), (DIGEST.upper(), DIGEST), ("  " + DIGEST + "\n", DIGEST), (DIGEST[7:].upper(), DIGEST)])
def test_a_digest_in_either_case_is_one_digest(given, expected):
    assert values.bundle_digest(given, "--digest") == expected


@pytest.mark.parametrize(("given", "message"), [
    ("sha256:" + "ab12" * 8 + " " + "ab12" * 8, "one digest is one word"), ("md5:" + "0" * 32, "not a bundle digest"),
    (DIGEST + "0", "not a bundle digest"), ("sha256:", "not a bundle digest")])
def test_a_digest_that_is_not_one_is_refused_by_name(given, message):
    with pytest.raises(NemoRLError, match=message) as refused:
        values.bundle_digest(given, "--digest")
    assert "64 hex digits" in refused.value.remedy


def test_digest_lists_take_commas_semicolons_and_spaces(world, tmp_path, monkeypatch, capsys):
    other = "sha256:" + "0" * 64
    assert values.bundle_digests(f"{other};{DIGEST.upper()} ,\t{DIGEST}", "X") == {other, DIGEST}
    with pytest.raises(NemoRLError, match="space after a colon"):
        values.bundle_digests("sha256: " + DIGEST[7:], "X")
    bundle = fake_bundle(world, tmp_path / "bundles" / "b")
    pinned = bundles.read_manifest(bundle).digest
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", str(bundle.parent))
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIGESTS", f"{other}; {pinned.upper()}")
    assert bundles.find(world.project, FLAGS) == bundle
    assert bundles.check(bundle, world.project, FLAGS, pinned.upper()).digest == pinned
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["envs", "build", "--help"])
    assert "semicolons" in capsys.readouterr().out


# --- 6. hard links inside one bundle ------------------------------------------------------------------------------

def test_hard_links_between_files_of_one_bundle_are_copied_apart(world, tmp_path, monkeypatch):
    """What `cp -a`, `rsync -H` or a deduplicating tool leaves (one inode, two names) is a bundle like any: the
    node copies each name, so the copy shares no inode with the bundle, however many names that inode has."""
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    files = {"archive-v0/abc/a.py": "X = 1\n", "archive-v0/def/a.py": "X = 1\n", "simple-v1/index": "i\n"}
    bundle = fake_bundle(world, tmp_path / "bundle", files)
    one, two = (bundle / bundles.CACHE / name for name in ("archive-v0/abc/a.py", "archive-v0/def/a.py"))
    two.unlink()
    os.link(one, two)
    os.link(one, tmp_path / "outside.py")  # and the same inode outside the bundle too
    manifest = bundles.check(bundle, world.project, FLAGS)
    inodes = []
    monkeypatch.setattr(bundles.uv, "sync", lambda *a, extra_env, **k: inodes.extend(
        os.stat(Path(extra_env["UV_CACHE_DIR"]) / name).st_ino for name in files))
    bundles.sync_from(bundle, world.project, FLAGS, tmp_path / "env", manifest)
    assert len(set(inodes)) == 3 and os.stat(one).st_ino not in inodes


# --- 7. one timeout rule; an empty NEMO_RL_BUNDLE_DIR -------------------------------------------------------------

@pytest.mark.parametrize("timeout", [1e10, 10**400, 0, float("nan")])
def test_one_timeout_rule_for_every_api(timeout):
    from nemo_rl import imports, process
    from nemo_rl.workers import ray_actors

    for call in (lambda: imports.check(Path(sys.executable), ["json"], timeout=timeout),
                 lambda: ray_actors.wait_ready(None, None, timeout=timeout),
                 lambda: process.run(["true"], timeout=timeout)):
        with pytest.raises(NemoRLError, match=r"not a number of seconds above zero \(and at most 1e\+09\)"):
            call()
    assert process.run(["true"], timeout=values.TIMEOUT_MAX_S).returncode == 0


@pytest.mark.parametrize("setting", ["", "  "])
def test_an_empty_bundle_dir_is_refused_everywhere_it_is_read(world, tmp_path, monkeypatch, capsys, setting):
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", setting)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    for read in (lambda: bundles.find(world.project, FLAGS), bundles.configured, housekeeping._prune_packs,
                 lambda: housekeeping.bundle_rows(world.project)):
        with pytest.raises(NemoRLError, match="NEMO_RL_BUNDLE_DIR is set but empty") as refused:
            read()
        assert "unset NEMO_RL_BUNDLE_DIR" in refused.value.remedy
    for verb in ("list", "prune"):
        capsys.readouterr()
        assert main(["envs", verb, "--project", str(world.project)]) == 1
        assert "set but empty" in capsys.readouterr().err


# --- 8. index archives against uv.lock's hashes -------------------------------------------------------------------







def test_index_archives_carry_uv_locks_hashes(tmp_path):
    project, cache = tmp_path / "project", tmp_path / "cache"
    project.mkdir()
    wheel, sdist = "1" * 64, "2" * 64
    (project / "uv.lock").write_text(LOCK.format(wheel=wheel, sdist=sdist))
    pointer = cache / "wheels-v8/pypi/tiny-pkg/1.0-py3-none-any.http"
    revision = cache / "sdists-v11/pypi/tiny-pkg/1.0/revision.http"
    for path in (pointer, revision):
        path.parent.mkdir(parents=True)
    pointer.write_bytes(uv_pointer("A1", wheel, "tiny_pkg-1.0-py3-none-any.whl"))
    revision.write_bytes(uv_pointer("R1", sdist, None))
    other = cache / "wheels-v8/pypi/unlocked/2.0-py3-none-any.http"  # an archive uv.lock does not name
    other.parent.mkdir(parents=True)
    other.write_bytes(uv_pointer("A2", "3" * 64, "unlocked-2.0-py3-none-any.whl"))
    assert archive_hashes.check(cache, project, "bundle b")[0] == 2
    pointer.write_bytes(uv_pointer("A1", "4" * 64, "tiny_pkg-1.0-py3-none-any.whl"))
    with pytest.raises(NemoRLError, match=f"archive of Tiny_Pkg .* records sha256 {'4' * 64}, but uv.lock pins "
                                          f"sha256:{wheel}") as refused:
        archive_hashes.check(cache, project, "bundle b")
    assert "nemo-rl envs pack" in refused.value.remedy
    pointer.write_bytes(uv_pointer("A1", wheel, "tiny_pkg-1.0-py3-none-any.whl"))
    revision.write_bytes(uv_pointer("R1", "5" * 64, None))
    with pytest.raises(NemoRLError, match="tiny-pkg 1.0 sdist"):
        archive_hashes.check(cache, project, "bundle b")


def test_a_node_refuses_a_bundle_whose_archive_uv_lock_never_pinned(world, tmp_path, monkeypatch):
    """Checked on the node's own copy, after its digest: the copy uv reads is the copy checked."""
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    wheel = "6" * 64
    (world.project / "uv.lock").write_text((world.project / "uv.lock").read_text() + "\n" + LOCK.split("\n", 3)[3]
                                           .format(wheel=wheel, sdist="2" * 64))
    name = "wheels-v8/pypi/tiny-pkg/1.0-py3-none-any.http"
    files = {"simple-v1/index": "i\n", name: ""}
    bundle = fake_bundle(world, tmp_path / "bundle", files)
    (bundle / bundles.CACHE / name).write_bytes(uv_pointer("A1", "7" * 64, "tiny_pkg-1.0-py3-none-any.whl"))
    manifest = bundles.read_manifest(bundle)  # the bundle's writer rewrites the manifest too: the digest matches
    count, total, digest = bundles.content_digest(bundle / bundles.CACHE)
    resealed = dataclasses.replace(manifest, files=count, bytes=total, digest="")
    record = (bundle / bundles.cuda_archs.SIDECAR).read_bytes()
    sealed = bundles.bundle_seal.seal(digest, resealed, record)
    raw = json.loads((bundle / bundles.MANIFEST).read_text())
    raw.update({"files": count, "bytes": total, "digest": sealed})
    (bundle / bundles.MANIFEST).write_text(json.dumps(raw))
    synced = []
    monkeypatch.setattr(bundles.uv, "sync", lambda *a, **k: synced.append(a))
    with pytest.raises(NemoRLError, match="uv.lock pins sha256:" + wheel):
        bundles.sync_from(bundle, world.project, FLAGS, tmp_path / "env", bundles.read_manifest(bundle))
    assert synced == [] and manifest.digest != sealed


# --- found by trying the fixes as a careless user and a hostile one would -----------------------------------------

def test_an_empty_digest_is_refused_never_taken_for_no_pin(world, tmp_path, monkeypatch, capsys):
    """`--digest "$DIGEST"` or NEMO_RL_BUNDLE_DIGESTS=$DIGESTS with the variable unset: the site believes it pins."""
    bundle = fake_bundle(world, tmp_path / "bundles" / "b")
    capsys.readouterr()
    assert main(["envs", "build", "BASE", "--from", str(bundle), "--digest", "", "--project", str(world.project)]) == 1
    assert "is not a bundle digest" in capsys.readouterr().err
    with pytest.raises(NemoRLError, match="is not a bundle digest"):
        bundles.check(bundle, world.project, FLAGS, "")
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", str(bundle.parent))
    for setting in ("", " , ;"):
        monkeypatch.setenv("NEMO_RL_BUNDLE_DIGESTS", setting)
        with pytest.raises(NemoRLError, match="NEMO_RL_BUNDLE_DIGESTS is set but holds no digest"):
            bundles.find(world.project, FLAGS)
    monkeypatch.delenv("NEMO_RL_BUNDLE_DIGESTS")
    assert bundles.find(world.project, FLAGS) == bundle


def test_a_fifo_in_a_bundle_is_refused_never_waited_on(world, tmp_path, monkeypatch):
    import threading

    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    bundle = fake_bundle(world, tmp_path / "bundle")
    fifo = bundle / bundles.CACHE / "simple-v1" / "pipe"
    os.mkfifo(fifo)

    def unblock():  # without the check a reader would wait for ever: a writer that comes and goes ends that
        with open(fifo, "wb"):
            pass

    writer = threading.Timer(5, unblock)
    writer.start()
    try:
        manifest = bundles.check(bundle, world.project, FLAGS)  # its manifest only: the copy meets the FIFO
        with pytest.raises(NemoRLError, match="not a regular file"):
            bundles.sync_from(bundle, world.project, FLAGS, tmp_path / "env", manifest)
        with pytest.raises(NemoRLError, match="not a file or a link"):
            bundles.content_digest(bundle / bundles.CACHE)
    finally:
        writer.cancel()
        if writer.is_alive():
            writer.join()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root (mknod)")
def test_a_device_in_a_bundle_is_refused_never_opened(world, tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    bundle = fake_bundle(world, tmp_path / "bundle")
    device = bundle / bundles.CACHE / "simple-v1" / "tape"
    os.mknod(device, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # opening a tape drive rewinds it
    manifest = bundles.check(bundle, world.project, FLAGS)
    opened, real_open = [], os.open
    monkeypatch.setattr(os, "open", lambda path, *a, **k: (opened.append(str(path)), real_open(path, *a, **k))[1])
    with pytest.raises(NemoRLError, match="not a regular file"):
        bundles.sync_from(bundle, world.project, FLAGS, tmp_path / "env", manifest)
    assert str(device) not in opened


def test_a_file_swapped_for_a_fifo_after_the_look_is_refused_by_the_copy(world, tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    bundle = fake_bundle(world, tmp_path / "bundle")
    index = bundle / bundles.CACHE / "simple-v1" / "index"
    manifest = bundles.check(bundle, world.project, FLAGS)
    real_open = os.open

    def swapped(path, *args, **kwargs):  # the bundle's writer wins the race between the look and the open
        if str(path) == str(index) and index.is_file():
            index.unlink()
            os.mkfifo(index)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", swapped)
    with pytest.raises(NemoRLError, match="not a regular file"):
        bundles.sync_from(bundle, world.project, FLAGS, tmp_path / "env", manifest)


def test_one_file_that_cannot_be_copied_ends_the_copy(world, tmp_path, monkeypatch):
    """A bad file among 35,000 is said at once, not after every other file was copied and hashed."""
    from nemo_rl.workers import tree_copy

    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    files = {f"archive-v0/abc/m{i:03}.py": f"X = {i}\n" for i in range(300)}
    bundle = fake_bundle(world, tmp_path / "bundle", {"archive-v0/abc/a.py": "A\n", **files})
    manifest = bundles.check(bundle, world.project, FLAGS)
    (bundle / bundles.CACHE / "archive-v0/abc/a.py").unlink()
    os.mkfifo(bundle / bundles.CACHE / "archive-v0/abc/a.py")
    calls, real = [], tree_copy._copy_file
    monkeypatch.setattr(tree_copy, "_copy_file", lambda *a: (calls.append(a[0]), real(*a))[1])
    with pytest.raises(NemoRLError, match="not a regular file"):
        bundles.sync_from(bundle, world.project, FLAGS, tmp_path / "env", manifest)
    after = len(calls) - 1 - calls.index(str(bundle / bundles.CACHE / "archive-v0/abc/a.py"))
    assert calls[0].endswith("a.py") and after <= 2 * (os.cpu_count() or 1), (after, len(calls))  # under way


def test_a_signal_during_the_node_copy_ends_it_and_leaves_no_copy(world, tmp_path, monkeypatch):
    """A cancelled job sends SIGTERM while gigabytes are copied: it ends within a file, and the copy is removed."""
    from nemo_rl import interrupt
    from nemo_rl.workers import tree_copy

    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    files = {f"archive-v0/abc/m{i:03}.py": f"X = {i}\n" for i in range(100)}
    bundle = fake_bundle(world, tmp_path / "bundle", files)
    manifest = bundles.check(bundle, world.project, FLAGS)
    calls, real = [], tree_copy._copy_file

    def signalled_midway(*args):
        calls.append(args[0])
        if len(calls) == 10:
            interrupt.record(signal.SIGTERM)  # what the handler does when the signal comes
        return real(*args)

    monkeypatch.setattr(tree_copy, "_copy_file", signalled_midway)
    monkeypatch.setattr(interrupt, "_received", [])
    with pytest.raises(interrupt.Interrupted):
        bundles.sync_from(bundle, world.project, FLAGS, tmp_path / "env", manifest)
    assert len(calls) < len(files) and not list(venvs.glob(f"{bundle_trust.NODE_COPY_PREFIX}*"))
    with pytest.raises(interrupt.Interrupted):  # and hashing a bundle (a pack's, a node's) ends the same way
        bundles.content_digest(bundle / bundles.CACHE)
