"""Can `uv sync --extra mcore` build here? In seconds, what would stop transformer-engine's build minutes in."""

from __future__ import annotations

import os
import platform
import tempfile
from dataclasses import dataclass
from pathlib import Path

from nemo_rl import git, toolchain
from nemo_rl.errors import NemoRLError, command
from nemo_rl.process import run
from nemo_rl.project.model import Project
from nemo_rl.toolchain import layout


@dataclass(frozen=True)
class Item:
    name: str
    ok: bool
    detail: str
    fix: str | None


def check_python(python) -> Item:
    if python.satisfied:
        return Item("python", True, f"{python.version} satisfies {python.requires_python or 'any'}", None)
    return Item("python", False, f"{python.version} does not satisfy {python.requires_python}",
                "run `uv sync --python 3.12 --extra mcore`")


def check_nvcc(torch_cuda: str | None) -> tuple[Item, Path | None]:
    toolkit = toolchain.cuda_toolkit(torch_cuda)
    fix = None if toolkit.ok else (toolchain.CUDA_TOOLKIT_FIX.format(major=torch_cuda.split(".")[0]) if torch_cuda
                                   else "run `uv sync`: the locked torch is a CUDA 12 build")
    return Item("nvcc", toolkit.ok, toolkit.detail, fix), toolkit.nvcc


def check_host_compiler(nvcc: Path | None) -> Item:
    if nvcc is None:
        return Item("host compiler", False, "not checked: no nvcc", "fix nvcc first")
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "probe.cu"
        source.write_text("__global__ void probe() {}\n")
        result = run([nvcc, "-c", source, "-o", Path(tmp) / "probe.o"], check=False, timeout=120)
    if result.returncode == 0:
        return Item("host compiler", True, f"{nvcc} compiled a kernel with the host compiler", None)
    first = (result.stderr.strip() or result.stdout.strip()).splitlines()[:1]
    return Item("host compiler", False, f"nvcc could not compile a kernel: {first[0] if first else 'no output'}",
                "install a host compiler this nvcc supports and set NVCC_CCBIN to it")


def cudnn_header_dirs() -> list[Path]:
    """Where the build's compilers look for cudnn.h."""
    candidates = [os.environ.get(v) for v in ("CUDNN_PATH", "CUDNN_HOME", "CUDA_HOME")]
    dirs = [Path(c) / "include" for c in candidates if c]
    dirs += [Path(p) for p in os.environ.get("CPATH", "").split(os.pathsep) if p]  # guard: pre-flight-wheel-only-cudnn-headers-fail
    return [*dirs, *SYSTEM_HEADER_DIRS]


SYSTEM_HEADER_DIRS = (Path("/usr/include"), Path(f"/usr/include/{platform.machine()}-linux-gnu"),
                      Path("/usr/local/cuda/include"))


def check_cudnn() -> Item:
    for directory in cudnn_header_dirs():
        if layout.has_cudnn_header(directory):
            return Item("cudnn headers", True, f"found in {directory}", None)
    wheel = layout.cudnn_wheel()
    if wheel is not None:
        return Item("cudnn headers", False, f"only in the wheel {wheel}, which the isolated build does not see",
                    command("export CUDNN_PATH={wheel}", wheel=wheel))
    return Item("cudnn headers", False, "no cudnn.h / cudnn_version.h found",
                "run `uv sync` (torch brings nvidia-cudnn-cu12), then `export CUDNN_PATH=` its nvidia/cudnn directory")


def check_archs(nvcc: Path | None) -> Item:
    """Never a failure: which GPUs the build compiles for decides its length."""
    from nemo_rl.toolchain.archs import declared_archs

    version = toolchain.nvcc_version(nvcc) if nvcc else None
    archs = ";".join(map(str, declared_archs(nvcc_version=version)))
    if os.environ.get("NVTE_CUDA_ARCHS"):
        return Item("gpu architectures", True, f"NVTE_CUDA_ARCHS={archs}: cubins for these only", None)
    return Item("gpu architectures", True, f"NVTE_CUDA_ARCHS unset: builds for {archs} "
                "(`export NVTE_CUDA_ARCHS=90` for H100/H200 only)", None)


def check_hosts(project: Project | None) -> list[Item]:
    items = []
    for fork in project.forks_as_pinned if project else []:
        try:
            git.ls_remote(fork.url, "HEAD", timeout=20)
            items.append(Item(f"reach {fork.distribution}", True, f"{fork.url} answers", None))
        except NemoRLError as exc:
            items.append(Item(f"reach {fork.distribution}", False, exc.what.splitlines()[0],
                              f"check the network, or "
                              f"{command('git config --global url.<mirror>.insteadOf {url}', url=fork.url)} "
                              "and `export UV_NO_GITHUB_FAST_PATH=1`"))
    return items


def run_all(project: Project | None, python, torch) -> list[Item]:
    nvcc_item, nvcc = check_nvcc(torch.cuda_version if torch.installed else None)
    return [check_python(python), nvcc_item, check_host_compiler(nvcc), check_cudnn(), check_archs(nvcc),
            *check_hosts(project)]
