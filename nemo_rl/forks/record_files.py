"""patches/<dist>/: index.toml and one record of facts per downstream commit, no fork code."""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from nemo_rl.errors import NemoRLError, command
from nemo_rl.forks import declared
from nemo_rl.project.lockfile import load_toml, read_text

RECORD_HEADER = (
    "# nemo-rl patch record: facts about one downstream commit of a fork, not its code.\n"
    "# `nemo-rl deps patches export DIST DIR` writes the applicable patch from the fork itself.\n"
)
INDEX = "index.toml"
INDEX_FACTS = ("distribution", "fork-url", "branch", "pinned", "upstream-url", "upstream-branch", "base")


def relative_dir(distribution: str) -> str:
    return f"patches/{distribution}"


def index_name(distribution: str) -> str:
    return f"{relative_dir(distribution)}/{INDEX}"


@dataclass(frozen=True)
class Record:
    number: int
    commit: str
    author: str
    date: str
    subject: str
    patch_id: str
    diffstat: str
    note: str = ""

    @property
    def filename(self) -> str:
        return patch_filename(self.number, self.subject)

    def facts(self) -> dict[str, str]:
        return {"commit": self.commit, "author": self.author, "date": self.date, "subject": self.subject,
                "patch-id": self.patch_id, "diffstat": self.diffstat}

    def digest(self) -> str:
        return _digest(self.facts())

    def render(self) -> str:
        stat = "\n".join(f"  {line}" for line in self.diffstat.splitlines())
        note = "\n".join(f"  {line}" for line in self.note.strip().splitlines())
        facts = "".join(f"{key}: {value}\n" for key, value in self.facts().items() if key != "diffstat")
        return f"{RECORD_HEADER}{facts}diffstat:\n{stat}\nnote:\n{note + chr(10) if note else ''}"


@dataclass(frozen=True)
class Listed:
    """One [[commit]] of index.toml."""

    number: int
    commit: str
    subject: str
    patch_id: str
    record: str
    digest: str

    def as_table(self) -> dict[str, int | str]:
        return {"number": self.number, "commit": self.commit, "subject": self.subject, "patch-id": self.patch_id,
                "record": self.record, "digest": self.digest}


LISTED_KEYS = tuple(Listed(0, "", "", "", "", "").as_table())


@dataclass(frozen=True)
class Index:
    distribution: str
    fork_url: str
    branch: str | None
    pinned: str
    upstream_url: str | None
    upstream_branch: str
    base: str
    why: str
    commits: tuple[Listed, ...] = ()
    digest: str | None = None
    # what the fork's own metadata says at the pin (declared.Declares.as_table)
    declares: Mapping[str, object] | None = None
    problems: tuple[str, ...] = ()
    parsed: bool = True

    def facts(self) -> dict[str, str]:
        return {"distribution": self.distribution, "fork-url": self.fork_url, "branch": self.branch or "",
                "pinned": self.pinned, "upstream-url": self.upstream_url or "",
                "upstream-branch": self.upstream_branch, "base": self.base}

    def expected_digest(self) -> str:
        declares = {"declares": self.declares} if self.declares is not None else {}
        return _digest({"index": self.facts(), "commits": [c.as_table() for c in self.commits], **declares})


def _digest(value: object) -> str:
    return "sha256:" + hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def index_for(distribution: str, fork_url: str, branch: str | None, pinned: str, upstream_url: str | None,
              upstream_branch: str, base: str, why: str, records: list[Record], declares: dict | None = None) -> Index:
    commits = tuple(Listed(r.number, r.commit, r.subject, r.patch_id, r.filename, r.digest()) for r in records)
    index = Index(distribution, fork_url, branch, pinned, upstream_url, upstream_branch, base, why, commits,
                  declares=declares)
    return replace(index, digest=index.expected_digest())


# git format-patch's FORMAT_PATCH_NAME_MAX_DEFAULT (log-tree.c)
PATCH_NAME_MAX = 64


def slug(subject: str) -> str:
    """git's format_sanitized_subject."""
    return re.sub(r"[^A-Za-z0-9._]+", "-", re.sub(r"\.\.+", ".", subject)).lstrip("-").rstrip(".-")


def patch_filename(number: int, subject: str) -> str:
    """The name `git format-patch` gives patch `number`."""
    suffix = ".patch"
    return f"{number:04d}-{slug(subject)}"[: PATCH_NAME_MAX - len(suffix) - 1] + suffix


def read_record(path: Path) -> Record:
    fields: dict[str, str] = {}
    # not splitlines(): a subject may hold a carriage return or a form feed
    lines = read_text(path).split("\n")  # guard: records-a-subject-s-carriage-return
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.startswith("#") or not line.strip():
            continue
        key, _, value = line.partition(":")
        if key in ("diffstat", "note"):
            block = []
            while i < len(lines) and lines[i].startswith("  "):
                block.append(lines[i][2:])
                i += 1
            fields[key] = "\n".join(block)
        else:
            # only the one space render() writes is syntax: a subject may start with spaces
            fields[key] = value[1:] if value.startswith(" ") else value  # guard: trust-subject-keeps-its-leading-spaces
    missing = [k for k in ("commit", "author", "date", "subject", "patch-id") if k not in fields]
    if missing:  # guard: fast-record-missing-a-fact
        raise NemoRLError(f"{path} is missing {', '.join(missing)}", f"{command('rm {path}', path=path)} (its note "
                          f"goes too), then {command('nemo-rl deps patches {d}', d=path.parent.name)}")
    return Record(int(path.name[:4]) if path.name[:4].isdigit() else 0, fields["commit"], fields["author"],
                  fields["date"], fields["subject"], fields["patch-id"], fields.get("diffstat", ""),
                  fields.get("note", ""))


def read_index(directory: Path) -> Index | None:
    """patches/<dist>/index.toml, or None when there is none."""
    path = directory / INDEX
    if not path.exists():
        return None
    try:
        data = load_toml(path)
    except NemoRLError as exc:
        if not isinstance(exc.__cause__, tomllib.TOMLDecodeError):
            raise
        why = re.search(r'^why = """\n?(.*?)"""', read_text(path), re.M | re.S)
        return Index(directory.name, "", None, "", None, "main", "", why.group(1) if why else "",
                     problems=(f"does not parse as TOML ({exc.__cause__})",), parsed=False)
    problems = []
    commits = data.get("commit", [])
    if not isinstance(commits, list) or not all(isinstance(c, dict) for c in commits):
        problems.append("[[commit]] is not an array of tables")
        commits = []
    listed = []
    for position, entry in enumerate(commits, start=1):
        found, problem = _listed(entry)
        listed.append(found)
        problems += [f"[[commit]] #{position} {problem}"] if problem else []
    text = {key: data.get(key) for key in (*INDEX_FACTS, "why", "digest")}
    problems += [f"{key} is not a string" for key, value in text.items()
                 if value is not None and not isinstance(value, str)]  # guard: records-a-fact-that-is-no-string-is
    text = {key: value if isinstance(value, str) else None for key, value in text.items()}
    if text["why"] is None and commits and isinstance(commits[-1].get("why"), str):
        text["why"] = commits[-1]["why"]
    declares = data.get("declares")
    try:
        declared.declares_from_table(declares, INDEX, directory.name)
    except NemoRLError as exc:
        problems.append(exc.what)
        declares = None
    return Index(
        distribution=text["distribution"] or directory.name, fork_url=text["fork-url"] or "",
        branch=text["branch"] or None, pinned=text["pinned"] or "", upstream_url=text["upstream-url"] or None,
        upstream_branch=text["upstream-branch"] or "main", base=text["base"] or "",
        why=text["why"] or "", commits=tuple(listed), digest=text["digest"], declares=declares,
        problems=tuple(problems),
    )


def _listed(entry: dict) -> tuple[Listed, str | None]:
    said = [f"has {', '.join(sorted(set(entry) - set(LISTED_KEYS)))}, which nemo-rl does not write"] \
        if set(entry) - set(LISTED_KEYS) else []
    values: list = []
    for key in LISTED_KEYS:
        value, kind = entry.get(key), int if key == "number" else str
        if not isinstance(value, kind) or isinstance(value, bool):  # guard: records-a-commit-value-of-the-wrong-type
            said.append(f"{key} is {value!r:.60}, not {'an integer' if kind is int else 'a string'}")
            value = -1 if kind is int else repr(value)
        values.append(value)
    number, commit, subject, patch_id, record, digest = values
    return Listed(number, commit, subject, patch_id, record, digest), "; ".join(said) or None


def read_records(directory: Path) -> dict[str, Record]:
    """Existing records by commit SHA."""
    paths = sorted(directory.glob("[0-9][0-9][0-9][0-9]-*.patch"))
    return {record.commit: record for record in map(read_record, paths)}


def _multiline(items: list) -> object:
    import tomlkit

    array = tomlkit.array()
    array.multiline(True)
    array.extend(items)
    return array


def render_index(index: Index) -> str:
    import tomlkit

    doc = tomlkit.document()
    doc.add(tomlkit.comment(f"Downstream commits nemo-rl's {index.distribution} fork carries over its upstream."))
    doc.add(tomlkit.comment("Generated by `nemo-rl deps patches`; `why` and each record's note are ours and"))
    doc.add(tomlkit.comment("survive regeneration. Records hold facts (SHA, author, diffstat, patch-id), no code."))
    doc.add(tomlkit.comment("`digest` covers every fact here and in the records: edit facts by regenerating."))
    for key, value in index.facts().items():
        doc[key] = value
    doc["digest"] = index.digest or index.expected_digest()
    doc["why"] = tomlkit.string(index.why.strip() + "\n", multiline=True)
    if index.declares is not None:
        declares = tomlkit.table()
        declares.add(tomlkit.comment("what the fork's own build backend declares at the pin (extras left out);"))
        declares.add(tomlkit.comment("[[tool.uv.dependency-metadata]] is derived from it (`nemo-rl deps patches`)"))
        for key, field in index.declares.items():
            if isinstance(field, dict):
                field = {extra: _multiline(lines) for extra, lines in field.items()}
            declares[key] = _multiline(field) if isinstance(field, list) else field
        doc["declares"] = declares
    commits = tomlkit.aot()  # filled before it is added: tomlkit then keeps the blank line before it
    for entry in index.commits:
        commits.append(entry.as_table())
    doc["commit"] = commits
    return tomlkit.dumps(doc)
