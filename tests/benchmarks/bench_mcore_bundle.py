"""Benchmark: the mcore extra with transformer-engine compiled, packed once, built on a node with no network and
no compiler.

    uv run python tests/benchmarks/bench_mcore_bundle.py \\
        --mirror https://github.com/terrykong/Megatron-LM.git=<local bare mirror of it> \\
        --cold-build-s 1277 --cold-build-run "<where that cold build was measured>"

The builder needs transformer-engine-torch's wheel in its uv cache (a cold `uv sync --extra mcore` with CUDA_HOME
built it once; `--cold-build-s` is that build's measured time, which this script does not repeat: about 20 minutes
on 2 cores). nemo-toolkit is left out (`--no-install-package nemo-toolkit`: its mirror here is incomplete).
Steps: a warm `uv sync` of those flags (the user's cache, environment removed), `nemo-rl envs pack` (a fresh cache
seeded with the built wheel), and the node: a clone of the checkout, an empty uv cache, `unshare -n` (no
network), UV_OFFLINE=1, CUDA_HOME unset, and PATH holding only uv, git, python and wrappers named like every
compiler that log each call and fail; strace counts every exec of a compiler whatever its path. The node runs the
first command of docs/workers.md (`uv run --no-project --offline python -m nemo_rl envs build ... --from`), then
imports transformer_engine.pytorch and megatron.core in the environment it made. Prints a markdown table; writes
JSON to benchmark-results/mcore-bundle.json. Not a test.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from nemo_rl import imports
from nemo_rl.process import run
from nemo_rl.uv import find_uv_bin
from nemo_rl.workers import bundles, cuda_archs

ROOT = Path(__file__).resolve().parents[2]
EXECUTABLE = "uv run --locked --extra mcore --no-install-package nemo-toolkit"
COMPILERS = ("cc", "gcc", "g++", "c++", "clang", "clang++", "nvcc", "ld", "ninja", "cicc", "ptxas",
             "x86_64-linux-gnu-gcc", "x86_64-linux-gnu-g++", "gcc-12", "g++-12")
WRAPPER = '#!/bin/sh\necho "$0 $*" >> "{log}"\nexit 127\n'


def serve(mirror: str, root: Path) -> dict[str, str]:
    url, _, path = mirror.partition("=")
    served = root / "served" / "Megatron-LM.git"
    run(["git", "clone", "-q", "--mirror", "--shared", path, str(served)])
    for key in ("uploadpack.allowFilter", "uploadpack.allowAnySHA1InWant"):
        run(["git", "-C", str(served), "config", key, "true"])
    return {"UV_NO_GITHUB_FAST_PATH": "1", "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": f"url.{served}.insteadOf",
            "GIT_CONFIG_VALUE_0": url}


def timed(args: list[str], env: dict, cwd: Path) -> float:
    started = time.monotonic()
    run(args, env=env, cwd=cwd, stream=True)
    return time.monotonic() - started


def node_path(root: Path, log: Path) -> Path:
    """A PATH directory with what a node has (uv, git, Python) and a logging wrapper for each compiler."""
    bin_dir = root / "node-bin"
    bin_dir.mkdir()
    for name, target in (("uv", find_uv_bin()), ("git", shutil.which("git")), ("python3", sys.executable),
                         ("python3.12", sys.executable)):
        if target:
            os.symlink(os.path.realpath(target), bin_dir / name)
    for name in COMPILERS:
        (bin_dir / name).write_text(WRAPPER.format(log=log))
        (bin_dir / name).chmod(0o755)
    return bin_dir


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", required=True, help="URL=PATH of a local bare mirror of megatron-core's fork")
    parser.add_argument("--cold-build-s", type=float, required=True, help="the measured cold build, in seconds")
    parser.add_argument("--cold-build-run", required=True, help="where and when the cold build was measured")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-mcore-bundle-"))
    env = {**os.environ, **serve(args.mirror, root)}
    env.pop("VIRTUAL_ENV", None)
    flags = EXECUTABLE.split()[2:]
    uv_bin = find_uv_bin()
    try:
        warm_env = {**env, "UV_PROJECT_ENVIRONMENT": str(root / "warm")}
        warm = timed([uv_bin, "sync", "--quiet", *flags], warm_env, ROOT)
        shutil.rmtree(root / "warm")
        bundle = root / "bundle"
        pack = timed([uv_bin, "run", "--locked", "python", "-m", "nemo_rl", "envs", "pack", EXECUTABLE, str(bundle)],
                     env, ROOT)
        manifest = bundles.read_manifest(bundle)
        record = json.loads((bundle / cuda_archs.SIDECAR).read_text())
        node = root / "node"
        run(["git", "clone", "-q", "--no-local", str(ROOT), str(node)])
        log = root / "compiler-calls.log"
        log.touch()
        node_env = {"PATH": str(node_path(root, log)), "HOME": str(root / "home"), "UV_OFFLINE": "1",
                    "UV_CACHE_DIR": str(root / "node-uv-cache"), "UV_PYTHON": os.path.realpath(sys.executable),
                    "NEMO_RL_VENV_DIR": str(root / "node-venvs"), "LANG": "C.UTF-8"}
        trace = root / "exec.trace"
        (root / "home").mkdir()
        tools = [shutil.which("unshare"), shutil.which("strace")]
        if not all(tools):
            raise SystemExit("needs unshare (util-linux) and strace")
        node_s = timed([tools[0], "-n", tools[1], "-f", "--seccomp-bpf", "-qq", "-e", "trace=execve", "-o",
                        str(trace), uv_bin, "run", "--no-project", "--offline", "python", "-m", "nemo_rl", "envs",
                        "build", EXECUTABLE, "--from", str(bundle)], node_env, node)
        made = [p for p in (root / "node-venvs").iterdir() if not p.name.startswith(".") and p.is_dir()]
        os.environ["PATH"] = node_env["PATH"]
        result = imports.check(made[0] / "bin" / "python", ["transformer_engine.pytorch", "megatron.core"],
                               timeout=600)
        if result.failed:
            raise SystemExit(f"the node's environment does not import: {result.failed}")
        execs = re.findall(r'execve\("([^"]+)"', trace.read_text())
        compiler_execs = [e for e in execs if Path(e).name in COMPILERS]
        wrapper_calls = log.read_text().splitlines()
        rows = {
            "cold `uv sync --extra mcore` (transformer-engine-torch built; given by hand, `--cold-build-s`)":
                f"{args.cold_build_s / 60:.1f} min ({args.cold_build_run})",
            "warm `uv sync` (built wheel in the cache, environment removed)": f"{warm:.1f} s",
            "`nemo-rl envs pack` (fresh cache seeded with the built wheel)": f"{pack:.1f} s",
            "bundle": f"{manifest.files} files, {manifest.bytes / 1e9:.2f} GB",
            "node: `envs build --from` (no network, no compiler; `.venv` and the worker environment)":
                f"{node_s:.1f} s",
            "compiler runs on the node (wrappers on PATH / any exec traced)": f"{len(wrapper_calls)} / "
                                                                               f"{len(compiler_execs)}",
            "node time / cold build": f"{100 * node_s / args.cold_build_s:.2f} %",
            "extension archs (read from the binary)": "; ".join(f"{n}: sm {e['sm']}, ptx {e['ptx']}, "
                                                               f"{', '.join(e['host_compilers'])}"
                                                               for n, e in record["extensions"].items()),
        }
        print(f"\n{datetime.date.today()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}\n")
        print("| step | result |\n|---|---|")
        for name, value in rows.items():
            print(f"| {name} | {value} |")
        out = ROOT / "benchmark-results"
        out.mkdir(exist_ok=True)
        (out / "mcore-bundle.json").write_text(json.dumps({"rows": rows, "execs": len(execs), "record": record,
                                                           "wrapper_calls": wrapper_calls,
                                                           "compiler_execs": compiler_execs}, indent=1) + "\n")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"kept {root}")


if __name__ == "__main__":
    sys.exit(main())
