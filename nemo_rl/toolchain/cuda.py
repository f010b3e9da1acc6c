"""`nemo-rl toolchain cuda`: a CUDA 12 toolkit in DIR from the distribution's packages."""

from __future__ import annotations

import argparse
import os
import re

from nemo_rl import uv, values, verbose
from nemo_rl.errors import NemoRLError
from nemo_rl.project.model import Project
from nemo_rl.toolchain import assemble, layout, sources
from nemo_rl.toolchain.assemble import COMPONENTS, SUITE

HELP = "assemble a CUDA 12 toolkit (nvcc) into DIR from Debian's packages, changing nothing else"
DESCRIPTION = HELP + f" (suite {SUITE} of this machine's apt mirror); a second run only verifies."


def _arch(text: str) -> int:
    if not re.fullmatch(r"\d{2,3}", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not an SM number such as 80 or 90")
    return int(text)


def _suite(text: str) -> str:
    try:
        return sources.deb822_word(text, "suite")
    except NemoRLError as exc:
        raise argparse.ArgumentTypeError(exc.what) from exc


def _components(text: str) -> tuple[str, ...]:
    try:
        return tuple(sources.deb822_word(word, "component") for word in sources.deb822_words(text, "--components"))
    except NemoRLError as exc:
        raise argparse.ArgumentTypeError(exc.what) from exc


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("home", metavar="DIR", type=values.path_argument,
                        help="the CUDA_HOME to make (new, empty, or made by this)")
    parser.add_argument("--arch", type=_arch, default=90, help="SM of the test kernel (default 90: H100/H200)")
    parser.add_argument("--suite", type=_suite, default=SUITE,
                        help=f"the suite to take the toolkit from (default {SUITE})")
    parser.add_argument("--components", type=_components, default=COMPONENTS,
                        help=f"its components, space-separated (default: {' '.join(COMPONENTS)})")
    parser.add_argument("--debs", type=values.path_argument,
                        help="a directory already holding the .deb files (skips apt)")
    verbose.add(parser)
    parser.set_defaults(project_required=False, project=None)


def run(project: Project | None, args: argparse.Namespace) -> int:
    toolkit = assemble.assemble(args.home, arch=args.arch, suite=args.suite,
                                components=args.components, debs=args.debs)
    state = "verified (already assembled)" if toolkit.reused else "assembled and verified"
    print(f"{toolkit.home}: CUDA {toolkit.nvcc_version} {state}; a kernel for sm_{toolkit.arch} holds cubins "
          f"for sm {', '.join(map(str, toolkit.cubins))}")
    print(f"  packages: {', '.join(f'{n} {v}' for n, v in sorted(toolkit.packages.items()))}")
    cudnn = layout.cudnn_wheel()
    print("  to build the mcore extra with it, in this shell:")
    print(f"    export CUDA_HOME={toolkit.home} PATH={toolkit.home}/bin:$PATH NVTE_CUDA_ARCHS={toolkit.arch} "
          f"MAX_JOBS={len(os.sched_getaffinity(0)) or 1}")  # unset, ninja runs more jobs than cores
    if cudnn:
        print(f"    export CUDNN_PATH={cudnn}")
    print(f"    {uv.sync_command()}   # the build starts only on go")
    print("  and, in a second terminal while it compiles:")
    print("    uv run --no-sync nemo-rl toolchain watch   # objects compiled, time elapsed and left")
    return 0

