"""Which checkout this is, beyond its path. Two containers can hold different checkouts at one path, share
NEMO_RL_VENV_DIR and repeat PIDs, and neither sees the other's processes in /proc: a path alone cannot tell
whose a worker environment is. Each checkout gets a random id in its git-ignored .nemo-rl/ the first time it
builds an environment; the environment records it, and only the checkout holding that id calls it stale.
A copy of a checkout that copies .nemo-rl/ keeps the id: it is the same checkout to nemo-rl.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
from pathlib import Path

from nemo_rl import values
from nemo_rl.errors import NemoRLError
from nemo_rl.project import state_dir

ID_FILE = Path(state_dir.STAGING_ROOT) / "checkout-id"
ID = re.compile(r"[0-9a-f]{32}")  # fullmatch: `$` would take a final newline


def checkout_id(project: Path) -> str | None:
    """This checkout's id; None when it has none yet or the file is not one nemo-rl wrote (then every
    environment that records an id is another checkout's: kept, never pruned)."""
    try:
        state_dir.state_root(project)  # a .nemo-rl link: another directory's id is not this checkout's
        text = values.read_plain_file(project / ID_FILE, limit=1024).decode()
    except (OSError, UnicodeDecodeError, NemoRLError):  # missing, planted (a link, a FIFO) or unreadable
        return None
    return text.strip() if ID.fullmatch(text.strip()) else None


def ensure_checkout_id(project: Path) -> str:
    """This checkout's id, made when it has none; "" where none can be written (a read-only checkout, as in an
    image: its environments are then this path's, as those built before ids). Two builds at once agree: the id
    is linked into place, which fails when the other got there first, and then theirs is read."""
    if (found := checkout_id(project)) is not None:
        return found
    path = project / ID_FILE
    if os.path.lexists(path):  # one look: another build may link the id in at any moment after it
        if (found := checkout_id(project)) is not None:  # linked since the first read
            return found
        raise NemoRLError(f"{path} is not a checkout id nemo-rl wrote (32 hex digits in a plain file)",
                          f"remove {path}: a new id is made (environments built with the old one are then "
                          "listed as another checkout's: remove them with `rm -rf`)")
    token = secrets.token_hex(16)
    tmp = path.with_name(f".{path.name}.{token}.tmp")
    try:
        state_dir.state_root(project, create=True)  # a link or a file there is refused, never followed
        tmp.write_text(token + "\n")
    except OSError as exc:
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return ""  # a checkout this user may not write: no id, and nothing of it is changed
        raise
    try:
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    finally:
        tmp.unlink(missing_ok=True)
    found = checkout_id(project)
    if found is None:
        raise NemoRLError(f"cannot read {path} just written", f"remove {path}, then run again")
    return found
