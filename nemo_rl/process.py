"""The one runner for external commands. Nothing else in nemo_rl calls subprocess."""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from nemo_rl.errors import NemoRLError


@dataclass(frozen=True)
class Result:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def _indent(text: str) -> str:
    text = text.rstrip()
    return "\n".join("    " + line for line in text.splitlines()) if text else "    (nothing)"


def describe_failure(result: Result) -> str:
    return (
        f"command failed (exit {result.returncode}): {shlex.join(result.args)}\n"
        f"  stdout:\n{_indent(result.stdout)}\n  stderr:\n{_indent(result.stderr)}"
    )


def run(
    args: Sequence[str | os.PathLike[str]],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    remedy: str | None = None,
    input_text: str | bytes | None = None,
) -> Result:
    """Run `args`, capture its output as text, and raise NemoRLError on failure when `check`.

    `env` replaces the environment entirely; callers build it from os.environ on purpose.
    """
    argv = [os.fspath(a) for a in args]
    try:
        completed = subprocess.run(
            argv,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            input=input_text.encode() if isinstance(input_text, str) else input_text,
            capture_output=True,
            check=False,
        )
    except FileNotFoundError as exc:
        missing = Path(argv[0]).name
        raise NemoRLError(
            f"cannot run {missing}: {exc.strerror}", remedy or f"install {missing} and make sure it is on PATH"
        ) from exc
    # Bytes in, text out: git fast-import streams carry binary blobs; output is decoded leniently.
    result = Result(argv, completed.returncode, completed.stdout.decode(errors="replace"),
                    completed.stderr.decode(errors="replace"))
    if check and result.returncode != 0:
        raise NemoRLError(describe_failure(result), remedy)
    return result
