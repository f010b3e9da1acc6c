"""Bundle digests a site pins, and where a node's bundle copies live under $NEMO_RL_VENV_DIR."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from nemo_rl import locks, values
from nemo_rl.errors import NemoRLError


def pinned_digests() -> set[str]:
    """The digests in $NEMO_RL_BUNDLE_DIGESTS; empty when unset (any bundle matching its manifest)."""
    setting = os.environ.get("NEMO_RL_BUNDLE_DIGESTS")
    if setting is None:
        return set()
    found = values.bundle_digests(setting, "NEMO_RL_BUNDLE_DIGESTS")
    if not found:  # guard: nemo-rl-bundle-digests-set-but-empty-is
        raise NemoRLError(f"NEMO_RL_BUNDLE_DIGESTS is set but holds no digest ({setting!r:.40})",
                          "set it to the digests `nemo-rl envs pack` printed, or `unset NEMO_RL_BUNDLE_DIGESTS`")
    return found


def digest_argument(value: str) -> str:
    return values.bundle_digest(value, "--digest")


NODE_COPY_PREFIX = ".bundle-copy-"  # a checked copy of a bundle's cache (bundle_copy), holding MARKER and CACHE
CACHE = "uv-cache"
MARKER = "nemo-rl-node-copy"


def new_copy_dir(root: Path) -> tuple[Path, int]:
    """A new node copy's directory under `root`, marked, and held by the returned descriptor."""
    for attempt in range(3):
        copy = Path(tempfile.mkdtemp(prefix=NODE_COPY_PREFIX, dir=root))  # guard: never-a-node-copy-of-its-own
        held = -1
        try:  # held, then marked: an empty unmarked one is a killed build's
            held = locks.hold(copy)
            fd = os.open(copy / MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            break
        except FileNotFoundError:  # a prune took it before the lock
            if held >= 0:
                os.close(held)
            if attempt == 2:
                raise
    try:
        os.write(fd, f"a node's copy of a bundle (pid {os.getpid()})\n".encode())
        os.close(fd)
        (copy / CACHE).mkdir()
    except BaseException:
        os.close(held)
        shutil.rmtree(copy, ignore_errors=True)
        raise
    return copy, held
