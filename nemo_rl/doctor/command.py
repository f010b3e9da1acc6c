"""`nemo-rl doctor [--extra mcore] [--json] [--smoke] [--verbose]`."""

from __future__ import annotations

import argparse
from pathlib import Path

from nemo_rl import verbose

HELP = "report Python, uv, torch and the mcore extra (installed / locked commits), with remedies"
DESCRIPTION = HELP + ". Exit 0 when healthy, 1 when not (each problem has its fix)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--extra", choices=["mcore"],
                        help="require this extra: exit 1 unless all of it works; without it installed, a pre-flight "
                        "says in seconds whether `uv sync --extra mcore` can build here")
    parser.add_argument("--json", action="store_true", help="print one JSON object (its schema: docs/mcore.md)")
    parser.add_argument("--smoke", action="store_true",
                        help="also run small forward/backward checks of each installed component")
    parser.add_argument("--project", type=Path, help="project whose uv.lock to compare with (default: found)")
    verbose.add(parser)
    parser.set_defaults(project_required=False)


def _short(commit: str | None) -> str:
    return commit[:12] if commit else "-"


def render(data) -> str:
    torch = data.torch
    lines = [
        f"python   {data.python.version} ({data.python.executable})"
        + (f", project requires {data.python.requires_python}" if data.python.requires_python else ""),
        f"uv       {data.uv.version or 'missing: ' + str(data.uv.error)}",
        "torch    " + (f"{torch.version}, CUDA available: {'yes' if torch.cuda_available else 'no'}"
                       if torch.installed else f"does not import: {torch.error}"),
        f"project  {data.project or 'not found (locked commits unknown)'}",
        "",
        "mcore extra" + ("" if data.requested_extra else " (optional; `--extra mcore` requires it)"),
    ]
    for c in data.components:
        locked = _short(c.locked_commit) if c.locked_commit else c.locked_version or "-"
        lines.append(f"  {c.distribution:<20} {c.state:<14} version {c.version or '-':<12}"
                     f" installed {_short(c.installed_commit)}  locked {locked}")
        if c.reason:
            lines.append(f"      why: {c.reason}")
        if c.remedy:
            lines.append(f"      fix: {c.remedy}")
    if data.preflight:
        lines += ["", "pre-flight for `uv sync --extra mcore` (transformer-engine compiles against torch)"]
        for item in data.preflight:
            lines.append(f"  {'pass' if item.ok else 'FAIL':<5} {item.name:<20} {item.detail}")
            if item.fix:
                lines.append(f"        fix: {item.fix}")
    if data.smoke:
        lines += ["", "smoke checks"]
    for smoke in data.smoke:
        lines.append(f"  {smoke.status:<7} {smoke.name:<34} {smoke.seconds:7.2f}s  {smoke.detail or ''}")
        lines += [f"      {extra_line}" for extra_line in smoke.failure_lines]
    lines += [f"note: {note}" for note in data.notes]
    lines.append("")
    scope = "the mcore environment" if data.requested_extra else "the default environment"
    if data.healthy:
        lines.append(f"result: healthy ({scope})")
    else:
        lines.append(f"result: NOT healthy ({scope})")
        lines += [f"  - {problem}" for problem in data.problems]
    return "\n".join(lines)


def run(project: Path | None, args: argparse.Namespace) -> int:
    from nemo_rl.doctor import report
    from nemo_rl.jsonout import dumps

    data = report.collect(project, args.extra, smoke=args.smoke, verbose=args.verbose)
    print(dumps(data) if args.json else render(data))
    return 0 if data.healthy else 1
