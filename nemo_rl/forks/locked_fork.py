"""uv.lock's [[package]] of a fork held against what it should lock."""

from __future__ import annotations

from collections import Counter

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from nemo_rl.forks import declared, lock_markers, root_edges


def locked_differences(lock: dict, derived: declared.Entry, derived_entry: bool = True,
                       declared_extras: tuple[tuple[str, tuple[str, ...]], ...] = ()) -> list[tuple[str, str, str]]:
    """The fork in uv.lock against the derived entry."""
    name = canonicalize_name(derived.name)
    packages = lock_markers.named(lock.get("package"), name)
    if len(packages) != 1:
        return [("entries", "one", str(len(packages)))]
    package = packages[0]
    requirements = [Requirement(r) for r in derived.requires_dist]
    manifest = lock_markers.manifest(lock, "dependency-metadata")
    recorded = lock_markers.named(manifest, name)
    dependencies = package.get("dependencies")
    # sampled at each version the compared markers name, so a bound inside a minor version is seen
    envs = lock_markers.environments(lock, [*(r.marker for r in requirements), *(
        d.get("marker") for d in (dependencies if isinstance(dependencies, list) else []) if isinstance(d, dict)), *(
        line for e in recorded for line in (e.get("requires-dist") or []))])
    result = []
    if not envs:  # guard: samples-none-meeting-the-lock-is-a
        result.append(("supported environments", "at least one platform and Python the check can sample",
                       f"none meets uv.lock's supported-markers {lock.get('supported-markers')!r:.160}: "
                       "nothing could be compared"))
    what = "the entry" if derived_entry else "[declares]"
    if derived.version is not None and str(package.get("version")) != derived.version:
        result.append(("version", derived.version, str(package.get("version"))))
    # locked() cannot tell whether uv installs a dependency whose marker does not evaluate (or names the kernel)
    undecided = {canonicalize_name(r.name) for r in requirements if not lock_markers.decides(r.marker, envs)}
    found = lock_markers.unevaluable(dependencies, envs)
    conflicts = [f"{n} (marker {m!r:.80})" for n, m in found if lock_markers.conflict_extra(m)]  # guard: locked-marker-uv-s-conflict-extras-named
    unreadable = [f"{n} (marker {m!r:.80})" for n, m in found if not lock_markers.conflict_extra(m)  # guard: locked-marker-the-fork-s-own-unevaluable
                  and (n not in undecided or lock_markers.names_extra(m))]
    if unreadable:  # guard: locked-marker-one-that-cannot-be
        result.append(("dependencies", "markers that decide in every environment the lock supports",
                       f"{', '.join(unreadable)}: not what {what} locks"))
    result += lock_markers.hand_markers("dependencies", dependencies)
    if conflicts:
        result.append(("dependencies", "no marker of [tool.uv] conflicts", f"{', '.join(conflicts)}: take the "
                       "fork's dependencies out of the conflict in pyproject.toml"))
    extras = package.get("optional-dependencies")
    # the derived entry declares no extras: uv locks none, so one here is pasted and installs its list
    if extras and derived_entry:  # guard: no-entry-the-fork-s-own-extras-are
        result.append(("optional-dependencies", "none (the derived entry declares no extras)",
                       ", ".join(sorted(map(str, extras))) if isinstance(extras, dict) else repr(extras)[:80]))
    missing, unexpected = lock_markers.gaps(requirements, dependencies, envs)
    if missing:  # guard: derived-the-locked-package-follows-the
        overridden = sorted({m.split("[")[0].split(" ")[0] for m in missing} & _overrides(lock).keys())  # guard: locked-dependency-an-override-that
        cause = (f" (pyproject.toml [tool.uv] override-dependencies replaces {', '.join(overridden)}: edit it, "
                 "then run `uv lock`)" if overridden else "")
        result.append(("dependencies", f"{', '.join(missing)} among them", f"missing{cause}"))
    if unexpected:
        result.append(("dependencies", f"only what {what} requires", f"also {', '.join(unexpected)}"))
    result += _version_gaps(lock, package.get("dependencies"), requirements, envs)
    if not derived_entry:  # guard: no-entry-no-manifest-entry-required
        return result + _extra_gaps(extras, declared_extras, envs, root_edges.asked_extras(lock, name))  # guard: extras-a-locked-extra-is-held-against
    if len(recorded) != 1:
        return [*result, ("[[manifest.dependency-metadata]] entries", "one", str(len(recorded)))]
    entry = recorded[0]
    if entry.get("version") != derived.version:  # guard: derived-the-lock-s-manifest-version
        result.append(("[[manifest.dependency-metadata]] version", str(derived.version), str(entry.get("version"))))
    lines = entry.get("requires-dist", [])
    try:
        parsed = [Requirement(str(line)) for line in lines] if isinstance(lines, list) else None
    except ValueError:
        parsed = None
    if parsed is None:
        result.append(("[[manifest.dependency-metadata]] requires-dist", "a list of requirements", repr(lines)[:80]))
        return result
    shown: dict[tuple[str, str], str] = {}
    have = Counter(_keyed(r, envs, shown) for r in parsed)
    want = Counter(_keyed(r, envs, shown) for r in requirements)
    if have != want:  # guard: derived-the-lock-s-manifest-requires
        missing_lines = sorted(shown[k] for k in (want - have).elements())
        extra_lines = sorted(shown[k] for k in (have - want).elements())
        result.append(("[[manifest.dependency-metadata]] requires-dist", "the derived list", "; ".join(filter(None, [
            f"missing {', '.join(missing_lines)}" if missing_lines else "",
            f"not derived {', '.join(extra_lines)}" if extra_lines else ""]))))
    return result


def _extra_gaps(locked: object, declared_extras: tuple[tuple[str, tuple[str, ...]], ...],
                envs: list[lock_markers.Environment], asked: set[str]) -> list[tuple[str, str, str]]:
    if locked is not None and not isinstance(locked, dict):
        return [("optional-dependencies", "a table of the fork's extras", repr(locked)[:80])]
    wanted = {name: [Requirement(r) for r in lines] for name, lines in declared_extras}
    tables = dict(locked or {})
    present = {canonicalize_name(str(n)) for n in tables}
    tables.update({extra: [] for extra in sorted(asked & wanted.keys()) if extra not in present})  # guard: extras-an-asked-extra-missing-altogether
    result = []
    for name, dependencies in sorted(tables.items(), key=lambda item: str(item[0])):
        extra = canonicalize_name(str(name))
        if extra not in wanted:
            result.append((f"optional-dependencies {name}", "only the extras the fork declares ([declares] extras)",  # guard: extras-an-extra-the-fork-does-not
                           "an extra the fork does not declare"))
            continue
        result += lock_markers.hand_markers(f"optional-dependencies {name}", dependencies)
        missing, unexpected = lock_markers.gaps(wanted[extra], dependencies, envs, extra=extra)
        if missing:
            result.append((f"optional-dependencies {name}", f"{', '.join(missing)} among them", "missing"))
        if unexpected:
            result.append((f"optional-dependencies {name}", f"only what the fork's extra {extra} requires",
                           f"also {', '.join(unexpected)}"))
    return result


def _version_gaps(lock: dict, dependencies: object, requirements: list, envs: list[lock_markers.Environment]
                  ) -> list[tuple[str, str, str]]:
    packages: dict[str, list[str]] = {}
    for p in lock.get("package", []):
        if isinstance(p, dict) and p.get("version") is not None:
            packages.setdefault(canonicalize_name(str(p.get("name"))), []).append(str(p.get("version")))
    named: dict[str, list[dict]] = {}
    for d in dependencies if isinstance(dependencies, list) else []:
        if isinstance(d, dict):
            named.setdefault(canonicalize_name(str(d.get("name"))), []).append(d)  # guard: locked-version-every-locked-entry-of-a
    overrides = _overrides(lock)
    result = []
    checked: set[tuple[str, str, str]] = set()
    for requirement, item in ((r, d) for r in requirements for d in named.get(canonicalize_name(r.name), [])):
        name = canonicalize_name(requirement.name)
        marker = lock_markers._marker(item["marker"]) if item.get("marker") else None
        applies = any(lock_markers._evaluate(requirement.marker, e) and lock_markers._evaluate(marker, e) for e in envs)
        if not requirement.specifier or not applies or not packages.get(name):
            continue
        versions = packages[name]
        version = str(item["version"]) if item.get("version") is not None and len(versions) > 1 else versions[0]  # guard: locked-version-the-one-the-fork-s
        if (name, str(requirement.specifier), version) in checked:
            continue
        checked.add((name, str(requirement.specifier), version))
        try:
            parsed = Version(version)
        except InvalidVersion:
            result.append((f"locked {name}", f"a version allowed by {requirement.specifier}", version))
            continue
        if SpecifierSet(str(requirement.specifier), prereleases=parsed.is_prerelease).contains(parsed):  # guard: locked-version-held-against-the
            continue
        cause = (f" (pyproject.toml [tool.uv] override-dependencies sets {name}{overrides[name]}: remove it or "  # guard: locked-version-an-override-named-as-the
                 f"widen it to allow {requirement.specifier}, then run `uv lock`)" if name in overrides else
                 f" (run `uv lock --upgrade-package {name}`)")
        result.append((f"locked {name}", f"{name}{requirement.specifier}", f"{version}{cause}"))
    return result


def _overrides(lock: dict) -> dict[str, str]:
    found = lock_markers.manifest(lock, "overrides")
    return {canonicalize_name(str(o.get("name"))): str(o.get("specifier") or "") for o in
            (found if isinstance(found, list) else []) if isinstance(o, dict)}


def _keyed(requirement, envs: list[lock_markers.Environment], shown: dict[tuple[str, str], str]) -> tuple[str, str]:
    written = lock_markers.written(requirement)
    key = (written, lock_markers.signature(requirement, envs))  # guard: lock-the-manifest-s-markers-compared
    shown.setdefault(key, f"{written}; {requirement.marker}" if requirement.marker is not None else written)
    return key
