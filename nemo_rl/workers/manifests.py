"""A bundle's manifest (`nemo-rl-bundle.json`): checked when read, compared with a node's inputs."""

from __future__ import annotations

import math
import platform
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from nemo_rl import uv, values
from nemo_rl.errors import NemoRLError, command
from nemo_rl.project.model import Project
from nemo_rl.workers.archive_hashes import canonical

MANIFEST = "nemo-rl-bundle.json"
SCHEMA = 3
_DISTRIBUTION = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
_DIST_VALUE = re.compile(r"^[^\s]+( git [0-9a-f]{40})?$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass(frozen=True)
class Inputs:
    """What must be equal on the builder and the node."""

    lock_hash: str
    flags: tuple[str, ...]
    python: str
    platform: str
    uv_version: str


@dataclass(frozen=True)
class Proven:
    """The modules the builder's import check imported and the files (relative to the environment) it loaded."""

    modules: tuple[str, ...]
    files: tuple[str, ...]


@dataclass(frozen=True)
class Manifest:
    schema: int
    inputs: Inputs
    distributions: Mapping[str, str]  # name -> "version" or "version git <commit>"
    files: int
    bytes: int
    digest: str
    created: float
    proven: Proven


def inputs_for(project: Project, flags: list[str] | tuple[str, ...]) -> Inputs:
    return Inputs(project.lock_hash, tuple(flags), platform.python_version(),
                  f"{sys.platform}-{platform.machine()}", uv.version())


def _distributions_field(value: object) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and _DISTRIBUTION.match(k) and isinstance(v, str) and _DIST_VALUE.match(v)
            for k, v in value.items()):
        raise ValueError("distributions is not a map of distribution names to 'VERSION' or 'VERSION git SHA'")
    return dict(value)


def _proven_field(value: object) -> Proven:
    if (not isinstance(value, dict) or not isinstance(value.get("modules"), list)
            or not all(isinstance(m, str) and _MODULE.match(m) for m in value["modules"])
            or not isinstance(value.get("files"), list)
            or not all(isinstance(f, str) and f and not f.startswith("/") and ".." not in f.split("/")
                       and f.isprintable() for f in value["files"])):
        raise ValueError("proven is not {modules: [module names], files: [paths inside the environment]}")  # guard: manifest-proven-checked
    return Proven(tuple(value["modules"]), tuple(value["files"]))


def _count_field(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} is not a count ({value!r:.40})")
    return value


def _created_field(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"created is not a time in seconds ({value!r:.40})")
    return float(value)


def read_manifest(bundle: Path) -> Manifest:
    path = bundle / MANIFEST
    fix = f"make the bundle again on the builder: {command('nemo-rl envs pack PY_EXECUTABLE {bundle}', bundle=bundle)}"
    if ".packing-" in bundle.name:  # guard: bundles-an-unfinished-pack-is-no-bundle
        raise NemoRLError(f"{bundle} is an unfinished pack",
                          f"remove it ({command('rm -rf {bundle}', bundle=bundle)}) and pack into a new directory: "
                          "`nemo-rl envs pack PY_EXECUTABLE DIR`")
    try:
        data = values.state_json(path, fix, "the bundle manifest")
        if isinstance(data, dict) and data.get("schema") != SCHEMA:
            raise NemoRLError(f"{path} has schema {data.get('schema')!r:.20}, this nemo-rl reads {SCHEMA}", fix)
        assert isinstance(data, dict)
        inputs = data["inputs"]
        manifest = Manifest(int(data["schema"]), Inputs(str(inputs["lock_hash"]), tuple(map(str, inputs["flags"])),  # guard: manifest-distributions-checked
                                                        str(inputs["python"]), str(inputs["platform"]),
                                                        str(inputs["uv_version"])),
                            _distributions_field(data["distributions"]), _count_field(data["files"], "files"),
                            _count_field(data["bytes"], "bytes"), str(data["digest"]), _created_field(data["created"]),
                            _proven_field(data["proven"]))
    except FileNotFoundError as exc:
        raise NemoRLError(f"{bundle} is not a bundle (no {MANIFEST})", fix) from exc
    except (OSError, ValueError, TypeError, KeyError, AttributeError, AssertionError) as exc:
        raise NemoRLError(f"cannot read the bundle manifest {path}: {exc}", fix) from exc
    return manifest


def differences(manifest: Manifest, local: Inputs, project: Project | None = None) -> list[str]:
    """What differs, a phrase per input; with `project`, a changed uv.lock names the packages that moved."""
    names = {"lock_hash": "uv.lock changed", "flags": "other sync flags", "python": "another Python",
             "platform": "another platform", "uv_version": "another uv"}
    found = []
    for field in names:
        if getattr(manifest.inputs, field) == getattr(local, field):
            continue
        moved = moved_packages(manifest, project) if field == "lock_hash" and project is not None else None  # guard: bundles-a-changed-uv-lock-names-what
        found.append(f"{names[field]} ({moved})" if moved else
                     f"{names[field]} (bundle: {getattr(manifest.inputs, field)}, here: {getattr(local, field)})")
    return found


def moved_packages(manifest: Manifest, project: Project) -> str | None:
    """The bundle's packages whose version or commit uv.lock no longer has, as one phrase."""
    try:
        locked = {canonical(name): package for name, package in project.packages.items()}
    except NemoRLError:
        return None
    moved = []
    for name, value in manifest.distributions.items():
        package = locked.get(canonical(name))
        bundle_version, _, bundle_commit = value.partition(" git ")
        if package is None:
            moved.append(f"{name} {value} is not in uv.lock")
        elif (package.commit or "") != bundle_commit or (not bundle_commit and package.version != bundle_version):
            here = f"{package.version} git {package.commit}" if package.commit else str(package.version)
            moved.append(f"{name}: bundle {_short(value)}, uv.lock {_short(here)}")
    return "; ".join(moved) if moved else "no package of the bundle moved: the file itself differs"


def _short(value: str) -> str:
    version, _, commit = value.partition(" git ")
    return f"{version} git {commit[:12]}" if commit else version
