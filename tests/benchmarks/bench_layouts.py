"""Benchmark: forks as git-pinned uv sources (nemo-rl) against the submodule layout, side by side.

    uv run python tests/benchmarks/bench_layouts.py                      # --forks fixture (hermetic)
    uv run python tests/benchmarks/bench_layouts.py --forks mirror \\
        --mirror https://github.com/terrykong/Megatron-LM.git=/path/to/Megatron-LM.git

Both layouts are built in one temporary directory against the same fork repositories, reached through git
`url.<path>.insteadOf` as a mirror site would. Prints a markdown table; writes JSON (--json-out).
Not a test: pytest does not collect it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fixture_forks

from nemo_rl.process import run
from nemo_rl.uv import find_uv_bin

RSS_WRAPPER = ("import resource, subprocess, sys; rc = subprocess.run(sys.argv[1:]).returncode; "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(rc)")


@dataclass
class Fork:
    distribution: str
    module: str  # what a worker imports
    url: str
    path: Path
    rev: str
    upstream_url: str | None = None
    upstream_path: Path | None = None
    workspace: str = ""


def du(*paths: Path) -> int:
    """Bytes on disk under `paths`, each inode once: uv and git hard-link objects between their clones."""
    seen: dict[tuple[int, int], int] = {}
    for path in paths:
        for f in path.rglob("*") if path.exists() else ():
            if f.is_file() and not f.is_symlink():
                st = f.lstat()
                seen[(st.st_dev, st.st_ino)] = st.st_size
    return sum(seen.values())


def timed(args, *, cwd=None, env=None, rss=False) -> tuple[float, int | None]:
    """Seconds (and peak RSS in KiB of the command's process tree, with rss=True)."""
    argv = [sys.executable, "-c", RSS_WRAPPER, *map(str, args)] if rss else list(map(str, args))
    start = time.perf_counter()
    result = run(argv, cwd=cwd, env=env)
    seconds = time.perf_counter() - start
    return seconds, int(result.stderr.strip().splitlines()[-1]) if rss else None


def median_spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": len(values)}


class Bench:
    def __init__(self, root: Path, forks: list[Fork], repeats: int) -> None:
        self.root, self.forks, self.repeats = root, forks, repeats
        self.uv = find_uv_bin()
        self.cache = root / "uv-cache"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "VIRTUAL_ENV", "GIT_CONFIG"))}
        mapping = {f.url: f.path for f in forks} | {f.upstream_url: f.upstream_path for f in forks if f.upstream_url}
        self.env.update({"UV_CACHE_DIR": str(self.cache), "UV_NO_GITHUB_FAST_PATH": "1",
                         "GIT_CONFIG_COUNT": str(len(mapping) + 1),
                         # submodules of file:// URLs need this since git 2.38.1 (CVE-2022-39253)
                         f"GIT_CONFIG_KEY_{len(mapping)}": "protocol.file.allow",
                         f"GIT_CONFIG_VALUE_{len(mapping)}": "always",
                         "NEMO_RL_CACHE_DIR": str(root / "nemo-rl-cache")})
        for i, (url, path) in enumerate(mapping.items()):
            self.env[f"GIT_CONFIG_KEY_{i}"] = f"url.{path.resolve().as_uri()}.insteadOf"
            self.env[f"GIT_CONFIG_VALUE_{i}"] = url
        self.results: dict = {}

    # -- the two project repositories ------------------------------------------------------------
    def git(self, repo: Path, *args: str) -> str:
        env = {**self.env, "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@fixture.invalid",
               "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@fixture.invalid"}
        return run(["git", "-C", str(repo), "-c", "commit.gpgsign=false", *args], env=env).stdout.strip()

    def project_ours(self) -> Path:
        repo = self.root / "src-ours"
        repo.mkdir()
        sources = "\n".join(f'{f.distribution} = {{ git = "{f.url}", rev = "{f.rev}" }}' for f in self.forks)
        tables = "\n".join(f'[tool.nemo-rl.forks.{f.distribution}]\nbranch = "nemo-rl/main"\n'
                           f'upstream-url = "{f.upstream_url or f.url}"\nupstream-branch = "main"\n'
                           for f in self.forks)
        metadata = "\n".join(f'[[tool.uv.dependency-metadata]]\nname = "{f.distribution}"\nversion = "0.1.0"\n'
                             f"requires-dist = []\n" for f in self.forks)
        (repo / "pyproject.toml").write_text(
            '[project]\nname = "bench-ours"\nversion = "0.1.0"\nrequires-python = ">=3.10"\ndependencies = []\n'
            f"[project.optional-dependencies]\nmcore = {json.dumps([f.distribution for f in self.forks])}\n"
            f"[tool.uv]\npackage = false\n[tool.uv.sources]\n{sources}\n{metadata}\n{tables}")
        self.git(repo, "init", "-q")
        run([self.uv, "lock", "--quiet"], cwd=repo, env=self.env)
        self.git(repo, "add", "-A")
        self.git(repo, "commit", "-q", "-m", "ours")
        return repo

    def project_submodules(self) -> Path:
        """The upstream layout: forks as submodules under 3rdparty/, wrapped as uv workspace members."""
        repo = self.root / "src-submodules"
        repo.mkdir()
        self.git(repo, "init", "-q")
        members = []
        for f in self.forks:
            member = f"3rdparty/{f.workspace}-workspace"
            members.append(member)
            (repo / member).mkdir(parents=True)
            # Our wrapper, not the upstream project's: an editable package whose sources are the submodule.
            (repo / member / "pyproject.toml").write_text(
                f'[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
                f'[project]\nname = "{f.distribution}"\nversion = "0.1.0"\nrequires-python = ">=3.10"\n'
                f'[tool.hatch.build.targets.wheel]\nbypass-selection = true\ndev-mode-dirs = ["{f.workspace}"]\n')
            self.git(repo, "submodule", "--quiet", "add", f.url, f"{member}/{f.workspace}")
            self.git(repo / member / f.workspace, "checkout", "-q", f.rev)
        sources = "\n".join(f"{f.distribution} = {{ workspace = true }}" for f in self.forks)
        (repo / "pyproject.toml").write_text(
            '[project]\nname = "bench-submodules"\nversion = "0.1.0"\nrequires-python = ">=3.10"\ndependencies = []\n'
            f"[project.optional-dependencies]\nmcore = {json.dumps([f.distribution for f in self.forks])}\n"
            f"[tool.uv]\npackage = false\n[tool.uv.workspace]\nmembers = {json.dumps(members)}\n"
            f"[tool.uv.sources]\n{sources}\n")
        run([self.uv, "lock", "--quiet"], cwd=repo, env=self.env)
        self.git(repo, "add", "-A")
        self.git(repo, "commit", "-q", "-m", "submodules")
        self.git(repo, "config", "uploadpack.allowFilter", "true")
        return repo

    # -- measurements ----------------------------------------------------------------------------
    def clone(self, source: Path, name: str, flags: list[str]) -> dict:
        times, sizes, ignored = [], [], False
        for i in range(self.repeats):
            dest = self.root / "clones" / f"{name}-{i}"
            start = time.perf_counter()
            result = run(["git", "clone", "-q", *flags, source.resolve().as_uri(), dest], env=self.env)
            times.append(time.perf_counter() - start)
            sizes.append(du(dest))
            # a server that does not allow filters sends everything: the row would measure a full clone
            ignored |= "filtering not recognized by server" in result.stderr
        return {"bytes": statistics.median(sizes), "seconds": median_spread(times), "dest": str(dest),
                "filter_ignored": ignored}

    def fork_build(self) -> dict:
        """The fork's own build alone (`uv build --wheel` of a checkout at the pin): what a cold mcore sync pays
        on top of fetching; Megatron's setup.py compiles its C++ dataset helper here."""
        fork = self.forks[0]
        times = []
        for i in range(self.repeats):
            checkout = self.root / "builds" / f"{fork.workspace}-{i}"
            run(["git", "clone", "-q", "--shared", "--no-checkout", str(fork.path), str(checkout)], env=self.env)
            self.git(checkout, "checkout", "-q", fork.rev)
            seconds, _ = timed([self.uv, "build", "--wheel", "--quiet", "--out-dir", self.root / "builds" / "wheels",
                                checkout], env=self.env)
            times.append(seconds)
        return median_spread(times)

    def cold_sync(self, project: Path, extra: bool) -> dict:
        times, fetched, rss = [], [], []
        for _ in range(self.repeats):
            for sub in self.cache.glob("git-v*"):
                shutil.rmtree(sub)
            for sub in self.cache.glob("sdists-v*"):  # built fork wheels, so each run builds them again
                shutil.rmtree(sub)
            shutil.rmtree(project / ".venv", ignore_errors=True)
            args = [self.uv, "sync", "--locked", "--quiet", *(["--extra", "mcore"] if extra else [])]
            seconds, peak = timed(args, cwd=project, env=self.env, rss=True)
            times.append(seconds)
            rss.append(peak)
            fetched.append(du(*self.cache.glob("git-v*")))
        return {"seconds": median_spread(times), "git_bytes_fetched": statistics.median(fetched),
                "git_db_bytes": du(*self.cache.glob("git-v*/db")),
                # what checkouts add beyond the db (their objects are hard links into it)
                "git_checkout_bytes": du(*self.cache.glob("git-v*")) - du(*self.cache.glob("git-v*/db")),
                "peak_rss_kib": max(rss)}

    def sync_after_bump(self, project: Path) -> dict:
        """The recurring cost: the fork gets one new commit, we bump, and a warm uv cache syncs it."""
        fork = self.forks[0]
        before = du(*self.cache.glob("git-v*"))
        tree = run(["git", "-C", str(fork.path), "rev-parse", f"{fork.rev}^{{tree}}"]).stdout.strip()
        env = {**self.env, "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "b@fixture.invalid",
               "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "b@fixture.invalid"}
        new = run(["git", "-C", str(fork.path), "commit-tree", tree, "-p", fork.rev, "-m", "bench: new"],
                  env=env).stdout.strip()
        # pushed to the branch the project records, as a maintainer's push would: bump refuses a commit on no branch
        # (this fork is the benchmark's own copy; relock's later targets are this commit's ancestors)
        run(["git", "-C", str(fork.path), "update-ref", "refs/heads/nemo-rl/main", new], env=env)
        run([sys.executable, "-m", "nemo_rl", "deps", "bump", fork.distribution, "--rev", new, "--project", project],
            env=self.env)
        seconds, _ = timed([self.uv, "sync", "--locked", "--quiet", "--extra", "mcore"], cwd=project, env=self.env)
        return {"seconds": seconds, "git_bytes_added": du(*self.cache.glob("git-v*")) - before}

    def worker(self, project: Path, command: str) -> dict:
        args = [*shlex.split(command), "python", "-c", f"import {self.forks[0].module}"]
        timed(args, cwd=project, env=self.env)  # warm
        return median_spread([timed(args, cwd=project, env=self.env)[0] for _ in range(5)])

    def run_all(self) -> dict:
        ours, subs = self.project_ours(), self.project_submodules()
        r = self.results
        r["clone"] = {
            "ours": self.clone(ours, "ours", ["--no-local"]),
            "submodules full": self.clone(subs, "sub-full", ["--recurse-submodules"]),
            "submodules --depth 1": self.clone(subs, "sub-depth", ["--recurse-submodules", "--depth", "1",
                                                                     "--shallow-submodules"]),
            "submodules blob:none": self.clone(subs, "sub-blobless", ["--recurse-submodules", "--filter=blob:none",
                                                                        "--also-filter-submodules"]),
        }
        ours_clone, subs_clone = Path(r["clone"]["ours"]["dest"]), Path(r["clone"]["submodules full"]["dest"])
        here = Path(__file__).resolve().parents[2]
        r["clone"]["this repository"] = self.clone(here, "this-repo", ["--no-local"])
        r["default_sync"] = {"ours": self.cold_sync(ours_clone, extra=False),
                             "submodules": self.cold_sync(subs_clone, extra=False)}
        r["default_sync"]["submodules"]["fork_bytes_in_clone"] = sum(
            du(subs_clone / "3rdparty" / f"{f.workspace}-workspace") for f in self.forks)
        r["mcore_sync"] = {"ours": self.cold_sync(ours_clone, extra=True)}
        r["sync_after_bump"] = self.sync_after_bump(ours_clone)  # while uv's git cache is still warm
        r["mcore_sync"]["submodules"] = self.cold_sync(subs_clone, extra=True)
        r["fork_build"] = self.fork_build()
        r["worker_start"] = {"ours": self.worker(ours_clone, "uv run --locked --extra mcore"),
                             "submodules": self.worker(subs_clone, "uv run --reinstall --extra mcore")}
        py = [sys.executable, "-c"]
        r["import_nemo_rl"] = median_spread([timed([*py, "import nemo_rl"])[0] for _ in range(5)])
        r["python_startup"] = median_spread([timed([*py, "pass"])[0] for _ in range(5)])
        status = [*py, "import sys; from nemo_rl.cli import main; sys.exit(main(sys.argv[1:]))", "deps", "status",
                  "--project", ours_clone]
        r["deps_status"] = median_spread([timed(status, env=self.env)[0] for _ in range(5)])
        r["relock_after_bump"] = self.relock(ours_clone, subs_clone)
        own = [*py, "import sys; from nemo_rl.cli import main; sys.exit(main(sys.argv[1:]))", "deps", "status",
               "--project", here]
        r["deps_status_this_repository"] = median_spread([timed(own)[0] for _ in range(5)])
        return r

    def relock(self, ours: Path, subs: Path) -> dict:
        fork = self.forks[0]
        old = fork.rev
        new = run(["git", "-C", str(fork.path), "rev-parse", f"{old}~1"]).stdout.strip()
        bump = [sys.executable, "-m", "nemo_rl", "deps", "bump", fork.distribution, "--project", ours]
        ours_times, ours_rss, subs_times, subs_rss = [], [], [], []
        for _ in range(self.repeats):
            for target in (new, old):
                seconds, _ = timed([*bump, "--rev", target], env=self.env)
                ours_times.append(seconds)
                seconds, peak = timed([self.uv, "lock", "--upgrade-package", fork.distribution], cwd=ours,
                                      env=self.env, rss=True)
                ours_rss.append(peak)
                member = subs / "3rdparty" / f"{fork.workspace}-workspace" / fork.workspace
                self.git(member, "fetch", "-q", "origin", target)
                self.git(member, "checkout", "-q", target)
                seconds, peak = timed([self.uv, "lock"], cwd=subs, env=self.env, rss=True)
                subs_times.append(seconds)
                subs_rss.append(peak)
        return {"ours (nemo-rl deps bump: fetch, lock, patches)": median_spread(ours_times),
                "ours uv lock peak_rss_kib": max(ours_rss),
                "submodules (checkout + uv lock)": median_spread(subs_times),
                "submodules uv lock peak_rss_kib": max(subs_rss)}


def header(meta: dict) -> str:
    return (f"## Layout benchmark ({meta['forks']} forks), {meta['date']}\n\n"
            f"Machine: {meta['machine']['cores']} cores, {meta['machine']['memory_gib']} GiB; {meta['uv']}; "
            f"command: `{meta['command']}`\n")


def mb(n: float) -> str:
    return f"{n / 1e6:.2f} MB"


def s(d: dict) -> str:
    return f"{d['median']:.3f} s ({d['min']:.3f}–{d['max']:.3f}, n={d['runs']})"


def table(r: dict) -> str:
    rows = ["| metric | nemo-rl (git-pinned sources) | submodule layout |", "|---|---|---|"]
    c = r["clone"]
    rows.append(f"| clone with .git | {mb(c['ours']['bytes'])}, {s(c['ours']['seconds'])} | "
                f"full {mb(c['submodules full']['bytes'])}, {s(c['submodules full']['seconds'])} |")
    rows.append(f"| clone of this repository (nemo-rl itself) | {mb(c['this repository']['bytes'])}, "
                f"{s(c['this repository']['seconds'])} | – |")
    rows.append(f"| clone, `--depth 1 --shallow-submodules` | (same as above) | "
                f"{mb(c['submodules --depth 1']['bytes'])}, {s(c['submodules --depth 1']['seconds'])} |")
    blobless = c["submodules blob:none"]
    rows.append("| clone, `--filter=blob:none --also-filter-submodules` | (same as above) | " + (
        "invalid: the server ignored the filter (allow uploadpack.allowFilter) |" if blobless.get("filter_ignored")
        else f"{mb(blobless['bytes'])}, {s(blobless['seconds'])} |"))
    d = r["default_sync"]
    rows.append(f"| fork bytes fetched by default `uv sync` | {mb(d['ours']['git_bytes_fetched'])} | "
                f"{mb(d['submodules']['git_bytes_fetched'])} by uv, but {mb(d['submodules']['fork_bytes_in_clone'])} "
                "already in the clone |")
    m = r["mcore_sync"]
    rows.append(f"| cold `uv sync --extra mcore` | {s(m['ours']['seconds'])}, {mb(m['ours']['git_bytes_fetched'])} "
                f"git in uv's cache | {s(m['submodules']['seconds'])}, "
                f"{mb(m['submodules']['git_bytes_fetched'])} git in uv's cache |")
    if "fork_build" in r:
        rows.append(f"| of which the fork's own build (`uv build --wheel` alone) | {s(r['fork_build'])} | not done: "
                    "the wrapper installs the submodule tree editable, with no build step |")
    rows.append(f"| peak RSS of that sync | {m['ours']['peak_rss_kib'] / 1024:.0f} MiB | "
                f"{m['submodules']['peak_rss_kib'] / 1024:.0f} MiB |")
    rows.append(f"| cold sync: uv's git db / checkout worktrees | {mb(m['ours']['git_db_bytes'])} / "
                f"{mb(m['ours']['git_checkout_bytes'])} | – |")
    a = r["sync_after_bump"]
    rows.append(f"| `uv sync --extra mcore` after a bump, warm cache | {a['seconds']:.3f} s, "
                f"{mb(a['git_bytes_added'])} added to uv's git cache | (`git submodule update`) |")
    w = r["worker_start"]
    rows.append(f"| warm worker start (`import` fork) | `uv run --locked --extra mcore`: {s(w['ours'])} | "
                f"`uv run --reinstall --extra mcore`: {s(w['submodules'])} |")
    b = r["relock_after_bump"]
    keys = list(b)
    rows.append(f"| relock after a bump | {s(b[keys[0]])} (whole `deps bump`) | "
                f"{s(b[keys[2]])} (checkout + `uv lock`) |")
    rows.append(f"| peak RSS of `uv lock` | {b[keys[1]] / 1024:.0f} MiB | {b[keys[3]] / 1024:.0f} MiB |")
    rows.append(f"| `import nemo_rl` (python startup {r['python_startup']['median']:.3f} s) | "
                f"{s(r['import_nemo_rl'])} | – |")
    rows.append(f"| `nemo-rl deps status` (fixture / this repository) | {s(r['deps_status'])} / "
                f"{s(r['deps_status_this_repository'])} | – |")
    return "\n".join(rows)


def make_fixture_forks(root: Path, shape: fixture_forks.Shape) -> list[Fork]:
    forks = []
    for seed, (dist, module, name) in enumerate([("megatron-core", "megatron.core", "Megatron-LM"),
                                                  ("nemo-toolkit", "nemo", "NeMo")]):
        upstream, fork = root / "repos" / f"upstream-{name}.git", root / "repos" / f"fork-{name}.git"
        shas = fixture_forks.fast_import(upstream, dist, module, shape, seed)
        head = fixture_forks.make_fork(upstream, fork, shas["base"], module, shape, seed)
        for repo in (upstream, fork):  # served as GitHub serves them
            for key in ("uploadpack.allowFilter", "uploadpack.allowAnySHA1InWant"):
                run(["git", "-C", str(repo), "config", key, "true"])
        forks.append(Fork(dist, module, f"https://forks.bench.invalid/{name}.git", fork, head,
                          f"https://upstream.bench.invalid/{name}.git", upstream, name))
    return forks


def measure(source: str, args: argparse.Namespace) -> dict:
    """Build both layouts against one fork source and measure them; returns the results."""
    root = Path(tempfile.mkdtemp(prefix="nemo-rl-bench-"))
    try:
        if source == "fixture":
            forks = make_fixture_forks(root, fixture_forks.Shape())
        else:
            url, _, path = args.mirror[0].partition("=")
            # NeMo is left out: its local mirror lacks blobs of 4 MiB and more, so neither a submodule clone
            # nor uv's checkout of it can complete here. Megatron-LM's mirror is whole.
            # Served as GitHub serves it (blob filters, by-SHA fetches) from a shared copy, so the user's mirror
            # is not reconfigured and the filtered-clone row measures a filtered clone.
            served = root / "served" / "Megatron-LM.git"
            run(["git", "clone", "-q", "--mirror", "--shared", path, str(served)])
            for key in ("uploadpack.allowFilter", "uploadpack.allowAnySHA1InWant"):
                run(["git", "-C", str(served), "config", key, "true"])
            forks = [Fork("megatron-core", "megatron", url, served, args.rev, workspace="Megatron-LM")]
        return Bench(root, forks, args.repeats).run_all()
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--forks", choices=["fixture", "mirror", "both"], default="fixture",
                        help="fork source: generated fixtures, local mirrors of the real forks, or both in turn")
    parser.add_argument("--mirror", action="append", default=[], metavar="URL=PATH",
                        help="with --forks mirror/both: a local bare mirror of the Megatron-LM fork URL")
    parser.add_argument("--rev", default="a768e50588f6e833741dcd25cfda64a8798f4d8e", help="with --forks mirror")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json-out", type=Path, default=Path("benchmark-results"))
    parser.add_argument("--keep", action="store_true", help="keep the temporary directories")
    parser.add_argument("--render", type=Path, metavar="JSON", help="print the table of an earlier run and exit")
    args = parser.parse_args(argv)
    if args.render:
        saved = json.loads(args.render.read_text())
        print(header(saved))
        print(table(saved["results"]))
        return 0
    sources = ["fixture", "mirror"] if args.forks == "both" else [args.forks]
    if "mirror" in sources and not args.mirror:
        parser.error(f"--forks {args.forks} needs --mirror https://github.com/terrykong/Megatron-LM.git=PATH")
    command = "uv run python tests/benchmarks/bench_layouts.py " + " ".join(argv if argv is not None else sys.argv[1:])
    args.json_out.mkdir(parents=True, exist_ok=True)
    for source in sources:
        results = measure(source, args)
        meta = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "machine": {"cores": os.cpu_count(),
                            "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
                            "platform": platform.platform(), "python": platform.python_version()},
                "uv": run([find_uv_bin(), "--version"]).stdout.strip(), "forks": source, "command": command}
        out = args.json_out / f"layouts-{source}.json"
        out.write_text(json.dumps({**meta, "results": results}, indent=2, default=str))
        print(header(meta))
        print(table(results))
        print(f"\nJSON: {out}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
