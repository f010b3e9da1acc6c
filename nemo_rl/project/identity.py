"""A random id per checkout in .nemo-rl/: two containers can hold different checkouts at one path."""

from __future__ import annotations

import contextlib
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
    try:
        state_dir.state_root(project)
    except NemoRLError:
        return None
    return _look(project)[0]


def _look(project: Path) -> tuple[str | None, bool]:
    """(the id, whether a file is at its place)."""
    try:
        text = values.read_plain_file(project / ID_FILE, limit=1024).decode()
    except FileNotFoundError:
        return None, False
    except (OSError, UnicodeDecodeError):
        return None, True
    return (text.strip(), True) if ID.fullmatch(text.strip()) else (None, True)


ATTEMPTS = 3


def ensure_checkout_id(project: Path) -> str:
    """This checkout's id, made when it has none; "" in a read-only checkout."""
    path = project / ID_FILE
    state_dir.state_root(project)  # guard: whose-a-nemo-rl-link-is-refused-before
    for attempt in range(ATTEMPTS + 1):
        found, present = _look(project)  # guard: whose-one-read-of-the-id-s-place-before
        if found is not None:
            return found
        if present:  # guard: whose-a-damaged-checkout-id-is-named
            raise NemoRLError(f"{path} is not a checkout id nemo-rl wrote", f"remove {path}")
        if attempt == ATTEMPTS:  # guard: whose-the-last-try-s-id-is-read-back
            break
        token = secrets.token_hex(16)
        tmp = path.with_name(f".{path.name}.{token}.tmp")
        try:
            state_dir.state_root(project, create=True)  # a link or a file there is refused, never followed
            tmp.write_text(token + "\n")
        except FileNotFoundError:
            continue  # another command removed the empty .nemo-rl meanwhile
        except OSError as exc:
            if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):  # guard: whose-a-read-only-checkout-builds
                return ""
            raise
        with contextlib.suppress(FileExistsError, FileNotFoundError):  # another build linked first: look again
            os.link(tmp, path)
        tmp.unlink(missing_ok=True)
    raise NemoRLError(f"cannot make {path}: it was removed after each of {ATTEMPTS} tries",  # guard: whose-an-id-never-kept-is-a-clear-error
                      f"run again once nothing else removes {path.parent}")
