"""The facts `nemo-rl doctor` prints, as typed results; collecting never raises."""

from __future__ import annotations

import platform
import sys
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from nemo_rl import cuda_libs, extras, settings, toolchain, uv
from nemo_rl.doctor import preflight as build_checks
from nemo_rl.doctor import smoke as smoke_checks
from nemo_rl.errors import NemoRLError, command
from nemo_rl.forks import installed_fork
from nemo_rl.project import develop_state, installed, lockfile, uv_inputs
from nemo_rl.project.model import Project

SCHEMA_VERSION = 3
MEGATRON_TRAINING_NOTE = "megatron.training is not installed; nemo-rl does not need it"
NO_GPU_NOTE = "no GPU here: transformer-engine's kernels were not run; on a GPU node run " \
              "`uv run nemo-rl doctor --extra mcore --smoke`"


@dataclass(frozen=True)
class PythonInfo:
    version: str
    executable: str
    requires_python: str | None  # the project's requires-python
    satisfied: bool


@dataclass(frozen=True)
class UvInfo:
    path: str | None
    version: str | None
    error: str | None


@dataclass(frozen=True)
class ComponentReport:
    name: str
    distribution: str
    module: str
    state: str
    installed: bool
    version: str | None
    installed_commit: str | None
    locked_commit: str | None
    locked_version: str | None
    reason: str | None
    remedy: str | None


@dataclass(frozen=True)
class Report:
    python: PythonInfo
    uv: UvInfo
    torch: toolchain.TorchInfo
    project: str | None
    requested_extra: str | None
    components: tuple[ComponentReport, ...]
    preflight: tuple[build_checks.Item, ...] = ()
    smoke: tuple[smoke_checks.Result, ...] = ()
    notes: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    healthy: bool = True
    preflight_ok: bool | None = None  # None: not asked
    schema: int = SCHEMA_VERSION


def locate_project() -> tuple[Project | None, list[str], list[str]]:
    """(project, problems, notes) of the project at or above here, else nemo-rl's own checkout; never raises."""
    for candidate in (None, settings.CHECKOUT_DIR):
        try:
            found = Project.find(candidate)
        except lockfile.ProjectNotFound:
            continue
        except NemoRLError as exc:
            return None, [str(exc)], []
        notes = [] if candidate is None else [
            f"no nemo-rl project at or above {Path.cwd()}: compared with nemo-rl's own checkout {found.root}"]
        return found, [], notes
    return None, [], [f"no nemo-rl project at or above {Path.cwd()}: locked commits unknown (pass --project DIR)"]


def python_info(project: Project | None) -> tuple[PythonInfo, list[str]]:
    version = platform.python_version()
    spec = None
    try:
        spec = project.requires_python if project else None
        ok = spec is None or version in SpecifierSet(spec)
    except (NemoRLError, InvalidSpecifier) as exc:
        return PythonInfo(version, sys.executable, spec, False), [f"cannot read requires-python: {exc}"]
    problems = [] if ok else [
        f"Python {version} does not satisfy the project's requires-python {spec}: run `uv sync --python 3.12`"]
    return PythonInfo(version, sys.executable, spec, ok), problems


def component_state(probe: extras.Probe, locked_commit: str | None, differs: list[str] | None = None
                    ) -> tuple[str, str | None]:
    """(state, remedy) of one mcore component against the lock."""
    if not probe.present and not probe.installed:
        return "not installed", probe.component.remedy
    if not probe.installed:
        library = cuda_libs.missing_library(probe.reason)
        if library:  # guard: doctor-the-missing-library-is-named
            return "broken", f"the loader cannot find {library[0]}: {library[1]}"
        return "broken", probe.component.remedy
    mismatch = installed.commit_mismatch(probe.commit, locked_commit) if locked_commit else None
    if mismatch:
        return "env stale", mismatch
    return ("installed differs", "; ".join(differs)) if differs else ("ok", None)  # guard: doctor-installed-fork-against-the-lock


def components(project: Project | None, declared: dict[str, extras.Component], locked: dict,
               env: Path | None = None) -> list[ComponentReport]:
    env = env or Path(sys.prefix)
    result = []
    for key, comp in declared.items():
        probe = extras.probe_component(comp)
        package = locked.get(comp.distribution)
        differs = [str(p) for p in installed_fork.problems(project, env, comp.distribution)] \
            if project and probe.installed and package and package.commit else []
        state, remedy = component_state(probe, package.commit if package else None, differs)
        checkout = develop_state.active_checkout(env, comp.distribution)
        if checkout and state in ("ok", "env stale", "installed differs"):  # guard: guard-doctor-s-developing
            state = "developing"
            remedy = (f"running {comp.distribution} from {checkout}; "
                      f"{command('uv run nemo-rl deps develop --stop {d}', d=comp.distribution)} returns to the pin")
        result.append(ComponentReport(key, comp.distribution, comp.module, state, probe.installed, probe.version,
                                      probe.commit, package.commit if package else None,
                                      package.version if package else None, probe.reason, remedy))
    return result


def develop_notes(project: Path | None) -> list[str]:
    try:
        state = develop_state.read(project) if project else {}
    except NemoRLError as exc:
        return [str(exc)]
    env = Path(sys.prefix)
    return [f"{dist} is under `nemo-rl deps develop`, but its checkout {entry.checkout} is gone: "
            f"`uv run nemo-rl deps develop --stop {dist}`" if not entry.checkout.is_dir() else
            f"{dist} is under `nemo-rl deps develop` ({entry.checkout}), but this interpreter ({env}) runs the "
            f"installed code: use `uv run`, or `uv run nemo-rl deps develop --stop {dist}`"
            for dist, entry in state.items() if develop_state.active_checkout(env, dist) is None]


def worker_env_notes(project: Project) -> list[str]:
    from nemo_rl.workers import housekeeping

    try:
        rows = housekeeping.listing(project)
    except (NemoRLError, OSError):  # `envs list` says why
        return []
    return [f"the workers run {row.path} ({' '.join(row.flags)}): "
            f"{command('uv run nemo-rl doctor --extra mcore --env {env}', env=row.path)} checks it" for row in rows
            if row.state == "current" and any("mcore" in flag for flag in row.flags)]  # guard: doctor-names-the-workers-mcore-environment


def collect(project_dir: Project | None = None, extra: str | None = None, smoke: bool = False,
            verbose: bool = False, preflight: bool = False) -> Report:
    project, problems, located_notes = (project_dir, [], []) if project_dir is not None else locate_project()
    locked = {}
    declared = extras.components([])
    if project:
        try:
            locked = project.packages
            forks = project.forks_as_pinned
            declared = extras.components(forks)
            lock_problem = uv_inputs.lock_problem(project)
            if lock_problem:
                problems.append(lock_problem)
        except NemoRLError as exc:
            problems.append(str(exc))
    python, python_problems = python_info(project)
    problems += python_problems
    try:
        uv_facts = UvInfo(uv.find_uv_bin(), uv.version(), None)
    except NemoRLError as exc:
        uv_facts = UvInfo(None, None, exc.what)
        problems.append(f"uv is missing ({exc.what}): {uv.INSTALL_UV}")
    torch = toolchain.torch_info()
    if not torch.installed:
        problems.append(f"torch does not import ({torch.error}): {extras.TORCH_REMEDY}")
    comps = components(project, declared, locked)
    notes = [*located_notes]
    notes += [f"{c.distribution} is developing: {c.remedy}" for c in comps if c.state == "developing"]
    notes += develop_notes(project.root if project else None)
    installed_here = {c.distribution for c in comps if c.installed}
    if "megatron-core" in installed_here:
        notes.append(MEGATRON_TRAINING_NOTE)
    if "transformer-engine" in installed_here and not torch.cuda_available:  # guard: doctor-the-no-gpu-note
        notes.append(NO_GPU_NOTE)
    held = uv.environment_lock_holder(Path(sys.prefix))
    if held:  # guard: doctor-names-who-holds-the-environment-lock
        notes.append(f"{held} holds the lock of this environment ({Path(sys.prefix) / '.lock'}); "
                     "`uv run --no-sync <command>` runs without waiting")
    preflight_items = []
    if extra == "mcore":
        problems += [f"{c.distribution}: {c.state}" for c in comps if c.state not in ("ok", "developing")]
        if project and not any(c.installed for c in comps):
            notes += worker_env_notes(project)
        if preflight or any(not c.installed for c in comps):
            preflight_items = build_checks.run_all(project, python, torch)
    smoke_results = []
    if smoke:
        smoke_results = smoke_checks.run_all(verbose=verbose)
        counted = {"torch"} | (set(extras.own()) if extra == "mcore" else set())
        problems += [f"smoke check failed: {r.name}: {r.detail}" for r in smoke_results
                     if r.status == "fail" and r.component in counted]
    return Report(python, uv_facts, torch, str(project.root) if project else None, extra, tuple(comps),
                  tuple(preflight_items), tuple(smoke_results), tuple(notes), tuple(problems), healthy=not problems,
                  preflight_ok=all(item.ok for item in preflight_items) if preflight_items else None)
