"""The project, read once per command: pyproject.toml and uv.lock read at the boundary by the bounded reader
(lockfile.read_bytes), then parsed and checked on first use and kept. A command that writes either file reads a
new Project after its write."""

from __future__ import annotations

import hashlib
import os
import tomllib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from nemo_rl.errors import NemoRLError
from nemo_rl.project import lockfile
from nemo_rl.project.lockfile import Fork, LockedPackage, ProjectNotFound


@dataclass(frozen=True)
class Project:
    """One checkout's pyproject.toml and uv.lock as read (`lock_bytes` None: no uv.lock), and what they declare."""

    root: Path
    pyproject_bytes: bytes = field(repr=False)
    lock_bytes: bytes | None = field(repr=False)

    @classmethod
    def read(cls, root: Path) -> Project:
        try:
            pyproject = lockfile.read_bytes(root / "pyproject.toml")
        except FileNotFoundError as exc:
            raise lockfile.missing(root / "pyproject.toml") from exc
        try:
            lock = lockfile.read_bytes(root / "uv.lock")
        except FileNotFoundError:
            lock = None
        return cls(root, pyproject, lock)

    @classmethod
    def find(cls, start: Path | None = None) -> Project:
        """The project: exactly `start` when given (--project), else the nearest directory at or above the
        current one whose pyproject.toml declares [tool.nemo-rl.forks]."""
        if start is not None:
            # An explicit --project is taken literally: a typo must not silently fall back to an enclosing project.
            directory = Path(os.path.expanduser(start)).resolve()
            if not directory.is_dir():
                raise NemoRLError(f"--project {start}: no such directory", "pass the directory holding pyproject.toml")
            if (found := cls._if_project(directory)) is None:
                raise ProjectNotFound(f"no pyproject.toml with a [tool.nemo-rl.forks] table in {directory} "
                                      f"(--project {start})", "pass the nemo-rl checkout's directory")
            return found
        here = Path.cwd().resolve()
        for candidate in (here, *here.parents):
            if (found := cls._if_project(candidate)) is not None:
                return found
        raise ProjectNotFound(
            f"no pyproject.toml with a [tool.nemo-rl.forks] table at or above {here}",
            "run inside the nemo-rl checkout, or pass --project DIR",
        )

    @classmethod
    def _if_project(cls, directory: Path) -> Project | None:
        # whatever is there is read (a FIFO, a device: refused by name), never passed over for a project further up
        if not os.path.lexists(directory / "pyproject.toml"):
            return None
        project = cls.read(directory)  # guard: project-an-unreadable-pyproject-is-named
        return project if "forks" in project.nemo_rl_table else None

    @property
    def pyproject_path(self) -> Path:
        return self.root / "pyproject.toml"

    @property
    def lock_path(self) -> Path:
        return self.root / "uv.lock"

    @cached_property
    def pyproject(self) -> dict:
        """pyproject.toml parsed; callers must not mutate it."""
        return _parsed(self.pyproject_bytes, self.pyproject_path)

    @cached_property
    def lock(self) -> dict:
        """uv.lock parsed; callers must not mutate it."""
        if self.lock_bytes is None:
            raise lockfile.missing(self.lock_path)
        return _parsed(self.lock_bytes, self.lock_path)

    @cached_property
    def lock_hash(self) -> str:
        """sha256 of uv.lock's bytes: what worker-environment keys and bundles are made from."""
        if self.lock_bytes is None:
            raise lockfile.missing(self.lock_path)
        return hashlib.sha256(lockfile.decoded(self.lock_bytes, self.lock_path).encode()).hexdigest()

    @cached_property
    def tool_tables(self) -> tuple[dict, dict]:
        """([tool.uv], [tool.nemo-rl]), shape-checked."""
        path = self.pyproject_path
        tool = lockfile.table(self.pyproject.get("tool"), "[tool]", path)
        return lockfile.table(tool.get("uv"), "[tool.uv]", path), lockfile.table(tool.get("nemo-rl"),
                                                                                  "[tool.nemo-rl]", path)

    @property
    def uv_table(self) -> dict:
        return self.tool_tables[0]

    @property
    def nemo_rl_table(self) -> dict:
        return self.tool_tables[1]

    @cached_property
    def forks(self) -> tuple[Fork, ...]:
        """Every fork, validated (see Fork)."""
        return lockfile.forks_of(self.pyproject_path, *self.tool_tables, strict=True)

    @cached_property
    def forks_as_pinned(self) -> tuple[Fork, ...]:
        """The forks, keeping one whose rev is not a full SHA, marked, so `deps status` can show it as a bad pin
        beside the others; everything that acts on forks reads `forks`."""
        return lockfile.forks_of(self.pyproject_path, *self.tool_tables, strict=False)

    def fork(self, distribution: str) -> Fork:
        known = {f.distribution: f for f in self.forks}
        if distribution not in known:
            raise NemoRLError(
                f"{distribution!r} is not a fork pinned by this project",
                f"choose one of: {', '.join(sorted(known)) or '(none declared)'}",
            )
        return known[distribution]

    @cached_property
    def requires_python(self) -> str | None:
        path = self.pyproject_path
        return lockfile.string(lockfile.table(self.pyproject.get("project"), "[project]", path).get("requires-python"),
                               "[project] requires-python", path)

    @cached_property
    def packages(self) -> dict[str, LockedPackage]:
        """uv.lock's [[package]]s by name ({} without uv.lock)."""
        return lockfile.packages_of(self.lock, self.lock_path) if self.lock_bytes is not None else {}

    @cached_property
    def optional_dependencies(self) -> dict[str, list[str]]:
        """[project.optional-dependencies] as extra -> canonical distribution names, each requirement checked."""
        return lockfile.optional_dependencies_of(self.pyproject, self.pyproject_path)

    def extras_require(self, flags: list[str] | tuple[str, ...], distribution: str) -> bool:
        """Whether the extras these sync flags select (`--extra X`, `--all-extras`) require `distribution`, and
        the flags install it (`--no-install-package DIST` leaves it out on purpose: nothing then expects it)."""
        from packaging.utils import canonicalize_name

        left_out = {canonicalize_name(word.split("=", 1)[1] if "=" in word else flags[i + 1])
                    for i, word in enumerate(flags) if word.split("=", 1)[0] == "--no-install-package"
                    and ("=" in word or i + 1 < len(flags))}
        if canonicalize_name(distribution) in left_out:  # guard: extras-no-install-package-leaves-a-fork
            return False
        optional = self.optional_dependencies
        chosen = set(optional) if "--all-extras" in flags else {
            word.split("=", 1)[1] if word.startswith("--extra=") else flags[i + 1]
            for i, word in enumerate(flags)
            if (word == "--extra" and i + 1 < len(flags)) or word.startswith("--extra=")}
        return any(canonicalize_name(distribution) in optional.get(extra, []) for extra in chosen)


def _parsed(data: bytes, path: Path) -> dict:
    try:
        return tomllib.loads(lockfile.decoded(data, path))
    except tomllib.TOMLDecodeError as exc:
        raise NemoRLError(f"cannot parse {path}: {exc}", f"fix the TOML syntax in {path.name}") from exc
