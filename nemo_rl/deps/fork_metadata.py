"""What a fork itself declares at a commit, asked of its own build backend (PEP 517
prepare_metadata_for_build_wheel), not parsed from setup.py or requirements files by hand.

uv locks our [[tool.uv.dependency-metadata]] entry instead of this, so a bump compares the two.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from nemo_rl import git, uv
from nemo_rl.deps import fork_cache
from nemo_rl.errors import NemoRLError
from nemo_rl.project.landing import write_atomic

# Runs inside a throwaway environment holding only the fork's build requirements.
HOOK = """
import importlib, os, sys
source, out, backend, backend_path = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
os.chdir(source)
sys.path[:0] = [os.path.join(source, p) for p in backend_path]
module, _, attr = backend.partition(":")
hooks = importlib.import_module(module)
for part in filter(None, attr.split(".")):
    hooks = getattr(hooks, part)
print(hooks.prepare_metadata_for_build_wheel(out))
"""


def project_table(pyproject_text: str | None) -> dict:
    """The fork's static [project] table ({} when it has none or it does not parse: setup.py forks)."""
    try:
        table = tomllib.loads(pyproject_text).get("project", {}) if pyproject_text else {}
    except tomllib.TOMLDecodeError:
        return {}
    return table if isinstance(table, dict) else {}


def require_builds(table: dict, distribution: str, where: str) -> None:
    """Several NeMo branches rename nemo-toolkit to nemo-tron: pinning or developing one drops our distribution."""
    name = table.get("name")
    if isinstance(name, str) and canonicalize_name(name) != canonicalize_name(distribution):
        raise NemoRLError(
            f"{where} builds distribution {name!r}, not {distribution!r} (its pyproject.toml renames it)",
            f"pick a commit that still builds {distribution}, or rename the dependency, its [tool.uv.sources] "
            f"entry and [tool.nemo-rl.forks.{distribution}] to {name} first",
        )


@dataclass(frozen=True)
class Metadata:
    name: str
    version: str
    requires: dict[str, str]  # canonical name -> the requirement as the fork writes it (extras' excluded)


def _requirements(lines: list[str]) -> dict[str, str]:
    result = {}
    for line in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker and "extra" in str(req.marker):
            continue  # optional features of the fork, not what `import` needs
        result[canonicalize_name(req.name)] = str(req)
    return result


def read(repo: Path, rev: str) -> Metadata:
    """The fork's metadata at `rev` (already fetched into the cache `repo`). A commit's metadata never changes,
    so it is kept beside the fork cache: a bump reads the old commit's for free."""
    cached = repo / "nemo-rl-metadata" / f"{rev}.json"
    if cached.exists():
        data = json.loads(cached.read_text())
        return Metadata(data["name"], data["version"], data["requires"])
    with fork_cache.using(repo):  # a worktree of the shared cache: one command at a time
        metadata = _read_uncached(repo, rev)
    write_atomic(cached, json.dumps({"name": metadata.name, "version": metadata.version,
                                     "requires": metadata.requires}))
    return metadata


def _read_uncached(repo: Path, rev: str) -> Metadata:
    with tempfile.TemporaryDirectory(prefix="nemo-rl-meta-") as tmp:
        source, out = Path(tmp) / "src", Path(tmp) / "out"
        out.mkdir()
        try:
            git.git(["worktree", "add", "--quiet", "--detach", "--force", str(source), rev], repo=repo)
        except NemoRLError as exc:
            raise NemoRLError(f"cannot check out {rev[:12]} to read its metadata: {exc.what.splitlines()[0]}",
                              "check that the fork serves every blob of that commit (mirrors may lack large files)"
                              ) from exc
        try:
            return _build_metadata(source, out, rev)
        finally:
            shutil.rmtree(source, ignore_errors=True)
            git.git(["worktree", "prune"], repo=repo, check=False)


def _build_metadata(source: Path, out: Path, rev: str) -> Metadata:
    try:
        build = tomllib.loads((source / "pyproject.toml").read_text()).get("build-system", {}) \
            if (source / "pyproject.toml").exists() else {}
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise NemoRLError(f"the fork's pyproject.toml at {rev[:12]} does not parse: {exc}",
                          "pick another commit, or fix the fork") from exc
    requires = build.get("requires", ["setuptools>=40.8.0"])
    backend = build.get("build-backend", "setuptools.build_meta:__legacy__")
    with_args = [arg for req in requires for arg in ("--with", req)]
    try:
        result = uv.uv(["run", "--no-project", "--isolated", "--quiet", "--python", sys.executable, *with_args,
                        "python", "-c", HOOK, str(source), str(out), backend, *build.get("backend-path", [])],
                       cwd=source)
    except NemoRLError as exc:
        raise NemoRLError(f"the fork's build backend could not produce metadata at {rev[:12]}",
                          f"read its output:\n{exc.what}") from exc
    dist_info = out / result.stdout.strip().splitlines()[-1]
    message = Parser().parsestr((dist_info / "METADATA").read_text())
    return Metadata(message["Name"], message["Version"], _requirements(message.get_all("Requires-Dist") or []))


@dataclass(frozen=True)
class Drift:
    added: list[str]
    removed: list[str]
    changed: list[tuple[str, str]]
    uncovered: list[str]  # added requirements our declared entry does not name

    def lines(self, distribution: str) -> list[str]:
        lines = [f"  requirements (the fork's own metadata): {len(self.added)} added, {len(self.removed)} removed, "
                 f"{len(self.changed)} changed"]
        lines += [f"    + {r}{'   NOT COVERED' if canonicalize_name(Requirement(r).name) in self.uncovered else ''}"
                  for r in self.added]
        lines += [f"    - {r}" for r in self.removed]
        lines += [f"    ~ {old} -> {new}" for old, new in self.changed]
        if self.uncovered:
            lines.append(f"  not covered by [[tool.uv.dependency-metadata]] {distribution}: {', '.join(self.uncovered)}"
                         f" - if the fork imports them, add them to that entry's requires-dist in pyproject.toml, "
                         f"relock, then `nemo-rl deps verify {distribution}`")
        return lines


def drift(old: Metadata, new: Metadata, declared: dict | None) -> Drift:
    covered = {canonicalize_name(Requirement(r).name) for r in (declared or {}).get("requires-dist", [])}
    added_names = sorted(new.requires.keys() - old.requires.keys())
    added = [new.requires[n] for n in added_names]
    removed = [old.requires[n] for n in sorted(old.requires.keys() - new.requires.keys())]
    changed = [(old.requires[n], new.requires[n]) for n in sorted(old.requires.keys() & new.requires.keys())
               if old.requires[n] != new.requires[n]]
    # without a declared entry uv locks the fork's own metadata, so nothing can be left uncovered
    uncovered = [n for n in added_names if n not in covered] if declared is not None else []
    return Drift(added, removed, changed, uncovered)
