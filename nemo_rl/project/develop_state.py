"""Which forks are being developed from a local checkout instead of the pin (`nemo-rl deps develop`).

The state lives in <project>/.nemo-rl/develop.json (git-ignored, never committed): pyproject.toml and
uv.lock stay untouched, and every environment made from the project reads this file to put the checkout
in front of the locked install.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from nemo_rl import git
from nemo_rl.errors import NemoRLError
from nemo_rl.project import landing

STATE = Path(landing.STAGING_ROOT) / "develop.json"


def read(project: Path) -> dict[str, dict]:
    path = project / STATE
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise NemoRLError(f"cannot read {path}: {exc}",
                          f"fix or delete {path} (then run `nemo-rl deps develop` again)") from exc
    if not isinstance(data, dict):
        raise NemoRLError(f"{path} is not a JSON object", f"delete {path} and run `nemo-rl deps develop` again")
    return data


def write(project: Path, state: dict[str, dict]) -> None:
    path = project / STATE
    if state:
        landing.write_atomic(path, json.dumps(state, indent=2, sort_keys=True) + "\n")
    else:
        path.unlink(missing_ok=True)


def checkout_facts(checkout: Path, pinned: str) -> dict:
    """HEAD of the checkout, how many commits it is ahead of the pin, and whether it has local changes."""
    head = git.rev_parse(checkout, "HEAD")
    return {"path": str(checkout), "head": head, "ahead": git.count(checkout, f"{pinned}..{head}"),
            "dirty": git.is_dirty(checkout)}


def status(project: Path, distribution: str, pinned: str) -> dict | None:
    entry = read(project).get(distribution)
    if not entry:
        return None
    checkout = Path(entry["path"])
    if not checkout.is_dir():
        return {"path": str(checkout), "head": None, "ahead": 0, "dirty": False, "missing": True}
    return checkout_facts(checkout, pinned)


def overlay_name(checkout: Path) -> str:
    return f"_nemo_rl_develop_{hashlib.sha256(str(checkout).encode()).hexdigest()[:12]}.pth"


def install_overlay(env: Path, checkout: Path) -> Path:
    """Put `checkout` in front of the locked install in `env`: a .pth line, the mechanism editable installs use,
    written outside uv's records so `uv sync` neither sees nor removes it and uv.lock never changes."""
    site = sorted(env.glob("lib/python3*/site-packages"))
    if not site:
        raise NemoRLError(f"{env} has no site-packages", "make it with `uv sync` first, then develop again")
    path = site[0] / overlay_name(checkout)
    landing.write_atomic(path, f"import sys; sys.path.insert(0, {str(checkout)!r})\n")
    return path


def remove_overlay(env: Path, checkout: Path) -> bool:
    found = False
    for path in env.glob(f"lib/python3*/site-packages/{overlay_name(checkout)}"):
        path.unlink()
        found = True
    return found


def project_environment(project: Path) -> Path:
    """The environment `uv run` and `uv sync` use for the project: $UV_PROJECT_ENVIRONMENT, else .venv."""
    setting = os.environ.get("UV_PROJECT_ENVIRONMENT")
    return Path(setting) if setting else project / ".venv"


def worker_overlays(checkout: Path, envs_dir: Path) -> list[Path]:
    return sorted(envs_dir.glob(f"*/lib/python3*/site-packages/{overlay_name(checkout)}"))
