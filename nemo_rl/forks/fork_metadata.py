"""What a fork itself declares at a commit, asked of its own build backend (PEP 517
prepare_metadata_for_build_wheel), not parsed from setup.py or requirements files by hand.

uv locks our [[tool.uv.dependency-metadata]] entry instead of this, so a bump compares the two.
"""

from __future__ import annotations

import json
import shutil
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from nemo_rl import git, uv
from nemo_rl.errors import NemoRLError
from nemo_rl.forks import fork_cache, git_history, scratch
from nemo_rl.project import lockfile
from nemo_rl.project.landing import write_atomic

# Runs inside a throwaway environment holding only the fork's build requirements.
HOOK = """
import importlib, os, sys
hook, source, out, backend, backend_path = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
os.chdir(source)
sys.path[:0] = [os.path.join(source, p) for p in backend_path]
module, _, attr = backend.partition(":")
hooks = importlib.import_module(module)
for part in filter(None, attr.split(".")):
    hooks = getattr(hooks, part)
print(getattr(hooks, hook)(out))
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
    requires_python: str | None = None


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
    return read_all(repo, [rev])[0]


def read_all(repo: Path, revs: list[str]) -> list[Metadata]:
    """`read` of each of `revs`; those not cached are built in one scratch checkout moved from commit to commit
    (git rewrites only the files that differ)."""
    return [Metadata(d["name"], d["version"], d["requires"], d.get("requires_python"))
            for d in _cached(repo, revs, METADATA, "prepare_metadata_for_build_wheel")]


def shipped_files(repo: Path, rev: str) -> frozenset[str]:
    """The files the distribution built from `rev` installs: the file list of the wheel the fork's own build
    backend makes (what `uv sync` installs), cached per commit like the metadata."""
    return frozenset(_cached(repo, [rev], "files.json", "build_wheel")[0]["files"])


def placeholders(repo: Path, rev: str, what: str = "wheel") -> list[str]:
    """Files of `rev` whose blobs the fork's server lacked: the wheel (or the metadata) was built with them empty."""
    suffix, hook = ("files.json", "build_wheel") if what == "wheel" else (METADATA, "prepare_metadata_for_build_wheel")
    return list(_cached(repo, [rev], suffix, hook)[0].get("placeholders", []))


# v2 adds Requires-Python (the declared entry is derived from it): older cached answers lack it, so are not read
METADATA = "metadata-v2.json"


def _cache_path(repo: Path, rev: str, suffix: str) -> Path:
    return repo / "nemo-rl-metadata" / f"{rev}.{suffix}"


def uncached(repo: Path, revs: list[str]) -> list[str]:
    """Those of `revs` whose metadata `read_all` would build (check out) rather than find cached."""
    return [rev for rev in revs if not _cache_path(repo, rev, METADATA).exists()]


def _cached(repo: Path, revs: list[str], suffix: str, hook: str) -> list[dict]:
    paths = {rev: _cache_path(repo, rev, suffix) for rev in revs}
    found = {rev: json.loads(path.read_text()) for rev, path in paths.items() if path.exists()}
    for rev, data in _run_hook(repo, [rev for rev in dict.fromkeys(revs) if rev not in found], hook):
        write_atomic(paths[rev], json.dumps(data))
        found[rev] = data
    return [found[rev] for rev in revs]


def _check_out(repo: Path, rev: str, source: Path, moving: bool) -> list[str]:
    """Make `source` hold exactly `rev`'s tree; the placeholders it holds for blobs no server has. Moving an
    existing checkout rewrites what differs and removes what the last build wrote; anything else starts over."""
    if moving:
        try:
            git.git(["checkout", "--quiet", "--detach", "--force", rev], repo=source)
            git.git(["clean", "-ffdxq"], repo=source)
            return []
        except NemoRLError:
            pass
    # Worktrees are made and pruned under the cache's lock (their names in the repository would race); the
    # build itself runs unlocked, beside other work in the same cache.
    with fork_cache.using(repo):
        shutil.rmtree(source, ignore_errors=True)
        git.git(["worktree", "prune"], repo=repo, check=False)
        try:
            git.git(["worktree", "add", "--quiet", "--detach", "--force", str(source), rev], repo=repo)
            return []
        except NemoRLError:
            # A mirror without large files: a wheel's file list and the metadata depend on the tree's shape
            # and the build files, not on every byte, so what the mirror cannot serve becomes an empty
            # placeholder, and the answer says which (a build file among them fails the build, as it should).
            shutil.rmtree(source, ignore_errors=True)
            git.git(["worktree", "prune"], repo=repo, check=False)
            return git_history.checkout_allowing_missing(repo, rev, source, ["fork", "upstream"])


def _run_hook(repo: Path, revs: list[str], hook: str) -> Iterator[tuple[str, dict]]:
    if not revs:
        return
    try:  # the trees' blobs in one request: git's own checkout of a blob-less tree asks again and again
        git_history.fetch_blobs(repo, "fork", git_history.missing_blobs(repo, revs))
        # the trees and what a build writes beside them (a wheel: a copy and an archive)
        size = max(git_history.tree_size(repo, rev) for rev in revs) * (3 if hook == "build_wheel" else 2)
    except NemoRLError:
        size = None  # a server without some blobs (placeholders follow): their sizes are unknown
    with scratch.directory(size) as tmp:
        source = tmp / "src"
        placeholders: list[str] = []
        try:
            for number, rev in enumerate(revs):
                # a checkout with placeholders is never moved: the next commit starts from a clean worktree
                placeholders = _check_out(repo, rev, source, moving=number > 0 and not placeholders)
                out = tmp / f"out-{number}"
                out.mkdir()
                produced = out / _backend(source, out, rev, hook)
                if hook == "build_wheel":
                    with zipfile.ZipFile(produced) as wheel:
                        yield rev, {"files": sorted(n for n in wheel.namelist() if ".dist-info/" not in n),
                                    "placeholders": placeholders}
                    continue
                message = Parser().parsestr((produced / "METADATA").read_text())
                yield rev, {"name": message["Name"], "version": message["Version"],
                            "requires": _requirements(message.get_all("Requires-Dist") or []),
                            "requires_python": message["Requires-Python"],
                            "placeholders": placeholders}
        finally:
            shutil.rmtree(source, ignore_errors=True)
            with fork_cache.using(repo):
                git.git(["worktree", "prune"], repo=repo, check=False)


def _backend(source: Path, out: Path, rev: str, hook: str) -> str:
    """Run PEP 517 `hook` of the fork's backend at `source` in a throwaway environment of its build requirements;
    the name of what it wrote into `out`."""
    try:
        build = tomllib.loads((source / "pyproject.toml").read_text()).get("build-system", {}) \
            if (source / "pyproject.toml").exists() else {}
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise NemoRLError(f"the fork's pyproject.toml at {rev[:12]} does not parse: {exc}",
                          "pick another commit, or fix the fork") from exc
    requires = build.get("requires", ["setuptools>=40.8.0"])
    backend = build.get("build-backend", "setuptools.build_meta:__legacy__")
    if hook == "build_wheel" and backend.startswith("setuptools"):
        requires = [*requires, "wheel"]  # what setuptools' get_requires_for_build_wheel asks for on older versions
    with_args = [arg for req in requires for arg in ("--with", req)]
    try:
        result = uv.uv(["run", "--no-project", "--isolated", "--quiet", "--python", sys.executable, *with_args,
                        "python", "-c", HOOK, hook, str(source), str(out), backend, *build.get("backend-path", [])],
                       cwd=source)
    except NemoRLError as exc:
        what = "produce metadata" if hook != "build_wheel" else "build a wheel"
        raise NemoRLError(f"the fork's build backend could not {what} at {rev[:12]}",
                          f"read its output:\n{exc.what}") from exc
    return result.stdout.strip().splitlines()[-1]


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


def drift(old: Metadata, new: Metadata, declared: lockfile.DeclaredMetadata | None) -> Drift:
    covered = {canonicalize_name(Requirement(r).name) for r in (declared.requires_dist if declared else ())}
    added_names = sorted(new.requires.keys() - old.requires.keys())
    added = [new.requires[n] for n in added_names]
    removed = [old.requires[n] for n in sorted(old.requires.keys() - new.requires.keys())]
    changed = [(old.requires[n], new.requires[n]) for n in sorted(old.requires.keys() & new.requires.keys())
               if old.requires[n] != new.requires[n]]
    # without a declared entry uv locks the fork's own metadata, so nothing can be left uncovered
    uncovered = [n for n in added_names if n not in covered] if declared is not None else []
    return Drift(added, removed, changed, uncovered)
