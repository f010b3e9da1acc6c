"""A bundle's CUDA record: the GPU architectures compiled into its extensions (read from the binaries uv built
from source here, transformer-engine's torch extension) and the toolchain on the builder; and a node's refusal of a
bundle whose extensions cannot run on its GPU. A declared architecture without cubins fails the pack: uv may reuse
a wheel it built earlier with other settings."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from nemo_rl import values
from nemo_rl.errors import NemoRLError
from nemo_rl.process import run
from nemo_rl.toolchain.archs import Archs, fatbin_archs, host_compilers, runs_on, toolchain_record

SIDECAR = "nemo-rl-cuda.json"  # beside the bundle's manifest
SMI_TIMEOUT = 30  # seconds: an nvidia-smi stuck on a wedged driver is "could not check", never a hang


def _source_built(lock: dict) -> set[str]:
    """Distributions the lock offers no wheel for: uv builds them on the builder (sdists, git sources)."""
    return {str(p.get("name")) for p in lock.get("package", []) if isinstance(p, dict) and not p.get("wheels")
            and (p.get("sdist") or "git" in (p.get("source") or {}))}


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


def node_gpus(environ=os.environ) -> tuple[tuple[int | None, ...], str]:
    """The SM number (90 for compute capability 9.0; None: a GPU nvidia-smi lists but cannot say it of) of every GPU
    of this node, whatever CUDA_VISIBLE_DEVICES gives this process: the environment built serves every worker of the
    node, each given GPUs of its own. How they were found, or why none could be. A probe: never raises (a hung
    nvidia-smi is a reason, not an error)."""
    if shutil.which("nvidia-smi"):
        # nvidia-smi lists every GPU unless told otherwise: nothing of this process's selection reaches it
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
    readable = sorted({g for g in gpus if g is not None})
    if not readable:
        return f"{found}: could not check the bundle's CUDA architectures ({held})"
    for one in readable:
        unfit = [n for n, a in extensions.items() if not runs_on(a, one)]
        if unfit:  # guard: archs-a-gpu-outside-the-archs-refuses
            raise NemoRLError(f"this node's GPU is sm_{one}, but the bundle's {held}: {', '.join(unfit)} cannot run "
                              "here", f"pack again on the builder with NVTE_CUDA_ARCHS including {one} (e.g. "
                              f"NVTE_CUDA_ARCHS=\"{one}\"): a seeded wheel without it is built again for the bundle")
    fits = f"GPU {', '.join(f'sm_{g}' for g in readable)} ({found}) fits the bundle's {held}"
    if None in gpus:  # guard: archs-an-unreadable-gpu-row-is-could-not-check
        return f"{fits}; could not check the bundle's CUDA architectures on the GPUs it could not read"
    return fits
