"""A node's checked copy of a bundle's uv cache, kept for the next builds.

STAMP holds each file's identity and hash: a later build hashes only the files whose identity moved.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from nemo_rl import codec, locks, settings
from nemo_rl.errors import NemoRLError, command
from nemo_rl.progress import progress
from nemo_rl.workers.tree_copy import Identity, copy_cache, identity, link_tree, remove

NODE_COPY_PREFIX = ".bundle-copy-"  # a checked copy of a bundle's cache, holding MARKER and CACHE
CACHE = "uv-cache"
MARKER = "nemo-rl-node-copy"
RACY_NS = 2_000_000_000
STAMP = "checked.json"
STAMP_VERSION = 3
WORKING = "working-cache"
WORKING_LOCK = "working-cache.lock"
STAMP_LOCK = "stamp.lock"  # a restamp's read and write; a changed copy's stamp removed
STAMPING = "restamping this node's copy, or removing its stamp"
KEEP = 2  # bundles whose last used copy a node keeps
STAMP_MAX = 1 << 30  # about 200 bytes a file: a bundle of millions of files
OTHERS_KEPT_S = 86_400  # a copy whose stamp another nemo-rl wrote, unused this long, is removed
Content = tuple[int, int, str]  # files, bytes, digest of a cache's content (bundles.content_digest)
# (cache, known (size, sha256) by relative path, receives sha256 by relative path) -> its content
Digest = Callable[[Path, dict[str, tuple[int, str]], dict[str, str]], Content]
Sealed = Callable[[Content], None]  # raises when a content is not the bundle's (with its CUDA record and manifest)


def node_lock(root: Path) -> Path:
    """This user's lock on choosing and making node copies under `root`: concurrent builds of a bundle make one copy."""
    return root / ".node-copy.lock"


@dataclasses.dataclass(frozen=True)
class NodeCopy:
    cache: Path  # its checked uv cache
    held: int  # the descriptor holding the copy shared: closed once uv is done


def node_copy(root: Path, bundle: Path, digest: str, digest_of: Digest, sealed: Sealed) -> NodeCopy:
    """A checked copy of `bundle` under `root`, kept or new, held shared (close `held` once uv is done); waits for a
    build choosing or making one, then takes its copy."""
    node = _take_turn(node_lock(root), "copying or checking a bundle on this node")  # guard: node-copy-two-builds-at-once-take-turns
    try:
        digests: dict[Path, str] = {}
        found = None
        for candidate in sorted(root.glob(f"{NODE_COPY_PREFIX}*")):
            if not os.path.lexists(candidate / STAMP):  # under the node lock: a killed build's
                locks.remove_unheld(candidate)  # guard: node-copy-a-copy-a-killed-build-left-is
            elif found is None:
                found = _checked(candidate, bundle, digest, digest_of, sealed, digests)
            elif (other := stamp_digest(candidate)) is not None:
                digests[candidate] = other
            elif _unused_for(candidate, OTHERS_KEPT_S):  # guard: node-copy-another-version-s-copy-is-kept-a-day
                locks.remove_unheld(candidate)  # guard: node-copy-another-version-s-copy-is-removed
        if found is None:
            found = _made(root, bundle, digest, digest_of, sealed)
            digests[found.cache.parent] = digest
        _keep_newest(digests)  # guard: node-copy-a-node-keeps-its-last-used
        return found
    finally:
        os.close(node)


def _take_turn(lock: Path, doing: str) -> int:
    """Hold the lock file `lock`, waiting for its holder, and write this build's name into it."""

    def waiting(fd: int) -> str:
        holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
        return f"waiting for another build ({holder}) {doing}"

    try:
        held = locks.lock_file(lock, waiting)
    except OSError as exc:
        raise settings.venv_dir_error(lock.parent, exc) from exc
    assert held is not None  # given `waiting`, lock_file waits
    try:
        os.ftruncate(held, 0)
        os.pwrite(held, f"pid {os.getpid()} on {platform.node()}, since {time.strftime('%H:%M:%S')}".encode(), 0)  # guard: node-copy-a-waiting-build-names-the-one
    except OSError:  # a full disk: the next build waits without a name
        pass
    return held


def new_copy_dir(root: Path) -> tuple[Path, int]:
    """A new node copy's directory under `root`, marked, and held by the returned descriptor."""
    for attempt in range(3):
        copy = Path(tempfile.mkdtemp(prefix=NODE_COPY_PREFIX, dir=root))  # guard: never-a-node-copy-of-its-own
        held = -1
        try:  # held, then marked: an empty unmarked one is a killed build's
            held = locks.hold(copy)
            fd = os.open(copy / MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            break
        except FileNotFoundError:  # a prune took it before the lock
            if held >= 0:
                os.close(held)
            if attempt == 2:
                raise
    try:
        os.write(fd, f"a node's copy of a bundle (pid {os.getpid()})\n".encode())
        os.close(fd)
        (copy / CACHE).mkdir()
    except BaseException:
        os.close(held)
        shutil.rmtree(copy, ignore_errors=True)
        raise
    return copy, held


def _made(root: Path, bundle: Path, digest: str, digest_of: Digest, sealed: Sealed) -> NodeCopy:
    """A new checked copy of `bundle`, held exclusively while made, shared once stamped."""
    copy, held = new_copy_dir(root)
    try:
        cache = copy / CACHE
        progress(f"copying bundle {bundle} into this node's copy {copy}")
        started = time.time_ns()
        copied = copy_cache(bundle / CACHE, cache, bundle)
        hashes: dict[str, str] = {}
        content = digest_of(cache, {relative: (size, sha) for relative, (size, sha, _) in copied.items()}, hashes)
        sealed(content)  # guard: never-the-node-s-copy-is-checked
        files = {}
        for relative, sha in hashes.items():
            kept = copied[relative][2] if relative in copied else None
            if kept is not None and started - kept[3] > RACY_NS:  # guard: node-copy-racy-identities-are-left-out
                files[relative] = (kept, sha)
        (copy / STAMP_LOCK).touch(0o600)  # made with the copy: a restamp on a full disk still finds it
        codec.write(copy / STAMP, Stamp(digest, content, files), STAMP_VERSION, mode=0o600)
        try:
            locks.share(held)  # guard: node-copy-a-new-copy-is-held-shared-once; a build waiting on the node lock uses it alongside
        except BlockingIOError as exc:  # a kernel that converts a lock in two steps, and a remover in between
            raise NemoRLError(f"`nemo-rl envs prune` removed this node's new copy of bundle {bundle}",
                              "run the build again") from exc
    except BaseException:
        shutil.rmtree(copy, ignore_errors=True)
        os.close(held)
        raise
    return NodeCopy(cache, held)


def _checked(candidate: Path, bundle: Path, digest: str, digest_of: Digest, sealed: Sealed,
             digests: dict[Path, str]) -> NodeCopy | None:
    """`candidate`, held shared, when the bundle's and unchanged, else None; a changed one is removed, or loses its
    stamp while another build holds it."""
    held = locks.try_hold(candidate, shared=True)  # guard: node-copy-builds-hold-a-kept-copy-shared; other builds use it too; a remover holds it exclusively
    if held is None:
        return None
    try:
        stamp = _read_stamp(candidate)  # read under the hold: a prune removes only what nobody holds
        if stamp is None:  # another nemo-rl's
            os.close(held)
            if _unused_for(candidate, OTHERS_KEPT_S):
                locks.remove_unheld(candidate)  # guard: node-copy-another-version-s-first-copy-is-removed
            return None
        digests[candidate] = stamp.digest
        if stamp.digest != digest:  # guard: node-copy-the-stamp-names-the-bundle-s
            os.close(held)
            return None
        cache = candidate / CACHE
        known, top = {}, f"{cache}/"  # a Path per file costs more than its lstat
        for relative, (kept, sha) in stamp.files.items():
            try:
                if identity(os.lstat(top + relative)) == kept:  # guard: node-copy-an-identity-that-moved-is
                    known[relative] = (kept[2], sha)
            except OSError:
                pass
        if digest_of(cache, known, {}) != stamp.content:  # guard: node-copy-a-kept-copy-is-held-to-what; ours, changed since: copied again, never used
            os.close(held)
            held = -1  # guard: node-copy-a-changed-copy-s-hold-is-given-back-once
            left = not locks.remove_unheld(candidate)  # guard: node-copy-a-copy-found-changed-is
            if left:  # its stamp goes: no restamp of the build using it vouches for it again
                try:
                    turn = _take_turn(candidate / STAMP_LOCK, STAMPING)  # guard: node-copy-a-changed-copy-s-stamp-goes-between-restamps
                except (NemoRLError, OSError):  # the copy removed meanwhile (`envs prune`)
                    turn = -1
                try:
                    (candidate / STAMP).unlink(missing_ok=True)  # guard: node-copy-a-changed-copy-left-loses-its-stamp
                finally:
                    if turn >= 0:
                        os.close(turn)
            progress(f"warning: this node's copy of bundle {bundle} in {candidate} changed since its check: "
                     + ("left to the build using it (`nemo-rl envs prune` removes it after)" if left else "removed"))
            return None
        try:
            sealed(stamp.content)  # guard: node-copy-a-kept-copy-is-held-against
        except NemoRLError:  # a fresh copy tells whether the stamp or the bundle changed, and names it
            progress(f"this node's copy {candidate} does not hold bundle {bundle} as its manifest says: not used")
            os.close(held)
            return None
        progress(f"using this node's checked copy of bundle {bundle} in {candidate}")
        os.utime(candidate / STAMP)  # guard: node-copy-the-last-used-are-kept; last used: what _keep_newest goes by
        return NodeCopy(cache, held)
    except BaseException:
        if held >= 0:
            os.close(held)
        raise


def _unused_for(copy: Path, seconds: float) -> bool:
    try:
        return time.time() - os.lstat(copy / STAMP).st_mtime > seconds
    except OSError:
        return False


@contextlib.contextmanager
def working_cache(cache: Path) -> Iterator[Path]:
    """uv's cache for one build at a time: links to the checked `cache`'s files, so uv writes beside them."""
    held = _take_turn(cache.parent / WORKING_LOCK, f"installing from {cache.parent}")  # guard: working-cache-one-build-at-a-time
    try:
        work = cache.parent / WORKING
        try:
            link_tree(cache, work)  # guard: bundles-uv-writes-into-a-working-cache
        except PermissionError:  # a directory made read-only: made whole again
            try:
                remove(str(work))
                link_tree(cache, work)
            except PermissionError as exc:
                fix = command("chmod -R u+rwx {work}; rm -rf {work}", work=work)
                raise NemoRLError(f"cannot make the working cache {work} this node's copy of the bundle: {exc}",
                                  f"{fix}, then build again") from exc
        yield work
    finally:
        os.close(held)


def restamp(node: NodeCopy) -> None:
    """Take into `node`'s stamp the ctimes this build's own links moved; call once uv is done."""
    copy = node.cache.parent
    with contextlib.ExitStack() as held:
        shared = locks.try_hold(copy, shared=True)
        if shared is None:  # being removed
            return
        held.callback(os.close, shared)
        try:  # a build that finds the copy changed removes its stamp, never undone here
            held.callback(os.close, _take_turn(copy / STAMP_LOCK, STAMPING))  # guard: restamp-under-the-stamp-lock
        except (NemoRLError, OSError):  # a full disk: the stamp only saves hashing
            return
        try:
            stamp = _read_stamp(copy)
            if stamp is None:
                return
            time.sleep(0.01)  # a clock tick after the build's last link: its ctimes are older than the fence
            fence = _clock(copy)
            files, top = {}, f"{copy / CACHE}/"
            for relative, (kept, sha) in stamp.files.items():
                now = identity(os.lstat(top + relative))
                linked = now[6] != kept[6]  # guard: restamp-takes-a-ctime-a-link-moved; an edit in place moves no link
                if now == kept or (now[:5] == kept[:5] and linked and now[5] < fence):  # guard: node-copy-restamp-takes-only-a-moved-ctime
                    files[relative] = (now, sha)
            if files != stamp.files:
                codec.write(copy / STAMP, dataclasses.replace(stamp, files=files), STAMP_VERSION, mode=0o600)
        except OSError:  # the stamp only saves hashing: the next build hashes what it does not vouch for
            pass


def _clock(directory: Path) -> int:
    """The filesystem's time now, in its own granularity."""
    probe = directory / f".clock-{os.getpid()}"
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        return os.fstat(fd).st_mtime_ns
    finally:
        os.close(fd)
        probe.unlink(missing_ok=True)


def _keep_newest(digests: dict[Path, str]) -> None:
    """Keep the newest copy of each of the KEEP last used bundles (`digests`: copy -> bundle); remove the rest."""
    used = []
    for copy, digest in digests.items():
        try:
            used.append((os.lstat(copy / STAMP).st_mtime_ns, digest, copy))
        except OSError:  # removed meanwhile
            continue
    kept: set[str] = set()
    for _, digest, copy in sorted(used, reverse=True):
        if digest not in kept and len(kept) < KEEP:  # guard: node-copy-keep-counts-bundles-not-copies
            kept.add(digest)
        else:
            locks.remove_unheld(copy)


@dataclasses.dataclass(frozen=True)
class Stamp:
    digest: str  # the bundle's
    content: Content  # what the copy's check found
    files: dict[str, tuple[Identity, str]]  # relative path: (identity, sha256), racy ones left out


def stamp_digest(copy: Path) -> str | None:
    """The bundle digest a node copy was checked against; None when it has no readable stamp."""
    stamp = _read_stamp(copy)
    return stamp.digest if stamp is not None else None


def _read_stamp(copy: Path) -> Stamp | None:
    """A node copy's stamp; None when it has none that reads as one."""
    return codec.read(copy / STAMP, Stamp, STAMP_VERSION, size_limit=STAMP_MAX)
