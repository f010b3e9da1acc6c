"""Patch-ids and diffstats of many commits, on several cores."""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from nemo_rl.forks.git_history import ZERO
from nemo_rl.git import git_start


@dataclass(frozen=True)
class Diff:
    patch_id: str
    diffstat: str


def patch_ids(repo: Path, shas: list[str]) -> dict[str, str]:
    """sha -> `git patch-id --stable` of its first-parent diff."""
    return {sha: found.patch_id for sha, found in _diff_pass(repo, shas, stats=False).items()}


def patch_ids_and_diffstats(repo: Path, shas: list[str]) -> dict[str, Diff]:
    """sha -> its patch-id and diffstat."""
    return _diff_pass(repo, shas, stats=True)


def _diff_pass(repo: Path, shas: list[str], *, stats: bool) -> dict[str, Diff]:
    """`git log -p` in up to four processes, then `git patch-id` on each."""
    count = min(os.cpu_count() or 1, 4)
    parts = [part for part in (shas[n::count] for n in range(count)) if part]
    result: dict[str, Diff] = {}
    with contextlib.ExitStack() as running:
        diffs = [running.enter_context(tempfile.TemporaryFile()) for _ in parts]
        # a file, not a pipe: a pipe is only written while its child is waited for
        inputs = [running.enter_context(tempfile.TemporaryFile()) for _ in parts]
        for part, listing in zip(parts, inputs, strict=True):
            listing.write(("\n".join(part) + "\n").encode())
            listing.seek(0)
        logs = [running.enter_context(git_start(
            ["log", "--no-walk=unsorted", "--first-parent", "-p", *(["--stat=100"] if stats else []), "-M",
             "--format=commit %H", "--stdin"], repo=repo, stdin_file=listing, stdout_file=diff))
            for listing, diff in zip(inputs, diffs, strict=True)]
        for log in logs:
            log.wait()
        for diff in diffs:
            diff.seek(0)
        ids = [running.enter_context(git_start(["patch-id", "--stable"], repo=repo, stdin_file=diff)) for diff in diffs]
        for part, diff, patch_id in zip(parts, diffs, ids, strict=True):
            found: dict[str, str] = {}
            for line in patch_id.wait().stdout.splitlines():
                if line.strip():
                    pid, sha = line.split()[:2]
                    found[sha] = pid
            diff.seek(0)
            blocks = _stat_blocks(diff.read()) if stats else {}
            result |= {sha: Diff(found.get(sha, ZERO), blocks.get(sha, "")) for sha in part}
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
