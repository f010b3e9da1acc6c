"""The project, read once per command and parsed on first use."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from nemo_rl import values
from nemo_rl.errors import NemoRLError
from nemo_rl.project import identity, lockfile
from nemo_rl.project.lockfile import Fork, LockedPackage, ProjectNotFound, table

if TYPE_CHECKING:
    from nemo_rl.project.develop_state import Developed


def _plain_root(root: Path) -> None:
    # uv writes the project's path into a .pth: one line
    values.plain_path(root.resolve(), "the project directory")  # guard: project-a-root-that-breaks-a-line


@dataclass(frozen=True)
class Project:
    """One checkout's pyproject.toml and uv.lock (`lock_bytes` None when missing), and what they declare."""

    root: Path
    pyproject_bytes: bytes = field(repr=False)
    lock_bytes: bytes | None = field(repr=False)

    @classmethod
    def read(cls, root: Path) -> Project:
        project = cls._read(root)
        _plain_root(root)
        return project

    @classmethod
    def _read(cls, root: Path) -> Project:
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
        """`start`, else the nearest directory at or above the current one declaring [tool.nemo-rl.forks]."""
        if start is not None:
            directory = Path(os.path.expanduser(start)).resolve()
            if not directory.is_dir():
                raise NemoRLError(f"--project {start}: no such directory", "pass the project's directory")
            if (found := cls._if_project(directory)) is None:
                raise ProjectNotFound(f"no pyproject.toml with a [tool.nemo-rl.forks] table in {directory}",
                                      "pass the nemo-rl checkout's directory")
            return found
        here = Path.cwd().resolve()
        for candidate in (here, *here.parents):
            if (found := cls._if_project(candidate)) is not None:
                return found
        raise ProjectNotFound(f"no pyproject.toml with a [tool.nemo-rl.forks] table at or above {here}",
                              "run inside the nemo-rl checkout, or pass --project DIR")

    @classmethod
    def _if_project(cls, directory: Path) -> Project | None:
        if not os.path.lexists(directory / "pyproject.toml"):
            return None
        project = cls._read(directory)  # guard: project-an-unreadable-pyproject-is-named
        if "forks" not in project.nemo_rl_table:
            return None
        _plain_root(directory)
        return project

    @property
    def pyproject_path(self) -> Path:
        return self.root / "pyproject.toml"

    @property
    def lock_path(self) -> Path:
        return self.root / "uv.lock"

    @cached_property
    def pyproject(self) -> dict:
        """Callers must not mutate it."""
        return lockfile.parsed(self.pyproject_bytes, self.pyproject_path)

    @cached_property
    def lock(self) -> dict:
        """Callers must not mutate it."""
        if self.lock_bytes is None:
            raise lockfile.missing(self.lock_path)
        return lockfile.parsed(self.lock_bytes, self.lock_path)

    @cached_property
    def lock_hash(self) -> str:
        if self.lock_bytes is None:
            raise lockfile.missing(self.lock_path)
        return hashlib.sha256(lockfile.decoded(self.lock_bytes, self.lock_path).encode()).hexdigest()

    @cached_property
    def tool_tables(self) -> tuple[dict, dict]:
        """([tool.uv], [tool.nemo-rl]), shape-checked."""
        path = self.pyproject_path
        tool = table(self.pyproject.get("tool"), "[tool]", path)
        return table(tool.get("uv"), "[tool.uv]", path), table(tool.get("nemo-rl"), "[tool.nemo-rl]", path)

    @property
    def uv_table(self) -> dict:
        return self.tool_tables[0]

    @property
    def nemo_rl_table(self) -> dict:
        return self.tool_tables[1]

    @cached_property
    def fork_tables(self) -> dict[str, dict]:
        forks = table(self.nemo_rl_table.get("forks"), "[tool.nemo-rl.forks]", self.pyproject_path)
        return {dist: table(meta, f"[tool.nemo-rl.forks.{dist}]", self.pyproject_path)
                for dist, meta in forks.items()}

    @cached_property
    def forks(self) -> tuple[Fork, ...]:
        return lockfile.forks_of(self.pyproject_path, self.uv_table, self.fork_tables, strict=True)

    @cached_property
    def forks_as_pinned(self) -> tuple[Fork, ...]:
        """The forks, with those whose rev is not a full SHA marked."""
        return lockfile.forks_of(self.pyproject_path, self.uv_table, self.fork_tables, strict=False)

    def fork(self, distribution: str) -> Fork:
        known = {f.distribution: f for f in self.forks}
        if distribution not in known:
            raise NemoRLError(f"{distribution!r} is not a fork pinned by this project",
                              f"choose one of: {', '.join(sorted(known)) or '(none)'}")
        return known[distribution]

    @cached_property
    def developing(self) -> dict[str, Developed]:
        """The forks under `nemo-rl deps develop`, by distribution."""
        from nemo_rl.project import develop_state  # it reaches extras, which reads nemo-rl's own Project

        return develop_state.read(self.root)

    @cached_property
    def checkout_id(self) -> str:
        """This checkout's id; "" in a read-only checkout."""
        return identity.ensure_checkout_id(self.root)

    @cached_property
    def requires_python(self) -> str | None:
        path = self.pyproject_path
        return lockfile.string(table(self.pyproject.get("project"), "[project]", path).get("requires-python"),
                               "[project] requires-python", path)

    @cached_property
    def packages(self) -> dict[str, LockedPackage]:
        """uv.lock's [[package]]s by name."""
        if self.lock_bytes is None:
            return {}
        packages, path = self.lock.get("package", []), self.lock_path
        remake = "run `git checkout -- uv.lock` or `rm uv.lock && uv lock`"
        if not isinstance(packages, list) or not all(isinstance(p, dict) and isinstance(p.get("name"), str)
                                                      for p in packages):
            raise NemoRLError(f"{path} has [[package]] entries without a name", remake)
        if bad := next((p for p in packages if not isinstance(p.get("version", ""), str)), None):  # guard: lock-a-locked-version-that-is-no-string
            raise NemoRLError(f"{path}: [[package]] {bad['name']!r:.60} has a version that is not a string", remake)
        return {p["name"]: LockedPackage.of(p["name"], p.get("version"), table(p.get("source"), "source", path))
                for p in packages}

    @cached_property
    def optional_dependencies(self) -> dict[str, list[str]]:
        """extra -> canonical distribution names."""
        from packaging.requirements import InvalidRequirement, Requirement
        from packaging.utils import canonicalize_name

        path = self.pyproject_path
        declared = table(self.pyproject.get("project"), "[project]", path).get("optional-dependencies")
        optional = table(declared, "[project.optional-dependencies]", path)
        result: dict[str, list[str]] = {}
        for extra, requirements in optional.items():
            try:
                result[extra] = [canonicalize_name(Requirement(r).name) for r in requirements]
            except (InvalidRequirement, TypeError) as exc:
                raise NemoRLError(f"pyproject.toml: [project.optional-dependencies] {extra} has an invalid "
                                  f"requirement: {exc}", "fix it, then run `uv lock`") from exc
        return result

    def extras_require(self, flags: list[str] | tuple[str, ...], distribution: str) -> bool:
        """Whether these sync flags install `distribution` through their extras."""
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
