"""`nemo-rl deps verify [DIST]`: does the locked set really import? A throwaway environment from uv.lock
with the fork's extra, then the modules nemo-rl relies on, each imported in it."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from nemo_rl import extras, toolchain, uv
from nemo_rl.deps import fork_cache, fork_metadata
from nemo_rl.errors import NemoRLError
from nemo_rl.process import run as run_command
from nemo_rl.progress import progress
from nemo_rl.project import lockfile

TRANSFORMER_ENGINE = ("transformer-engine", "transformer-engine-cu12", "transformer-engine-torch")
IMPORTS = """
import importlib, json, sys
results = {}
for module in sys.argv[1:]:
    try:
        importlib.import_module(module)
        results[module] = None
    except BaseException as exc:
        results[module] = [type(exc).__name__, str(exc), getattr(exc, "name", None)]
print(json.dumps(results))
"""


def modules_for(distribution: str) -> list[str]:
    comps = [c for c in extras.COMPONENTS.values() if c.distribution == distribution]
    return list(dict.fromkeys(m for c in comps for m in (c.module, *c.entry_points)))


def extra_for(project: Path, distribution: str) -> str:
    path = project / "pyproject.toml"
    optional = lockfile.table(lockfile.table(lockfile.load_toml(path).get("project"), "[project]", path)
                              .get("optional-dependencies"), "[project.optional-dependencies]", path)
    for extra, requirements in optional.items():
        try:
            names = [canonicalize_name(Requirement(r).name) for r in requirements]
        except (InvalidRequirement, TypeError) as exc:
            raise NemoRLError(f"pyproject.toml: [project.optional-dependencies] {extra} has an invalid requirement: "
                              f"{exc}", "fix it (PEP 508), then run `uv lock`") from exc
        if canonicalize_name(distribution) in names:
            return extra
    raise NemoRLError(f"no extra in [project.optional-dependencies] requires {distribution}",
                      f"add {distribution} to the extra that needs it")


def skipped_here(locked: dict) -> dict[str, str]:
    """Packages that cannot be built on this machine, with why: they are left out and said so."""
    present = [name for name in TRANSFORMER_ENGINE if name in locked]
    if not present:
        return {}
    toolkit = toolchain.cuda_toolkit(toolchain.torch_info().cuda_version)
    why = f"its build needs a matching CUDA toolkit: {toolkit.detail}"
    return {} if toolkit.ok else dict.fromkeys(present, why)


def suggestion(fork: lockfile.Fork, module: str) -> str:
    """The requirement that most likely provides `module`: one the fork itself declares under that name (read
    from its build backend at the pinned commit), else the module's top-level name as a distribution."""
    top = module.split(".")[0]
    try:
        declared = fork_metadata.read(fork_cache.fetched(fork, fork.rev), fork.rev).requires
    except NemoRLError:  # offline or unreadable: the module's name is still the best guess
        declared = {}
    return declared.get(canonicalize_name(top), top.replace("_", "-"))


def run(project: Path, args: argparse.Namespace) -> int:
    forks = [lockfile.fork(project, args.distribution)] if args.distribution else lockfile.forks(project)
    locked = lockfile.locked_packages(project)
    skipped = skipped_here(locked)
    failed = False
    with tempfile.TemporaryDirectory(prefix="nemo-rl-verify-") as tmp:
        built: dict[str, Path] = {}
        for fork in forks:
            extra = extra_for(project, fork.distribution)
            env = built.get(extra)
            if env is None:
                env = built[extra] = Path(tmp) / extra
                flags = ["--locked", "--extra", extra, "--no-install-project"]
                flags += [arg for name in skipped for arg in ("--no-install-package", name)]
                progress(f"building a throwaway environment from uv.lock with the {extra} extra")
                uv.sync(project, flags=flags, environment=env, stream=True)
            for name, why in skipped.items():
                print(f"skipped {name}: {why}")
            modules = modules_for(fork.distribution) or [fork.distribution.replace("-", "_")]
            out = run_command([env / "bin" / "python", "-c", IMPORTS, *modules], cwd=tmp).stdout
            results = json.loads(out.strip().splitlines()[-1])
            for module, error in results.items():
                if error is None:
                    print(f"{fork.distribution}: import {module}: ok")
                    continue
                failed = True
                print(f"{fork.distribution}: import {module}: FAILED: {error[0]}: {error[1]}")
                if error[0] == "ModuleNotFoundError" and error[2]:
                    print(f"  fix: add \"{suggestion(fork, error[2])}\" to requires-dist of the "
                          f"[[tool.uv.dependency-metadata]] entry for {fork.distribution} in pyproject.toml, run "
                          f"`uv lock`, then verify again")
    return 1 if failed else 0
