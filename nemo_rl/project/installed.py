"""What an environment has installed, read from its site-packages without importing: each fork's commit (PEP 610),
and the modules whose import proves it."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from nemo_rl import extras, uv
from nemo_rl.extras import SYNC_REMEDY, Installed, commit_from_direct_url, find_installed, installed_on  # noqa: F401 (bundles lists every one)
from nemo_rl.project.lockfile import Fork

ENV_STALE = f"run `{uv.sync_command()}` (the environment has another commit than uv.lock)"


def site_packages_dirs(env: Path) -> list[Path]:
    return sorted(env.glob("lib*/python3*/site-packages"))


def site_packages(env: Path) -> list[str] | None:
    """Search path for `env`; None means the running interpreter's own sys.path."""
    if Path(sys.prefix).resolve() == env.resolve():
        return None
    return [str(p) for p in site_packages_dirs(env)]


def installed(env: Path, distribution: str) -> Installed | None:
    return find_installed(distribution, site_packages(env))


def modules_to_import(forks: Sequence[Fork], env: Path) -> list[str]:
    """The imports that prove `env`: Ray, and the module of each fork it has, and of transformer-engine when there."""
    present = {f.distribution for f in forks if installed(env, f.distribution)}
    present |= {c.distribution for c in extras.NOT_FORKS
                if c.distribution == "transformer-engine" and installed(env, c.distribution)}  # guard: proof-transformer-engine-imported-by-the
    return ["ray", *(c.module for c in extras.components(forks).values() if c.distribution in present)]


def distributions(env: Path) -> dict[str, Installed]:
    """Each distribution in `env` by PEP 503 name, read once."""
    return installed_on(site_packages(env))


def version(env: Path, distribution: str) -> str | None:
    found = installed(env, distribution)
    return found.version if found else None


def commit_mismatch(installed_commit: str | None, locked_commit: str | None) -> str | None:
    """The remedy when an installed fork is not the locked commit; None when it is."""
    if installed_commit == locked_commit:
        return None
    if installed_commit is None:
        return f"{SYNC_REMEDY} (installed without a git commit record)"
    return ENV_STALE
