"""Paths, links, state files and caches from the filesystem are data (issue: "Never hangs, never trusts"):
a path never becomes code, a planted link is never written through, a staged link is never landed, develop
state says what runs, and a filesystem that cannot lock or a damaged state file is the user's to fix (exit 1)."""

import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakes import FLAGS, deps, fake_bundle, fake_env, fork_state
from gitfixtures import git

from nemo_rl import locks, values
from nemo_rl.cli import main
from nemo_rl.errors import NemoRLError
from nemo_rl.project import develop_state, journal, landing
from nemo_rl.workers import bundle_copy, bundle_pack, bundle_trust, bundles, environments, housekeeping

NEWLINE_PATH = "co\nimport os; os.system('touch PWNED')\n"








# --- 2. paths and links -------------------------------------------------------------------------------------------

def test_a_path_with_a_newline_never_reaches_a_pth(tmp_path):
    env = fake_env(tmp_path / "env")
    for checkout, shadow in ((tmp_path / NEWLINE_PATH, tmp_path / "shadow"), (tmp_path / "co", tmp_path / "a\rb")):
        with pytest.raises(NemoRLError, match="control character"):
            develop_state.install_overlay(env, "megatron-core", checkout, shadow)
    assert not list(env.rglob("*.pth"))
    develop_state.install_overlay(env, "megatron-core", tmp_path / "plain co", tmp_path / "shadow")
    assert len(list(env.rglob("*.pth"))) == 1


def test_a_worker_environment_path_with_a_newline_is_refused(world, tmp_path):
    root = tmp_path / "venvs\nimport os"
    root.mkdir()
    with pytest.raises(NemoRLError, match="control character"):
        environments._build(world.project, [], environments.Slot(root, "k"), "0" * 64)
    assert list(root.iterdir()) == []


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


def test_onto_leaves_a_users_clone_configuration_alone(world, tmp_path, monkeypatch, capsys):
    mine = tmp_path / "my-megatron"
    subprocess.run(["git", "clone", "-q", str(world.forks["megatron-core"].fork), str(mine)], check=True)
    assert deps(world, "develop", "megatron-core", str(mine)) == 0
    config = (mine / ".git" / "config").read_text()
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, "dev" if key.endswith("NAME") else "dev@nemo-rl.invalid")
    assert deps(world, "develop", "megatron-core", "--onto", "upstream/main") == 0, capsys.readouterr().err
    assert (mine / ".git" / "config").read_text() == config
    assert git(mine, "branch", "--show-current").startswith("rebase/megatron-core-onto-")


def test_onto_a_tree_or_blob_makes_no_branch(world, capsys):
    assert deps(world, "develop", "megatron-core") == 0
    checkout = world.project / ".nemo-rl/develop/megatron-core"
    branches, head = git(checkout, "branch", "--list"), git(checkout, "rev-parse", "HEAD")
    tree = git(checkout, "rev-parse", "HEAD^{tree}")
    blob = git(checkout, "rev-parse", "HEAD:pyproject.toml")
    for sha, kind in ((tree, "tree"), (blob, "blob")):
        capsys.readouterr()
        assert deps(world, "develop", "megatron-core", "--onto", sha) == 1
        assert f"is a {kind}, not a commit" in capsys.readouterr().err
        assert git(checkout, "branch", "--list") == branches and git(checkout, "rev-parse", "HEAD") == head


@pytest.mark.parametrize("planted", ["dir-link", "file-link", "link-inside"])
def test_recover_lands_no_staged_link(world, tmp_path, capsys, planted):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("theirs")
    staging = world.project / ".nemo-rl" / "staging-1-x"
    staging.mkdir(parents=True)
    records = world.project / "patches" / "megatron-core"
    before = sorted(p.name for p in records.iterdir())
    if planted == "dir-link":
        (staging / "patches").mkdir()
        (staging / "patches" / "megatron-core").symlink_to(outside)
        moves = ["patches/megatron-core"]
    elif planted == "file-link":
        (staging / "uv.lock").symlink_to(outside / "secret")
        moves = ["uv.lock"]
    else:
        (staging / "patches" / "megatron-core").mkdir(parents=True)
        (staging / "patches" / "megatron-core" / "index.toml").symlink_to(outside / "secret")
        moves = ["patches/megatron-core"]
    (staging / "LANDING.json").write_text(json.dumps({"moves": moves}))
    lock = (world.project / "uv.lock").read_text()
    assert deps(world, "recover") == 1
    assert "is not a file a landing moves" in capsys.readouterr().err
    assert not records.is_symlink() and sorted(p.name for p in records.iterdir()) == before
    assert not (world.project / "uv.lock").is_symlink() and (world.project / "uv.lock").read_text() == lock


def _other_filesystem(project: Path) -> Path:
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK) or os.stat(shm).st_dev == os.stat(project).st_dev:
        pytest.skip("needs /dev/shm on another filesystem than the test's temporary directory")
    import tempfile

    return Path(tempfile.mkdtemp(prefix="nemo-rl-exdev-", dir=shm))


def test_nemo_rl_dir_on_another_filesystem_is_refused_before_staging(world, capsys):
    """A landing renames from .nemo-rl into the project and patches/: a directory it writes on another filesystem
    (a link, a mount) is refused before staging; a .nemo-rl link is refused as a link (never followed), with a fix
    that keeps an interrupted bump's journal, which recover then finishes."""
    import shutil

    elsewhere = _other_filesystem(world.project)
    patches = world.project / "patches"
    moved = world.project / "patches.real"
    try:
        patches.rename(moved)
        patches.symlink_to(elsewhere)
        with pytest.raises(NemoRLError, match="on another filesystem"):
            landing.require_renames(world.project)
        with pytest.raises(NemoRLError, match="on another filesystem"):
            landing.Staging(world.project, ["uv.lock"], [])
        assert [p.name for p in elsewhere.iterdir()] == []
        patches.unlink()
        moved.rename(patches)
        # a journal an older nemo-rl left in a .nemo-rl link: refused, and the fix it gives works
        shutil.rmtree(world.project / ".nemo-rl", ignore_errors=True)
        (world.project / ".nemo-rl").symlink_to(elsewhere)
        staging = elsewhere / "staging-1-x"
        staging.mkdir()
        (staging / "uv.lock").write_text("# landed\n")
        before = {"uv.lock": journal.digest(world.project / "uv.lock")}
        (staging / "LANDING.json").write_text(json.dumps({"moves": ["uv.lock"], "before": before}))
        capsys.readouterr()
        assert deps(world, "recover") == 1
        err = capsys.readouterr().err
        assert "is a symbolic link" in err and "cp -a" in err, err
        fix = re.search(r"`(rm [^`]* && cp -a [^`]*)`", err).group(1)
        subprocess.run(fix, shell=True, check=True)
        assert deps(world, "recover") == 0, capsys.readouterr().err
        assert (world.project / "uv.lock").read_text() == "# landed\n"
    finally:
        if moved.exists():
            patches.unlink(missing_ok=True)
            moved.rename(patches)
        shutil.rmtree(elsewhere, ignore_errors=True)


def test_a_landing_across_filesystems_is_refused_and_the_staged_copy_kept(world, capsys, monkeypatch):
    """A mount inside the project since the landing was staged: the rename fails with EXDEV, and recover says so and
    keeps the staged copy (a copy across filesystems could itself be cut short half-written)."""
    import shutil

    patches = world.project / "patches"
    staging = world.project / ".nemo-rl" / "staging-1-x"
    (staging / "patches").mkdir(parents=True)
    shutil.copytree(patches / "megatron-core", staging / "patches" / "megatron-core")
    before = {"patches/megatron-core": journal.digest(patches / "megatron-core")}
    (staging / "LANDING.json").write_text(json.dumps({"moves": ["patches/megatron-core"], "before": before}))
    real = os.replace

    def across(source, target):
        if str(source).startswith(str(staging)):
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        real(source, target)

    monkeypatch.setattr(os, "replace", across)
    capsys.readouterr()
    assert deps(world, "recover") == 1
    assert "on different filesystems (a mount inside the project); the staged files are kept" in capsys.readouterr().err
    assert (staging / "LANDING.json").exists() and (staging / "patches" / "megatron-core" / "index.toml").exists()
    monkeypatch.setattr(os, "replace", real)
    assert deps(world, "recover") == 0 and not staging.exists()  # the mount gone: it lands


# --- 4. develop state is the truth --------------------------------------------------------------------------------

def test_status_does_not_say_developing_when_the_overlay_is_gone(world, tmp_path, monkeypatch, capsys):
    env = fake_env(tmp_path / "env")
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    assert deps(world, "develop", "megatron-core") == 0
    assert fork_state(world, env, capsys) == "developing"
    import shutil

    shutil.rmtree(develop_state.shadow_dir(world.project, "megatron-core"))  # what `git clean -fdx` removes
    assert fork_state(world, env, capsys) == "develop not applied"
    shutil.rmtree(world.project / ".nemo-rl")  # `rm -rf .nemo-rl`: the .pth is left, pointing at nothing
    assert fork_state(world, env, capsys) == "not installed"
    assert deps(world, "develop", "--stop", "megatron-core") == 0  # the dead .pth is still removed
    assert not list(env.rglob("*.pth"))


def test_stop_leaves_other_checkouts_worker_environments_alone(world, tmp_path, monkeypatch):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    theirs, ours = fake_env(venvs / "a"), fake_env(venvs / "b")
    for env, project in ((theirs, tmp_path / "checkout-a"), (ours, world.project)):
        (env / environments.META).write_text(json.dumps({"key": env.name, "flags": [], "project": str(project),
                                                          "lock_hash": "x"}))
    assert deps(world, "develop", "megatron-core") == 0
    shadow = develop_state.shadow_dir(world.project, "megatron-core")
    develop_state.install_overlay(theirs, "megatron-core", tmp_path / "a-checkout", shadow)
    develop_state.install_overlay(ours, "megatron-core", tmp_path / "b-checkout", shadow)
    assert deps(world, "develop", "--stop", "megatron-core") == 0
    assert develop_state.has_overlay(theirs, "megatron-core") and not develop_state.has_overlay(ours, "megatron-core")


def test_remove_keeps_ignored_files(world, capsys):
    assert deps(world, "develop", "megatron-core") == 0
    checkout = world.project / ".nemo-rl/develop/megatron-core"
    with open(checkout / ".git" / "info" / "exclude", "a") as fh:
        fh.write("data/\n__pycache__/\n")
    (checkout / "data").mkdir()
    (checkout / "data" / "shard-0.bin").write_text("weeks of work")
    (checkout / "megatron" / "core" / "__pycache__").mkdir()  # what running the checkout leaves is not work
    (checkout / "megatron" / "core" / "__pycache__" / "tokens.cpython-312.pyc").write_bytes(b"")
    capsys.readouterr()
    assert deps(world, "develop", "--stop", "megatron-core", "--remove") == 1
    err = capsys.readouterr().err
    assert "ignored file(s) (data/shard-0.bin)" in err and "--remove would lose them" in err
    assert (checkout / "data" / "shard-0.bin").exists()
    (checkout / "data" / "shard-0.bin").unlink()
    (checkout / "data").rmdir()
    assert deps(world, "develop", "--stop", "megatron-core", "--remove") == 0
    assert not checkout.exists()


# --- 5. exit 3 where the user can act -----------------------------------------------------------------------------

def test_a_filesystem_without_locks_is_the_users_to_fix(world, no_lockd, capsys):
    for args in (["recover"], ["develop", "--stop", "megatron-core"], ["patches", "megatron-core"]):
        assert deps(world, *args) == 1, args
        err = capsys.readouterr().err
        assert f"cannot lock {world.project}" in err and "does not support locks" in err, err
    assert locks.held(world.project)  # a probe never raises: what it cannot tell is held, so nothing acts on it


DEEP = "[" * 100000


def test_deeply_nested_state_files_name_the_file(world, tmp_path, capsys):
    state = world.project / ".nemo-rl" / "develop.json"
    state.parent.mkdir(parents=True)
    state.write_text(DEEP)
    assert deps(world, "status") == 1
    assert f"cannot read {state}: it is nested too deeply" in capsys.readouterr().err
    state.unlink()
    staging = world.project / ".nemo-rl" / "staging-1-x"
    staging.mkdir()
    (staging / "LANDING.json").write_text(DEEP)
    assert deps(world, "recover") == 1
    assert f"landing journal {staging / 'LANDING.json'}: it is nested too deeply" in capsys.readouterr().err
    env = tmp_path / "venvs" / "k"
    env.mkdir(parents=True)
    (env / environments.META).write_text(DEEP)
    with pytest.raises(NemoRLError, match="nested too deeply"):
        environments.describe(env)
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / bundles.MANIFEST).write_text(DEEP)
    with pytest.raises(NemoRLError, match=f"{bundle / bundles.MANIFEST}.*nested too deeply"):
        bundles.read_manifest(bundle)


def test_state_json_passes_a_missing_file_through(tmp_path):
    with pytest.raises(FileNotFoundError):
        values.state_json(tmp_path / "absent.json", "fix")
    (tmp_path / "bad.json").write_bytes(b"\xff\xfe")
    with pytest.raises(NemoRLError, match="bad.json"):
        values.state_json(tmp_path / "bad.json", "fix")


# --- 3. bundles and caches ----------------------------------------------------------------------------------------





def test_a_link_out_of_the_bundle_is_refused(tmp_path):
    root = tmp_path / "cache"
    (root / "wheels-v1").mkdir(parents=True)
    (root / "archive-v0" / "abc").mkdir(parents=True)
    (root / "wheels-v1" / "ok").symlink_to("../archive-v0/abc")  # what uv makes
    bundles.content_digest(root)
    # the last leaves the bundle and comes back in by its directory's name: inside here, outside in any copy of it
    for target in ("/etc/passwd", "../../outside", "../archive-v0/../../x", "../../cache/archive-v0/abc"):
        (root / "wheels-v1" / "bad").symlink_to(target)
        with pytest.raises(NemoRLError, match="links out of the bundle"):
            bundles.content_digest(root)
        (root / "wheels-v1" / "bad").unlink()


def _working_caches(monkeypatch, where: Path) -> list[Path]:
    """uv.sync replaced by a look at the working cache it was given: a copy of each, taken then."""
    seen: list[Path] = []

    def fake_sync(project, *, flags, environment, stream, extra_env):
        assert extra_env["UV_LINK_MODE"] == "hardlink"  # from the node's own copy, which nobody else may write
        work = Path(extra_env["UV_CACHE_DIR"])
        seen.append(work)
        (work / "written-by-uv").write_text("")  # as uv writes lock files and entries into its cache
        snapshot = where / f"seen-{len(seen)}"
        shutil.copytree(work, snapshot, symlinks=True)
        inodes = {str(p.relative_to(work)): os.lstat(p).st_ino for p in work.rglob("*") if p.is_file()}
        (snapshot / "inodes.json").write_text(json.dumps(inodes))

    monkeypatch.setattr(bundles.uv, "sync", fake_sync)
    return seen


def test_a_bundle_file_hard_linked_outside_reaches_no_environment(world, tmp_path, monkeypatch):
    """Whatever else shares a bundle file's inode, the node installs its own checked copy of the bytes."""
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    outside = tmp_path / "outside.txt"
    outside.write_text("X = 1\n")
    bundle = fake_bundle(world, tmp_path / "bundle")
    target = bundle / bundles.CACHE / "archive-v0/abc/pkg/__init__.py"
    target.unlink()
    os.link(outside, target)  # same bytes, same digest: one inode with a file outside
    manifest = bundles.check(bundle, world.project, FLAGS)
    _working_caches(monkeypatch, tmp_path)
    bundles.sync_from(bundle, world.project, FLAGS, tmp_path / "env", manifest)
    inodes = json.loads((tmp_path / "seen-1" / "inodes.json").read_text())
    assert inodes["archive-v0/abc/pkg/__init__.py"] != os.stat(target).st_ino
    outside.write_text("X = 2\n")  # whoever writes the other name after the check changes no copy of the node's
    bundles.sync_from(bundle, world.project, FLAGS, tmp_path / "env2", manifest)
    assert (tmp_path / "seen-2" / "archive-v0/abc/pkg/__init__.py").read_text() == "X = 1\n"


def test_a_site_pins_the_bundles_it_trusts(world, tmp_path, monkeypatch, capsys):
    bundle = fake_bundle(world, tmp_path / "bundles" / "b")
    digest = bundles.read_manifest(bundle).digest
    other = "sha256:" + "0" * 64
    assert bundles.check(bundle, world.project, FLAGS, digest).digest == digest
    with pytest.raises(NemoRLError, match="--digest does not pin"):
        bundles.check(bundle, world.project, FLAGS, other)
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIGESTS", other)
    with pytest.raises(NemoRLError, match="NEMO_RL_BUNDLE_DIGESTS does not pin"):
        bundles.check(bundle, world.project, FLAGS)
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", str(bundle.parent))
    with pytest.raises(NemoRLError, match="not in NEMO_RL_BUNDLE_DIGESTS"):
        bundles.find(world.project, FLAGS)
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIGESTS", f"{other}, {digest}")
    assert bundles.find(world.project, FLAGS) == bundle
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIGESTS", "md5:abc")
    with pytest.raises(NemoRLError, match="not a bundle digest"):
        bundles.find(world.project, FLAGS)
    monkeypatch.delenv("NEMO_RL_BUNDLE_DIGESTS")
    for bad in ("abc", "sha256:" + "g" * 64):
        assert main(["envs", "build", "BASE", "--from", str(bundle), "--digest", bad, "--project",
                     str(world.project)]) == 1
        assert "is not a bundle digest" in capsys.readouterr().err
    assert main(["envs", "build", "BASE", "--digest", digest, "--project", str(world.project)]) == 2


def test_what_is_installed_is_what_was_checked(world, tmp_path, monkeypatch, capsys):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    files = {"archive-v0/abc/mine.py": "A\n", "archive-v0/abc/shared.py": "B\n", "simple-v1/index": "i\n"}
    bundle = fake_bundle(world, tmp_path / "bundle", files)
    (bundle / bundles.CACHE / "archive-v0/abc/shared.py").chmod(0o666)  # others may write it after the check
    old = time.time() - 60  # bytes older than the racy window: the node's copy records them
    for name in files:
        os.utime(bundle / bundles.CACHE / name, (old, old))
    manifest = bundles.check(bundle, world.project, FLAGS)
    seen = _working_caches(monkeypatch, tmp_path)
    bundles.sync_from(bundle, world.project, FLAGS, tmp_path / "env", manifest)
    inodes = json.loads((tmp_path / "seen-1" / "inodes.json").read_text())
    for name in ("mine.py", "shared.py"):  # the environment shares no inode with the bundle
        assert inodes[f"archive-v0/abc/{name}"] != os.stat(bundle / bundles.CACHE / "archive-v0/abc" / name).st_ino
    (bundle / bundles.CACHE / "archive-v0/abc/shared.py").write_text("C\n")  # rewritten after the check
    # the node's checked copy is what a second build installs, and nothing of it is hashed again
    hashed: list[int] = []
    real = bundles.content_digest
    monkeypatch.setattr(bundles, "content_digest", lambda root, known=None, hashes=None: (
        hashed.append(len(known or {})), real(root, known, hashes))[1])
    bundles.sync_from(bundle, world.project, FLAGS, tmp_path / "env", manifest)
    assert hashed == [len(files)] and (tmp_path / "seen-2" / "archive-v0/abc/shared.py").read_text() == "B\n"
    copy = next(venvs.glob(f"{bundle_trust.NODE_COPY_PREFIX}*"))
    # the bundle's CUDA record edited: the copy is as checked, so the refusal is the bundle's and the copy stays
    sidecar = bundle / bundles.cuda_archs.SIDECAR
    good = sidecar.read_bytes()
    sidecar.write_bytes(b'{"toolchain": {}, "extensions": {}} \n')
    with pytest.raises(NemoRLError, match="does not match its manifest"):
        bundles.sync_from(bundle, world.project, FLAGS, tmp_path / "env", manifest)
    assert copy.exists()
    sidecar.write_bytes(good)
    # a node copy edited in place is hashed again, found changed, removed; the bundle, changed too, is refused
    (copy / bundles.CACHE / "archive-v0/abc/mine.py").write_text("Z\n")
    capsys.readouterr()
    with pytest.raises(NemoRLError, match="does not match its manifest"):
        bundles.sync_from(bundle, world.project, FLAGS, tmp_path / "env", manifest)
    assert "changed" in capsys.readouterr().err and not copy.exists()
    assert len(seen) == 2  # refused before uv installed anything
    assert [p.name for p in venvs.iterdir()] == [bundle_copy.node_lock(venvs).name]  # the node's lock


def test_a_node_copy_is_taken_only_when_it_is_ours_checked_and_old_enough(world, tmp_path, monkeypatch, capsys):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    bundle = fake_bundle(world, tmp_path / "bundle")
    manifest = bundles.check(bundle, world.project, FLAGS)
    seen = _working_caches(monkeypatch, tmp_path)
    bundles.sync_from(bundle, world.project, FLAGS, tmp_path / "env", manifest)  # bytes written just now: racy
    copy = next(venvs.glob(f"{bundle_trust.NODE_COPY_PREFIX}*"))
    stamp = json.loads((copy / bundle_copy.STAMP).read_text())
    assert stamp["digest"] == manifest.digest and stamp["files"] == {}  # each file is hashed again next time
    # a copy with a stamp of another's hand (not 0600, or not this user's marker) is never taken as checked
    os.chmod(copy / bundle_copy.STAMP, 0o644)
    assert bundle_copy._read_stamp(copy) is None
    os.chmod(copy / bundle_copy.STAMP, 0o600)
    planted = venvs / f"{bundle_trust.NODE_COPY_PREFIX}planted"
    shutil.copytree(copy, planted)
    (planted / bundle_trust.MARKER).unlink()
    (planted / bundles.CACHE / "archive-v0/abc/pkg/__init__.py").write_text("EVIL = 1\n")
    stamp["files"] = {"archive-v0/abc/pkg/__init__.py": [*bundle_copy.identity(os.lstat(
        planted / bundles.CACHE / "archive-v0/abc/pkg/__init__.py")), hashlib.sha256(b"X = 1\n").hexdigest()]}
    (planted / bundle_copy.STAMP).write_text(json.dumps(stamp))
    shutil.rmtree(copy)
    bundles.sync_from(bundle, world.project, FLAGS, tmp_path / "env", manifest)
    assert (tmp_path / "seen-2" / "archive-v0/abc/pkg/__init__.py").read_text() == "X = 1\n" and len(seen) == 2
    # `envs prune` removes a kept copy nobody holds, and never the planted one
    rows = {row.path: row for row in housekeeping.listing(world.project)}
    kept = [path for path, row in rows.items() if row.state == "kept copy"]
    assert len(kept) == 1 and rows[planted].state == "not ours" and manifest.digest in rows[kept[0]].detail
    killed, held_killed = bundle_trust.new_work_cache(venvs, bundle_trust.NODE_COPY_PREFIX)  # no stamp yet
    rows = {row.path: row for row in housekeeping.listing(world.project)}
    assert rows[killed].state == "unfinished build" and "being made now" in rows[killed].detail
    os.close(held_killed)  # its build was killed
    assert "killed before its check" in {row.path: row for row in housekeeping.listing(world.project)}[killed].detail
    bundles.sync_from(bundle, world.project, FLAGS, tmp_path / "env", manifest)  # the next build removes it
    assert not killed.exists()
    held = locks.try_hold(kept[0])
    assert housekeeping.prune(world.project) == [] and kept[0].exists()  # held: a build links from it
    os.close(held)
    assert housekeeping.prune(world.project) == kept and not kept[0].exists() and planted.exists()
    # a node building from two bundles keeps a copy of each: neither is taken for the other, nor removed by it
    other = fake_bundle(world, tmp_path / "other", {"archive-v0/xyz/m.py": "Y = 2\n", "simple-v1/index": "j\n"})
    for age, each in ((100, bundle), (50, other), (None, bundle)):
        bundles.sync_from(each, world.project, FLAGS, tmp_path / "env", bundles.check(each, world.project, FLAGS))
        for path in venvs.glob(f"{bundle_trust.NODE_COPY_PREFIX}*"):  # clock ticks apart, whatever the clock
            if age is not None and bundle_copy.stamp_digest(path) == bundles.read_manifest(each).digest:
                os.utime(path / bundle_copy.STAMP, (time.time() - age, time.time() - age))
    ours = {bundle_copy.stamp_digest(p): p for p in venvs.glob(f"{bundle_trust.NODE_COPY_PREFIX}*") if p != planted}
    assert len(ours) == 2
    assert "does not hold bundle" not in capsys.readouterr().err  # the other's copy is passed over by its digest
    # a third bundle: the copy used longest ago (the other's) goes, the two last used stay
    third = fake_bundle(world, tmp_path / "third", {"archive-v0/q/r.py": "Z = 3\n", "simple-v1/index": "k\n"})
    bundles.sync_from(third, world.project, FLAGS, tmp_path / "env", bundles.check(third, world.project, FLAGS))
    left = {bundle_copy.stamp_digest(p) for p in venvs.glob(f"{bundle_trust.NODE_COPY_PREFIX}*") if p != planted}
    assert left == {manifest.digest, bundles.read_manifest(third).digest}


def test_a_live_working_cache_of_the_same_pid_is_left_alone(world, tmp_path, monkeypatch):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    theirs = venvs / f"{bundles.WORK_CACHE_PREFIX}{os.getpid()}"  # another container's build, same PID
    theirs.mkdir(parents=True)
    (theirs / "in-use").write_text("")
    held = locks.hold(theirs)
    try:
        bundle = fake_bundle(world, tmp_path / "bundle")
        monkeypatch.setattr(bundles.uv, "sync", lambda *a, **k: None)
        bundles.sync_from(bundle, world.project, FLAGS, tmp_path / "env", bundles.check(bundle, world.project, FLAGS))
        assert (theirs / "in-use").exists()
    finally:
        os.close(held)


def test_a_broken_bundle_never_hides_a_good_one_and_an_empty_dir_is_no_network(world, tmp_path, monkeypatch, capsys):
    root = tmp_path / "bundles"
    root.mkdir()
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", str(root))
    with pytest.raises(NemoRLError, match=f"NEMO_RL_BUNDLE_DIR {root} holds no bundle"):
        bundles.find(world.project, FLAGS)
    (root / "a-broken").mkdir()
    (root / "a-broken" / bundles.MANIFEST).write_text("{")
    good = fake_bundle(world, root / "b-good")
    capsys.readouterr()
    assert bundles.find(world.project, FLAGS) == good
    assert f"skipping bundle {root / 'a-broken'}" in capsys.readouterr().err


def test_killed_packs_are_listed_and_pruned_and_one_pack_per_destination(world, tmp_path, monkeypatch, capsys):
    root = tmp_path / "bundles"
    killed = root / ".old.packing-123"
    (killed / bundles.CACHE).mkdir(parents=True)
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", str(root))
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    assert main(["envs", "list", "--json", "--project", str(world.project)]) == 0
    rows = json.loads(capsys.readouterr().out)["bundles"]
    assert [(r["path"], r["state"]) for r in rows] == [(str(killed), "unfinished pack")]
    assert main(["envs", "prune", "--project", str(world.project)]) == 0
    assert f"removed {killed}" in capsys.readouterr().out and not killed.exists()
    (killed / bundles.CACHE).mkdir(parents=True)
    assert bundle_pack._remove_dead_packs(root / "another-name") == [killed]  # what a pack to any name does first
    claim = locks.open_lock_file(root / ".b.pack-lock")
    fcntl.flock(claim, fcntl.LOCK_EX)  # a pack into root/b is running
    try:
        assert main(["envs", "pack", "BASE", str(root / "b"), "--project", str(world.project)]) == 1
        assert "another `nemo-rl envs pack` is making" in capsys.readouterr().err
    finally:
        os.close(claim)


def test_a_cached_proof_of_a_commit_force_pushed_away_is_asked_again(world):
    from gitfixtures import commit

    from nemo_rl.forks import fork_cache
    from nemo_rl.project import lockfile

    fork = lockfile.fork(world.project, "megatron-core")
    server = world.forks["megatron-core"].fork
    gone = commit(server, "feat: pushed, then force-pushed away", {"megatron/core/gone.py": "G = 1\n"})
    fork_cache.fetched(fork, gone)  # a dry run proves it and caches the proof
    git(server, "reset", "-q", "--hard", "HEAD~1")
    git(server, "reflog", "expire", "--expire=now", "--all")
    git(server, "gc", "-q", "--prune=now")
    with pytest.raises(NemoRLError, match="no longer on"):
        fork_cache.fetched(fork, gone)
    assert fork_cache.fetched(fork, fork.rev)  # the pin itself: no question asked


# --- 6. messages --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), "30", None, True])
def test_a_timeout_that_cannot_be_right_is_refused(timeout, tmp_path):
    from nemo_rl import imports
    from nemo_rl.workers import ray_actors

    with pytest.raises(NemoRLError, match="not a number of seconds above zero"):
        ray_actors.wait_ready(None, None, timeout=timeout)
    with pytest.raises(NemoRLError, match="not a number of seconds above zero"):
        imports.check(Path(sys.executable), ["json"], timeout=timeout)
    assert values.timeout_seconds(2, "here") == 2.0 and values.timeout_seconds(0.5, "here") == 0.5


def test_develop_failures_say_what_to_do(world, tmp_path, capsys):
    assert deps(world, "develop", "megatron-core") == 0
    checkout = world.project / ".nemo-rl/develop/megatron-core"
    capsys.readouterr()
    assert deps(world, "develop", "megatron-core", "--onto", "upstream/no-such-branch") == 1
    err = capsys.readouterr().err
    assert "has no branch 'no-such-branch'" in err and "git ls-remote --heads" in err
    (checkout / ".git" / "rebase-merge").mkdir()  # a rebase stopped earlier and not finished
    assert deps(world, "develop", "megatron-core", "--onto", "upstream/main") == 1
    err = capsys.readouterr().err
    assert "in the middle of a rebase" in err and "rebase --abort" in err
    (checkout / ".git" / "rebase-merge").rmdir()
    import shutil

    shutil.rmtree(checkout / ".git")  # git would now answer for whatever repository is above it
    (checkout / "notes.txt").write_text("mine")
    assert deps(world, "develop", "--stop", "megatron-core", "--remove") == 1
    assert "no longer a git checkout" in capsys.readouterr().err
    assert (checkout / "notes.txt").exists()


def test_pack_into_a_place_it_cannot_write_is_exit_1(world, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(["envs", "pack", "BASE", str(blocker / "b"), "--project", str(world.project)]) == 1
    assert f"cannot pack into {blocker}" in capsys.readouterr().err


def test_a_link_out_of_the_bundle_through_another_link_is_refused(tmp_path):
    """`q -> p/../../etc/passwd` reads as inside the bundle; the kernel follows `p -> ../..` first (review)."""
    root = tmp_path / "cache"
    deep = root / "archive-v0" / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (deep / "p").symlink_to("../../..")
    (deep / "q").symlink_to("p/../../../../../etc/passwd")
    with pytest.raises(NemoRLError, match="links out of the bundle"):
        bundles.content_digest(root)


def test_remove_refuses_a_checkout_with_submodules(world, capsys):
    """A submodule's local commits and stashes live in .git/modules: `--remove` would delete them unseen."""
    assert deps(world, "develop", "megatron-core") == 0
    checkout = world.project / ".nemo-rl" / "develop" / "megatron-core"
    (checkout / ".git" / "modules" / "sub").mkdir(parents=True)
    capsys.readouterr()
    assert deps(world, "develop", "--stop", "megatron-core", "--remove") == 1
    assert "submodules" in capsys.readouterr().err
    assert checkout.exists()


@pytest.mark.parametrize("character", ["\u2028", "\u0085"])
def test_a_path_with_a_line_separator_python_may_split_on_is_refused(character):
    from nemo_rl import values

    with pytest.raises(NemoRLError, match="control character"):
        values.plain_path(f"/tmp/x{character}import os", "the checkout")


def test_a_journal_that_names_a_path_twice_is_refused(tmp_path):
    from nemo_rl.project import journal

    staging = tmp_path / "project" / ".nemo-rl" / "staging-1"
    staging.mkdir(parents=True)
    (staging / journal.JOURNAL).write_text(json.dumps({"moves": ["uv.lock"] * 200_000}))
    with pytest.raises(NemoRLError, match="names paths a landing never moves"):
        journal.read_journal(staging)


@pytest.mark.parametrize("text", ['{"vcs_info": [1]}', "[" * 100_000])
def test_a_direct_url_record_of_any_shape_is_no_commit(text):
    from nemo_rl import extras

    assert extras.commit_from_direct_url(text) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="planting another user's entry needs root (chown)")
def test_an_entry_planted_between_the_two_looks_is_never_run(tmp_path, monkeypatch):
    root = Path(__file__).resolve().parents[1]
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "uv.lock"):
        shutil.copy(root / name, project / name)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))

    def planted_while_building(project, flags, where, *args, **kwargs):  # a co-user wins the race
        where.path.mkdir()
        (where.path / environments.META).write_text("{}")
        os.chown(where.path, 4242, 4242)

    verified_here: list[object] = []
    monkeypatch.setattr(environments, "_build", planted_while_building)
    monkeypatch.setattr(environments, "verify", lambda *args, **kwargs: verified_here.append(args))
    with pytest.raises(NemoRLError, match="owned by uid 4242"):
        environments.ensure(project, ["--locked"])
    assert verified_here == []


def test_a_shared_venv_directory_must_be_sticky(tmp_path, monkeypatch):
    from nemo_rl import settings

    venvs = tmp_path / "venvs"
    venvs.mkdir()
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    for mode in (0o777, 0o775):
        os.chmod(venvs, mode)
        with pytest.raises(NemoRLError, match="not sticky") as refused:
            settings.venv_dir()
        assert "chmod +t" in refused.value.remedy
    for mode in (0o1777, 0o1775, 0o755):
        os.chmod(venvs, mode)
        assert settings.venv_dir() == venvs
    if os.geteuid() == 0:  # another user's directory, sticky or not: its owner may rename anyone's entries
        for mode in (0o1777, 0o755):
            os.chmod(venvs, mode)
            os.chown(venvs, 4242, 4242)
            with pytest.raises(NemoRLError, match=r"is owned by another user \(uid 4242\)") as refused:
                settings.venv_dir()
            assert "point NEMO_RL_VENV_DIR at a directory you (or root) own" in refused.value.remedy
            with pytest.raises(NemoRLError, match=r"is owned by another user"):  # `envs list`, `envs prune`
                settings.venv_dir(create=False)
        monkeypatch.setenv("SUDO_UID", "4242")  # root by sudo from that user: theirs is root's own, as for git
        assert settings.venv_dir() == venvs
        monkeypatch.delenv("SUDO_UID")
        os.chown(venvs, 0, 0)
    made = tmp_path / "made" / "venvs"  # made by nemo-rl under umask 002: not group-writable, so usable
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(made))
    old = os.umask(0o002)
    try:
        assert settings.venv_dir() == made and made.stat().st_mode & 0o777 == 0o755
    finally:
        os.umask(old)


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
