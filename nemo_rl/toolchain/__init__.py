"""The CUDA toolchain the mcore extra's build needs: nvcc and torch as found here; probes never raise."""

from __future__ import annotations

import argparse
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from nemo_rl.process import run


@dataclass(frozen=True)
class TorchInfo:
    installed: bool
    version: str | None
    cuda_available: bool
    cuda_version: str | None
    error: str | None


def torch_info() -> TorchInfo:
    try:
        import torch
    except Exception as exc:  # a broken CUDA install can raise OSError from torch's own import
        return TorchInfo(False, None, False, None, f"{type(exc).__name__}: {exc}")
    try:
        cuda = bool(torch.cuda.is_available())
    except Exception:  # a driver problem must not hide that torch itself works
        cuda = False
    return TorchInfo(True, torch.__version__, cuda, torch.version.cuda, None)


def cuda_home_setting() -> tuple[str, str] | None:
    for name in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(name):
            return name, os.environ[name]
    return None


def find_nvcc() -> Path | None:
    """nvcc as torch's extension build finds it: a set CUDA_HOME (or CUDA_PATH) alone."""
    setting = cuda_home_setting()
    if setting:  # guard: toolchain-a-set-cuda-home-is-the-only-toolkit
        nvcc = Path(setting[1]) / "bin" / "nvcc"
        return nvcc if nvcc.is_file() else None
    found = Path(shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc")
    return found if found.is_file() else None


def nvcc_version(nvcc: Path | None) -> str | None:
    if nvcc is None:
        return None
    out = run([nvcc, "--version"], check=False, timeout=20).stdout
    match = re.search(r"release (\d+\.\d+)", out)
    return match.group(1) if match else None


@dataclass(frozen=True)
class CudaToolkit:
    ok: bool  # an nvcc whose CUDA major version equals torch's
    detail: str
    nvcc: Path | None
    version: str | None = None


def cuda_toolkit(torch_cuda: str | None) -> CudaToolkit:
    """Whether transformer-engine's torch extension can build here: nvcc's CUDA major is torch's."""
    if torch_cuda is None:
        return CudaToolkit(False, "torch is a CPU build (torch.version.cuda is None)", None)
    major = torch_cuda.split(".")[0]
    nvcc = find_nvcc()
    if nvcc is None:
        setting = cuda_home_setting()
        where = (f"{setting[0]}={setting[1]} has no bin/nvcc" if setting
                 else "no nvcc found (CUDA_HOME, PATH, /usr/local/cuda)")
        return CudaToolkit(False, f"{where}; torch needs CUDA {major}", None)
    version = nvcc_version(nvcc)
    if version is None or version.split(".")[0] != major:
        return CudaToolkit(False, f"{nvcc} is CUDA {version}, torch was built with CUDA {torch_cuda}", nvcc, version)
    return CudaToolkit(True, f"{nvcc} is CUDA {version}, torch's is {torch_cuda}", nvcc, version)


TRANSFORMER_ENGINE = ("transformer-engine", "transformer-engine-cu12", "transformer-engine-torch")
CUDA_TOOLKIT_FIX = ("run `uv run nemo-rl toolchain cuda ~/cuda-{major} --arch 90` (Debian) and its exports, or install "
                    "a CUDA {major} toolkit and `export CUDA_HOME=<it> PATH=<it>/bin:$PATH`")


def transformer_engine_unbuildable(locked_names) -> tuple[list[str], CudaToolkit] | None:
    """(the locked transformer-engine packages, the toolkit found) when they cannot build here."""
    present = [name for name in TRANSFORMER_ENGINE if name in locked_names]
    if not present:
        return None
    toolkit = cuda_toolkit(torch_info().cuda_version)
    return None if toolkit.ok else (present, toolkit)


HELP = "build toolchains the mcore extra needs"
DESCRIPTION = "Build toolchains the mcore extra needs (docs/mcore.md)."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No option of its own: -v goes after the verb."""
