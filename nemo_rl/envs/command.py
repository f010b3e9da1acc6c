"""`nemo-rl envs list | build | verify | prune`: the worker environments of this project."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from nemo_rl.workers.executables import PY_EXECUTABLES

NAMES = {"BASE": PY_EXECUTABLES.BASE, "MCORE": PY_EXECUTABLES.MCORE}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    envs = subparsers.add_parser(
        "envs", help="worker environments: list, build ahead of time, verify, prune stale ones",
        description="Worker environments live under $NEMO_RL_VENV_DIR (default venvs/ in the checkout), one per "
        "key: a hash of uv.lock, the sync flags, Python, platform and any developed fork. Build them ahead of time "
        "for images and offline nodes; prune removes stale ones no process is using.")
    verbs = envs.add_subparsers(dest="verb", required=True, metavar="VERB")
    for verb, text in (("list", "key, flags, current or stale against uv.lock, size, last use"),
                       ("build", "build (once) and verify the environment of a PY_EXECUTABLES value"),
                       ("verify", "verify the environment of a PY_EXECUTABLES value (it must exist)"),
                       ("prune", "remove stale environments no process is using")):
        p = verbs.add_parser(verb, help=text, description=text)
        p.add_argument("--project", type=Path, help="project directory (default: found from the current one)")
        if verb in ("build", "verify"):
            p.add_argument("py_executable", metavar="PY_EXECUTABLE",
                           help="BASE, MCORE, or a `uv run ...` string such as 'uv run --locked --extra mcore'")
        if verb == "list":
            p.add_argument("--json", action="store_true", help="machine-readable output")
        p.set_defaults(handler="nemo_rl.envs.command:run")


def _describe(row) -> str:
    used = time.strftime("%Y-%m-%d %H:%M", time.localtime(row.last_used)) if row.last_used else "never"
    state = row.state + (f" (in use: pid {', '.join(map(str, row.users))})" if row.users else "")
    whose = f"  of {row.project}" if row.state == "other checkout" and row.project else ""
    detail = f"  ({row.detail})" if row.detail else ""
    return (f"{row.key}  {state:<16}  {row.size_mb:>8.1f} MB  last used {used}  "
            f"{' '.join(row.flags) or '(no flags)'}  {row.path}{whose}{detail}")


def run(project: Path, args: argparse.Namespace) -> int:
    from nemo_rl import settings
    from nemo_rl.errors import UsageError
    from nemo_rl.jsonout import dumps
    from nemo_rl.workers import environments, executables, housekeeping

    if args.verb == "list":
        rows = housekeeping.listing(project)
        print(dumps(rows) if args.json else "\n".join(_describe(row) for row in rows)
              or f"no worker environments in {settings.venv_dir(create=False)}")
        return 0
    if args.verb == "prune":
        removed = housekeeping.prune(project)
        print("\n".join(f"removed {path}" for path in removed) or "nothing to prune")
        return 0
    py_executable = NAMES.get(args.py_executable, args.py_executable)
    if not py_executable.startswith("uv run"):
        raise UsageError(f"unknown PY_EXECUTABLE {args.py_executable!r}",
                         f"use one of {', '.join(NAMES)} or a `uv run ...` string")
    flags = executables.sync_flags(py_executable)
    if args.verb == "build":
        env = environments.ensure(project, flags)
    else:
        env = environments.describe(environments.slot(environments.key_for(project, flags)).path)
        if env is None:
            print(f"no environment for {' '.join(flags)} with this uv.lock: `nemo-rl envs build` makes it")
            return 1
        environments.verify(env, project)
    print(f"ok: {env.python}")
    return 0
