"""`nemo-rl deps develop DIST [PATH]` and `nemo-rl deps develop --stop DIST [--remove]`: run a fork from an
editable checkout in front of the pin, without touching pyproject.toml or uv.lock.

The checkout goes in front of the locked install through a .pth file (the mechanism editable installs use)
in the project's environment; worker environments get it too, under keys of their own. The locked install
stays, so `--stop` only removes the .pth and the next process runs the pin again.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import shutil
from pathlib import Path

from nemo_rl import git, interrupt, settings, values
from nemo_rl.errors import NemoRLError, UsageError
from nemo_rl.forks import fork_cache, fork_metadata
from nemo_rl.progress import progress
from nemo_rl.project import develop_state, lockfile, state_dir


def make_checkout(project: Path, fork: lockfile.Fork, branch: str) -> Path:
    """A work tree of the fork at the pin (fork and upstream remotes, a branch for the work), blob-less."""
    path = develop_state.managed_checkout(project, fork.distribution)
    if path.exists():
        if git.toplevel(path) != path:
            raise NemoRLError(f"{path} exists but is not a git checkout", "move it away, or pass it as PATH")
        return path
    remotes = {"origin": fork.url, **({"upstream": fork.upstream_url} if fork.upstream_url else {})}
    progress(f"making a checkout of {fork.url} at {fork.rev[:12]} in {path}")
    try:
        git.init_checkout(path, remotes)
        # into a remote-tracking ref: the pin is the fork's, so only commits after it count as unpushed work
        git.fetch(path, "origin", fork.url, [f"+{fork.rev}:refs/remotes/origin/nemo-rl-pin"])
        git.switch_new_branch(path, branch, fork.rev)
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return path


def check_checkout(path: Path, fork: lockfile.Fork) -> Path:
    """PATH must be a checkout of this fork (it has the pinned commit) that builds this distribution."""
    top = git.toplevel(path)
    if top is None:
        raise NemoRLError(f"{path} is not a git checkout", f"clone {fork.url} there, or leave PATH out")
    if not git.has_commit(top, fork.rev):
        raise NemoRLError(f"{top} is not a checkout of {fork.distribution}'s fork: it lacks the pinned commit "
                          f"{fork.rev[:12]}",
                          f"`git -C {shlex.quote(str(top))} fetch {fork.url}`, or pass a checkout of {fork.url}")
    pyproject = top / "pyproject.toml"
    try:
        text = pyproject.read_text() if pyproject.exists() else None
    except UnicodeDecodeError as exc:
        raise NemoRLError(f"{pyproject} is not UTF-8: {exc}", "fix it, or check out another commit") from exc
    fork_metadata.require_builds(text, fork.distribution, str(top))
    return top


def shipped_roots(fork: lockfile.Fork) -> list[str]:
    """What the pinned wheel installs, as package roots: the overlay exposes exactly these (the wheel is built
    once per commit by the fork's own backend and cached)."""
    progress(f"reading what {fork.distribution} ships at {fork.rev[:12]} (its wheel; cached per commit)")
    roots = develop_state.package_roots(fork_metadata.shipped_files(fork_cache.fetched(fork, fork.rev), fork.rev))
    if not roots:
        raise NemoRLError(f"the wheel of {fork.distribution} at {fork.rev[:12]} installs no package",
                          "check the fork's build configuration")
    return roots


def start(project: Path, args: argparse.Namespace) -> int:
    fork = lockfile.fork(project, args.distribution)
    state = develop_state.read(project)
    env = develop_state.project_environment(project)
    active = develop_state.active_checkout(env, fork.distribution) if env.exists() else None
    entry = state.get(fork.distribution)
    if entry is not None and env.exists() and not develop_state.has_overlay(env, fork.distribution) \
            and (Path(args.path).resolve() if args.path else entry.checkout) == entry.checkout:
        return _apply(project, fork, state, entry, env)  # developed while the environment did not exist
    if entry is not None or active:
        where = entry.checkout if entry is not None else active
        gone = ", which is gone (the pin runs)" if where is not None and not where.is_dir() else ""
        raise NemoRLError(f"{fork.distribution} is already developed from {where}{gone}",
                          f"run `nemo-rl deps develop --stop {fork.distribution}` first")
    if args.path:  # refused before anything is written, whether or not the environment exists yet
        checkout = check_checkout(values.plain_path(Path(args.path).resolve(), "the checkout path"), fork)
    else:
        settings.cache_dir()  # the same checks on the setting as a fetch
        values.plain_path(develop_state.managed_checkout(project, fork.distribution), "the checkout path")
        checkout = make_checkout(project, fork, args.branch or f"develop/{fork.distribution}")
    shadow = develop_state.make_shadow(project, fork.distribution, checkout, shipped_roots(fork))
    token = develop_state.new_token()
    installed = False
    try:  # no checkpoint inside: only a failed write (a full disk) ends it early, and then nothing of it stays
        if env.exists():
            develop_state.install_overlay(env, fork.distribution, checkout, shadow, token)
            installed = True
        state[fork.distribution] = develop_state.Developed(fork.distribution, checkout, not args.path,
                                                           (env,) if env.exists() else (), token)
        develop_state.write(project, state)
    except BaseException:
        if installed:
            develop_state.remove_overlay(env, fork.distribution, token)
        develop_state.remove_shadow(project, fork.distribution)
        raise
    if installed:
        interrupt.completed(f"{env} imports {fork.distribution} from {checkout}")
    interrupt.completed(f"{develop_state.STATE} records {fork.distribution} developed from {checkout}")
    facts = develop_state.checkout_facts(checkout, fork.rev)
    print(f"{fork.distribution}: developing from {checkout} at {(facts.head or 'no commit')[:12]}")
    if env.exists():
        print(f"  the next process in {env} imports {fork.distribution} from there; pyproject.toml and uv.lock are "
              "unchanged; worker environments get it under their own keys")
    else:
        print(f"  {env} does not exist yet: after `uv sync`, run `nemo-rl deps develop {fork.distribution}` again to "
              f"put {checkout} in front (worker environments get it under their own keys already)")
    print(f"  when done: push, `nemo-rl deps bump {fork.distribution} --rev <HEAD>`, then "
          f"`nemo-rl deps develop --stop {fork.distribution}`")
    return 0


def _apply(project: Path, fork: lockfile.Fork, state: dict[str, develop_state.Developed],
           entry: develop_state.Developed, env: Path) -> int:
    """Put a recorded develop in front in `env`, made (`uv sync`) after the develop started: what the advice
    printed then says to run."""
    if develop_state.checkout_gone(entry.checkout):  # the overlay would lead nowhere and the pin would run
        raise NemoRLError(f"{fork.distribution}'s recorded checkout {entry.checkout} is gone, so there is nothing "
                          f"to put in front in {env}",
                          f"`nemo-rl deps develop --stop {fork.distribution}`, then develop from a checkout again")
    shadow = develop_state.make_shadow(project, fork.distribution, entry.checkout, shipped_roots(fork))
    develop_state.install_overlay(env, fork.distribution, entry.checkout, shadow, entry.token)
    interrupt.completed(f"{env} imports {fork.distribution} from {entry.checkout}")
    if env not in entry.envs:
        state[fork.distribution] = dataclasses.replace(entry, envs=(*entry.envs, env))
        develop_state.write(project, state)
    print(f"{fork.distribution}: developing from {entry.checkout}; the next process in {env} imports it from there")
    return 0


def _check_removable(project: Path, entry: develop_state.Developed) -> None:
    """--remove deletes only a checkout nemo-rl made, where it makes them, holding nothing that exists nowhere
    else: no changes, no untracked files, no stash, no commit that no remote branch has."""
    checkout = entry.checkout
    if not entry.managed or checkout.resolve() != develop_state.managed_checkout(project, entry.distribution):
        raise NemoRLError(f"--remove only removes checkouts nemo-rl made under {project / develop_state.MANAGED_DIR}; "
                          f"{checkout} is not one", f"remove {checkout} yourself if you no longer need it")
    if checkout.exists():
        if git.toplevel(checkout) != checkout.resolve():
            raise NemoRLError(f"{checkout} is no longer a git checkout of its own, so nemo-rl cannot tell whether it "
                              "holds work", f"stop without --remove, then look at {checkout} and remove it yourself")
        submodules = (checkout / ".gitmodules").exists() or (checkout / ".git" / "modules").exists()
        unsaved = removal_blockers(git.unsaved_work(checkout), submodules, git.ignored_files(checkout))
        if unsaved:
            raise NemoRLError(f"{checkout} has {', '.join(unsaved)}: --remove would lose them",
                              "commit and push them (or stash-pop and commit), or stop without --remove: the "
                              "checkout stays")


def removal_blockers(unsaved: list[str], submodules: bool, ignored: list[str]) -> list[str]:
    """What --remove would lose: git's unsaved work, submodules (not looked into), and ignored files, which are
    work too (data/, local settings), except the bytecode Python leaves by running the checkout."""
    blockers = list(unsaved)
    if submodules:
        blockers.append("submodules (their commits and stashes are not looked at)")
    ignored = [f for f in ignored if "__pycache__/" not in f and not f.endswith(".pyc")]
    if ignored:
        blockers.append(f"{len(ignored)} ignored file(s) ({', '.join(ignored[:3])}{', ...' if ignored[3:] else ''})")
    return blockers


def _own_worker_envs(project: Path) -> list[Path]:
    """This checkout's worker environments: a shared NEMO_RL_VENV_DIR also holds other checkouts' (their overlays
    are theirs), and environments whose metadata cannot be read are left alone."""
    from nemo_rl.workers import environments

    venvs = settings.venv_dir(create=False)
    own = []
    for path in sorted(venvs.iterdir()) if venvs.is_dir() else ():
        try:  # another user's directory in a shared NEMO_RL_VENV_DIR is theirs, whatever its metadata names
            mine = path.is_dir() and not path.is_symlink() and path.lstat().st_uid == os.getuid()
            env = environments.describe(path) if mine and not path.name.startswith(".") else None
        except NemoRLError:
            continue
        if env is not None and env.project == project.resolve():
            own.append(path)
    return own


def stop(project: Path, args: argparse.Namespace) -> int:
    state = develop_state.read(project)
    entry = state.get(args.distribution)
    env = develop_state.project_environment(project)
    if entry is None and not develop_state.has_overlay(env, args.distribution):
        raise NemoRLError(f"{args.distribution} is not being developed",
                          "`nemo-rl deps status` shows what is; nothing to stop")
    if args.remove:
        if entry is None:
            raise NemoRLError(f"no develop state for {args.distribution}, so nemo-rl cannot tell whether it made the "
                              "checkout", "stop without --remove, then remove the checkout yourself")
        _check_removable(project, entry)
    workers = _own_worker_envs(project)  # before anything changes: a refused venv directory stops here
    for touched in dict.fromkeys([env, *(entry.envs if entry else ())]):
        develop_state.remove_overlay(touched, args.distribution)
    for worker_env in workers:  # this checkout's path, and of those only this develop's overlays
        develop_state.remove_overlay(worker_env, args.distribution, entry.token if entry else "")
    state.pop(args.distribution, None)
    develop_state.write(project, state)
    shutil.rmtree(develop_state.shadow_dir(project, args.distribution), ignore_errors=True)
    if args.remove and entry is not None and entry.checkout.exists():
        shutil.rmtree(entry.checkout)
        print(f"removed {entry.checkout}")
    stays = ""
    if entry and not args.remove:
        stays = (f" (the checkout stays at {entry.checkout})" if entry.checkout.exists()
                 else f" (the checkout {entry.checkout} is already gone)")
    print(f"{args.distribution}: back to the pinned commit; the next process runs the locked code{stays}")
    return 0


def onto(project: Path, args: argparse.Namespace) -> int:
    """Start the rebase of the develop checkout's work onto REF, on a new branch, in git's normal state."""
    fork = lockfile.fork(project, args.distribution)
    if fork.distribution not in develop_state.read(project):
        start(project, args)  # a checkout at the pin first
    entry = develop_state.read(project)[fork.distribution]
    checkout = entry.checkout
    quoted = shlex.quote(str(checkout))  # advice is pasted into a shell: a path with spaces stays one word
    if develop_state.checkout_gone(checkout):
        raise NemoRLError(f"the develop checkout {checkout} of {fork.distribution} is gone",
                          f"run `nemo-rl deps develop --stop {fork.distribution}`, then --onto again (a checkout is "
                          "made at the pin)")
    problem = develop_state.unreadable(checkout)
    if problem is not None:  # its files are there and imported: git's raw error would say nothing of what to do
        raise NemoRLError(f"the develop checkout {checkout} of {fork.distribution} cannot be rebased: {problem}",
                          develop_state.UNREADABLE_FIX.format(dist=fork.distribution, checkout=quoted))
    if git.rebasing(checkout):  # "commit or stash" would not help: the last --onto is still under way
        raise NemoRLError(f"{checkout} is in the middle of a rebase",
                          f"finish it (`git -C {quoted} status`, then `git -C {quoted} rebase --continue`) or "
                          f"drop it (`git -C {quoted} rebase --abort`), then --onto again")
    under_way = git.operation_in_progress(checkout)
    if under_way:  # a stash cannot save unmerged paths (`needs merge`): the advice below would loop
        if under_way == "unmerged":
            what, finish = "", f"commit) or drop them (`git -C {quoted} reset --merge`)"
        else:
            what = f" (a {under_way} is under way)"
            finish = f"`git -C {quoted} {under_way} --continue`) or drop it (`git -C {quoted} {under_way} --abort`)"
        raise NemoRLError(f"{checkout} has unmerged paths{what}",
                          f"finish it (`git -C {quoted} status`, resolve, `git -C {quoted} add ...`, then "
                          f"{finish}, then --onto again")
    # what a rebase would carry along or refuse over: local commits are the work it moves, and stashes stay put
    unsaved = [u for u in git.unsaved_work(checkout) if u in ("uncommitted changes", "untracked files")]
    if unsaved:
        where = shlex.quote(str(checkout))
        raise NemoRLError(f"{checkout} has {' and '.join(unsaved)}, which a rebase would not carry",
                          f"commit them, or set them aside with `git -C {where} stash push --include-untracked`, run "
                          f"--onto again, then bring them back on the rebased branch with `git -C {where} stash pop`")
    if not fork.upstream_url:
        raise NemoRLError(f"no upstream is recorded for {fork.distribution}, so there is nothing to rebase onto",
                          f"add upstream-url = \"<git URL>\" to [tool.nemo-rl.forks.{fork.distribution}] in "
                          "pyproject.toml, then --onto again")
    remote, _, branch = args.onto.partition("/")
    if remote == "upstream" and branch:
        values.branch_name(branch, "--onto")
        if git.ls_remote(fork.upstream_url, f"refs/heads/{branch}") is None:
            raise NemoRLError(f"upstream {fork.upstream_url} has no branch {branch!r}",
                              f"`git ls-remote --heads {fork.upstream_url}` lists its branches; pass one as "
                              "--onto upstream/BRANCH")
        ref = f"refs/remotes/upstream/{branch}" if entry.managed else f"refs/nemo-rl/upstream/{branch}"
        _fetch_upstream(entry, fork.upstream_url, [f"+refs/heads/{branch}:{ref}"])
        target = git.rev_parse(checkout, ref)
    else:
        target = values.full_sha(args.onto.lower(), "--onto")
        if not git.has_commit(checkout, target):
            _refuse_non_commit(checkout, target, args.onto)
            _fetch_upstream(entry, fork.upstream_url, [f"+{target}:refs/nemo-rl/onto/{target}"])
        _refuse_non_commit(checkout, target, args.onto)
    work = f"rebase/{fork.distribution}-onto-{target[:12]}"
    if git.ref_exists(checkout, f"refs/heads/{work}"):  # an earlier --onto (perhaps interrupted) made it
        raise NemoRLError(f"{checkout} already has the branch {work} from an earlier --onto",
                          f"go on with it (`git -C {quoted} switch {work}`, then `git -C {quoted} rebase "
                          f"{target[:12]}`), or delete it (`git -C {quoted} branch -D {work}`) and run --onto again")
    git.switch_new_branch(checkout, work, "HEAD")
    interrupt.completed(f"branch {work} was created in {checkout} (the rebase runs on it)")
    progress(f"rebasing the work in {checkout} onto {args.onto} ({target[:12]}) on branch {work}")
    stopped = git.rebase(checkout, target)
    if stopped:
        print(f"{fork.distribution}: the rebase onto {args.onto} stopped at a conflict in {checkout} ({work})")
        print(f"  resolve it with git: `git -C {quoted} status`, edit, `git -C {quoted} add ...`, "
              f"`git -C {quoted} rebase --continue` (or `--abort`); `nemo-rl deps status` shows where it stands")
        return 1
    print(f"{fork.distribution}: {work} in {checkout} is the work rebased onto {args.onto} (commits upstream already "
          "has were dropped); run it, push it, then `nemo-rl deps bump` as usual")
    return 0


def _fetch_upstream(entry: develop_state.Developed, url: str, refspecs: list[str]) -> None:
    """Into a checkout nemo-rl made, blob-less through its upstream remote; into the user's own clone by URL,
    leaving its configuration as it is (no remote added, never made a partial clone)."""
    if entry.managed and git.remote_url(entry.checkout, "upstream"):  # made when the fork had an upstream-url
        git.fetch(entry.checkout, "upstream", url, refspecs)
    else:
        git.fetch_url(entry.checkout, url, refspecs)


def _refuse_non_commit(checkout: Path, sha: str, onto: str) -> None:
    """A rebase needs a commit: a tree or blob SHA is refused before any branch is made."""
    try:
        kind = git.object_type(checkout, sha)
    except NemoRLError:  # not here (yet): the fetch brings it, or says it cannot
        return
    if kind != "commit":
        raise NemoRLError(f"--onto {onto} is a {kind}, not a commit", "pass an upstream commit SHA "
                          "(`git log upstream/main`) or upstream/BRANCH")


def run(project: Path, args: argparse.Namespace) -> int:
    if args.onto:
        if args.stop or args.path or args.remove:
            raise UsageError("--onto takes DIST only", "run `nemo-rl deps develop DIST --onto upstream/BRANCH`")
        with state_dir.project_lock(project, wait=not args.no_wait):
            return onto(project, args)
    if args.stop:
        if args.path or args.branch:
            raise UsageError("--stop takes DIST only", "run `nemo-rl deps develop --stop DIST [--remove]`")
        with state_dir.project_lock(project, wait=not args.no_wait):
            return stop(project, args)
    if args.remove:
        raise UsageError("--remove only applies to --stop", "run `nemo-rl deps develop --stop DIST --remove`")
    with state_dir.project_lock(project, wait=not args.no_wait):
        return start(project, args)
