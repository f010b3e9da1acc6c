"""`nemo-rl envs pack`: a bundle to build the environment offline."""

from __future__ import annotations

import argparse

from nemo_rl import envs, values
from nemo_rl.errors import command
from nemo_rl.project.model import Project

HELP = "make a bundle: what a node with no network and no compiler needs to build the environment"
DESCRIPTION = HELP


def add_arguments(parser: argparse.ArgumentParser) -> None:
    envs.common(parser, py_executable=True)
    parser.add_argument("bundle", metavar="DIR", type=values.path_argument,
                        help="the bundle directory to make (must not exist)")
    parser.add_argument("--no-seed", action="store_true",
                        help="build every sdist again, not seeded from your uv cache's wheels")
    parser.add_argument("--import-timeout", metavar="SECONDS", type=float,
                        help="how long the import check of the packed environment may take (default: 600)")


def run(project: Project, args: argparse.Namespace) -> int:
    from nemo_rl.workers import bundle_pack

    manifest = bundle_pack.pack(project, envs.flags(args.py_executable), args.bundle, seed=not args.no_seed,
                                import_timeout=bundle_pack.IMPORT_TIMEOUT_S if args.import_timeout is None
                                else values.timeout_seconds(args.import_timeout, "--import-timeout"))
    print(f"bundle {args.bundle}: {manifest.files} files, {manifest.bytes / 1e6:.1f} MB, {manifest.digest}")
    build = command("uv run --no-project --offline python -m nemo_rl envs build {py} --from {bundle} --digest {digest}",
                    py=args.py_executable, bundle=args.bundle.absolute(), digest=manifest.digest)
    print(f"  on a node, in the checkout: {build}, or set NEMO_RL_BUNDLE_DIR and NEMO_RL_BUNDLE_DIGESTS")
    return 0
