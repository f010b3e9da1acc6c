"""`nemo-rl deps develop`: run a fork from an editable checkout in front of the pin; pyproject.toml and uv.lock stay."""

from __future__ import annotations

import argparse
import dataclasses
import shutil
from pathlib import Path

from nemo_rl import deps, git, git_checkout, interrupt, settings, values
from nemo_rl.errors import NemoRLError, UsageError, command
from nemo_rl.progress import progress
from nemo_rl.project import develop_state, lockfile, state_dir
from nemo_rl.project.model import Project

HELP = "run a fork from an editable checkout in front of the pin"
DESCRIPTION = ("Without PATH: check the fork out at the pin in .nemo-rl/develop/DIST; with PATH: use that checkout. "
               "--stop returns to the pin.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = ("nemo-rl deps develop DIST [PATH] [--branch NAME] [--onto REF]\n"
                    "       nemo-rl deps develop --stop DIST [--remove]")
    deps.common(parser)
    parser.add_argument("distribution", metavar="DIST", help=deps.DIST_HELP)
    parser.add_argument("path", metavar="PATH", nargs="?", type=values.path_argument,
                        help="an existing checkout of the fork")
    parser.add_argument("--branch", help="work branch of a new checkout (default: develop/DIST)")
    parser.add_argument("--stop", action="store_true", help="return DIST to the pinned commit")
    parser.add_argument("--remove", action="store_true",
                        help="with --stop: delete nemo-rl's clean checkout")
    parser.add_argument("--onto", metavar="REF",
                        help="rebase the work onto REF (upstream/BRANCH or a SHA) on a new branch")
    deps.writes(parser)


def make_checkout(project: Path, fork: lockfile.Fork, branch: str) -> Path:
    """A blob-less checkout of the fork at the pin, on a work branch."""
    path = develop_state.managed_checkout(project, fork.distribution)
    if path.exists():
        if git_checkout.toplevel(path) != path:
            raise NemoRLError(f"{path} exists but is not a git checkout", "move it away, or pass it as PATH")
        return path
    remotes = {"origin": fork.url, **({"upstream": fork.upstream_url} if fork.upstream_url else {})}
    progress(f"making a checkout of {fork.url} at {fork.rev[:12]} in {path}")
    try:
        git_checkout.init_checkout(path, remotes)
        # into a remote-tracking ref: the pin is the fork's, so only commits after it count as unpushed work
        git.fetch(path, "origin", fork.url, [f"+{fork.rev}:refs/remotes/origin/nemo-rl-pin"])
        git_checkout.switch_new_branch(path, branch, fork.rev)
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return path


def check_checkout(path: Path, fork: lockfile.Fork) -> Path:
    """The top of PATH; raises NemoRLError unless it holds the pin and builds this distribution."""
    from nemo_rl.forks import fork_metadata

    top = git_checkout.toplevel(path)
    if top is None:
        raise NemoRLError(f"{path} is not a git checkout", f"clone {fork.url} there, or leave PATH out")
    if not git_checkout.has_commit(top, fork.rev):
        raise NemoRLError(f"{top} lacks the pinned commit {fork.rev[:12]} of {fork.distribution}'s fork",
                          f"{command('git -C {top} fetch {url}', top=top, url=fork.url)}"
                          f", or pass a checkout of {fork.url}")
    pyproject = top / "pyproject.toml"
    try:
        text = lockfile.read_bytes(pyproject).decode() if pyproject.exists() else None
    except UnicodeDecodeError as exc:
        raise NemoRLError(f"{pyproject} is not UTF-8: {exc}", "fix it, or check out another commit") from exc
    fork_metadata.require_builds(text, fork.distribution, str(top))
    return top


def shipped_roots(fork: lockfile.Fork) -> list[str]:
    from nemo_rl.forks import fork_cache, fork_metadata

    progress(f"reading what {fork.distribution} ships at {fork.rev[:12]}")
    roots = develop_state.package_roots(fork_metadata.shipped_files(fork_cache.fetched(fork, fork.rev), fork.rev))
    if not roots:
        raise NemoRLError(f"the wheel of {fork.distribution} at {fork.rev[:12]} installs no package",
                          "check the fork's build configuration")
    return roots


def start(project: Project, args: argparse.Namespace) -> int:
    fork = project.fork(args.distribution)
    root = project.root
    state = develop_state.read(root)
    env = develop_state.project_environment(root)
    active = develop_state.active_checkout(env, fork.distribution) if env.exists() else None
    entry = state.get(fork.distribution)
    if entry is not None and env.exists() and not develop_state.has_overlay(env, fork.distribution) \
            and (Path(args.path).resolve() if args.path else entry.checkout) == entry.checkout:
        return _apply(root, fork, state, entry, env)  # guard: fixes-develop-again-after-uv-sync
    if entry is not None or active:
        where = entry.checkout if entry is not None else active
        gone = ", which is gone (the pin runs)" if where is not None and not where.is_dir() else ""
        raise NemoRLError(f"{fork.distribution} is already developed from {where}{gone}",
                          f"run `nemo-rl deps develop --stop {fork.distribution}` first")
    if args.path:
        checkout = check_checkout(values.plain_path(Path(args.path).resolve(), "the checkout path"), fork)  # guard: fixes-a-develop-path-is-checked-before
    else:
        settings.cache_dir()
        values.plain_path(develop_state.managed_checkout(root, fork.distribution), "the checkout path")
        checkout = make_checkout(root, fork, args.branch or f"develop/{fork.distribution}")
    develop_state.make_shadow(root, fork.distribution, checkout, shipped_roots(fork))
    token = develop_state.new_token()
    installed = False
    try:
        if env.exists():
            develop_state.install_overlay(env, root, fork.distribution, checkout, token)
            installed = True
        state[fork.distribution] = develop_state.Developed(fork.distribution, checkout, not args.path,
                                                           (env,) if env.exists() else (), token)
        develop_state.write(root, state)
    except BaseException:
        if installed:
            develop_state.remove_overlay(env, fork.distribution, token)  # guard: full-disk-a-develop-that-fails-removes
        develop_state.remove_shadow(root, fork.distribution)  # guard: full-disk-a-develop-that-fails-removes-2
        raise
    if installed:
        interrupt.completed(f"{env} imports {fork.distribution} from {checkout}")
    interrupt.completed(f"{develop_state.STATE} records {fork.distribution} developed from {checkout}")  # guard: fixes-develop-records-its-overlay-as-a
    facts = develop_state.checkout_facts(checkout, fork.rev)
    print(f"{fork.distribution}: developing from {checkout} at {(facts.head or 'no commit')[:12]}")
    if env.exists():
        print(f"  the next process in {env} imports {fork.distribution} from there")
    else:
        print(f"  no {env} yet: after `uv sync`, run `nemo-rl deps develop {fork.distribution}` again")
    print(f"  when done: push, `nemo-rl deps bump {fork.distribution} --rev <HEAD>`, then "
          f"`nemo-rl deps develop --stop {fork.distribution}`")
    return 0


def _apply(project: Path, fork: lockfile.Fork, state: dict[str, develop_state.Developed],
           entry: develop_state.Developed, env: Path) -> int:
    """Put a recorded develop in front in `env`, made after the develop started."""
    if develop_state.checkout_gone(entry.checkout):  # guard: develop-again-after-uv-sync-refuses-a
        raise NemoRLError(f"{fork.distribution}'s recorded checkout {entry.checkout} is gone",
                          f"run `nemo-rl deps develop --stop {fork.distribution}`, then develop from a checkout again")
    develop_state.make_shadow(project, fork.distribution, entry.checkout, shipped_roots(fork))
    develop_state.install_overlay(env, project, fork.distribution, entry.checkout, entry.token)
    interrupt.completed(f"{env} imports {fork.distribution} from {entry.checkout}")
    if env not in entry.envs:
        state[fork.distribution] = dataclasses.replace(entry, envs=(*entry.envs, env))
        develop_state.write(project, state)
    print(f"{fork.distribution}: developing from {entry.checkout}; the next process in {env} imports it from there")
    return 0


def _check_removable(project: Path, entry: develop_state.Developed) -> None:
    checkout = entry.checkout
    if not entry.managed or checkout.resolve() != develop_state.managed_checkout(project, entry.distribution):  # guard: trust-remove-only-under-nemo-rl-develop
        raise NemoRLError(f"--remove only removes checkouts nemo-rl made under {project / develop_state.MANAGED_DIR}",
                          f"remove {checkout} yourself")
    if checkout.exists():
        if git_checkout.toplevel(checkout) != checkout.resolve():  # guard: never-remove-needs-the-checkout-s-own
            raise NemoRLError(f"{checkout} is no longer a git checkout of its own",
                              f"stop without --remove, then remove {checkout} yourself")
        submodules = (checkout / ".gitmodules").exists() or (checkout / ".git" / "modules").exists()  # guard: never-remove-refuses-submodules
        unsaved = removal_blockers(git_checkout.unsaved_work(checkout), submodules,
                                   git_checkout.ignored_files(checkout))
        if unsaved:
            raise NemoRLError(f"{checkout} has {', '.join(unsaved)}: --remove would lose them",
                              "commit and push them, or stop without --remove")


def removal_blockers(unsaved: list[str], submodules: bool, ignored: list[str]) -> list[str]:
    """What --remove would lose: unsaved work, submodules and ignored files other than bytecode."""
    blockers = list(unsaved)
    if submodules:
        blockers.append("submodules")
    ignored = [f for f in ignored if "__pycache__/" not in f and not f.endswith(".pyc")]  # guard: fast-remove-leaves-out-bytecode-only
    if ignored:  # guard: never-ignored-files-are-work
        blockers.append(f"{len(ignored)} ignored file(s) ({', '.join(ignored[:3])}{', ...' if ignored[3:] else ''})")
    return blockers


def _own_worker_envs(project: Path) -> list[Path]:
    from nemo_rl.workers import environments

    venvs = settings.venv_dir(create=False)
    own = []
    for path in sorted(venvs.iterdir()) if venvs.is_dir() else ():
        try:
            mine = path.is_dir() and not path.is_symlink()
            env = environments.describe(path) if mine and not path.name.startswith(".") else None
        except NemoRLError:
            continue
        if env is not None and env.project == project.resolve():  # guard: never-stop-only-in-this-checkout-s
            own.append(path)
    return own


def stop(project: Path, args: argparse.Namespace) -> int:
    state = develop_state.read(project)
    entry = state.get(args.distribution)
    env = develop_state.project_environment(project)
    if entry is None and not develop_state.has_overlay(env, args.distribution):
        raise NemoRLError(f"{args.distribution} is not being developed",
                          "nothing to stop: `nemo-rl deps status` shows what is")
    if args.remove:
        if entry is None:
            raise NemoRLError(f"no develop state for {args.distribution}", "stop without --remove")
        _check_removable(project, entry)
    workers = _own_worker_envs(project)  # guard: develop-stop-looks-up-the-worker
    for touched in dict.fromkeys([env, *(entry.envs if entry else ())]):
        develop_state.remove_overlay(touched, args.distribution)
    for worker_env in workers:
        develop_state.remove_overlay(worker_env, args.distribution, entry.token if entry else "")
    state.pop(args.distribution, None)
    develop_state.write(project, state)
    shutil.rmtree(develop_state.shadow_dir(project, args.distribution), ignore_errors=True)
    if args.remove and entry is not None and entry.checkout.exists():
        shutil.rmtree(entry.checkout)
        print(f"removed {entry.checkout}")
    stays = ""
    if entry and not args.remove:
        stays = (f" (the checkout stays at {entry.checkout})" if entry.checkout.exists()  # guard: plain-stop-says-a-deleted-checkout-is
                 else f" (the checkout {entry.checkout} is already gone)")
    print(f"{args.distribution}: back to the pinned commit{stays}")
    return 0


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


def run(project: Project, args: argparse.Namespace) -> int:
    root = project.root
    if args.onto and (args.stop or args.path or args.remove):
        raise UsageError("--onto takes DIST only", "run `nemo-rl deps develop DIST --onto upstream/BRANCH`")
    if args.stop and (args.path or args.branch):
        raise UsageError("--stop takes DIST only", "run `nemo-rl deps develop --stop DIST [--remove]`")
    if args.remove and not args.stop:
        raise UsageError("--remove only applies to --stop", "run `nemo-rl deps develop --stop DIST --remove`")
    with state_dir.project_lock(root, wait=not args.no_wait):
        if args.stop:
            return stop(root, args)
        held = Project.read(root)
        if not args.onto:
            return start(held, args)
        if held.fork(args.distribution).distribution not in develop_state.read(root):
            start(held, args)
        return onto(held, args)
