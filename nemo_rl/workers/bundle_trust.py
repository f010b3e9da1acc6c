"""What a node trusts in a bundle beyond its manifest: the digests a site pins (whoever can write a bundle can
write its manifest) and files that share an inode with nothing outside the bundle."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

from nemo_rl import locks, values
from nemo_rl.errors import NemoRLError


def pinned_digests() -> set[str]:
    """The bundle digests this site trusts ($NEMO_RL_BUNDLE_DIGESTS, in values.bundle_digests' format); empty when
    unset (any bundle whose content matches its manifest). Set but holding no digest (a variable that did not come
    up) is refused: it would trust every bundle while the site believes it pins."""
    setting = os.environ.get("NEMO_RL_BUNDLE_DIGESTS")
    if setting is None:
        return set()
    found = values.bundle_digests(setting, "NEMO_RL_BUNDLE_DIGESTS")
    if not found:
        raise NemoRLError(f"NEMO_RL_BUNDLE_DIGESTS is set but holds no digest ({setting!r:.40}), which would trust "
                          "every bundle", "set it to the digests `nemo-rl envs pack` printed, or unset it "
                          "(`unset NEMO_RL_BUNDLE_DIGESTS`) to take any bundle whose content matches its manifest")
    return found


def digest_argument(value: str) -> str:
    """`--digest`: one bundle digest (values.bundle_digest's format)."""
    return values.bundle_digest(value, "--digest")


def refuse_foreign_links(root: Path, work_caches: list[Path], venv_dir: Path | None = None) -> None:
    """A bundle file with a hard link outside the bundle is one inode with that file (pack never makes one, and
    nodes copy what they install): an install would read it, and whatever writes it changes the other. Links
    between two files of the bundle (a copy that keeps hard links, a deduplicating tool) share nothing with
    outside and are the bundle's own, as are the links of node builds running from it (`work_caches`, ours)."""
    names: dict[tuple[int, int], list[str]] = {}
    nlink: dict[tuple[int, int], int] = {}
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            info = os.lstat(os.path.join(dirpath, name))
            if not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
                raise NemoRLError(f"{os.path.join(dirpath, name)} in bundle {root.parent} is not a file or a link (a "
                                  "FIFO, socket or device, which pack never makes; reading one waits for ever)",
                                  f"copy the bundle again from the builder: {root.parent}")
            if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                inode = (info.st_dev, info.st_ino)
                names.setdefault(inode, []).append(os.path.relpath(os.path.join(dirpath, name), root))
                nlink[inode] = info.st_nlink
    for inode, inside in names.items():
        outside = nlink[inode] - len(inside) - sum(_our_links(inode, relative, work_caches) for relative in inside)
        if outside > 0:
            also = f" (and with {len(inside) - 1} other file(s) of the bundle)" if len(inside) > 1 else ""
            leftover = _leftover_holding(inode, work_caches[0].parent if work_caches else venv_dir)
            if leftover is not None:
                raise NemoRLError(f"{root / inside[0]} in bundle {root.parent} is hard-linked to {outside} file(s) "
                                  f"outside the bundle, in {leftover}: a working cache without nemo-rl's marker (a "
                                  "node build killed before it wrote one, or a nemo-rl without markers)",
                                  f"if it is yours and no build runs from it now, remove it (`rm -rf {leftover}`) "
                                  "and run again; else copy the bundle again from the builder")
            raise NemoRLError(f"{root / inside[0]} in bundle {root.parent} is hard-linked to {outside} file(s) "
                              f"outside the bundle{also}: one inode, which whatever writes the other file changes",
                              f"copy the bundle again from the builder with a copy that makes no hard links to "
                              f"other files (`cp -r`): {root.parent}")


def _our_links(inode: tuple[int, int], relative: str, work_caches: list[Path]) -> int:
    """Links to this file held by node builds running from the bundle now (their working caches)."""
    count = 0
    for work in work_caches:
        try:
            other = os.lstat(work / CACHE / relative)
        except OSError:
            continue
        count += (other.st_dev, other.st_ino) == inode
    return count


# A node's working cache: `$NEMO_RL_VENV_DIR/.bundle-cache-<random>/` holding MARKER and the uv cache (CACHE).
# A shared NEMO_RL_VENV_DIR is writable by others, so a name with the prefix proves nothing: ours is a real
# directory (never a link) this user owns holding a MARKER file this user owns.
WORK_CACHE_PREFIX = ".bundle-cache-"
CACHE = "uv-cache"
MARKER = "nemo-rl-work-cache"


def new_work_cache(root: Path) -> tuple[Path, int]:
    """A working cache of our own under `root`, held (the descriptor: close it when done), marked as ours."""
    for attempt in range(3):
        work = Path(tempfile.mkdtemp(prefix=WORK_CACHE_PREFIX, dir=root))
        held = -1
        try:  # held, then marked, before anything else: an empty unmarked one is a killed build's to prune
            held = locks.hold(work)
            fd = os.open(work / MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            break
        except FileNotFoundError:  # a prune took it for a killed build's between mkdtemp and the lock: again
            if held >= 0:
                os.close(held)
            if attempt == 2:
                raise
    try:
        os.write(fd, f"a working uv cache of a node build from a bundle (pid {os.getpid()})\n".encode())
        os.close(fd)
        (work / CACHE).mkdir()
    except BaseException:
        os.close(held)
        shutil.rmtree(work, ignore_errors=True)
        raise
    return work, held


def why_not_ours(path: Path) -> str | None:
    """None for a working cache this user's nemo-rl made; else what it is (it is left alone, never counted)."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    euid = os.geteuid()
    if stat.S_ISLNK(info.st_mode):
        return "a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return "not a directory"
    if info.st_uid != euid:
        return f"owned by uid {info.st_uid}"
    try:
        marker = os.lstat(path / MARKER)
    except OSError:
        marker = None
    if marker is None and _empty(path):  # killed between mkdtemp and the marker: nothing in it to be anyone's
        return None
    if marker is None or not stat.S_ISREG(marker.st_mode) or marker.st_uid != euid:
        return f"no {MARKER} file of this user's in it"
    return None


def _empty(path: Path) -> bool:
    try:
        return not os.listdir(path)
    except OSError:
        return False


def _leftover_holding(inode: tuple[int, int], root: Path | None) -> Path | None:
    """The unmarked working cache under `root` (a build killed before markers were written, or from a nemo-rl
    without them) that holds the other link of `inode`: what to remove, named, instead of "outside the bundle"."""
    for cache in sorted(root.glob(f"{WORK_CACHE_PREFIX}*")) if root is not None and root.is_dir() else ():
        if why_not_ours(cache) is None or cache.is_symlink():
            continue
        for dirpath, _, filenames in os.walk(cache):
            for name in filenames:
                try:
                    info = os.lstat(os.path.join(dirpath, name))
                except OSError:
                    continue
                if (info.st_dev, info.st_ino) == inode:
                    return cache
    return None


def work_caches(root: Path) -> list[Path]:
    """The working caches under `root` that this user's nemo-rl made (live or left by a killed build)."""
    found = sorted(root.glob(f"{WORK_CACHE_PREFIX}*")) if root.is_dir() else []
    return [path for path in found if why_not_ours(path) is None]
