"""Importing modules in another environment's interpreter, to prove that they work there (`deps verify`, the
worker environments' verification). One script, run with the environment's python; nothing is imported here."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from nemo_rl import values
from nemo_rl.errors import NemoRLError
from nemo_rl.process import run

SCRIPT = """
import importlib, json, sys
failed = {}
for module in sys.argv[1:]:
    try:
        importlib.import_module(module)
    except BaseException as exc:
        failed[module] = [type(exc).__name__, str(exc), getattr(exc, "name", None)]
print(json.dumps({"python": sys.version.split()[0], "failed": failed}))
"""


@dataclass(frozen=True)
class Failure:
    type: str
    message: str
    missing_module: str | None  # ModuleNotFoundError's name

    def __str__(self) -> str:
        return f"{self.type}: {self.message}"


@dataclass(frozen=True)
class Result:
    python: str  # the interpreter's version
    failed: dict[str, Failure]


def check(python: Path, modules: list[str], *, cwd: Path | None = None, timeout: float = 120) -> Result:
    """Import each of `modules` with `python` (in a fresh process; a failure does not stop the others)."""
    timeout = values.timeout_seconds(timeout, "imports.check")
    out = run([python, "-c", SCRIPT, *modules], cwd=cwd, timeout=timeout).stdout
    try:
        data = json.loads(out.strip().splitlines()[-1])
        return Result(str(data["python"]), {m: Failure(*f) for m, f in data["failed"].items()})
    except (ValueError, IndexError, KeyError, TypeError) as exc:
        raise NemoRLError(f"{python} did not report its imports: {out[-200:]!r}",
                          "run it by hand to see why") from exc
