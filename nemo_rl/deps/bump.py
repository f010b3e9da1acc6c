"""`nemo-rl deps bump`: move a fork pin in one safe step."""

from __future__ import annotations

import argparse
import shlex

from nemo_rl import deps, git, uv, values
from nemo_rl.errors import NemoRLError, UsageError
from nemo_rl.progress import progress
from nemo_rl.project import journal, landing, state_dir, uv_inputs
from nemo_rl.project.model import Project

LANDED = ["pyproject.toml", "uv.lock"]
# uv locks offline first where the lock can differ only by the SHA
OFFLINE_FIRST = True

HELP = "move a fork to a new commit: pyproject, uv.lock and patches/ at once"
DESCRIPTION = ("Resolve the new commit, write it to pyproject.toml, run `uv lock --upgrade-package DIST`, regenerate "
               "patches/DIST. All or nothing.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    deps.common(parser)
    parser.add_argument("distribution", metavar="DIST", help=deps.DIST_HELP)
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--rev", help="full 40-hex commit SHA that exists in the fork")
    target.add_argument("--branch", help="fork branch whose current head to pin (also recorded)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the bump report; no project file is opened for writing")
    deps.writes(parser)


def run(project: Project, args: argparse.Namespace) -> int:
    if args.branch is not None:
        try:
            values.branch_name(args.branch, "--branch")
        except NemoRLError as exc:
            raise UsageError(exc.what, exc.remedy) from exc
    if args.dry_run:
        return bump(project, args)
    # read again under the lock: a bump that landed while we waited changed the pins
    with state_dir.project_lock(project.root, wait=not args.no_wait):
        return bump(Project.read(project.root), args)


def bump(project: Project, args: argparse.Namespace) -> int:
    from nemo_rl.forks import bump_steps, fork_cache, fork_metadata, records

    journal.refuse_cut_short(project.root, locked=not args.dry_run)  # guard: bump-refuses-over-a-landing-cut-short
    before = bump_steps.read_before(project, args.distribution)
    fork = before.fork
    new_rev = fork_cache.resolve_branch(fork, args.branch) if args.branch else git.require_full_sha(args.rev)
    if before.at(new_rev, args.branch):
        print(f"{fork.distribution} is already pinned and locked at {new_rev}; nothing to do")
        return 0
    target = f"--branch {shlex.quote(args.branch)}" if args.branch else f"--rev {shlex.quote(args.rev)}"
    uv.require_relock(f"nemo-rl deps bump {shlex.quote(args.distribution)} {target}{' --dry-run' * args.dry_run} "
                      f"--project {shlex.quote(str(project.root))}")
    uv_inputs.require_stageable(project.root, project.uv_table, "deps bump")  # guard: bump-a-project-a-staging-copy-cannot
    relative_patches = records.relative_dir(fork.distribution)
    with landing.Staging(project.root, LANDED, [relative_patches], uv.SETTINGS_FILES,
                         inside=not args.dry_run) as staging:
        # a --rev must be on the branch pyproject.toml records, or the record would name the wrong branch
        repo = fork_cache.fetched(fork, new_rev, on_branch=not args.branch)
        fork_metadata.require_builds(git.show_file(repo, new_rev, "pyproject.toml"), fork.distribution,
                                     f"the fork at {new_rev[:12]}")
        progress("computing the downstream commits over upstream")
        # one request for the blobs the diffs read and the new commit's files, which its metadata build checks out
        base, shas = records.downstream(repo, fork, new_rev, trees=[new_rev])
        declares = bump_steps.declares_for(before, repo, new_rev)
        entry_lines, changed = bump_steps.write_pyproject(staging.path, before, new_rev, args.branch, base, declares)
        progress(f"uv lock --upgrade-package {fork.distribution}")
        offline = OFFLINE_FIRST and before.lock_text is not None and before.entry is not None  # guard: bump-an-offline-lock-tried-when-the
        # uv locks the final staged pyproject.toml while the records are computed
        with uv.lock_started(staging.path, upgrade_package=fork.distribution, offline=offline) as locking:
            recs = records.describe(repo, shas)
            drift_lines = bump_steps.requirement_drift(before, repo, new_rev, declares)
            lock_mode = bump_steps.lock_result(locking, staging.path, before, new_rev, changed, offline)
        progress(f"writing {relative_patches}/")
        staged = Project.read(staging.path)
        if project.lock_bytes is not None:  # guard: bump-checks-the-relock-s-lock-options
            uv.require_same_options(project.lock, staged.lock, "the bump")
        new_fork = staged.fork(fork.distribution)
        index, noted = records.build(staging.path / relative_patches, before.index, new_fork, new_rev, base, recs,
                                     declares)
        records.write(staging.path / relative_patches, index, noted)
        staging.keep_mode("uv.lock")
        locked_after = bump_steps.validate(staged, new_fork, new_rev)
        changes = bump_steps.lock_changes(bump_steps.lock_versions(before.locked),
                                          bump_steps.lock_versions(locked_after))
        changes = [c for c in changes if not c.startswith(f"{fork.distribution}:")]
        if not args.dry_run:
            staging.land()
    # commit subjects and requirements come from the fork: shown, never acted on
    text = bump_steps.report(fork, new_rev, before.index, base, noted, changes, args.dry_run, lock_mode)
    print(values.printable(text, lines=True))  # guard: terminal-bump-s-report-shows-escapes
    print(values.printable("\n".join(drift_lines + entry_lines), lines=True))
    if not args.dry_run:
        print(f"next: review {records.index_name(fork.distribution)}, run `nemo-rl deps verify {fork.distribution}`, "
              f"then commit pyproject.toml, uv.lock and {relative_patches}/")
    return 0
