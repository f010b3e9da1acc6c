"""Pre-flight of the mcore build: in seconds, what would stop transformer-engine's build minutes in."""

from __future__ import annotations

import os
import platform
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from nemo_rl import git, toolchain, uv, values
from nemo_rl.errors import NemoRLError, command
from nemo_rl.process import run
from nemo_rl.project.model import Project
from nemo_rl.toolchain import layout
from nemo_rl.toolchain.archs import declared_archs


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
                "run `uv sync --python 3.12`")


PATH_VARIABLES = ("CUDA_HOME", "CUDA_PATH", "CUDNN_PATH", "CUDNN_HOME")


def check_paths() -> Item | None:
    """The build runs in uv's copy of the sdist: a relative path there names another directory."""
    relative = [n for n in PATH_VARIABLES if os.environ.get(n) and not os.path.isabs(os.environ[n])]
    if relative:  # guard: pre-flight-relative-toolkit-paths-fail
        return Item("absolute paths", False, f"{', '.join(f'{n}={os.environ[n]}' for n in relative)}: relative",
                    "`export " + " ".join(f'{n}="$(realpath {shlex.quote(os.environ[n])})"' for n in relative) + "`")
    return None


def check_nvcc(torch_cuda: str | None) -> tuple[Item, toolchain.CudaToolkit]:
    toolkit = toolchain.cuda_toolkit(torch_cuda)
    fix = None if toolkit.ok else (toolchain.CUDA_TOOLKIT_FIX.format(major=torch_cuda.split(".")[0]) if torch_cuda
                                   else "run `uv sync`: the locked torch is a CUDA 12 build")
    return Item("nvcc", toolkit.ok, toolkit.detail, fix), toolkit


def _compile(nvcc: Path, flags: list[str]) -> str | None:
    """None when `nvcc` compiles a kernel with `flags` (and torch's `-ccbin $CC`), else its first output line."""
    ccbin = []
    if os.environ.get("CC"):  # guard: pre-flight-probes-with-the-cc-torch-passes
        ccbin = ["-ccbin", os.environ["CC"]]
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "probe.cu"
        source.write_text("__global__ void probe() {}\n")
        result = run([nvcc, *ccbin, *flags, "-c", source, "-o", Path(tmp) / "probe.o"], check=False, timeout=120)
    if result.returncode == 0:
        return None
    first = (result.stderr.strip() or result.stdout.strip()).splitlines()[:1]
    return values.printable(first[0]) if first else f"exit {result.returncode}, no output"


def check_host_compiler(nvcc: Path | None) -> Item:
    if nvcc is None:
        return Item("host compiler", False, "not checked: no nvcc", "fix nvcc first")
    compiler = f"CC={os.environ['CC']}" if os.environ.get("CC") else "the default host compiler"
    said = _compile(nvcc, [])
    if said is None:
        return Item("host compiler", True, f"{nvcc} compiled a kernel with {compiler}", None)
    return Item("host compiler", False, f"nvcc could not compile a kernel with {compiler}: {said}",
                "install a host compiler this nvcc supports and `export CC=<it> CXX=<its C++ compiler>`")


SYSTEM_HEADER_DIRS = (Path("/usr/include"), Path(f"/usr/include/{platform.machine()}-linux-gnu"),
                      Path("/usr/local/cuda/include"))


def check_cudnn() -> Item:
    candidates = [os.environ.get(v) for v in ("CUDNN_PATH", "CUDNN_HOME", "CUDA_HOME")]
    dirs = [Path(c) / "include" for c in candidates if c]
    dirs += [Path(p) for p in os.environ.get("CPATH", "").split(os.pathsep) if p]  # guard: pre-flight-wheel-only-cudnn-headers-fail
    for directory in [*dirs, *SYSTEM_HEADER_DIRS]:
        if layout.has_cudnn_header(directory):
            return Item("cudnn headers", True, f"found in {directory}", None)
    wheel = layout.cudnn_wheel()
    if wheel is not None:
        return Item("cudnn headers", False, f"only in the wheel {wheel}, unseen by the isolated build",
                    command("export CUDNN_PATH={wheel}", wheel=wheel))
    return Item("cudnn headers", False, "no cudnn.h / cudnn_version.h found",
                "run `uv sync`, then `export CUDNN_PATH=` the nvidia/cudnn directory of nvidia-cudnn-cu12")


def check_archs(nvcc: Path | None, nvcc_version: str | None, compiles: bool) -> Item:
    """The GPUs the build compiles for; one nvcc cannot compile for is a failure."""
    declared = list(declared_archs(nvcc_version=nvcc_version))
    archs = ";".join(map(str, declared))
    if nvcc is not None and compiles:
        failed = [(arch, said) for arch in declared
                  if (said := _compile(nvcc, [f"-gencode=arch=compute_{arch},code=sm_{arch}"])) is not None]
        if failed:  # guard: pre-flight-each-declared-arch-compiles
            return Item("gpu architectures", False, f"{nvcc} cannot compile for sm_{failed[0][0]}: {failed[0][1]}",
                        f"`export NVTE_CUDA_ARCHS=` archs that {command('{nvcc} --list-gpu-arch', nvcc=str(nvcc))} "
                        "lists, or use a newer CUDA 12 toolkit")
    if os.environ.get("NVTE_CUDA_ARCHS"):
        return Item("gpu architectures", True, f"NVTE_CUDA_ARCHS={archs}: cubins for these only", None)
    return Item("gpu architectures", True, f"NVTE_CUDA_ARCHS unset: builds for {archs} "
                "(`export NVTE_CUDA_ARCHS=90` for H100/H200 only)", None)


FETCH_TIMEOUT_S = 60


def check_hosts(project: Project | None) -> list[Item]:
    if project is None:
        return []
    items = []
    mirrored = []
    for fork in project.forks_as_pinned:
        name = f"reach {fork.distribution}"
        locked = project.packages.get(fork.distribution)
        sha = (locked.commit if locked else None) or fork.rev
        tried = git.tried_url(fork.url)
        if urlsplit(fork.url).hostname == "github.com" and tried and tried != fork.url:
            mirrored.append(fork.url)
        try:
            git.ls_remote(fork.url, "HEAD", timeout=20)
        except NemoRLError as exc:
            items.append(Item(name, False, exc.what.splitlines()[0], "check the network, or "
                              f"{command('git config --global url.<mirror>.insteadOf {url}', url=fork.url)} "
                              "and `export UV_NO_GITHUB_FAST_PATH=1`"))
            continue
        served = git.served(fork.url, sha, timeout=FETCH_TIMEOUT_S)
        where = fork.url + (f" (git tried {tried})" if tried and tried != fork.url else "")
        if served is not True:  # guard: pre-flight-reach-fetches-the-locked-commit
            said = "does not serve" if served is False else f"did not give within {FETCH_TIMEOUT_S} s"
            items.append(Item(name, False, f"{where} {said} the locked commit {sha[:12]}",
                              f"update the mirror so it holds {sha}, or point insteadOf at one that does"))
            continue
        items.append(Item(name, True, f"{where} serves the locked commit {sha[:12]}", None))
    if mirrored and os.environ.get("UV_NO_GITHUB_FAST_PATH", "").strip().lower() in uv.FALSE:  # guard: pre-flight-a-github-mirror-needs-no-fast-path
        items.append(Item("github fast path", False, f"uv asks GitHub's API about {', '.join(mirrored)}, bypassing "
                          "the insteadOf mirror", "`export UV_NO_GITHUB_FAST_PATH=1`"))
    return items


def run_all(project: Project | None, python, torch) -> list[Item]:
    nvcc_item, toolkit = check_nvcc(torch.cuda_version if torch.installed else None)
    host = check_host_compiler(toolkit.nvcc)
    paths = check_paths()
    return [check_python(python), *([paths] if paths else []), nvcc_item, host, check_cudnn(),
            check_archs(toolkit.nvcc, toolkit.version, host.ok), *check_hosts(project)]
