"""A node's checked copy of a bundle (workers/bundle_copy.py). Builds at once on one node from one bundle: one copy
of the bundle, used by all of them, never removed under one of them; each build is a real process calling
bundle_copy.node_copy, held at the points the test names by lines on its stdin. What a build installs is the node's
checked copy of the bytes, and a copy is taken only when it is ours, checked and old enough."""

import dataclasses
import itertools
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fakes import FLAGS, fake_bundle

from nemo_rl import codec, locks, values
from nemo_rl.errors import Interrupted, NemoRLError
from nemo_rl.project.model import Project
from nemo_rl.workers import bundle_copy, bundles, housekeeping, tree_copy
from nemo_rl.workers.bundle_copy import NODE_COPY_PREFIX

DIGEST = "sha256:" + "a" * 64  # the bundle's, as its manifest would say

# A build: its node copy of the bundle, checked; with "gated", it stops inside the check (the node lock held)
# until a line comes on stdin. It holds the copy until the next line, as a build holds it while linking from it.
BUILD = """
import os, sys
from pathlib import Path
from nemo_rl import interrupt
from nemo_rl.errors import Interrupted
from nemo_rl.workers import bundle_copy, bundles
interrupt.install()
root, bundle, digest, gated = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4] == "gated"
expected = bundles.content_digest(bundle / bundles.CACHE)

def digest_of(cache, known, hashes):
    print("checking", flush=True)
    if gated:
        sys.stdin.readline()
    return bundles.content_digest(cache, known, hashes)

def sealed(content):
    if content != expected:
        raise SystemExit("not the bundle's content")

try:
    node = bundle_copy.node_copy(root, bundle, digest, digest_of, sealed)
except Interrupted:
    print("interrupted", flush=True)
    sys.exit(130)
print("using", node.cache.parent, flush=True)
sys.stdin.readline()
os.close(node.held)
"""


class Build:
    """One build in its own process; its stdout and stderr lines read as they come."""

    def __init__(self, root: Path, bundle: Path, *, gated: bool = False, digest: str = DIGEST):
        self.proc = subprocess.Popen([sys.executable, "-c", BUILD, str(root), str(bundle), digest,
                                      "gated" if gated else "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.out: queue.Queue[str] = queue.Queue()
        self.err: list[str] = []
        self.readers = [threading.Thread(target=self._read, args=(self.proc.stdout, self.out.put), daemon=True),
                        threading.Thread(target=self._read, args=(self.proc.stderr, self.err.append), daemon=True)]
        for reader in self.readers:
            reader.start()

    @staticmethod
    def _read(stream, put) -> None:
        for line in stream:
            put(line.rstrip("\n"))

    def expect(self, prefix: str, timeout: float = 60) -> str:
        """The next stdout line, which must start with `prefix`."""
        try:
            line = self.out.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no {prefix!r} line in {timeout} s; stderr: {self.err}") from None
        assert line.startswith(prefix), (line, self.err)
        return line

    def said(self, text: str, timeout: float = 30) -> str:
        """The first stderr line containing `text`, waited for."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.err):
                if text in line:
                    return line
            assert self.proc.poll() is None, (self.proc.returncode, self.err)
            time.sleep(0.05)
        raise AssertionError(f"no stderr line with {text!r} in {timeout} s: {self.err}")

    def go(self) -> None:
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()

    def done(self) -> int:
        """Its exit status, once it ended and all it wrote was read."""
        self.proc.stdin.close()
        code = self.proc.wait(timeout=60)
        for reader in self.readers:
            reader.join(timeout=60)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A venv directory and a bundle's cache of a few hundred files; the builds started are killed after."""
    root = tmp_path / "venvs"
    root.mkdir(mode=0o700)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(root))
    started: list[Build] = []
    made = itertools.count()
    yield root, lambda: bundle(tmp_path / f"bundle-{next(made)}", f"X{next(made)}"), started
    for build in started:
        build.kill()


def bundle(where: Path, text: str = "X") -> Path:
    for i in range(200):
        path = where / bundles.CACHE / "archive-v0" / f"d{i % 7}" / f"m{i:03}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{text} = {i}\n")
    return where


def copies(root: Path) -> list[Path]:
    return sorted(root.glob(f"{NODE_COPY_PREFIX}*"))


def test_two_builds_at_once_from_one_bundle_make_one_copy(node):
    root, new_bundle, started = node
    source = new_bundle()
    first = Build(root, source, gated=True)
    started.append(first)
    first.expect("checking")  # copied, being checked: the node lock held
    second = Build(root, source, gated=True)
    started.append(second)
    waiting = second.said("waiting for another build")
    assert f"pid {first.proc.pid} " in waiting and "copying or checking a bundle on this node" in waiting
    assert len(copies(root)) == 1
    first.go()
    made = first.expect("using ").split(" ", 1)[1]
    second.expect("checking")  # the first's copy, checked while the first holds it
    second.go()
    assert second.expect("using ").split(" ", 1)[1] == made
    assert [first.done(), second.done()] == [0, 0]
    assert not any("copying bundle" in line for line in second.err), second.err
    assert [str(p) for p in copies(root)] == [made]


def test_a_copy_in_use_is_used_by_a_second_build_too(node):
    root, new_bundle, started = node
    source = new_bundle()
    first = Build(root, source)
    started.append(first)
    first.expect("checking")
    made = first.expect("using ").split(" ", 1)[1]  # holds its copy until told
    second = Build(root, source)
    started.append(second)
    second.expect("checking")
    assert second.expect("using ").split(" ", 1)[1] == made
    assert [first.done(), second.done()] == [0, 0]
    assert any("using this node's checked copy" in line for line in second.err), second.err
    assert [str(p) for p in copies(root)] == [made]


def test_prune_leaves_a_copy_a_build_uses_and_removes_it_after(node):
    root, new_bundle, started = node
    source = new_bundle()
    first = Build(root, source)
    started.append(first)
    first.expect("checking")
    made = Path(first.expect("using ").split(" ", 1)[1])
    rows = {row.path: row for row in housekeeping.listing(None)}
    assert rows[made].state == "kept copy" and list(rows) == [made]  # the node lock file is no row
    assert housekeeping.prune(None) == [] and made.exists()
    # one being made (held exclusively, inside its check) is left too
    other = Build(root, new_bundle(), gated=True, digest="sha256:" + "b" * 64)
    started.append(other)
    other.expect("checking")
    assert housekeeping.prune(None) == [] and len(copies(root)) == 2
    other.go()
    other.expect("using ")
    assert [first.done(), other.done()] == [0, 0]
    both = copies(root)
    assert sorted(housekeeping.prune(None)) == both and len(both) == 2 and copies(root) == []
    assert bundle_copy.node_lock(root).exists()  # a lock file, left as the keys' are


def test_a_build_waiting_for_another_ends_on_a_signal(node):
    root, new_bundle, started = node
    source = new_bundle()
    first = Build(root, source, gated=True)
    started.append(first)
    first.expect("checking")
    second = Build(root, source)
    started.append(second)
    second.said("waiting for another build")
    os.kill(second.proc.pid, signal.SIGTERM)
    second.expect("interrupted", timeout=10)  # at the wait's checkpoint, not the forced exit after 4 s
    assert second.proc.wait(timeout=10) == 130
    first.go()
    first.expect("using ")
    assert first.done() == 0 and len(copies(root)) == 1


def test_a_node_keeps_one_copy_per_bundle(node):
    """Two copies of one bundle (one left while a build used it) never take the place of another bundle's."""
    root, new_bundle, _ = node
    first, other = new_bundle(), bundle(root.parent / "other", "Y")
    ours = bundles.content_digest(first / bundles.CACHE)

    def copy_of(source: Path, digest: str) -> Path:
        node = _sealed_copy(root, source, digest)
        os.close(node.held)
        return node.cache.parent

    kept = copy_of(first, DIGEST)
    theirs = copy_of(other, "sha256:" + "b" * 64)
    again = root / f"{NODE_COPY_PREFIX}again"
    shutil.copytree(kept, again, symlinks=True)  # the same bundle's, checked as well
    now = time.time()
    for path, age in ((kept, 10), (again, 10), (theirs, 50)):
        os.utime(path / bundle_copy.STAMP, (now - age, now - age))
    used = copy_of(first, DIGEST)
    assert used in (kept, again) and bundles.content_digest(used / bundles.CACHE) == ours
    assert copies(root) == sorted([used, theirs])


def test_a_filesystem_without_locks_is_the_users_to_fix(node, no_lockd):
    root, new_bundle, _ = node
    source = new_bundle()
    with pytest.raises(NemoRLError, match="does not support locks") as caught:
        bundle_copy.node_copy(root, source, DIGEST, bundles.content_digest, lambda content: None)
    assert str(bundle_copy.node_lock(root)) in caught.value.what and copies(root) == []
    (root / "d").mkdir()
    assert locks.try_hold(root / "d", shared=True) is None  # as held: nothing acts on it


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
    monkeypatch.setattr(tree_copy, "linkable", lambda info, device: False)  # another owner's: copied
    outside = tmp_path / "outside.txt"
    outside.write_text("X = 1\n")
    bundle = fake_bundle(world, tmp_path / "bundle")
    target = bundle / bundles.CACHE / "archive-v0/abc/pkg/__init__.py"
    target.unlink()
    os.link(outside, target)  # same bytes, same digest: one inode with a file outside
    manifest = bundles.check(bundle, Project.read(world.project), FLAGS)
    _working_caches(monkeypatch, tmp_path)
    bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", manifest)
    inodes = json.loads((tmp_path / "seen-1" / "inodes.json").read_text())
    assert inodes["archive-v0/abc/pkg/__init__.py"] != os.stat(target).st_ino
    outside.write_text("X = 2\n")  # whoever writes the other name after the check changes no copy of the node's
    bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env2", manifest)
    assert (tmp_path / "seen-2" / "archive-v0/abc/pkg/__init__.py").read_text() == "X = 1\n"


def test_what_is_installed_is_what_was_checked(world, tmp_path, monkeypatch, capsys):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    monkeypatch.setattr(tree_copy, "linkable", lambda info, device: False)  # another owner's: copied
    files = {"archive-v0/abc/mine.py": "A\n", "archive-v0/abc/shared.py": "B\n", "simple-v1/index": "i\n"}
    bundle = fake_bundle(world, tmp_path / "bundle", files)
    (bundle / bundles.CACHE / "archive-v0/abc/shared.py").chmod(0o666)  # others may write it after the check
    old = time.time() - 60  # bytes older than the racy window: the node's copy records them
    for name in files:
        os.utime(bundle / bundles.CACHE / name, (old, old))
    manifest = bundles.check(bundle, Project.read(world.project), FLAGS)
    seen = _working_caches(monkeypatch, tmp_path)
    bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", manifest)
    inodes = json.loads((tmp_path / "seen-1" / "inodes.json").read_text())
    for name in ("mine.py", "shared.py"):  # the environment shares no inode with the bundle
        assert inodes[f"archive-v0/abc/{name}"] != os.stat(bundle / bundles.CACHE / "archive-v0/abc" / name).st_ino
    (bundle / bundles.CACHE / "archive-v0/abc/shared.py").write_text("C\n")  # rewritten after the check
    # the node's checked copy is what a second build installs: checked again, not copied again
    copy = next(venvs.glob(f"{bundle_copy.NODE_COPY_PREFIX}*"))
    bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", manifest)
    assert (tmp_path / "seen-2" / "archive-v0/abc/shared.py").read_text() == "B\n"
    assert list(venvs.glob(f"{bundle_copy.NODE_COPY_PREFIX}*")) == [copy]
    # the bundle's CUDA record edited: the copy is as checked, so the refusal is the bundle's and the copy stays
    sidecar = bundle / bundles.cuda_archs.SIDECAR
    good = sidecar.read_bytes()
    sidecar.write_bytes(b'{"toolchain": {}, "extensions": {}} \n')
    with pytest.raises(NemoRLError, match="does not match its manifest"):
        bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", manifest)
    assert copy.exists()
    sidecar.write_bytes(good)
    # a node copy edited in place is hashed again, found changed, removed; the bundle, changed too, is refused
    (copy / bundles.CACHE / "archive-v0/abc/mine.py").write_text("Z\n")
    capsys.readouterr()
    with pytest.raises(NemoRLError, match="does not match its manifest"):
        bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", manifest)
    assert "changed" in capsys.readouterr().err and not copy.exists()
    assert len(seen) == 2  # refused before uv installed anything
    assert [p.name for p in venvs.iterdir()] == [bundle_copy.node_lock(venvs).name]  # the node's lock


def _tampered(tmp_path: Path, copy: Path) -> Path:
    """Outside the store: a tree a link in the working cache could be pointed at."""
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(copy / bundles.CACHE / "archive-v0", elsewhere)
    (elsewhere / "abc" / "pkg" / "__init__.py").write_text("EVIL = 1\n")
    return elsewhere


@pytest.mark.parametrize("tamper", ["file-replaced", "file-removed", "copy-file-replaced", "directory-linked-out",
                                    "working-cache-a-link", "working-cache-a-file", "a-directory-at-a-file-s-name",
                                    "names-added"])
def test_what_a_build_installs_from_the_working_cache_is_the_copy_s_checked_files(world, tmp_path, monkeypatch,
                                                                                  tamper):
    """Whatever happened to the kept working cache, or to a name of the copy, since the last build; what uv writes
    there stays out of the copy."""
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    bundle = fake_bundle(world, tmp_path / "bundle")
    manifest = bundles.check(bundle, Project.read(world.project), FLAGS)
    seen = _working_caches(monkeypatch, tmp_path)
    bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", manifest)
    copy = next(venvs.glob(f"{NODE_COPY_PREFIX}*"))
    work, name = copy / bundle_copy.WORKING, "archive-v0/abc/pkg/__init__.py"
    elsewhere = _tampered(tmp_path, copy)
    if tamper == "file-replaced":  # an editor that saves by rename
        (work / name).unlink()
        (work / name).write_text("EVIL = 1\n")
    elif tamper == "file-removed":  # `uv cache clean` pointed at it
        (work / name).unlink()
    elif tamper == "copy-file-replaced":  # the same bytes, a new file: the old one lives on in the working cache
        data = (copy / bundles.CACHE / name).read_bytes()
        (copy / bundles.CACHE / name).unlink()
        (copy / bundles.CACHE / name).write_bytes(data)
    elif tamper == "a-directory-at-a-file-s-name":
        (work / name).unlink()
        (work / name).mkdir()
    elif tamper == "names-added":  # in the bundle's buckets: uv would find them there
        (work / "archive-v0/abc/pkg/evil.py").write_text("EVIL = 1\n")
        (work / "archive-v0/zzz").mkdir()
    elif tamper == "directory-linked-out":
        shutil.rmtree(work / "archive-v0")
        (work / "archive-v0").symlink_to(elsewhere)
    else:
        shutil.rmtree(work)
        if tamper == "working-cache-a-link":
            work.symlink_to(elsewhere.parent)
        else:
            work.write_text("")
    bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", manifest)
    inodes = json.loads((tmp_path / "seen-2" / "inodes.json").read_text())
    assert inodes[name] == os.lstat(copy / bundles.CACHE / name).st_ino and seen == [work] * 2
    assert (work / "written-by-uv").exists() and not (copy / bundles.CACHE / "written-by-uv").exists()
    assert (elsewhere / "abc" / "pkg" / "__init__.py").read_text() == "EVIL = 1\n"  # nothing written outside
    assert work.is_dir() and not work.is_symlink() and not (work / "archive-v0").is_symlink()
    assert not (work / "archive-v0/abc/pkg/evil.py").exists() and not (work / "archive-v0/zzz").exists()


def test_a_working_cache_that_cannot_be_set_right_in_place_is_made_whole_else_named_with_its_fix(tmp_path,
                                                                                                   monkeypatch):
    cache = tmp_path / "copy" / bundles.CACHE
    (cache / "archive-v0").mkdir(parents=True)
    (cache / "archive-v0" / "f").write_text("x")
    work, real, failures = cache.parent / bundle_copy.WORKING, bundle_copy.link_tree, [1]

    def failing(source, target):  # as a directory this user made read-only refuses its names' removal
        if failures:
            failures.pop()
            raise PermissionError(13, "Permission denied")
        real(source, target)

    monkeypatch.setattr(bundle_copy, "link_tree", failing)
    with bundle_copy.working_cache(cache) as made:
        assert (made / "archive-v0" / "f").stat().st_ino == (cache / "archive-v0" / "f").stat().st_ino
    failures[:] = [1, 1]
    with pytest.raises(NemoRLError, match="cannot make the working cache") as refused:
        with bundle_copy.working_cache(cache):
            pass
    assert subprocess.run(refused.value.remedy.split("`")[1], shell=True).returncode == 0  # the fix, followed
    assert not work.exists()
    with bundle_copy.working_cache(cache) as made:
        assert (made / "archive-v0" / "f").read_text() == "x"

    def full(source, target):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(bundle_copy, "link_tree", full)
    with pytest.raises(OSError, match="No space left"):  # the disk's, for the full-disk message: nothing removed
        with bundle_copy.working_cache(cache):
            pass
    assert (work / "archive-v0" / "f").exists()


def test_one_build_at_a_time_uses_a_working_cache(tmp_path):
    """Each build makes the working cache the copy's again, removing what is not: never under another's uv."""
    cache = tmp_path / "copy" / bundles.CACHE
    (cache / "archive-v0").mkdir(parents=True)
    lock = cache.parent / bundle_copy.WORKING_LOCK
    with bundle_copy.working_cache(cache):
        assert locks.lock_file(lock, None) is None
    os.close(locks.lock_file(lock, None))


def test_a_node_copy_is_taken_only_when_it_is_checked_and_old_enough(world, tmp_path, monkeypatch, capsys):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    bundle = fake_bundle(world, tmp_path / "bundle")
    manifest = bundles.check(bundle, Project.read(world.project), FLAGS)
    seen = _working_caches(monkeypatch, tmp_path)
    bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env",
                      manifest)  # bytes written just now: racy
    copy = next(venvs.glob(f"{bundle_copy.NODE_COPY_PREFIX}*"))
    stamp = json.loads((copy / bundle_copy.STAMP).read_text())
    assert stamp["digest"] == manifest.digest and stamp["files"] == {}  # each file is hashed again next time
    shutil.rmtree(copy)
    bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", manifest)
    assert len(seen) == 2
    # `envs prune` removes a kept copy nobody holds
    rows = {row.path: row for row in housekeeping.listing(Project.read(world.project))}
    kept = [path for path, row in rows.items() if row.state == "kept copy"]
    assert len(kept) == 1 and manifest.digest in rows[kept[0]].detail
    killed, held_killed = bundle_copy.new_copy_dir(venvs)  # no stamp yet
    rows = {row.path: row for row in housekeeping.listing(Project.read(world.project))}
    assert rows[killed].state == "unfinished build" and "being made now" in rows[killed].detail
    os.close(held_killed)  # its build was killed
    rows = {row.path: row for row in housekeeping.listing(Project.read(world.project))}
    assert "killed before its check" in rows[killed].detail
    bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env",
                      manifest)  # the next build removes it
    assert not killed.exists()
    held = locks.try_hold(kept[0])
    assert housekeeping.prune(Project.read(world.project)) == [] and kept[0].exists()  # held: a build links from it
    os.close(held)
    assert housekeeping.prune(Project.read(world.project)) == kept and not kept[0].exists()
    # a node building from two bundles keeps a copy of each: neither is taken for the other, nor removed by it
    other = fake_bundle(world, tmp_path / "other", {"archive-v0/xyz/m.py": "Y = 2\n", "simple-v1/index": "j\n"})
    for age, each in ((100, bundle), (50, other), (None, bundle)):
        project = Project.read(world.project)
        bundles.sync_from(each, project, FLAGS, tmp_path / "env", bundles.check(each, project, FLAGS))
        for path in venvs.glob(f"{bundle_copy.NODE_COPY_PREFIX}*"):  # clock ticks apart, whatever the clock
            if age is not None and bundle_copy.stamp_digest(path) == bundles.read_manifest(each).digest:
                os.utime(path / bundle_copy.STAMP, (time.time() - age, time.time() - age))
    ours = {bundle_copy.stamp_digest(p): p for p in venvs.glob(f"{bundle_copy.NODE_COPY_PREFIX}*")}
    assert len(ours) == 2
    assert "does not hold bundle" not in capsys.readouterr().err  # the other's copy is passed over by its digest
    # a third bundle: the copy used longest ago (the other's) goes, the two last used stay
    third = fake_bundle(world, tmp_path / "third", {"archive-v0/q/r.py": "Z = 3\n", "simple-v1/index": "k\n"})
    project = Project.read(world.project)
    bundles.sync_from(third, project, FLAGS, tmp_path / "env", bundles.check(third, project, FLAGS))
    left = {bundle_copy.stamp_digest(p) for p in venvs.glob(f"{bundle_copy.NODE_COPY_PREFIX}*")}
    assert left == {manifest.digest, bundles.read_manifest(third).digest}


def _old_bundle(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    """A bundle of two files older than the racy window (a stamp records them): (bundle, files)."""
    bundle = tmp_path / "bundle"
    files = {"archive-v0/abc/a.py": b"A\n", "simple-v1/index": b"i\n"}
    old = time.time() - 60
    for name, data in files.items():
        path = bundle / bundles.CACHE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.utime(path, (old, old))
    return bundle, files


def test_a_kept_copy_whose_files_nothing_touched_since_is_not_hashed_again(tmp_path):
    bundle, files = _old_bundle(tmp_path)
    expected = bundles.content_digest(bundle / bundles.CACHE)
    known: list[int] = []

    def digest_of(cache, already, hashes):
        known.append(len(already))
        return bundles.content_digest(cache, already, hashes)

    def sealed(content):
        assert content == expected

    venvs = tmp_path / "venvs"
    venvs.mkdir()
    copies = []
    for _ in range(2):  # nothing links the copy's files in between, as a build's working cache would
        node = bundle_copy.node_copy(venvs, bundle, "sha256:" + "0" * 64, digest_of, sealed)
        os.close(node.held)
        copies.append(node.cache)
    assert copies[0] == copies[1] and known == [len(files), len(files)]


def test_a_build_s_own_links_leave_the_next_build_nothing_to_hash(world, tmp_path, monkeypatch):
    """Each build links the copy's files (its working cache, uv's environment), which moves their ctime; the stamp
    takes those ctimes once uv is done, so the next build from the copy hashes nothing, and an edit after it still
    shows."""
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    files = {"archive-v0/abc/mine.py": "A\n", "simple-v1/index": "i\n"}
    bundle = fake_bundle(world, tmp_path / "bundle", files)
    old = time.time() - 60  # older than the racy window: the stamp records them
    for name in files:
        os.utime(bundle / bundles.CACHE / name, (old, old))
    manifest = bundles.check(bundle, Project.read(world.project), FLAGS)
    _working_caches(monkeypatch, tmp_path)
    hashed: list[set[str]] = []
    real = bundles.content_digest

    def counted(cache, known=None, hashes=None):
        hashed.append({str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file()} - set(known or {}))
        return real(cache, known, hashes)

    monkeypatch.setattr(bundles, "content_digest", counted)
    for _ in range(2):
        bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", manifest)
    assert hashed[1] == set()
    copy = next(venvs.glob(f"{bundle_copy.NODE_COPY_PREFIX}*"))
    (copy / bundles.CACHE / "archive-v0/abc/mine.py").write_text("Z\n")
    os.utime(copy / bundles.CACHE / "archive-v0/abc/mine.py", (old, old))  # the mtime put back: the ctime shows it
    with pytest.raises(NemoRLError, match="does not match its manifest"):
        bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", manifest)
    assert "archive-v0/abc/mine.py" in hashed[2]


def _sealed_copy(root: Path, bundle: Path, digest: str = "sha256:" + "0" * 64) -> bundle_copy.NodeCopy:
    """The node's copy of `bundle` under `root`, held, sealed when it holds the bundle's content."""
    expected = bundles.content_digest(bundle / bundles.CACHE)
    return bundle_copy.node_copy(root, bundle, digest, bundles.content_digest,
                                 lambda content: None if content == expected else pytest.fail("not sealed"))


def _kept_copy(tmp_path: Path) -> tuple[Path, bundle_copy.NodeCopy, dict[str, bytes]]:
    """A bundle of two old files and the node's kept, stamped copy of it, as its build took it: (bundle, copy,
    files)."""
    bundle, files = _old_bundle(tmp_path)
    venvs = tmp_path / "venvs"
    venvs.mkdir()
    node = _sealed_copy(venvs, bundle)
    os.close(node.held)
    return bundle, node, files


def test_a_ctime_not_older_than_the_filesystem_s_clock_is_not_taken(tmp_path, monkeypatch):
    """On a filesystem of coarse times an edit in the tick after restamp would keep the ctime it took: such a
    ctime is left out, and the file is hashed next time."""
    _, node, files = _kept_copy(tmp_path)
    target = node.cache / "archive-v0/abc/a.py"
    os.link(target, tmp_path / "a-link")  # as a build's links do: the ctime moves
    monkeypatch.setattr(bundle_copy, "_clock", lambda directory: os.lstat(target).st_ctime_ns)  # the same tick
    bundle_copy.restamp(node)
    assert set(bundle_copy._read_stamp(node.cache.parent).files) == set(files) - {"archive-v0/abc/a.py"}


def test_an_edit_in_place_that_links_nothing_is_not_taken_into_the_stamp(tmp_path):
    """Same size, mtime put back (`cp -p`, `rsync -t --inplace`): only its ctime moved, and no link did; the next
    build hashes it."""
    _, node, files = _kept_copy(tmp_path)
    edited = node.cache / "archive-v0/abc/a.py"
    before = os.lstat(edited)
    edited.write_bytes(b"Z\n")
    os.utime(edited, ns=(before.st_atime_ns, before.st_mtime_ns))
    bundle_copy.restamp(node)
    assert set(bundle_copy._read_stamp(node.cache.parent).files) == set(files) - {"archive-v0/abc/a.py"}


def test_restamp_waits_for_a_build_checking_the_copy(tmp_path, monkeypatch, capsys):
    """A build that finds the copy changed while this one uses it removes its stamp; a restamp under way never writes
    it back."""
    bundle, node, _ = _kept_copy(tmp_path)
    copy = node.cache.parent
    (node.cache / "archive-v0/abc/a.py").write_bytes(b"changed\n")
    os.link(node.cache / "simple-v1/index", tmp_path / "a-link")  # as a build's links do: restamp has work
    held = locks.try_hold(copy, shared=True)  # this build's hold on the copy
    other: list[bundle_copy.NodeCopy] = []
    checking = threading.Thread(target=lambda: other.append(_sealed_copy(copy.parent, bundle)))
    clock = bundle_copy._clock

    def another_build_checks(directory):  # between restamp's read and its write
        checking.start()
        checking.join(timeout=2)
        return clock(directory)

    monkeypatch.setattr(bundle_copy, "_clock", another_build_checks)
    bundle_copy.restamp(node)
    checking.join(timeout=60)
    os.close(other[0].held)
    os.close(held)
    assert other[0].cache.parent != copy and "left to the build using it" in capsys.readouterr().err
    assert not (copy / bundle_copy.STAMP).exists()


def test_copies_another_nemo_rl_stamped_are_listed_as_such_and_removed_by_the_next_build(tmp_path, monkeypatch):
    """Before and after the copy a build takes, in the node's order."""
    bundle, node, _ = _kept_copy(tmp_path)
    kept, root = node.cache.parent, node.cache.parent.parent
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(root))
    stamped = json.loads((kept / bundle_copy.STAMP).read_text())
    others = [root / f"{NODE_COPY_PREFIX}!first", root / f"{NODE_COPY_PREFIX}~last", root / f"{NODE_COPY_PREFIX}~new"]
    for other in others:
        shutil.copytree(kept, other, symlinks=True)
        (other / bundle_copy.STAMP).write_text(json.dumps({**stamped, "version": 2}))
    old = time.time() - bundle_copy.OTHERS_KEPT_S - 60
    for other in others[:2]:  # the third is in use by the other nemo-rl: kept
        os.utime(other / bundle_copy.STAMP, (old, old))
    rows = {row.path: row for row in housekeeping.listing(None)}
    assert [rows[other].state for other in others] == ["other version"] * 3 and rows[kept].state == "kept copy"
    again = _sealed_copy(root, bundle)
    os.close(again.held)
    assert copies(root) == sorted([kept, others[2]]) and again.cache.parent == kept


def test_a_stamp_larger_than_other_records_reads(tmp_path):
    """A bundle of 100,000 files: its stamp is beyond what nemo-rl's other records may be."""
    _, node, _ = _kept_copy(tmp_path)
    copy = node.cache.parent
    stamp = bundle_copy._read_stamp(copy)
    kept, sha = next(iter(stamp.files.values()))
    many = {f"archive-v0/{i:06d}/site-packages/package/module_{i}.py": (kept, sha) for i in range(100_000)}
    codec.write(copy / bundle_copy.STAMP, dataclasses.replace(stamp, files=many), bundle_copy.STAMP_VERSION)
    assert (copy / bundle_copy.STAMP).stat().st_size > values.STATE_FILE_MAX
    assert bundle_copy._read_stamp(copy) == dataclasses.replace(stamp, files=many)


def test_an_interrupt_while_a_changed_copy_s_stamp_waits_is_the_interrupt(tmp_path, monkeypatch):
    bundle, node, _ = _kept_copy(tmp_path)
    copy = node.cache.parent
    held = locks.try_hold(copy, shared=True)  # another build uses it
    (node.cache / "archive-v0/abc/a.py").write_bytes(b"changed\n")
    take_turn = bundle_copy._take_turn

    def interrupted(lock, doing):
        if lock.name == bundle_copy.STAMP_LOCK:
            raise Interrupted(2)
        return take_turn(lock, doing)

    monkeypatch.setattr(bundle_copy, "_take_turn", interrupted)
    with pytest.raises(Interrupted):
        bundle_copy.node_copy(copy.parent, bundle, "sha256:" + "0" * 64, bundles.content_digest, lambda content: None)
    os.close(held)


def test_a_restamp_that_cannot_take_the_stamp_lock_leaves_the_install_done(tmp_path, monkeypatch):
    _, node, _ = _kept_copy(tmp_path)
    os.link(node.cache / "simple-v1/index", tmp_path / "a-link")

    def full(lock, doing):
        raise NemoRLError(f"{lock.parent} cannot be used: No space left on device", "free space")

    monkeypatch.setattr(bundle_copy, "_take_turn", full)
    bundle_copy.restamp(node)  # no error: the next build hashes what the stamp does not vouch for


def test_a_stamp_that_cannot_be_written_leaves_the_install_done(tmp_path, monkeypatch):
    _, node, _ = _kept_copy(tmp_path)
    os.link(node.cache / "simple-v1/index", tmp_path / "a-link")

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(bundle_copy.codec, "write", full)
    bundle_copy.restamp(node)  # no error: the next build hashes what the stamp does not vouch for


def test_a_copy_found_changed_while_a_build_holds_it_loses_its_stamp(tmp_path, capsys):
    """The build holding it restamps it once done; without its stamp, nothing vouches for it again."""
    bundle, node, _ = _kept_copy(tmp_path)
    copy = node.cache.parent
    held = locks.try_hold(copy, shared=True)  # a build using it
    (copy / bundles.CACHE / "archive-v0/abc/a.py").write_bytes(b"Z\n")
    other = _sealed_copy(copy.parent, bundle)
    os.close(other.held)
    assert other.cache.parent != copy and "left to the build using it" in capsys.readouterr().err
    assert not (copy / bundle_copy.STAMP).exists()
    os.close(held)
    bundle_copy.restamp(node)
    assert bundle_copy._read_stamp(copy) is None


def test_a_turn_taken_on_a_full_disk_is_taken_and_given_back(tmp_path, monkeypatch):
    cache = tmp_path / "copy" / bundles.CACHE
    (cache / "archive-v0").mkdir(parents=True)

    def full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full)  # the holder's name cannot be written
    with bundle_copy.working_cache(cache) as work:
        assert (work / "archive-v0").is_dir()
    os.close(locks.lock_file(cache.parent / bundle_copy.WORKING_LOCK, None))


def test_a_live_node_copy_of_the_same_pid_is_left_alone(world, tmp_path, monkeypatch):
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    theirs = venvs / f"{bundle_copy.NODE_COPY_PREFIX}{os.getpid()}"  # another container's build, same PID
    venvs.mkdir(mode=0o700)
    theirs.mkdir()
    (theirs / "in-use").write_text("")
    held = locks.hold(theirs)
    try:
        bundle = fake_bundle(world, tmp_path / "bundle")
        monkeypatch.setattr(bundles.uv, "sync", lambda *a, **k: None)
        project = Project.read(world.project)
        bundles.sync_from(bundle, project, FLAGS, tmp_path / "env", bundles.check(bundle, project, FLAGS))
        assert (theirs / "in-use").exists()
    finally:
        os.close(held)
