"""Benchmark: fork upkeep on the real forks, through local mirrors served as GitHub serves them.

    uv run python tests/benchmarks/bench_upkeep.py --repeats 3 \\
        --mirror https://github.com/terrykong/Megatron-LM.git=<local bare mirror> \\
        --mirror https://github.com/NVIDIA/Megatron-LM.git=<local bare mirror> \\
        [--mirror https://github.com/NVIDIA/NeMo.git=<local bare mirror>]

Each mirror is cloned `--mirror --shared` and served with `uploadpack.allowFilter` and
`uploadpack.allowAnySHA1InWant` (as GitHub does), reached by `url.<served>.insteadOf`. Per repeat, in this order:

- the commit fetch: what a bump fetches before any answer, into an empty blob-less repository (the fork's branch
  head, then upstream's branch, both `--filter=blob:none`);
- `uv lock --upgrade-package megatron-core` in a clone of this repository whose pin was moved to that head (the
  user's uv cache, as a bump uses it);
- `nemo-rl deps bump megatron-core --branch BRANCH` in a fresh clone, with an empty `NEMO_RL_CACHE_DIR`;
- the same bump with its lock forced online (`bump.OFFLINE_FIRST = False`): what it costs when uv's cache cannot
  answer; the table says how each bump locked and whether its landed uv.lock is byte for byte the online one's;
- with `--baseline CHECKOUT` (another checkout of nemo-rl, e.g. `git worktree add ../before HEAD~3`), the same bump
  run by that checkout's nemo_rl, first in even rounds and last in odd ones: a change measured side by side.

Each bump's row names the version its landed uv.lock gives the fork.

The goal: the bump within twice (uv lock + commit fetch), per repeat and in medians. Then
`nemo-rl deps upstream DIST` from an empty cache (goal for megatron-core: under 30 s) and warm, with the bytes the
empty run fetched into the fork cache. On this machine the git server runs on the same cores as everything else
(on GitHub its packing is not the client's). Prints a markdown table; writes JSON to benchmark-results/upkeep.json.
Not a test.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import tomlkit

from nemo_rl.process import run
from nemo_rl.project.model import Project
from nemo_rl.uv import find_uv_bin

ROOT = Path(__file__).resolve().parents[2]


def serve(mirrors: list[str], root: Path) -> dict[str, str]:
    """The environment that sends each URL to a served copy of its mirror."""
    env = {**os.environ, "UV_NO_GITHUB_FAST_PATH": "1", "GIT_CONFIG_COUNT": str(len(mirrors))}
    for n, mirror in enumerate(mirrors):
        url, _, path = mirror.partition("=")
        served = root / "served" / f"{n}.git"
        run(["git", "clone", "-q", "--mirror", "--shared", path, str(served)])
        for key in ("uploadpack.allowFilter", "uploadpack.allowAnySHA1InWant"):
            run(["git", "-C", str(served), "config", key, "true"])
        env[f"GIT_CONFIG_KEY_{n}"], env[f"GIT_CONFIG_VALUE_{n}"] = f"url.{served}.insteadOf", url
    return env


LAST_OUTPUT: list[str] = [""]  # the stdout of the last timed command (the bump's report)


def timed(args: list[str], env: dict, cwd: Path | None = None) -> float:
    started = time.monotonic()
    LAST_OUTPUT[0] = run(args, env=env, cwd=cwd).stdout
    return time.monotonic() - started


def lock_mode(report: str) -> str:
    """How the bump says it locked: "offline" or "online" (its report's uv.lock line)."""
    line = next((line for line in report.splitlines() if line.startswith("  uv.lock: ")), "")
    return "offline" if "(locked offline" in line else "online"


def fork_table(dist: str) -> dict:
    doc = tomlkit.parse((ROOT / "pyproject.toml").read_text())
    return {**doc["tool"]["nemo-rl"]["forks"][dist], "url": doc["tool"]["uv"]["sources"][dist]["git"]}


def clone(root: Path, name: str) -> Path:
    target = root / name
    run(["git", "clone", "-q", "--no-local", str(ROOT), str(target)])
    return target


def commit_fetch(root: Path, fork: dict, head: str, env: dict) -> float:
    repo = root / "fetch.git"
    run(["git", "init", "-q", "--bare", str(repo)])
    started = time.monotonic()
    run(["git", "-C", str(repo), "fetch", "-q", "--no-tags", "--filter=blob:none", fork["url"], f"+{head}:refs/fork"],
        env=env)
    run(["git", "-C", str(repo), "fetch", "-q", "--no-tags", "--filter=blob:none", fork["upstream-url"],
         f"+refs/heads/{fork['upstream-branch']}:refs/upstream"], env=env)
    return time.monotonic() - started


def uv_lock(project: Path, dist: str, head: str, env: dict) -> float:
    path = project / "pyproject.toml"
    doc = tomlkit.parse(path.read_text())
    doc["tool"]["uv"]["sources"][dist]["rev"] = head
    path.write_text(tomlkit.dumps(doc))
    return timed([find_uv_bin(), "lock", "--quiet", "--upgrade-package", dist], env, cwd=project)


ONLINE = ("import sys; import nemo_rl.deps.bump as bump; bump.OFFLINE_FIRST = False; from nemo_rl.cli import main; "
          "sys.exit(main(sys.argv[1:]))")


def nemo_rl(args: list[str], env: dict, cache: Path, *, online_lock: bool = False, checkout: Path | None = None
            ) -> float:
    # run from outside any checkout: a checkout's nemo_rl/ would shadow the installed one (PYTHONPATH: on purpose)
    start = ["-c", ONLINE] if online_lock else ["-m", "nemo_rl"]
    extra = {"PYTHONPATH": str(checkout.resolve())} if checkout else {}
    return timed([sys.executable, *start, *args], {**env, "NEMO_RL_CACHE_DIR": str(cache), **extra}, cwd=Path("/"))


def landed(project: Path, head: str) -> str:
    """The fork's version in the landed uv.lock, once the pin is checked to be the branch head."""

    pinned = tomlkit.parse((project / "pyproject.toml").read_text())["tool"]["uv"]["sources"]["megatron-core"]
    assert pinned["rev"] == head, f"the bump in {project} did not pin the branch head"
    return str(Project.read(project).packages["megatron-core"].version)


def baseline_bump(work: Path, bump_args: list[str], env: dict, head: str, checkout: Path) -> dict:
    project = clone(work, "bumped-baseline")
    seconds = nemo_rl([*bump_args, str(project)], env, work / "cache-baseline", checkout=checkout)
    return {"baseline_bump_s": seconds, "baseline_version": landed(project, head)}


def bump_rounds(root: Path, args: argparse.Namespace, env: dict) -> list[dict]:
    fork = fork_table("megatron-core")
    out = run(["git", "ls-remote", fork["url"], f"refs/heads/{args.branch}"], env=env).stdout.split()
    head = out[0]
    uv_lock(clone(root, "warm-up"), "megatron-core", head, env)  # uv's cache as a bump finds it on a used machine
    rounds = []
    for n in range(args.repeats):
        work = Path(tempfile.mkdtemp(prefix=f"round-{n}-", dir=root))
        fetch_s = commit_fetch(work, fork, head, env)
        lock_s = uv_lock(clone(work, "locked"), "megatron-core", head, env)
        bump_args = ["deps", "bump", "megatron-core", "--branch", args.branch, "--project"]
        baseline = baseline_bump(work, bump_args, env, head, args.baseline) if args.baseline and n % 2 == 0 else {}
        project = clone(work, "bumped")
        bump_s = nemo_rl([*bump_args, str(project)], env, work / "cache")
        mode = lock_mode(LAST_OUTPUT[0])
        version = landed(project, head)
        if args.baseline and n % 2 == 1:
            baseline = baseline_bump(work, bump_args, env, head, args.baseline)
        online = clone(work, "bumped-online")
        online_s = nemo_rl([*bump_args, str(online)], env, work / "cache-online", online_lock=True)
        rounds.append({"commit_fetch_s": fetch_s, "uv_lock_s": lock_s, "bump_s": bump_s, "version": version,
                       "ratio": bump_s / (lock_s + fetch_s), "bump_online_lock_s": online_s,
                       "online_version": landed(online, head), "ratio_online_lock": online_s / (lock_s + fetch_s),
                       "lock_mode": mode,
                       "same_lock": (project / "uv.lock").read_bytes() == (online / "uv.lock").read_bytes(),
                       **baseline, "load": os.getloadavg()[0]})
    return rounds


def upstream_rounds(root: Path, dist: str, repeats: int, env: dict) -> dict:
    empty, warm, fetched = [], [], []
    for n in range(repeats):
        cache = root / f"upstream-{dist}-{n}"
        empty.append(nemo_rl(["deps", "upstream", dist, "--project", str(ROOT)], env, cache))
        fetched.append(sum(p.stat().st_size for p in (cache / "git").rglob("*") if p.is_file()))
        warm.append(nemo_rl(["deps", "upstream", dist, "--project", str(ROOT)], env, cache))
    return {"empty_s": empty, "warm_s": warm, "fetched_bytes": fetched}


def median(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s" + (f" ({min(values):.2f}–{max(values):.2f}, n={len(values)})"
                                                    if len(values) > 1 else "")


def table(result: dict) -> str:
    rounds = result["bump"]
    fetch, lock, bump, online = ([r[k] for r in rounds]
                                 for k in ("commit_fetch_s", "uv_lock_s", "bump_s", "bump_online_lock_s"))
    goal = 2 * (statistics.median(lock) + statistics.median(fetch))
    lines = ["| measurement | time | goal |", "|---|---|---|",
             f"| commit fetch (fork branch head and upstream branch, blob-less) | {median(fetch)} | |",
             f"| `uv lock --upgrade-package megatron-core` (pin moved to that head) | {median(lock)} | |",
             f"| `deps bump megatron-core --branch {result['branch']}`, empty fork cache | {median(bump)} "
             f"| 2 × (uv lock + fetch) = {goal:.2f} s: {'met' if statistics.median(bump) <= goal else 'missed'} |",
             f"| bump ÷ (uv lock + fetch), per repeat | {', '.join(f'{r['ratio']:.2f}' for r in rounds)} | ≤ 2 |",
             f"| the same bump with its lock forced online, empty fork cache | {median(online)} | |",
             f"| that ÷ (uv lock + fetch), per repeat | {', '.join(f'{r['ratio_online_lock']:.2f}' for r in rounds)} "
             "| ≤ 2 |",
             f"| megatron-core's version in each landed uv.lock (bump, online) | "
             f"{', '.join(sorted({r['version'] for r in rounds} | {r['online_version'] for r in rounds}))} | |",
             f"| how each bump locked; its uv.lock byte for byte the forced-online one's | "
             f"{', '.join(r['lock_mode'] + ('; same' if r['same_lock'] else '; DIFFERENT') for r in rounds)} | same |"]
    if "baseline_bump_s" in rounds[0]:
        baseline = [r["baseline_bump_s"] for r in rounds]
        lines.append(f"| the same bump by the `--baseline` checkout, empty fork cache | {median(baseline)} "
                     f"(lock says {', '.join(sorted({r['baseline_version'] for r in rounds}))}) | |")
    lines.append(f"| load average (1 min) after each round | {', '.join(f'{r['load']:.1f}' for r in rounds)} | |")
    for dist, up in result["upstream"].items():
        limit = " < 30 s" if dist == "megatron-core" else ""
        lines.append(f"| `deps upstream {dist}`, empty cache | {median(up['empty_s'])} | {limit.strip()} |")
        lines.append(f"| `deps upstream {dist}`, warm | {median(up['warm_s'])} | |")
        lines.append(f"| `deps upstream {dist}`, fetched into the fork cache | "
                     f"{statistics.median(up['fetched_bytes']) / 1e6:.1f} MB | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirror", action="append", default=[], metavar="URL=PATH", required=True,
                        help="a local bare mirror of a fork or upstream URL (repeat for each)")
    parser.add_argument("--branch", default="yifu/nano-v3-main", help="the megatron-core fork branch to bump to")
    parser.add_argument("--upstream", nargs="*", default=["megatron-core"], metavar="DIST",
                        help="forks for `deps upstream` (nemo-toolkit needs a NeMo mirror)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline", type=Path, metavar="CHECKOUT",
                        help="another checkout of nemo-rl whose bump is timed in the same rounds")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="nemo-rl-bench-upkeep-") as tmp:
        root = Path(tmp)
        env = serve(args.mirror, root)
        result = {"branch": args.branch, "baseline": str(args.baseline) if args.baseline else None,
                  "bump": bump_rounds(root, args, env),
                  "upstream": {dist: upstream_rounds(root, dist, min(args.repeats, 2), env) for dist in args.upstream}}
    meta = {"date": datetime.date.today().isoformat(), "cores": os.cpu_count(), "python": platform.python_version(),
            "uv": run([find_uv_bin(), "--version"]).stdout.strip(), "git": run(["git", "--version"]).stdout.strip()}
    print(f"{meta['date']}, {meta['cores']} cores, Python {meta['python']}, {meta['uv']}, {meta['git']}\n")
    print(table(result))
    out = ROOT / "benchmark-results" / "upkeep.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"meta": meta, **result}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
