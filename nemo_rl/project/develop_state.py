"""Which forks are being developed from a local checkout instead of the pin (`nemo-rl deps develop`).

Two records exist, and the environment's is the truth: the overlay file in an environment's site-packages
(what a process there imports) and <project>/.nemo-rl/develop.json (git-ignored: which checkout, whether
nemo-rl made it, which environments got an overlay). Status and doctor compare the two and say how to mend
a difference; pyproject.toml and uv.lock are never touched.
"""

from __future__ import annotations

import ast
import os
import re
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from nemo_rl import codec, git, git_checkout, values
from nemo_rl.errors import NemoRLError
from nemo_rl.project import installed, state_dir

STATE = Path(state_dir.STAGING_ROOT) / "develop.json"
STATE_VERSION = 1
MANAGED_DIR = Path(state_dir.STAGING_ROOT) / "develop"  # checkouts nemo-rl makes, and the only ones it deletes
OVERLAY_PREFIX = "_nemo_rl_develop_"
CHECKOUT_LINE = "# nemo-rl deps develop checkout: "
OWNER_LINE = "# nemo-rl deps develop owner: "  # the develop state's token: which checkout's overlay this is
_TOKEN = re.compile(r"[0-9a-f]{0,64}")  # always fullmatch: `$` would take a final newline
OVERLAY_MAX = 64 * 1024  # what install_overlay writes is three lines


@dataclass(frozen=True)
class Developed:
    """One develop.json entry, checked when read (read)."""

    distribution: str
    checkout: Path  # absolute
    managed: bool  # nemo-rl made it under .nemo-rl/develop/ (only such a checkout may be removed)
    envs: tuple[Path, ...]  # environments that got an overlay besides the project's own
    # random, made by `develop`: whose overlays these are. Two containers with the same checkout path sharing
    # NEMO_RL_VENV_DIR repeat paths (and PIDs); the token differs
    token: str = ""


@dataclass(frozen=True)
class CheckoutFacts:
    path: Path
    head: str | None
    ahead: int
    dirty: bool
    missing: bool = False
    rebasing: bool = False  # stopped in the middle of a rebase (`deps develop --onto`)
    problem: str | None = None  # why git cannot read the checkout (its files may still be what Python imports)


@dataclass(frozen=True)
class _State:
    developed: tuple[Developed, ...]


def read(project: Path) -> dict[str, Developed]:
    path = state_dir.state_root(project) / STATE.name
    fix = (f"delete {path} (overlays already in environments stay until `nemo-rl deps develop --stop DIST`, "
           "which works without it)")
    state = codec.read(path, _State, STATE_VERSION, fix=fix, name="develop state")
    for entry in state.developed if state else ():
        where = f"{path}: entry {entry.distribution!r}"
        if not values.DISTRIBUTION_NAME.match(entry.distribution):
            raise NemoRLError(f"{where} is not a distribution name", fix)
        if not _TOKEN.fullmatch(entry.token):  # guard: plain-a-develop-token-is-all-hex
            raise NemoRLError(f"{where}: token must be hex digits, found {entry.token!r:.40}", fix)
        if not entry.checkout.is_absolute() or not all(e.is_absolute() for e in entry.envs):  # guard: trust-develop-state-entries-typed
            raise NemoRLError(f"{where}: checkout and envs must be absolute paths", fix)
    return {entry.distribution: entry for entry in state.developed} if state else {}


def write(project: Path, state: dict[str, Developed]) -> None:
    path = state_dir.state_root(project, create=True) / STATE.name
    if state:
        codec.write(path, _State(tuple(state.values())), STATE_VERSION)
    else:
        path.unlink(missing_ok=True)


def managed_checkout(project: Path, distribution: str) -> Path:
    state_dir.state_root(project)  # a .nemo-rl link out of the project: said as such, not "points outside"
    return values.inside(project, MANAGED_DIR / distribution, "the develop checkout")


def checkout_gone(checkout: Path) -> bool:
    """Whether nothing of the checkout is left for Python to import: no directory, or an empty one (a mount that
    did not come up). A directory with files but broken or missing git data is not gone: its files are imported."""
    try:
        with os.scandir(checkout) as entries:
            return next(entries, None) is None  # guard: plain-an-empty-directory-is-no-checkout
    except OSError:  # not there, not a directory, or not ours to read: nothing Python could import either
        return True


def unreadable(checkout: Path) -> str | None:
    """Why git cannot read the checkout, or None when it can: no `.git` at all (moved or deleted), or git's own
    first line (a worktree whose main repository moved, an empty or damaged `.git` file). Never raises."""
    if not os.path.lexists(checkout / ".git"):  # guard: rest-a-missing-git-is-said-to-be-missing
        return "its .git is missing (the files are there, their git history is not)"
    problem = git_checkout.head_problem(checkout)
    return None if problem is None else f"git cannot read it: {problem}"


UNREADABLE_FIX = ("mend its git data (a worktree whose main repository moved: `git -C <the moved repository> worktree "
                  "repair {checkout}`; a moved or emptied .git: put it back), or, to leave it, run `nemo-rl deps "
                  "develop --stop {dist}` (the files stay; the pin runs)")


def checkout_facts(checkout: Path, pinned: str) -> CheckoutFacts:
    """HEAD of the checkout, how many commits it is ahead of the pin, and whether it has local changes; `problem`
    says why none of that is known when git cannot read the checkout (a report, never git's raw error)."""
    if checkout_gone(checkout):
        return CheckoutFacts(checkout, None, 0, False, missing=True)
    problem = unreadable(checkout)
    if problem is not None:
        return CheckoutFacts(checkout, None, 0, False, problem=problem)
    head = git.rev_parse(checkout, "HEAD")
    return CheckoutFacts(checkout, head, git.count(checkout, f"{pinned}..{head}"), git_checkout.is_dirty(checkout),
                         rebasing=git_checkout.rebasing(checkout))


def package_roots(wheel_files: frozenset[str] | list[str]) -> list[str]:
    """The smallest paths that cover what a wheel installs: each regular package at its top (a directory whose
    `__init__.py` the wheel has, below namespace directories that have none) and each top-level module."""
    files = [f for f in wheel_files if ".data/" not in f.split("/", 1)[0] + "/"]
    packages = {f.rsplit("/", 1)[0] for f in files if f.endswith("/__init__.py")}
    roots = set()
    for path in files:
        parts = path.split("/")
        top = next(("/".join(parts[:i]) for i in range(1, len(parts)) if "/".join(parts[:i]) in packages), path)
        roots.add(top)
    return sorted(roots)


def shadow_dir(project: Path, distribution: str) -> Path:
    state_dir.state_root(project)
    return values.inside(project, MANAGED_DIR / f"{distribution}.overlay", "the develop overlay")


def make_shadow(project: Path, distribution: str, checkout: Path, roots: list[str]) -> Path:
    """A directory holding a link to each of `roots` in `checkout`: on sys.path it exposes exactly what the pinned
    wheel ships (megatron.core, not megatron.training, tests or tools), live from the checkout."""
    shadow = shadow_dir(project, distribution)
    staging = shadow.with_name(shadow.name + ".new")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        for root in roots:
            link = values.inside(staging, root, "a package root of the pinned wheel")
            link.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(checkout / root, link)
        staging.mkdir(parents=True, exist_ok=True)
    except BaseException:  # a full disk: no half-made shadow stays
        remove_shadow(project, distribution)  # guard: full-disk-a-half-made-shadow-is-removed
        raise
    shutil.rmtree(shadow, ignore_errors=True)
    os.replace(staging, shadow)
    return shadow


def remove_shadow(project: Path, distribution: str) -> None:
    """Remove `distribution`'s shadow directory (and one half made), and `develop/` and `.nemo-rl` once they hold
    nothing else."""
    shadow = shadow_dir(project, distribution)
    for path in (shadow, shadow.with_name(shadow.name + ".new")):
        shutil.rmtree(path, ignore_errors=True)
    state_dir.remove_empty(shadow.parent)
    state_dir.remove_empty(shadow.parent.parent)


def overlay_name(distribution: str) -> str:
    return f"{OVERLAY_PREFIX}{distribution.replace('-', '_').replace('.', '_').lower()}.pth"


def new_token() -> str:
    return secrets.token_hex(16)


def install_overlay(env: Path, distribution: str, checkout: Path, shadow: Path, owner: str = "") -> Path:
    """Put the packages of `checkout` in front of the locked install in `env`: a .pth line (the mechanism editable
    installs use) that puts `shadow` first, written outside uv's records so `uv sync` neither sees nor removes
    it and uv.lock never changes."""
    site = installed.site_packages_dirs(env)
    if not site:
        raise NemoRLError(f"{env} has no site-packages", "make it with `uv sync` first, then develop again")
    path = site[0] / overlay_name(distribution)
    values.plain_path(checkout, "the develop checkout")  # guard: never-no-control-character-in-a-pth
    values.plain_path(shadow, "the develop overlay directory")
    if not _TOKEN.fullmatch(owner):  # guard: plain-an-overlay-s-owner-token-is-all
        raise ValueError(f"owner token {owner!r:.40} is not hex")  # made by new_token: a bug, not a user's mistake
    state_dir.write_atomic(path, f"{CHECKOUT_LINE}{checkout}\nimport sys; sys.path.insert(0, {str(shadow)!r})\n"  # guard: develop-the-overlay-exposes-what-the-pin
                         + (f"{OWNER_LINE}{owner}\n" if owner else ""))
    return path


def overlays(env: Path, *, live: bool = False) -> dict[str, Path]:
    """Overlay file name -> the checkout it names, for every overlay file in `env`; with `live`, only those that
    take effect (the directory the file puts first is there: `git clean -fdx` or `rm -rf .nemo-rl` removes it,
    and a process then runs the pin)."""
    found = {}
    for site in installed.site_packages_dirs(env):
        for path in site.glob(f"{OVERLAY_PREFIX}*.pth"):
            lines = _overlay_lines(path)[:2]
            if lines and lines[0].startswith(CHECKOUT_LINE):
                checkout = Path(lines[0][len(CHECKOUT_LINE):])
                if live and not _puts_first(lines[1:]):  # guard: never-developing-only-while-the-overlay
                    continue
                if live and checkout_gone(checkout):  # guard: a-deleted-checkout-is-not-live; deleted: the overlay's links lead nowhere
                    continue
                found[path.name] = checkout
    return found


def _puts_first(second_line: list[str]) -> bool:
    """Whether the overlay's import line names an existing directory (what `install_overlay` writes)."""
    prefix, suffix = "import sys; sys.path.insert(0, ", ")"
    line = second_line[0] if second_line else ""
    if not (line.startswith(prefix) and line.endswith(suffix)):
        return False
    try:
        return Path(ast.literal_eval(line[len(prefix):-len(suffix)])).is_dir()
    except (ValueError, SyntaxError, TypeError):
        return False


def active_checkout(env: Path, distribution: str) -> Path | None:
    """The checkout `env` imports `distribution` from, or None when it runs the installed (pinned) code."""
    return overlays(env, live=True).get(overlay_name(distribution))


def has_overlay(env: Path, distribution: str) -> bool:
    """Whether `env` holds an overlay file for `distribution`, live or not (what `--stop` removes)."""
    return overlay_name(distribution) in overlays(env)


def _overlay_lines(path: Path) -> list[str]:
    """The lines of an overlay file; none for one that is not a plain file we could have written (a FIFO planted
    in a shared NEMO_RL_VENV_DIR would block a plain read forever, a link lead anywhere)."""
    try:
        return values.read_plain_file(path, OVERLAY_MAX).decode(errors="replace").splitlines()  # guard: plain-overlay-listing-through-the-one
    except OSError:
        return []


def overlay_owner(path: Path) -> str | None:
    """The token an overlay file was written with; "" for one written before tokens (no owner line); None for one
    that is not ours to judge: unreadable, not a plain file, or an owner line that holds no token (an empty or
    damaged one is not "written before tokens")."""
    try:
        lines = values.read_plain_file(path, OVERLAY_MAX).decode(errors="replace").splitlines()[:3]  # guard: plain-overlay-owners-through-the-one
    except OSError:
        return None
    owner = next((line[len(OWNER_LINE):] for line in lines if line.startswith(OWNER_LINE)), None)
    if owner is None:
        return ""
    return owner if owner and _TOKEN.fullmatch(owner) else None  # guard: plain-an-empty-owner-line-is-nobody-s


def foreign_overlay(env: Path, state: dict[str, Developed]) -> str | None:
    """The overlay file in `env` that this checkout's develop state did not write, if any: a checkout at the same
    path in another container (sharing NEMO_RL_VENV_DIR) gives its worker environments its own token, and /proc
    does not show its workers, so such an environment is that checkout's, never this one's to prune."""
    tokens = {overlay_name(d.distribution): d.token for d in state.values()}
    for site in installed.site_packages_dirs(env):
        for path in sorted(site.glob(f"{OVERLAY_PREFIX}*.pth")):
            owner = overlay_owner(path)
            if owner is None or (owner and tokens.get(path.name) != owner):
                return path.name
    return None


def remove_overlay(env: Path, distribution: str, owner: str | None = None) -> bool:
    """Remove `distribution`'s overlay from `env`: any (`owner` None: the checkout's own environment), else only
    one written with `owner`'s token, or one without a token (written before tokens: nothing tells whose)."""
    found = False
    for site in installed.site_packages_dirs(env):
        path = site / overlay_name(distribution)
        if not os.path.lexists(path) or (owner is not None and overlay_owner(path) not in (owner, "")):  # guard: stop-removes-only-its-own-token-s
            continue
        try:
            path.unlink()
        except PermissionError as exc:
            raise NemoRLError(f"cannot remove the overlay {path}: {exc.strerror}",  # guard: plain-an-overlay-that-cannot-be-removed
                              f"ask the owner of {env} to remove {path.name} (or remove {env}: it is rebuilt)") from exc
        found = True
    return found


def project_environment(project: Path) -> Path:
    """The environment `uv run` and `uv sync` use for the project: $UV_PROJECT_ENVIRONMENT, else .venv."""
    setting = os.environ.get("UV_PROJECT_ENVIRONMENT")
    return Path(setting) if setting else project / ".venv"
