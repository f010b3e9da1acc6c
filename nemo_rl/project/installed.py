"""The installed commit of each fork in an environment (PEP 610), read from its site-packages, no import;
and the one rule for an installed fork against the lock, shared by `deps status`, doctor and worker envs."""

from __future__ import annotations

import sys
from pathlib import Path

from nemo_rl.extras import SYNC_REMEDY, commit_from_direct_url, find_installed  # noqa: F401 (bundles lists every one)

ENV_STALE = "run `uv sync --extra mcore` (the environment has another commit than uv.lock)"


def site_packages_dirs(env: Path) -> list[Path]:
    """The site-packages directories of the environment at `env` (lib/ and lib64/ layouts alike)."""
    return sorted(env.glob("lib*/python3*/site-packages"))


def site_packages(env: Path) -> list[str] | None:
    """Search path for `env`; None means the running interpreter's own sys.path."""
    if Path(sys.prefix).resolve() == env.resolve():
        return None
    return [str(p) for p in site_packages_dirs(env)]


def installed(env: Path, distribution: str) -> tuple[bool, str | None, str | None]:
    """(installed, version, commit) of `distribution` in `env`."""
    found = find_installed(distribution, site_packages(env))
    return (True, found.version, found.commit) if found else (False, None, None)


def commit_mismatch(installed_commit: str | None, locked_commit: str | None) -> str | None:
    """The remedy when an installed fork is not the locked commit (None when it is). Full SHAs compared."""
    if installed_commit == locked_commit:
        return None
    if installed_commit is None:
        return f"{SYNC_REMEDY} (installed without a git commit record, so not from uv.lock's git source)"
    return ENV_STALE


def version_mismatch(distribution: str, installed_version: str | None, locked_version: str | None) -> str | None:
    """The problem and its fix when the installed fork's own version is not the one uv.lock says (None when it is):
    uv locked a [[tool.uv.dependency-metadata]] entry that is not what the fork builds."""
    if installed_version is None or locked_version is None or installed_version == locked_version:
        return None
    return (f"{distribution} {installed_version} is installed but uv.lock says {locked_version} (its "
            f"[[tool.uv.dependency-metadata]] entry is not what the fork builds): run `nemo-rl deps patches "
            f"{distribution}` (derives the entry and relocks), then `uv sync --locked --extra mcore`")


def metadata_problems(env: Path, distribution: str, locked_version: str | None, recorded: list[str] | None,
                      derived: list[str] | None) -> list[str]:
    """The installed fork against the lock and the recorded fork metadata, each a problem with its fix: another
    version, requirements the records do not have (they describe another build), a locked requirement missing."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    path = site_packages(env)
    dist = find_installed(distribution, path)
    if dist is None:
        return []
    problems = [p for p in [version_mismatch(distribution, dist.version, locked_version)] if p]

    def plain(lines) -> dict[str, str]:
        result: dict[str, str] = {}
        for line in lines or ():
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            if not (req.marker and "extra" in str(req.marker)):
                result[canonicalize_name(req.name)] = str(req)
        return result

    if recorded is not None:
        have, want = plain(dist.requires), plain(recorded)
        if have != want:
            changes = [f"+{have[n]}" for n in sorted(have.keys() - want.keys())]
            changes += [f"-{want[n]}" for n in sorted(want.keys() - have.keys())]
            changes += [f"~{have[n]}" for n in sorted(have.keys() & want.keys()) if have[n] != want[n]]
            problems.append(f"the installed {distribution} declares other requirements than patches/{distribution}/"
                            f"index.toml records ({', '.join(changes)}): run `nemo-rl deps patches {distribution}`, "
                            f"then `uv sync --locked --extra mcore`")
    for line in derived or ():
        req = Requirement(line)
        if req.marker and not req.marker.evaluate():
            continue
        if find_installed(req.name, path) is None:
            problems.append(f"{req.name}, which uv.lock requires for {distribution}, is not installed: run "
                            f"`uv sync --locked --extra mcore`")
    return problems
