"""Worker environments: built once per node from uv.lock, keyed by their inputs, verified before use."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import shutil
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from nemo_rl import codec, imports, interrupt, locks, settings, uv, values
from nemo_rl.errors import NemoRLError
from nemo_rl.progress import progress
from nemo_rl.project import develop_state, identity, installed
from nemo_rl.project.model import Project
from nemo_rl.workers import bundles, manifests, verified

META = "nemo-rl-env.json"
META_VERSION = 1
LAST_USED = ".last-used"


@dataclass(frozen=True)
class WorkerEnv:
    """One environment's metadata (META in its directory)."""

    key: str
    path: Path
    flags: tuple[str, ...]
    project: Path
    lock_hash: str
    checkout: str = ""  # the building checkout's id; "" from a read-only checkout

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    def write(self, directory: Path) -> None:
        codec.write(directory / META, self, META_VERSION, given=("path",))

    @classmethod
    def read(cls, path: Path) -> WorkerEnv | None:
        """The environment at `path`; None when it has no metadata; codec.AnotherVersion when another nemo-rl's."""
        fix = f"remove {path}: it is rebuilt from uv.lock"
        env = codec.read(path / META, cls, META_VERSION, fix=fix, name="worker-environment metadata", path=path)
        if env is not None and (env.key != path.name or not env.project.is_absolute()  # guard: fast-worker-env-key-is-its-directory-s
                                or not (env.checkout == "" or identity.ID.fullmatch(env.checkout))):
            raise NemoRLError(f"{path / META} is not worker-environment metadata", fix)
        return env


@dataclass(frozen=True)
class Slot:
    """Where the environment of one key lives, and the files beside it."""

    root: Path
    key: str

    @property
    def path(self) -> Path:
        return self.root / self.key

    @property
    def lock_path(self) -> Path:
        return self.root / f".{self.key}.lock"

    def building(self) -> list[Path]:
        """Builds of this key in progress, or left by killed builds."""
        return sorted(self.root.glob(f".{self.key}.building-*"))

    def staging(self) -> Path:
        return self.root / f".{self.key}.building-{os.getpid()}"

    @contextlib.contextmanager
    def locked(self, *, wait: bool = True) -> Iterator[bool]:
        """Hold the key's lock; False when busy and not `wait`."""
        waited = []

        def waiting(fd: int) -> str:
            waited.append(True)
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            return f"waiting for {holder} to finish worker environment {self.key}"

        try:
            fd = locks.lock_file(self.lock_path, waiting if wait else None)
        except OSError as exc:
            raise settings.venv_dir_error(self.root, exc) from exc
        if fd is None:
            yield False
            return
        try:
            if waited:
                progress(f"worker environment {self.key}: the other build finished")
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} on {platform.node()}, since {time.strftime('%H:%M:%S')}".encode(), 0)
            yield True
        finally:
            os.close(fd)


def slot(key: str) -> Slot:
    return Slot(settings.venv_dir(), key)


def key_for(project: Project, flags: Sequence[str]) -> str:
    return _key(project.root.resolve(), project.lock_hash, flags, project.developing)


def _key(root: Path, lock_hash: str, flags: Sequence[str], developing: Mapping[str, develop_state.Developed]) -> str:
    developed = {dist: [str(e.checkout), e.token] for dist, e in sorted(developing.items())}  # guard: the-develop-token-is-in-the-worker-key
    facts = {"project": str(root), "lock": lock_hash, "flags": sorted(flags),  # guard: workers-python-version-in-the-key
             "python": platform.python_version(), "platform": f"{sys.platform}-{platform.machine()}",
             "developing": developed}
    # another nemo-rl's environment gets a key of its own: never rebuilt in place while its jobs run
    facts["metadata"] = str(META_VERSION)  # guard: workers-the-metadata-version-is-in-the-key
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:24]


describe = WorkerEnv.read


def ensure(project: Project, flags: list[str], *, bundle: Path | None = None, digest: str | None = None) -> WorkerEnv:
    """The verified environment for (uv.lock, flags), built if missing from `bundle`, a found one or the network."""
    root, lock_hash = project.root.resolve(), project.lock_hash
    where = slot(key_for(project, flags))
    with where.locked():
        for leftover in where.building():  # we hold the lock: whoever made these is gone
            shutil.rmtree(leftover, ignore_errors=True)  # guard: workers-killed-builds-removed
        try:
            found = WorkerEnv.read(where.path)
        except codec.AnotherVersion:  # only by hand at this key: the version is in it
            found = None
        manifest = None
        if found is None or found.project != root:  # guard: whose-metadata-of-another-project-is
            manifest = _build(project, flags, where, bundle or bundles.find(project, flags), digest)
        env = WorkerEnv.read(where.path)
        if env is None:  # a bug, not a user's mistake
            raise RuntimeError(f"{where.path} has no metadata after its build")
        modules = verified.modules_to_import(project.forks, env.path)
        if not verified.still_verified(env.path, lock_hash, modules):  # guard: verified-the-record-is-used
            verify(env, project, proven=manifest.proven if manifest else None, modules=modules)
    (where.path / LAST_USED).touch()
    return env


def _build(project: Project, flags: list[str], where: Slot, bundle: Path | None,
           digest: str | None) -> bundles.Manifest | None:
    """Build the environment; from a bundle, return its checked manifest."""
    root = project.root.resolve()
    manifest = bundles.check(bundle, project, flags, digest) if bundle is not None else None
    checkout = project.checkout_id  # guard: whose-a-build-records-its-checkout-s-id
    staging = where.staging()
    values.plain_path(staging, "the worker environment directory")  # guard: never-no-control-character-in-a-worker
    from nemo_rl.workers import housekeeping  # it lists what this module builds

    if os.path.lexists(where.path) and (pids := housekeeping.users(where.path)):  # guard: workers-a-build-never-removes-an-environment-in-use
        raise NemoRLError(f"worker environment {where.path} has no metadata this nemo-rl reads, and processes "
                          f"{', '.join(map(str, pids))} run from it", "stop those processes and ask again")
    shutil.rmtree(where.path, ignore_errors=True)  # no metadata: a build that never finished
    progress(f"building worker environment {where.key} (uv sync {' '.join(flags)}); a cold mcore build takes "
             "minutes")
    try:
        uv.venv(staging, python=sys.executable)
        if bundle is not None and manifest is not None:
            bundles.sync_from(bundle, project, flags, staging, manifest)
        else:
            uv.sync(project.root, flags=[*flags, "--inexact"], environment=staging, stream=True)
        develop_state.install_overlays(staging, project.root, project.developing)  # forks under develop
        WorkerEnv(where.key, where.path, tuple(flags), root, project.lock_hash, checkout).write(staging)
        os.replace(staging, where.path)
        interrupt.completed(f"the worker environment {where.path} is built (its first use verifies it)")  # guard: rest-envs-build-records-the-built
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    progress(f"worker environment ready: {where.path}")
    return manifest


def verify(env: WorkerEnv, project: Project, *, proven: manifests.Proven | None = None,
           modules: list[str] | None = None) -> None:
    """Check the environment against driver and uv.lock; record a pass. `proven`: what a checked bundle proved."""
    modules = verified.modules_to_import(project.forks, env.path) if modules is None else modules
    rebuild = f"remove {env.path} and ask again: it is rebuilt from uv.lock"
    verified.forget(env.path)
    watched = verified.watched_dirs(env.path)
    before = verified.snapshot(env.path, watched)  # guard: verified-nothing-recorded-when-the-state
    if not env.python.exists():
        raise NemoRLError(f"worker environment {env.path} has no interpreter at {env.python}", rebuild)
    try:
        if proven is not None and list(proven.modules) == modules:
            progress(f"{', '.join(modules)}: imported by the pack from these bytes, not imported again")
            result = imports.Result(platform.python_version(), {}, tuple(str(env.path / f) for f in proven.files))
        else:
            result = imports.check(env.python, modules)
    except NemoRLError as exc:
        raise NemoRLError(f"the interpreter of worker environment {env.path} does not run: {exc}", rebuild) from exc
    problems = [f"import {module} fails: {error}" for module, error in result.failed.items()]  # guard: workers-import-check
    if result.python != platform.python_version():  # guard: workers-python-version-checked
        problems.append(f"Python {result.python} there, {platform.python_version()} in the driver")
    driver_ray = installed.version(Path(sys.prefix), "ray")
    if driver_ray is None:  # guard: workers-a-driver-without-ray-is-named
        raise NemoRLError(f"the driver environment {sys.prefix} has no Ray whose metadata reads",
                          "run `uv cache clean ray && uv sync --locked --inexact --reinstall-package ray`; "
                          "without network, "
                          "`uv run --no-project --offline python -m nemo_rl envs build PY_EXECUTABLE --from BUNDLE`")
    dists = installed.distributions(env.path)
    ray_there = dists["ray"].version if "ray" in dists else None
    if ray_there != driver_ray:  # guard: workers-ray-version
        problems.append(f"Ray {ray_there} there, {driver_ray} in the driver")
    # these need packaging, which the node path does not
    from packaging.utils import canonicalize_name

    from nemo_rl.forks import installed_fork

    for fork in project.forks:
        package = project.packages.get(fork.distribution)
        if not (package and package.commit):
            continue
        if canonicalize_name(fork.distribution) in dists:
            problems += map(str, installed_fork.problems(project, env.path, fork.distribution, dists=dists))  # guard: installed-worker-environments-compare
        elif project.extras_require(env.flags, fork.distribution):  # guard: workers-fork-commit-checked
            problems.append(f"{fork.distribution} is missing there, uv.lock pins {package.commit[:12]}")
    if problems:
        raise NemoRLError(f"worker environment {env.path} is broken: {'; '.join(problems)}", rebuild)
    # the metadata the checks above read: an edit in place moves no directory
    metadata = [str(p) for site in verified.sites(env.path)  # guard: the-metadata-recorded-by-the-paths-the
                for p in [*site.glob("*.dist-info/direct_url.json"), *site.glob("ray-*.dist-info/METADATA")]]
    verified.write(env.path, project.lock_hash, result.python, ray_there, modules, watched,  # guard: verified-directories-in-the-state
                   verified.inside(env.path, [*result.files, *metadata]), before)
