"""The GPU architectures compiled into a bundle's CUDA extensions, read from the binaries; the toolchain that
compiled them; and a node's refusal of a bundle whose extensions cannot run on its GPU.

The architectures come from the ELF `.nv_fatbin` section of each shared object that uv built from source here
(transformer-engine's torch extension): each fatbin entry header names its kind (cubin or PTX) and its SM. The
settings that were meant to produce them (NVTE_CUDA_ARCHS) are recorded beside them, and a declared
architecture without cubins fails the pack: uv may reuse a wheel it built earlier with other settings.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

from nemo_rl import values
from nemo_rl.errors import NemoRLError
from nemo_rl.process import run

SIDECAR = "nemo-rl-cuda.json"  # beside the bundle's manifest
FATBIN_MAGIC = 0xBA55ED50
CUBIN, PTX = 2, 1
# transformer-engine's build defaults when NVTE_CUDA_ARCHS is unset (build_tools/utils.py of 2.3)
SMI_TIMEOUT = 30  # seconds: an nvidia-smi stuck on a wedged driver is "could not check", never a hang
TE_DEFAULT_ARCHS = {(12, 8): (70, 80, 89, 90, 100, 120), (0, 0): (70, 80, 89, 90)}


@dataclass(frozen=True)
class Archs:
    sm: tuple[int, ...]  # cubins: run on GPUs of the same major and an equal or higher minor
    ptx: tuple[int, ...]  # PTX: JIT-compiled by the driver on any GPU of that SM or newer


def _section(fh, name: bytes, file_size: int) -> tuple[int, int] | None:
    """(offset, size) of a section of an ELF64 little-endian file, or None; ValueError or struct.error when the
    file is not what its headers say (every offset and size is checked against the file's size)."""
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
    """The cubin and PTX architectures in `path`'s fatbins; None when it holds no device code. A file whose
    headers do not add up is a NemoRLError naming it (a crafted one must neither hang nor crash a pack)."""
    try:
        return _fatbin_archs(path)
    except (ValueError, struct.error, OverflowError, MemoryError) as exc:
        raise NemoRLError(f"cannot read the device code of {path}: {exc}",
                          "the file is damaged or not a CUDA extension; rebuild the distribution that ships it "
                          "(`uv cache clean PACKAGE`, then pack again)") from exc


def _fatbin_archs(path: Path) -> Archs | None:
    with open(path, "rb") as fh:
        where = _section(fh, b".nv_fatbin", os.fstat(fh.fileno()).st_size)
        if where is None:
            return None
        fh.seek(where[0])
        data = fh.read(where[1])
    sm: set[int] = set()
    ptx: set[int] = set()
    pos = 0
    while pos + 16 <= len(data):
        magic, _, header, size = struct.unpack_from("<IHHQ", data, pos)
        if magic != FATBIN_MAGIC:  # fatbins of several translation units are padded to 8 bytes
            pos += 8
            continue
        entry, end = pos + header, pos + header + size
        if header < 16 or end > len(data):  # a header that does not move on, or entries past the section
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
    """NVTE_CUDA_ARCHS ("80;90", "90a" counts as 90), or transformer-engine's default for this nvcc."""
    setting = environ.get("NVTE_CUDA_ARCHS")
    if setting:
        return tuple(sorted({int(m) for m in re.findall(r"(\d+)", setting)}))
    version = tuple(int(p) for p in (nvcc_version or "0.0").split(".")[:2])
    return next(archs for floor, archs in sorted(TE_DEFAULT_ARCHS.items(), reverse=True) if version >= floor)


def declared_at_pack(environ=os.environ) -> tuple[int, ...]:
    """The archs a pack declares: NVTE_CUDA_ARCHS, else transformer-engine's default for the nvcc found here."""
    if environ.get("NVTE_CUDA_ARCHS"):
        return declared_archs(environ)
    from nemo_rl import toolchain

    nvcc = toolchain.find_nvcc()
    return declared_archs(environ, toolchain.nvcc_version(nvcc) if nvcc else None)


def runs_on(archs: Archs, gpu: int) -> bool:
    return (any(sm // 10 == gpu // 10 and sm <= gpu for sm in archs.sm)  # guard: archs-same-major-only-for-cubins
            or any(ptx <= gpu for ptx in archs.ptx))


def _source_built(lock: dict) -> set[str]:
    """Distributions the lock offers no wheel for: uv builds them on the builder (sdists, git sources)."""
    return {str(p.get("name")) for p in lock.get("package", []) if isinstance(p, dict) and not p.get("wheels")
            and (p.get("sdist") or "git" in (p.get("source") or {}))}


def host_compilers(path: Path) -> tuple[str, ...]:
    """The compilers named in `path`'s ELF `.comment` section ("GCC: (Debian 12.2.0-14) 12.2.0"): each object
    file that went into it adds its compiler's line, so this is what built the extension, whatever is installed
    now. nvcc leaves no such trace (its cubins carry no tool note), hence `nvcc_at_pack` in the record."""
    try:
        with open(path, "rb") as fh:
            where = _section(fh, b".comment", os.fstat(fh.fileno()).st_size)
            if where is None:
                return ()
            fh.seek(where[0])
            data = fh.read(min(where[1], 1 << 16))
    except (OSError, ValueError, struct.error, OverflowError):
        return ()
    lines = (line.decode("utf-8", "replace").strip() for line in data.split(b"\0"))
    return tuple(sorted({line[:200] for line in lines if line}))


def compiled_extensions(env: Path, lock: dict) -> dict[str, tuple[str, Archs, Path]]:
    """{file name: (distribution, archs, path)} for each shared object with device code that uv built here."""
    import importlib.metadata

    from packaging.utils import canonicalize_name

    from nemo_rl.project import installed

    built = {canonicalize_name(name) for name in _source_built(lock)}
    found: dict[str, tuple[str, Archs, Path]] = {}
    for dist in importlib.metadata.distributions(path=[str(p) for p in installed.site_packages_dirs(env)]):
        name = canonicalize_name(dist.metadata["Name"])  # the wheel says transformer_engine_torch
        if name not in built:
            continue
        for file in dist.files or []:
            if file.name.endswith(".so") or ".so." in file.name:
                path = Path(str(dist.locate_file(file)))
                archs = fatbin_archs(path)
                if archs is not None:
                    found[file.name] = (name, archs, path)
    return found


def host_compiler_command(environ=os.environ) -> list[str]:
    """The host compiler nvcc would use, as a command line: CXX may carry a launcher (`ccache g++`)."""
    setting = environ.get("NVCC_CCBIN") or environ.get("CXX")
    try:
        words = shlex.split(setting) if setting else []  # guard: archs-cxx-parsed-as-a-command-line
    except ValueError:  # an unbalanced quote: nothing to run
        words = []
    return words or [shutil.which("c++") or "c++"]


def toolchain_record() -> dict:
    """The toolchain on this builder when it packs. A wheel uv reuses from its cache was built earlier, perhaps
    by another nvcc: the fields say `at_pack`, and each extension's own compilers are read from its binary."""
    from nemo_rl import toolchain

    nvcc = toolchain.find_nvcc()
    try:
        host = run([*host_compiler_command(), "--version"], check=False, timeout=20).stdout.strip().splitlines()[:1]
    except (OSError, NemoRLError):  # a CXX naming no program: the record says so rather than failing the pack
        host = []
    version = toolchain.nvcc_version(nvcc) if nvcc else None
    return {"nvcc_at_pack": version, "host_compiler_at_pack": host[0] if host else None,
            "declared_archs_at_pack": list(declared_archs(nvcc_version=version))}


def record(env: Path, lock: dict, bundle: Path) -> dict:
    """Write the bundle's CUDA record (every bundle has one, so a node tells "no CUDA extension" from "record
    lost"); refuse when a declared arch has no cubins."""
    extensions = compiled_extensions(env, lock)
    tools = toolchain_record() if extensions else {}
    for name, (dist, archs, _) in extensions.items():
        absent = [a for a in tools["declared_archs_at_pack"] if a not in archs.sm]
        if absent:  # guard: archs-a-declared-arch-without-cubins
            raise NemoRLError(
                f"{name} of {dist} holds cubins for sm {', '.join(map(str, archs.sm)) or 'none'} "
                f"(PTX: {', '.join(map(str, archs.ptx)) or 'none'}), but the build declares "
                f"{';'.join(map(str, tools['declared_archs_at_pack']))} (NVTE_CUDA_ARCHS): sm "
                f"{', '.join(map(str, absent))} missing", "set NVTE_CUDA_ARCHS (in this shell and in any "
                "`[tool.uv.extra-build-variables]`) to the GPUs of your nodes and pack again: a seeded wheel without "
                "them is built again in the pack's own cache, and your uv cache keeps its build (no `uv cache clean`)")
    data = {"toolchain": tools, "extensions": {  # guard: archs-the-host-compilers-are-read-from
        name: {"distribution": dist, "sm": list(a.sm), "ptx": list(a.ptx), "host_compilers": list(host_compilers(path))}
        for name, (dist, a, path) in sorted(extensions.items())}}
    (bundle / SIDECAR).write_text(json.dumps(data, indent=1) + "\n")
    return data


def read_record(bundle: Path) -> bytes:
    """The bundle's CUDA record, as bytes: the node checks these against the digest and the GPU, never a later
    read of the file. Every bundle has one; a missing record would silently skip the arch check."""
    try:
        return values.read_plain_file(bundle / SIDECAR)  # guard: plain-the-cuda-record-through-the-one
    except FileNotFoundError as exc:
        raise NemoRLError(f"bundle {bundle} has no {SIDECAR} (every bundle records its CUDA extensions, even none)",  # guard: archs-a-bundle-without-its-record-is
                          "copy the bundle again from the builder, or pack it again with this nemo-rl") from exc
    except OSError as exc:
        raise NemoRLError(f"cannot read {bundle / SIDECAR}: {exc.strerror or exc}",
                          "copy the bundle again from the builder") from exc


def node_gpus(environ=os.environ) -> tuple[tuple[int, ...], str]:
    """The SM number (90 for compute capability 9.0) of every GPU of this node, whatever CUDA_VISIBLE_DEVICES gives
    this process: the environment built serves every worker of the node, each given GPUs of its own. How they were
    found, or why none could be. A probe: never raises (a hung nvidia-smi is a reason, not an error)."""
    if shutil.which("nvidia-smi"):
        # nvidia-smi lists every GPU unless told otherwise: nothing of this process's selection reaches it
        every = {k: v for k, v in environ.items() if k != "CUDA_VISIBLE_DEVICES"}
        try:
            out = run(["nvidia-smi", "--query-gpu=index,uuid,compute_cap", "--format=csv,noheader"], check=False,
                      timeout=SMI_TIMEOUT, env=every)
        except (OSError, NemoRLError) as exc:
            return (), f"nvidia-smi did not answer ({str(exc).splitlines()[0][:120]})"
        rows = [int(m.group(1)) * 10 + int(m.group(2)) for m in
                re.finditer(r"^\s*\d+,\s*\S+,\s*(\d+)\.(\d+)\s*$", out.stdout, re.M)] if out.returncode == 0 else []
        if rows:  # guard: archs-the-node-s-gpu-from-nvidia-smi
            return tuple(rows), "nvidia-smi"
    if "CUDA_VISIBLE_DEVICES" in environ:  # guard: archs-torch-is-never-taken-for-the-whole-node
        smi = "nvidia-smi listed no GPU" if shutil.which("nvidia-smi") else "nvidia-smi is not on PATH"
        return (), f"{smi}, and torch sees only the GPUs CUDA_VISIBLE_DEVICES gives this process, not the node's"
    try:
        import torch

        if torch.cuda.is_available():  # every GPU: CUDA_VISIBLE_DEVICES is unset
            return tuple(major * 10 + minor for major, minor in (torch.cuda.get_device_capability(i)
                                                                 for i in range(torch.cuda.device_count()))), "torch"
    except Exception:  # a broken CUDA install: the same as no GPU for this check
        pass
    return (), "no GPU found (nvidia-smi, torch)"


def check_node(record: bytes, bundle: Path, gpu: int | None = None) -> str | None:
    """Refuse (before anything is installed) a bundle whose extensions cannot run on one of this node's GPUs
    (`gpu`: tests only; a node asks node_gpus); a line saying what was checked, or that nothing could be,
    otherwise (None: the bundle has no CUDA extensions)."""
    try:
        data = json.loads(record)
        extensions = {str(n): Archs(tuple(map(int, e["sm"])), tuple(map(int, e["ptx"])))
                      for n, e in data["extensions"].items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError, OverflowError) as exc:
        raise NemoRLError(f"cannot read {bundle / SIDECAR}: {exc}", "copy the bundle again from the builder") from exc
    if not extensions:
        return None
    gpus, found = ((gpu,), "given") if gpu is not None else node_gpus()
    held = "; ".join(f"{n}: sm {', '.join(map(str, a.sm)) or '-'}" for n, a in extensions.items())
    if not gpus:
        return f"{found}: could not check the bundle's CUDA architectures ({held})"
    for one in sorted(set(gpus)):
        unfit = [n for n, a in extensions.items() if not runs_on(a, one)]
        if unfit:  # guard: archs-a-gpu-outside-the-archs-refuses
            raise NemoRLError(f"this node's GPU is sm_{one}, but the bundle's {held}: {', '.join(unfit)} cannot run "
                              "here", f"pack again on the builder with NVTE_CUDA_ARCHS including {one} (e.g. "
                              f"NVTE_CUDA_ARCHS=\"{one}\"): a seeded wheel without it is built again for the bundle")
    return f"GPU {', '.join(f'sm_{g}' for g in sorted(set(gpus)))} ({found}) fits the bundle's {held}"
