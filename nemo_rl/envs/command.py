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


def run(project: Path, args: argparse.Namespace) -> int:
    from nemo_rl import settings
    from nemo_rl.jsonout import dumps
    from nemo_rl.workers import environments, executables

    if args.verb == "list":
        rows = environments.listing(project)
        if args.json:
            print(dumps(rows))
        for row in rows if not args.json else []:
            used = time.strftime("%Y-%m-%d %H:%M", time.localtime(row["last_used"])) if row["last_used"] else "never"
            print(f"{row['key']}  {row['state']:<7}  {row['size_mb']:>8.1f} MB  last used {used}  "
                  f"{' '.join(row['flags']) or '(no flags)'}  {row['path']}")
        if not rows:
            print(f"no worker environments in {settings.venv_dir(create=False)}")
        return 0
    if args.verb == "prune":
        removed = environments.prune(project)
        print("\n".join(f"removed {path}" for path in removed) or "nothing to prune")
        return 0
    flags = executables.sync_flags(NAMES.get(args.py_executable, args.py_executable))
    if args.verb == "build":
        env = environments.ensure(project, flags)
    else:
        env = environments.describe(settings.venv_dir() / environments.key_for(project, flags))
        if env is None:
            print(f"no environment for {' '.join(flags)} with this uv.lock: `nemo-rl envs build` makes it")
            return 1
        environments.verify(env, project)
    print(f"ok: {env.python}")
    return 0
