"""The CUDA wheels' libraries, loaded before transformer-engine (which names them with no RUNPATH). Nothing raises."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import glob
import os
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

# (wheel directory under site-packages/nvidia, library glob), in dependency order
WHEEL_LIBS = (("cuda_runtime", "libcudart.so.*[0-9]"), ("cublas", "libcublasLt.so.*[0-9]"),
              ("cublas", "libcublas.so.*[0-9]"), ("cuda_nvrtc", "libnvrtc.so.*[0-9]"),
              ("cudnn", "libcudnn*.so.*[0-9]"))
# soname prefix -> the wheel that ships it
WHEELS = {"libcudart": "nvidia-cuda-runtime-cu12", "libcublas": "nvidia-cublas-cu12",
          "libnvrtc": "nvidia-cuda-nvrtc-cu12", "libcudnn": "nvidia-cudnn-cu12", "libnccl": "nvidia-nccl-cu12",
          "libcusparse": "nvidia-cusparse-cu12", "libcufft": "nvidia-cufft-cu12", "libcurand": "nvidia-curand-cu12"}


@dataclass(frozen=True)
class Preloaded:
    loaded: tuple[str, ...]  # file names
    failed: Mapping[str, str]  # file name -> the loader's message


def wheel_dir(name: str) -> Path | None:
    for entry in sys.path:
        candidate = Path(entry or ".") / "nvidia" / name / "lib"
        if candidate.is_dir():
            return candidate
    return None


@functools.cache
def preload() -> Preloaded:
    pending = []
    for name, pattern in WHEEL_LIBS:
        directory = wheel_dir(name)
        if directory is not None:
            pending += [Path(p) for p in sorted(glob.glob(str(directory / pattern)))]
    loaded: list[str] = []
    failed: Mapping[str, str] = {}
    while pending:
        failed = {}
        for path in pending:
            try:
                ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
                loaded.append(path.name)
            except OSError as exc:
                failed[path.name] = str(exc)
        if len(failed) in (0, len(pending)):
            break
        pending = [p for p in pending if p.name in failed]
    return Preloaded(tuple(loaded), failed)


def _has_nvrtc(home: str) -> bool:
    # never a recursive glob: CUDA_HOME=/usr has symlink loops (/usr/bin/X11 -> /usr/bin)
    places = ("lib64", "lib", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu", "targets/*/lib")  # guard: libs-cuda-home-is-not-walked
    return any(os.path.exists(p) and "stub" not in p and "libnvrtc-builtins" not in p  # guard: libs-a-dangling-libnvrtc-link-does-not
               for place in places for p in glob.glob(f"{glob.escape(home)}/{place}/libnvrtc.so*"))


@contextlib.contextmanager
def for_transformer_engine() -> Iterator[None]:
    """Around an import reaching transformer_engine: CUDA_HOME is the NVRTC wheel's when the toolkit has no libnvrtc."""
    preload()
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    nvrtc = wheel_dir("cuda_nvrtc")
    if nvrtc is None or _has_nvrtc(home):  # guard: libs-a-toolkit-with-nvrtc-is-left-alone
        yield
        return
    saved = {name: os.environ.get(name) for name in ("CUDA_HOME", "CUDA_PATH")}
    os.environ["CUDA_HOME"] = str(nvrtc.parent)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)  # guard: libs-cuda-home-restored-after-the-import
            else:
                os.environ[name] = value


def missing_library(reason: str | None) -> tuple[str, str] | None:
    """(library, fix) when an import failed because the loader could not find a CUDA library."""
    from nemo_rl import uv

    match = re.search(r"(lib[\w+-]+\.so(?:\.\d+)*): cannot open shared object file", reason or "")
    if match:
        library = match.group(1)
    elif "libnvrtc" in (reason or ""):  # transformer-engine's `ldconfig -p | grep libnvrtc` found none
        library = "libnvrtc.so.12"
    else:
        return None
    if library.startswith("libcuda.so"):
        return library, "libcuda.so.1 comes with the NVIDIA driver: run on a machine with a GPU"
    wheel = next((w for prefix, w in WHEELS.items() if library.startswith(prefix)), None)
    if wheel is None:
        return library, f"install the package that ships {library} or add its directory to LD_LIBRARY_PATH"
    return library, f"{library} comes with the {wheel} wheel: run `{uv.sync_command()}`"
