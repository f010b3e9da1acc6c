"""`nemo-rl deps status`: pinned vs locked vs installed commit of every fork. No network, no imports."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from nemo_rl.deps import environment, lockfile, patch_records
from nemo_rl.errors import NemoRLError

REMEDIES = {
    "lock stale": "run `uv lock --upgrade-package {dist}` (pyproject's rev differs from uv.lock)",
    "env stale": "run `uv sync --extra mcore` (the environment has another commit than uv.lock)",
    "not installed": "run `uv sync --extra mcore` if you need it",
    "ok": None,
}
STALE = {"lock stale", "env stale"}


def commit_mismatch(installed_commit: str | None, locked_commit: str) -> str | None:
    """The remedy when an installed fork is not the locked commit (None when it is). Shared with doctor."""
    if installed_commit == locked_commit:
        return None
    if installed_commit is None:
        return ("run `uv sync --extra mcore` (installed without a git commit record, "
                "so not from uv.lock's git source)")
    return REMEDIES["env stale"]


def fork_status(project: Path, env: Path, fork: lockfile.Fork, locked: dict) -> dict:
    package = locked.get(fork.distribution)
    locked_commit = package.commit if package else None
    present, version, installed_commit = environment.installed(env, fork.distribution)
    index = patch_records.read_index(project / "patches" / fork.distribution)
    mismatch = commit_mismatch(installed_commit, locked_commit)
    if locked_commit != fork.rev:
        state = "lock stale"
    elif not present:
        state = "not installed"
    else:
        state = "env stale" if mismatch else "ok"
    remedy = mismatch if state == "env stale" else REMEDIES[state]
    return {
        "distribution": fork.distribution,
        "url": fork.url,
        "branch": fork.branch,
        "pinned_rev": fork.rev,
        "locked_commit": locked_commit,
        "installed_commit": installed_commit,
        "installed_version": version,
        "upstream_url": fork.upstream_url,
        "upstream_base": fork.base,
        "downstream_commits": len(index.commits) if index else None,
        "state": state,
        "remedy": remedy.format(dist=fork.distribution) if remedy else None,
    }


def collect(project: Path, env: Path) -> list[dict]:
    locked = lockfile.locked_packages(project)
    return [fork_status(project, env, fork, locked) for fork in lockfile.forks(project)]


def render(rows: list[dict]) -> str:
    short = lambda sha: sha[:12] if sha else "-"  # noqa: E731
    lines = []
    for row in rows:
        lines += [
            f"{row['distribution']}: {row['state']}",
            f"  fork       {row['url']} ({row['branch'] or 'no branch recorded'})",
            f"  pinned     {short(row['pinned_rev'])}   locked {short(row['locked_commit'])}"
            f"   installed {short(row['installed_commit']) if row['installed_version'] else 'not installed'}",
            f"  upstream   {row['upstream_url'] or '-'} base {short(row['upstream_base'])}, "
            f"{'?' if row['downstream_commits'] is None else row['downstream_commits']} downstream commit(s) "
            "in patches/",
        ]
        if row["remedy"]:
            lines.append(f"  fix        {row['remedy']}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    project = lockfile.find_project(args.project)
    env = Path(args.env) if args.env else Path(sys.prefix)
    if not (env / "pyvenv.cfg").exists() and env.resolve() != Path(sys.prefix).resolve():
        raise NemoRLError(f"{env} is not a Python environment (no pyvenv.cfg)",
                          "pass the directory of a virtual environment, e.g. --env .venv")
    rows = collect(project, env)
    if args.json:
        print(json.dumps({"schema": 1, "project": str(project), "environment": str(env), "forks": rows}, indent=2))
    else:
        print(render(rows))
    if args.check and any(row["state"] in STALE for row in rows):
        return 1
    return 0
