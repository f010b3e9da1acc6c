"""Where a worker environment's interpreter writes bytecode: a directory of the environment only its owner may
open, never `__pycache__` beside the sources.

A worker importing a module for the first time writes `__pycache__/<module>.pyc` beside it, and under umask 002
Python makes that directory group-writable: a group member could plant a `.pyc` the next import runs. So every
environment gets PTH, which points `sys.pycache_prefix` at DIR (made mode 0700 with the environment: what Python
makes inside it is unreachable for others, whatever the umask); that holds for every way the interpreter starts
(a Ray worker, `create_local_venv`, the verification's own imports), unless PYTHONPYCACHEPREFIX names another.
The line names no path: it is the same for every environment.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from nemo_rl.project import state_dir

PTH = "00-nemo-rl-bytecode.pth"  # first of the .pth files: what the others import writes there too
DIR = ".nemo-rl-bytecode"
LINE = ("import os, sys; sys.pycache_prefix = sys.pycache_prefix or os.path.join(sys.prefix, "
        f"{DIR!r})  # nemo-rl: bytecode in a directory only the owner may open\n")


def install(env: Path, sites: list[Path]) -> None:
    """Give the environment `env` (its site-packages directories: `sites`) the private bytecode directory and
    line."""
    if not os.path.lexists(env / DIR):
        os.mkdir(env / DIR, 0o700)  # a umask only takes bits away
    for site in sites:
        if not os.path.lexists(site / PTH):
            state_dir.write_atomic(site / PTH, LINE, mode=0o644)


def problem(env: Path, sites: list[Path]) -> str | None:
    """What keeps bytecode from being private in `env`; None when nothing does."""
    try:
        info = os.lstat(env / DIR)
    except OSError:
        return f"it has no private bytecode directory {DIR}"
    if not stat.S_ISDIR(info.st_mode):  # guard: bytecode-its-directory-is-a-directory
        return f"its bytecode directory {DIR} is not a directory"
    for site in sites:
        try:
            if (site / PTH).read_bytes() != LINE.encode():  # guard: bytecode-the-pth-is-the-line-nemo-rl
                return f"{site / PTH} is not the line nemo-rl writes"
        except OSError:
            return f"{site / PTH} is missing or unreadable"
    return None
