"""Builds at once on one node from one bundle (review finding N3): one copy of the bundle, used by all of them,
never removed under one of them. Each build is a real process calling bundle_copy.node_copy, held at the points
the test names by lines on its stdin."""

import itertools
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

from nemo_rl import locks
from nemo_rl.errors import NemoRLError
from nemo_rl.workers import bundle_copy, bundles, housekeeping
from nemo_rl.workers.bundle_trust import NODE_COPY_PREFIX

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
    cache, held = bundle_copy.node_copy(root, bundle, digest, digest_of, sealed)
except Interrupted:
    print("interrupted", flush=True)
    sys.exit(130)
print("using", cache.parent, flush=True)
sys.stdin.readline()
os.close(held)
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
    root.mkdir()
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
        expected = bundles.content_digest(source / bundles.CACHE)
        cache, held = bundle_copy.node_copy(root, source, digest, bundles.content_digest,
                                            lambda content: None if content == expected else pytest.fail("content"))
        os.close(held)
        return cache.parent

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
