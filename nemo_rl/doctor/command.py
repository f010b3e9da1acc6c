"""`nemo-rl doctor [--extra mcore] [--json] [--smoke] [--verbose]`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from nemo_rl.doctor import report

HELP = "report Python, uv, torch and the mcore extra (installed / locked commits), with remedies"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("doctor", help=HELP, description=HELP)
    parser.add_argument("--extra", choices=["mcore"], help="require this extra: exit 1 unless all of it works")
    parser.add_argument("--json", action="store_true", help="print one JSON object (schema in README)")
    parser.add_argument("--smoke", action="store_true",
                        help="also run small forward/backward checks of each installed component")
    parser.add_argument("--project", type=Path, help="project whose uv.lock to compare with (default: found)")
    parser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="with --smoke: full tracebacks of failed checks")
    parser.set_defaults(handler=run)


def _short(commit: str | None) -> str:
    return commit[:12] if commit else "-"


def render(data: dict) -> str:
    torch = data["torch"]
    lines = [
        f"python   {data['python']['version']} ({data['python']['executable']})",
        f"uv       {data['uv']['version'] or 'missing: ' + str(data['uv']['error'])}",
        "torch    " + (f"{torch['version']}, CUDA available: {'yes' if torch['cuda_available'] else 'no'}"
                       if torch["installed"] else f"does not import: {torch['error']}"),
        f"project  {data['project'] or 'not found (locked commits unknown)'}",
        "",
        "mcore extra" + ("" if data["requested_extra"] else " (optional; `--extra mcore` requires it)"),
    ]
    for c in data["components"]:
        locked = _short(c["locked_commit"]) if c["locked_commit"] else c["locked_version"] or "-"
        lines.append(f"  {c['distribution']:<20} {c['state']:<14} version {c['version'] or '-':<12}"
                     f" installed {_short(c['installed_commit'])}  locked {locked}")
        if c["reason"]:
            lines.append(f"      why: {c['reason']}")
        if c["remedy"]:
            lines.append(f"      fix: {c['remedy']}")
    for smoke in data.get("smoke", []):
        if smoke is data["smoke"][0]:
            lines += ["", "smoke checks"]
        lines.append(f"  {smoke['status']:<7} {smoke['name']:<34} {smoke['seconds']:7.2f}s  {smoke['detail'] or ''}")
        for extra_line in smoke.get("failure_lines", []):
            lines.append(f"      {extra_line}")
    lines.append("")
    scope = "the mcore environment" if data["requested_extra"] else "the default environment"
    if data["healthy"]:
        lines.append(f"result: healthy ({scope})")
    else:
        lines.append(f"result: NOT healthy ({scope})")
        lines += [f"  - {problem}" for problem in data["problems"]]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    data = report.collect(args.project, args.extra)
    if args.smoke:
        from nemo_rl.doctor import smoke  # noqa: PLC0415 - only --smoke pays for the model code

        smoke.run_all(data, verbose=args.verbose)
    print(json.dumps(data, indent=2) if args.json else render(data))
    return 0 if data["healthy"] else 1
