"""`nemo-rl deps develop DIST [PATH]` and `nemo-rl deps develop --stop DIST [--remove]`: run a fork from an
editable checkout in front of the pin, without touching pyproject.toml or uv.lock.

The checkout goes in front of the locked install through a .pth file (the mechanism editable installs use)
in the project's environment; worker environments get it too, under keys of their own. The locked install
stays, so `--stop` only removes the .pth and the next process runs the pin again.
"""

from __future__ import annotations

import argparse
import shutil
import tomllib
from pathlib import Path

from packaging.utils import canonicalize_name

from nemo_rl import git, settings
from nemo_rl.errors import NemoRLError, UsageError
from nemo_rl.progress import progress
from nemo_rl.project import develop_state, lockfile

MANAGED = Path(".nemo-rl") / "develop"


def make_checkout(project: Path, fork: lockfile.Fork, branch: str) -> Path:
    """A work tree of the fork at the pin (fork and upstream remotes, a branch for the work), blob-less."""
    path = project / MANAGED / fork.distribution
    if path.exists():
        if git.toplevel(path) != path.resolve():
            raise NemoRLError(f"{path} exists but is not a git checkout", "move it away, or pass it as PATH")
        return path
    remotes = {"origin": fork.url, **({"upstream": fork.upstream_url} if fork.upstream_url else {})}
    progress(f"making a checkout of {fork.url} at {fork.rev[:12]} in {path}")
    try:
        git.init_checkout(path, remotes)
        git.fetch(path, "origin", fork.url, [fork.rev])
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
                          f"{fork.rev[:12]}", f"`git -C {top} fetch {fork.url}`, or pass a checkout of {fork.url}")
    pyproject = top / "pyproject.toml"
    try:
        name = tomllib.loads(pyproject.read_text()).get("project", {}).get("name") if pyproject.exists() else None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise NemoRLError(f"{pyproject} does not parse: {exc}", "fix it, or check out another commit") from exc
    if isinstance(name, str) and canonicalize_name(name) != canonicalize_name(fork.distribution):
        raise NemoRLError(f"{top} builds distribution {name!r}, not {fork.distribution!r}",
                          f"check out a commit of the fork that still builds {fork.distribution}")
    return top


def start(project: Path, args: argparse.Namespace) -> int:
    fork = lockfile.fork(project, args.distribution)
    state = develop_state.read(project)
    if fork.distribution in state:
        raise NemoRLError(f"{fork.distribution} is already developed from {state[fork.distribution]['path']}",
                          f"run `nemo-rl deps develop --stop {fork.distribution}` first")
    if args.path:
        checkout = check_checkout(Path(args.path).resolve(), fork)
    else:
        settings.cache_dir()  # the same checks on the setting as a fetch
        checkout = make_checkout(project, fork, args.branch or f"develop/{fork.distribution}")
    env = develop_state.project_environment(project)
    state[fork.distribution] = {"path": str(checkout), "managed": not args.path, "envs": []}
    if env.exists():
        develop_state.install_overlay(env, checkout)
        state[fork.distribution]["envs"] = [str(env)]
    develop_state.write(project, state)
    facts = develop_state.checkout_facts(checkout, fork.rev)
    print(f"{fork.distribution}: developing from {checkout} at {facts['head'][:12]}")
    print(f"  the next process in {env} imports {fork.distribution} from there; pyproject.toml and uv.lock are "
          "unchanged; worker environments get it under their own keys")
    print(f"  when done: push, `nemo-rl deps bump {fork.distribution} --rev <HEAD>`, then "
          f"`nemo-rl deps develop --stop {fork.distribution}`")
    return 0


def stop(project: Path, args: argparse.Namespace) -> int:
    state = develop_state.read(project)
    entry = state.get(args.distribution)
    if entry is None:
        raise NemoRLError(f"{args.distribution} is not being developed",
                          "`nemo-rl deps status` shows what is; nothing to stop")
    checkout = Path(entry["path"])
    if args.remove:
        if not entry.get("managed"):
            raise NemoRLError(f"--remove only removes checkouts nemo-rl made; {checkout} is yours",
                              f"remove {checkout} yourself if you no longer need it")
        if checkout.exists() and git.is_dirty(checkout):
            raise NemoRLError(f"{checkout} has uncommitted changes: --remove would lose them",
                              "commit or stash them (or stop without --remove: the checkout stays)")
    touched = [Path(e) for e in entry.get("envs", [])] + [develop_state.project_environment(project)]
    for env in dict.fromkeys(touched):
        develop_state.remove_overlay(env, checkout)
    for overlay in develop_state.worker_overlays(checkout, settings.venv_dir(create=False)):
        overlay.unlink()
    del state[args.distribution]
    develop_state.write(project, state)
    if args.remove and checkout.exists():
        shutil.rmtree(checkout)
        print(f"removed {checkout}")
    print(f"{args.distribution}: back to the pinned commit; the next process runs the locked code"
          + ("" if args.remove else f" (the checkout stays at {checkout})"))
    return 0


def run(project: Path, args: argparse.Namespace) -> int:
    if args.stop:
        if args.path or args.branch:
            raise UsageError("--stop takes DIST only", "run `nemo-rl deps develop --stop DIST [--remove]`")
        return stop(project, args)
    if args.remove:
        raise UsageError("--remove only applies to --stop", "run `nemo-rl deps develop --stop DIST --remove`")
    return start(project, args)
