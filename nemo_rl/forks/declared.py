"""The [[tool.uv.dependency-metadata]] entry of a fork, derived."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from nemo_rl.errors import NemoRLError, command


@dataclass(frozen=True)
class Delta:
    """A difference from the fork's requirements; `requirement` is None for a drop."""

    name: str
    requirement: str | None
    why: str


@dataclass(frozen=True)
class Deltas:
    drop: tuple[Delta, ...] = ()
    add: tuple[Delta, ...] = ()


@dataclass(frozen=True)
class Declares:
    """What the fork's build backend declares at a commit."""

    version: str
    requires_python: str | None
    requires_dist: tuple[str, ...]
    commit: str = ""
    # each extra (canonical) and the requirements only it brings
    extras: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def as_table(self) -> dict:
        table: dict = {"commit": self.commit} if self.commit else {}
        table |= {"version": self.version, "requires-dist": list(self.requires_dist)}
        if self.requires_python is not None:
            table["requires-python"] = self.requires_python
        if self.extras:  # guard: extras-declares-writes-them
            table["extras"] = {name: list(lines) for name, lines in self.extras}
        return table


@dataclass(frozen=True)
class Entry:
    """A [[tool.uv.dependency-metadata]] entry."""

    name: str
    version: str | None
    requires_python: str | None
    requires_dist: tuple[str, ...]


def entry_from_tables(entries: object, distribution: str) -> Entry | None:
    """The [[tool.uv.dependency-metadata]] entry for `distribution`, checked; None when missing."""
    where = f"[[tool.uv.dependency-metadata]] {distribution}"
    if not isinstance(entries, list):
        raise NemoRLError("pyproject.toml: [[tool.uv.dependency-metadata]] must be an array of tables",
                          "write each entry as a [[tool.uv.dependency-metadata]] table")
    same = [e for e in entries if isinstance(e, dict) and isinstance(e.get("name"), str)
            and canonicalize_name(e["name"]) == canonicalize_name(distribution)]
    if len(same) > 1:  # guard: derived-one-entry-per-fork
        raise NemoRLError(f"pyproject.toml has {len(same)} [[tool.uv.dependency-metadata]] entries for {distribution} "
                          f"({', '.join(repr(e['name']) for e in same)})",
                          f"keep one, named {distribution}, then run `nemo-rl deps patches {distribution}`")
    if not same:
        return None
    entry = same[0]
    requires, version, python = entry.get("requires-dist", []), entry.get("version"), entry.get("requires-python")
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        raise NemoRLError(f"pyproject.toml: {where} requires-dist must be a list of strings",
                          "write it as a list of requirement strings")
    for field, value in (("version", version), ("requires-python", python)):
        if value is not None and not isinstance(value, str):
            raise NemoRLError(f"pyproject.toml: {where} {field} must be a string, found {type(value).__name__} "
                              f"{value!r:.60}", "write it as a string")
    return Entry(entry["name"], version, python, tuple(requires))


def _name(requirement: str) -> str:
    return canonicalize_name(Requirement(requirement).name)


def key(requirement: Requirement) -> tuple[str, str, str]:
    """What tells two requirements of one name apart."""
    return canonicalize_name(requirement.name), str(requirement.marker or ""), ",".join(sorted(requirement.extras))


def declares_from(version: str, requires_python: str | None, requires: Mapping[str, str],
                  rev: str = "", distribution: str = "", dropped: frozenset[str] = frozenset(),
                  extras: Mapping[str, Sequence[str]] | None = None) -> Declares:
    """What a fork declares, from fork_metadata.Metadata's fields."""
    def checked(lines: Iterable[str]) -> tuple[str, ...]:
        values = []
        for line in lines:
            requirement = Requirement(line)
            if requirement.url:
                name = canonicalize_name(requirement.name)
                if name not in dropped:  # guard: bump-a-direct-reference-the-fork
                    raise NemoRLError(f"the fork at {rev[:12]} declares a direct reference {line!r:.200}: fix the "
                                      "fork or drop it",
                                      f"drop it in pyproject.toml [tool.nemo-rl.forks.{distribution or '<dist>'}]: "
                                      f"drop = [{drop_line(name)}], or pin a commit of the fork without it")
                requirement.url = None  # guard: bump-a-dropped-direct-reference-keeps
                line = str(requirement)
            values.append(line)
        return tuple(values)

    return Declares(version, requires_python, checked(requires.values()),
                    rev, tuple((name, checked(lines)) for name, lines in sorted((extras or {}).items())))


def declares_from_table(table: object, where: str, distribution: str | None = None) -> Declares | None:
    """index.toml's `[declares]`, checked; None when absent."""
    if table is None:
        return None
    regenerate = "regenerate it with " + command("nemo-rl deps patches" + (" {d}" if distribution else ""),
                                                 d=distribution)
    problem = f"{where} [declares] must hold commit and version (strings) and requires-dist (a list)"
    if not isinstance(table, dict) or not isinstance(table.get("version"), str):
        raise NemoRLError(problem, regenerate)
    requires, python, commit = table.get("requires-dist", []), table.get("requires-python"), table.get("commit", "")
    extras = table.get("extras", {})
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires) or not (
            python is None or isinstance(python, str)) or not isinstance(commit, str) or not isinstance(
            extras, dict) or not all(isinstance(k, str) and isinstance(v, list) and all(isinstance(r, str) for r in v)
                                     for k, v in extras.items()):
        raise NemoRLError(problem, regenerate)
    for line in [*requires, *(line for lines in extras.values() for line in lines)]:
        try:
            if Requirement(line).url:  # guard: derived-declares-parsed-where-read
                raise InvalidRequirement("a direct reference")
        except InvalidRequirement as exc:
            raise NemoRLError(f"{where} [declares] requires-dist: {line!r:.80} is not a requirement nemo-rl locks "
                              f"({exc})", regenerate) from exc
    return Declares(table["version"], python, tuple(requires), commit,  # guard: extras-declares-reads-them
                    tuple((name, tuple(lines)) for name, lines in sorted(extras.items())))


def deltas_from_table(table: dict, distribution: str) -> Deltas:
    """The drop and add lists of [tool.nemo-rl.forks.<dist>], checked."""
    where = f"pyproject.toml [tool.nemo-rl.forks.{distribution}]"
    seen: dict[str, str] = {}
    added: dict[str, list[Requirement]] = {}
    lists = {}
    for key_, field in (("drop", "name"), ("add", "requirement")):
        items = table.get(key_, [])
        if not isinstance(items, list):
            raise NemoRLError(f"{where} {key_} must be an array of inline tables",
                              f'write it as {key_} = [{{ {field} = "...", why = "..." }}]')
        parsed = []
        for item in items:
            value, why = (item.get(field), item.get("why")) if isinstance(item, dict) else (None, None)
            if not isinstance(value, str) or not isinstance(why, str) or not why.strip():  # guard: derived-a-drop-needs-its-why
                raise NemoRLError(f"{where} {key_}: {item!r:.80} needs {field} and a non-empty why (strings)",
                                  f'write each as {{ {field} = "...", why = "the reason" }}')
            try:
                requirement = Requirement(value)
            except InvalidRequirement as exc:
                raise NemoRLError(f"{where} {key_}: {value!r} is not a requirement: {exc}",
                                  "write it as PEP 508 says") from exc
            name = canonicalize_name(requirement.name)
            if key_ == "drop" and (requirement.specifier or requirement.url or requirement.marker
                                   or requirement.extras):
                raise NemoRLError(f"{where} drop: {value!r} is more than a name",
                                  "drop it by name; to change its bound, add the requirement")
            if requirement.url:  # guard: derived-a-direct-reference-add-refused
                raise NemoRLError(f"{where} add: {value!r} is a direct reference",
                                  "add a requirement from the index")
            if seen.get(name, key_) != key_ or (key_ == "drop" and name in seen):  # guard: derived-a-name-listed-once
                raise NemoRLError(f"{where}: {name} is listed twice ({seen[name]} and {key_})",
                                  "list each requirement once, in drop or in add")
            same = added.setdefault(name, []) if key_ == "add" else []
            # an add without a marker replaces every requirement of its name, so it cannot share the name
            if same and (requirement.marker is None or any(r.marker is None or key(r) == key(requirement)  # guard: derived-one-name-added-twice-needs
                                                            for r in same)):
                raise NemoRLError(f"{where} add: {name} is added twice for the same environments ({value!r})",
                                  "add it once, or give each add of it a distinct marker")
            same.append(requirement)
            seen[name] = key_
            parsed.append(Delta(name, value if key_ == "add" else None, why.strip()))
        lists[key_] = tuple(parsed)
    return Deltas(lists["drop"], lists["add"])


def derive(distribution: str, declares: Declares, deltas: Deltas) -> Entry:
    """The entry uv must lock: the fork's own, less the drops, plus the adds."""
    dropped = {d.name for d in deltas.drop}
    adds = [(Requirement(a.requirement), a.requirement) for a in deltas.add if a.requirement is not None]
    replaced_names = {canonicalize_name(r.name) for r, _ in adds if r.marker is None}  # guard: derived-an-add-with-a-marker-replaces
    replaced_markers = {(canonicalize_name(r.name), str(r.marker)) for r, _ in adds if r.marker is not None}
    by_name: dict[str, list[str]] = {}
    for line in declares.requires_dist:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        if name in dropped or name in replaced_names or (name, str(requirement.marker)) in replaced_markers:  # guard: derived-drops-applied
            continue
        by_name.setdefault(name, []).append(line)  # guard: derived-one-name-split-by-marker-keeps
    for requirement, line in adds:
        by_name.setdefault(canonicalize_name(requirement.name), []).append(line)
    return Entry(distribution, declares.version, declares.requires_python,  # guard: derived-the-fork-s-version
                 tuple(line for name in sorted(by_name) for line in by_name[name]))


def unnecessary_drops(declares: Declares, deltas: Deltas) -> list[str]:
    """Dropped names the fork no longer declares."""
    declared = {_name(r) for r in declares.requires_dist}
    return [d.name for d in deltas.drop if d.name not in declared]  # guard: derived-unnecessary-drops


def drop_line(name: str) -> str:
    """The line that drops `name`."""
    return f'{{ name = "{name}", why = "<why nemo-rl does not need it>" }},'


def differences(entry: Entry | None, derived: Entry) -> list[tuple[str, str, str]]:
    """(field, expected, found) where `entry` is not `derived`."""
    if entry is None:
        return [("entry", f"[[tool.uv.dependency-metadata]] name = {derived.name!r}", "missing")]
    result = []
    if entry.name != derived.name:  # guard: derived-an-entry-spelled-differently-2
        result.append(("name", repr(derived.name), f"{entry.name!r} (the same distribution spelled differently)"))
    for field, expected, found in (("version", derived.version, entry.version),
                                   ("requires-python", derived.requires_python, entry.requires_python)):
        if expected != found:  # guard: derived-version-compared
            result.append((field, repr(expected), repr(found)))
    if entry.requires_dist != derived.requires_dist:  # guard: derived-requires-dist-compared
        want, have = set(derived.requires_dist), set(entry.requires_dist)
        extra, missing = sorted(have - want), sorted(want - have)
        detail = "; ".join(filter(None, [f"missing {', '.join(missing)}" if missing else "",
                                         f"not derived {', '.join(extra)}" if extra else ""])) or "another order"
        result.append(("requires-dist", "the derived list", detail))
    return result


def write_entry(doc, derived: Entry) -> bool:
    """Make the document's entry the derived one; True when that changed it."""
    import tomlkit

    entries = doc["tool"]["uv"].setdefault("dependency-metadata", tomlkit.aot())
    entry = next((e for e in entries if canonicalize_name(str(e.get("name"))) == canonicalize_name(derived.name)),  # guard: derived-an-entry-spelled-differently
                 None)
    if entry is None:
        entry = tomlkit.table()
        entries.append(entry)
    before = tomlkit.dumps(entry)
    entry["name"] = derived.name
    entry["version"] = derived.version
    if derived.requires_python is None:
        entry.pop("requires-python", None)
    else:
        entry["requires-python"] = derived.requires_python
    if list(entry.get("requires-dist", [])) != list(derived.requires_dist):
        requires = tomlkit.array()
        requires.multiline(True)
        requires.extend(derived.requires_dist)
        entry["requires-dist"] = requires
    return tomlkit.dumps(entry) != before


def derives(entry: Entry | None, deltas: Deltas) -> bool:
    """Whether the fork has an entry or deltas that need one."""
    return entry is not None or bool(deltas.drop or deltas.add)


def write_derived(doc, distribution: str, declares: Declares, deltas: Deltas) -> tuple[Entry, bool, list[str]]:
    """Write the derived entry and remove unneeded drops: (entry, changed, drops removed)."""
    derived = derive(distribution, declares, deltas)
    unneeded = unnecessary_drops(declares, deltas)
    changed = write_entry(doc, derived)
    if unneeded:  # guard: derived-unnecessary-drops-removed
        drops = doc["tool"]["nemo-rl"]["forks"][distribution]["drop"]
        for item in [d for d in drops if canonicalize_name(str(d.get("name"))) in unneeded]:
            drops.remove(item)
    return derived, changed, unneeded
