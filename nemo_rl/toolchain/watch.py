"""`nemo-rl toolchain watch`: how many objects of transformer-engine's build.ninja are compiled."""

from __future__ import annotations

import argparse
import contextlib
import re
import time
from dataclasses import dataclass
from pathlib import Path

from nemo_rl import interrupt, values, verbose
from nemo_rl.errors import NemoRLError

HELP = "show the progress of the mcore extra's transformer-engine build: objects compiled, time"
DESCRIPTION = (HELP + ". Run it beside the build with `uv run --no-sync`. Exit 0 when every object is compiled, 1 "
               "when the build stopped before.")
PACKAGE = "transformer-engine-torch"
STALL_S = 30 * 60  # the longest single compile seen (all archs of one .cu on 2 cores) is well under this
_BUILD = re.compile(r"^build ((?:[^\n:$]|\$.)+):", re.MULTILINE)  # outputs up to the first unescaped ':'
_PATH = re.compile(r"(?:[^ $]|\$.)+")  # one output: unescaped spaces separate them


def _unescape(path: str) -> str:
    return re.sub(r"\$(.)", r"\1", path)  # ninja's `$ `, `$:` and `$$`


@dataclass(frozen=True)
class Progress:
    ninja: Path
    done: int
    total: int
    elapsed: float  # seconds since build.ninja was written
    idle: float  # seconds since build.ninja or an object was last written

    @property
    def remaining(self) -> float | None:
        if self.done == 0:  # guard: watch-no-estimate-before-the-first-object
            return None
        return self.elapsed / self.done * (self.total - self.done)

    @property
    def finished(self) -> bool:
        return self.done >= self.total

    def line(self) -> str:
        left = self.remaining
        estimate = "estimate after the first object" if left is None else f"about {_minutes(left)} left"
        return (f"{PACKAGE}: {self.done}/{self.total} objects compiled, {_minutes(self.elapsed)} elapsed, "
                f"{estimate} ({self.ninja.parent})")


def _minutes(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 60} min {whole % 60:02d} s"


def objects(text: str) -> set[str]:
    """The object files a build.ninja's `build` lines write, ninja's escapes undone."""
    return {_unescape(out) for outputs in _BUILD.findall(text) for out in _PATH.findall(outputs)
            if out.endswith(".o")}


def progress(ninja: Path, now: float | None = None) -> Progress:
    listed = objects(ninja.read_text(errors="replace"))
    if not listed:  # guard: watch-a-build-ninja-without-objects-is-an-error
        raise NemoRLError(f"{ninja} lists no object to compile",
                          "pass the build tree of the running build with --dir")
    now = now or time.time()
    started = ninja.stat().st_mtime
    written = [started]
    for name in listed:
        with contextlib.suppress(OSError):
            written.append((ninja.parent / name).stat().st_mtime)
    return Progress(ninja, len(written) - 1, len(listed), max(0.0, now - started), max(0.0, now - max(written)))


def find_build(root: Path) -> Path | None:
    """The newest build.ninja of a transformer-engine-torch build under `root`."""
    patterns = ("build.ninja", "build/*/build.ninja", f"sdists-v*/*/{PACKAGE}/**/build.ninja",
                f"sdists-v*/index/*/{PACKAGE}/**/build.ninja")
    found = [path for pattern in patterns for path in root.glob(pattern)]
    return max(found, key=lambda p: p.stat().st_mtime, default=None)


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:  # guard: watch-every-is-a-positive-number-of-seconds
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return seconds


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", type=values.path_argument,
                        help="the build tree, or the uv cache holding it (default: `uv cache dir`)")
    parser.add_argument("--env", type=values.path_argument,
                        help="the environment the build installs into (default: $UV_PROJECT_ENVIRONMENT, else .venv)")
    parser.add_argument("--once", action="store_true", help="print one line and exit")
    parser.add_argument("--every", type=_seconds, default=30, help="seconds between lines (default 30)")
    verbose.add(parser)
    parser.set_defaults(project_required=False, project=None)


def _sleep(seconds: float) -> None:
    """Sleep, ending at once at a signal."""
    end = time.monotonic() + seconds
    while True:
        interrupt.check()
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, 0.5))


def run(project: Path | None, args: argparse.Namespace) -> int:
    from nemo_rl import uv
    from nemo_rl.project.develop_state import project_environment

    root = args.dir or uv.cache_dir(honour_config=True)
    env = args.env or project_environment(Path.cwd())
    while True:
        ninja = find_build(root) if root else None  # again each line: a newer build replaces the one seen
        state = progress(ninja) if ninja else None
        holder = uv.environment_lock_holder(env)
        if state and state.finished and holder and state.idle > STALL_S:  # guard: watch-an-old-finished-build-is-not-the-running-one
            state = None  # the running build has not written its build.ninja yet
        if state is None and args.once:  # guard: watch-once-without-a-build-is-an-error
            raise NemoRLError(f"no running {PACKAGE} build in {root or 'uv cache'}",
                              f"start `{uv.sync_command()}` and wait a minute, or pass the build tree with --dir")
        if state and not state.finished and state.idle > STALL_S and not holder:  # guard: watch-a-stalled-build-without-uv-is-not-running
            raise NemoRLError(f"the build in {state.ninja.parent} is not running: {state.done}/{state.total} objects, "
                              f"nothing written for {_minutes(state.idle)} and no uv holds {env}/.lock",
                              f"start it again: `{uv.sync_command()}` (uv's cache keeps the objects compiled)")
        if state:
            print(state.line(), flush=True)
            if state.finished or args.once:
                return 0 if state.finished else 1
        _sleep(args.every)
