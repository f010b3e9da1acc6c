"""The Debian packages' files arranged as a relocatable CUDA_HOME."""

from __future__ import annotations

import os
import platform
import shutil
import sys
from pathlib import Path

USR_BIN_TOOLS = ("cudafe++", "fatbinary", "nvlink", "ptxas", "bin2c", "cuobjdump", "nvdisasm", "nvprune", "cu++filt")

PROFILE = """\
TOP              = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH += $(TOP)/lib64:
PATH            += $(TOP)/nvvm/bin:$(_HERE_):
INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)
LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib64/stubs" "-L$(TOP)/lib64"
CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
"""

REQUIRED = ("bin/nvcc", "bin/nvcc.profile", "bin/crt/link.stub", "bin/cudafe++", "bin/fatbinary", "bin/nvlink",
            "bin/ptxas", "bin/bin2c", "bin/cuobjdump", "nvvm/bin/cicc", "nvvm/lib64/libnvvm.so",
            "nvvm/libdevice/libdevice.10.bc", "include/cuda_runtime.h", "include/crt/host_config.h",
            "lib64/libcudart.so", "lib64/libcudadevrt.a")


def triplet() -> str:
    return f"{platform.machine()}-linux-gnu"


def mapping(root: Path, lib: str) -> list[tuple[Path, str]]:
    """(path in the extracted packages, path under CUDA_HOME)."""
    toolkit = root / "usr/lib/nvidia-cuda-toolkit"
    pairs = [(toolkit / "bin/nvcc", "bin/nvcc"), (toolkit / "bin/crt", "bin/crt"),  # guard: toolkit-the-real-nvcc-not-debian-s
             (toolkit / "bin/cicc", "nvvm/bin/cicc"), (toolkit / "libdevice", "nvvm/libdevice"),
             (root / "usr/include", "include"), (root / "usr/lib" / lib, "lib64")]
    pairs += [(root / "usr/bin" / tool, f"bin/{tool}") for tool in USR_BIN_TOOLS]
    pairs += [(path, f"nvvm/lib64/{path.name}") for path in sorted((root / "usr/lib" / lib).glob("libnvvm.so*"))]
    return pairs


def _place(source: Path, target: Path, links: list[Path]) -> None:
    """`target` as `source`: the same symlink (added to `links`), or a hard link, or a copy."""
    if target.is_symlink() or target.exists():
        target.unlink()
    if source.is_symlink():
        os.symlink(os.readlink(source), target)
        links.append(target)
        return
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def arrange(root: Path, home: Path, lib: str | None = None) -> list[str]:
    """Lay out `home` from the extracted tree `root`; returns the REQUIRED paths still missing."""
    links: list[Path] = []
    for source, relative in mapping(root, lib or triplet()):
        if source.is_dir() and not source.is_symlink():
            for dirpath, dirnames, filenames in os.walk(source):
                here = home / relative / Path(dirpath).relative_to(source)
                here.mkdir(parents=True, exist_ok=True)
                for name in [*filenames, *(d for d in dirnames if (Path(dirpath) / d).is_symlink())]:
                    _place(Path(dirpath) / name, here / name, links)
        elif source.exists() or source.is_symlink():
            (home / relative).parent.mkdir(parents=True, exist_ok=True)
            _place(source, home / relative, links)
    # links to packages not taken mislead transformer-engine's glob for libnvrtc.so*
    for path in links:
        if path.is_symlink() and not path.exists():
            path.unlink()  # guard: toolkit-dangling-links-removed
    (home / "bin").mkdir(parents=True, exist_ok=True)
    (home / "bin/nvcc.profile").write_text(PROFILE)
    return missing(home)


def missing(home: Path) -> list[str]:
    return [relative for relative in REQUIRED if not (home / relative).exists()]


def listing(home: Path, skip: tuple[str, ...]) -> dict[str, str]:
    """Every path under `home` but the top-level names in `skip`: a file by its size, a link by its target."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(home):
        if Path(dirpath) == home:
            dirnames[:] = [d for d in dirnames if d not in skip]
            filenames = [f for f in filenames if f not in skip]
        for name in [*filenames, *(d for d in dirnames if (Path(dirpath) / d).is_symlink())]:
            path = Path(dirpath) / name
            relative = path.relative_to(home).as_posix()
            found[relative] = f"-> {os.readlink(path)}" if path.is_symlink() else str(path.lstat().st_size)
    return dict(sorted(found.items()))


def has_cudnn_header(directory: Path) -> bool:
    return (directory / "cudnn_version.h").is_file() or (directory / "cudnn.h").is_file()


def cudnn_wheel() -> Path | None:
    """The nvidia-cudnn-cu12 wheel of this environment; None when missing."""
    for entry in sys.path:
        if entry and has_cudnn_header(Path(entry) / "nvidia" / "cudnn" / "include"):
            return Path(entry) / "nvidia" / "cudnn"
    return None
