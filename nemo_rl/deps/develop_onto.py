"""`nemo-rl deps develop --onto`: rebase the develop checkout's work onto REF on a new branch."""

from __future__ import annotations

import argparse
from pathlib import Path

from nemo_rl import git, git_checkout, interrupt, values
from nemo_rl.errors import NemoRLError, command
from nemo_rl.progress import progress
from nemo_rl.project import develop_state
from nemo_rl.project.model import Project


def onto(project: Project, args: argparse.Namespace) -> int:
    fork = project.fork(args.distribution)
    entry = develop_state.read(project.root)[fork.distribution]
    checkout = entry.checkout
    def git_c(words: str) -> str:
        return command("git -C {repo} " + words, repo=checkout)  # guard: fixes-onto-advice-quotes-the-checkout

    if develop_state.checkout_gone(checkout):
        raise NemoRLError(f"the develop checkout {checkout} of {fork.distribution} is gone",
                          f"run `nemo-rl deps develop --stop {fork.distribution}`")
    problem = develop_state.unreadable(checkout)
    if problem is not None:  # guard: rest-onto-refuses-a-checkout-git-cannot
        raise NemoRLError(f"the develop checkout {checkout} of {fork.distribution} cannot be rebased: {problem}",
                          develop_state.unreadable_fix(fork.distribution, checkout))
    if git_checkout.rebasing(checkout):  # guard: never-onto-during-a-rebase
        raise NemoRLError(f"{checkout} is in the middle of a rebase", f"finish it ({git_c('rebase --continue')}) or "
                          f"drop it ({git_c('rebase --abort')}), then --onto again")
    under_way = git_checkout.operation_in_progress(checkout)  # guard: plain-onto-during-a-merge-says-to-finish
    if under_way:
        if under_way == "unmerged":
            what, finish = "", f"{git_c('commit')}) or drop them ({git_c('reset --merge')})"
        else:
            what = f" (a {under_way} is under way)"
            finish = f"{git_c(under_way + ' --continue')}) or drop it ({git_c(under_way + ' --abort')})"
        raise NemoRLError(f"{checkout} has unmerged paths{what}",
                          f"resolve them ({git_c('add ...')}, {finish}, then --onto again")
    unsaved = [u for u in git_checkout.unsaved_work(checkout) if u in ("uncommitted changes", "untracked files")]  # guard: onto-is-not-blocked-by-stashes
    if unsaved:  # guard: develop-onto-refuses-unsaved-work
        raise NemoRLError(f"{checkout} has {' and '.join(unsaved)}",
                          f"commit them, or run {git_c('stash push --include-untracked')}, --onto again, "
                          f"then {git_c('stash pop')}")
    if not fork.upstream_url:
        raise NemoRLError(f"no upstream-url is recorded for {fork.distribution}",
                          f"add upstream-url = \"<git URL>\" to [tool.nemo-rl.forks.{fork.distribution}] in "
                          "pyproject.toml, then --onto again")
    remote, _, branch = args.onto.partition("/")
    if remote == "upstream" and branch:
        values.branch_name(branch, "--onto")
        if git.ls_remote(fork.upstream_url, f"refs/heads/{branch}") is None:  # guard: never-onto-a-missing-upstream-branch
            raise NemoRLError(f"upstream {fork.upstream_url} has no branch {branch!r}",
                              f"pass upstream/BRANCH for a branch that "
                              f"{command('git ls-remote --heads {url}', url=fork.upstream_url)} lists")
        ref = f"refs/remotes/upstream/{branch}" if entry.managed else f"refs/nemo-rl/upstream/{branch}"
        _fetch_upstream(entry, fork.upstream_url, [f"+refs/heads/{branch}:{ref}"])
        target = git.rev_parse(checkout, ref)
    else:
        target = values.full_sha(args.onto.lower(), "--onto")
        if not git_checkout.has_commit(checkout, target):
            _refuse_non_commit(checkout, target, args.onto)
            _fetch_upstream(entry, fork.upstream_url, [f"+{target}:refs/nemo-rl/onto/{target}"])
        _refuse_non_commit(checkout, target, args.onto)
    work = f"rebase/{fork.distribution}-onto-{target[:12]}"
    if git.ref_exists(checkout, f"refs/heads/{work}"):  # guard: develop-onto-over-its-own-branch-says
        # git deletes no branch HEAD is on
        leave = ""
        if git.git(["branch", "--show-current"], repo=checkout).stdout.strip() == work:  # guard: fixes-onto-deletes-its-branch-from-off-it
            leave = f"{git_c('switch --detach')}, then "
        raise NemoRLError(f"{checkout} already has the branch {work}",
                          f"go on with it ({git_c('switch ' + work)}, then {git_c('rebase ' + target[:12])}), or "
                          f"delete it ({leave}{git_c('branch -D ' + work)}) and run --onto again")
    unknown = git_checkout.identity_problem(checkout)
    if unknown is not None:  # guard: onto-checks-the-committer-identity-first
        raise NemoRLError(f"git cannot name a committer for the rebased commits in {checkout}: {unknown}",
                          "tell git who you are, with your own name and email: "
                          f"{git_c('config user.name \"Your Name\"')} and "
                          f"{git_c('config user.email you@example.com')}, then --onto again")
    git_checkout.switch_new_branch(checkout, work, "HEAD")
    interrupt.completed(f"{checkout} has the new branch {work}")
    progress(f"rebasing {checkout} onto {args.onto} ({target[:12]}) on branch {work}")
    stopped = git_checkout.rebase(checkout, target)
    if stopped:
        print(f"{fork.distribution}: the rebase onto {args.onto} stopped at a conflict in {checkout} ({work})")
        print(f"  resolve it, {git_c('add ...')}, then {git_c('rebase --continue')} (or `--abort`)")
        return 1
    print(f"{fork.distribution}: {work} in {checkout} is rebased onto {args.onto}; test it, push it, then "
          "`nemo-rl deps bump`")
    return 0


def _fetch_upstream(entry: develop_state.Developed, url: str, refspecs: list[str]) -> None:
    if entry.managed and git.remote_url(entry.checkout, "upstream"):  # guard: never-onto-fetches-into-a-user-s-clone
        git.fetch(entry.checkout, "upstream", url, refspecs)
    else:
        git_checkout.fetch_url(entry.checkout, url, refspecs)


def _refuse_non_commit(checkout: Path, sha: str, onto: str) -> None:
    try:
        kind = git.object_type(checkout, sha)
    except NemoRLError:
        return
    if kind != "commit":  # guard: never-onto-refuses-a-tree-or-blob
        raise NemoRLError(f"--onto {onto} is a {kind}, not a commit",
                          "pass an upstream commit SHA (`git log upstream/main`) or upstream/BRANCH")
