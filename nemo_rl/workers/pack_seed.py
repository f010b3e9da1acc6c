"""A pack's fresh uv cache seeded with wheels this user's uv built from the lock's sdists."""

from __future__ import annotations

import functools
import os
import re
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nemo_rl import uv, values
from nemo_rl.errors import NemoRLError
from nemo_rl.progress import progress
from nemo_rl.toolchain.archs import declared_at_pack, fatbin_archs
from nemo_rl.workers.cuda_archs import missing_archs
from nemo_rl.workers.tree_copy import others_may_write

SCRATCH = "src"  # a revision's unpacked sdist
REVISION_FILE = "revision.http"
REVISION_MAX = 1 << 20
REVISION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+!-]{0,200}")
ARCHIVE = re.compile(r"archive-v\d+")


class Refused(Exception):
    """Why one built wheel is not seeded."""


def real_dir(path: Path) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and not others_may_write(info)


def open_own(path: Path) -> int:
    """A descriptor of `path`, a file only this user may write."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or others_may_write(info):
        os.close(fd)
        raise Refused(f"{path} is not a file only this user may write")
    return fd


def archive_target(link: Path, user_cache: Path) -> Path | None:
    """The `archive-v*/ENTRY` uv's link points to; None for any other link."""
    lexical = Path(os.path.normpath(os.path.join(link.parent, os.readlink(link))))
    try:
        parts = lexical.relative_to(user_cache).parts
    except ValueError:
        return None  # guard: seed-a-link-out-of-the-user-s-cache-is
    if len(parts) != 2 or not ARCHIVE.fullmatch(parts[0]) or parts[1] in (".", ".."):  # guard: seed-a-link-only-to-exactly-one-archive
        return None
    if os.path.realpath(link) != str(lexical) or not real_dir(user_cache / parts[0]) or not real_dir(lexical):
        return None  # a link on the way there
    return lexical


@dataclass
class Plan:
    dirs: list[Path]
    files: list[Path]
    links: dict[Path, Path]  # link -> archive entry
    dropped: list[str]


def plan_copy(top: Path, user_cache: Path, in_archive: bool, flat: bool = False) -> Plan:
    """What copying `top` takes; Refused when it holds a path others may write."""
    plan = Plan([top], [], {}, [])
    if not real_dir(top):
        raise Refused(f"{top} is not a directory only this user may write")

    def fail(exc: OSError) -> None:
        raise exc

    for dirpath, dirnames, filenames in os.walk(top, onerror=fail):
        if flat:  # guard: seed-the-revision-s-own-wheel-without
            dirnames[:] = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            info = os.lstat(path)
            if name.endswith(".lock") and stat.S_ISREG(info.st_mode):
                continue  # uv's lock files (0666)
            if stat.S_ISLNK(info.st_mode):
                target = None if in_archive else archive_target(path, user_cache)
                if target is None:
                    plan.dropped.append(f"{path.name} (a link not to one archive-v* entry)")
                else:
                    plan.links[path] = target
            elif others_may_write(info):
                raise Refused(f"{path} is not this user's, or others may write it")
            elif stat.S_ISDIR(info.st_mode):
                plan.dirs.append(path)
            elif stat.S_ISREG(info.st_mode):  # guard: seed-a-fifo-is-never-copied
                plan.files.append(path)
            else:
                plan.dropped.append(f"{path.name} (not a file)")
    return plan


def copy_plan(plan: Plan, source_root: Path, target_root: Path, made: list[Path]) -> None:
    for directory in plan.dirs:
        target = target_root / directory.relative_to(source_root)
        if not target.exists():
            target.mkdir(parents=True)
            made.append(target)
    for path in plan.files:
        copy_file(path, target_root / path.relative_to(source_root))


def copy_file(source: Path, target: Path) -> None:
    fd = open_own(source)
    try:
        info = os.fstat(fd)
        with open(fd, "rb", closefd=False) as src, open(target, "xb") as dst:
            shutil.copyfileobj(src, dst)
        os.chmod(target, stat.S_IMODE(info.st_mode) & 0o755)
        os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Seeded:
    name: str
    version: str
    entry: str  # relative to the user's cache
    sm: tuple[int, ...]


def user_cache() -> tuple[Path | None, str]:
    """(this user's uv cache, resolved, or None) and what was found."""
    named = uv.cache_dir()
    if named is None:
        return None, "uv named no cache"
    if not named.is_absolute():  # guard: seed-a-relative-uv-cache-dir-is-refused
        return None, f"the uv cache {named} is not an absolute path (set UV_CACHE_DIR to one)"
    real = named.resolve()
    if not os.path.lexists(real):
        return None, f"no uv cache at {real}"
    if not real_dir(real):
        return None, f"the uv cache {real} is not a directory only this user may write"
    return real, f"the uv cache {real}"


def sdist_builds(lock: dict) -> dict[str, tuple[str, str]]:
    """{name: (version, sdist sha256)} of the index packages uv.lock has no wheel for."""
    found = {}
    for p in lock.get("package", []):
        if not (isinstance(p, dict) and isinstance(p.get("sdist"), dict) and not p.get("wheels")
                and "registry" in (p.get("source") or {})):
            continue
        name, version, digest = p.get("name"), p.get("version"), p["sdist"].get("hash")
        if not (isinstance(name, str) and isinstance(version, str) and isinstance(digest, str)):
            continue
        # they become directory names, and a pull request may edit the lock
        if not (SAFE_NAME.fullmatch(name) and SAFE_NAME.fullmatch(version)  # guard: seed-a-lock-s-name-or-version-is-never
                and re.fullmatch(r"sha256:[0-9a-f]{64}", digest)):
            continue
        found[name] = (version, digest.split(":", 1)[1])
    return found


def _version_dirs(user_cache: Path, name: str, version: str) -> list[Path]:
    """The user's cache directories of `name` `version`'s sdist, never through a link."""
    found = []
    for bucket in sorted(user_cache.glob("sdists-v*")):
        if not real_dir(bucket):  # guard: seed-a-linked-bucket-is-not-followed
            progress(f"not seeding from {bucket}: a link, or a directory others may write")
            continue
        indexes = [bucket / "pypi"]
        if real_dir(bucket / "index"):
            indexes += sorted((bucket / "index").iterdir())
        for index in indexes:
            entry = index / name / version
            if all(map(real_dir, (index, index / name, entry))):  # guard: seed-a-linked-index-is-not-followed
                found.append(entry)
    return found


def revision_of(data: bytes, sha256: str) -> str | None:
    """The revision a `revision.http` names when it records `sha256`, else None."""
    if len(data) < 3 or data[0] & 0xF0 != 0x90:
        return None
    size, start = (data[1] - 0xA0, 2) if 0xA0 <= data[1] <= 0xBF else (data[2], 3) if data[1] == 0xD9 else (0, 0)
    revision = data[start:start + size].decode("ascii", "replace") if start else ""
    if not REVISION_ID.fullmatch(revision):
        return None
    return revision if b"\xa6Sha256\xd9\x40" + sha256.encode() in data[start + size:] else None  # guard: seed-only-the-revision-of-the-lock-s


def _check_archs(plans: list[Plan], declared: tuple[int, ...]) -> tuple[int, ...]:
    """The cubins of the shared objects to seed; Refused when one lacks a declared arch."""
    held: set[int] = set()
    for path in (f for plan in plans for f in plan.files):
        if not (path.name.endswith(".so") or ".so." in path.name):
            continue
        archs = fatbin_archs(path)
        if archs is None:
            continue
        if why := missing_archs(path.name, archs, declared):  # guard: seed-a-wheel-lacking-a-declared-arch-is
            raise Refused(why)
        held.update(archs.sm)
    return tuple(sorted(held))


def _seed_settings(settings: Path, user_cache: Path, cache: Path, declared: Callable[[], tuple[int, ...]],
                   made: list[Path], flat: bool) -> tuple[tuple[int, ...], list[str]] | None:
    """Copy one built wheel and the archives it links to; (its cubins, what was left out), or None without a wheel."""
    plan = plan_copy(settings, user_cache, in_archive=False, flat=flat)
    if not plan.files and not plan.links:
        return None
    archives = {target: plan_copy(target, user_cache, in_archive=True) for target in set(plan.links.values())}
    linked_out = [d for a in archives.values() for d in a.dropped]
    if linked_out:
        raise Refused(f"its unpacked copy holds what a wheel never does: {', '.join(linked_out[:3])}")
    sm = _check_archs([plan, *archives.values()], declared())
    copy_plan(plan, user_cache, cache, made)
    for target, archive in archives.items():
        if not (cache / target.relative_to(user_cache)).exists():
            copy_plan(archive, user_cache, cache, made)
    for link, target in plan.links.items():
        landing = cache / link.relative_to(user_cache)
        os.symlink(os.path.relpath(cache / target.relative_to(user_cache), landing.parent), landing)
    return sm, plan.dropped


def _seed_version(version_dir: Path, sha256: str, user_cache: Path, cache: Path,
                  declared: Callable[[], tuple[int, ...]]) -> list[tuple[str, tuple[int, ...]]]:
    """Seed the revision of `version_dir` built from the lock's sdist; [(entry, cubins)] seeded."""
    with open(open_own(version_dir / REVISION_FILE), "rb") as fh:
        data = fh.read(REVISION_MAX + 1)
    if len(data) > REVISION_MAX:
        raise values.NotAPlainFile(f"{version_dir / REVISION_FILE} is larger than {REVISION_MAX} bytes")
    revision = revision_of(data, sha256)
    if revision is None:
        raise Refused(f"its {REVISION_FILE} names another sdist than the lock's (sha256 {sha256[:12]}...)")
    if not real_dir(version_dir / revision):
        raise Refused(f"its revision {revision} is not a directory only this user may write")
    seeded = []
    # the revision's own wheel first: removing what a failed one made never removes another's
    units = [(version_dir / revision, True)] + [(d, False) for d in sorted((version_dir / revision).iterdir())  # guard: seed-a-wheel-built-with-default-settings
                                                if d.name != SCRATCH and real_dir(d)]  # guard: seed-the-build-s-sources-stay-behind
    for settings, flat in units:
        entry = settings.relative_to(user_cache).as_posix()
        made: list[Path] = []
        try:
            done = _seed_settings(settings, user_cache, cache, declared, made, flat)
            if done is None:
                continue
            sm, dropped = done
        except (Refused, OSError, shutil.Error, NemoRLError) as exc:
            for path in reversed(made):
                shutil.rmtree(path, ignore_errors=True)
            progress(f"not seeding {entry}: {_reason(exc)}; uv builds it in the fresh cache")
            continue
        if dropped:
            progress(f"seeding {entry} without {', '.join(dropped[:3])}")
        seeded.append((entry, sm))
    if seeded:
        target = cache / (version_dir / REVISION_FILE).relative_to(user_cache)
        try:
            copy_file(version_dir / REVISION_FILE, target)
        except BaseException:  # without it uv never finds the wheels
            shutil.rmtree(cache / (version_dir / revision).relative_to(user_cache), ignore_errors=True)
            raise
    return seeded


def _reason(exc: BaseException) -> str:
    if isinstance(exc, NemoRLError):
        return exc.what
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.strerror or exc} ({exc.filename}: changed while seeding?)"
    return str(exc)


def seed(user_cache: Path | None, cache: Path, lock: dict, declared: Callable[[], tuple[int, ...]] = declared_at_pack
         ) -> list[Seeded]:
    """Copy this user's built wheels of the lock's sdists into the fresh `cache`; what was seeded."""
    if user_cache is None or not user_cache.is_dir() or os.path.realpath(user_cache) == os.path.realpath(cache):
        return []
    once = functools.cache(declared)  # nvcc only when a wheel is there to check
    seeded = []
    for name, (version, sha256) in sorted(sdist_builds(lock).items()):
        for version_dir in _version_dirs(user_cache, name, version):
            try:
                entries = _seed_version(version_dir, sha256, user_cache, cache, once)
            except (Refused, OSError, shutil.Error, NemoRLError) as exc:
                progress(f"not seeding {name} {version} from {version_dir}: {_reason(exc)}")
                continue
            seeded += [Seeded(name, version, entry, sm) for entry, sm in entries]
    for item in seeded:
        progress(f"seeded the fresh cache with {item.name} {item.version} as built in {user_cache}/{item.entry}"
                 + (f" (cubins for sm {', '.join(map(str, item.sm))})" if item.sm else "")
                 + ": the builder's own uv cache is trusted for it (`nemo-rl envs pack --no-seed` builds it again)")
    return seeded


def from_user_cache(cache: Path, lock: dict, enabled: bool) -> list[Seeded]:
    if not enabled:  # guard: seed-no-seed-reads-nothing
        progress("not seeding the fresh cache (--no-seed)")
        return []
    user, found = user_cache()
    if user is None:
        progress(f"not seeding the fresh cache: {found}")
        return []
    seeded = seed(user, cache, lock)
    if not seeded:
        progress(f"nothing seeded from {found}")
    return seeded
