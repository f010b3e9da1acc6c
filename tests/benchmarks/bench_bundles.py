"""Benchmark: a worker environment built on a node from a bundle, against `uv sync` from the network.

    uv run python tests/benchmarks/bench_bundles.py --cases fixture base
    uv run python tests/benchmarks/bench_bundles.py --cases mcore megatron \\
        --mirror https://github.com/terrykong/Megatron-LM.git=<local bare mirror of it>

Cases: `fixture` (synthetic: the test forks; megatron-core with a small C extension, no torch, no Ray), `base`
(real: this checkout's base environment, torch and Ray from PyPI), `mcore` (real: this checkout's MCORE
environment, torch, Ray and megatron-core at the pinned commit through a local mirror, without nemo-toolkit and
transformer-engine: MCORE_FLAGS), `megatron` (megatron-core at the pinned commit alone, no torch; its build
compiles Megatron's C++ dataset helper). For each: a cold `uv sync --locked` (empty uv cache: network and builds),
a warm one (cache filled, environment removed), `nemo-rl envs pack` (bundle files and bytes), and the node's build
from the bundle (manifest check, digest, working cache, `uv sync --locked --offline`, verification with the pack's
proof) run in an empty network namespace (`unshare -n`) with no compiler on PATH, once with the bundle on the
node's filesystem and once through a read-only bind mount of it (`unshare -m`: hard links out of it fail as they
do across filesystems, so the node copies; the NFS and image-layer case); with strace installed, the compilers the
node executed are counted. The floors, timed beside each node build: one sha256 pass over the bundle's files
(content_digest) plus `cp -al` of its cache (same filesystem), and `cp -a` of it, or the hash pass where that is
longer (read-only: the node copies and must hash what it copies); each build is printed as a multiple of its floor.
Prints a markdown table; writes JSON to benchmark-results/bundles.json. Not a test.

    uv run python tests/benchmarks/bench_bundles.py --cases synthetic --files 20000 --mb 2000

`synthetic`: the node's install step alone (bundle_copy.node_copy, then the working cache linked from it, as
`sync_from` does before `uv sync`) on a synthetic bundle cache of `--files` files, `--mb` MB, against its floors
in the same run: one sha256 pass over the bundle's files (content_digest), `cp -al` and `cp -a`. Same filesystem
(the bundle's files are this user's: linked) and across filesystems (the node's directory on /dev/shm: copied),
each as a multiple of its floor: hash pass + `cp -al`, or `cp -a`. Page cache warm (the bundle was just written).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import forkworld
from gitfixtures import commit

from nemo_rl.process import run
from nemo_rl.project.model import Project
from nemo_rl.uv import find_uv_bin
from nemo_rl.workers import bundle_copy, bundle_pack, bundles

ROOT = Path(__file__).resolve().parents[2]
COMPILERS = ("cc", "gcc", "g++", "c++", "clang", "nvcc", "ld")
# nemo-toolkit: the local NeMo mirror lacks three blobs of the pinned tree, so uv cannot check it out;
# transformer-engine: its extension compiles for about 20 minutes on two cores (docs/performance.md).
MCORE_FLAGS = ["--locked", "--extra", "mcore", *(f for dist in ("nemo-toolkit", "transformer-engine",
               "transformer-engine-torch", "transformer-engine-cu12") for f in ("--no-install-package", dist))]
NODE = """
import os, sys, time
from pathlib import Path
from nemo_rl.project.model import Project
from nemo_rl.workers import bundles
bundle, project, env, flags = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:]
started = time.monotonic()
checkout = Project.read(project)
manifest = bundles.check(bundle, checkout, flags)
checked = time.monotonic()
from nemo_rl import uv
uv.venv(env, python=sys.executable)
bundles.sync_from(bundle, checkout, flags, env, manifest)
installed = time.monotonic()
proof = imports = -1.0
if "ray" in manifest.distributions:  # the verification a node runs next (the fixture has no Ray to compare)
    from nemo_rl.workers import environments
    worker_env = environments.WorkerEnv("bench", env, tuple(flags), project, "")
    environments.verify(worker_env, checkout, proven=manifest.proven)
    proof = time.monotonic() - installed
    if os.environ.get("BENCH_IMPORTS") == "1":  # what the proof saves: the imports, run once more
        again = time.monotonic()
        environments.verify(worker_env, checkout)
        imports = time.monotonic() - again
again = time.monotonic()  # a second environment on this node (as the checkout's `.venv`, then the worker's)
uv.venv(Path(str(env) + "-again"), python=sys.executable)
bundles.sync_from(bundle, checkout, flags, Path(str(env) + "-again"), manifest)
second = time.monotonic() - again
print(f"{checked - started:.3f} {installed - checked:.3f} {proof:.3f} {imports:.3f} {second:.3f}")
"""


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()) if path.exists() else 0


def timed(fn) -> float:
    started = time.monotonic()
    fn()
    return time.monotonic() - started


def fixture_case(root: Path, env: dict) -> tuple[Path, list[str], dict]:
    world = forkworld.make_world(root / "world")
    env = {**env, **world.git_env()}
    megatron = world.forks["megatron-core"]
    head = commit(megatron.fork, "C helper", {
        "pyproject.toml": '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
                          '[project]\nname = "megatron-core"\nversion = "0.1.0"\n'
                          '[tool.setuptools.packages.find]\ninclude = ["megatron*"]\n',
        "setup.py": "from setuptools import Extension, setup\n"
                    "setup(ext_modules=[Extension('megatron.core._helpers', ['megatron/core/helpers.c'])])\n",
        "megatron/core/helpers.c": '#include <Python.h>\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, '
                                   '"_helpers", NULL, -1, NULL};\nPyMODINIT_FUNC PyInit__helpers(void) '
                                   '{ return PyModule_Create(&m); }\n'})
    pyproject = world.project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(megatron.head, head))
    run([find_uv_bin(), "lock", "--quiet"], cwd=world.project, env=env)
    return world.project, ["--locked", "--extra", "mcore"], env


def base_case(root: Path, env: dict) -> tuple[Path, list[str], dict]:
    project = root / "nemo-rl"
    run(["git", "clone", "-q", "--no-local", str(ROOT), str(project)])
    return project, ["--locked"], env


def serve(root: Path, env: dict, mirror: str) -> tuple[str, dict]:
    """The mirror served as GitHub serves it (as bench_upkeep.py does), reached by `url.<served>.insteadOf`."""
    url, _, path = mirror.partition("=")
    served = root / "served" / "Megatron-LM.git"
    run(["git", "clone", "-q", "--mirror", "--shared", path, str(served)])
    for key in ("uploadpack.allowFilter", "uploadpack.allowAnySHA1InWant"):
        run(["git", "-C", str(served), "config", key, "true"])
    return url, {**env, "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": f"url.{served}.insteadOf",
                 "GIT_CONFIG_VALUE_0": url}


def mcore_case(root: Path, env: dict, mirror: str) -> tuple[Path, list[str], dict]:
    _, env = serve(root, env, mirror)
    project, _, env = base_case(root, env)
    return project, MCORE_FLAGS, env


def megatron_case(root: Path, env: dict, mirror: str, rev: str) -> tuple[Path, list[str], dict]:
    url, env = serve(root, env, mirror)
    project = root / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[project]\nname = "bench-megatron"\nversion = "0.1.0"\nrequires-python = ">=3.10"\ndependencies = []\n'
        '[project.optional-dependencies]\nmcore = ["megatron-core"]\n[tool.uv]\npackage = false\n'
        f'[tool.uv.sources]\nmegatron-core = {{ git = "{url}", rev = "{rev}" }}\n'
        '[[tool.uv.dependency-metadata]]\nname = "megatron-core"\nversion = "0.13.0rc0"\nrequires-dist = []\n'
        f'[tool.nemo-rl.forks.megatron-core]\nupstream-url = "{url}"\nmodule = "megatron.core"\n')
    shutil.copy(ROOT / ".python-version", project / ".python-version")
    run([find_uv_bin(), "lock", "--quiet"], cwd=project, env=env)
    return project, ["--locked", "--extra", "mcore"], env


def sync(project: Path, flags: list[str], env: dict, cache: Path, target: Path) -> float:
    shutil.rmtree(target, ignore_errors=True)
    sync_env = {**env, "UV_CACHE_DIR": str(cache), "UV_PROJECT_ENVIRONMENT": str(target)}
    sync_env.pop("VIRTUAL_ENV", None)
    return timed(lambda: run([find_uv_bin(), "sync", "--quiet", *flags], cwd=project, env=sync_env))


def node_build(bundle: Path, project: Path, flags: list[str], root: Path, env: dict, traced: bool = False,
               trusted: str | None = None, read_only: bool = False, imports: bool = False) -> dict:
    """The node's build in an empty network namespace, no compiler on PATH; `traced`: strace (with a seccomp
    filter, so only execve stops) counts the compilers run, and the time is not reported; `read_only`: the
    bundle reached through a read-only bind mount (another mount: no hard link out of it)."""
    node = root / "node"
    shutil.rmtree(node, ignore_errors=True)
    tools = node / "bin"
    tools.mkdir(parents=True)
    for tool in ("git", "sh"):
        os.symlink(shutil.which(tool), tools / tool)
    node_project = node / "project"
    shutil.copytree(project, node_project, ignore=shutil.ignore_patterns(".venv", ".git", ".nemo-rl"))
    node_env = {k: v for k, v in env.items() if not k.startswith(("UV_", "GIT_CONFIG", "VIRTUAL_ENV"))}
    node_env.update({"PATH": str(tools), "CC": "/nonexistent/cc", "CXX": "/nonexistent/c++",
                     "UV_CACHE_DIR": str(node / "empty-cache"), "NEMO_RL_VENV_DIR": str(node / "venvs"),
                     "HOME": str(node)})
    if trusted:
        node_env["NEMO_RL_BUNDLE_DIGESTS"] = trusted
    node_env["BENCH_IMPORTS"] = "1" if imports else "0"
    trace = node / "execs.txt"
    seen = node / "bundle" if read_only else bundle
    command = [sys.executable, "-c", NODE, str(seen), str(node_project), str(node / "env"), *flags]
    if read_only:
        seen.mkdir()
        mount = shutil.which("mount")
        command = ["/bin/sh", "-c", f'{mount} --bind "$0" "$1" && {mount} -o remount,bind,ro "$1" && shift && '
                   'exec "$@"', str(bundle), str(seen), *command]
    if traced:
        command = [shutil.which("strace"), "--seccomp-bpf", "-f", "-qq", "-e", "trace=execve", "-o", str(trace),
                   *command]
    started = time.monotonic()
    namespaces = ["-n", "-m"] if read_only else ["-n"]
    result = subprocess.run([shutil.which("unshare"), *namespaces, *command], env=node_env, capture_output=True,
                            text=True)
    total = time.monotonic() - started
    if result.returncode != 0:
        raise SystemExit(f"node build failed:\n{result.stderr[-3000:]}")
    check, install, proof, imports, second = map(float, result.stdout.split()[-5:])
    compilers = None
    if trace.exists():
        execs = [line for line in trace.read_text().splitlines() if "execve(" in line and "= 0" in line]
        compilers = sum(Path(line.split('"')[1]).name in COMPILERS for line in execs)
    # one environment: the second, and the imports run again to time what the proof saves, are timed apart
    return {"total_s": total - max(imports, 0) - second, "check_s": check, "install_s": install,
            "verify_with_proof_s": proof if proof >= 0 else None,
            "verify_importing_s": imports if imports >= 0 else None, "second_env_s": second,
            "compilers_run": compilers,
            "network": "none (unshare -n: no interface but a down loopback)"}


def synthetic_bundle(root: Path, files: int, megabytes: int) -> Path:
    """A bundle directory whose uv cache holds `files` files of `megabytes` MB in all, sized as a wheel cache's
    (log-normal: most a few KB, a few of hundreds of MB), 200 to a directory."""
    rng = random.Random(0)
    sizes = [rng.lognormvariate(8, 2.5) for _ in range(files)]
    scale = megabytes * 1e6 / sum(sizes)
    block = os.urandom(1 << 22)
    cache = root / "bundle" / bundles.CACHE
    for i, size in enumerate(sizes):
        directory = cache / "archive-v0" / f"{i // 200:04d}"
        directory.mkdir(parents=True, exist_ok=True)
        left, offset = int(size * scale), i % 4096
        with open(directory / f"m{i}.py", "wb") as fh:
            while left > 0:
                chunk = block[offset:offset + min(left, len(block) - offset)]
                fh.write(chunk)
                left -= len(chunk)
    os.sync()
    return root / "bundle"


def install_step(bundle: Path, venvs: Path, expected: tuple[int, int, str]) -> tuple[float, float, bool]:
    """(seconds of node_copy, seconds of it and the working cache linked from it, whether it linked)."""
    shutil.rmtree(venvs, ignore_errors=True)
    venvs.mkdir()

    def sealed(content: tuple[int, int, str]) -> None:
        if content != expected:
            raise SystemExit(f"the node's copy hashed to {content}, the bundle to {expected}")

    started = time.monotonic()
    node = bundle_copy.node_copy(venvs, bundle, "sha256:" + "0" * 64, bundles.content_digest, sealed)
    copied = time.monotonic() - started
    with bundle_copy.working_cache(node.cache):  # a first build's: linked whole
        pass
    total = time.monotonic() - started
    os.close(node.held)
    cache = node.cache
    first = next(p for p in (bundle / bundles.CACHE).rglob("*.py"))
    linked = os.stat(cache / first.relative_to(bundle / bundles.CACHE)).st_ino == first.stat().st_ino
    shutil.rmtree(venvs)
    return copied, total, linked


def cp_seconds(flags: str, source: Path, target: Path) -> float:
    shutil.rmtree(target, ignore_errors=True)
    elapsed = timed(lambda: run(["cp", flags, str(source), str(target)]))
    shutil.rmtree(target)
    return elapsed


def synthetic(args: argparse.Namespace) -> dict:
    root = Path(tempfile.mkdtemp(prefix="nemo-rl-bench-bundles-synthetic-"))
    other = Path(tempfile.mkdtemp(prefix="nemo-rl-bench-bundles-", dir="/dev/shm"))
    try:
        bundle = synthetic_bundle(root, args.files, args.mb)
        cache = bundle / bundles.CACHE
        expected = bundles.content_digest(cache)
        runs: dict[str, list] = {key: [] for key in ("hash_s", "cp_al_s", "cp_a_s", "cp_a_across_s", "same",
                                                     "across")}
        for _ in range(args.repeats):
            runs["hash_s"].append(timed(lambda: bundles.content_digest(cache)))
            runs["cp_al_s"].append(cp_seconds("-al", cache, root / "links"))
            runs["cp_a_s"].append(cp_seconds("-a", cache, root / "copies"))
            runs["cp_a_across_s"].append(cp_seconds("-a", cache, other / "copies"))
            runs["same"].append(install_step(bundle, root / "venvs", expected))
            runs["across"].append(install_step(bundle, other / "venvs", expected))
        return {"case": "synthetic", "files": expected[0], "bytes": expected[1], **runs}
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(other, ignore_errors=True)


def synthetic_table(r: dict) -> str:
    """One row per place; across filesystems, the copy must be hashed too: no build beats max(`cp -a`, hash)."""
    med = statistics.median
    hash_s, across = med(r["hash_s"]), med(r["cp_a_across_s"])
    lines = ["| where | node copy | node copy + working cache | floor | node ÷ floor (median of runs; ≤ 1.25) |",
             "|---|---|---|---|---|"]
    # each run against the floors timed beside it: a loaded builder moves both together
    pairs = list(zip(r["hash_s"], r["cp_al_s"], r["cp_a_across_s"], strict=True))
    rows = (("same", "same filesystem", [lambda h, al, a: h + al],
             f"hash pass {median(r['hash_s'])} + `cp -al` {median(r['cp_al_s'])}"),
            ("across", "across (/dev/shm)", [lambda h, al, a: a, lambda h, al, a: max(a, h)],
             f"`cp -a` {median(r['cp_a_across_s'])}; max(`cp -a`, hash pass) {max(across, hash_s):.2f} s "
             f"(`cp -a` on the bundle's filesystem: {median(r['cp_a_s'])})"))
    for key, where, floors, words in rows:
        how = "linked" if all(x[2] for x in r[key]) else "copied"
        ratios = "; ".join(f"{med([x[0] / floor(*p) for x, p in zip(r[key], pairs, strict=True)]):.2f} / "
                           f"{med([x[1] / floor(*p) for x, p in zip(r[key], pairs, strict=True)]):.2f}"
                           for floor in floors)
        lines.append(f"| {where}, {how} | {median([x[0] for x in r[key]])} | {median([x[1] for x in r[key]])} "
                     f"| {words} | {ratios} |")
    return f"{r['files']} files, {r['bytes'] / 1e6:.0f} MB\n\n" + "\n".join(lines)


def measure(case: str, args: argparse.Namespace) -> dict:
    if case == "synthetic":
        return synthetic(args)
    root = Path(tempfile.mkdtemp(prefix=f"nemo-rl-bench-bundles-{case}-"))
    env = {**os.environ, "UV_NO_GITHUB_FAST_PATH": "1", "NEMO_RL_CACHE_DIR": str(root / "nemo-rl-cache")}
    try:
        if case == "fixture":
            project, flags, env = fixture_case(root, env)
        elif case == "base":
            project, flags, env = base_case(root, env)
        elif case == "mcore":
            project, flags, env = mcore_case(root, env, args.mirror)
        else:
            project, flags, env = megatron_case(root, env, args.mirror, args.rev)
        cold, warm = [], []
        for i in range(args.repeats):
            cache = root / f"uv-cache-{i}"
            cold.append(sync(project, flags, env, cache, root / "env"))
            warm.append(sync(project, flags, env, cache, root / "env"))
            shutil.rmtree(cache)  # a torch-sized cache is gigabytes: only the pack's and the node's stay
            shutil.rmtree(root / "env")
        bundle = root / "bundles" / case
        os.environ.update({k: v for k, v in env.items() if k.startswith("GIT_CONFIG")})
        pack_s = timed(lambda: bundle_pack.pack(Project.read(project), flags, bundle))
        os.sync()  # a bundle is shipped long after it was written: its writeback is not the node's to wait for
        manifest = bundles.read_manifest(bundle)
        nodes = [node_build(bundle, project, flags, root, env, trusted=manifest.digest, imports=i == 0)
                 for i in range(args.repeats)]
        across = [node_build(bundle, project, flags, root, env, trusted=manifest.digest, read_only=True)
                  for _ in range(args.repeats)]
        cache = bundle / bundles.CACHE
        hashes = [timed(lambda: bundles.content_digest(cache)) for _ in range(args.repeats)]
        links = [cp_seconds("-al", cache, root / "links") for _ in range(args.repeats)]
        copies = [cp_seconds("-a", cache, root / "copies") for _ in range(args.repeats)]
        if shutil.which("strace"):
            nodes[0]["compilers_run"] = node_build(bundle, project, flags, root, env, traced=True)["compilers_run"]
        return {"case": case, "flags": flags, "cold_sync_s": cold, "warm_sync_s": warm, "pack_s": pack_s,
                "bundle_bytes": manifest.bytes, "bundle_files": manifest.files,
                "git_history_in_bundle": any(p.name.startswith("git-v") for p in (bundle / bundles.CACHE).iterdir()),
                "node": nodes, "node_read_only": across, "hash_s": hashes, "cp_al_s": links, "cp_a_s": copies}
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def median(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s" + (f" ({min(values):.2f}–{max(values):.2f}, n={len(values)})"
                                                    if len(values) > 1 else "")


def table(results: list[dict]) -> str:
    lines = ["| case | cold `uv sync` | warm-cache `uv sync` | `envs pack` | bundle | node build, same filesystem "
             "(check / install / verify) | a second environment on that node | floor: hash pass + `cp -al` "
             "| node ÷ cold (goal ≤ 10 %) | node ÷ floor (goal ≤ 1.25) "
             "| node build, read-only bundle (check / install / verify) | floor: max(`cp -a`, hash pass) "
             "| read-only ÷ cold (goal ≤ 25 %) | read-only ÷ floor (goal ≤ 1.25) | imports the pack's proof saves "
             "| compilers run on the node | network on the node |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        cold = statistics.median(r["cold_sync_s"])

        def build(runs: list[dict]) -> tuple[str, float]:
            total = [n["total_s"] for n in runs]
            parts = [statistics.median(n[k] for n in runs) for k in ("check_s", "install_s")]
            proofs = [n["verify_with_proof_s"] for n in runs if n["verify_with_proof_s"] is not None]
            verify = f" / {statistics.median(proofs):.2f}" if proofs else ""
            return f"{median(total)} ({parts[0]:.2f} / {parts[1]:.2f}{verify})", statistics.median(total)

        same, same_s = build(r["node"])
        across, across_s = build(r["node_read_only"])
        saved = [n["verify_importing_s"] for n in r["node"] if n["verify_importing_s"] is not None]
        compilers = r["node"][0]["compilers_run"]
        same_floor = [h + al for h, al in zip(r["hash_s"], r["cp_al_s"], strict=True)]
        across_floor = [max(h, a) for h, a in zip(r["hash_s"], r["cp_a_s"], strict=True)]
        lines.append(f"| {r['case']} | {median(r['cold_sync_s'])} | {median(r['warm_sync_s'])} | {r['pack_s']:.2f} s "
                     f"| {r['bundle_bytes'] / 1e6:.1f} MB, {r['bundle_files']} files"
                     f"{', git history' if r['git_history_in_bundle'] else ', no git history'} "
                     f"| {same} | {median([n['second_env_s'] for n in r['node']])} "
                     f"| {median(same_floor)} (hash {median(r['hash_s'])}, `cp -al` {median(r['cp_al_s'])}) "
                     f"| {same_s / cold:.0%} | {same_s / statistics.median(same_floor):.2f}× "
                     f"| {across} | {median(across_floor)} (`cp -a` {median(r['cp_a_s'])}) | {across_s / cold:.0%} "
                     f"| {across_s / statistics.median(across_floor):.2f}× "
                     f"| {median(saved) if saved else 'no Ray: not verified'} "
                     f"| {'not counted' if compilers is None else compilers} | none (`unshare -n`) |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="+", choices=["fixture", "base", "mcore", "megatron", "synthetic"],
                        default=["fixture"])
    parser.add_argument("--files", type=int, default=20000, help="for synthetic: files in the bundle")
    parser.add_argument("--mb", type=int, default=2000, help="for synthetic: megabytes in the bundle")
    parser.add_argument("--mirror", metavar="URL=PATH", help="for mcore, megatron: a local bare mirror of the fork URL")
    parser.add_argument("--rev", default="a768e50588f6e833741dcd25cfda64a8798f4d8e", help="for megatron")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directories")
    args = parser.parse_args(argv)
    if {"mcore", "megatron"} & set(args.cases) and not args.mirror:
        parser.error("--cases mcore and megatron need --mirror https://github.com/terrykong/Megatron-LM.git=PATH")
    results = [measure(case, args) for case in args.cases]
    meta = {"date": datetime.date.today().isoformat(), "cores": os.cpu_count(), "python": platform.python_version(),
            "uv": run([find_uv_bin(), "--version"]).stdout.strip()}
    print(f"{meta['date']}, {meta['cores']} cores, Python {meta['python']}, {meta['uv']}\n")
    for r in results:
        if r["case"] == "synthetic":
            print(synthetic_table(r) + "\n")
    if [r for r in results if r["case"] != "synthetic"]:
        print(table([r for r in results if r["case"] != "synthetic"]))
    out = ROOT / "benchmark-results" / "bundles.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
