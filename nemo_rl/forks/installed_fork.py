"""The installed fork against uv.lock."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from nemo_rl import uv, values
from nemo_rl.errors import NemoRLError
from nemo_rl.extras import Installed
from nemo_rl.forks import declared, lock_markers, metadata_check
from nemo_rl.project import installed, lockfile
from nemo_rl.project.model import Project


@dataclass(frozen=True)
class Problem:
    # "another commit", "another version", "requirements differ", "not locked", "requirement missing", "unreadable"
    kind: str
    what: str
    fix: str

    def __str__(self) -> str:
        return f"{self.what}: {self.fix}"


def problems(project: Project, env: Path, distribution: str, left_out: Iterable[str] = (),
             dists: Mapping[str, Installed] | None = None) -> list[Problem]:
    """How `distribution` in `env` differs from uv.lock (`left_out`: left out on purpose; `dists`: `env`'s
    distributions, if read)."""
    dists = installed.distributions(env) if dists is None else dists
    name = canonicalize_name(distribution)
    dist = dists.get(name)
    if dist is None:
        return []
    try:
        lock = project.lock
        deltas = metadata_check.derived(project, distribution)
        extra = next((e for e, names in project.optional_dependencies.items() if name in names), "mcore")
    except NemoRLError as exc:
        return [Problem("unreadable", f"{distribution} cannot be compared with uv.lock: {exc.what}",
                        exc.remedy or "fix pyproject.toml and uv.lock as the message says")]
    if dist.version is None:  # guard: installed-unreadable-metadata-is-reinstalled
        return [_unreadable(distribution, extra)]
    # the fork's own extras are never installed by it: their requirements' markers fail with extra = ""
    parsed = {line: requirement for line in dist.requires if (requirement := _parsed(line))}
    own = declared.Declares(dist.version, None, tuple(line for line in dist.requires if line in parsed))
    want = declared.derive(distribution, own, deltas).requires_dist if deltas is not None else own.requires_dist  # guard: installed-the-drop-add-lists-applied
    sync = f"run `{uv.sync_command(extra)}`"
    relock = f"run `nemo-rl deps patches {distribution}`, then `{uv.sync_command(extra)}`"
    package = lock_markers.one(lock.get("package"), name)
    if package is None:
        return [Problem("not locked", f"{distribution} is installed but uv.lock locks no {distribution}",
                        f"run `uv lock`, then `{uv.sync_command(extra)}`")]
    source = package.get("source")
    locked_commit = lockfile.LockedPackage.of(name, None, source if isinstance(source, dict) else {}).commit
    if dist.commit != locked_commit:  # guard: installed-the-locked-commit
        shown = dist.commit[:12] if dist.commit else "no git commit record"
        return [Problem("another commit", f"{distribution} is installed from {shown}, uv.lock pins "
                        f"{locked_commit[:12] if locked_commit else 'no commit'}", sync)]
    result = []
    # without a derived entry uv locks the fork's own metadata: a version that differs was written by hand
    cause = ("its [[tool.uv.dependency-metadata]] entry" if deltas is not None else  # guard: no-entry-status-names-no-entry-that-does
             "uv.lock's [[package]], edited by hand,")
    if dist.version != package.get("version"):  # guard: installed-version-against-the-lock
        result.append(Problem("another version", f"{distribution} {dist.version} is installed but uv.lock says "
                              f"{package.get('version')} ({cause} is not what the fork builds)", relock))
    markers = _markers(env)
    # what uv.lock installs here, then the environment held against it
    skipped = {canonicalize_name(n) for n in left_out}  # guard: installed-what-an-environment-leaves-out
    depends = lock_markers.locked(package.get("dependencies"), markers)
    requirements = [parsed.get(line) or Requirement(line) for line in want]
    wanted_pairs = lock_markers.required(requirements, markers)
    extras_need = {(dep, option): lock_markers.locked(lock_markers.optional(lock, dep, option), markers)
                   for dep, option in sorted(depends) if option and dep not in skipped}
    pulled_in = lock_markers.closure(lock, depends, markers, skipped | {name})
    want_here = [r for r in requirements if lock_markers._evaluate(r.marker, markers)]  # guard: installed-a-marker-that-excludes-the
    entry = lock_markers.one(lock_markers.manifest(lock, "dependency-metadata"), name)
    if entry is not None and isinstance(entry.get("requires-dist", []), list):
        # as sets: a requirement listed twice (megatron-core's setup.py lists torch in two lists) is one
        have = {lock_markers.written(r) for r in filter(None, map(_parsed, entry.get("requires-dist", [])))
                if lock_markers._evaluate(r.marker, markers)}
        wanted = {lock_markers.written(r) for r in want_here}  # guard: installed-fork-a-requirement-listed
        changes = [f"+{r}" for r in sorted(wanted - have)] + [f"-{r}" for r in sorted(have - wanted)]
        if changes:  # guard: installed-requirements-against-the-lock
            result.append(Problem("requirements differ", f"the installed {distribution} and uv.lock's entry for it "
                                  f"differ ({', '.join(changes)}: + only the fork, - only the entry)", relock))
    unlocked = sorted(wanted_pairs - depends)
    shown = ", ".join(map(lock_markers.spelled, unlocked))
    if unlocked and entry is None:  # guard: installed-the-fork-s-own-requirements
        result.append(Problem("not locked", f"the installed {distribution} requires {shown}, which uv.lock does "
                              f"not lock for it", f"run `uv lock --upgrade-package {distribution}`, then "
                              f"`{uv.sync_command(extra)}`"))
    elif unlocked and not any(p.kind == "requirements differ" for p in result):  # guard: installed-the-lock-omits-beside-an-entry
        # uv locked the entry, not the fork: `uv lock` and `uv sync` keep the omission, a relock does not
        result.append(Problem("not locked", f"the lock omits {shown}, which {distribution} requires", relock))
    required = {n for n, _ in depends | wanted_pairs if (n, "") not in unlocked} - skipped
    for missing in sorted(n for n in required if n not in dists):  # guard: installed-a-locked-requirement-missing
        result.append(Problem("requirement missing", f"{missing}, which {distribution} requires, is not installed",
                              sync))
    broken = sorted(n for n in {*required, *pulled_in} if n in dists and dists[n].version is None)
    result += [_unreadable(n, extra) for n in broken]  # guard: installed-an-unreadable-requirement-is-reinstalled
    for requirement in want_here:
        if canonicalize_name(requirement.name) not in skipped:
            result += _refused(requirement, dists, distribution, "or widen ")
    for dep, wanted in sorted(pulled_in.items()):
        for requirement in filter(None, map(_parsed, dists[dep].requires if dep in dists else ())):
            if not any(lock_markers._evaluate(requirement.marker, markers | {"extra": o}) for o in wanted):  # guard: installed-closure-an-extra-s
                continue
            result += _refused(requirement, dists, f"{dep} {dists[dep].version} (which {distribution} pulls in)", "")
    for (dep, option), needs in extras_need.items():
        for missing in sorted({n for n, _ in needs} - skipped):
            if missing not in dists:  # guard: installed-an-extra-s-requirements
                result.append(Problem("requirement missing", f"{missing}, which {dep}[{option}] (a requirement of "
                                      f"{distribution}) requires, is not installed", sync))
    return result


def _refused(requirement: Requirement, dists: Mapping[str, Installed], wanted_by: str, widen: str) -> list[Problem]:
    name = canonicalize_name(requirement.name)
    dist = dists.get(name)
    if dist is None or dist.version is None or not requirement.specifier or _allows(requirement, dist):
        return []
    return [Problem("version refused", f"{name} {dist.version} is installed but {wanted_by} requires "
                    f"{name}{requirement.specifier}", f"remove {widen}any [tool.uv] override-dependencies entry for "
                    f"{name}, run `uv lock --upgrade-package {name}`, then sync")]


def _unreadable(name: str, extra: str) -> Problem:
    return Problem("unreadable", f"the installed {name}'s metadata cannot be read",
                   f"run `uv cache clean {name} && {uv.sync_command(extra)} --reinstall-package {name}`")


def _allows(requirement: Requirement, dist: Installed) -> bool:
    """Whether the installed version meets the specifier; one packaging cannot read does not."""
    try:
        version = Version(str(dist.version))
    except InvalidVersion:
        return False
    return SpecifierSet(str(requirement.specifier), prereleases=version.is_prerelease).contains(version)


def _parsed(line: object) -> Requirement | None:
    try:
        return Requirement(str(line))
    except InvalidRequirement:
        return None


def _markers(env: Path) -> dict[str, str]:
    markers: dict[str, str] = {key: str(value) for key, value in default_environment().items()}
    try:
        text = values.read_plain_file(env / "pyvenv.cfg").decode()  # guard: reader-pyvenv-cfg
    except (OSError, UnicodeDecodeError):
        text = ""
    if match := re.search(r"^(?:version_info|version)\s*=\s*(\d+)\.(\d+)(\.\d+)?", text, re.MULTILINE):  # guard: installed-the-environment-s-own-python
        major, minor, micro = match.group(1), match.group(2), match.group(3) or ".0"
        markers |= {"python_version": f"{major}.{minor}", "python_full_version": f"{major}.{minor}{micro}"}
    return markers | {"extra": ""}
