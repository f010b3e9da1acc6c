"""A node's copy of a bundle's uv cache, checked once against the bundle's digest and kept for the next builds.

Each file is hard-linked (when only this user or root may write it) or copied into this user's store, and hashed as
it is read. STAMP keeps the digest and each file's identity (device, inode, size, mtime, mode, ctime) and hash: a
later build hashes only the files whose identity moved, once `restamp` has taken in the ctimes its own links moved.
One build at a time chooses or makes a copy (`node_lock`); builds hold a copy shared, removal holds it exclusively.
The last used copies of KEEP bundles are kept.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from nemo_rl import codec, locks, settings
from nemo_rl.errors import NemoRLError, command
from nemo_rl.progress import progress
from nemo_rl.workers.bundle_trust import CACHE, NODE_COPY_PREFIX, new_copy_dir
from nemo_rl.workers.tree_copy import Identity, copy_cache, identity, link_tree, remove

RACY_NS = 2_000_000_000
STAMP = "checked.json"
STAMP_VERSION = 2
WORKING = "working-cache"
WORKING_LOCK = "working-cache.lock"
KEEP = 2  # checked copies kept per node and user: the last used
Content = tuple[int, int, str]  # files, bytes, digest of a cache's content (bundles.content_digest)
# (cache, known (size, sha256) by relative path, receives sha256 by relative path) -> its content
Digest = Callable[[Path, dict[str, tuple[int, str]], dict[str, str]], Content]
Sealed = Callable[[Content], None]  # raises when a content is not the bundle's (with its CUDA record and manifest)


def node_lock(root: Path) -> Path:
    """This user's lock on choosing, checking and making node copies under `root`: one build at a time does, so
    builds started together from one bundle make one copy. Not a NODE_COPY_PREFIX name, nor a key's lock file."""
    return root / ".node-copy.lock"


@dataclasses.dataclass(frozen=True)
class NodeCopy:
    cache: Path  # its checked uv cache
    held: int  # the descriptor holding the copy shared: closed once uv is done
    stamp: Stamp  # as read or written by this build
    stamp_key: Identity | None  # the stamp file's identity then; None: read it again


def node_copy(root: Path, bundle: Path, digest: str, digest_of: Digest, sealed: Sealed) -> NodeCopy:
    """A checked copy of `bundle` (digest `digest`) under `root`, held shared: a kept one whose files still hash to
    what its check found, else a new one copied from the bundle. Either is held against the bundle's digest by
    `sealed`. A build that finds another choosing or making a copy waits for it, then takes the copy it made."""

    node = _take_turn(node_lock(root), "copying or checking a bundle on this node")  # guard: node-copy-two-builds-at-once-take-turns
    try:
        digests: dict[Path, str] = {}  # this user's checked copies, each stamp read once
        found = None
        for candidate in sorted(root.glob(f"{NODE_COPY_PREFIX}*")):
            if not os.path.lexists(candidate / STAMP):  # never checked: under the node lock, a killed build's
                locks.remove_unheld(candidate)  # guard: node-copy-a-copy-a-killed-build-left-is
            elif found is None:
                found = _checked(candidate, bundle, digest, digest_of, sealed, digests)
            elif (other := stamp_digest(candidate)) is not None:
                digests[candidate] = other
        if found is None:
            found = _made(root, bundle, digest, digest_of, sealed)
            digests[found.cache.parent] = digest
        _keep_newest(digests)  # guard: node-copy-a-node-keeps-its-last-used
        return found
    finally:
        os.close(node)


def _take_turn(lock: Path, doing: str) -> int:
    """The lock file `lock`, held once the build holding it ends, and named after this build for the next one."""

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


def _made(root: Path, bundle: Path, digest: str, digest_of: Digest, sealed: Sealed) -> NodeCopy:
    """A new checked copy of `bundle`: held exclusively while made (`envs prune` and the next build see a copy
    being made), shared once stamped."""
    copy, held = new_copy_dir(root)
    try:
        cache = copy / CACHE
        progress(f"copying bundle {bundle} into this node's copy {copy}")
        started = time.time_ns()
        copied = copy_cache(bundle / CACHE, cache, bundle)
        hashes: dict[str, str] = {}
        # the names and links walked again; each file's hash is the copy's
        content = digest_of(cache, {relative: (size, sha) for relative, (size, sha, _) in copied.items()}, hashes)
        sealed(content)  # guard: never-the-node-s-copy-is-checked
        files = {}  # each file's identity as the copy made it, every one taken after `started`
        for relative, sha in hashes.items():
            kept = copied[relative][2] if relative in copied else None  # one the copy did not make: hashed next time
            if kept is not None and started - kept[3] > RACY_NS:  # guard: node-copy-racy-identities-are-left-out
                files[relative] = (kept, sha)
        stamp = Stamp(digest, content, files)
        codec.write(copy / STAMP, stamp, STAMP_VERSION, mode=0o600)
        key = _stamp_key(copy)  # held exclusively: no other build writes it meanwhile
        try:
            locks.share(held)  # guard: node-copy-a-new-copy-is-held-shared-once; a build waiting on the node lock uses it alongside
        except BlockingIOError as exc:  # a kernel that converts a lock in two steps, and a remover in between
            raise NemoRLError(f"this node's new copy of bundle {bundle} was taken by `nemo-rl envs prune` while it "
                              "was handed over", "run the build again") from exc
    except BaseException:
        shutil.rmtree(copy, ignore_errors=True)
        os.close(held)
        raise
    return NodeCopy(cache, held, stamp, key)


def _checked(candidate: Path, bundle: Path, digest: str, digest_of: Digest, sealed: Sealed,
             digests: dict[Path, str]) -> NodeCopy | None:
    """The uv cache of the kept copy `candidate` and the descriptor holding it shared, when it is the bundle's and
    still holds what its check found; None when it is another bundle's or being removed; removed when it changed
    (left while another build uses it). Its digest goes into `digests`."""
    held = locks.try_hold(candidate, shared=True)  # guard: node-copy-builds-hold-a-kept-copy-shared; other builds use it too; a remover holds it exclusively
    if held is None:
        return None
    try:
        stamp = _read_stamp(candidate)  # read under the hold: a prune removes only what nobody holds
        if stamp is None:
            os.close(held)
            return None
        digests[candidate] = stamp.digest
        if stamp.digest != digest:  # guard: node-copy-the-stamp-names-the-bundle-s
            os.close(held)
            return None
        cache = candidate / CACHE
        known, top = {}, f"{cache}/"  # strings: a Path per file costs more than its lstat
        for relative, (kept, sha) in stamp.files.items():
            try:
                if identity(os.lstat(top + relative)) == kept:  # guard: node-copy-an-identity-that-moved-is
                    known[relative] = (kept[2], sha)
            except OSError:
                pass
        if digest_of(cache, known, {}) != stamp.content:  # guard: node-copy-a-kept-copy-is-held-to-what; ours, changed since: copied again, never used
            os.close(held)
            # no build takes it meanwhile (they wait on the node lock); one that took it earlier keeps it
            left = not locks.remove_unheld(candidate)  # guard: node-copy-a-copy-found-changed-is
            if left:  # its stamp goes: no restamp of the build using it vouches for it again
                (candidate / STAMP).unlink(missing_ok=True)  # guard: node-copy-a-changed-copy-left-loses-its-stamp
            progress(f"warning: this node's copy of bundle {bundle} in {candidate} changed since its check: "
                     + ("left to the build using it (`nemo-rl envs prune` removes it after)" if left else "removed"))
            return None
        try:
            sealed(stamp.content)  # guard: node-copy-a-kept-copy-is-held-against
        except NemoRLError:
            # its files are what its stamp found, and that is not this bundle's: the stamp names another bundle
            # (edited), or the bundle's record or manifest changed. A fresh copy tells which, and is refused in
            # the second case, naming the bundle
            progress(f"this node's copy {candidate} does not hold bundle {bundle} as its manifest says: not used")
            os.close(held)
            return None
        progress(f"using this node's checked copy of bundle {bundle} in {candidate}")
        os.utime(candidate / STAMP)  # guard: node-copy-the-last-used-are-kept; last used: what _keep_newest goes by
        return NodeCopy(cache, held, stamp, _stamp_key(candidate))
    except BaseException:
        os.close(held)
        raise


@contextlib.contextmanager
def working_cache(cache: Path) -> Iterator[Path]:
    """uv's cache for a build from the node copy whose checked uv cache is `cache` (held by the caller), kept beside
    it and used by one build at a time: the copy's very files and nothing else when uv starts, so uv installs what
    was checked and whatever uv writes lands beside the checked files, never in them."""
    held = _take_turn(cache.parent / WORKING_LOCK, f"installing from {cache.parent}")  # guard: working-cache-one-build-at-a-time
    try:
        work = cache.parent / WORKING
        try:
            link_tree(cache, work)  # guard: bundles-uv-writes-into-a-working-cache
        except PermissionError:  # what could not be set right in place (a directory made read-only): made whole again
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
    """Take into the stamp of the node copy `node` the ctimes that this build's own links moved (its working cache's,
    uv's into the environment), so that the next build hashes only files changed otherwise. Called once uv is done.
    A ctime is taken only when older than the filesystem's clock now (a later edit
    in the same tick would leave it as it is); a file whose identity moved in any other way leaves the stamp."""
    copy = node.cache.parent
    held = locks.try_hold(copy, shared=True)
    if held is None:  # being removed
        return
    try:
        same = node.stamp_key is not None and _stamp_key(copy) == node.stamp_key  # guard: restamp-reads-a-stamp-changed-since
        stamp = node.stamp if same else _read_stamp(copy)
        if stamp is None:
            return
        time.sleep(0.01)  # a clock tick after the build's last link: its ctimes are older than the fence
        fence = _clock(copy)
        files, top = {}, f"{copy / CACHE}/"
        for relative, (kept, sha) in stamp.files.items():
            now = identity(os.lstat(top + relative))
            if now == kept or (now[:5] == kept[:5] and now[5] < fence):  # guard: node-copy-restamp-takes-only-a-moved-ctime
                files[relative] = (now, sha)
        if files != stamp.files:
            codec.write(copy / STAMP, dataclasses.replace(stamp, files=files), STAMP_VERSION, mode=0o600)
    except OSError:  # the stamp only saves hashing: the next build hashes what it does not vouch for
        pass
    finally:
        os.close(held)


def _clock(directory: Path) -> int:
    """The filesystem's time now, in its own granularity: the mtime of a file made in `directory`."""
    probe = directory / f".clock-{os.getpid()}"
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        return os.fstat(fd).st_mtime_ns
    finally:
        os.close(fd)
        probe.unlink(missing_ok=True)


def _keep_newest(digests: dict[Path, str]) -> None:
    """Of this user's checked copies (`digests`: their bundles' digests), keep the last used of each of the KEEP
    bundles last used; remove the rest that no build holds. A node that moves from bundle to bundle keeps the
    copies it alternates between, and a second copy of one bundle never takes the other's place."""
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
    """The bundle digest a node copy was checked against; None for one killed before its check, or planted."""
    stamp = _read_stamp(copy)
    return stamp.digest if stamp is not None else None


def _stamp_key(copy: Path) -> Identity | None:
    try:
        return identity(os.lstat(copy / STAMP))
    except OSError:
        return None


def _read_stamp(copy: Path) -> Stamp | None:
    """A node copy's stamp; None when it has none that reads as one (killed while copying)."""
    return codec.read(copy / STAMP, Stamp, STAMP_VERSION)
