"""What an environment has installed, read from its metadata without importing."""

from __future__ import annotations

import sys
from pathlib import Path

from nemo_rl.extras import SYNC_REMEDY, Installed, commit_from_direct_url, find_installed, installed_on  # noqa: F401 (bundles lists every one)

ENV_STALE = f"{SYNC_REMEDY} (the environment has another commit than uv.lock)"


def site_packages_dirs(env: Path) -> list[Path]:
    return sorted(env.glob("lib*/python3*/site-packages"))


def site_packages(env: Path) -> list[str] | None:
    """Search path for `env`; None for the running interpreter's sys.path."""
    if Path(sys.prefix).resolve() == env.resolve():
        return None
    return [str(p) for p in site_packages_dirs(env)]


def installed(env: Path, distribution: str) -> Installed | None:
    return find_installed(distribution, site_packages(env))


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
