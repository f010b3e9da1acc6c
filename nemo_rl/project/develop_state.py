"""Forks developed from a local checkout: an environment's overlay .pth (the truth) and .nemo-rl/develop.json."""

from __future__ import annotations

import ast
import os
import re
import secrets
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from nemo_rl import codec, git, git_checkout, values
from nemo_rl.errors import NemoRLError, command
from nemo_rl.project import installed, state_dir

STATE = Path(state_dir.STAGING_ROOT) / "develop.json"
STATE_VERSION = 1
MANAGED_DIR = Path(state_dir.STAGING_ROOT) / "develop"  # the only checkouts nemo-rl deletes
OVERLAY_PREFIX = "_nemo_rl_develop_"
CHECKOUT_LINE = "# nemo-rl deps develop checkout: "
OWNER_LINE = "# nemo-rl deps develop owner: "
_TOKEN = re.compile(r"[0-9a-f]{0,64}")  # always fullmatch: `$` would take a final newline
OVERLAY_MAX = 64 * 1024


@dataclass(frozen=True)
class Developed:
    distribution: str
    checkout: Path  # absolute
    managed: bool  # made under .nemo-rl/develop/
    envs: tuple[Path, ...]  # environments that got an overlay besides the project's own
    token: str = ""  # whose overlays these are: two containers may share a checkout path and NEMO_RL_VENV_DIR


@dataclass(frozen=True)
class CheckoutFacts:
    path: Path
    head: str | None
    ahead: int
    dirty: bool
    missing: bool = False
    rebasing: bool = False
    problem: str | None = None  # why git cannot read the checkout


@dataclass(frozen=True)
class _State:
    developed: tuple[Developed, ...]


def read(project: Path) -> dict[str, Developed]:
    path = state_dir.state_root(project) / STATE.name
    fix = command("rm {path}", path=path) + ", then `nemo-rl deps develop --stop DIST` for each developed fork"
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
    state_dir.state_root(project)
    return values.inside(project, MANAGED_DIR / distribution, "the develop checkout")


def checkout_gone(checkout: Path) -> bool:
    """Whether the checkout is missing or empty."""
    try:
        with os.scandir(checkout) as entries:
            return next(entries, None) is None  # guard: plain-an-empty-directory-is-no-checkout
    except OSError:
        return True


def unreadable(checkout: Path) -> str | None:
    """Why git cannot read the checkout, or None; never raises."""
    if not os.path.lexists(checkout / ".git"):  # guard: rest-a-missing-git-is-said-to-be-missing
        return "its .git is missing"
    problem = git_checkout.head_problem(checkout)
    return None if problem is None else f"git cannot read it: {problem}"


UNREADABLE_FIX = "mend its git data ({repair}) or run `nemo-rl deps develop --stop {dist}`"


def repair(checkout: Path | None) -> str:
    """The command that mends a worktree whose main repository moved."""
    return command("git -C <the moved repository> worktree repair {checkout}", checkout=checkout)


def unreadable_fix(dist: str, checkout: Path) -> str:
    return UNREADABLE_FIX.format(dist=dist, repair=repair(checkout))


def checkout_facts(checkout: Path, pinned: str) -> CheckoutFacts:
    if checkout_gone(checkout):
        return CheckoutFacts(checkout, None, 0, False, missing=True)
    problem = unreadable(checkout)
    if problem is not None:
        return CheckoutFacts(checkout, None, 0, False, problem=problem)
    head = git.rev_parse(checkout, "HEAD")
    return CheckoutFacts(checkout, head, git.count(checkout, f"{pinned}..{head}"), git_checkout.is_dirty(checkout),
                         rebasing=git_checkout.rebasing(checkout))


def package_roots(wheel_files: frozenset[str] | list[str]) -> list[str]:
    """The top regular packages (below namespace directories) and modules a wheel installs."""
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
    return _shadow(project, distribution)


def _shadow(project: Path, distribution: str) -> Path:
    return values.inside(project, MANAGED_DIR / f"{distribution}.overlay", "the develop overlay")


def make_shadow(project: Path, distribution: str, checkout: Path, roots: list[str]) -> None:
    """A directory of links to `roots` in `checkout`."""
    shadow = shadow_dir(project, distribution)
    staging = shadow.with_name(shadow.name + ".new")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        for root in roots:
            link = values.inside(staging, root, "a package root of the pinned wheel")
            link.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(checkout / root, link)
        staging.mkdir(parents=True, exist_ok=True)
    except BaseException:
        remove_shadow(project, distribution)  # guard: full-disk-a-half-made-shadow-is-removed
        raise
    shutil.rmtree(shadow, ignore_errors=True)
    os.replace(staging, shadow)


def remove_shadow(project: Path, distribution: str) -> None:
    shadow = shadow_dir(project, distribution)
    for path in (shadow, shadow.with_name(shadow.name + ".new")):
        shutil.rmtree(path, ignore_errors=True)
    state_dir.remove_empty(shadow.parent)
    state_dir.remove_empty(shadow.parent.parent)


def overlay_name(distribution: str) -> str:
    return f"{OVERLAY_PREFIX}{distribution.replace('-', '_').replace('.', '_').lower()}.pth"


def new_token() -> str:
    return secrets.token_hex(16)


def install_overlay(env: Path, project: Path, distribution: str, checkout: Path, owner: str = "") -> Path:
    """A .pth file, outside uv's records, putting the shadow of `distribution` first on sys.path."""
    site = installed.site_packages_dirs(env)
    if not site:
        raise NemoRLError(f"{env} has no site-packages", "run `uv sync` first")
    path = site[0] / overlay_name(distribution)
    shadow = _shadow(project, distribution)
    values.plain_path(checkout, "the develop checkout")  # guard: never-no-control-character-in-a-pth
    values.plain_path(shadow, "the develop overlay directory")
    if not _TOKEN.fullmatch(owner):  # guard: plain-an-overlay-s-owner-token-is-all
        raise ValueError(f"owner token {owner!r:.40} is not hex")
    state_dir.write_atomic(path, f"{CHECKOUT_LINE}{checkout}\nimport sys; sys.path.insert(0, {str(shadow)!r})\n"  # guard: develop-the-overlay-exposes-what-the-pin
                         + (f"{OWNER_LINE}{owner}\n" if owner else ""))
    return path


def install_overlays(env: Path, project: Path, developing: Mapping[str, Developed]) -> None:
    for entry in developing.values():
        install_overlay(env, project, entry.distribution, entry.checkout, entry.token)


def overlays(env: Path, *, live: bool = False) -> dict[str, Path]:
    """Overlay file name -> checkout; with `live`, only those whose shadow and checkout exist."""
    found = {}
    for site in installed.site_packages_dirs(env):
        for path in site.glob(f"{OVERLAY_PREFIX}*.pth"):
            lines = _overlay_lines(path)[:2]
            if lines and lines[0].startswith(CHECKOUT_LINE):
                checkout = Path(lines[0][len(CHECKOUT_LINE):])
                if live and not _puts_first(lines[1:]):  # guard: never-developing-only-while-the-overlay
                    continue
                if live and checkout_gone(checkout):  # guard: a-deleted-checkout-is-not-live
                    continue
                found[path.name] = checkout
    return found


def _puts_first(second_line: list[str]) -> bool:
    prefix, suffix = "import sys; sys.path.insert(0, ", ")"
    line = second_line[0] if second_line else ""
    if not (line.startswith(prefix) and line.endswith(suffix)):
        return False
    try:
        return Path(ast.literal_eval(line[len(prefix):-len(suffix)])).is_dir()
    except (ValueError, SyntaxError, TypeError):
        return False


def active_checkout(env: Path, distribution: str) -> Path | None:
    """The checkout `env` imports `distribution` from; None: the pin."""
    return overlays(env, live=True).get(overlay_name(distribution))


def has_overlay(env: Path, distribution: str) -> bool:
    return overlay_name(distribution) in overlays(env)


def _overlay_lines(path: Path) -> list[str]:
    try:
        return values.read_plain_file(path, OVERLAY_MAX).decode(errors="replace").splitlines()  # guard: plain-overlay-listing-through-the-one
    except OSError:
        return []


def overlay_owner(path: Path) -> str | None:
    """The token an overlay was written with, or None."""
    owner = next((line[len(OWNER_LINE):] for line in _overlay_lines(path)[:3] if line.startswith(OWNER_LINE)), "")
    return owner if owner and _TOKEN.fullmatch(owner) else None  # guard: plain-an-empty-owner-line-is-nobody-s


def foreign_overlay(env: Path, state: dict[str, Developed]) -> str | None:
    """An overlay in `env` this project's develop state did not write."""
    tokens = {overlay_name(d.distribution): d.token for d in state.values()}
    for site in installed.site_packages_dirs(env):
        for path in sorted(site.glob(f"{OVERLAY_PREFIX}*.pth")):
            owner = overlay_owner(path)
            if owner is None or tokens.get(path.name) != owner:
                return path.name
    return None


def remove_overlay(env: Path, distribution: str, owner: str | None = None) -> bool:
    """Remove `distribution`'s overlay from `env`; with `owner`, only one of that token."""
    found = False
    for site in installed.site_packages_dirs(env):
        path = site / overlay_name(distribution)
        if not os.path.lexists(path) or (owner is not None and overlay_owner(path) != owner):  # guard: stop-removes-only-its-own-token-s
            continue
        try:
            path.unlink()
        except PermissionError as exc:
            raise NemoRLError(f"cannot remove the overlay {path}: {exc.strerror}",  # guard: plain-an-overlay-that-cannot-be-removed
                              f"ask the owner of {env} to remove it") from exc
        found = True
    return found


def project_environment(project: Path) -> Path:
    """The environment `uv run` uses."""
    setting = os.environ.get("UV_PROJECT_ENVIRONMENT")
    return Path(setting) if setting else project / ".venv"
