"""Bundles: a uv cache with a manifest, made on a builder (bundle_pack.py); a node checks one and installs offline."""

from __future__ import annotations

import functools
import hashlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from nemo_rl import interrupt, settings, uv, values
from nemo_rl.errors import NemoRLError, command
from nemo_rl.progress import progress
from nemo_rl.project.model import Project
from nemo_rl.workers import archive_hashes, bundle_copy, bundle_seal, cuda_archs
from nemo_rl.workers.manifests import MANIFEST, Manifest, differences, inputs_for, read_manifest

CACHE = bundle_copy.CACHE
DRIVER_FLAGS = ("--locked",)  # the checkout's `.venv`, as `uv run` syncs it


def pinned_digests() -> set[str]:
    """The digests in $NEMO_RL_BUNDLE_DIGESTS; empty when unset (any bundle matching its manifest)."""
    setting = os.environ.get("NEMO_RL_BUNDLE_DIGESTS")
    if setting is None:
        return set()
    found = values.bundle_digests(setting, "NEMO_RL_BUNDLE_DIGESTS")
    if not found:  # guard: nemo-rl-bundle-digests-set-but-empty-is
        raise NemoRLError(f"NEMO_RL_BUNDLE_DIGESTS is set but holds no digest ({setting!r:.40})",
                          "set it to the digests `nemo-rl envs pack` printed, or `unset NEMO_RL_BUNDLE_DIGESTS`")
    return found


def _file_entry(root: str, relative: str, known: tuple[int, str] | None = None) -> tuple[str, int, str | None]:
    interrupt.check()  # guard: bundles-a-signal-ends-the-digest-within
    path = os.path.join(root, relative)
    info = os.lstat(path)
    target = os.readlink(path) if stat.S_ISLNK(info.st_mode) else ""
    if "\n" in relative + target:  # guard: the-digest-refuses-a-newline-in-a-name; one entry could spell two
        raise NemoRLError(f"{path!r:.200} in the bundle has a newline in its name or link target",
                          "make the bundle again on the builder (`nemo-rl envs pack`)")
    if stat.S_ISLNK(info.st_mode):
        landing = os.path.normpath(os.path.join(os.path.dirname(relative), target))
        # `q -> p/../../etc` through `p -> ../..` is inside by its text only
        real, inside = os.path.realpath(path), os.path.realpath(root)
        if (os.path.isabs(target) or landing == ".." or landing.startswith("../")  # guard: never-a-link-out-through-another-link
                or not (real == inside or real.startswith(inside + os.sep))):
            raise NemoRLError(f"{path} links out of the bundle (to {target!r:.120})",
                              "make the bundle again on the builder (`nemo-rl envs pack`)")
        return f"L {relative} {target}\n", -1, None
    if not stat.S_ISREG(info.st_mode):  # guard: the-digest-never-opens-a-fifo
        raise NemoRLError(f"{path} in the bundle is not a file or a link",
                          "copy the bundle again, or make it again on the builder (`nemo-rl envs pack`)")
    if known is not None and known[0] == info.st_size:
        return f"F {relative} {info.st_size} {known[1]}\n", info.st_size, known[1]
    file_hash, size = hashlib.sha256(), 0
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            file_hash.update(block)
            size += len(block)
    return f"F {relative} {size} {file_hash.hexdigest()}\n", size, file_hash.hexdigest()


def content_digest(root: Path, known: Mapping[str, tuple[int, str]] | None = None,
                   hashes: dict[str, str] | None = None) -> tuple[int, int, str]:
    """(files, bytes, sha256) over names, sizes, contents and link targets under `root`, trusting `known` (size,
    sha256) by path; `hashes` gets each file's sha256."""
    from concurrent.futures import ThreadPoolExecutor

    top, relatives = str(root), []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        links = [name for name in dirnames if os.path.islink(os.path.join(dirpath, name))]  # guard: bundles-links-to-directories-in-the
        here = os.path.relpath(dirpath, top)
        relatives += [name if here == "." else f"{here}/{name}" for name in sorted([*filenames, *links])]
    known = known or {}
    entries: list[tuple[str, int, str | None] | None] = [None] * len(relatives)
    unknown = []
    for i, relative in enumerate(relatives):
        if relative in known:
            entries[i] = _file_entry(top, relative, known[relative])
        else:
            unknown.append(i)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for i, entry in zip(unknown, pool.map(lambda i: _file_entry(top, relatives[i]), unknown), strict=True):
            entries[i] = entry
    digest, files, total = hashlib.sha256(), 0, 0
    for relative, found in zip(relatives, entries, strict=True):
        assert found is not None
        line, size, sha = found
        digest.update(line.encode())
        if size >= 0:
            files, total = files + 1, total + size
        if hashes is not None and sha is not None:
            hashes[relative] = sha
    return files, total, "sha256:" + digest.hexdigest()


def check(bundle: Path, project: Project, flags: list[str] | tuple[str, ...], digest: str | None = None) -> Manifest:
    """The bundle's manifest, once its inputs are this node's and `digest` (else $NEMO_RL_BUNDLE_DIGESTS) pins it;
    `sync_from` checks content."""
    manifest = read_manifest(bundle)
    different = differences(manifest, inputs_for(project, flags), project)
    if different:  # guard: bundles-inputs-compared-before
        raise NemoRLError(f"bundle {bundle} was made for other inputs: {'; '.join(different)}",
                          f"pack one for this checkout ({command('nemo-rl envs pack ... {bundle}', bundle=bundle)}), "
                          "or check out the bundle's commit")
    trusted = {values.bundle_digest(digest, "--digest")} if digest is not None else pinned_digests()  # guard: digest-is-normalised-where-checked
    if trusted and manifest.digest not in trusted:  # guard: never-the-pinned-digest
        where = "--digest" if digest is not None else "NEMO_RL_BUNDLE_DIGESTS"
        raise NemoRLError(f"bundle {bundle} has digest {manifest.digest}, which {where} does not pin",
                          f"use the bundle whose digest `nemo-rl envs pack` printed, or add this digest to {where}")
    return manifest


def check_copy(bundle: Path, manifest: Manifest, record: bytes, content: tuple[int, int, str]) -> None:
    """Refuse unless the node's copy (`content`: content_digest's), `record` and the manifest match the digest."""
    files, total, cache_digest = content
    digest = bundle_seal.seal(cache_digest, manifest, record)
    if (files, total, digest) != (manifest.files, manifest.bytes, manifest.digest):  # guard: bundles-content-against-the-digest
        raise NemoRLError(f"bundle {bundle} does not match its manifest: {files} files, {total} bytes, {digest} "
                          f"found; {manifest.files}, {manifest.bytes}, {manifest.digest} recorded",
                          f"copy the bundle again from the builder: {bundle}")


def sync_from(bundle: Path, project: Project, flags: list[str] | tuple[str, ...], environment: Path,
              manifest: Manifest, *, inexact: bool = True) -> None:
    """Install the environment offline from a checked bundle, via a working cache beside the node's copy."""
    record, fits = cuda_archs.node_record(bundle)  # guard: archs-the-node-checks-before-installing
    if fits:
        progress(fits)
    progress(f"checking bundle {bundle} ({manifest.files} files, {manifest.bytes / 1e6:.1f} MB)")
    node = bundle_copy.node_copy(settings.venv_dir(), bundle, manifest.digest, content_digest,  # guard: seal-the-node-checks-the-record-bytes-it
                                 functools.partial(check_copy, bundle, manifest, record))
    try:
        with bundle_copy.working_cache(node.cache) as cache:
            progress(f"using bundle {bundle} through the working uv cache {cache}")
            checked, unlisted = archive_hashes.check(cache, project, f"bundle {bundle}")  # guard: a-node-checks-archive-hashes
            progress(f"{checked} index archive(s) of the bundle carry uv.lock's hashes" if checked else
                     "warning: no archive record in the bundle to check against uv.lock's hashes")
            if unlisted:
                progress(f"archive(s) uv.lock does not name (build requirements): {', '.join(unlisted)}")
            uv.sync(project.root, flags=[*flags, "--offline", *(["--inexact"] if inexact else [])],  # guard: node-uv-links-the-node-s-checked-copy
                    environment=environment, stream=True,
                    extra_env={"UV_CACHE_DIR": str(cache), "UV_OFFLINE": "1", "UV_LINK_MODE": "hardlink"})
        bundle_copy.restamp(node)  # guard: node-a-build-restamps-its-own-links
    finally:
        os.close(node.held)


def driver_path(project: Path) -> Path:
    return project / os.environ.get("UV_PROJECT_ENVIRONMENT", ".venv")


def driver_unfinished(project: Path) -> Path:
    """Present while build_driver makes the checkout's environment."""
    return driver_path(project).with_name(f".{driver_path(project).name}.nemo-rl-unfinished")


def build_driver(bundle: Path, project: Project, flags: list[str] | tuple[str, ...],
                 digest: str | None = None) -> Manifest:
    """Make the checkout's `.venv` from a bundle made for (uv.lock, flags)."""
    manifest = check(bundle, project, flags, digest)
    progress(f"making the checkout's environment {driver_path(project.root)} from bundle {bundle}")
    mark = driver_unfinished(project.root)
    mark.parent.mkdir(parents=True, exist_ok=True)
    mark.touch()  # guard: the-bootstrap-marks-the-driver-build
    sync_from(bundle, project, DRIVER_FLAGS, driver_path(project.root), manifest, inexact=False)
    mark.unlink()  # guard: build-driver-removes-its-mark-last
    return manifest


def configured() -> list[Path]:
    """Bundles under $NEMO_RL_BUNDLE_DIR; none when it is unset."""
    root = settings.bundle_dir()
    if root is None:
        return []
    if not root.is_dir():
        raise NemoRLError(f"NEMO_RL_BUNDLE_DIR {root} is not a directory",
                          "point it at the directory of the bundles, or unset it")
    return sorted(p for p in root.iterdir() if not p.name.startswith(".") and (p / MANIFEST).is_file())  # guard: bundles-hidden-directories-are-not


def find(project: Project, flags: list[str]) -> Path | None:
    """The configured bundle for these inputs; None without bundles; an error when none fits, never the network."""
    bundles = configured()
    if not bundles:
        if settings.bundle_dir():  # guard: never-an-empty-nemo-rl-bundle-dir-is-no
            raise NemoRLError(f"NEMO_RL_BUNDLE_DIR {settings.bundle_dir()} holds no bundle",
                              "mount the bundles' directory, or unset NEMO_RL_BUNDLE_DIR to build from the network")
        return None
    local = inputs_for(project, flags)
    trusted = pinned_digests()
    why = {}
    for bundle in bundles:
        try:
            manifest = read_manifest(bundle)
        except NemoRLError as exc:
            progress(f"warning: skipping bundle {bundle}: {exc.what}")
            why[bundle.name] = f"broken ({exc.what})"
            continue
        different = differences(manifest, local, project)
        if trusted and manifest.digest not in trusted:  # guard: never-the-pinned-digests-choose-among
            different.append(f"digest {manifest.digest} not in NEMO_RL_BUNDLE_DIGESTS")
        if not different:  # guard: bundles-find-compares-the-inputs
            return bundle
        why[bundle.name] = "; ".join(different)
    raise NemoRLError(f"no bundle in NEMO_RL_BUNDLE_DIR fits {' '.join(flags)}: "
                      + " | ".join(f"{name}: {reason}" for name, reason in why.items()),
                      "pack one for this uv.lock (`nemo-rl envs pack`), or unset NEMO_RL_BUNDLE_DIR")
