"""Stable patch-ids and diffstats of many commits at once, the ids cached per repository."""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from nemo_rl import codec
from nemo_rl.forks import git_history
from nemo_rl.git import git_start

CACHE, VERSION = "nemo-rl-patch-ids.json", 1


@dataclass(frozen=True)
class Diff:
    patch_id: str
    diffstat: str


@dataclass(frozen=True)
class PatchIds:
    ids: dict[str, str]


def _read(repo: Path) -> dict[str, str]:
    record = codec.read(repo / CACHE, PatchIds, VERSION)
    return record.ids if record else {}


def cached(repo: Path, remote: str, shas: list[str]) -> dict[str, str]:
    """sha -> `git patch-id --stable`, blobs fetched from `remote`."""
    known = _read(repo)
    todo = [sha for sha in dict.fromkeys(shas) if sha not in known]
    if todo:
        git_history.fetch_for_diffs(repo, remote, todo)
        known = _read(repo) | {sha: diff.patch_id for sha, diff in diffs(repo, todo, stats=False).items()}
        codec.write(repo / CACHE, PatchIds(known), VERSION)
    return {sha: known[sha] for sha in shas}


def with_diffstats(repo: Path, shas: list[str]) -> dict[str, Diff]:
    """sha -> its patch-id and diffstat; the blobs must be fetched."""
    found = diffs(repo, shas)
    known = _read(repo)
    if any(sha not in known for sha in found):
        codec.write(repo / CACHE, PatchIds(known | {sha: diff.patch_id for sha, diff in found.items()}), VERSION)
    return found


def diffs(repo: Path, shas: list[str], *, stats: bool = True) -> dict[str, Diff]:
    """sha -> the stable patch-id and diffstat of its first-parent diff, in up to four processes."""
    count = min(os.cpu_count() or 1, 4)
    parts = [part for part in (shas[n::count] for n in range(count)) if part]
    result: dict[str, Diff] = {}
    with contextlib.ExitStack() as running:
        outputs = [running.enter_context(tempfile.TemporaryFile()) for _ in parts]
        # a file, not a pipe: a pipe is only written while its child is waited for
        inputs = [running.enter_context(tempfile.TemporaryFile()) for _ in parts]
        for part, listing in zip(parts, inputs, strict=True):
            listing.write(("\n".join(part) + "\n").encode())
            listing.seek(0)
        logs = [running.enter_context(git_start(
            ["log", "--no-walk=unsorted", "--first-parent", "-p", *(["--stat=100"] if stats else []), "-M",
             "--format=commit %H", "--stdin"], repo=repo, stdin_file=listing, stdout_file=diff))
            for listing, diff in zip(inputs, outputs, strict=True)]
        for log in logs:
            log.wait()
        for diff in outputs:
            diff.seek(0)
        ids = [running.enter_context(git_start(["patch-id", "--stable"], repo=repo, stdin_file=diff))
               for diff in outputs]
        for part, diff, patch_id in zip(parts, outputs, ids, strict=True):
            found = {line.split()[1]: line.split()[0] for line in patch_id.wait().stdout.splitlines() if line.strip()}
            diff.seek(0)
            blocks = _stat_blocks(diff.read()) if stats else {}
            result |= {sha: Diff(found.get(sha, git_history.ZERO), blocks.get(sha, "")) for sha in part}
    return {sha: result[sha] for sha in shas}


def _stat_blocks(text: bytes) -> dict[str, str]:
    starts = [0]
    while (found := text.find(b"\ncommit ", starts[-1])) >= 0:
        starts.append(found + 1)
    result = {}
    for start, end in zip(starts, [*starts[1:], len(text)], strict=True):
        header_end = text.find(b"\n", start, end)
        if header_end < 0 or text[header_end + 1:header_end + 5] != b"---\n":
            continue
        stat_end = text.find(b"\n\n", header_end + 5, end)
        sha = text[start + len(b"commit "):header_end].decode()
        result[sha] = text[header_end + 5:end if stat_end < 0 else stat_end].decode(errors="replace").strip("\n")
    return result
