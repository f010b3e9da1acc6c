"""Reading pyproject.toml's fork pins and uv.lock. Read-only and fast: `deps status` runs on every check."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from nemo_rl.errors import NemoRLError


@dataclass(frozen=True)
class Fork:
    distribution: str
    url: str
    rev: str
    branch: str | None
    upstream_url: str | None
    upstream_branch: str
    base: str | None


@dataclass(frozen=True)
class LockedPackage:
    name: str
    version: str | None
    source: dict

    @property
    def commit(self) -> str | None:
        """The commit uv resolved a git source to: `git = "<url>?rev=<rev>#<commit>"`."""
        git_url = self.source.get("git")
        return urlsplit(git_url).fragment or None if git_url else None


def load_toml(path: Path) -> dict:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError as exc:
        raise NemoRLError(f"{path} does not exist", "run from the project directory or pass --project DIR") from exc
    except tomllib.TOMLDecodeError as exc:
        raise NemoRLError(f"cannot parse {path}: {exc}", f"fix the TOML syntax in {path.name}") from exc


def find_project(start: Path | None = None) -> Path:
    """The nearest directory at or above `start` whose pyproject.toml declares [tool.nemo-rl.forks]."""
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        pyproject = candidate / "pyproject.toml"
        if pyproject.is_file() and "forks" in load_toml(pyproject).get("tool", {}).get("nemo-rl", {}):
            return candidate
    raise NemoRLError(
        f"no pyproject.toml with a [tool.nemo-rl.forks] table at or above {here}",
        "run inside the nemo-rl checkout, or pass --project DIR",
    )


def forks(project: Path) -> list[Fork]:
    data = load_toml(project / "pyproject.toml")
    tool = data.get("tool", {})
    sources = tool.get("uv", {}).get("sources", {})
    result = []
    for dist, meta in tool.get("nemo-rl", {}).get("forks", {}).items():
        source = sources.get(dist)
        if not isinstance(source, dict) or "git" not in source or "rev" not in source:
            raise NemoRLError(
                f"[tool.nemo-rl.forks.{dist}] has no matching git source with a rev in [tool.uv.sources]",
                f'add `{dist} = {{ git = "<url>", rev = "<40-hex sha>" }}` to [tool.uv.sources]',
            )
        result.append(
            Fork(
                distribution=dist,
                url=source["git"],
                rev=source["rev"],
                branch=meta.get("branch") or source.get("branch"),
                upstream_url=meta.get("upstream-url"),
                upstream_branch=meta.get("upstream-branch", "main"),
                base=meta.get("base"),
            )
        )
    return result


def fork(project: Path, distribution: str) -> Fork:
    known = {f.distribution: f for f in forks(project)}
    if distribution not in known:
        raise NemoRLError(
            f"{distribution!r} is not a fork pinned by this project",
            f"choose one of: {', '.join(sorted(known)) or '(none declared)'}",
        )
    return known[distribution]


def declared_metadata(project: Path, distribution: str) -> dict | None:
    """The [[tool.uv.dependency-metadata]] entry for `distribution`: uv locks its version and requirements
    instead of the fork's own, so a bump must keep it true."""
    entries = load_toml(project / "pyproject.toml").get("tool", {}).get("uv", {}).get("dependency-metadata", [])
    return next((e for e in entries if e.get("name") == distribution), None)


def locked_packages(project: Path) -> dict[str, LockedPackage]:
    lock_path = project / "uv.lock"
    if not lock_path.exists():
        return {}
    data = load_toml(lock_path)
    return {
        p["name"]: LockedPackage(p["name"], p.get("version"), p.get("source", {})) for p in data.get("package", [])
    }
