"""`nemo-rl deps verify`: import what nemo-rl uses in a throwaway environment from uv.lock."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from nemo_rl import deps, extras, imports, toolchain, uv
from nemo_rl.errors import NemoRLError
from nemo_rl.progress import progress
from nemo_rl.project import lockfile
from nemo_rl.project.model import Project

HELP = "build a throwaway environment from uv.lock and import what nemo-rl uses"
DESCRIPTION = ("Build a throwaway environment from uv.lock with the fork's extra and import the modules nemo-rl "
               "relies on. Packages this machine cannot build are skipped and named.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    deps.common(parser)
    parser.add_argument("distribution", metavar="DIST", nargs="?", help=deps.ONE_FORK_HELP)


def modules_for(fork: lockfile.Fork) -> list[str]:
    comp = extras.of_fork(fork)
    return list(dict.fromkeys((comp.module, *comp.entry_points)))


def extra_for(project: Project, distribution: str) -> str:
    from packaging.utils import canonicalize_name

    for extra, names in project.optional_dependencies.items():
        if canonicalize_name(distribution) in names:
            return extra
    raise NemoRLError(f"no extra in [project.optional-dependencies] requires {distribution}",
                      f"add {distribution} to the extra that needs it")


def suggestion(fork: lockfile.Fork, module: str) -> str:
    """The requirement that most likely provides `module`."""
    from packaging.utils import canonicalize_name

    from nemo_rl.forks import fork_cache, fork_metadata

    top = module.split(".")[0]
    try:
        declared = fork_metadata.read(fork_cache.fetched(fork, fork.rev), fork.rev).requires
    except NemoRLError:
        declared = {}
    return declared.get(canonicalize_name(top), top.replace("_", "-"))


def require_derived(project: Project, forks: list[lockfile.Fork]) -> None:
    from nemo_rl.forks import metadata_check, records

    found = {fork.distribution: [f"{d}" for d in records.declared_differences(project, fork)] for fork in forks}
    stale = [dist for dist, problems in found.items() if problems]
    if stale:
        fix = deps.fix(stale[0], metadata_check.derives(project, stale[0])) if len(stale) == 1 else \
            deps.FIX.replace(" {dist}", "")
        raise NemoRLError("pyproject.toml and uv.lock do not follow what the forks declare at their pins: "
                          + "; ".join(p for dist in stale for p in found[dist]), fix + ", then verify again")


def fix_line(project: Project, fork: lockfile.Fork, requirement: str) -> str:
    from nemo_rl.forks import metadata_check

    if metadata_check.derives(project, fork.distribution):
        return (f'add {{ requirement = "{requirement}", why = "<what imports it>" }} to add = [...] in '
                f"[tool.nemo-rl.forks.{fork.distribution}] of pyproject.toml, run `nemo-rl deps patches "
                f"{fork.distribution}`, then verify again")
    return (f"add \"{requirement}\" to requires-dist of the [[tool.uv.dependency-metadata]] entry for "
            f"{fork.distribution} in pyproject.toml, run `uv lock`, then verify again")


def _sync(root: Path, env: Path, flags: list[str]) -> None:
    try:
        uv.sync(root, flags=flags, environment=env, stream=True)
    except NemoRLError as exc:
        raise NemoRLError(f"uv could not build the throwaway environment from uv.lock: {exc.what.splitlines()[0]}",
                          "a git host it cannot reach: configure a mirror (`git config --global url.<mirror>.insteadOf "
                          "<url>`); \"lockfile needs to be updated\": run `uv lock` and commit it; a failed build: "
                          "read uv's output above") from exc


def run(project: Project, args: argparse.Namespace) -> int:
    from nemo_rl.forks import installed_fork

    forks = [project.fork(args.distribution)] if args.distribution else list(project.forks)
    others = [f.distribution for f in project.forks if f not in forks]
    unbuildable = toolchain.transformer_engine_unbuildable(project.packages)
    skipped = {} if unbuildable is None else dict.fromkeys(
        unbuildable[0], f"its build needs a matching CUDA toolkit: {unbuildable[1].detail}")
    # one fork's check is not stopped by another that cannot be fetched here
    skipped.update({name: f"not part of verifying {args.distribution}" for name in others})
    require_derived(project, forks)
    failed = False
    with tempfile.TemporaryDirectory(prefix="nemo-rl-verify-") as tmp:
        built: dict[str, Path] = {}
        for fork in forks:
            extra = extra_for(project, fork.distribution)
            env = built.get(extra)
            if env is None:
                env = built[extra] = Path(tmp) / extra
                flags = ["--locked", "--extra", extra, "--no-install-project"]  # guard: guard-verify-locked
                flags += [arg for name in skipped for arg in ("--no-install-package", name)]
                progress(f"building a throwaway environment from uv.lock with the {extra} extra")
                _sync(project.root, env, flags)
            for name, why in skipped.items():
                print(f"skipped {name}: {why}")
            for problem in installed_fork.problems(project, env, fork.distribution, left_out=skipped):
                failed = True
                print(f"{fork.distribution}: installed {problem.kind}: {problem.what}\n  fix: {problem.fix}")
            modules = modules_for(fork)
            result = imports.check(env / "bin" / "python", modules, cwd=Path(tmp), hook=True)
            for module in modules:
                error = result.failed.get(module)
                if error is None:
                    print(f"{fork.distribution}: import {module}: ok")
                    continue
                failed = True
                print(f"{fork.distribution}: import {module}: FAILED: {error}")
                if error.type == "ModuleNotFoundError" and error.missing_module:
                    print(f"  fix: {fix_line(project, fork, suggestion(fork, error.missing_module))}")
    return 1 if failed else 0
