"""The GPU architectures CUDA code holds (read from ELF `.nv_fatbin` sections) and is declared to be built for."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

from nemo_rl import toolchain
from nemo_rl.errors import NemoRLError
from nemo_rl.process import run

FATBIN_MAGIC = 0xBA55ED50
CUBIN, PTX = 2, 1
# transformer-engine's build defaults when NVTE_CUDA_ARCHS is unset (build_tools/utils.py of 2.3)
TE_DEFAULT_ARCHS = {(12, 8): (70, 80, 89, 90, 100, 120), (0, 0): (70, 80, 89, 90)}


@dataclass(frozen=True)
class Archs:
    sm: tuple[int, ...]  # cubins: run on GPUs of the same major and an equal or higher minor
    ptx: tuple[int, ...]  # PTX: JIT-compiled by the driver on any GPU of that SM or newer


def _section(fh, name: bytes, file_size: int) -> tuple[int, int] | None:
    """(offset, size) of a section of an ELF64 little-endian file, or None; ValueError when its headers lie."""
    head = fh.read(64)
    if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        return None
    shoff, = struct.unpack_from("<Q", head, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
    if shentsize < 64 or shoff + shentsize * shnum > file_size:
        raise ValueError("its section table lies outside the file")
    fh.seek(shoff)
    table = fh.read(shentsize * shnum)
    sections = [struct.unpack_from("<IIQQQQ", table, i * shentsize) for i in range(shnum)]
    if any(offset + size > file_size for _, kind, _, _, offset, size in sections if kind != 8):  # 8: NOBITS
        raise ValueError("a section lies outside the file")
    if shstrndx >= len(sections):
        return None
    fh.seek(sections[shstrndx][4])
    names = fh.read(sections[shstrndx][5])
    for name_off, _, _, _, offset, size in sections:
        if names[name_off:names.find(b"\0", name_off)] == name:
            return offset, size
    return None


def fatbin_archs(path: Path) -> Archs | None:
    """The cubin and PTX architectures in `path`'s fatbins; None when it holds no device code."""
    try:
        return _fatbin_archs(path)
    except (ValueError, struct.error, OverflowError, MemoryError) as exc:
        raise NemoRLError(f"cannot read the device code of {path}: {exc}",
                          "run `uv cache clean PACKAGE` for the distribution that ships it, then pack again") from exc


def _read_section(path: Path, name: bytes, limit: int | None = None) -> bytes | None:
    with open(path, "rb") as fh:
        where = _section(fh, name, os.fstat(fh.fileno()).st_size)
        if where is None:
            return None
        fh.seek(where[0])
        return fh.read(where[1] if limit is None else min(where[1], limit))


def _fatbin_archs(path: Path) -> Archs | None:
    data = _read_section(path, b".nv_fatbin")
    if data is None:
        return None
    sm: set[int] = set()
    ptx: set[int] = set()
    pos = 0
    while pos + 16 <= len(data):
        magic, _, header, size = struct.unpack_from("<IHHQ", data, pos)
        if magic != FATBIN_MAGIC:  # fatbins of several translation units are padded to 8 bytes
            pos += 8
            continue
        entry, end = pos + header, pos + header + size
        if header < 16 or end > len(data):
            raise ValueError(f"a fatbin at offset {pos} of .nv_fatbin is malformed")
        while entry + 32 <= end:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            arch, = struct.unpack_from("<I", data, entry + 28)
            (sm if kind == CUBIN else ptx if kind == PTX else set()).add(arch)
            if entry_header == 0:
                break
            entry += entry_header + payload
        pos = end
    return Archs(tuple(sorted(sm)), tuple(sorted(ptx)))


def list_elf_archs(cuobjdump_output: str) -> tuple[int, ...]:
    """The SMs of `cuobjdump --list-elf` lines ("ELF file    1: x.1.sm_90.cubin")."""
    return tuple(sorted({int(m) for m in re.findall(r"\.sm_(\d+)a?\.cubin", cuobjdump_output)}))


def declared_archs(environ=os.environ, nvcc_version: str | None = None) -> tuple[int, ...]:
    """NVTE_CUDA_ARCHS ("80;90a" is 80, 90), or transformer-engine's default for this nvcc."""
    setting = environ.get("NVTE_CUDA_ARCHS")
    if setting:
        return tuple(sorted({int(m) for m in re.findall(r"(\d+)", setting)}))
    version = tuple(int(p) for p in (nvcc_version or "0.0").split(".")[:2])
    return next(archs for floor, archs in sorted(TE_DEFAULT_ARCHS.items(), reverse=True) if version >= floor)


def declared_at_pack(environ=os.environ) -> tuple[int, ...]:
    set_here = environ.get("NVTE_CUDA_ARCHS")
    return declared_archs(environ, None if set_here else toolchain.nvcc_version(toolchain.find_nvcc()))


def runs_on(archs: Archs, gpu: int) -> bool:
    return (any(sm // 10 == gpu // 10 and sm <= gpu for sm in archs.sm)  # guard: archs-same-major-only-for-cubins
            or any(ptx <= gpu for ptx in archs.ptx))


def host_compilers(path: Path) -> tuple[str, ...]:
    """The compilers named in `path`'s ELF `.comment` section."""
    try:
        data = _read_section(path, b".comment", 1 << 16) or b""
    except (OSError, ValueError, struct.error, OverflowError):
        return ()
    lines = (line.decode("utf-8", "replace").strip() for line in data.split(b"\0"))
    return tuple(sorted({line[:200] for line in lines if line}))


def host_compiler_command(environ=os.environ) -> list[str]:
    """The host compiler nvcc would use, as a command line (CXX may be `ccache g++`)."""
    setting = environ.get("NVCC_CCBIN") or environ.get("CXX")
    try:
        words = shlex.split(setting) if setting else []  # guard: archs-cxx-parsed-as-a-command-line
    except ValueError:
        words = []
    return words or [shutil.which("c++") or "c++"]


def toolchain_record() -> dict:
    try:
        host = run([*host_compiler_command(), "--version"], check=False, timeout=20).stdout.strip().splitlines()[:1]
    except (OSError, NemoRLError):  # a CXX naming no program
        host = []
    version = toolchain.nvcc_version(toolchain.find_nvcc())
    return {"nvcc_at_pack": version, "host_compiler_at_pack": host[0] if host else None,
            "declared_archs_at_pack": list(declared_archs(nvcc_version=version))}
