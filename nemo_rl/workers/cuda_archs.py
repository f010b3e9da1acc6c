"""A bundle's CUDA record (its built extensions' GPU architectures, the builder's toolchain), checked on a node."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

from nemo_rl import values
from nemo_rl.errors import NemoRLError
from nemo_rl.process import run
from nemo_rl.toolchain.archs import Archs, fatbin_archs, host_compilers, runs_on, toolchain_record

SIDECAR = "nemo-rl-cuda.json"
SMI_TIMEOUT = 30  # seconds: a wedged driver's nvidia-smi is "could not check", never a hang


def _source_built(lock: dict) -> set[str]:
    return {str(p.get("name")) for p in lock.get("package", []) if isinstance(p, dict) and not p.get("wheels")
            and (p.get("sdist") or "git" in (p.get("source") or {}))}


def compiled_extensions(env: Path, lock: dict) -> dict[str, tuple[str, Archs, Path]]:
    """{file name: (distribution, archs, path)} of each shared object with device code that uv built."""
    import importlib.metadata

    from packaging.utils import canonicalize_name

    from nemo_rl.project import installed

    built = {canonicalize_name(name) for name in _source_built(lock)}
    found: dict[str, tuple[str, Archs, Path]] = {}
    for dist in importlib.metadata.distributions(path=[str(p) for p in installed.site_packages_dirs(env)]):
        name = canonicalize_name(dist.metadata["Name"])
        if name not in built:
            continue
        for file in dist.files or []:
            if file.name.endswith(".so") or ".so." in file.name:
                path = Path(str(dist.locate_file(file)))
                archs = fatbin_archs(path)
                if archs is not None:
                    found[file.name] = (name, archs, path)
    return found


def missing_archs(name: str, archs: Archs, declared: Sequence[int]) -> str | None:
    absent = [a for a in declared if a not in archs.sm]
    if not absent:
        return None
    return (f"{name} holds cubins for sm {', '.join(map(str, archs.sm)) or 'none'} "
            f"(PTX: {', '.join(map(str, archs.ptx)) or 'none'}), the build declares "
            f"{';'.join(map(str, declared))} (NVTE_CUDA_ARCHS): sm {', '.join(map(str, absent))} missing")


def record(env: Path, lock: dict, bundle: Path) -> dict:
    """Write the bundle's CUDA record; raises NemoRLError when a declared arch has no cubins."""
    extensions = compiled_extensions(env, lock)
    tools = toolchain_record() if extensions else {}
    for name, (dist, archs, _) in extensions.items():
        if why := missing_archs(f"{name} of {dist}", archs, tools["declared_archs_at_pack"]):  # guard: archs-a-declared-arch-without-cubins
            raise NemoRLError(why, "set NVTE_CUDA_ARCHS (in this shell and in any `[tool.uv.extra-build-variables]`) "
                              "to the GPUs of your nodes and pack again")
    data = {"toolchain": tools, "extensions": {  # guard: archs-the-host-compilers-are-read-from
        name: {"distribution": dist, "sm": list(a.sm), "ptx": list(a.ptx), "host_compilers": list(host_compilers(path))}
        for name, (dist, a, path) in sorted(extensions.items())}}
    (bundle / SIDECAR).write_text(json.dumps(data, indent=1) + "\n")
    return data


def read_record(bundle: Path) -> bytes:
    try:
        return values.read_plain_file(bundle / SIDECAR)  # guard: plain-the-cuda-record-through-the-one
    except FileNotFoundError as exc:
        raise NemoRLError(f"bundle {bundle} has no {SIDECAR}",  # guard: archs-a-bundle-without-its-record-is
                          "copy the bundle again from the builder, or pack it again") from exc
    except OSError as exc:
        raise NemoRLError(f"cannot read {bundle / SIDECAR}: {exc.strerror or exc}",
                          "copy the bundle again from the builder") from exc


def node_gpus(environ=os.environ) -> tuple[tuple[int | None, ...], str]:
    """Each node GPU's SM number (None: unreadable), whatever CUDA_VISIBLE_DEVICES says, and how found. Never
    raises."""
    if shutil.which("nvidia-smi"):
        every = {k: v for k, v in environ.items() if k != "CUDA_VISIBLE_DEVICES"}
        try:
            out = run(["nvidia-smi", "--query-gpu=index,uuid,compute_cap", "--format=csv,noheader"], check=False,
                      timeout=SMI_TIMEOUT, env=every)
        except (OSError, NemoRLError) as exc:
            return (), f"nvidia-smi did not answer ({str(exc).splitlines()[0][:120]})"
        lines = [line for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []
        rows = [re.fullmatch(r"\s*\d+,\s*\S+,\s*(\d+)\.(\d+)\s*", line) for line in lines]
        unread = [values.printable(line.strip()[:80]) for line, m in zip(lines, rows, strict=True) if m is None]
        if rows:  # guard: archs-the-node-s-gpu-from-nvidia-smi
            return (tuple(int(m.group(1)) * 10 + int(m.group(2)) if m else None for m in rows),
                    "nvidia-smi" + (f"; it could not say the compute capability of {'; '.join(unread)}"
                                    if unread else ""))
    if "CUDA_VISIBLE_DEVICES" in environ:  # guard: archs-torch-is-never-taken-for-the-whole-node
        smi = "nvidia-smi listed no GPU" if shutil.which("nvidia-smi") else "nvidia-smi is not on PATH"
        return (), f"{smi}, and torch sees only this process's CUDA_VISIBLE_DEVICES"
    try:
        import torch

        if torch.cuda.is_available():
            return tuple(major * 10 + minor for major, minor in (torch.cuda.get_device_capability(i)
                                                                 for i in range(torch.cuda.device_count()))), "torch"
    except Exception:  # a broken CUDA install
        pass
    return (), "no GPU found (nvidia-smi, torch)"


def node_record(bundle: Path, gpu: int | None = None) -> tuple[bytes, str | None]:
    """The bundle's CUDA record, refused when its extensions cannot run on the node's GPUs (or `gpu`), and what was
    checked (None without CUDA extensions)."""
    record = read_record(bundle)
    try:
        data = json.loads(record)
        extensions = {str(n): Archs(tuple(map(int, e["sm"])), tuple(map(int, e["ptx"])))
                      for n, e in data["extensions"].items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError, OverflowError) as exc:
        raise NemoRLError(f"cannot read {bundle / SIDECAR}: {exc}", "copy the bundle again from the builder") from exc
    if not extensions:
        return record, None
    gpus, found = ((gpu,), "given") if gpu is not None else node_gpus()
    held = "; ".join(f"{n}: sm {', '.join(map(str, a.sm)) or '-'}" for n, a in extensions.items())
    readable = sorted({g for g in gpus if g is not None})
    for one in readable:
        unfit = [n for n, a in extensions.items() if not runs_on(a, one)]
        if unfit:  # guard: archs-a-gpu-outside-the-archs-refuses
            raise NemoRLError(f"this node's GPU is sm_{one}, but the bundle's {held}: {', '.join(unfit)} cannot run "
                              "here", f"pack again with NVTE_CUDA_ARCHS including {one}")
    if not readable:
        return record, f"{found}: could not check the bundle's CUDA architectures ({held})"
    checked = f"GPU {', '.join(f'sm_{g}' for g in readable)} ({found}) fits the bundle's {held}"
    if None in gpus:  # guard: archs-an-unreadable-gpu-row-is-could-not-check
        checked += "; could not check the bundle's CUDA architectures on the GPUs it could not read"
    return record, checked
