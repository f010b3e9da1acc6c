"""A pack's fresh uv cache seeded with the wheels uv already built here from the lock's sdists.

A pack builds its environment into a fresh cache, so that the bundle holds exactly what one environment needs.
For an sdist that is a 20-minute compile (transformer-engine-torch's CUDA extension) that would be a second
build of a wheel the builder's own cache already holds. uv keeps a built wheel under the sdist's revision
(`sdists-v*/pypi/NAME/VERSION/REVISION/SETTINGS/`), keyed by the sdist's hash and the build settings, and
decides itself whether it still fits: the seed copies only those entries (never the unpacked sources in
`src/`, which are build scratch) with the unpacked wheels they link to in `archive-v*`, and uv then reuses or
rebuilds as it would in the user's cache. What the extension really holds is read from its binary afterwards
(cuda_archs.record), so a seeded wheel built with other settings still fails the pack.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from nemo_rl.progress import progress

SCRATCH = "src"  # a revision's unpacked sdist: what the build ran in, not what it made


def sdist_builds(lock: dict) -> dict[str, str]:
    """{name: version} of the packages uv.lock takes from an index as an sdist only (no wheel): uv builds them
    on the builder."""
    return {str(p["name"]): str(p["version"]) for p in lock.get("package", []) if isinstance(p, dict)
            and p.get("sdist") and not p.get("wheels") and "registry" in (p.get("source") or {})
            and isinstance(p.get("name"), str) and isinstance(p.get("version"), str)
            and "/" not in p["name"] + p["version"] and not (p["name"] + p["version"]).startswith(".")}


def _entries(user_cache: Path, name: str, version: str) -> list[Path]:
    """The user's cache directories holding the builds of `name` `version`'s sdist (the default index and
    named ones)."""
    found = []
    for bucket in sorted(user_cache.glob("sdists-v*")):
        for index in [bucket / "pypi", *sorted((bucket / "index").glob("*"))]:
            entry = index / name / version
            if entry.is_dir() and not entry.is_symlink() and not (index / name).is_symlink():
                found.append(entry)
    return found


def _copy_entry(entry: Path, user_cache: Path, cache: Path) -> None:
    target = cache / entry.relative_to(user_cache)

    def skip(directory: str, names: list[str]) -> list[str]:
        return [SCRATCH] if SCRATCH in names and len(Path(directory).relative_to(entry).parts) == 1 else []

    shutil.copytree(entry, target, symlinks=True, ignore=skip, dirs_exist_ok=True)
    real_cache = os.path.realpath(user_cache)
    for dirpath, dirnames, filenames in os.walk(target):
        for name in [*dirnames, *filenames]:
            link = Path(dirpath) / name
            if not link.is_symlink():
                continue
            # uv links a built wheel to its unpacked copy in archive-v*: that copy comes along, and the link is
            # made again relative to it; any other link (one leaving the user's cache) is dropped
            real = os.path.realpath(user_cache / link.relative_to(cache))
            link.unlink()
            relative = Path(os.path.relpath(real, real_cache))  # "../..." when it leaves the cache
            if not os.path.isdir(real) or not relative.parts[0].startswith("archive-v"):
                continue
            landing = cache / relative
            if not landing.exists():
                shutil.copytree(real, landing, symlinks=True)
            os.symlink(os.path.relpath(landing, link.parent), link)


def seed(user_cache: Path | None, cache: Path, lock: dict) -> list[str]:
    """Copy the user's built wheels of the lock's sdists into the fresh `cache`; the names seeded."""
    if user_cache is None or not user_cache.is_dir() or os.path.realpath(user_cache) == os.path.realpath(cache):
        return []
    seeded = []
    for name, version in sorted(sdist_builds(lock).items()):
        entries = _entries(user_cache, name, version)
        for entry in entries:
            _copy_entry(entry, user_cache, cache)
        if entries:
            seeded.append(name)
    if seeded:
        progress(f"seeding the fresh cache with the wheels {user_cache} holds for {', '.join(seeded)} "
                 "(uv reuses them when their sdist and build settings match, and builds otherwise)")
    return seeded
