"""`nemo-rl envs list` and `prune`: what is in NEMO_RL_VENV_DIR, who uses it, removing what is stale."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from nemo_rl import codec, locks, settings
from nemo_rl.errors import NemoRLError, command
from nemo_rl.project import develop_state, identity
from nemo_rl.project.model import Project
from nemo_rl.workers import bundle_copy, bundles, environments

KEY = re.compile(r"[0-9a-f]{24}")  # what environments.key_for makes


@dataclass(frozen=True)
class Row:
    key: str
    path: Path
    flags: tuple[str, ...]
    project: Path | None
    state: str  # current | stale | other version | other checkout | broken | unfinished build | kept copy
    size_mb: float
    last_used: float | None
    users: tuple[int, ...]
    detail: str | None = None


def users(path: Path) -> tuple[int, ...]:
    """PIDs of live processes running from the environment at `path`."""
    prefix = str(path.resolve())
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if int(pid) != os.getpid() and _runs_from(pid, prefix):
                found.append(int(pid))
    return tuple(found)


def _runs_from(pid: str, prefix: str) -> bool:
    inside = prefix + "/"
    if os.readlink(f"/proc/{pid}/exe").startswith(inside):
        return True
    if any(arg == prefix or arg.startswith(inside) for arg in _read(f"/proc/{pid}/cmdline").split("\0")):  # guard: workers-in-use-through-the-command-line
        return True
    if f"\0VIRTUAL_ENV={prefix}\0" in "\0" + _read(f"/proc/{pid}/environ"):  # guard: workers-in-use-through-virtual-env
        return True
    return any(line.split(maxsplit=5)[-1].startswith(inside) for line in _read(f"/proc/{pid}/maps").splitlines()  # guard: workers-in-use-through-a-mapped-file
               if line.count(" ") >= 5)


def _read(path: str) -> str:
    return Path(path).read_bytes().decode(errors="replace")


def _size_mb(path: Path) -> float:
    """The megabytes of the files under `path`, a hard-linked file counted once."""
    seen: dict[tuple[int, int], int] = {}
    for dirpath, _, filenames in os.walk(path):
        for name in filenames:
            with contextlib.suppress(OSError):
                info = os.lstat(os.path.join(dirpath, name))
                seen[info.st_dev, info.st_ino] = info.st_size if stat.S_ISREG(info.st_mode) else 0
    return round(sum(seen.values()) / 1e6, 1)


def listing(project: Project | None) -> list[Row]:
    """Every environment and unfinished build under the venv directory; creates nothing."""
    root = settings.venv_dir(create=False)
    rows: list[Row] = []
    current: dict[tuple[str, ...], str] = {}  # the project's key per flags
    try:
        mine = project.developing if project is not None else {}
    except NemoRLError:
        mine = {}
    ours = identity.checkout_id(project.root) if project is not None else None
    for path in sorted(root.iterdir() if root.is_dir() else ()):
        if path.name.startswith(bundle_copy.NODE_COPY_PREFIX):
            if (digest := bundle_copy.stamp_digest(path)) is not None:  # guard: node-copy-one-killed-before-its-check-is
                state, detail = "kept copy", f"this node's checked copy of the bundle with digest {digest}"
            elif os.path.lexists(path / bundle_copy.STAMP):  # guard: housekeeping-another-version-s-copy-is-listed
                state, detail = "other version", "a copy whose stamp this nemo-rl does not read"
            else:
                made = locks.held(path)  # guard: housekeeping-a-copy-being-made-is-listed
                state, detail = "unfinished build", "being made now" if made else "killed before its check"
            rows.append(Row("bundle-copy", path, (), None, state, _size_mb(path), None, (), detail))
            continue
        if path.name.startswith("."):
            if ".building-" in path.name and path.is_dir():
                key = path.name[1:].split(".building-")[0]
                rows.append(Row(key, path, (), None, "unfinished build", _size_mb(path), None, users(path)))
            continue
        if not path.is_dir():
            continue
        used = path / environments.LAST_USED
        try:
            env = environments.describe(path)
        except codec.AnotherVersion as exc:
            rows.append(Row(path.name, path, (), None, "other version", _size_mb(path),  # guard: housekeeping-another-version-s-environment-is-listed
                            used.stat().st_mtime if used.exists() else None, users(path),
                            f"{exc.what}: prune removes it once unused"))
            continue
        except NemoRLError as exc:
            rows.append(Row(path.name, path, (), None, "broken", _size_mb(path), None, users(path),  # guard: rest-a-broken-environment-names-its-rm
                            f"{exc.what}; prune leaves it: if it is yours and unused, "
                            f"{command('rm -rf {path}', path=path)}"))
            continue
        if env is None:
            continue
        if project is not None and env.flags not in current:
            current[env.flags] = environments.key_for(project, env.flags)
        note = None
        remove = f"if no other container shares NEMO_RL_VENV_DIR, remove it: {command('rm -rf {path}', path=path)}"
        if project is None or env.project != project.root.resolve():
            state = "other checkout"
        elif (foreign := develop_state.foreign_overlay(path, mine)) is not None:  # guard: plain-another-container-s-environment-is
            state, note = "other checkout", (  # guard: fixes-an-overlay-token-this-checkout
                f"its {foreign} is from a develop this checkout's .nemo-rl/develop.json does not record; {remove}")
        elif env.key == current[env.flags]:
            state = "current"
        elif env.checkout and env.checkout != ours:  # guard: whose-another-checkout-s-id-is-left-to
            state, note = "other checkout", (  # guard: fixes-an-unclaimed-environment-names-the
                f"built by checkout id {env.checkout[:8]}, not this checkout's .nemo-rl/checkout-id; {remove}")
        else:
            state = "stale"
        rows.append(Row(env.key, path, env.flags, env.project, state, _size_mb(path),
                        used.stat().st_mtime if used.exists() else None, users(path), note))
    return rows


def prune(project: Project | None, rows: list[Row] | None = None) -> list[Path]:
    """Remove what is provably this checkout's or another nemo-rl's, and unused, with its lock files; `rows`:
    listing(project)."""
    removed = []
    for row in listing(project) if rows is None else rows:
        if row.state not in ("stale", "other version", "unfinished build", "kept copy"):  # guard: rest-prune-never-removes-a-broken
            continue
        if row.path.name.startswith(bundle_copy.NODE_COPY_PREFIX):
            if locks.remove_unheld(row.path):
                removed.append(row.path)
            continue
        fd = locks.lock_file(environments.Slot(row.path.parent, row.key).lock_path, None)  # writes nothing: a full disk
        if fd is None:
            continue
        try:
            if users(row.path):  # guard: workers-prune-s-in-use-check
                continue
            shutil.rmtree(row.path, ignore_errors=True)
            removed.append(row.path)
        finally:
            os.close(fd)
    return removed + _prune_lock_files() + _prune_packs()  # guard: rest-prune-removes-a-pruned-key-s-lock


def _prune_lock_files() -> list[Path]:
    """Remove `.<key>.lock` files of keys with neither environment nor build, each under its own lock."""
    root = settings.venv_dir(create=False)
    removed = []
    for path in sorted(root.glob(".*.lock") if root.is_dir() else ()):
        where = environments.Slot(root, path.name[1:-len(".lock")])
        if not KEY.fullmatch(where.key) or not _unused(where):
            continue
        if locks.remove_free(path, functools.partial(_unused, where)):
            removed.append(path)
    return removed


def _unused(where: environments.Slot) -> bool:
    return not os.path.lexists(where.path) and not where.building()


def _prune_packs() -> list[Path]:
    from nemo_rl.workers import bundle_pack  # a node build imports this module for `users`: not the pack code

    root = settings.bundle_dir()
    return bundle_pack.remove_dead_packs(root) + bundle_pack.remove_free_pack_locks(root) \
        if root is not None and root.is_dir() else []


@dataclass(frozen=True)
class BundleRow:
    path: Path
    flags: tuple[str, ...]
    state: str  # current | stale | broken | unfinished pack
    size_mb: float
    detail: str | None


def bundle_rows(project: Project | None) -> list[BundleRow]:
    """The bundles under $NEMO_RL_BUNDLE_DIR, against this checkout's inputs."""
    from nemo_rl.workers import bundle_pack

    rows = []
    for path in bundles.configured():
        try:
            manifest = bundles.read_manifest(path)
        except NemoRLError as exc:
            rows.append(BundleRow(path, (), "broken", _size_mb(path), exc.what))
            continue
        different = bundles.differences(manifest, bundles.inputs_for(project, manifest.inputs.flags)) \
            if project else ["no project"]
        rows.append(BundleRow(path, manifest.inputs.flags, "stale" if different else "current",
                              round(manifest.bytes / 1e6, 1), "; ".join(different) or None))
    root = settings.bundle_dir()
    for path in bundle_pack.unfinished_packs(root) if root is not None else ():
        detail = "a pack running now" if locks.held(path) else "a killed pack: `nemo-rl envs prune` removes it"
        rows.append(BundleRow(path, (), "unfinished pack", _size_mb(path), detail))
    return rows
