"""The installed commit of each fork in an environment (PEP 610), read from its site-packages, no import."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

from nemo_rl.extras import commit_from_direct_url


def site_packages(env: Path) -> list[str] | None:
    """Search path for `env`; None means the running interpreter's own sys.path."""
    if Path(sys.prefix).resolve() == env.resolve():
        return None
    return [str(p) for p in sorted(env.glob("lib*/python3*/site-packages"))]


def installed(env: Path, distribution: str) -> tuple[bool, str | None, str | None]:
    """(installed, version, commit) of `distribution` in `env`."""
    path = site_packages(env)
    # importlib.metadata normalises the name (megatron-core finds megatron_core-*.dist-info)
    found = importlib.metadata.distributions(name=distribution, **({"path": path} if path is not None else {}))
    dist = next(iter(found), None)
    if dist is None:
        return False, None, None
    return True, dist.version, commit_from_direct_url(dist.read_text("direct_url.json"))
