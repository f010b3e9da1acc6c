"""Bundles: a worker environment made once on a builder and built on nodes with no network and no compiler.

A bundle is a directory holding a uv cache trimmed to what `uv sync --locked --offline` needs for one key's
inputs (index wheels, and the wheels uv built from the forks and from sdists, compiled parts included; no git
history, no build scratch) and a manifest: every input of the key, uv's version, the distributions, and a
digest of the content. A node checks the manifest against its own inputs and the content against the digest
before it installs anything, so a bundle for another uv.lock, Python, platform or uv, a truncated copy or an
edited file is refused with its own message.

bundle_pack.py makes bundles; this module checks one and installs from it on a node.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

from nemo_rl import settings, uv
from nemo_rl.errors import NemoRLError
from nemo_rl.progress import progress
from nemo_rl.workers import archive_hashes, bundle_seal, bundle_trust, cuda_archs
from nemo_rl.workers.manifests import MANIFEST, Manifest, differences, inputs_for, read_manifest

CACHE = bundle_trust.CACHE  # the bundle's uv cache, and a node's working copy of it
DRIVER_FLAGS = ("--locked",)  # the checkout's `.venv`: what `uv run` syncs (default groups, no extras)
# Buckets uv only reads when everything is there (unpacked wheels): a node links them instead of copying.
READ_ONLY_BUCKETS = ("archive-v",)
WORK_CACHE_PREFIX = bundle_trust.WORK_CACHE_PREFIX  # a node's working cache, in $NEMO_RL_VENV_DIR while it builds


def _file_entry(root: Path, path: Path) -> tuple[str, int]:
    relative = path.relative_to(root).as_posix()
    if path.is_symlink():
        target = os.readlink(path)
        # uv's own links are relative, into archive-v0: one that leaves the bundle would install an outside file
        landing = os.path.normpath(os.path.join(os.path.dirname(relative), target))
        # and as the kernel follows it: `q -> p/../../etc` through `p -> ../..` is inside by its text alone
        real, inside = os.path.realpath(path), os.path.realpath(root)
        if (os.path.isabs(target) or landing == ".." or landing.startswith("../")
                or not (real == inside or real.startswith(inside + os.sep))):
            raise NemoRLError(f"{path} links out of the bundle (to {target!r:.120})",
                              "make the bundle again on the builder (`nemo-rl envs pack`): a bundle links only "
                              "inside itself")
        return f"L {relative} {target}\n", -1
    if not stat.S_ISREG(os.lstat(path).st_mode):  # a FIFO would block the open for ever
        raise NemoRLError(f"{path} in the bundle is not a file or a link (a FIFO, socket or device)",
                          "make the bundle again on the builder (`nemo-rl envs pack`), or copy it again")
    file_hash, size = hashlib.sha256(), 0
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            file_hash.update(block)  # releases the GIL: files hash in parallel
            size += len(block)
    return f"F {relative} {size} {file_hash.hexdigest()}\n", size


def content_digest(root: Path) -> tuple[int, int, str]:
    """(files, bytes, sha256) over every path under `root`: names, sizes, contents and link targets, in a
    fixed order (files are hashed on all cores; the order of the entries does not depend on it)."""
    from concurrent.futures import ThreadPoolExecutor

    paths = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        # a link to a directory (uv's wheel entries point into archive-v0) is listed among dirnames, not walked
        links = [name for name in dirnames if (Path(dirpath) / name).is_symlink()]
        paths += [Path(dirpath) / name for name in sorted([*filenames, *links])]
    digest, files, total = hashlib.sha256(), 0, 0
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for entry, size in pool.map(lambda path: _file_entry(root, path), paths):
            digest.update(entry.encode())
            if size >= 0:
                files, total = files + 1, total + size
    return files, total, "sha256:" + digest.hexdigest()


def check(bundle: Path, project: Path, flags: list[str] | tuple[str, ...], digest: str | None = None) -> Manifest:
    """The bundle's manifest, once its inputs are this node's, its digest one this site pins (`digest`, else
    $NEMO_RL_BUNDLE_DIGESTS when set) and its files shared with nothing outside it. Its content is checked
    against the digest on the node's own copy, in `sync_from`: a file the bundle's writer changes after a check
    of the bundle itself would be installed unchecked."""
    manifest = read_manifest(bundle)
    different = differences(manifest, inputs_for(project, flags), project)
    if different:
        raise NemoRLError(f"bundle {bundle} was made for other inputs: {'; '.join(different)}",
                          "make a bundle from this uv.lock with this Python and uv on the builder "
                          f"(`nemo-rl envs pack ... {bundle}`), or check out the commit the bundle was made from")
    trusted = {bundle_trust.digest_argument(digest)} if digest is not None else bundle_trust.pinned_digests()
    if trusted and manifest.digest not in trusted:
        where = "--digest" if digest is not None else "NEMO_RL_BUNDLE_DIGESTS"
        raise NemoRLError(f"bundle {bundle} has digest {manifest.digest}, which {where} does not pin (anyone who can "
                          "write a bundle can write its manifest)",
                          f"use the bundle whose digest `nemo-rl envs pack` printed, or add this digest to {where} "
                          "if this bundle is the one you trust")
    own = bundle_trust.work_caches(settings.venv_dir(create=False))
    bundle_trust.refuse_foreign_links(bundle / CACHE, own, settings.venv_dir(create=False))
    return manifest


def check_copy(work: Path, bundle: Path, manifest: Manifest, record: bytes) -> None:
    """The node's working copy of the bundle's cache, the CUDA record it read (`record`) and the manifest are what
    the digest says: what uv installs is what was checked, however the bundle changes meanwhile."""
    progress(f"checking bundle {bundle} ({manifest.files} files, {manifest.bytes / 1e6:.1f} MB) against its digest")
    files, total, cache_digest = content_digest(work)
    digest = bundle_seal.seal(cache_digest, manifest, record)
    if (files, total, digest) != (manifest.files, manifest.bytes, manifest.digest):
        raise NemoRLError(f"bundle {bundle} does not match its manifest: {files} files, {total} bytes, {digest} "
                          f"found; {manifest.files} files, {manifest.bytes} bytes, {manifest.digest} recorded "
                          "(a truncated copy or an edited file)", f"copy the bundle again from the builder: {bundle}")


def _copy(source: str | Path, target: str | Path, *, follow_symlinks: bool = True) -> None:
    """copy2 without the write bits for group and others: uv keeps a cached file's mode in the environment it
    installs (copy and hard-link mode alike), and a file a co-user may write is code they may change after the
    check (verification refuses such an environment)."""
    shutil.copy2(source, target, follow_symlinks=follow_symlinks)
    if not os.path.islink(target):
        os.chmod(target, os.stat(target).st_mode & 0o7777 & ~0o022)


def strip_group_write(root: Path) -> None:
    """Take group's and others' write bits off everything under `root` that has them (links aside: theirs is
    not a mode): an environment built under umask 002, or from a cache whose files keep such modes."""
    for dirpath, _, filenames in os.walk(root):
        for path in [dirpath, *(os.path.join(dirpath, n) for n in filenames)]:
            st = os.lstat(path)
            if st.st_mode & 0o022 and not stat.S_ISLNK(st.st_mode):
                os.chmod(path, st.st_mode & 0o7777 & ~0o022)


def _link_tree(source: Path, target: Path) -> int:
    """`target` with the directories of `source` and its files, so whatever uv adds (the project's own editable
    wheel) lands in `target`, never in the bundle. A file only this user can write is hard-linked when the bundle
    is on this filesystem (no byte copied, and nobody else can change it after the check); any other file is
    copied (another filesystem, NFS, a read-only mount, a file others may write), so the copy that is checked is
    the copy that is installed. Returns how many files were linked."""
    euid = os.geteuid()
    links = 0

    def place(path: Path, here: Path) -> None:
        nonlocal links
        try:
            os.link(path, here)
            linked = os.lstat(here)  # the inode linked (the name may have been swapped meanwhile): only ours stays
            if linked.st_uid == euid and not linked.st_mode & 0o022:
                links += 1
                return
            os.unlink(here)
        except OSError:  # EXDEV across filesystems, EPERM where hard links to others' files are barred
            pass
        _copy(path, here)

    source = source.resolve()
    for dirpath, dirnames, filenames in os.walk(source):
        here = target / Path(dirpath).relative_to(source)
        here.mkdir(exist_ok=True)
        for name in [*filenames, *(d for d in dirnames if (Path(dirpath) / d).is_symlink())]:
            path = Path(dirpath) / name
            if path.is_symlink():
                os.symlink(os.readlink(path), here / name)
            else:
                place(path, here / name)
    return links


def sync_from(bundle: Path, project: Path, flags: list[str] | tuple[str, ...], environment: Path,
              manifest: Manifest | None = None, *, inexact: bool = True) -> None:
    """Install the environment from a checked bundle (`manifest`, what `check` returned): `uv sync --locked
    --offline` against a working cache made from it and checked against the manifest's digest. uv writes lock
    files into its cache and a bundle lives on read-only filesystems, so the small buckets (index and built-wheel
    records) are copied; the unpacked wheels, nearly all of the bytes, are linked where that is safe (see
    _link_tree). uv copies into the environment, which so never shares a file with the bundle. The working
    cache is removed after."""
    record = cuda_archs.read_record(bundle)  # these bytes, checked against the GPU here and the digest below
    fits = cuda_archs.check_node(record, bundle)  # refuses before anything is installed
    if fits:
        progress(fits)
    manifest = manifest or read_manifest(bundle)
    root = settings.venv_dir()
    # a name of its own (PIDs repeat across containers sharing the directory), held while in use, marked as ours
    work, held = bundle_trust.new_work_cache(root)  # while held, `envs prune` leaves it; after a SIGKILL, removes it
    cache = work / CACHE
    progress(f"using bundle {bundle} through a working uv cache in {cache} (the bundle stays read-only)")
    try:
        linked = 0
        for bucket in sorted((bundle / CACHE).iterdir()):
            if bucket.name.startswith(READ_ONLY_BUCKETS) and bucket.is_dir() and not bucket.is_symlink():
                linked += _link_tree(bucket, cache / bucket.name)
            elif bucket.is_dir() and not bucket.is_symlink():
                _copy_tree(bucket, cache / bucket.name, bundle)
            else:
                _copy(bucket, cache / bucket.name, follow_symlinks=False)
        check_copy(cache, bundle, manifest, record)
        checked, unlisted = archive_hashes.check(cache, project, f"bundle {bundle}")  # what uv recorded of each
        progress(f"{checked} index archive(s) of the bundle carry the hashes uv.lock records" if checked else
                 "warning: no archive record of uv's found in the bundle to check against uv.lock's hashes")
        if unlisted:  # build requirements of the lock's sdists: never installed into the environment
            progress(f"{len(unlisted)} archive(s) uv.lock does not name (build requirements): "
                     + ", ".join(unlisted))
        # uv copies what is linked to the bundle; a working cache of the node's own copies only (another filesystem,
        # a read-only bundle) shares nothing with it, and uv links from it instead of copying every byte twice
        mode = "copy" if linked else "hardlink"
        uv.sync(project, flags=[*flags, "--offline", *(["--inexact"] if inexact else [])], environment=environment,
                stream=True, extra_env={"UV_CACHE_DIR": str(cache), "UV_OFFLINE": "1", "UV_LINK_MODE": mode})
    finally:
        shutil.rmtree(work, ignore_errors=True)
        os.close(held)


def _copy_tree(source: Path, target: Path, bundle: Path) -> None:
    """copytree, whose shutil.Error (what it could not copy: a FIFO or a device planted in the bundle after
    `check`) becomes a NemoRLError naming the file."""
    try:
        shutil.copytree(source, target, symlinks=True, copy_function=_copy)
    except shutil.Error as exc:
        failed = exc.args[0] if exc.args and isinstance(exc.args[0], list) else []
        name, why = (failed[0][0], failed[0][2]) if failed and len(failed[0]) == 3 else (str(source), str(exc))
        raise NemoRLError(f"cannot copy {name} of bundle {bundle}: {why} (a bundle holds only regular files)",
                          f"copy the bundle again from the builder: {bundle}") from exc
    for dirpath, _, _ in os.walk(target):  # copytree gives directories their source's mode
        os.chmod(dirpath, os.stat(dirpath).st_mode & 0o7777 & ~0o022)


def driver_path(project: Path) -> Path:
    """The checkout's own environment, where `uv run` looks for it."""
    return project / os.environ.get("UV_PROJECT_ENVIRONMENT", ".venv")


def driver_unfinished(project: Path) -> Path:
    """Beside the checkout's environment while build_driver makes it, removed last: a `.venv` a killed build left
    (with Ray in, a dependency not yet) is made again, never taken for made."""
    venv = driver_path(project)
    return venv.with_name(f".{venv.name}.nemo-rl-unfinished")


def build_driver(bundle: Path, project: Path, flags: list[str] | tuple[str, ...],
                 digest: str | None = None) -> Manifest:
    """The checkout's `.venv` from a bundle made for (uv.lock, flags): on a node that has only the checkout, what
    `nemo-rl` itself runs in (exact, as `uv run` syncs it). Complete or marked unfinished (driver_unfinished)."""
    manifest = check(bundle, project, flags, digest)
    progress(f"making the checkout's environment {driver_path(project)} from bundle {bundle}")
    mark = driver_unfinished(project)
    mark.parent.mkdir(parents=True, exist_ok=True)
    mark.touch()
    sync_from(bundle, project, DRIVER_FLAGS, driver_path(project), manifest, inexact=False)
    strip_group_write(driver_path(project))
    mark.unlink()
    return manifest


def configured() -> list[Path]:
    """Bundles under $NEMO_RL_BUNDLE_DIR (each a directory with a manifest), or none when it is not set."""
    root = settings.bundle_dir()
    if root is None:
        return []
    if not root.is_dir():
        raise NemoRLError(f"NEMO_RL_BUNDLE_DIR {root} is not a directory", "point it at the directory holding "
                          "bundles made by `nemo-rl envs pack`, or unset it")
    return sorted(p for p in root.iterdir() if not p.name.startswith(".") and (p / MANIFEST).is_file())


def find(project: Path, flags: list[str]) -> Path | None:
    """The configured bundle for these inputs; an error saying why when bundles are configured but none fits
    (a node that should be offline must not fall back to the network)."""
    bundles = configured()
    if not bundles:
        if settings.bundle_dir():  # a shared mount that did not come up: never the network
            raise NemoRLError(f"NEMO_RL_BUNDLE_DIR {settings.bundle_dir()} holds no bundle",
                              "mount the directory the bundles are in (or pack one into it with `nemo-rl envs "
                              "pack`), or unset NEMO_RL_BUNDLE_DIR to build from the network")
        return None
    local = inputs_for(project, flags)
    trusted = bundle_trust.pinned_digests()
    why = {}
    for bundle in bundles:
        try:
            manifest = read_manifest(bundle)
        except NemoRLError as exc:  # one broken bundle never hides the good ones
            progress(f"warning: skipping bundle {bundle}: {exc.what}")
            why[bundle.name] = f"broken ({exc.what})"
            continue
        different = differences(manifest, local, project)
        if trusted and manifest.digest not in trusted:
            different.append(f"digest {manifest.digest} not in NEMO_RL_BUNDLE_DIGESTS")
        if not different:
            return bundle
        why[bundle.name] = "; ".join(different)
    raise NemoRLError(f"no bundle in NEMO_RL_BUNDLE_DIR fits {' '.join(flags)}: "
                      + " | ".join(f"{name}: {reason}" for name, reason in why.items()),
                      "pack one for this uv.lock on the builder (`nemo-rl envs pack`), or unset NEMO_RL_BUNDLE_DIR "
                      "to build from the network")
