"""Checks for values read from files or typed by users, applied once where they are read: a value that passes
is safe to hand to git (it cannot be read as an option) and to join to a path (it cannot leave its root)."""

from __future__ import annotations

import re
from pathlib import Path

from nemo_rl.errors import NemoRLError

FULL_SHA = re.compile(r"^[0-9a-f]{40}$")
# PEP 508 distribution names (PEP 503 normalises them): letters, digits, '.', '_', '-', starting and ending
# with a letter or digit, so never '..', '/', or a leading '-'.
DISTRIBUTION_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
# What git's check-ref-format allows, minus what could be read as an option or escape a ref namespace.
_BRANCH_BAD = re.compile(r"(^[-/.])|(\.\.)|(//)|([\x00-\x20\x7f~^:?*\[\\])|(@\{)|(\.lock$)|(/$)|(\.$)")
_URL = re.compile(r"^(https?|ssh|git|file)://[^\s]+$|^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^\s-][^\s]*$")


def distribution_name(value: str, where: str) -> str:
    if not DISTRIBUTION_NAME.match(value):
        raise NemoRLError(f"{where}: {value!r} is not a distribution name (letters, digits, '.', '_', '-')",
                          f"fix {where}: fork keys are distribution names such as megatron-core")
    return value


def full_sha(value: str, where: str) -> str:
    if not FULL_SHA.match(value):
        raise NemoRLError(f"{where}: {value!r:.60} is not a full 40-hex commit SHA",
                          f"write the full SHA in {where} (`git rev-parse <rev>` in a clone of the fork)")
    return value


def branch_name(value: str, where: str) -> str:
    if not value or _BRANCH_BAD.search(value):
        raise NemoRLError(f"{where}: {value!r:.60} is not a usable branch name",
                          "use the branch's plain name, e.g. main or user/topic")
    return value


def git_url(value: str, where: str) -> str:
    """A fork or upstream URL: a URL git may fetch by itself, never an option or a transport helper (ext::)."""
    if not _URL.match(value):
        raise NemoRLError(f"{where}: {value!r:.80} is not a git URL nemo-rl will fetch",
                          "use an https://, ssh://, git:// or file:// URL, or user@host:path")
    return value


def inside(root: Path, relative: str | Path, where: str) -> Path:
    """`root / relative`, proven to stay inside `root` after resolving links and '..'."""
    path = (root / relative).resolve()
    if not path.is_relative_to(root.resolve()) or path == root.resolve():
        raise NemoRLError(f"{where}: {str(relative)!r:.80} points outside {root}",
                          f"fix or delete {where}: it must name a path inside {root}")
    return path
