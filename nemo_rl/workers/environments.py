"""Worker environments: built once per node from uv.lock, keyed by what defines them, verified before use.

The key hashes uv.lock's bytes, the sync flags, the Python version, the platform and any fork developed
from a local checkout, so a changed lock gives a new environment and never reuses a stale one. Concurrent
requests for a key build it once (a lock file); a build happens beside its final path and is renamed into
place (uv's --relocatable venvs survive the move), so a half-built environment is never used.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from nemo_rl import settings, uv
from nemo_rl.errors import NemoRLError
from nemo_rl.process import run
from nemo_rl.progress import progress
from nemo_rl.project import develop_state, installed, lockfile

META = "nemo-rl-env.json"
LAST_USED = ".last-used"
VERIFY = """
import importlib.metadata, json, sys
def commit(name):
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return None
    text = dist.read_text("direct_url.json")
    return (json.loads(text).get("vcs_info") or {}).get("commit_id") if text else "not from git"
try:
    ray = importlib.metadata.version("ray")
except importlib.metadata.PackageNotFoundError:
    ray = None
print(json.dumps({"python": sys.version.split()[0], "prefix": sys.prefix, "ray": ray,
                  "forks": {name: commit(name) for name in sys.argv[1:]}}))
"""


@dataclass(frozen=True)
class WorkerEnv:
    key: str
    path: Path
    flags: list[str]
    project: str
    lock_hash: str

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"


def lock_hash(project: Path) -> str:
    return hashlib.sha256(lockfile.read_text(project / "uv.lock").encode()).hexdigest()


def key_for(project: Path, flags: list[str]) -> str:
    developed = {dist: str(entry.checkout) for dist, entry in sorted(develop_state.read(project).items())}
    facts = {"lock": lock_hash(project), "flags": sorted(flags), "python": platform.python_version(),
             "platform": f"{sys.platform}-{platform.machine()}", "developing": developed}
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:24]


def describe(path: Path) -> WorkerEnv | None:
    try:
        meta = json.loads((path / META).read_text())
    except (OSError, ValueError):
        return None
    return WorkerEnv(meta["key"], path, meta["flags"], meta["project"], meta["lock_hash"])


def ensure(project: Path, flags: list[str]) -> WorkerEnv:
    """The verified environment for (project's uv.lock, flags), built first if this node lacks it."""
    key = key_for(project, flags)
    root = settings.venv_dir()
    final = root / key
    with open(root / f".{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # others asking for the same key wait here, then reuse the result
        if describe(final) is None:
            _build(project, flags, key, final)
    env = describe(final)
    verify(env, project)
    (final / LAST_USED).touch()
    return env


def _build(project: Path, flags: list[str], key: str, final: Path) -> None:
    staging = final.with_name(f".{key}.building-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.rmtree(final, ignore_errors=True)  # a directory without metadata is a build that never finished
    progress(f"building worker environment {key} (uv sync {' '.join(flags)}); a cold mcore build takes minutes")
    try:
        uv.uv(["venv", "--quiet", "--relocatable", "--python", sys.executable, str(staging)])
        uv.sync(project, flags=[*flags, "--inexact"], environment=staging, stream=True)
        _overlay_developed(project, staging)
        meta = {"key": key, "flags": flags, "project": str(project), "lock_hash": lock_hash(project),
                "python": platform.python_version(), "created": time.time()}
        (staging / META).write_text(json.dumps(meta, indent=2))
        os.replace(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    progress(f"worker environment ready: {final}")


def _overlay_developed(project: Path, env: Path) -> None:
    """Forks under `nemo-rl deps develop` run from their checkout in workers too (see nemo_rl.project.develop_state)."""
    for entry in develop_state.read(project).values():
        develop_state.install_overlay(env, entry.distribution, entry.checkout)


def verify(env: WorkerEnv, project: Path) -> dict:
    """The interpreter runs, its Python and Ray equal the driver's, every installed fork is the locked commit."""
    rebuild = f"remove {env.path} and ask again: it is rebuilt from uv.lock"
    if not env.python.exists():
        raise NemoRLError(f"worker environment {env.path} has no interpreter at {env.python}", rebuild)
    forks = lockfile.forks(project)
    try:
        out = run([env.python, "-c", VERIFY, *(f.distribution for f in forks)], timeout=60).stdout
        facts = json.loads(out.strip().splitlines()[-1])
    except (NemoRLError, ValueError, IndexError) as exc:
        raise NemoRLError(f"the interpreter of worker environment {env.path} does not run: {exc}", rebuild) from exc
    problems = []
    if facts["python"] != platform.python_version():
        problems.append(f"Python {facts['python']} there, {platform.python_version()} in the driver")
    try:
        driver_ray = importlib.metadata.version("ray")
    except importlib.metadata.PackageNotFoundError:
        driver_ray = None
    if facts["ray"] != driver_ray:
        problems.append(f"Ray {facts['ray']} there, {driver_ray} in the driver")
    locked = lockfile.locked_packages(project)
    for name, installed_commit in facts["forks"].items():
        package = locked.get(name)
        if installed_commit and package and package.commit:
            if installed.commit_mismatch(installed_commit, package.commit):
                problems.append(f"{name} is {installed_commit[:12]} there, uv.lock pins {package.commit[:12]}")
    if problems:
        raise NemoRLError(f"worker environment {env.path} does not match the driver: {'; '.join(problems)}", rebuild)
    return facts


def listing(project: Path | None) -> list[dict]:
    """Every environment under settings.venv_dir(); current when its key is what the project gives its flags now (same
    uv.lock, Python, platform and developed forks), else stale."""
    rows = []
    current_keys: dict[tuple[str, ...], str] = {}  # the project's key per flags, computed once (it hashes uv.lock)
    root = settings.venv_dir(create=False)  # listing creates nothing (a read-only checkout can still list)
    for path in sorted(root.iterdir() if root.is_dir() else ()):
        env = describe(path) if path.is_dir() and not path.name.startswith(".") else None
        if env is None:
            continue
        if project is not None and tuple(env.flags) not in current_keys:
            current_keys[tuple(env.flags)] = key_for(project, env.flags)
        current = project is not None and env.project == str(project) and env.key == current_keys[tuple(env.flags)]
        used = path / LAST_USED
        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())
        rows.append({"key": env.key, "path": str(path), "flags": env.flags, "project": env.project,
                     "state": "current" if current else "stale",
                     "size_mb": round(size / 1e6, 1), "last_used": used.stat().st_mtime if used.exists() else None})
    return rows


def prune(project: Path | None) -> list[str]:
    """Remove stale environments that no process holds (the build lock is free and no process runs from it)."""
    removed = []
    for row in listing(project):
        if row["state"] != "stale" or _in_use(Path(row["path"])):
            continue
        with open(settings.venv_dir() / f".{row['key']}.lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            shutil.rmtree(row["path"], ignore_errors=True)
        (settings.venv_dir() / f".{row['key']}.lock").unlink(missing_ok=True)
        removed.append(row["path"])
    return removed


def _in_use(path: Path) -> bool:
    prefix = str(path.resolve())
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/exe").startswith(prefix) or prefix in open(f"/proc/{pid}/cmdline").read():
                return True
        except OSError:
            continue
    return False
