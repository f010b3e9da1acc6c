"""`nemo-rl envs pack`: a bundle built beside its destination and renamed into place last; a pack whose import check
times out keeps its cache for the next."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import shutil
import stat
import sys
import time
from pathlib import Path

from nemo_rl import imports, locks, process, toolchain, uv
from nemo_rl.errors import NemoRLError, command
from nemo_rl.jsonout import dumps
from nemo_rl.progress import progress
from nemo_rl.project import installed
from nemo_rl.project.model import Project
from nemo_rl.workers import bundle_seal, bundles, cuda_archs, pack_seed, verified
from nemo_rl.workers.manifests import MANIFEST, SCHEMA, Manifest, Proven, inputs_for

# uv cache buckets a node does not need: git history, build scratch, facts about the builder's interpreters
DROPPED_BUCKETS = ("git-v", "builds-v", "environments-v", "interpreter-v")
IMPORT_TIMEOUT_S = 600.0  # importing torch, Ray and the forks takes minutes on a loaded builder
KEPT_SUFFIX = ".packing-kept"
KEPT_INPUTS = "kept-for.json"


def _distributions(env: Path) -> dict[str, str]:
    result = {}
    for dist in importlib.metadata.distributions(path=[str(p) for p in installed.site_packages_dirs(env)]):
        commit = installed.commit_from_direct_url(dist.read_text("direct_url.json"))
        result[dist.metadata["Name"]] = f"{dist.version} git {commit}" if commit else dist.version
    return dict(sorted(result.items()))


def _prove(project: Project, env: Path, timeout: float) -> Proven:
    """Run the node's import check once here; what it proved."""
    modules = verified.modules_to_import(project.forks, env)
    if not installed.installed(env, "ray"):  # not a worker environment
        modules.remove("ray")
    progress(f"importing {', '.join(modules)} in the packed environment")
    result = imports.check(env / "bin" / "python", modules, timeout=timeout)
    if result.failed:
        raise NemoRLError(f"the bundle's environment does not import: "
                          f"{'; '.join(f'{m}: {e}' for m, e in result.failed.items())}",
                          "fix the dependency in pyproject.toml / uv.lock, then pack again")
    return Proven(tuple(modules), tuple(verified.inside(env, list(result.files))))


def unfinished_packs(root: Path) -> list[Path]:
    return sorted(p for p in root.glob(".*.packing-*") if p.is_dir() and not p.is_symlink())  # guard: never-killed-packs-of-any-name


def kept_pack(dest: Path) -> Path:
    return dest.parent / f".{dest.name}{KEPT_SUFFIX}"


def pack_lock(dest: Path) -> Path:
    return dest.parent / f".{dest.name}.pack-lock"


# the bundle directory may be shared: another user's pack lock is refused, never locked or removed
NOT_YOURS = "pack into a directory only you can write, or have the file's owner remove it"


def remove_dead_packs(root: Path, *, keep_timed_out: bool = False) -> list[Path]:
    """Remove killed packs into `root` and, unless `keep_timed_out`, kept ones whose lock no pack holds."""
    removed = []
    for leftover in unfinished_packs(root):
        if leftover.name.endswith(KEPT_SUFFIX):
            if keep_timed_out:  # guard: pack-another-pack-leaves-a-kept-pack
                continue
            if _remove_kept_unless_packing(leftover):
                removed.append(leftover)
        elif not locks.held(leftover):
            shutil.rmtree(leftover, ignore_errors=True)  # guard: bundles-dead-packs-removed
            removed.append(leftover)
    return removed


def _remove_kept_unless_packing(kept: Path) -> bool:
    try:
        claim = locks.lock_file(pack_lock(kept.parent / kept.name[1:-len(KEPT_SUFFIX)]), None, NOT_YOURS)
    except (OSError, NemoRLError):
        return False
    try:
        if claim is None:  # guard: pack-prune-leaves-a-kept-pack-a-pack-is-taking
            return False
        remove_kept(kept)
        return True
    finally:
        if claim is not None:
            os.close(claim)


def remove_kept(kept: Path) -> None:
    if os.path.islink(kept):  # guard: pack-a-link-in-a-kept-pack-s-place-is-not-followed
        os.unlink(kept)
        return
    try:
        directory = os.open(kept, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)  # nor one swapped in since
    except OSError:
        directory = None
    if directory is not None:
        try:
            os.unlink(KEPT_INPUTS, dir_fd=directory)  # guard: pack-a-kept-pack-loses-its-record-first
        except FileNotFoundError:
            pass
        finally:
            os.close(directory)
    shutil.rmtree(kept, ignore_errors=True)


def remove_free_pack_locks(root: Path) -> list[Path]:
    """Remove this user's `.<name>.pack-lock` files in `root` that no pack holds (planted ones are left)."""
    return [path for path in sorted(root.glob(".*.pack-lock")) if locks.remove_free(path, not_yours=NOT_YOURS)]


def pack(project: Project, flags: list[str], dest: Path, *, seed: bool = True,
         import_timeout: float = IMPORT_TIMEOUT_S) -> Manifest:
    """Make the bundle for (uv.lock, flags) at new `dest`, seeded from this user's uv cache when `seed`."""
    if developing := sorted(project.developing):  # guard: bundles-no-pack-while-developing
        raise NemoRLError("a fork is under `nemo-rl deps develop`: a bundle holds pinned commits only",
                          "run " + " and ".join(command("nemo-rl deps develop --stop {d}", d=d) for d in developing)
                          + " first")
    if dest.exists():
        raise NemoRLError(f"{dest} exists", "pack into a new directory")
    te = project.extras_require(flags, "transformer-engine")
    if te and (unbuildable := toolchain.transformer_engine_unbuildable(project.packages)):  # guard: bundles-transformer-engine-pre-flight
        present, toolkit = unbuildable
        major = (toolchain.torch_info().cuda_version or "12").split(".")[0]
        raise NemoRLError(f"transformer-engine cannot be built on this builder: {toolkit.detail}",
                          toolchain.CUDA_TOOLKIT_FIX.format(major=major) + "; then pack again")
    dest = dest.absolute()
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        claim = locks.lock_file(pack_lock(dest), None, NOT_YOURS)
    except OSError as exc:
        raise NemoRLError(f"cannot pack into {dest.parent}: {exc.strerror or exc}",
                          "pack into a directory you may write") from exc
    if claim is None:  # guard: never-one-pack-per-destination
        raise NemoRLError(f"another `nemo-rl envs pack` is making {dest}",
                          "wait for it to finish, or pack into another directory")
    try:
        if dest.exists():
            raise NemoRLError(f"{dest} exists", "pack into a new directory")
        return _pack(project, flags, dest, seed, import_timeout)
    finally:
        os.close(claim)


def _resume(dest: Path, work: Path, inputs: str) -> bool:
    """Take a timed-out pack's kept work for `dest` as `work` when it was for these inputs; else remove it."""
    kept = kept_pack(dest)
    try:
        info = os.lstat(kept)
    except OSError:
        return False
    # the bundle directory may be shared
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:  # guard: pack-a-kept-pack-not-this-user-s-alone
        progress(f"not starting from {kept}: not a directory only this user may write")
        return False
    try:
        same = (kept / KEPT_INPUTS).read_text() == inputs
    except OSError:
        same = False
    if not same:  # guard: pack-a-kept-pack-of-other-inputs-is-not-taken
        progress(f"removing {kept}: kept by a pack of other inputs")
        remove_kept(kept)
        return False
    os.rename(kept, work)
    (work / KEPT_INPUTS).unlink()
    progress(f"starting from the uv cache kept in {kept}")
    return True


def _keep(work: Path, env: Path, dest: Path, inputs: str) -> Path:
    kept = kept_pack(dest)
    shutil.rmtree(env, ignore_errors=True)
    if os.path.lexists(kept):
        remove_kept(kept)
    (work / KEPT_INPUTS).write_text(inputs)  # last: the record makes the work resumable
    os.rename(work, kept)
    return kept


def _pack(project: Project, flags: list[str], dest: Path, seed: bool, import_timeout: float) -> Manifest:
    work = dest.parent / f".{dest.name}.packing-{os.getpid()}"  # the destination's lock makes the name ours
    shutil.rmtree(work, ignore_errors=True)  # a dead pack's of the same PID
    inputs = json.dumps({"uv.lock": project.lock_hash, "flags": flags, "seed": seed}, sort_keys=True)
    resumed = _resume(dest, work, inputs)
    if not resumed:
        work.mkdir()
    fd = locks.hold(work)
    try:
        remove_dead_packs(dest.parent, keep_timed_out=True)
        cache, env = work / bundles.CACHE, work / "env"
        progress(f"building the environment once into a fresh uv cache ({cache})")
        lock = project.lock
        if not resumed:
            pack_seed.from_user_cache(cache, lock, seed)  # guard: pack-the-fresh-cache-is-seeded-with-the
        uv.venv(env, python=sys.executable)
        uv.sync(project.root, flags=flags, environment=env, stream=True,
                extra_env={"UV_CACHE_DIR": str(cache)})
        distributions = _distributions(env)
        cuda_archs.record(env, lock, work)  # guard: archs-pack-records-the-archs
        try:
            proven = _prove(project, env, import_timeout)
        except process.TimedOut as exc:
            kept = _keep(work, env, dest, inputs)  # guard: pack-a-timed-out-check-keeps-the-pack
            longer = max(2 * import_timeout, IMPORT_TIMEOUT_S)
            raise NemoRLError(f"the packed environment's import check took over {import_timeout:g} s; kept in {kept}",
                              f"pack again with a longer limit (`--import-timeout {longer:g}`)") from exc
        shutil.rmtree(env)
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
        (work / MANIFEST).write_text(dumps(manifest) + "\n")
        os.rename(work, dest)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    finally:
        os.close(fd)
    return manifest
