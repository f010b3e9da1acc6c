"""`nemo-rl envs list | build | verify | prune | pack`: the worker environments of this project."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path

from nemo_rl import values, verbose
from nemo_rl.workers.executables import PY_EXECUTABLES

NAMES = {"BASE": PY_EXECUTABLES.BASE, "MCORE": PY_EXECUTABLES.MCORE}
REEXEC = "NEMO_RL_DRIVER_MADE"  # set by the bootstrap for the process it becomes: the `.venv` it made
VERBS = (
    ("list", "every environment and bundle: key, state, in use, size, last use"),
    ("build", "build (once) and verify the environment of a PY_EXECUTABLE; --from builds it offline from a bundle"),
    ("verify", "verify the environment of a PY_EXECUTABLE (it must exist)"),
    ("prune", "remove this checkout's stale environments and killed builds that no process uses (broken ones, "
              "whose owner nothing proves, are listed with the command that removes them)"),
    ("pack", "make a bundle: what a node with no network and no compiler needs to build the environment"),
)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    envs = subparsers.add_parser(
        "envs", help="worker environments: list, build ahead of time, verify, prune, pack for offline nodes",
        description="Worker environments live under $NEMO_RL_VENV_DIR (default venvs/ in the checkout), one per "
        "key: a hash of the checkout's path, uv.lock, the sync flags, Python, platform and any developed fork. "
        "Build them ahead of time for images; pack a bundle on a builder for nodes without internet "
        "(docs/workers.md).")
    verbose.add(envs)  # `nemo-rl envs -v VERB` as `nemo-rl envs VERB -v`
    verbs = envs.add_subparsers(dest="verb", required=True, metavar="VERB")
    for verb, text in VERBS:
        p = verbs.add_parser(verb, help=text, description=text)
        p.add_argument("--project", type=values.path_argument,
                       help="project directory (default: found from the current one)")
        verbose.add(p)  # guard: fast-envs-verbs-take-v
        if verb in ("build", "verify", "pack"):
            p.add_argument("py_executable", metavar="PY_EXECUTABLE",
                           help="BASE, MCORE, or a `uv run ...` string such as 'uv run --locked --extra mcore'")
        if verb == "pack":
            p.add_argument("bundle", metavar="DIR", type=values.path_argument,
                           help="the bundle directory to make (must not exist)")
            p.add_argument("--no-seed", action="store_true",
                           help="build every sdist again in the pack's fresh cache instead of seeding it with the "
                           "wheels uv built here in your own uv cache (docs/mcore.md)")
        if verb == "build":
            p.add_argument("--from", dest="bundle", metavar="DIR", type=values.path_argument,
                           help="build from this bundle, offline (it is checked first; it may be read-only); run "
                           "without an environment (`uv run --no-project`), it makes the checkout's .venv too")
            p.add_argument("--digest", metavar="SHA256",
                           help="with --from: the bundle digest `envs pack` printed (sha256: and 64 hex digits, "
                           "either case; bare hex is sha256); any other bundle is refused (for bundles under "
                           "NEMO_RL_BUNDLE_DIR: NEMO_RL_BUNDLE_DIGESTS, digests separated by commas, semicolons or "
                           "spaces)")
        if verb == "list":
            p.add_argument("--json", action="store_true", help="machine-readable output")
        p.set_defaults(handler="nemo_rl.envs.command:run")


def _describe(row) -> str:
    """One line of `envs list`: its fields come from files in a shared directory, shown, never acted on."""
    from nemo_rl import values

    used = time.strftime("%Y-%m-%d %H:%M", time.localtime(row.last_used)) if row.last_used else "never"
    state = row.state + (f" (in use: pid {', '.join(map(str, row.users))})" if row.users else "")
    whose = f"  of {row.project}" if row.state == "other checkout" and row.project else ""
    detail = f"  ({row.detail})" if row.detail else ""
    return values.printable(f"{row.key}  {state:<16}  {row.size_mb:>8.1f} MB  last used {used}  "  # guard: terminal-envs-list-lines-show-escapes
                            f"{' '.join(row.flags) or '(no flags)'}  {row.path}{whose}{detail}")


def _flags(py_executable: str) -> list[str]:
    from nemo_rl.errors import UsageError
    from nemo_rl.workers import executables

    command = NAMES.get(py_executable, py_executable)
    if not command.startswith("uv run"):
        raise UsageError(f"unknown PY_EXECUTABLE {py_executable!r}", f"use one of {', '.join(NAMES)} or a "
                         "`uv run ...` string")
    return executables.sync_flags(command)


def _without_driver(project: Path) -> bool:
    """Whether nemo-rl runs outside a working driver environment: in no environment (`uv run --no-project`), or in
    the checkout's own `.venv` while it lacks Ray or a build of it was killed midway (bundles.driver_unfinished;
    `uv run --no-project` picks such a `.venv` over the base Python). The bootstrap makes `.venv` exact and
    removes the mark last; in one it has made, this is never asked again (REEXEC), so a `.venv` the bootstrap
    cannot repair is an error, not a loop."""
    from nemo_rl.errors import NemoRLError
    from nemo_rl.project import installed
    from nemo_rl.workers import bundles

    if sys.prefix == sys.base_prefix:
        return True
    here = Path(sys.prefix).resolve()
    if here != bundles.driver_path(project).resolve():
        return False
    unfinished = bundles.driver_unfinished(project).exists()  # a build killed midway: Ray may be in, not the rest
    if installed.installed(here, "ray") and not unfinished:  # guard: node-a-checkout-venv-without-ray-is-made
        return False
    if os.environ.get(REEXEC) == str(here):  # guard: node-the-bootstrap-runs-once-never-in-a
        raise NemoRLError(f"the checkout's environment {here} has no Ray after it was made from the bundle",
                          "pack the bundle again on the builder (Ray is a base dependency: the bundle's driver "
                          "packages hold it)")
    return True


def _bootstrap(project: Path, flags: list[str], args: argparse.Namespace, digest: str | None) -> int:
    """No environment runs nemo-rl yet (`uv run --no-project` on a node with only the checkout): make the
    checkout's `.venv` from the bundle, then go on in it, where the driver's Ray is what workers are checked
    against. The bundle was checked a moment ago: the rest runs with its digest as the trusted one."""
    from nemo_rl.workers import bundles

    manifest = bundles.build_driver(args.bundle, project, flags, digest)
    python = bundles.driver_path(project) / "bin" / "python"
    argv = [str(python), "-m", "nemo_rl", "envs", "build", args.py_executable, "--from", str(args.bundle.absolute()),  # guard: node-v-goes-on-after-the-bootstrap
            "--digest", manifest.digest, "--project", str(project),
            *(["-v"] if getattr(args, "verbose", False) else [])]
    sys.stdout.flush()
    sys.stderr.flush()
    os.environ[REEXEC] = str(bundles.driver_path(project).resolve())
    os.execv(python, argv)
    return 3  # not reached: execv replaces this process


def run(project: Path, args: argparse.Namespace) -> int:
    from nemo_rl import settings, values
    from nemo_rl.jsonout import dumps
    from nemo_rl.workers import bundle_pack, environments, housekeeping

    if args.verb == "list":
        rows, packed = housekeeping.listing(project), housekeeping.bundle_rows(project)
        if args.json:
            print(dumps({"environments": rows, "bundles": packed}))
            return 0
        print("\n".join(_describe(row) for row in rows) or f"no worker environments in {settings.venv_dir(False)}")
        for row in packed:  # a manifest's fields: shown, never acted on
            print(values.printable(f"bundle {row.path.name}  {row.state:<7}  {row.size_mb:>8.1f} MB  "
                                   f"{' '.join(row.flags)}  {row.path}" + (f"  ({row.detail})" if row.detail else "")))
        return 0
    if args.verb == "prune":
        rows = housekeeping.listing(project)
        removed = housekeeping.prune(project, rows)
        print("\n".join(f"removed {path}" for path in removed) or "nothing to prune")
        for entry in rows:  # prune never removes a broken one
            if entry.state == "broken":
                print(values.printable(f"left {entry.path} (broken): {entry.detail}"))
        return 0
    flags = _flags(args.py_executable)
    if args.verb == "pack":
        manifest = bundle_pack.pack(project, flags, args.bundle, seed=not args.no_seed)
        print(f"bundle {args.bundle}: {manifest.files} files, {manifest.bytes / 1e6:.1f} MB, {manifest.digest}")
        print("  on a node, in the checkout: `uv run --no-project --offline python -m nemo_rl envs build "
              f"{shlex.quote(args.py_executable)} --from {shlex.quote(str(args.bundle.absolute()))} --digest "
              f"{manifest.digest}`, or set NEMO_RL_BUNDLE_DIR to its parent directory and NEMO_RL_BUNDLE_DIGESTS to "
              "the digests you trust")
        return 0
    if args.verb == "build":
        if args.digest is not None and not args.bundle:
            from nemo_rl.errors import UsageError

            raise UsageError("--digest pins the bundle given with --from", "add --from DIR, or pin bundles under "
                             "NEMO_RL_BUNDLE_DIR with NEMO_RL_BUNDLE_DIGESTS")
        from nemo_rl.workers import bundle_trust

        # `--digest ""` (an unset variable: `--digest "$DIGEST"`) is refused, never taken for no pin
        digest = bundle_trust.digest_argument(args.digest) if args.digest is not None else None  # guard: an-empty-digest-is-a-refused-digest
        if args.bundle is not None and _without_driver(project):  # guard: bundles-the-node-makes-the-checkout-s
            return _bootstrap(project, flags, args, digest)
        env = environments.ensure(project, flags, bundle=args.bundle, digest=digest)
    else:
        found = environments.describe(environments.slot(environments.key_for(project, flags)).path)
        if found is None:
            print(f"no environment for {' '.join(flags)} with this uv.lock: `nemo-rl envs build` makes it")
            return 1
        env = found
        environments.verify(env, project)
    print(f"ok: {env.python}")
    return 0
