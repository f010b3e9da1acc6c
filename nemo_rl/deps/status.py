"""`nemo-rl deps status`: pinned, locked and installed commit of every fork, and its records."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from nemo_rl import deps, uv, values
from nemo_rl.errors import NemoRLError, command, from_elsewhere
from nemo_rl.jsonout import dumps
from nemo_rl.project import develop_state, installed, journal, lockfile, uv_inputs
from nemo_rl.project.model import Project

if TYPE_CHECKING:
    from nemo_rl.forks import records

HELP = "pinned, locked and installed commit of each fork (no network)"
DESCRIPTION = (f"The {HELP}, the state of its patches/ records and of `deps develop`, and what to run when "  # guard: fast-deps-status-says-what-it-does
               "one is not ok.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    deps.common(parser)
    parser.add_argument("--env", help="environment to inspect (default: the project's, else the running one)")
    parser.add_argument("--check", action="store_true", help="exit 1 unless every fork is ok or not installed")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


# in precedence order: the first that applies is the fork's state
REMEDIES = {
    "bad pin": "write the full 40-hex commit SHA (`git rev-parse <rev>`) as rev in [tool.uv.sources]",
    "landing interrupted": "run `nemo-rl deps recover`",
    "lock stale": "run `uv lock --upgrade-package {dist}`",
    "records stale": deps.REGENERATE,
    "metadata stale": deps.FIX,
    "checkout unreadable": "{imported} {checkout}, but {problem}: " + develop_state.UNREADABLE_FIX,
    "developing": "run `nemo-rl deps develop --stop {dist}` before committing the pin",
    "checkout gone": "the develop checkout {checkout} is gone: run `nemo-rl deps develop --stop {dist}`, then "
                     "`nemo-rl deps develop {dist} [PATH]`",
    "develop not applied": "run `nemo-rl deps develop --stop {dist}`, then `nemo-rl deps develop {dist} <checkout>`",
    "not installed": f"run `{uv.sync_command()}` if you need it",
    "env stale": installed.ENV_STALE,
    "ok": None,
}
OVERRIDDEN = ("remove or widen the override-dependencies entry named above in [tool.uv], then run `uv lock` and "
              "`nemo-rl deps patches --check --offline`")
# --check fails when the committed pin is not what runs or what is recorded
FAILING = REMEDIES.keys() - {"not installed", "ok"} | {"installed differs"}
# states of uv.lock and patches/ alone: the environment is still compared with the lock
LOCK_STATES = ("lock stale", "records stale", "metadata stale")


@dataclass(frozen=True)
class ForkStatus:
    distribution: str
    url: str
    branch: str | None
    pinned_rev: str
    locked_commit: str | None
    installed_commit: str | None
    installed_version: str | None
    upstream_url: str | None
    upstream_base: str | None
    downstream_commits: int | None
    records_problems: tuple[str, ...]
    developing: develop_state.CheckoutFacts | None
    state: str
    remedy: str | None
    # the environment's own problems beside a LOCK_STATES state
    environment: tuple[str, ...] = ()


def fork_status(project: Project, env: Path, fork: lockfile.Fork, cuts: list[journal.CutShort],
                developing: dict[str, develop_state.Developed],
                locked: dict[str, lockfile.LockedPackage]) -> ForkStatus:
    from nemo_rl.forks import installed_fork, metadata_check, record_files, records

    develop_entry = developing.get(fork.distribution)
    package = locked.get(fork.distribution)
    locked_commit = package.commit if package else None
    found = installed.installed(env, fork.distribution)
    version, installed_commit = (found.version, found.commit) if found else (None, None)
    index = record_files.read_index(records.records_dir(project.root, fork.distribution))
    differences = records.check_offline(project, fork, locked, require_why=False, compare_lock=False, metadata=False)
    problems = [str(d) for d in differences]
    not_regular = records.not_regular(differences)
    metadata = [str(d) for d in records.declared_differences(project, fork)] if not fork.bad_rev else []
    # a bad pin never reaches git: it could be read as an option
    active = develop_state.active_checkout(env, fork.distribution)
    checkout = active or (develop_entry.checkout if develop_entry else None)
    developed = develop_state.checkout_facts(checkout, fork.rev) if checkout and not fork.bad_rev else None
    mismatch = installed.commit_mismatch(installed_commit, locked_commit)
    gone = bool(develop_entry and develop_state.checkout_gone(develop_entry.checkout))
    problem = developed.problem if developed else None
    cut = next((c for c in cuts if c.touches(records.relative_dir(fork.distribution))), None)
    lock_stale = locked_commit != fork.rev or bool(package and package.other_source(fork))  # guard: status-lock-stale
    state = first_state({"bad pin": bool(fork.bad_rev), "landing interrupted": cut is not None,  # guard: status-bad-pin
                         "lock stale": lock_stale, "records stale": bool(problems), "metadata stale": bool(metadata),
                         "checkout unreadable": problem is not None, "developing": bool(active),
                         "checkout gone": gone, "develop not applied": bool(develop_entry),
                         "not installed": found is None})
    environment: tuple[str, ...] = ()
    if state is None or (state in LOCK_STATES and found):  # guard: status-the-environment-beside-a-lock
        differs = [] if mismatch else [str(p) for p in installed_fork.problems(project, env, fork.distribution)]  # guard: installed-status-compares
        if state is None:
            state = "env stale" if mismatch else "installed differs" if differs else "ok"
            mismatch = mismatch or "; ".join(differs) or None
        else:
            environment = (f"env stale: {mismatch}",) if mismatch else tuple(f"installed differs: {d}" for d in differs)
    # data (an environment's metadata, a journal's paths) is never a format template: only REMEDIES and deps.fix are
    literal = mismatch if state in ("env stale", "installed differs") else \
        cut_remedy(cut) if cut is not None and state == "landing interrupted" else None
    if state == "records stale" and not_regular:  # guard: status-a-non-regular-record-s-fix-removes-it-first
        literal = records.not_regular_fix(fork.distribution, not_regular[0])
    remedy = literal or REMEDIES[state]
    if state == "metadata stale" and any("override-dependencies" in m for m in metadata):
        remedy = OVERRIDDEN  # guard: status-an-override-s-fix-is-to-edit-it
    elif state == "metadata stale":  # guard: fix-status-names-the-entry-only-where
        remedy = deps.fix("{dist}", metadata_check.derives(project, fork.distribution))
    return ForkStatus(fork.distribution, fork.url, fork.branch, fork.rev, locked_commit, installed_commit, version,  # guard: rest-an-unreadable-checkout-s-fix-says
                      fork.upstream_url, fork.base, len(index.commits) if index else None, tuple(problems + metadata),
                      developed, state,
                      literal or remedy.format(dist=fork.distribution, checkout=checkout, problem=problem,
                                    repair=develop_state.repair(checkout), imported=(
                          f"{fork.distribution} is imported from the files of" if active else
                          f"{fork.distribution} runs the pin; its develop checkout is")) if remedy else None,
                      environment)


def cut_remedy(cut: journal.CutShort) -> str:
    if cut.unreadable is not None:
        return cut.unreadable
    left = [name for name in cut.moves if name not in cut.moved]
    return (f"a landing of {', '.join(cut.moves)} was cut short before any of them moved (the project is as "  # guard: fast-a-landing-cut-short-before-any-move
            f"before): `nemo-rl deps recover` lands them, {command('rm -rf {s}', s=cut.staging)} drops them"
            if not cut.moved else
            f"a landing of {', '.join(cut.moved)} was cut short after every file moved (the project is whole): run "
            f"`nemo-rl deps recover` to remove {cut.staging}" if not left else
            f"a landing was cut short with {', '.join(cut.moved)} moved and {', '.join(left)} not (the project mixes "
            f"old and new files): run `nemo-rl deps recover`")


def first_state(applies: dict[str, bool]) -> str | None:
    """The most fundamental state that applies; None when the environment decides."""
    return next((state for state in REMEDIES if applies.get(state)), None)


def fails_check(rows: list[ForkStatus], lock_problem: str | None, orphans: list) -> bool:
    return bool(lock_problem or orphans or any(row.state in FAILING or row.environment for row in rows))  # guard: fast-status-check-fails-on-orphaned


def render(rows: list[ForkStatus], orphans: list[records.Difference]) -> str:
    from nemo_rl.forks import records

    def short(sha: str | None) -> str:
        return sha[:12] if sha else "-"

    lines = []
    for row in rows:
        lines += [
            f"{row.distribution}: {row.state}",
            f"  fork       {row.url} ({row.branch or 'no branch recorded'})",
            f"  pinned     {short(row.pinned_rev)}   locked {short(row.locked_commit)}"
            f"   installed {short(row.installed_commit) if row.installed_version else 'not installed'}",
            f"  upstream   {row.upstream_url or '-'} base {short(row.upstream_base)}, "
            f"{'?' if row.downstream_commits is None else row.downstream_commits} downstream commit(s) in patches/",
        ]
        if row.developing:
            d = row.developing
            lines.append(f"  developing {d.path} (missing)" if d.missing else
                         f"  developing {d.path} (unreadable: {d.problem})" if d.problem else
                         f"  developing {d.path} at {short(d.head)}, {d.ahead} commit(s) ahead of the pin"
                         f"{', dirty' if d.dirty else ''}{', REBASING (stopped at a conflict)' if d.rebasing else ''}")
        lines += [f"  records    {problem}" for problem in row.records_problems[:5]]
        if len(row.records_problems) > 5:
            lines.append(f"  records    ... and {len(row.records_problems) - 5} more")
        if row.remedy:
            lines.append(f"  fix        {row.remedy}")
        lines += [f"  then       {problem}" for problem in row.environment]
    for o in orphans:
        lines += [str(o), f"  fix        {records.orphan_fix(o)}"]
    # a newline in a value read from a file is shown escaped, so no value fakes a line of its own
    return "\n".join(values.printable(line) for line in lines)  # guard: terminal-status-lines-show-escapes


def run(project: Project, args: argparse.Namespace) -> int:
    from nemo_rl.forks import records

    own = develop_state.project_environment(project.root)
    env = Path(args.env) if args.env else own if (own / "pyvenv.cfg").is_file() else Path(sys.prefix)  # guard: status-checks-the-environment-develop-writes
    if not (env / "pyvenv.cfg").exists() and env.resolve() != Path(sys.prefix).resolve():
        raise NemoRLError(f"{env} is not a Python environment (no pyvenv.cfg)",
                          "pass a virtual environment, e.g. --env .venv")
    forks = project.forks_as_pinned
    developing, locked = project.developing, project.packages
    cuts = journal.cut_short(project.root)
    rows = [replace(row, remedy=from_elsewhere(row.remedy, project.root))
            for row in (fork_status(project, env, fork, cuts, developing, locked) for fork in forks)]
    orphans = records.orphans(project, forks)
    lock_problem = uv_inputs.lock_problem(project)
    if args.json:
        print(dumps({"schema": 2, "project": str(project.root), "environment": str(env), "lock_problem": lock_problem,
                     "forks": rows, "orphaned_records": [str(o) for o in orphans]}))
    else:
        print(f"uv.lock: {values.printable(lock_problem)}\n" if lock_problem else "", end="")
        print(render(rows, orphans))
    for left in journal.leftovers(project.root):
        if not left.has_journal:
            print(f"note: {left.staging} is left from a bump or `deps patches` killed before it changed anything; "
                  "run `nemo-rl deps recover`", file=sys.stderr)

    if args.check and fails_check(rows, lock_problem, orphans):
        return 1
    return 0
