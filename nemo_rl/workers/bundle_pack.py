"""`nemo-rl envs pack`'s library: a bundle made once on a builder (see bundles.py for what a bundle is and how a
node uses it).

`pack` builds in `.<name>.packing-<pid>` beside the destination and renames it into place last, so a pack
killed at any instant leaves nothing that passes as a bundle. A pack whose import check runs out of time keeps
its uv cache in `.<name>.packing-kept`, and the next pack of the same inputs into that name starts from it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import stat
import sys
import time
from pathlib import Path

from nemo_rl import locks, process, toolchain, uv
from nemo_rl.errors import NemoRLError
from nemo_rl.progress import progress
from nemo_rl.project import develop_state, installed
from nemo_rl.project.model import Project
from nemo_rl.workers import bundle_seal, bundles, cuda_archs, pack_seed
from nemo_rl.workers.manifests import MANIFEST, SCHEMA, Manifest, Proven, inputs_for

# uv cache buckets a node does not need: git history (`git-v*`), build scratch, and facts about the builder's
# own interpreters and environments, which uv recomputes.
DROPPED_BUCKETS = ("git-v", "builds-v", "environments-v", "interpreter-v")
IMPORT_TIMEOUT_S = 600.0  # importing torch, Ray and the forks: seconds when idle, minutes on a loaded builder
KEPT_SUFFIX = ".packing-kept"
KEPT_INPUTS = "kept-for.json"


def _distributions(env: Path) -> dict[str, str]:
    import importlib.metadata

    result = {}
    for dist in importlib.metadata.distributions(path=[str(p) for p in installed.site_packages_dirs(env)]):
        commit = installed.commit_from_direct_url(dist.read_text("direct_url.json"))
        result[dist.metadata["Name"]] = f"{dist.version} git {commit}" if commit else dist.version
    return dict(sorted(result.items()))


def _prove(project: Project, env: Path, timeout: float) -> Proven:
    """The import check a node would run first, run once here: a bundle whose environment does not import Ray
    and the forks' modules is never made, and a node that installs the same bytes records this proof."""
    from nemo_rl import imports
    from nemo_rl.workers import verified

    modules = verified.modules_to_import(project.forks, env)
    if not installed.installed(env, "ray"):  # not a worker environment (benchmarks pack such): no proof of Ray
        modules.remove("ray")
    progress(f"importing {', '.join(modules)} in the packed environment")
    result = imports.check(env / "bin" / "python", modules, timeout=timeout)
    if result.failed:
        raise NemoRLError(f"the environment made for the bundle does not import: "
                          f"{'; '.join(f'{m}: {e}' for m, e in result.failed.items())}",
                          "fix the dependency in pyproject.toml / uv.lock, then pack again")
    return Proven(tuple(modules), tuple(verified.inside(env, list(result.files))))


def unfinished_packs(root: Path) -> list[Path]:
    """Directories of packs into `root` in progress, or left by killed packs (of any bundle name)."""
    return sorted(p for p in root.glob(".*.packing-*") if p.is_dir() and not p.is_symlink())  # guard: never-killed-packs-of-any-name


def _remove_dead_packs(dest: Path) -> list[Path]:
    return remove_dead_packs(dest.parent, keep_timed_out=True)


def kept_pack(dest: Path) -> Path:
    """Where a pack into `dest` whose import check timed out keeps its work for the next one."""
    return dest.parent / f".{dest.name}{KEPT_SUFFIX}"


def pack_lock(dest: Path) -> Path:
    return dest.parent / f".{dest.name}.pack-lock"


def remove_dead_packs(root: Path, *, keep_timed_out: bool = False) -> list[Path]:
    """Remove the packs into `root` that were killed, whatever bundle they were making; `keep_timed_out`: leave
    the work timed-out packs kept for their next try."""
    removed = []
    for leftover in unfinished_packs(root):
        if keep_timed_out and leftover.name.endswith(KEPT_SUFFIX):  # guard: pack-another-pack-leaves-a-kept-pack
            continue
        if not locks.held(leftover):  # a live pack holds its directory
            shutil.rmtree(leftover, ignore_errors=True)  # guard: bundles-dead-packs-removed
            removed.append(leftover)
    return removed


def remove_free_pack_locks(root: Path) -> list[Path]:
    """Remove this user's `.<name>.pack-lock` files in `root` that no pack holds: taken under their own lock, so
    a pack that opened one meanwhile locks a new file instead (locks.lock_file). Planted ones are left."""
    removed = []
    for path in sorted(root.glob(".*.pack-lock")):
        try:
            info = path.lstat()
        except OSError:  # gone meanwhile
            continue
        # another's, or a link planted there, is left; so is one a pack running now holds
        if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid() and locks.remove_free(path):
            removed.append(path)
    return removed


def pack(project: Project, flags: list[str], dest: Path, *, seed: bool = True,
         import_timeout: float = IMPORT_TIMEOUT_S) -> Manifest:
    """Make the bundle for (project's uv.lock, flags) at `dest`, which must not exist yet; `seed`: from this
    user's own uv cache (pack_seed); `import_timeout`: seconds the import check of the packed environment may
    take."""
    if developing := sorted(develop_state.read(project.root)):  # guard: bundles-no-pack-while-developing
        raise NemoRLError("a fork is under `nemo-rl deps develop`: a bundle holds the pinned commits only",
                          f"run {' and '.join(f'`nemo-rl deps develop --stop {d}`' for d in developing)} first")
    if dest.exists():
        raise NemoRLError(f"{dest} exists", "pack into a new directory (bundles are never overwritten in place)")
    if project.extras_require(flags, "transformer-engine"):
        unbuildable = toolchain.transformer_engine_unbuildable(project.packages)
        if unbuildable:  # guard: bundles-transformer-engine-pre-flight
            present, toolkit = unbuildable
            major = (toolchain.torch_info().cuda_version or "12").split(".")[0]
            raise NemoRLError(f"transformer-engine cannot be built on this builder: {toolkit.detail}",
                              toolchain.CUDA_TOOLKIT_FIX.format(major=major) + "; then pack again (`uv run nemo-rl "
                              "doctor --extra mcore --preflight` runs the whole pre-flight)")
    dest = dest.absolute()
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        # one pack per destination: a lock file beside it, removed only under its lock (locks.lock_file)
        claim = locks.lock_file(pack_lock(dest), None)
    except OSError as exc:
        raise NemoRLError(f"cannot pack into {dest.parent}: {exc.strerror or exc}",
                          "pack into a directory you may write (then copy the bundle where the nodes read it)") from exc
    if claim is None:  # guard: never-one-pack-per-destination
        raise NemoRLError(f"another `nemo-rl envs pack` is making {dest}",
                          "wait for it to finish (it is the bundle you asked for), or pack into another directory")
    try:
        if dest.exists():
            raise NemoRLError(f"{dest} exists", "pack into a new directory (bundles are never overwritten in place)")
        return _pack(project, flags, dest, seed, import_timeout)
    finally:
        os.close(claim)


def _inputs(project: Project, flags: list[str], seed: bool) -> str:
    """What a kept pack's cache was built for: a pack of other inputs starts afresh."""
    lock = project.lock_hash
    return json.dumps({"uv.lock": lock, "flags": flags, "seed": seed}, sort_keys=True)


def _resume(dest: Path, work: Path, inputs: str) -> bool:
    """Take the work a timed-out pack kept for `dest` as `work` when it is this user's, for these inputs; a kept
    pack of this user's for other inputs is removed."""
    kept = kept_pack(dest)
    try:
        info = os.lstat(kept)
    except OSError:
        return False
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:  # guard: pack-a-kept-pack-not-this-user-s-alone
        progress(f"not starting from {kept}: not a directory only this user may write")
        return False
    try:
        same = (kept / KEPT_INPUTS).read_text() == inputs
    except OSError:
        same = False
    if not same:  # guard: pack-a-kept-pack-of-other-inputs-is-not-taken
        progress(f"removing {kept}: kept by a pack of another uv.lock or other flags")
        shutil.rmtree(kept, ignore_errors=True)
        return False
    os.rename(kept, work)
    (work / KEPT_INPUTS).unlink()
    progress(f"starting from the uv cache a pack that timed out kept in {kept}")
    return True


def _keep(work: Path, env: Path, dest: Path, inputs: str) -> Path:
    """Keep the cache of a pack whose import check timed out, for the next pack (the environment is remade from
    it in seconds)."""
    kept = kept_pack(dest)
    shutil.rmtree(env, ignore_errors=True)
    (work / KEPT_INPUTS).write_text(inputs)
    if os.path.lexists(kept):
        shutil.rmtree(kept)
    os.rename(work, kept)
    return kept


def _pack(project: Project, flags: list[str], dest: Path, seed: bool, import_timeout: float) -> Manifest:
    work = dest.parent / f".{dest.name}.packing-{os.getpid()}"  # the destination's lock makes the name ours
    shutil.rmtree(work, ignore_errors=True)  # a dead pack's of the same PID (the live one would hold the claim)
    inputs = _inputs(project, flags, seed)
    resumed = _resume(dest, work, inputs)
    if not resumed:
        work.mkdir()
    fd = locks.hold(work)  # while held, no other pack takes this directory for a leftover
    try:
        _remove_dead_packs(dest)
        cache, env = work / bundles.CACHE, work / "env"
        progress(f"building the environment once into a fresh uv cache ({cache})")
        lock = project.lock
        if not resumed:  # its cache holds what was seeded already
            pack_seed.from_user_cache(cache, lock, seed)  # guard: pack-the-fresh-cache-is-seeded-with-the; no second compile of what the builder built already
        uv.venv(env, python=sys.executable)
        uv.sync(project.root, flags=flags, environment=env, stream=True,
                extra_env={"UV_CACHE_DIR": str(cache)})
        distributions = _distributions(env)
        cuda_archs.record(env, lock, work)  # guard: archs-pack-records-the-archs; read from the built binaries
        try:
            proven = _prove(project, env, import_timeout)
        except process.TimedOut as exc:
            kept = _keep(work, env, dest, inputs)  # guard: pack-a-timed-out-check-keeps-the-pack
            longer = max(2 * import_timeout, IMPORT_TIMEOUT_S)
            raise NemoRLError(f"the import check of the packed environment did not finish within {import_timeout:g} "
                              f"s (a busy builder); what was packed is kept in {kept}",
                              f"pack again with a longer limit (`--import-timeout {longer:g}`): the pack starts "
                              "from what was kept") from exc
        shutil.rmtree(env)
        # and the checkout's own `.venv`, so a node with only the checkout makes its driver offline too
        progress("adding what the checkout's own environment (`uv run`) needs")
        uv.venv(env, python=sys.executable)
        uv.sync(project.root, flags=list(bundles.DRIVER_FLAGS), environment=env, extra_env={"UV_CACHE_DIR": str(cache)})
        shutil.rmtree(env)
        for bucket in cache.iterdir():
            if bucket.name.startswith(DROPPED_BUCKETS):
                shutil.rmtree(bucket)
        files, total, cache_digest = bundles.content_digest(cache)
        unsealed = Manifest(SCHEMA, inputs_for(project, flags), distributions, files, total, "", time.time(), proven)
        manifest = dataclasses.replace(unsealed, digest=bundle_seal.seal(cache_digest, unsealed,
                                                                         (work / cuda_archs.SIDECAR).read_bytes()))
        from nemo_rl.jsonout import dumps

        (work / MANIFEST).write_text(dumps(manifest) + "\n")
        os.rename(work, dest)  # the commit point: before it, nothing at dest
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    finally:
        os.close(fd)
    return manifest
