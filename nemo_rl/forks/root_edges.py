"""The project's locked edges to a fork, checked against what its [package.metadata] asks."""

from __future__ import annotations

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from nemo_rl.forks import lock_markers


def _roots(lock: dict) -> list[dict]:
    return [p for p in lock.get("package", []) if isinstance(p, dict) and isinstance(p.get("source"), dict)
            and ({"virtual", "editable"} & p["source"].keys()) and isinstance(p.get("metadata"), dict)]


def _requirements(entries: object, name: str) -> list:
    found = []
    for item in lock_markers.named(entries, name):
        extras = item.get("extras") if isinstance(item.get("extras"), list) else []
        line = f"{name}[{','.join(map(str, extras))}]" if extras else name
        try:
            found.append(Requirement(line + (f"; {item['marker']}" if item.get("marker") else "")))
        except InvalidRequirement:
            continue
    return found


def differences(lock: dict, distribution: str) -> list[tuple[str, str, str]]:
    """(field, expected, found) where locked edges to `distribution` differ from [package.metadata]."""
    name = canonicalize_name(distribution)
    result = []
    for root in _roots(lock):
        metadata = root["metadata"]
        asked = _requirements(metadata.get("requires-dist"), name)
        groups, optional, dev = (_table(t.get(key)) for t, key in ((metadata, "requires-dev"),
                                                                    (root, "optional-dependencies"),
                                                                    (root, "dev-dependencies")))
        base = lock_markers.named(root.get("dependencies"), name)
        group_asked = {group: _requirements(entries, name) for group, entries in groups.items()}
        edges = [*base, *(d for table in (optional, dev) for v in table.values() for d in lock_markers.named(v, name))]
        envs = lock_markers.environments(lock, [*(r.marker for r in asked), *(e.get("marker") for e in edges), *(
            r.marker for requirements in group_asked.values() for r in requirements)])
        where = f"[[package]] {root.get('name')}"
        lists: list[tuple[str, list[dict], list, str, list[dict]]] = [("dependencies", base, asked, "", [])]
        extras = {canonicalize_name(str(e)) for e in metadata.get("provides-extras") or []} | set(optional)
        lists += [(f"optional-dependencies {extra}", lock_markers.named(optional.get(extra), name), asked, extra, base)
                  for extra in sorted(map(str, extras))]
        lists += [(f"dev-dependencies {group}", lock_markers.named(dev.get(group), name), group_asked[group], "", [])
                  for group in sorted(group_asked)]
        for field, locked, requirements, extra, beside in lists:
            result += [(f"{where} {f}", e, g) for f, e, g in lock_markers.hand_markers(field, locked)]
            # what uv installs with the extra active: the base list and the extra's
            missing, unexpected = lock_markers.gaps(requirements, locked, envs, extra=extra, beside=beside)  # guard: root-edges-an-extra-s-list-with-the-base
            if missing:
                result.append((f"{where} {field}", f"{', '.join(missing)} among them", "missing"))
            if unexpected:
                result.append((f"{where} {field}", f"only what pyproject.toml asks of {name}",
                               f"also {', '.join(unexpected)}"))
    return result


def _table(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def asked_extras(lock: dict, distribution: str) -> set[str]:
    """The extras of `distribution` the lock's edges and [package.metadata] ask for."""
    name = canonicalize_name(distribution)
    found: set[str] = set()
    for package in (p for p in lock.get("package", []) if isinstance(p, dict)):
        lists: list[object] = [package.get("dependencies"), *_table(package.get("optional-dependencies")).values(),
                               *_table(package.get("dev-dependencies")).values()]
        for item in (d for v in lists for d in lock_markers.named(v, name)):
            extras = item.get("extra")
            found |= {canonicalize_name(str(e)) for e in (extras if isinstance(extras, list) else [])}
        metadata = _table(package.get("metadata"))
        entries = [metadata.get("requires-dist"), *_table(metadata.get("requires-dev")).values()]
        for requirement in (r for e in entries for r in _requirements(e, name)):
            found |= {canonicalize_name(e) for e in requirement.extras}
    return found
