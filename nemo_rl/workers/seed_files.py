"""This user's uv cache entries read for a pack's seed: only files no one else may write, links only into archives."""

from __future__ import annotations

import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from nemo_rl.workers.tree_copy import others_may_write

ARCHIVE = re.compile(r"archive-v\d+")


class Refused(Exception):
    """Why one built wheel is not seeded."""


def real_dir(path: Path) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and not others_may_write(info)


def read_own(path: Path) -> bytes:
    fd = open_own(path)
    try:
        with open(fd, "rb", closefd=False) as fh:
            return fh.read(1 << 20)
    finally:
        os.close(fd)


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
