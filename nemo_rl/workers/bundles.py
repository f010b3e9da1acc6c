"""Bundles: a worker environment made once on a builder and built on nodes with no network and no compiler.

A bundle is a directory holding a uv cache trimmed to what `uv sync --locked --offline` needs for one key's
inputs (index wheels, and the wheels uv built from the forks and from sdists, compiled parts included; no git
history, no build scratch) and a manifest: every input of the key, uv's version, the distributions, and a
digest of the content. A node checks the manifest against its own inputs and the content against the digest
before it installs anything, so a bundle for another uv.lock, Python, platform or uv, a truncated copy or an
edited file is refused with its own message.

`pack` builds in `.<name>.packing-<pid>` beside the destination and renames it into place last, so a pack
killed at any instant leaves nothing that passes as a bundle.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from nemo_rl import locks, settings, toolchain, uv, values
from nemo_rl.errors import NemoRLError
from nemo_rl.progress import progress
from nemo_rl.project import develop_state, installed, lockfile

MANIFEST = "nemo-rl-bundle.json"
CACHE = "uv-cache"
SCHEMA = 1
# uv cache buckets a node does not need: git history (`git-v*`), build scratch, and facts about the builder's
# own interpreters and environments, which uv recomputes.
DROPPED_BUCKETS = ("git-v", "builds-v", "environments-v", "interpreter-v")
# Buckets uv only reads when everything is there (unpacked wheels): a node links them instead of copying.
READ_ONLY_BUCKETS = ("archive-v",)
WORK_CACHE_PREFIX = ".bundle-cache-"  # a node's working cache, in $NEMO_RL_VENV_DIR while it builds


@dataclass(frozen=True)
class Inputs:
    """What must be equal on the builder and the node, apart from the checkout's path (each node's own)."""

    lock_hash: str
    flags: tuple[str, ...]
    python: str
    platform: str
    uv_version: str


@dataclass(frozen=True)
class Manifest:
    schema: int
    inputs: Inputs
    distributions: dict[str, str]  # name -> "version" or "version git <commit>"
    files: int
    bytes: int
    digest: str
    created: float


def inputs_for(project: Path, flags: list[str] | tuple[str, ...]) -> Inputs:
    return Inputs(lockfile.lock_hash(project), tuple(flags), platform.python_version(),
                  f"{sys.platform}-{platform.machine()}", uv.version())


def _file_entry(root: Path, path: Path) -> tuple[str, int]:
    relative = path.relative_to(root).as_posix()
    if path.is_symlink():
        return f"L {relative} {os.readlink(path)}\n", -1
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


def read_manifest(bundle: Path) -> Manifest:
    path = bundle / MANIFEST
    fix = f"make the bundle again on the builder: `nemo-rl envs pack PY_EXECUTABLE {bundle}`"
    if ".packing-" in bundle.name:
        raise NemoRLError(f"{bundle} is an unfinished pack (killed before it was complete)", fix)
    try:
        data = values.state_json(path, fix, "the bundle manifest")
        inputs = data["inputs"]
        manifest = Manifest(int(data["schema"]), Inputs(str(inputs["lock_hash"]), tuple(map(str, inputs["flags"])),
                                                        str(inputs["python"]), str(inputs["platform"]),
                                                        str(inputs["uv_version"])),
                            {str(k): str(v) for k, v in data["distributions"].items()}, int(data["files"]),
                            int(data["bytes"]), str(data["digest"]), float(data["created"]))
    except FileNotFoundError as exc:
        raise NemoRLError(f"{bundle} is not a bundle (no {MANIFEST})", fix) from exc
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise NemoRLError(f"cannot read the bundle manifest {path}: {exc}", fix) from exc
    if manifest.schema != SCHEMA:
        raise NemoRLError(f"{path} has schema {manifest.schema}, this nemo-rl reads {SCHEMA}", fix)
    return manifest


def differences(manifest: Manifest, local: Inputs) -> list[str]:
    names = {"lock_hash": "uv.lock changed", "flags": "other sync flags", "python": "another Python",
             "platform": "another platform", "uv_version": "another uv"}
    return [f"{names[field]} (bundle: {getattr(manifest.inputs, field)}, here: {getattr(local, field)})"
            for field in names if getattr(manifest.inputs, field) != getattr(local, field)]


def check(bundle: Path, project: Path, flags: list[str] | tuple[str, ...]) -> Manifest:
    """The bundle's manifest, once its inputs are this node's and its content is what the manifest says."""
    manifest = read_manifest(bundle)
    different = differences(manifest, inputs_for(project, flags))
    if different:
        raise NemoRLError(f"bundle {bundle} was made for other inputs: {'; '.join(different)}",
                          "make a bundle from this uv.lock with this Python and uv on the builder "
                          f"(`nemo-rl envs pack ... {bundle}`), or check out the commit the bundle was made from")
    progress(f"checking bundle {bundle} ({manifest.files} files, {manifest.bytes / 1e6:.1f} MB) against its digest")
    files, total, digest = content_digest(bundle / CACHE)
    if (files, total, digest) != (manifest.files, manifest.bytes, manifest.digest):
        raise NemoRLError(f"bundle {bundle} does not match its manifest: {files} files, {total} bytes, {digest} "
                          f"found; {manifest.files} files, {manifest.bytes} bytes, {manifest.digest} recorded "
                          "(a truncated copy or an edited file)", f"copy the bundle again from the builder: {bundle}")
    return manifest


def _distributions(env: Path) -> dict[str, str]:
    import importlib.metadata

    result = {}
    for dist in importlib.metadata.distributions(path=[str(p) for p in installed.site_packages_dirs(env)]):
        commit = installed.commit_from_direct_url(dist.read_text("direct_url.json"))
        result[dist.metadata["Name"]] = f"{dist.version} git {commit}" if commit else dist.version
    return dict(sorted(result.items()))


def _remove_dead_packs(dest: Path) -> None:
    for leftover in dest.parent.glob(f".{dest.name}.packing-*"):
        if not locks.held(leftover):  # a live pack holds its directory
            shutil.rmtree(leftover, ignore_errors=True)


def pack(project: Path, flags: list[str], dest: Path) -> Manifest:
    """Make the bundle for (project's uv.lock, flags) at `dest`, which must not exist yet."""
    if develop_state.read(project):
        raise NemoRLError("a fork is under `nemo-rl deps develop`: a bundle holds the pinned commits only",
                          "run `nemo-rl deps develop --stop DIST` first")
    if dest.exists():
        raise NemoRLError(f"{dest} exists", "pack into a new directory (bundles are never overwritten in place)")
    if lockfile.extras_require(project, flags, "transformer-engine"):
        unbuildable = toolchain.transformer_engine_unbuildable(lockfile.locked_packages(project))
        if unbuildable:
            present, toolkit = unbuildable
            major = (toolchain.torch_info().cuda_version or "12").split(".")[0]
            raise NemoRLError(f"transformer-engine cannot be built on this builder: {toolkit.detail}",
                              toolchain.CUDA_TOOLKIT_FIX.format(major=major) + "; then pack again (`nemo-rl doctor "
                              "--extra mcore` runs the whole pre-flight)")
    dest = dest.absolute()
    dest.parent.mkdir(parents=True, exist_ok=True)
    _remove_dead_packs(dest)
    work = dest.parent / f".{dest.name}.packing-{os.getpid()}"
    work.mkdir()
    fd = locks.hold(work)  # while held, no other pack takes this directory for a leftover
    try:
        cache, env = work / CACHE, work / "env"
        progress(f"building the environment once into a fresh uv cache ({cache})")
        uv.venv(env, python=sys.executable)
        uv.sync(project, flags=flags, environment=env, stream=True,
                extra_env={"UV_CACHE_DIR": str(cache)})
        distributions = _distributions(env)
        shutil.rmtree(env)
        for bucket in cache.iterdir():
            if bucket.name.startswith(DROPPED_BUCKETS):
                shutil.rmtree(bucket)
        files, total, digest = content_digest(cache)
        manifest = Manifest(SCHEMA, inputs_for(project, flags), distributions, files, total, digest, time.time())
        from nemo_rl.jsonout import dumps

        (work / MANIFEST).write_text(dumps(manifest) + "\n")
        os.rename(work, dest)  # the commit point: before it, nothing at dest
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    finally:
        os.close(fd)
    return manifest


def _link_tree(source: Path, target: Path) -> bool:
    """`target` with the directories of `source` and a link to each of its files, so whatever uv adds (the
    project's own editable wheel) lands in `target`, never in the bundle. Hard links when the bundle is on this
    filesystem (uv then hard-links them into the environment, as it does from its own cache: no byte copied);
    otherwise (NFS, a read-only mount, another disk) symbolic links, which uv's copy mode reads through (a link
    to a directory it does not accept). Returns whether the links are hard."""
    source = source.resolve()
    try:
        _mirror(source, target, os.link)
        return True
    except OSError:  # EXDEV across filesystems, EPERM where hard links to others' files are barred
        shutil.rmtree(target, ignore_errors=True)
        _mirror(source, target, os.symlink)
        return False


def _mirror(source: Path, target: Path, link) -> None:
    for dirpath, dirnames, filenames in os.walk(source):
        here = target / Path(dirpath).relative_to(source)
        here.mkdir(exist_ok=True)
        for name in [*filenames, *(d for d in dirnames if (Path(dirpath) / d).is_symlink())]:
            path = Path(dirpath) / name
            if path.is_symlink():
                os.symlink(os.readlink(path), here / name)
            else:
                link(path, here / name)


def sync_from(bundle: Path, project: Path, flags: list[str], environment: Path) -> None:
    """Install the environment from a checked bundle: `uv sync --locked --offline` against a working cache made
    from it. uv writes lock files into its cache and a bundle lives on read-only filesystems, so the small
    buckets (index and built-wheel records) are copied; the unpacked wheels, nearly all of the bytes, are only
    read and stay in the bundle behind links (see _link_tree). The working cache is removed after."""
    work = settings.venv_dir() / f"{WORK_CACHE_PREFIX}{os.getpid()}"
    progress(f"using bundle {bundle} through a working uv cache in {work} (the bundle stays read-only)")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    held = locks.hold(work)  # while held, `envs prune` leaves it; after a SIGKILL, prune removes it
    hard = False
    try:
        for bucket in sorted((bundle / CACHE).iterdir()):
            if bucket.name.startswith(READ_ONLY_BUCKETS) and bucket.is_dir():
                hard = _link_tree(bucket, work / bucket.name)
            elif bucket.is_dir():
                shutil.copytree(bucket, work / bucket.name, symlinks=True)
            else:
                shutil.copy2(bucket, work / bucket.name)
        link_mode = "hardlink" if hard else "copy"
        uv.sync(project, flags=[*flags, "--offline", "--inexact"], environment=environment, stream=True,
                extra_env={"UV_CACHE_DIR": str(work), "UV_OFFLINE": "1", "UV_LINK_MODE": link_mode})
    finally:
        shutil.rmtree(work, ignore_errors=True)
        os.close(held)


def configured() -> list[Path]:
    """Bundles under $NEMO_RL_BUNDLE_DIR (each a directory with a manifest), or none when it is not set."""
    setting = os.environ.get("NEMO_RL_BUNDLE_DIR")
    if not setting:
        return []
    root = Path(os.path.expanduser(setting))
    if not root.is_dir():
        raise NemoRLError(f"NEMO_RL_BUNDLE_DIR {root} is not a directory", "point it at the directory holding "
                          "bundles made by `nemo-rl envs pack`, or unset it")
    return sorted(p for p in root.iterdir() if not p.name.startswith(".") and (p / MANIFEST).is_file())


def find(project: Path, flags: list[str]) -> Path | None:
    """The configured bundle for these inputs; an error saying why when bundles are configured but none fits
    (a node that should be offline must not fall back to the network)."""
    bundles = configured()
    if not bundles:
        return None
    local = inputs_for(project, flags)
    why = {}
    for bundle in bundles:
        different = differences(read_manifest(bundle), local)
        if not different:
            return bundle
        why[bundle.name] = "; ".join(different)
    raise NemoRLError(f"no bundle in NEMO_RL_BUNDLE_DIR fits {' '.join(flags)}: "
                      + " | ".join(f"{name}: {reason}" for name, reason in why.items()),
                      "pack one for this uv.lock on the builder (`nemo-rl envs pack`), or unset NEMO_RL_BUNDLE_DIR "
                      "to build from the network")
