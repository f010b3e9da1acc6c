"""`nemo-rl doctor`: the report's arguments, its text and its exit code."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nemo_rl import values, verbose
from nemo_rl.errors import UsageError
from nemo_rl.jsonout import dumps
from nemo_rl.process import run as run_process
from nemo_rl.project.model import Project

HELP = "report Python, uv, torch and the mcore extra (installed / locked commits), with remedies"
DESCRIPTION = HELP + ". Exit 0 when healthy, 1 when not; with --preflight, 0 go and 1 no-go."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--extra", choices=["mcore"],
                        help="require this extra (exit 1 unless all of it works); not installed, its pre-flight runs")
    parser.add_argument("--preflight", action="store_true",
                        help="with --extra mcore: only whether the mcore build can run here (exit 0 go)")
    parser.add_argument("--json", action="store_true", help="print one JSON object (its schema: docs/mcore.md)")
    parser.add_argument("--smoke", action="store_true", help="also run small forward/backward checks")
    parser.add_argument("--project", type=Path, help="project whose uv.lock to compare with (default: found)")
    parser.add_argument("--env", type=Path, metavar="DIR",
                        help="check the environment DIR (one `uv run nemo-rl envs list` names) instead")
    verbose.add(parser)
    parser.set_defaults(project_required=False)


def _short(commit: str | None) -> str:
    return commit[:12] if commit else "-"


def render(data, preflight_only: bool = False) -> str:
    torch = data.torch
    header = [
        f"python   {data.python.version} ({data.python.executable})"
        + (f", project requires {data.python.requires_python}" if data.python.requires_python else ""),
        f"uv       {data.uv.version or 'missing: ' + str(data.uv.error)}",
        "torch    " + (f"{torch.version}, CUDA available: {'yes' if torch.cuda_available else 'no'}"
                       if torch.installed else f"does not import: {torch.error}"),
        f"project  {data.project or 'not found (locked commits unknown)'}",
        f"env      {sys.prefix}",
    ]
    if preflight_only:
        return "\n".join([*header, *_preflight_lines(data), *[f"note: {note}" for note in data.notes], "",
                          _verdict(data)])
    lines = [*header, "", "mcore extra" + ("" if data.requested_extra else " (optional; `--extra mcore` requires it)")]
    for c in data.components:
        locked = _short(c.locked_commit) if c.locked_commit else c.locked_version or "-"
        lines.append(f"  {c.distribution:<20} {c.state:<14} version {c.version or '-':<12}"
                     f" installed {_short(c.installed_commit)}  locked {locked}")
        if c.reason:
            lines.append(f"      why: {c.reason}")
        if c.remedy:
            lines.append(f"      fix: {c.remedy}")
    lines += _preflight_lines(data)
    if data.smoke:
        lines += ["", "smoke checks"]
    for smoke in data.smoke:
        lines.append(f"  {smoke.status:<7} {smoke.name:<34} {smoke.seconds:7.2f}s  {smoke.detail or ''}")
        lines += [f"      {extra_line}" for extra_line in smoke.failure_lines]
    lines += [f"note: {note}" for note in data.notes]
    lines.append("")
    scope = "the mcore environment" if data.requested_extra else "the default environment"
    lines.append(f"result: {'healthy' if data.healthy else 'NOT healthy'} ({scope})")
    lines += [f"  - {problem}" for problem in data.problems]
    if data.preflight_ok is not None:
        lines.append(_verdict(data))
    return "\n".join(lines)


def _preflight_lines(data) -> list[str]:
    if not data.preflight:
        return []
    lines = ["", "pre-flight for the mcore build (transformer-engine compiles against torch)"]
    for item in data.preflight:
        lines.append(f"  {'pass' if item.ok else 'FAIL':<5} {item.name:<20} {item.detail}")
        if item.fix:
            lines.append(f"        fix: {item.fix}")
    return lines


def _verdict(data) -> str:
    failed = [item.name for item in data.preflight if not item.ok]
    if failed:
        return f"pre-flight: NO-GO: the mcore build would fail here; fix {', '.join(failed)}"
    return f"pre-flight: go: the mcore build can run here ({len(data.preflight)} checks passed)"


def run(project: Project | None, args: argparse.Namespace) -> int:
    from nemo_rl.doctor import report

    if args.preflight and args.extra != "mcore":  # guard: doctor-preflight-is-for-the-mcore-extra
        raise UsageError("--preflight checks the build of the mcore extra", "add `--extra mcore`")
    if args.env is not None:
        return in_environment(args, project.root if project else None)
    data = report.collect(project, args.extra, smoke=args.smoke, verbose=args.verbose, preflight=args.preflight)
    print(dumps(data) if args.json else render(data, preflight_only=args.preflight))
    if args.preflight:  # guard: doctor-preflight-exits-by-its-own-verdict
        return 0 if data.preflight_ok else 1
    return 0 if data.healthy else 1


ENV_FIX = "pass a directory that `uv run nemo-rl envs list` names (its last column), or .venv"


def in_environment(args: argparse.Namespace, project: Path | None) -> int:
    """This doctor, run by the python of `args.env`; exit 2 when that environment cannot run it."""
    python = args.env.absolute() / "bin" / "python"
    if not python.is_file():  # guard: doctor-env-needs-a-python
        raise UsageError(f"{args.env} is not an environment: it has no bin/python", ENV_FIX)
    # -P and cwd /: the current directory (a checkout) must not lend its nemo_rl to an environment without one
    probe = run_process([python, "-P", "-c", "import nemo_rl.doctor.report"], cwd="/", check=False)
    if probe.returncode != 0:  # guard: doctor-env-needs-nemo-rl-there
        said = (probe.stderr.strip().splitlines() or [f"exit {probe.returncode}"])[-1]
        raise UsageError(f"{args.env} cannot run nemo-rl's doctor: {values.printable(said)}", ENV_FIX)
    argv = ["doctor", *(["--extra", args.extra] if args.extra else []),
            *(["--project", str(project)] if project else []),
            *[f"--{flag}" for flag in ("preflight", "json", "smoke", "verbose") if getattr(args, flag, False)]]
    result = run_process([python, "-P", "-m", "nemo_rl", *argv], cwd="/", check=False)
    print(result.stdout, end="")
    print(result.stderr, end="", file=sys.stderr)
    return result.returncode
