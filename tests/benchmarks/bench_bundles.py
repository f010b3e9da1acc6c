"""Benchmark: a worker environment built on a node from a bundle, against `uv sync` from the network.

    uv run python tests/benchmarks/bench_bundles.py --cases fixture base
    uv run python tests/benchmarks/bench_bundles.py --cases megatron \\
        --mirror https://github.com/terrykong/Megatron-LM.git=<local bare mirror of it>

Cases: `fixture` (the test forks; megatron-core with a small C extension), `base` (this checkout's base
environment: torch from PyPI), `megatron` (megatron-core at the pinned commit through a local mirror; its build
compiles Megatron's C++ dataset helper). For each: a cold `uv sync --locked` (empty uv cache: network and builds),
a warm one (cache filled, environment removed), `nemo-rl envs pack` (bundle files and bytes), and the node's build
from the bundle (manifest check, digest, copy of the cache, `uv sync --locked --offline`) run in an empty network
namespace (`unshare -n`) with no compiler on PATH, once as is and once with the digest pinned
($NEMO_RL_BUNDLE_DIGESTS, as `envs build --digest`: the node's copy is still hashed); with strace installed,
the compilers the node executed are counted. The link limit is the time to hard-link every file of the bundle's
cache into a fresh directory on the same filesystem (what a node cannot do faster). Prints a markdown table;
writes JSON to benchmark-results/bundles.json. Not a test.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
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
from nemo_rl.uv import find_uv_bin
from nemo_rl.workers import bundles

ROOT = Path(__file__).resolve().parents[2]
COMPILERS = ("cc", "gcc", "g++", "c++", "clang", "nvcc", "ld")
NODE = """
import sys, time
from pathlib import Path
from nemo_rl.workers import bundles
bundle, project, env, flags = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:]
started = time.monotonic()
manifest = bundles.check(bundle, project, flags)
checked = time.monotonic()
from nemo_rl import uv
uv.venv(env, python=sys.executable)
bundles.sync_from(bundle, project, flags, env)
installed = time.monotonic()
proof = imports = -1.0
if "ray" in manifest.distributions:  # the verification a node runs next (the fixture has no Ray to compare)
    from nemo_rl.workers import environments
    worker_env = environments.WorkerEnv("bench", env, tuple(flags), project, "")
    environments.verify(worker_env, project, proven=manifest.proven)
    proof = time.monotonic() - installed
    again = time.monotonic()
    environments.verify(worker_env, project)
    imports = time.monotonic() - again
print(f"{checked - started:.3f} {installed - checked:.3f} {proof:.3f} {imports:.3f}")
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


def megatron_case(root: Path, env: dict, mirror: str, rev: str) -> tuple[Path, list[str], dict]:
    url, _, path = mirror.partition("=")
    served = root / "served" / "Megatron-LM.git"
    run(["git", "clone", "-q", "--mirror", "--shared", path, str(served)])
    for key in ("uploadpack.allowFilter", "uploadpack.allowAnySHA1InWant"):
        run(["git", "-C", str(served), "config", key, "true"])
    env = {**env, "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": f"url.{served}.insteadOf", "GIT_CONFIG_VALUE_0": url}
    project = root / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[project]\nname = "bench-megatron"\nversion = "0.1.0"\nrequires-python = ">=3.10"\ndependencies = []\n'
        '[project.optional-dependencies]\nmcore = ["megatron-core"]\n[tool.uv]\npackage = false\n'
        f'[tool.uv.sources]\nmegatron-core = {{ git = "{url}", rev = "{rev}" }}\n'
        '[[tool.uv.dependency-metadata]]\nname = "megatron-core"\nversion = "0.13.0rc0"\nrequires-dist = []\n'
        f'[tool.nemo-rl.forks.megatron-core]\nupstream-url = "{url}"\n')
    shutil.copy(ROOT / ".python-version", project / ".python-version")
    run([find_uv_bin(), "lock", "--quiet"], cwd=project, env=env)
    return project, ["--locked", "--extra", "mcore"], env


def sync(project: Path, flags: list[str], env: dict, cache: Path, target: Path) -> float:
    shutil.rmtree(target, ignore_errors=True)
    sync_env = {**env, "UV_CACHE_DIR": str(cache), "UV_PROJECT_ENVIRONMENT": str(target)}
    sync_env.pop("VIRTUAL_ENV", None)
    return timed(lambda: run([find_uv_bin(), "sync", "--quiet", *flags], cwd=project, env=sync_env))


def link_limit(bundle: Path, root: Path) -> float:
    """Seconds to hard-link (symlinks: recreate) every file of the bundle's cache into a fresh directory."""
    target = root / "links"
    shutil.rmtree(target, ignore_errors=True)
    source = bundle / bundles.CACHE
    started = time.monotonic()
    for dirpath, dirnames, filenames in os.walk(source):
        here = target / os.path.relpath(dirpath, source)
        here.mkdir(parents=True, exist_ok=True)
        for name in [*filenames, *(d for d in dirnames if os.path.islink(os.path.join(dirpath, d)))]:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                os.symlink(os.readlink(path), here / name)
            else:
                os.link(path, here / name)
    elapsed = time.monotonic() - started
    shutil.rmtree(target)
    return elapsed


def node_build(bundle: Path, project: Path, flags: list[str], root: Path, env: dict, traced: bool = False,
               trusted: str | None = None) -> dict:
    """The node's build in an empty network namespace, no compiler on PATH; `traced`: strace (with a seccomp
    filter, so only execve stops) counts the compilers run, and the time is not reported."""
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
    trace = node / "execs.txt"
    command = [sys.executable, "-c", NODE, str(bundle), str(node_project), str(node / "env"), *flags]
    if traced:
        command = [shutil.which("strace"), "--seccomp-bpf", "-f", "-qq", "-e", "trace=execve", "-o", str(trace),
                   *command]
    started = time.monotonic()
    result = subprocess.run([shutil.which("unshare"), "-n", *command], env=node_env, capture_output=True, text=True)
    total = time.monotonic() - started
    if result.returncode != 0:
        raise SystemExit(f"node build failed:\n{result.stderr[-3000:]}")
    check, install, proof, imports = map(float, result.stdout.split()[-4:])
    compilers = None
    if trace.exists():
        execs = [line for line in trace.read_text().splitlines() if "execve(" in line and "= 0" in line]
        compilers = sum(Path(line.split('"')[1]).name in COMPILERS for line in execs)
    return {"total_s": total - max(imports, 0), "check_s": check, "install_s": install,
            "verify_with_proof_s": proof if proof >= 0 else None,
            "verify_importing_s": imports if imports >= 0 else None,
            "compilers_run": compilers,
            "network": "none (unshare -n: no interface but a down loopback)"}


def measure(case: str, args: argparse.Namespace) -> dict:
    root = Path(tempfile.mkdtemp(prefix=f"nemo-rl-bench-bundles-{case}-"))
    env = {**os.environ, "UV_NO_GITHUB_FAST_PATH": "1", "NEMO_RL_CACHE_DIR": str(root / "nemo-rl-cache")}
    try:
        if case == "fixture":
            project, flags, env = fixture_case(root, env)
        elif case == "base":
            project, flags, env = base_case(root, env)
        else:
            project, flags, env = megatron_case(root, env, args.mirror, args.rev)
        cold, warm = [], []
        for i in range(args.repeats):
            cache = root / f"uv-cache-{i}"
            cold.append(sync(project, flags, env, cache, root / "env"))
            warm.append(sync(project, flags, env, cache, root / "env"))
            if i < args.repeats - 1:
                shutil.rmtree(cache)
        bundle = root / "bundles" / case
        os.environ.update({k: v for k, v in env.items() if k.startswith("GIT_CONFIG")})
        pack_s = timed(lambda: bundles.pack(project, flags, bundle))
        manifest = bundles.read_manifest(bundle)
        nodes = [node_build(bundle, project, flags, root, env) for _ in range(args.repeats)]
        trusted = [node_build(bundle, project, flags, root, env, trusted=manifest.digest) for _ in range(args.repeats)]
        links = [link_limit(bundle, root) for _ in range(args.repeats)]
        if shutil.which("strace"):
            nodes[0]["compilers_run"] = node_build(bundle, project, flags, root, env, traced=True)["compilers_run"]
        return {"case": case, "flags": flags, "cold_sync_s": cold, "warm_sync_s": warm, "pack_s": pack_s,
                "bundle_bytes": manifest.bytes, "bundle_files": manifest.files,
                "git_history_in_bundle": any(p.name.startswith("git-v") for p in (bundle / bundles.CACHE).iterdir()),
                "node": nodes, "node_trusted_digest": trusted, "link_limit_s": links}
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def median(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s" + (f" ({min(values):.2f}–{max(values):.2f}, n={len(values)})"
                                                    if len(values) > 1 else "")


def table(results: list[dict]) -> str:
    lines = ["| case | cold `uv sync` | warm-cache `uv sync` | `envs pack` | bundle | node build from the bundle "
             "(check / install / verify) | same, digest pinned | hard links of the bundle's files | node ÷ cold "
             "| pinned ÷ cold | pinned ÷ links | imports the pack's proof saves | compilers run on the node "
             "| network on the node |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        node_total = [n["total_s"] for n in r["node"]]
        check = statistics.median(n["check_s"] for n in r["node"])
        install = statistics.median(n["install_s"] for n in r["node"])
        ratio = statistics.median(node_total) / statistics.median(r["cold_sync_s"])
        trusted = [n["total_s"] for n in r["node_trusted_digest"]]
        trusted_ratio = statistics.median(trusted) / statistics.median(r["cold_sync_s"])
        t_check = statistics.median(n["check_s"] for n in r["node_trusted_digest"])
        t_install = statistics.median(n["install_s"] for n in r["node_trusted_digest"])
        proofs = [n["verify_with_proof_s"] for n in r["node"] if n["verify_with_proof_s"] is not None]
        saved = [n["verify_importing_s"] for n in r["node"] if n["verify_importing_s"] is not None]
        verify = f" / {statistics.median(proofs):.2f}" if proofs else ""
        link_ratio = statistics.median(trusted) / statistics.median(r["link_limit_s"])
        compilers = r["node"][0]["compilers_run"]
        lines.append(f"| {r['case']} | {median(r['cold_sync_s'])} | {median(r['warm_sync_s'])} | {r['pack_s']:.2f} s "
                     f"| {r['bundle_bytes'] / 1e6:.1f} MB, {r['bundle_files']} files"
                     f"{', git history' if r['git_history_in_bundle'] else ', no git history'} "
                     f"| {median(node_total)} ({check:.2f} / {install:.2f}{verify}) "
                     f"| {median(trusted)} ({t_check:.2f} / {t_install:.2f}) | {median(r['link_limit_s'])} "
                     f"| {ratio:.0%} | {trusted_ratio:.0%} | {link_ratio:.1f}× "
                     f"| {median(saved) if saved else 'no Ray: not verified'} "
                     f"| {'not counted' if compilers is None else compilers} | none (`unshare -n`) |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="+", choices=["fixture", "base", "megatron"], default=["fixture"])
    parser.add_argument("--mirror", metavar="URL=PATH", help="for megatron: a local bare mirror of the fork URL")
    parser.add_argument("--rev", default="a768e50588f6e833741dcd25cfda64a8798f4d8e", help="for megatron")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directories")
    args = parser.parse_args(argv)
    if "megatron" in args.cases and not args.mirror:
        parser.error("--cases megatron needs --mirror https://github.com/terrykong/Megatron-LM.git=PATH")
    results = [measure(case, args) for case in args.cases]
    meta = {"date": datetime.date.today().isoformat(), "cores": os.cpu_count(), "python": platform.python_version(),
            "uv": run([find_uv_bin(), "--version"]).stdout.strip()}
    print(f"{meta['date']}, {meta['cores']} cores, Python {meta['python']}, {meta['uv']}\n")
    print(table(results))
    out = ROOT / "benchmark-results" / "bundles.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
