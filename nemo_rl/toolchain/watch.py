"""`nemo-rl toolchain watch`: the objects compiled of those the transformer-engine build's build.ninja lists."""

from __future__ import annotations

import argparse
import re
import time
from dataclasses import dataclass
from pathlib import Path

from nemo_rl import values, verbose

HELP = "show the progress of the transformer-engine build `uv sync --extra mcore` runs: objects compiled, time"
DESCRIPTION = (HELP + ". Run `uv run --no-sync nemo-rl toolchain watch` beside the build (a plain `uv run` waits "
               "for it). Exit 0 when every object is compiled.")
PACKAGE = "transformer-engine-torch"
_OBJECT = re.compile(r"^build ([^:$|]+\.o):", re.MULTILINE)


@dataclass(frozen=True)
class Progress:
    ninja: Path
    done: int
    total: int
    elapsed: float  # seconds since build.ninja was written

    @property
    def remaining(self) -> float | None:
        if self.done == 0:  # guard: watch-no-estimate-before-the-first-object
            return None
        return self.elapsed / self.done * (self.total - self.done)

    def line(self) -> str:
        left = self.remaining
        estimate = "estimate after the first object" if left is None else f"about {_minutes(left)} left"
        return (f"{PACKAGE}: {self.done}/{self.total} objects compiled, {_minutes(self.elapsed)} elapsed, "
                f"{estimate} ({self.ninja.parent})")


def _minutes(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 60} min {whole % 60:02d} s"


def progress(ninja: Path, now: float | None = None) -> Progress:
    """The progress of the build `ninja` describes."""
    objects = set(_OBJECT.findall(ninja.read_text(errors="replace")))
    done = sum(1 for name in objects if (ninja.parent / name.replace("$ ", " ")).is_file())
    return Progress(ninja, done, len(objects), max(0.0, (now or time.time()) - ninja.stat().st_mtime))


def find_build(root: Path) -> Path | None:
    """The newest build.ninja of a transformer-engine-torch build under `root` (a build tree or a uv cache)."""
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
                        help="the build tree, or the uv cache holding it (default: uv's cache, `uv cache dir`)")
    parser.add_argument("--once", action="store_true", help="print one line and exit")
    parser.add_argument("--every", type=_seconds, default=30, help="seconds between lines (default 30)")
    verbose.add(parser)
    parser.set_defaults(project_required=False, project=None)


def run(project: Path | None, args: argparse.Namespace) -> int:
    from nemo_rl import uv
    from nemo_rl.errors import NemoRLError

    root = args.dir or uv.cache_dir()
    ninja = find_build(root) if root else None
    while ninja is None:
        if args.once:  # guard: watch-once-without-a-build-is-an-error
            raise NemoRLError(f"no {PACKAGE} build in {root or 'uv cache'}",
                              "start `uv sync --locked --extra mcore` and wait a minute, or pass the build tree with "
                              "--dir")
        time.sleep(args.every)
        ninja = find_build(root) if root else None
    while True:
        state = progress(ninja)
        print(state.line(), flush=True)
        if state.done >= state.total or args.once:
            return 0 if state.done >= state.total else 1
        time.sleep(args.every)
