"""git on work trees people edit (`deps develop` checkouts, the project): their state and rebases."""

from __future__ import annotations

from pathlib import Path

from nemo_rl.errors import NemoRLError, command
from nemo_rl.git import git, reach_failure


def fetch_url(repo: Path, url: str, refspecs: list[str]) -> None:
    result = git(["fetch", "--quiet", "--no-tags", "--end-of-options", url, *refspecs], repo=repo, check=False)
    if result.returncode != 0:  # guard: checkout-a-failed-fetch-is-an-error-with-git-s-words
        raise reach_failure("cannot fetch from", url, result, repo=repo)


def ignored_files(repo: Path) -> list[str]:
    out = git(["ls-files", "-z", "--others", "--ignored", "--exclude-standard"], repo=repo).stdout
    return [entry for entry in out.split("\0") if entry]


def tracked(repo: Path, path: str) -> list[str] | None:
    """The files under `path` git tracks; None when git will not read `repo`."""
    try:
        result = git(["ls-files", "-z", "--", path], repo=repo, check=False)
    except NemoRLError:
        return None
    if result.returncode == 0:
        return [entry for entry in result.stdout.split("\0") if entry]
    if "not a git repository" in result.stderr:  # guard: state-a-checkout-git-will-not-read-is
        return None
    said = (result.stderr.strip().splitlines() or ["no message"])[0]
    raise NemoRLError(f"git cannot list the files it tracks in {repo} ({said})",
                      "if you trust the checkout, "
                      + command("git config --global --add safe.directory {repo}", repo=repo) + " (or run as owner)")


def has_commit(repo: Path, sha: str) -> bool:
    return git(["cat-file", "-e", f"{sha}^{{commit}}"], repo=repo, check=False).returncode == 0


def head_problem(repo: Path) -> str | None:
    """git's first complaint when `repo`'s HEAD is unreadable; None when readable."""
    result = git(["rev-parse", "--verify", "--end-of-options", "HEAD^{commit}"], repo=repo, check=False)
    if result.returncode == 0:
        return None
    line = next((line.strip() for line in result.stderr.splitlines() if line.strip()), f"exit {result.returncode}")
    return line[:200]


def is_dirty(repo: Path) -> bool:
    """Changed or untracked files, ignored ones aside."""
    return bool(git(["status", "--porcelain", "--untracked-files=normal"], repo=repo).stdout.strip())


def unsaved_work(repo: Path) -> list[str]:
    """What deleting `repo` would lose, in words."""
    found = []
    status = git(["status", "--porcelain", "--untracked-files=normal"], repo=repo).stdout.splitlines()
    if any(not line.startswith("??") for line in status):
        found.append("uncommitted changes")
    if any(line.startswith("??") for line in status):  # guard: trust-untracked-files-are-work
        found.append("untracked files")
    stashes = git(["stash", "list"], repo=repo).stdout.splitlines()
    if stashes:  # guard: trust-stashes-are-work
        found.append(f"{len(stashes)} stash(es)")
    # commits of HEAD or a local branch that no remote-tracking ref reaches
    local = git(["rev-list", "--count", "HEAD", "--branches", "--not", "--remotes"], repo=repo, check=False)
    if local.returncode == 0 and int(local.stdout.strip() or 0):  # guard: trust-unpushed-commits-are-work
        found.append(f"{local.stdout.strip()} commit(s) on no remote branch")
    return found


def toplevel(path: Path) -> Path | None:
    """The work tree holding `path`; None outside git."""
    result = git(["rev-parse", "--show-toplevel"], repo=path, check=False)
    return Path(result.stdout.strip()) if result.returncode == 0 else None


def init_checkout(path: Path, remotes: dict[str, str]) -> None:
    """Make an empty work tree with `remotes` (insteadOf applies)."""
    path.mkdir(parents=True, exist_ok=True)
    git(["init", "--quiet", str(path)])
    for name, url in remotes.items():
        git(["remote", "add", name, url], repo=path)


def switch_new_branch(path: Path, branch: str, rev: str) -> None:
    git(["switch", "--quiet", "--create", branch, "--end-of-options", rev], repo=path)


def identity_problem(repo: Path) -> str | None:
    """git's last line when it cannot name a committer; None when it can."""
    result = git(["var", "GIT_COMMITTER_IDENT"], repo=repo, check=False)
    if result.returncode == 0:
        return None
    said = [line.strip() for line in (result.stderr or result.stdout).splitlines() if line.strip()]
    return said[-1] if said else f"`git var GIT_COMMITTER_IDENT` exited {result.returncode}"


def rebase(repo: Path, onto: str) -> bool:
    """`git rebase ONTO` of the current branch: True when it stopped at a conflict."""
    result = git(["-c", "core.editor=true", "rebase", "--end-of-options", onto], repo=repo, check=False)
    if result.returncode == 0:
        return False
    said = (result.stderr or result.stdout).strip()
    if rebasing(repo) and git(["diff", "--name-only", "--diff-filter=U"], repo=repo).stdout.strip():  # guard: upstream-a-stop-without-a-conflict-is
        return True
    if rebasing(repo):  # guard: fixes-a-rebase-stopped-midway-continues
        raise NemoRLError(f"git rebase stopped in {repo} without a conflict: {said[-400:]}",
                          f"fix what git says, then {command('git -C {repo} rebase --continue', repo=repo)} "
                          f"(or {command('git -C {repo} rebase --abort', repo=repo)})")
    if "pre-rebase hook" in said:  # guard: fixes-a-refusing-pre-rebase-hook-is-named
        raise NemoRLError(f"the pre-rebase hook of {repo} refused the rebase, so it did not start: {said[-400:]}",
                          f"{command('git -C {repo} rebase --no-verify {onto}', repo=repo, onto=onto)}, or change "
                          "the hook")
    raise NemoRLError(f"git rebase did not start in {repo}: {said[-400:]}",
                      "fix what git says, then " + command("git -C {repo} rebase {onto}", repo=repo, onto=onto))


def rebasing(repo: Path) -> bool:
    git_dir = Path(git(["rev-parse", "--absolute-git-dir"], repo=repo).stdout.strip())
    return (git_dir / "rebase-merge").is_dir() or (git_dir / "rebase-apply").is_dir()


def operation_in_progress(repo: Path) -> str | None:
    """The merge, cherry-pick or revert `repo` is in, or "unmerged"; None when none."""
    git_dir = Path(git(["rev-parse", "--absolute-git-dir"], repo=repo).stdout.strip())
    for head, name in (("MERGE_HEAD", "merge"), ("CHERRY_PICK_HEAD", "cherry-pick"), ("REVERT_HEAD", "revert")):
        if (git_dir / head).exists():
            return name
    unmerged = git(["ls-files", "--unmerged"], repo=repo, check=False)
    return "unmerged" if unmerged.returncode == 0 and unmerged.stdout.strip() else None
