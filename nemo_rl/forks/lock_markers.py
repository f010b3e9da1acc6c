"""Which requirements apply where, decided the same way on every machine."""

from __future__ import annotations

import re
from collections.abc import Container, Iterable

from packaging.markers import InvalidMarker, Marker
from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

Environment = dict[str, str]
Pair = tuple[str, str]

_PLATFORMS = (("linux", "Linux", "posix", "x86_64"), ("linux", "Linux", "posix", "aarch64"),
              ("darwin", "Darwin", "posix", "arm64"), ("darwin", "Darwin", "posix", "x86_64"),
              ("win32", "Windows", "nt", "AMD64"))
# platform_release and platform_version name the machine, not the platform.
_MACHINES = {"linux": (("6.1.0-18-amd64", "#1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)"), ("", "")),
             "darwin": (("23.1.0", "Darwin Kernel Version 23.1.0"), ("", "")),
             "win32": (("10", "10.0.19045"), ("", ""))}
_PYTHONS = tuple(f"3.{minor}" for minor in range(8, 15))


def environments(lock: dict, markers: Iterable[object] = ()) -> list[Environment]:
    """The marker environments uv.lock covers."""
    supported = lock.get("supported-markers")
    supported = supported if isinstance(supported, list) else []
    requires_python = str(lock.get("requires-python") or "")
    parsed = [m for m in map(_marker, supported) if m is not None]
    try:
        python = SpecifierSet(requires_python)
    except InvalidSpecifier:
        python = SpecifierSet()
    points = []
    for version in _PYTHONS:
        if f"{version}.0" in python or f"{version}.99" in python:
            points.append(f"{version}.0" if f"{version}.0" in python else f"{version}.99")
    literals = [*markers, *supported, requires_python]  # guard: markers-sampled-at-each-version-literal
    points += [p for p in _literal_points(literals) if p in python and p not in points]
    result = []
    for sys_platform, system, os_name, machine in _PLATFORMS:
        for full in points:
            for release, kernel in _MACHINES[sys_platform]:
                version = ".".join(full.split(".")[:2])
                env = {"sys_platform": sys_platform, "platform_system": system, "os_name": os_name,
                       "platform_machine": machine, "python_version": version, "python_full_version": full,
                       "implementation_name": "cpython", "platform_python_implementation": "CPython",
                       "implementation_version": full, "platform_release": release, "platform_version": kernel,
                       "extra": ""}
                if not parsed or any(_evaluate(m, env) for m in parsed):
                    result.append(env)
    return result


def _literal_points(markers: Iterable[object]) -> list[str]:
    """Each Python version the markers name, and the micro release after it."""
    found: set[tuple[int, int, int]] = set()
    for text in markers:
        for word in re.findall(r"(?<![\w.])[vV]?\d+(?:\.\d+)+", str(text or "")):
            try:
                release = Version(word).release
            except InvalidVersion:
                continue
            if release[0] == 3:
                major, minor, micro = (list(release) + [0, 0])[:3]
                found |= {(major, minor, micro), (major, minor, micro + 1)}
    return [f"{a}.{b}.{c}" for a, b, c in sorted(found)]


# uv writes a Python version clause as `<variable> <comparison> '<release>'`, the release spelled canonically (no `v`,
# no leading zero), `.*` only after == and !=
_VERSION_NAMES = ("python_version", "python_full_version", "implementation_version")
_RELEASE = re.compile(r"(0|[1-9]\d*)(\.(0|[1-9]\d*))*")
_COMPARISONS = ("==", "!=", "<", "<=", ">", ">=", "~=")


def unwritten(text: object) -> str | None:
    """Why uv never wrote this uv.lock marker (None when it may have)."""
    marker = _marker(text)
    if marker is None:
        return None
    for clause in _clauses(getattr(marker, "_markers", [])):
        left, op, right = (str(getattr(side, "value", side)) for side in clause)
        kinds = [type(side).__name__ for side in clause]
        if kinds[2] == "Variable" and right in _VERSION_NAMES:  # guard: locked-marker-a-python-version-on-the
            return f"`{left} {op} {right}`: uv writes the variable first"
        if kinds[0] != "Variable" or left not in _VERSION_NAMES:
            continue
        wildcard = right.endswith(".*") and op in ("==", "!=")
        if op not in _COMPARISONS or not _RELEASE.fullmatch(right[:-2] if wildcard else right):  # guard: locked-marker-a-python-version-spelled
            return f"`{left} {op} '{right}'`: uv writes a comparison with a canonical release"
    return None


def hand_markers(field: str, dependencies: object) -> list[tuple[str, str, str]]:
    """The locked dependencies whose marker uv never writes."""
    found = [f"{d.get('name')} ({why})" for d in (dependencies if isinstance(dependencies, list) else [])
             if isinstance(d, dict) and d.get("marker") and (why := unwritten(d["marker"]))]
    return [(field, "markers as uv writes them (a relock rewrites them)", f"{'; '.join(found)}: edited by hand")
            ] if found else []


def _clauses(markers: object) -> list[tuple]:
    if isinstance(markers, list):
        return [c for m in markers for c in _clauses(m)]
    return [markers] if isinstance(markers, tuple) and len(markers) == 3 else []


def base_requirement(requirement: Requirement) -> bool:
    """Whether a requirement is the distribution's own, not one of its extras'."""
    return any(_evaluate(requirement.marker, env) for env in _ANY)  # guard: metadata-a-marker-merely-naming-extra-is


def with_extra(requirement: Requirement, extra: str) -> bool:
    """Whether a requirement applies with `extra` active, on some platform and Python."""
    return any(_evaluate(requirement.marker, {**env, "extra": extra}) for env in _ANY)


def describe(env: Environment) -> str:
    return f"{env['sys_platform']} {env['platform_machine']} Python {env['python_version']}"


def required(requirements: Iterable[Requirement], env: Environment) -> set[Pair]:
    """The (name, extra) pairs the requirements make uv install in `env`."""
    result: set[Pair] = set()
    for requirement in requirements:
        if _evaluate(requirement.marker, env):  # guard: derived-a-requirement-met-where-the-lock
            name = canonicalize_name(requirement.name)
            result |= {(name, ""), *((name, canonicalize_name(e)) for e in requirement.extras)}
    return result


def locked(dependencies: object, env: Environment) -> set[Pair]:
    """The (name, extra) pairs a uv.lock `dependencies` list makes uv install in `env`."""
    result: set[Pair] = set()
    for item in dependencies if isinstance(dependencies, list) else []:
        if not isinstance(item, dict):
            continue
        marker = item.get("marker")
        parsed = _marker(marker) if marker else None
        if marker and (parsed is None or not _evaluate(parsed, env)):  # guard: lock-a-locked-dependency-s-marker
            continue
        name = canonicalize_name(str(item.get("name")))
        extras = item.get("extra")  # guard: lock-a-locked-dependency-s-extras
        result |= {(name, ""), *((name, canonicalize_name(str(e))) for e in
                                 (extras if isinstance(extras, list) else []))}
    return result


def closure(lock: dict, roots: Iterable[Pair], env: Environment, stop: Container[str]) -> dict[str, set[str]]:
    """Each package uv.lock installs in `env` from `roots` with its extras ("" for itself); not past `stop` or forks."""
    forks = _by_name(manifest(lock, "dependency-metadata"))
    packages = _by_name(lock.get("package"))
    options: dict[str, set[str]] = {}
    todo = sorted(roots)
    while todo:
        dep, option = todo.pop()
        if dep in stop or dep in forks or option in options.setdefault(dep, set()):  # guard: fast-installed-closure-another-fork-s
            continue
        options[dep].add(option)
        package = packages.get(dep)
        needs = _extra(package, option) if option else package.get("dependencies") if package else None
        todo += sorted(locked(needs, env))
    return options


def optional(lock: dict, name: str, option: str) -> object:
    """The dependencies uv.lock locks for `name`'s extra `option`."""
    return _extra(one(lock.get("package"), name), option)


def _extra(package: dict | None, option: str) -> object:
    options = package.get("optional-dependencies") if package is not None else None
    if not isinstance(options, dict):
        return None
    return next((v for k, v in options.items() if canonicalize_name(k) == option), None)


def manifest(lock: dict, key: str) -> object:
    table = lock.get("manifest")
    return table.get(key) if isinstance(table, dict) else None


def one(items: object, name: str) -> dict | None:
    """The one table of `items` named `name` (canonical); None when none or several."""
    found = named(items, name)
    return found[0] if len(found) == 1 else None


def named(items: object, name: str) -> list[dict]:
    return [item for item in (items if isinstance(items, list) else []) if isinstance(item, dict)
            and canonicalize_name(str(item.get("name"))) == name]


def _by_name(items: object) -> dict[str, dict | None]:
    found: dict[str, dict | None] = {}
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict):
            name = canonicalize_name(str(item.get("name")))
            found[name] = None if name in found else item
    return found


def gaps(requirements: Iterable[Requirement], dependencies: object, envs: list[Environment], *,
         extra: str | None = None, beside: object = ()) -> tuple[list[str], list[str]]:
    """(required but not locked, locked but not required) over `envs`, `extra` active when given."""
    missing: dict[str, list[str]] = {}
    unexpected: dict[str, list[str]] = {}
    applies: dict[str, int] = {}
    for env in envs:
        on = env if extra is None else {**env, "extra": extra}
        wanted, found = required(requirements, on), locked(dependencies, on) | locked(beside, env)
        for pair in wanted | found:
            applies[spelled(pair)] = applies.get(spelled(pair), 0) + 1
        for pair in wanted - found:
            missing.setdefault(spelled(pair), []).append(describe(env))
        for pair in found - wanted:
            unexpected.setdefault(spelled(pair), []).append(describe(env))

    def shown(found: dict[str, list[str]]) -> list[str]:
        return [name if len(where) == applies[name] else f"{name} (on {where[0]})"
                for name, where in sorted(found.items())]

    return shown(missing), shown(unexpected)


def unevaluable(dependencies: object, envs: list[Environment]) -> list[Pair]:
    """(name, marker) of each uv.lock dependency whose marker cannot be read or evaluated in `envs`."""
    found: list[Pair] = []
    for item in dependencies if isinstance(dependencies, list) else []:
        if isinstance(item, dict) and item.get("marker"):
            marker = _marker(item["marker"])
            if marker is None or not decides(marker, envs):
                found.append((canonicalize_name(str(item.get("name"))), str(item["marker"])))
    return found


# The machine's kernel: no sample decides a marker on them, since one fitted to the samples (`platform_release in '<the
# sampled releases>'`) holds on no other machine.
MACHINE = ("platform_release", "platform_version")


def decides(marker: Marker | None, envs: list[Environment]) -> bool:
    """Whether packaging decides `marker` in each of `envs` as uv does on every machine."""
    if marker is None:
        return True
    if _names_extra(getattr(marker, "_markers", []), ("extra", *MACHINE)):  # guard: locked-marker-one-naming-extra-is-not
        return False
    try:
        for env in envs:
            marker.evaluate(env)
        return True
    except ValueError:
        return False


def _names_extra(markers: object, names: tuple[str, ...] = ("extra",)) -> bool:
    sides = [side for clause in _clauses(markers) for side in clause]
    return any(type(side).__name__ == "Variable" and str(side) in names for side in sides)


def names_extra(text: object) -> bool:
    marker = _marker(text)
    return marker is None or _names_extra(getattr(marker, "_markers", []))


def conflict_extra(text: object) -> bool:
    """Whether a uv.lock marker names one of uv's encoded conflict extras."""
    return bool(re.search(r"""\bextra\s*[=!]=\s*['"](extra|group|project)-\d+-""", str(text or "")))


def spelled(pair: Pair) -> str:
    return f"{pair[0]}[{pair[1]}]" if pair[1] else pair[0]


def written(requirement: Requirement) -> str:
    extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
    return f"{canonicalize_name(requirement.name)}{extras}{requirement.specifier}"


def signature(requirement: Requirement, envs: list[Environment]) -> str:
    found = "".join("1" if _evaluate(requirement.marker, env) else "0" for env in envs)
    return "" if "0" not in found else found


def _marker(text: object) -> Marker | None:
    try:
        return Marker(str(text))
    except InvalidMarker:
        return None


def _evaluate(marker: Marker | None, env: Environment) -> bool:
    """A marker packaging cannot evaluate counts as met: shown, not hidden."""
    try:
        return marker is None or marker.evaluate(env)
    except ValueError:
        return True


_ANY = environments({})
