"""Patch-ids and diffstats of many commits, from one diff of each: the work behind a fork's records.

Each diff is computed once, on every core (git diffs on one), written to a file and read back by `git patch-id`
and for the --stat blocks: a long branch's diffs are tens of MB, never passed through Python as text. The blobs
the diffs read must be in the cache already (`git_history.prefetch_diffs`): a missing one costs a request.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import tempfile
from pathlib import Path

from nemo_rl.forks.git_history import ZERO
from nemo_rl.git import git
from nemo_rl.process import in_background


def patch_ids(repo: Path, shas: list[str]) -> dict[str, str]:
    """sha -> `git patch-id --stable` of its first-parent diff (an empty diff: forty zeros), in two processes."""
    return {sha: found[0] for sha, found in _diff_pass(repo, shas, stats=False).items()}


def patch_ids_and_diffstats(repo: Path, shas: list[str]) -> dict[str, tuple[str, str]]:
    """sha -> (patch-id, diffstat) as `patch_ids` and `diffstats` give them, from one diff of each commit."""
    return _diff_pass(repo, shas, stats=True)


def _diff_pass(repo: Path, shas: list[str], *, stats: bool) -> dict[str, tuple[str, str]]:
    """The commits split over the machine's cores (diffing is CPU-bound: one git process uses one core), every
    other commit to each part so that large ones spread."""
    count = min(os.cpu_count() or 1, 4)
    parts = [part for part in (shas[n::count] for n in range(count)) if part]
    with contextlib.ExitStack() as running:  # a failure cancels the other parts
        others = [running.enter_context(in_background(lambda part=part: _diff_part(repo, part, stats=stats)))
                  for part in parts[1:]]
        result = _diff_part(repo, parts[0], stats=stats) if parts else {}
        for other in others:
            result |= other.result()
    return {sha: result[sha] for sha in shas}


def _diff_part(repo: Path, shas: list[str], *, stats: bool) -> dict[str, tuple[str, str]]:
    """One `git log -p` over `shas` into a file (tens of MB for a long branch: never through Python), read by
    `git patch-id`, which skips what precedes each diff: the --stat block `git log -p --stat` prints there."""
    if not shas:
        return {}
    with tempfile.TemporaryFile() as diffs:
        git(["log", "--no-walk=unsorted", "--first-parent", "-p", *(["--stat=100"] if stats else []), "-M",
             "--format=commit %H", "--stdin"], repo=repo, input_text="\n".join(shas) + "\n", stdout_file=diffs)
        diffs.seek(0)
        out = git(["patch-id", "--stable"], repo=repo, stdin_file=diffs).stdout
        blocks = {}
        if stats and os.fstat(diffs.fileno()).st_size:
            with mmap.mmap(diffs.fileno(), 0, access=mmap.ACCESS_READ) as text:
                blocks = _stat_blocks(text)
    found = dict(reversed(line.split()[:2]) for line in out.splitlines() if line.strip())
    return {sha: (found.get(sha, ZERO), blocks.get(sha, "")) for sha in shas}


def _stat_blocks(text: mmap.mmap) -> dict[str, str]:
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
