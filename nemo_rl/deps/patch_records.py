"""patches/<dist>/: an index.toml and one record per downstream commit. Facts and our words, no fork code."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from nemo_rl.errors import NemoRLError

RECORD_HEADER = (
    "# nemo-rl patch record: facts about one downstream commit of a fork, not its code.\n"
    "# `nemo-rl deps patches export DIST DIR` writes the applicable patch from the fork itself.\n"
)
NOTE_MARKER = "note:"


@dataclass
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

    def render(self) -> str:
        stat = "\n".join(f"  {line}" for line in self.diffstat.splitlines())
        note = "\n".join(f"  {line}" for line in self.note.strip().splitlines())
        return (
            f"{RECORD_HEADER}commit: {self.commit}\nauthor: {self.author}\ndate: {self.date}\n"
            f"subject: {self.subject}\npatch-id: {self.patch_id}\ndiffstat:\n{stat}\n{NOTE_MARKER}\n"
            f"{note + chr(10) if note else ''}"
        )


@dataclass
class Index:
    distribution: str
    fork_url: str
    branch: str | None
    pinned: str
    upstream_url: str | None
    upstream_branch: str
    base: str
    why: str
    commits: list[dict] = field(default_factory=list)


# git format-patch's default limit on a file name, suffix included (log-tree.c, FORMAT_PATCH_NAME_MAX_DEFAULT).
PATCH_NAME_MAX = 64
_TITLE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._")


def slug(subject: str) -> str:
    """git's format_sanitized_subject: runs of other characters become one '-', '.' runs one '.'."""
    out: list[str] = []
    space = 2  # 2: nothing written yet (no leading '-'); 1: a separator is pending
    previous = ""
    for char in subject:
        if char in _TITLE_CHARS:
            if char == "." and previous == ".":
                continue
            if space == 1:
                out.append("-")
            space = 0
            out.append(char)
        else:
            space |= 1
        previous = char
    return "".join(out).rstrip(".-")


def patch_filename(number: int, subject: str) -> str:
    """The name `git format-patch` gives patch `number`: cut to the limit after sanitizing, not re-trimmed."""
    suffix = ".patch"
    return f"{number:04d}-{slug(subject)}"[: PATCH_NAME_MAX - len(suffix) - 1] + suffix


def parse_record(text: str) -> Record:
    fields: dict[str, str] = {}
    lines = text.splitlines()
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
            fields[key] = value.strip()
    missing = [k for k in ("commit", "author", "date", "subject", "patch-id") if k not in fields]
    if missing:
        raise NemoRLError(f"patch record is missing {', '.join(missing)}", "regenerate it with `nemo-rl deps patches`")
    return Record(0, fields["commit"], fields["author"], fields["date"], fields["subject"], fields["patch-id"],
                  fields.get("diffstat", ""), fields.get("note", ""))


def read_index(directory: Path) -> Index | None:
    path = directory / "index.toml"
    if not path.exists():
        return None
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise NemoRLError(f"cannot parse {path}: {exc}",
                          "fix the TOML or regenerate with `nemo-rl deps patches`") from exc
    return Index(
        distribution=data.get("distribution", directory.name), fork_url=data.get("fork-url", ""),
        branch=data.get("branch"), pinned=data.get("pinned", ""), upstream_url=data.get("upstream-url"),
        upstream_branch=data.get("upstream-branch", "main"), base=data.get("base", ""),
        why=data.get("why", ""), commits=list(data.get("commit", [])),
    )


def read_records(directory: Path) -> dict[str, Record]:
    """Existing records by commit SHA (used to carry notes over a regeneration)."""
    records = {}
    for path in sorted(directory.glob("[0-9][0-9][0-9][0-9]-*.patch")):
        record = parse_record(path.read_text())
        record.number = int(path.name[:4])
        records[record.commit] = record
    return records


def render_index(index: Index) -> str:
    import tomlkit  # noqa: PLC0415 - writing only; status and --check --offline read with tomllib

    doc = tomlkit.document()
    doc.add(tomlkit.comment(f"Downstream commits nemo-rl's {index.distribution} fork carries over its upstream."))
    doc.add(tomlkit.comment("Generated by `nemo-rl deps patches`; `why` and each record's note are ours and"))
    doc.add(tomlkit.comment("survive regeneration. Records hold facts (SHA, author, diffstat, patch-id), no code."))
    for key, value in (("distribution", index.distribution), ("fork-url", index.fork_url),
                       ("branch", index.branch or ""), ("pinned", index.pinned),
                       ("upstream-url", index.upstream_url or ""), ("upstream-branch", index.upstream_branch),
                       ("base", index.base)):
        doc[key] = value
    doc["why"] = tomlkit.string(index.why.strip() + "\n", multiline=True)
    commits = tomlkit.aot()
    for entry in index.commits:
        table = tomlkit.table()
        for key, value in entry.items():
            table[key] = value
        commits.append(table)
    doc["commit"] = commits
    return tomlkit.dumps(doc)
