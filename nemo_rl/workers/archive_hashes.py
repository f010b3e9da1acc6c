"""A bundle's index archives against uv.lock's own hashes.

uv unpacks each wheel it downloads into `archive-v0/<id>` and keeps no archive, but it records the archive's
sha256, taken while downloading, in a pointer beside the unpacked tree: `wheels-v*/<index>/<name>/<stem>.http`
(the archive id, its hashes and the wheel's file name, msgpack first, uv's HTTP cache policy after) and, for a
source distribution, `sdists-v*/<index>/<name>/<version>/revision.http` (the revision id and the sdist's
hashes). A pointer whose hash is not the one uv.lock records for that file names an archive uv.lock never
pinned: refused, naming the package. What this cannot prove (uv's layout keeps no archive to hash): that the
unpacked files are that archive's contents; the digest a site pins covers them (docs/workers.md).
"""

from __future__ import annotations

import os
import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from nemo_rl import values
from nemo_rl.errors import NemoRLError
from nemo_rl.project import lockfile

_MAX_POINTER = 1 << 16  # uv's pointers are a few hundred bytes; a larger file is not one


def canonical(name: str) -> str:
    """PEP 503, as packaging spells it: a node builds its first environment with the standard library only."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Pointer:
    path: Path
    archive: str  # where uv reads it: "<name> <stem>" of a wheel, or "<name> <version> sdist"
    hashes: tuple[tuple[str, str], ...]  # every (algorithm (lower case, as uv.lock spells it), hex) it records
    label: str = ""  # a wheel's file name, as written inside it (checked against where it lies)


class _Reader:
    """The few msgpack shapes uv's pointers start with (arrays, maps, strings); anything else ends the read."""

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


def _read(path: Path, sdist: tuple[str, str] | None) -> Pointer | None:
    """The pointer at `path`; None when it is not one of the shapes above (uv reads it as a cache miss too)."""
    try:
        # a link inside the bundle (links out were refused with the digest) is read where it leads, by the one
        # reader a FIFO swapped in meanwhile cannot hang
        reader = _Reader(values.read_plain_file(Path(os.path.realpath(path)), _MAX_POINTER))
        fields = reader.array()
        if fields < (2 if sdist else 3):
            return None
        reader.string()  # the archive or revision id
        hashes = reader.hashes()
        label = "" if sdist else reader.string()
    except (OSError, ValueError):  # UnicodeDecodeError is a ValueError
        return None
    # keyed by where it lies, which is what uv looks up, never by the name written inside it
    archive = f"{canonical(sdist[0])} {sdist[1]} sdist" if sdist else f"{path.parent.name} {path.name[:-len('.http')]}"
    return Pointer(path, archive, hashes, label)


def wheel_key(filename: str) -> str:
    """Where uv keeps a wheel's pointer, as a key: "<canonical name> <file name less name and .whl>"."""
    name, _, rest = filename.partition("-")
    return f"{canonical(name)} {rest.removesuffix('.whl')}"


def pointers(cache: Path) -> list[Pointer]:
    """Every archive pointer in the uv cache at `cache` (registry wheels and sdists, any index)."""
    found = []
    for bucket in sorted(cache.glob("wheels-v*")):
        for index in ("pypi", "index"):
            for path in sorted((bucket / index).rglob("*.http")) if (bucket / index).is_dir() else ():
                pointer = _read(path, None)
                if pointer is not None:
                    found.append(pointer)
    for bucket in sorted(cache.glob("sdists-v*")):
        for index in ("pypi", "index"):
            for path in sorted((bucket / index).rglob("revision.http")) if (bucket / index).is_dir() else ():
                pointer = _read(path, (path.parent.parent.name, path.parent.name))
                if pointer is not None:
                    found.append(pointer)
    return found


def locked_hashes(project: Path) -> dict[str, tuple[str, str]]:
    """Archive (wheel_key of the file name, or "<name> <version> sdist") -> (package, "algorithm:hex")."""
    found = {}
    for package in lockfile.load_toml(project / "uv.lock").get("package", []):
        name, version = str(package.get("name", "")), str(package.get("version", ""))
        sdist = package.get("sdist")
        if isinstance(sdist, dict) and isinstance(sdist.get("hash"), str):
            found[f"{canonical(name)} {version} sdist"] = (name, sdist["hash"])
        for wheel in package.get("wheels", []):
            if isinstance(wheel, dict) and isinstance(wheel.get("hash"), str) and isinstance(wheel.get("url"), str):
                filename = urllib.parse.unquote(urllib.parse.urlsplit(wheel["url"]).path.rsplit("/", 1)[-1])
                found[wheel_key(filename)] = (name, wheel["hash"])
    return found


def check(cache: Path, project: Path, where: str) -> int:
    """Refuse an archive pointer in `cache` whose hash is not uv.lock's for that archive; the number checked."""
    locked = locked_hashes(project)
    checked = 0
    for pointer in pointers(cache):
        key = pointer.archive
        if key not in locked:  # an archive uv.lock does not name: uv never installs it for this lock
            continue
        package, expected = locked[key]
        fix = ("pack the bundle again on the builder from this uv.lock (`nemo-rl envs pack`): a bundle carries only "
               "archives whose hashes uv.lock records")
        if pointer.label and wheel_key(pointer.label) != key:
            raise NemoRLError(f"{where}: the cache's archive pointer {pointer.path} of {package} names another "
                              f"wheel, {pointer.label!r:.120}", fix)
        algorithm, _, digest = expected.partition(":")
        recorded = {h for a, h in pointer.hashes if a == algorithm.lower()}  # every entry: uv may read any
        if recorded != {digest.lower()}:
            found = f"records {algorithm} {', '.join(sorted(recorded))}" if recorded else f"records no {algorithm}"
            raise NemoRLError(f"{where}: the cache's archive of {package} ({pointer.label or key}) {found}, but "
                              f"uv.lock pins {expected} ({pointer.path})", fix)
        checked += 1
    return checked
