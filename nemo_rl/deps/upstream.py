"""`nemo-rl deps upstream`: what each downstream commit still does against upstream. Read-only."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from nemo_rl import deps, values
from nemo_rl.jsonout import dumps
from nemo_rl.project.model import Project

if TYPE_CHECKING:
    from nemo_rl.forks import upstream_report

HELP = "what each downstream commit still does against upstream (read-only)"
DESCRIPTION = ("Per fork: how far its base is behind upstream; per downstream commit: what ships, whether upstream "
               "has it, whether it applies there. `deps develop DIST --onto REF` rebases.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    deps.common(parser)
    parser.add_argument("distribution", metavar="DIST", nargs="?", help=deps.ONE_FORK_HELP)
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def render(report: upstream_report.ForkReport) -> str:
    lines = [
        f"{report.distribution}: {report.summary}",
        f"  upstream   {report.upstream_url} {report.upstream_branch} at {report.upstream_head[:12]} "
        f"({report.upstream_head_date[:10]})",
        f"  base       {report.base[:12]} ({report.base_date[:10]}): {report.behind_commits} commit(s), "
        f"{report.behind_days} day(s) behind upstream",
        f"  upstream builds {report.upstream_distribution or '?'} {report.upstream_version or ''}".rstrip()
        + ("" if report.upstream_builds_ours in (True, None) else f"  (not {report.distribution}: a rename)"),
    ]
    for row in report.commits:
        shipped = ("unknown" if row.shipped is None else
                   f"{len(row.shipped)} of {len(row.touched)} file(s) shipped" if row.shipped else "ships nothing")
        upstreamed = {"yes": f"upstreamed as {str(row.upstream_commit)[:12]} ({row.upstream_evidence})",
                      "probably": f"probably upstreamed as {str(row.upstream_commit)[:12]} ({row.upstream_evidence})",
                      "no": "not upstream"}[row.upstreamed]
        applies = ("; a merge commit: git rebase drops it (the commits it brings are listed on their own)"  # guard: upstream-a-merge-commit-is-said-to-be
                   if row.merge else "" if row.applies is None else
                   "; applies on upstream's head after the commits before it, but not without the earlier "
                   f"conflicting ones (then: {', '.join(row.conflicts_without_earlier)})" if row.fails_without_earlier
                   else
                   "; applies on upstream's head" if row.applies else
                   f"; CONFLICTS on upstream's head: {', '.join(row.conflicts)}")
        lines.append(f"  {row.number:>4} {row.commit[:12]} {row.subject}")
        lines.append(f"       {shipped}; {upstreamed}{applies}")
        lines += [f"       upstream since the base: {gone}" for gone in row.gone_upstream]
    lines += [f"  note       {problem}" for problem in report.problems]
    return "\n".join(lines)


def run(project: Project, args: argparse.Namespace) -> int:
    from nemo_rl.forks import upstream_report

    forks = [project.fork(args.distribution)] if args.distribution else list(project.forks)
    reports = [upstream_report.report(fork) for fork in forks]
    if args.json:
        print(dumps({"schema": 1, "forks": reports}))
    else:
        print(values.printable("\n\n".join(render(report) for report in reports), lines=True))  # guard: terminal-upstream-s-report-shows-escapes
    return 0
