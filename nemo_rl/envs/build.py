"""`nemo-rl envs build`: build (offline from a bundle with --from) and verify an environment."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from nemo_rl import envs, values
from nemo_rl.errors import NemoRLError, UsageError
from nemo_rl.project.model import Project

REEXEC = "NEMO_RL_DRIVER_MADE"  # the `.venv` the bootstrap made, for the process it becomes
HELP = "build (once) and verify the environment of a PY_EXECUTABLE; --from builds it offline from a bundle"
DESCRIPTION = HELP


def add_arguments(parser: argparse.ArgumentParser) -> None:
    envs.common(parser, py_executable=True)
    parser.add_argument("--from", dest="bundle", metavar="DIR", type=values.path_argument,
                        help="build from this bundle, offline; run with `uv run --no-project`, it makes .venv too")
    parser.add_argument("--digest", metavar="SHA256",
                        help="with --from: the digest `envs pack` printed; any other bundle is refused (under "
                        "NEMO_RL_BUNDLE_DIR: NEMO_RL_BUNDLE_DIGESTS, separated by commas, semicolons or spaces)")


def _without_driver(project: Path) -> bool:
    """Whether nemo-rl runs in no environment, or in a checkout `.venv` without Ray or half-made."""
    from nemo_rl.project import installed
    from nemo_rl.workers import bundles

    if sys.prefix == sys.base_prefix:
        return True
    here = Path(sys.prefix).resolve()
    if here != bundles.driver_path(project).resolve():
        return False
    if installed.version(here, "ray") and not bundles.driver_unfinished(project).exists():  # guard: node-a-checkout-venv-without-ray-is-made
        return False
    if os.environ.get(REEXEC) == str(here):  # guard: node-the-bootstrap-runs-once-never-in-a
        raise NemoRLError(f"the checkout's environment {here} has no Ray after it was made from the bundle",
                          "pack the bundle again on the builder")
    return True


def _bootstrap(project: Project, flags: list[str], args: argparse.Namespace, digest: str | None) -> int:
    """Make the checkout's `.venv` from the bundle, then run again in it, pinned to the checked digest."""
    from nemo_rl.workers import bundles

    manifest = bundles.build_driver(args.bundle, project, flags, digest)
    python = bundles.driver_path(project.root) / "bin" / "python"
    argv = [str(python), "-m", "nemo_rl", "envs", "build", args.py_executable, "--from", str(args.bundle.absolute()),  # guard: node-v-goes-on-after-the-bootstrap
            "--digest", manifest.digest, "--project", str(project.root),
            *(["-v"] if getattr(args, "verbose", False) else [])]
    sys.stdout.flush()
    sys.stderr.flush()
    os.environ[REEXEC] = str(bundles.driver_path(project.root).resolve())
    os.execv(python, argv)
    return 3  # not reached


def run(project: Project, args: argparse.Namespace) -> int:
    from nemo_rl.workers import environments

    flags = envs.flags(args.py_executable)
    if args.digest is not None and not args.bundle:
        raise UsageError("--digest pins the bundle given with --from", "add --from DIR")
    # `--digest "$UNSET"` is refused, never taken for no pin
    digest = values.bundle_digest(args.digest, "--digest") if args.digest is not None else None  # guard: an-empty-digest-is-a-refused-digest
    if args.bundle is not None and _without_driver(project.root):  # guard: bundles-the-node-makes-the-checkout-s
        return _bootstrap(project, flags, args, digest)
    env = environments.ensure(project, flags, bundle=args.bundle, digest=digest)
    print(f"ok: {env.python}")
    return 0
