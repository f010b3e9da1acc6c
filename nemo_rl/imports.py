"""Import modules with another environment's interpreter to prove they work there."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from nemo_rl import values
from nemo_rl.errors import NemoRLError
from nemo_rl.process import run

SCRIPT = """
import importlib, importlib.util, json, sys, types
modules = sys.argv[2:]
if sys.argv[1] and importlib.util.find_spec("nemo_rl") is None:
    sys.modules["nemo_rl"] = types.ModuleType("nemo_rl")
    sys.modules["nemo_rl"].__path__ = [sys.argv[1]]
    importlib.import_module("nemo_rl._compat.nemo_rl_transformer_engine").install()
failed = {}
for module in modules:
    try:
        importlib.import_module(module)
    except BaseException as exc:
        failed[module] = [type(exc).__name__, str(exc), getattr(exc, "name", None)]
files = {getattr(m, "__file__", None) for m in list(sys.modules.values())}
try:
    with open("/proc/self/maps") as maps:
        files |= {line.split(None, 5)[5].strip() for line in maps if len(line.split(None, 5)) == 6}
except OSError:
    pass
files = sorted(f for f in files if isinstance(f, str) and f.startswith("/"))
print(json.dumps({"python": sys.version.split()[0], "failed": failed, "files": files}))
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
    failed: Mapping[str, Failure]
    files: tuple[str, ...] = ()  # the modules and shared libraries the imports loaded


def check(python: Path, modules: list[str], *, cwd: Path | None = None, timeout: float = 120,
          hook: bool = False) -> Result:
    """Import `modules` with `python` in a fresh process; `hook`: with this nemo_rl's transformer-engine hook where
    the environment has none."""
    import nemo_rl

    timeout = values.timeout_seconds(timeout, "imports.check")
    package = nemo_rl.__path__[0] if hook else ""
    out = run([python, "-c", SCRIPT, package, *modules], cwd=cwd, timeout=timeout).stdout
    try:
        data = json.loads(out.strip().splitlines()[-1])
        return Result(str(data["python"]), {m: Failure(*f) for m, f in data["failed"].items()},
                      tuple(str(f) for f in data.get("files", [])))
    except (ValueError, IndexError, KeyError, TypeError) as exc:
        raise NemoRLError(f"{python} did not report its imports: {out[-200:]!r}", "run it by hand") from exc
