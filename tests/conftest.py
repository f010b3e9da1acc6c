"""Shared fixtures. Tests never write to $HOME, never use the user's uv cache and reach no network but PyPI."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from nemo_rl import extras

# Tests that build fixture repositories, run real uv/git end to end or start Ray: `pytest -m "not slow"` leaves
# them out for a quick inner loop (CI runs everything).
SLOW_FIXTURES = {"world", "ray_world", "cluster", "venv_dir"}

# A run under nohup inherits SIGHUP ignored (and, started with `&` by a shell without job control, SIGINT), and
# so would every nemo-rl the tests start: nemo-rl keeps an ignored SIGHUP (nohup asked for it), and the
# interruption tests would wait for it to end. The tests' processes start with the default dispositions.
for _signum, _default in ((signal.SIGHUP, signal.SIG_DFL), (signal.SIGINT, signal.default_int_handler)):
    if signal.getsignal(_signum) == signal.SIG_IGN:
        signal.signal(_signum, _default)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
        if "mcore" in item.keywords:
            probe = extras.probe("megatron")
            if not probe.installed:
                item.add_marker(pytest.mark.skip(reason=f"needs the mcore extra: {probe.reason}"))
        if "nvcc" in item.keywords and _cuda12_nvcc() is None:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA 12 nvcc (set CUDA_HOME; `nemo-rl toolchain cuda "
                                                    "DIR` makes one)"))
        if "cuda_toolkit" in item.keywords and os.environ.get("NEMO_RL_CUDA_TESTS") != "1":
            item.add_marker(pytest.mark.skip(reason="the CUDA build tier runs only when asked: NEMO_RL_CUDA_TESTS=1 "
                                                    "(minutes to an hour, a 1 GB download)"))
        if "gpu" in item.keywords and not _cuda_available():
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device (torch.cuda.is_available() is False)"))


def _cuda12_nvcc() -> Path | None:
    from nemo_rl import toolchain

    nvcc = toolchain.find_nvcc()
    return nvcc if nvcc and (toolchain.nvcc_version(nvcc) or "").startswith("12.") else None


@pytest.fixture(scope="module")
def sm80_extension(tmp_path_factory) -> Path:
    """A shared object with one kernel compiled for sm_80 only, by the CUDA 12 nvcc found here."""
    from nemo_rl import toolchain
    from nemo_rl.process import run

    nvcc = toolchain.find_nvcc()
    work = tmp_path_factory.mktemp("ext")
    (work / "kernel.cu").write_text("__global__ void twice(float *x) { x[threadIdx.x] *= 2.0f; }\n"
                                    "void launch(float *x) { twice<<<1, 32>>>(x); }\n")
    run([nvcc, "-shared", "-Xcompiler", "-fPIC", "-gencode", "arch=compute_80,code=sm_80", work / "kernel.cu",
         "-o", work / "fixture_ext.cpython-312-x86_64-linux-gnu.so"], timeout=300)
    return work / "fixture_ext.cpython-312-x86_64-linux-gnu.so"


def _cuda_available() -> bool:
    try:
        import torch
    except Exception:
        return False
    return bool(torch.cuda.is_available())


def _children_of(pid: int) -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            tree.setdefault(parent, []).append(int(entry))
    return tree


@pytest.fixture(autouse=True)
def children_end_with_the_test():
    """A test that started a process and failed (a timeout, an assertion before its wait) must not leave it
    running: what this test started directly is killed with its descendants when the test ends. Processes of
    session fixtures (the Ray cluster, its workers) were there before and are not this test's."""
    before = set(_children_of(os.getpid()).get(os.getpid(), []))
    yield
    tree = _children_of(os.getpid())
    todo = [pid for pid in tree.get(os.getpid(), []) if pid not in before]
    while todo:
        pid = todo.pop()
        todo.extend(tree.get(pid, []))
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@pytest.fixture(autouse=True)
def signals_as_found():
    """A test that changed how pytest's own process takes a signal (a disposition, or the blocked mask, which
    children inherit too) fails, and it is put back: a SIGHUP left ignored here is inherited by every process
    later tests start, and their interruption tests then wait on commands that rightly keep it ignored."""
    before = [signal.getsignal(s) for s in _SIGNALS]
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield
    after = [signal.getsignal(s) for s in _SIGNALS]
    changed = [f"{s.name}: {b!r} -> {a!r}" for s, b, a in zip(_SIGNALS, before, after, strict=True) if a != b]
    for signum, handler in zip(_SIGNALS, before, strict=True):
        signal.signal(signum, handler)
    if (blocked := signal.pthread_sigmask(signal.SIG_SETMASK, mask)) != mask:
        changed.append(f"blocked {sorted(s.name for s in blocked)} instead of {sorted(s.name for s in mask)}")
    assert not changed, f"the test left pytest's process taking signals otherwise: {', '.join(changed)}"


@pytest.fixture
def no_lockd(monkeypatch):
    """fcntl.flock as on NFS without lockd: every lock ENOLCK (unlocking still works)."""
    import errno
    import fcntl

    real = fcntl.flock

    def flock(fd, operation):
        if operation & fcntl.LOCK_UN:
            return real(fd, operation)
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", flock)


@pytest.fixture(scope="session")
def uv_cache(tmp_path_factory) -> Path:
    """One private uv cache for the session: PyPI downloads (hatchling) happen once, never in ~/.cache."""
    return tmp_path_factory.mktemp("uv-cache")


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch, uv_cache):
    """$HOME, caches and git's global config point into tmp, so a test cannot touch the user's."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("NEMO_RL_CACHE_DIR", str(tmp_path / "nemo-rl-cache"))
    monkeypatch.setenv("UV_CACHE_DIR", str(uv_cache))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("UV_NO_GITHUB_FAST_PATH", "1")
    for name in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "GIT_CONFIG_COUNT", "UV_OFFLINE", "UV_FROZEN", "UV_LOCKED"):
        monkeypatch.delenv(name, raising=False)
    yield home


@pytest.fixture(scope="session")
def history_template(tmp_path_factory):
    """A few commits on two branches in a plain local repository (tests/gitfixtures.py small_history)."""
    from gitfixtures import small_history

    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
        return small_history(tmp_path_factory.mktemp("history"))


@pytest.fixture
def history(history_template, tmp_path):
    """A private copy of `history_template`: (repository, main's three commits, side's two)."""
    import shutil

    repo, main, side = history_template
    shutil.copytree(repo, tmp_path / "repo", symlinks=True)
    return tmp_path / "repo", main, side


@pytest.fixture(scope="session")
def world_template(tmp_path_factory, uv_cache):
    """The fixture world built once per test run (repositories, `uv lock`, records); each test gets a copy."""
    import forkworld

    root = tmp_path_factory.mktemp("world-template") / "world"
    w = forkworld.make_world(root)
    env = {"HOME": str(root.parent), "UV_CACHE_DIR": str(uv_cache), "GIT_CONFIG_GLOBAL": os.devnull,
           "UV_NO_GITHUB_FAST_PATH": "1", "NEMO_RL_CACHE_DIR": str(root.parent / "cache"), **w.git_env()}
    with pytest.MonkeyPatch.context() as monkeypatch:
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        for name in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "UV_OFFLINE", "UV_FROZEN", "UV_LOCKED"):
            monkeypatch.delenv(name, raising=False)
        forkworld.uv_run(w, "lock", "--quiet")
        forkworld.make_records(w)
    return w


@pytest.fixture
def world(tmp_path, monkeypatch, world_template):
    """Fixture forks and a locked fixture project, reached through insteadOf (see tests/forkworld.py): a private
    copy of the session's template, so a test may change anything in it."""
    import forkworld

    w = forkworld.copy_world(world_template, tmp_path / "world")
    forkworld.apply_env(w, monkeypatch)
    return w


@pytest.fixture(scope="session")
def ray_world(tmp_path_factory, uv_cache):
    """The fixture project plus Ray (the driver's version), locked; its git and uv settings exported before Ray
    starts, so tasks on every node see the same mirrors and the session's private uv cache."""
    import importlib.metadata

    import forkworld

    world = forkworld.make_world(tmp_path_factory.mktemp("rayworld"))
    pyproject = world.project / "pyproject.toml"
    ray_version = importlib.metadata.version("ray")
    pyproject.write_text(pyproject.read_text().replace("dependencies = []", f'dependencies = ["ray=={ray_version}"]'))
    saved = dict(os.environ)
    os.environ.update(world.git_env())
    os.environ.update({"UV_CACHE_DIR": str(uv_cache), "UV_NO_GITHUB_FAST_PATH": "1", "GIT_CONFIG_GLOBAL": os.devnull,
                       # Ray writes ~/.ray/auth_token: the session's Ray gets a home of its own
                       "HOME": str(tmp_path_factory.mktemp("ray-home"))})
    forkworld.uv_run(world, "lock", "--quiet")
    forkworld.make_records(world)
    yield world
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(scope="session")
def cluster(ray_world, tmp_path_factory):
    from ray.cluster_utils import Cluster

    os.environ["RAY_ENABLE_UV_RUN_RUNTIME_ENV"] = "0"  # what workers.start_ray does, before any node starts
    # Loopback only: Ray's single-machine mode (its default on macOS and Windows) uses 127.0.0.1 for every node,
    # where node_ip_address="127.0.0.1" alone leaves clients dialling the machine's own address.
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    from ray._private import ray_constants

    ray_constants.ENABLE_RAY_CLUSTER = False
    os.environ["RAY_TMPDIR"] = str(tmp_path_factory.mktemp("ray"))  # sessions, sockets and logs under the test's tmp
    head = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    head.add_node(num_cpus=1)
    from nemo_rl import workers

    workers.start_ray(address=head.address)
    import ray

    assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
    yield head
    ray.shutdown()
    head.shutdown()


@pytest.fixture
def venv_dir(tmp_path, monkeypatch, ray_world):
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    monkeypatch.setenv("UV_CACHE_DIR", os.environ["UV_CACHE_DIR"])
    for key, value in ray_world.git_env().items():
        monkeypatch.setenv(key, value)
    return tmp_path / "venvs"
