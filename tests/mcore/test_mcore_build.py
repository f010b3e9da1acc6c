"""The CUDA build tier: transformer-engine-torch really built (or taken from a uv cache that holds its build),
imported on this machine without a GPU, its archs read from the binary; then packed into a bundle and installed
from it offline with no compiler on PATH.

Runs only with NEMO_RL_CUDA_TESTS=1 and a CUDA 12 nvcc in CUDA_HOME (`nemo-rl toolchain cuda DIR`); .ci/run sets
neither. NEMO_RL_CUDA_TESTS_CACHE names a uv cache to reuse (the builder's, ~1 min) instead of a cold build in the
session's empty one (about 20 min on 2 cores for one arch). The forks are left out: they are git sources
(docs/mirrors.md) and have no CUDA code; the build is transformer-engine's.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from nemo_rl import imports, toolchain, uv
from nemo_rl.project import lockfile
from nemo_rl.project.model import Project
from nemo_rl.toolchain import archs
from nemo_rl.workers import bundle_pack, bundles, cuda_archs

ROOT = Path(__file__).resolve().parents[2]
FLAGS = ["--locked", "--extra", "mcore", "--no-install-package", "megatron-core", "--no-install-package",
         "nemo-toolkit"]
pytestmark = [pytest.mark.cuda_toolkit, pytest.mark.nvcc]


@pytest.fixture(scope="module")
def build_env(tmp_path_factory) -> dict[str, str]:
    nvcc = toolchain.find_nvcc()
    cudnn = next((Path(p) / "nvidia" / "cudnn" for p in sys.path if (Path(p) / "nvidia/cudnn/include").is_dir()),
                 None)
    if cudnn is None:
        pytest.skip("needs torch's nvidia-cudnn-cu12 wheel in this environment (`uv sync`)")
    env = {"CUDA_HOME": str(nvcc.parent.parent), "PATH": f"{nvcc.parent}{os.pathsep}{os.environ['PATH']}",
           "CUDNN_PATH": str(cudnn), "NVTE_CUDA_ARCHS": os.environ.get("NVTE_CUDA_ARCHS", "90"),
           "MAX_JOBS": os.environ.get("MAX_JOBS", "2")}
    if os.environ.get("NEMO_RL_CUDA_TESTS_CACHE"):
        env["UV_CACHE_DIR"] = os.environ["NEMO_RL_CUDA_TESTS_CACHE"]
    return env


def test_the_extra_builds_and_transformer_engine_imports_without_a_gpu(build_env, tmp_path, monkeypatch):
    for key, value in build_env.items():
        monkeypatch.setenv(key, value)
    env = tmp_path / "mcore"
    uv.sync(ROOT, flags=FLAGS, environment=env, stream=True)
    python = env / "bin" / "python"
    result = imports.check(python, ["transformer_engine.pytorch", "transformer_engine.common.recipe"], timeout=600)
    assert result.failed == {}, result.failed
    declared = build_env["NVTE_CUDA_ARCHS"]
    monkeypatch.setenv("NVTE_CUDA_ARCHS", declared)
    data = cuda_archs.record(env, lockfile.load_toml(ROOT / "uv.lock"), tmp_path)
    (extension, held), = data["extensions"].items()
    assert extension.startswith("transformer_engine_torch") and held["sm"] == list(
        archs.declared_archs({"NVTE_CUDA_ARCHS": declared}))
    assert data["toolchain"]["nvcc_at_pack"].startswith("12.")


def test_a_bundle_installs_transformer_engine_offline_with_no_compiler(build_env, tmp_path, monkeypatch):
    """pack builds into a fresh uv cache seeded from the builder's (NEMO_RL_CUDA_TESTS_CACHE, else the session's:
    then a cold build of transformer-engine-torch); the node has no nvcc, no c++, no network access for uv."""
    for key, value in build_env.items():
        monkeypatch.setenv(key, value)
    bundle = tmp_path / "bundle"
    bundle_pack.pack(Project.read(ROOT), FLAGS, bundle)
    assert (bundle / cuda_archs.SIDECAR).is_file()
    no_compiler = tmp_path / "bin"
    no_compiler.mkdir()
    for tool in ("uv", "git"):  # what a node has; no nvcc, c++, gcc or ninja
        found = shutil.which(tool)
        if found:
            os.symlink(found, no_compiler / tool)
    for name in ("python3", "python3.12"):  # and its Python, which uv looks for on PATH
        os.symlink(os.path.realpath(sys.executable), no_compiler / name)
    for key in ("CUDA_HOME", "CUDNN_PATH", "UV_CACHE_DIR"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("PATH", str(no_compiler))
    monkeypatch.setenv("UV_OFFLINE", "1")
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    monkeypatch.setattr(cuda_archs, "node_gpus", lambda: ((), "no GPU found (nvidia-smi, torch)"))
    bundles.check(bundle, Project.read(ROOT), FLAGS)
    node_env = tmp_path / "node"
    bundles.sync_from(bundle, Project.read(ROOT), FLAGS, node_env, bundles.read_manifest(bundle))
    result = imports.check(node_env / "bin" / "python", ["transformer_engine.pytorch"], timeout=600)
    assert result.failed == {}, result.failed
