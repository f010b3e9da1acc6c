"""Patch-ids and diffstats of many commits, from one diff of each: the work behind a fork's records.

Each diff is computed once, on every core (git diffs on one), written to a file and read back by `git patch-id`
and for the --stat blocks: a long branch's diffs are tens of MB, never passed through a pipe to Python. The blobs
the diffs read must be in the cache already (`git_history.fetch_for_diffs`): a missing one costs a request.
"""

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
    patch_id: str  # `git patch-id --stable` of the first-parent diff (an empty diff: forty zeros)
    diffstat: str  # its `--stat=100` block ("" when not asked for, or empty)


def patch_ids(repo: Path, shas: list[str]) -> dict[str, str]:
    """sha -> `git patch-id --stable` of its first-parent diff (an empty diff: forty zeros), in two processes."""
    return {sha: found.patch_id for sha, found in _diff_pass(repo, shas, stats=False).items()}


def patch_ids_and_diffstats(repo: Path, shas: list[str]) -> dict[str, Diff]:
    """sha -> its patch-id and diffstat, from one diff of each commit."""
    return _diff_pass(repo, shas, stats=True)


def _diff_pass(repo: Path, shas: list[str], *, stats: bool) -> dict[str, Diff]:
    """The commits split over the machine's cores (diffing is CPU-bound: one git process uses one core), every
    other commit to each part so that large ones spread. Each part's `git log -p` runs at once, then each part's
    `git patch-id`: child processes collected in turn, no threads."""
    count = min(os.cpu_count() or 1, 4)
    parts = [part for part in (shas[n::count] for n in range(count)) if part]
    result: dict[str, Diff] = {}
    with contextlib.ExitStack() as running:  # a failure or an interruption ends the other parts
        diffs = [running.enter_context(tempfile.TemporaryFile()) for _ in parts]
        # each part's commits from a file, not a pipe: a pipe is only written while its child is waited for
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
        ids = [running.enter_context(git_start(["patch-id", "--stable"], repo=repo, stdin_file=diff))
               for diff in diffs]
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
    """sha -> its --stat block in `git log -p --stat --format='commit %H'` output: after each header line come
    `---`, the stat lines and an empty line (no stat line is empty), then the diff, whose lines never start
    with "commit " (they start with a space, +, -, @ or a header word)."""
    starts = [0]
    while (found := text.find(b"\ncommit ", starts[-1])) >= 0:
        starts.append(found + 1)
    result = {}
    for start, end in zip(starts, [*starts[1:], len(text)], strict=True):
        header_end = text.find(b"\n", start, end)
        if header_end < 0 or text[header_end + 1:header_end + 5] != b"---\n":
            continue  # an empty diff: no stat block
        stat_end = text.find(b"\n\n", header_end + 5, end)
        sha = text[start + len(b"commit "):header_end].decode()
        result[sha] = text[header_end + 5:end if stat_end < 0 else stat_end].decode(errors="replace").strip("\n")
    return result
