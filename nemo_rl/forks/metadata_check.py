"""The project's side of the derived [[tool.uv.dependency-metadata]] entries (declared.py): read the deltas and
the entry from pyproject.toml and the recorded declarations from patches/<dist>/index.toml, and say where they
disagree. Offline; `deps patches`, `deps bump` and `deps status` share it."""

from __future__ import annotations

from pathlib import Path

from nemo_rl.forks import declared, lock_markers
from nemo_rl.forks.record_files import Index
from nemo_rl.project import lockfile

Problem = tuple[str, str, str, str]  # (file, field, expected, found)


def deltas(project: Path, distribution: str) -> declared.Deltas:
    path = project / "pyproject.toml"
    forks = lockfile.table(lockfile.tool_tables(project)[1].get("forks"), "[tool.nemo-rl.forks]", path)
    table = lockfile.table(forks.get(distribution), f"[tool.nemo-rl.forks.{distribution}]", path)
    return declared.deltas_from_table(table, distribution)


def entry(project: Path, distribution: str) -> declared.Entry | None:
    return declared.entry_from_tables(lockfile.tool_tables(project)[0].get("dependency-metadata", []), distribution)


def recorded(index: Index | None, distribution: str) -> declared.Declares | None:
    where = f"patches/{distribution}/index.toml"
    return declared.declares_from_table(index.declares, where, distribution) if index is not None else None


def derives(project: Path, distribution: str) -> bool:
    """declared.derives, of the entry and the deltas `project`'s pyproject.toml holds."""
    return declared.derives(entry(project, distribution), deltas(project, distribution))


def problems(project: Path, fork: lockfile.Fork, index: Index | None) -> list[Problem]:
    """Where pyproject's entry is not the one derived from the recorded declarations, or uv.lock's fork is not
    what they say (index at the pin only: a stale index is the records' problem, reported there). A fork without
    a derived entry is locked from the metadata uv builds itself: its [[package]] is compared with [declares]."""
    if index is None or index.pinned != fork.rev:
        return []
    dist = fork.distribution
    declares = recorded(index, dist)
    rel = f"patches/{dist}/index.toml"
    if declares is None:
        return [(rel, "declares", f"what {dist} declares at {fork.rev[:12]} (its version and requirements)",
                 "not recorded")]
    # a pin moved (index and pyproject) with [declares] kept: what the fork declares at the new commit is unread
    stale = [] if declares.commit == fork.rev else [
        (rel, "declares commit", f"{fork.rev} (the pin: [declares] is what the fork declares there)",
         declares.commit or "not recorded")]
    lock_path = project / "uv.lock"
    if not derives(project, dist):
        # a hand edit of uv.lock stands through `uv lock --check`: uv does not rebuild a git package's metadata
        own = declared.Entry(dist, declares.version, declares.requires_python, declares.requires_dist)
        return stale + ([("uv.lock", f"[[package]] {dist} {field}", f"{expected} ({rel} [declares])", found)
                         for field, expected, found in locked_differences(lockfile.load_toml(lock_path), own,
                                                                          derived_entry=False)]
                        if lock_path.exists() else [])
    found_deltas = deltas(project, dist)
    derived = declared.derive(dist, declares, found_deltas)
    where = f"[[tool.uv.dependency-metadata]] {dist}"
    result = stale + [("pyproject.toml", f"{where} {field}", f"{expected} (derived from {rel} [declares] and the "
                       f"drop/add lists)", found)
                      for field, expected, found in declared.differences(entry(project, dist), derived)]
    result += [("pyproject.toml", f"[tool.nemo-rl.forks.{dist}] drop {name}",
                f"a requirement {dist} declares at {fork.rev[:12]}",
                "not declared by the fork: the drop is unnecessary, remove it")
               for name in declared.unnecessary_drops(declares, found_deltas)]
    if lock_path.exists():
        result += [("uv.lock", f"[[package]] {dist} {field}", f"{expected} (the derived entry)", found)
                   for field, expected, found in locked_differences(lockfile.load_toml(lock_path), derived)]
    return result


def locked_differences(lock: dict, derived: declared.Entry, derived_entry: bool = True
                       ) -> list[tuple[str, str, str]]:
    """The fork in uv.lock against the derived entry: its [[package]] (version; the dependencies it installs,
    with their extras, in each environment the lock supports) and the entry uv recorded in
    [[manifest.dependency-metadata]]. uv does not check a git package's locked metadata against the entry, so a
    hand edit of uv.lock would stand. Decided over lock_markers.environments(lock): the same on every machine.
    Without a derived entry (`derived_entry` False, `derived` being what the fork declares) the [[package]] alone:
    uv built the fork's metadata itself, records no manifest entry and locks the fork's own extras."""
    from collections import Counter

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    name = canonicalize_name(derived.name)
    packages = [p for p in lock.get("package", []) if isinstance(p, dict)
                and canonicalize_name(str(p.get("name"))) == name]
    if len(packages) != 1:
        return [("entries", "one", str(len(packages)))]
    package = packages[0]
    requirements = [Requirement(r) for r in derived.requires_dist]
    manifest = lock.get("manifest", {}).get("dependency-metadata", []) if isinstance(lock.get("manifest"), dict) \
        else []
    recorded = [e for e in manifest if isinstance(e, dict) and canonicalize_name(str(e.get("name"))) == name]
    dependencies = package.get("dependencies")
    # sampled at each version the compared markers name: a bound inside a minor version is seen
    envs = lock_markers.environments(lock, [*(r.marker for r in requirements), *(
        d.get("marker") for d in (dependencies if isinstance(dependencies, list) else []) if isinstance(d, dict)), *(
        line for e in recorded for line in (e.get("requires-dist") or []))])
    result = []
    if not envs:  # every comparison below would run over nothing and pass
        result.append(("supported environments", "at least one platform and Python the check can sample",
                       f"none meets uv.lock's supported-markers {lock.get('supported-markers')!r:.160} "
                       "(pyproject.toml [tool.uv] environments): nothing could be compared"))
    what = "the entry" if derived_entry else "[declares]"
    if derived.version is not None and str(package.get("version")) != derived.version:
        result.append(("version", derived.version, str(package.get("version"))))
    # locked() cannot tell whether uv installs a dependency whose marker does not evaluate: unless the fork's own
    # requirement carries such a marker, uv never wrote it, and relocking replaces it; one naming extra uv never
    # writes there at all
    undecided = {canonicalize_name(r.name) for r in requirements if not lock_markers.decides(r, envs)}
    unreadable = [f"{n} (marker {m!r:.80})" for n, m in lock_markers.unevaluable(dependencies, envs)
                  if n not in undecided or lock_markers.names_extra(m)]
    if unreadable:
        result.append(("dependencies", "markers that decide in every environment the lock supports",
                       f"{', '.join(unreadable)}: not what {what} locks"))
    extras = package.get("optional-dependencies")
    # the derived entry declares no extras: uv locks none, so one here is pasted and installs its list
    if extras and derived_entry:
        result.append(("optional-dependencies", "none (the derived entry declares no extras)",
                       ", ".join(sorted(map(str, extras))) if isinstance(extras, dict) else repr(extras)[:80]))
    missing, unexpected = _dependency_gaps(package.get("dependencies"), requirements, envs)
    if missing:
        overridden = sorted({m.split("[")[0].split(" ")[0] for m in missing} & _overrides(lock).keys())
        cause = (f" (pyproject.toml [tool.uv] override-dependencies names {', '.join(overridden)}: an override "
                 f"replaces the fork's requirement, extras and marker with its own; edit it, then run `uv lock`)"
                 if overridden else "")
        result.append(("dependencies", f"{', '.join(missing)} among them", f"missing{cause}"))
    if unexpected:
        result.append(("dependencies", f"only what {what} requires", f"also {', '.join(unexpected)}"))
    result += _version_gaps(lock, package.get("dependencies"), requirements, envs)
    if not derived_entry:
        return result
    if len(recorded) != 1:
        return [*result, ("[[manifest.dependency-metadata]] entries", "one", str(len(recorded)))]
    entry = recorded[0]
    if entry.get("version") != derived.version:
        result.append(("[[manifest.dependency-metadata]] version", str(derived.version), str(entry.get("version"))))
    lines = entry.get("requires-dist", [])
    try:
        parsed = [Requirement(str(line)) for line in lines] if isinstance(lines, list) else None
    except ValueError:  # packaging's InvalidRequirement
        parsed = None
    if parsed is None:
        result.append(("[[manifest.dependency-metadata]] requires-dist", "a list of requirements", repr(lines)[:80]))
        return result
    shown: dict[tuple[str, str], str] = {}
    have = Counter(_keyed(r, envs, shown) for r in parsed)
    want = Counter(_keyed(r, envs, shown) for r in requirements)
    if have != want:
        missing_lines = sorted(shown[k] for k in (want - have).elements())
        extra_lines = sorted(shown[k] for k in (have - want).elements())
        result.append(("[[manifest.dependency-metadata]] requires-dist", "the derived list", "; ".join(filter(None, [
            f"missing {', '.join(missing_lines)}" if missing_lines else "",
            f"not derived {', '.join(extra_lines)}" if extra_lines else ""]))))
    return result


def _dependency_gaps(dependencies: object, requirements: list, envs: list[lock_markers.Environment]
                     ) -> tuple[list[str], list[str]]:
    """(required but not locked, locked but not required): each `name[extra]`, with the first environment it
    differs in when it differs in only some of those where it applies."""
    missing: dict[str, list[str]] = {}
    unexpected: dict[str, list[str]] = {}
    applies: dict[str, int] = {}
    for env in envs:
        want, have = lock_markers.required(requirements, env), lock_markers.locked(dependencies, env)
        for pair in want | have:
            applies[lock_markers.spelled(pair)] = applies.get(lock_markers.spelled(pair), 0) + 1
        for pair in want - have:
            missing.setdefault(lock_markers.spelled(pair), []).append(lock_markers.describe(env))
        for pair in have - want:
            unexpected.setdefault(lock_markers.spelled(pair), []).append(lock_markers.describe(env))

    def shown(found: dict[str, list[str]]) -> list[str]:
        return [name if len(where) == applies[name] else f"{name} (on {where[0]})"
                for name, where in sorted(found.items())]

    return shown(missing), shown(unexpected)


def _version_gaps(lock: dict, dependencies: object, requirements: list, envs: list[lock_markers.Environment]
                  ) -> list[tuple[str, str, str]]:
    """Each locked dependency whose locked version the requirement does not allow. uv checks neither a git
    package's locked metadata nor what an override does to it, so `override-dependencies = ["six<1.16"]` or a
    pasted [[package]] block installs a version the fork's metadata refuses."""
    from packaging.specifiers import SpecifierSet
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version

    packages: dict[str, list[str]] = {}
    for p in lock.get("package", []):
        if isinstance(p, dict) and p.get("version") is not None:  # a source tree's dynamic version: not locked
            packages.setdefault(canonicalize_name(str(p.get("name"))), []).append(str(p.get("version")))
    # every locked entry of a name (one per version the lock forks into), never the last one listed alone
    named: dict[str, list[dict]] = {}
    for d in dependencies if isinstance(dependencies, list) else []:
        if isinstance(d, dict):
            named.setdefault(canonicalize_name(str(d.get("name"))), []).append(d)
    overrides = _overrides(lock)
    result = []
    checked: set[tuple[str, str, str]] = set()
    for requirement, item in ((r, d) for r in requirements for d in named.get(canonicalize_name(r.name), [])):
        name = canonicalize_name(requirement.name)
        marker = lock_markers._marker(item["marker"]) if item.get("marker") else None
        applies = any((requirement.marker is None or lock_markers._evaluate(requirement.marker, e))
                      and (marker is None or lock_markers._evaluate(marker, e)) for e in envs)
        if not requirement.specifier or not applies or not packages.get(name):
            continue  # a requirement not locked at all is _dependency_gaps' to report
        versions = packages[name]
        version = str(item["version"]) if item.get("version") is not None and len(versions) > 1 else versions[0]
        if (name, str(requirement.specifier), version) in checked:
            continue
        checked.add((name, str(requirement.specifier), version))
        try:
            parsed = Version(version)
        except InvalidVersion:
            result.append((f"locked {name}", f"a version allowed by {requirement.specifier}", version))
            continue
        if SpecifierSet(str(requirement.specifier), prereleases=parsed.is_prerelease).contains(parsed):
            continue
        cause = (f" (pyproject.toml [tool.uv] override-dependencies sets {name}{overrides[name]}: remove it or "
                 f"widen it to allow {requirement.specifier}, then run `uv lock`)" if name in overrides else
                 f" (run `uv lock --upgrade-package {name}`)")
        result.append((f"locked {name}", f"{name}{requirement.specifier}",
                       f"{version}{cause}"))
    return result


def _overrides(lock: dict) -> dict[str, str]:
    """[tool.uv] override-dependencies as uv records them in uv.lock's [manifest]: name -> specifier."""
    from packaging.utils import canonicalize_name

    manifest = lock.get("manifest")
    found = manifest.get("overrides") if isinstance(manifest, dict) else None
    return {canonicalize_name(str(o.get("name"))): str(o.get("specifier") or "") for o in
            (found if isinstance(found, list) else []) if isinstance(o, dict)}


def _keyed(requirement, envs: list[lock_markers.Environment], shown: dict[tuple[str, str], str]
           ) -> tuple[str, str]:
    """A requirement as compared with uv's manifest: its spelling (_spelled) and where its marker applies (uv
    rewrites markers: python_version as python_full_version); `shown` gets the line a report names."""
    spelled = _spelled(str(requirement))
    key = (spelled, lock_markers.signature(requirement, envs))
    shown.setdefault(key, f"{spelled}; {requirement.marker}" if requirement.marker is not None else spelled)
    return key


def lock_follows(project: Path, fork: lockfile.Fork, declares: declared.Declares) -> bool:
    """Whether `project`'s uv.lock locks the fork as the entry derived from `declares` says (without a derived
    entry: as `declares` says), from the source pyproject.toml names."""
    derived = declared.derive(fork.distribution, declares, deltas(project, fork.distribution))
    path = project / "uv.lock"
    if not path.exists():
        return True
    package = lockfile.locked_packages(project).get(fork.distribution)
    return not (package and package.other_source(fork)) and not locked_differences(
        lockfile.load_toml(path), derived, derives(project, fork.distribution))


def _spelled(line: str) -> str:
    """A requirement as uv spells it in its manifest: a canonical name, extras and specifiers in order. Its marker
    is left out: uv rewrites markers (python_version as python_full_version); _keyed compares where it applies."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    requirement = Requirement(line)
    extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
    return f"{canonicalize_name(requirement.name)}{extras}{requirement.specifier}"


def write_derived(project: Path, distribution: str, declares: declared.Declares
                  ) -> tuple[declared.Entry | None, declared.Entry | None, list[str]]:
    """Write the entry derived from `declares` into `project`'s pyproject.toml (tomlkit: comments stay), and
    remove the drops the fork no longer needs (they change nothing); (the entry before, the entry written or None
    when it did not change, the drops removed)."""
    import tomlkit

    from nemo_rl.project.state_dir import write_atomic

    before = entry(project, distribution)
    path = project / "pyproject.toml"
    doc = tomlkit.parse(lockfile.read_text(path))
    derived, changed, unneeded = declared.write_derived(doc, distribution, declares, deltas(project, distribution))
    if changed or unneeded:
        write_atomic(path, tomlkit.dumps(doc))
    return before, derived if changed else None, unneeded


def entry_changes(before: declared.Entry | None, after: declared.Entry) -> list[str]:
    """The report's lines for a rewritten entry: version, Requires-Python, requirements added and removed."""
    old = before or declared.Entry(after.name, None, None, ())
    lines = [f"    {field}: {a} -> {b}" for field, a, b in (("version", old.version, after.version),
                                                           ("requires-python", old.requires_python,
                                                            after.requires_python)) if a != b]
    old_lines, new_lines = set(old.requires_dist), set(after.requires_dist)
    lines += [f"    + {r}" for r in after.requires_dist if r not in old_lines]
    lines += [f"    - {r}" for r in old.requires_dist if r not in new_lines]
    return lines


def refusal_remedy(before: declared.Entry | None, after: declared.Entry) -> str:
    """What to do when uv cannot lock a derived entry: each requirement the fork added is either locked or
    dropped, and this is the exact line that drops it."""
    old = {declared._name(r) for r in (before.requires_dist if before else ())}
    new = list(dict.fromkeys(n for n in map(declared._name, after.requires_dist) if n not in old))
    if not new:  # a bound the fork tightened, or one of ours, that no version meets
        return (f"uv's message above names the requirement it cannot meet: give it a bound that fits in `add = [...]` "
                f"of [tool.nemo-rl.forks.{after.name}] in pyproject.toml (or drop it there), then run the command "
                f"again")
    lines = "\n".join(f"    {declared.drop_line(name)}" for name in new)
    return (f"if the fork does not need them, add to `drop = [...]` in [tool.nemo-rl.forks.{after.name}] of "
            f"pyproject.toml:\n{lines}\nthen run the command again; otherwise read uv's message above")
