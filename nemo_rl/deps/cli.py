"""`nemo-rl deps ...`: argparse and dispatch only."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nemo_rl import values, verbose

DESCRIPTION = """\
Fork pins of the mcore extra. Everything honours git's url.<base>.insteadOf, so a site with a mirror
runs these unchanged after `git config --global url.<mirror>.insteadOf https://github.com/<owner>/<repo>.git`."""


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--project", type=values.path_argument,
                        help="project directory (default: found from the current one)")
    verbose.add(parser)


def _writes(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-wait", action="store_true",
                        help="fail at once when another nemo-rl command is changing the project (default: wait)")


class _Quiet(argparse.ArgumentParser):
    def error(self, message: str):  # the verb's parser reports it, with the verb's usage
        raise argparse.ArgumentError(None, message)


class _PatchesParser(argparse.ArgumentParser):
    """`deps patches [DIST]` and `deps patches export DIST DIR` share a verb (records name the second form): the
    words set `distribution`, or `export` and `export_dir`, through a parser of the export form. Options go
    anywhere among the words (`patches export DIST -v DIR`: argparse's intermixed parsing, which itself calls
    parse_known_args once for the options and once for the words); what follows `--` is words."""

    EXPORT = _Quiet(prog="nemo-rl deps patches export", add_help=False)
    EXPORT.add_argument("export", metavar="DIST")
    EXPORT.add_argument("export_dir", metavar="DIR", type=Path)
    _parsing = False

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        if self._parsing:
            return super().parse_known_args(args, namespace)
        args = list(sys.argv[1:] if args is None else args)
        head, tail = (args[:args.index("--")], args[args.index("--") + 1:]) if "--" in args else (args, [])
        self._parsing = True
        try:
            namespace, extras = self.parse_known_intermixed_args(head, namespace)
        finally:
            self._parsing = False
        self._words(namespace, [*(getattr(namespace, "words", None) or []), *tail])  # guard: fast-patches-takes-words-after
        return namespace, extras

    def _words(self, namespace: argparse.Namespace, words: list[str]) -> None:
        namespace.distribution, namespace.export, namespace.export_dir = None, None, None
        if words[:1] == ["export"]:
            try:
                found = self.EXPORT.parse_args(["--", *words[1:]])  # guard: fast-patches-export-takes-exactly-dist
            except argparse.ArgumentError as exc:
                self.error(f"patches export DIST DIR: {exc.message}")
            namespace.export, namespace.export_dir = found.export, found.export_dir
        elif len(words) > 1:  # guard: fast-patches-refuses-extra-words
            self.error(f"unrecognized arguments: {' '.join(words[1:])}")
        elif words:
            namespace.distribution = words[0]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    deps = subparsers.add_parser("deps", help="status, bump and patch records of the pinned forks",
                                 description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbose.add(deps)  # guard: fast-v-between-deps-and-its-verb; `nemo-rl deps -v VERB` as `nemo-rl deps VERB -v`
    verbs = deps.add_subparsers(dest="verb", required=True, metavar="VERB")

    status = "pinned, locked and installed commit of each fork (no network)"
    p = verbs.add_parser("status", help=status, description=f"The {status}, the state of its patches/ records and "  # guard: fast-deps-status-says-what-it-does
                         "of `deps develop`, and what to run when one is not ok.")
    _common(p)
    p.add_argument("--env", help="environment to inspect (default: the running one)")
    p.add_argument("--check", action="store_true",
                   help="exit 1 unless every fork is ok or not installed (stale lock, records or environment, a "
                   "developing checkout, a landing cut short all fail)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler="nemo_rl.deps.status:run")

    p = verbs.add_parser("bump", help="move a fork to a new commit: pyproject, uv.lock and patches/ at once",
                         description="Resolve the new commit, write it to pyproject.toml, run "
                         "`uv lock --upgrade-package DIST` (offline from uv's cache when the result can only "
                         "differ by the SHA, else online), regenerate patches/DIST. All or nothing.")
    _common(p)
    p.add_argument("distribution", metavar="DIST", help="fork-pinned distribution, e.g. megatron-core")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--rev", help="full 40-hex commit SHA that exists in the fork")
    target.add_argument("--branch", help="fork branch whose current head to pin (also recorded)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the bump report; no project file is opened for writing")
    _writes(p)
    p.set_defaults(handler="nemo_rl.deps.bump:run")

    p = verbs.add_parser("verify", help="build a throwaway environment from uv.lock and import what nemo-rl uses",
                         description="Build a throwaway environment from the current uv.lock with the fork's extra "
                         "(uv's cache makes a second run cheap) and import the modules nemo-rl relies on. A missing "
                         "module is reported with the line to add to [[tool.uv.dependency-metadata]]. Packages this "
                         "machine cannot build (transformer-engine without a CUDA 12 toolkit) are skipped and named.")
    _common(p)
    p.add_argument("distribution", metavar="DIST", nargs="?", help="one fork (default: every fork)")
    p.set_defaults(handler="nemo_rl.deps.verify:run")

    p = verbs.add_parser(
        "develop", help="run a fork from an editable checkout in front of the pin (pyproject and uv.lock untouched)",
        usage="nemo-rl deps develop DIST [PATH] [--branch NAME] [--onto REF]\n"
              "       nemo-rl deps develop --stop DIST [--remove]",
        description="Without PATH: make a checkout of the fork at the pinned commit in .nemo-rl/develop/DIST (fork "
        "and upstream remotes, a work branch); with PATH: use that checkout. From then on the project's "
        "environment and every worker environment import DIST from the checkout: an edit is live at the next "
        "process start. `deps status --check` fails while developing. --stop returns to the pin and leaves the "
        "checkout on disk (--remove deletes it when it is clean and nemo-rl made it).")
    _common(p)
    p.add_argument("distribution", metavar="DIST", help="fork-pinned distribution, e.g. megatron-core")
    p.add_argument("path", metavar="PATH", nargs="?", type=values.path_argument,
                   help="an existing checkout of the fork")
    p.add_argument("--branch", help="name of the work branch in a new checkout (default: develop/DIST)")
    p.add_argument("--stop", action="store_true", help="return DIST to the pinned commit")
    p.add_argument("--remove", action="store_true", help="with --stop: delete the checkout nemo-rl made, if clean")
    p.add_argument("--onto", metavar="REF", help="rebase the develop checkout's work onto REF (upstream/BRANCH or a "
                   "SHA) on a new branch: upstreamed commits are dropped, a conflict stops in git's normal state")
    _writes(p)
    p.set_defaults(handler="nemo_rl.deps.develop:run")

    p = verbs.add_parser(
        "upstream", help="what each downstream commit still does for us against upstream (read-only)",
        description="Per fork: upstream's head and how far the pin's base is behind it, what upstream's head builds, "
        "and per downstream commit: which of its files the installed distribution ships (from the wheel the fork's "
        "own backend builds), whether upstream has it (same patch-id; a cherry-pick trailer or the same subject and "
        "author is reported as 'probably'), whether it applies on upstream's head after the commits before it, and "
        "which of its files upstream deleted or moved. Works in the blob-less fork cache; never touches the "
        "project or a develop checkout. `deps develop DIST --onto REF` starts the rebase.")
    _common(p)
    p.add_argument("distribution", metavar="DIST", nargs="?", help="one fork (default: every fork)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(handler="nemo_rl.deps.upstream:run")

    p = verbs.add_parser("recover", help="finish (or discard) what a killed `deps bump` left behind",
                         description="A bump stages everything in .nemo-rl/ and lands it by renames. If it was "
                         "killed while landing, this finishes the landing; if it was killed before, this removes "
                         "the unused copy. `deps status` says when it is needed.")
    _common(p)
    _writes(p)
    p.set_defaults(handler="nemo_rl.deps.recover:run")

    p = verbs.add_parser(
        "patches", help="generate or check patches/<dist>/ records; export a fork's patch series",
        usage="nemo-rl deps patches [DIST] [--check [--offline]]\n       nemo-rl deps patches export DIST DIR",
        description="Without --check: regenerate the records of DIST (default: every fork) from the fork and its "
        "upstream. --check: recompute and fail on drift. --check --offline: validate the records against "
        "pyproject.toml and uv.lock with no network. `export DIST DIR`: write the fork's full applicable patch "
        "series (git format-patch); `git am` of it onto the upstream base reproduces the pinned tree. Exit codes: "
        "0 ok, 1 drift or an expected failure, 2 bad arguments.")
    p.__class__ = _PatchesParser  # guard: fast-patches-takes-options-anywhere; the subparsers' action makes every verb's parser of one class
    _common(p)
    p.add_argument("words", nargs="*", metavar="DIST | export DIST DIR", help=argparse.SUPPRESS)
    p.add_argument("--check", action="store_true", help="fail on drift instead of writing")
    p.add_argument("--offline", action="store_true", help="with --check: no fetch, validate the records only")
    _writes(p)
    p.set_defaults(handler="nemo_rl.deps.patches:run", distribution=None, export=None, export_dir=None)
