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
    except NemoRLError:
        return None
    return _look(project)[0]


def _look(project: Path) -> tuple[str | None, bool]:
    """(the id, whether anything is at its place), from one read: a file another build links in, or a command
    removes, at any moment is seen as it was when read."""
    try:
        text = values.read_plain_file(project / ID_FILE, limit=1024).decode()
    except FileNotFoundError:
        return None, False
    except (OSError, UnicodeDecodeError):  # planted (a link, a FIFO), unreadable, or not text
        return None, True
    return (text.strip(), True) if ID.fullmatch(text.strip()) else (None, True)


ATTEMPTS = 3  # each one lost only to another command removing an empty .nemo-rl meanwhile


def ensure_checkout_id(project: Path) -> str:
    """This checkout's id, made when it has none; "" where none can be written (a read-only checkout, as in an
    image: its environments are then this path's, as those built before ids). Two builds at once agree: the id
    is linked into place, which fails when the other got there first, and then theirs is read."""
    path = project / ID_FILE
    state_dir.state_root(project)  # guard: whose-a-nemo-rl-link-is-refused-before; a .nemo-rl link is refused with its remedy, never read through
    for attempt in range(ATTEMPTS + 1):
        found, present = _look(project)  # guard: whose-one-read-of-the-id-s-place-before
        if found is not None:
            return found
        if present:  # guard: whose-a-damaged-checkout-id-is-named
            raise NemoRLError(f"{path} is not a checkout id nemo-rl wrote (32 hex digits in a plain file)",
                              f"remove {path}: a new id is made (environments built with the old one are then "
                              "listed as another checkout's: remove them with `rm -rf`)")
        if attempt == ATTEMPTS:  # guard: whose-the-last-try-s-id-is-read-back
            break  # the last look reads what the last try linked
        token = secrets.token_hex(16)
        tmp = path.with_name(f".{path.name}.{token}.tmp")
        try:
            state_dir.state_root(project, create=True)  # a link or a file there is refused, never followed
            tmp.write_text(token + "\n")
        except FileNotFoundError:
            continue  # a bump or recover in another terminal removed the empty .nemo-rl meanwhile: again
        except OSError as exc:
            if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):  # guard: whose-a-read-only-checkout-builds
                return ""  # a checkout this user may not write: no id, and nothing of it is changed
            raise
        try:
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass  # another build linked its id first: read below
            except FileNotFoundError:
                pass  # .nemo-rl removed with its files since the write (`rm -rf`): tried again
        finally:
            tmp.unlink(missing_ok=True)
    raise NemoRLError(f"cannot make {path}: {ATTEMPTS} tries, each time it was gone again before it was read",  # guard: whose-an-id-never-kept-is-a-clear-error
                      f"run again once nothing else removes {path.parent} (a `rm -rf .nemo-rl` in a loop?)")
