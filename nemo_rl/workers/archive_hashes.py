"""A bundle's index archives checked against uv.lock's hashes via the msgpack pointers in uv's cache."""

from __future__ import annotations

import os
import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from nemo_rl import values
from nemo_rl.errors import NemoRLError
from nemo_rl.project.model import Project

_MAX_POINTER = 1 << 16  # uv's pointers are a few hundred bytes; a larger file is not one


def canonical(name: str) -> str:
    """PEP 503, standard library only."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Pointer:
    path: Path
    archive: str  # "<name> <stem>" of a wheel, or "<name> <version> sdist"
    hashes: tuple[tuple[str, str], ...]  # (algorithm, hex), lower case
    label: str = ""  # a wheel's file name, as written inside it
    readable: bool = True


class _Reader:
    """Reads the msgpack arrays, maps and strings starting uv's pointers; raises ValueError on anything else."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def _take(self, count: int) -> bytes:
        if self.at + count > len(self.data):
            raise ValueError("truncated")
        chunk = self.data[self.at:self.at + count]
        self.at += count
        return chunk

    def _size(self, first: int, fix_base: int, fix_mask: int, sized: dict[int, int]) -> int:
        if first & ~fix_mask == fix_base:
            return first & fix_mask
        if first in sized:
            return int.from_bytes(self._take(sized[first]), "big")
        raise ValueError(f"unexpected msgpack byte {first:#x}")

    def string(self) -> str:
        return self._take(self._size(self._take(1)[0], 0xA0, 0x1F, {0xD9: 1, 0xDA: 2, 0xDB: 4})).decode()

    def array(self) -> int:
        return self._size(self._take(1)[0], 0x90, 0x0F, {0xDC: 2, 0xDD: 4})

    def map(self) -> int:
        return self._size(self._take(1)[0], 0x80, 0x0F, {0xDE: 2, 0xDF: 4})

    def hashes(self) -> tuple[tuple[str, str], ...]:
        found = []
        for _ in range(self.array()):
            for _ in range(self.map()):
                algorithm = self.string().lower()
                found.append((algorithm, self.string().lower()))
        return tuple(found)


def _read(path: Path, sdist: tuple[str, str] | None) -> Pointer:
    """The pointer at `path`, not `readable` when it is not one of uv's shapes."""
    try:
        # links out of the bundle were refused with the digest; read_plain_file cannot hang on a FIFO
        reader = _Reader(values.read_plain_file(Path(os.path.realpath(path)), _MAX_POINTER))
        fields = reader.array()
        if fields < (2 if sdist else 3):
            raise ValueError("too few fields")
        reader.string()  # the archive or revision id
        hashes = reader.hashes()
        label = "" if sdist else reader.string()
        if not sdist and not label.strip():  # guard: pointer-a-wheel-s-pointer-names-its
            raise ValueError("a wheel pointer without the wheel's file name")
    except (OSError, ValueError):  # UnicodeDecodeError is a ValueError
        return Pointer(path, "", (), "", readable=False)
    if sdist:
        return Pointer(path, f"{canonical(sdist[0])} {sdist[1]} sdist", hashes, label)
    return Pointer(path, wheel_key(label), hashes, label)  # guard: fixes-a-pointer-is-matched-by-the-file


def _lies_where_uv_looks(pointer: Pointer) -> bool:
    """Whether uv looks the wheel's pointer up where it lies."""
    name, _, rest = pointer.archive.partition(" ")
    stem = pointer.path.name[:-len(".http")]
    if pointer.path.parent.name != name:
        return False
    if _key(name, stem) == pointer.archive:
        return True
    return re.fullmatch(re.escape(rest.split("-", 1)[0]) + "-[0-9a-f]{16}", stem) is not None


def wheel_key(filename: str) -> str:
    """"<canonical name> <version>[-<build>]-<py>-<abi>-<platform>", each tag set sorted."""
    name, _, rest = filename.removesuffix(".whl").partition("-")
    return _key(canonical(name), rest)


def _key(name: str, rest: str) -> str:
    parts = rest.split("-")
    head, tags = parts[:-3], [".".join(sorted(part.split("."))) for part in parts[-3:]]
    return f"{name} {'-'.join(head + tags)}"


def pointers(cache: Path) -> list[Pointer]:
    """Every wheel and sdist archive pointer in the uv cache at `cache`."""
    found = []
    for buckets, pattern in (("wheels-v*", "*.http"), ("sdists-v*", "revision.http")):
        for bucket in sorted(cache.glob(buckets)):
            for index in ("pypi", "index"):
                for path in sorted((bucket / index).rglob(pattern)) if (bucket / index).is_dir() else ():
                    sdist = (path.parent.parent.name, path.parent.name) if pattern == "revision.http" else None
                    found.append(_read(path, sdist))
    return found


def _version(key: str) -> str:
    name, _, rest = key.partition(" ")
    return f"{name} {rest.split('-', 1)[0]}"


def check(cache: Path, project: Project, where: str) -> tuple[int, list[str]]:
    """(archives checked, archives uv.lock does not name); raises NemoRLError for a pointer matching no uv.lock file or
    hash."""
    locked: dict[str, tuple[str, str]] = {}
    for entry in project.lock.get("package", []):
        name, version = str(entry.get("name", "")), str(entry.get("version", ""))
        sdist = entry.get("sdist")
        if isinstance(sdist, dict) and isinstance(sdist.get("hash"), str):
            locked[f"{canonical(name)} {version} sdist"] = (name, sdist["hash"])
        for wheel in entry.get("wheels", []):
            if isinstance(wheel, dict) and isinstance(wheel.get("hash"), str) and isinstance(wheel.get("url"), str):
                filename = urllib.parse.unquote(urllib.parse.urlsplit(wheel["url"]).path.rsplit("/", 1)[-1])
                locked[wheel_key(filename)] = (name, wheel["hash"])
    versions = {_version(key) for key in locked if not key.endswith(" sdist")}
    fix = "pack the bundle again on the builder from this uv.lock (`nemo-rl envs pack`)"
    checked, unlisted = 0, []
    for pointer in pointers(cache):
        if not pointer.readable:  # guard: fixes-an-unreadable-pointer-is-refused
            raise NemoRLError(f"{where}: the cache's archive pointer {pointer.path} is not one uv writes", fix)
        key = pointer.archive
        if pointer.label and not _lies_where_uv_looks(pointer):  # guard: plain-an-archive-pointer-is-keyed-by
            raise NemoRLError(f"{where}: the cache's archive pointer {pointer.path} lies where another wheel's "
                              f"pointer lies: it records {pointer.label!r:.120}", fix)
        if key not in locked:
            stem = pointer.path.name[:-len(".http")]
            hashed_stem = pointer.label and _key(key.partition(" ")[0], stem) != key
            if hashed_stem and _version(key) in versions:  # guard: fixes-a-hashed-stem-of-a-locked-version
                # uv may find a locked wheel of this version by this hash of its tags
                raise NemoRLError(f"{where}: the cache's archive pointer {pointer.path} records "
                                  f"{pointer.label!r:.120}, a wheel uv.lock does not name", fix)
            # an sdist's build requirement: never looked up for this lock
            unlisted.append(pointer.label or key)
            continue
        package, expected = locked[key]
        algorithm, _, digest = expected.partition(":")
        recorded = {h for a, h in pointer.hashes if a == algorithm.lower()}  # all of them: uv may read any
        if recorded != {digest.lower()}:  # guard: an-archive-hash-is-compared
            found = f"records {algorithm} {', '.join(sorted(recorded))}" if recorded else f"records no {algorithm}"
            raise NemoRLError(f"{where}: the cache's archive of {package} ({pointer.label or key}) {found}, but "
                              f"uv.lock pins {expected} ({pointer.path})", fix)
        checked += 1
    return checked, unlisted
