"""The docs cannot drift: every ```sh block in README.md and docs/ is run (or, when marked
```sh {not-run: why}, at least every `nemo-rl` command in it must parse)."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from nemo_rl.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```sh(?P<info>[^\n]*)\n(?P<body>.*?)^```", re.M | re.S)
NOT_RUN = re.compile(r"^ \{not-run: [^}]+\}$")


def commands(body: str) -> list[str]:
    """Command lines of a block: comments after `#` dropped, `\\` continuations joined."""
    lines, current = [], ""
    for raw in body.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        current += line
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        if current.strip():
            lines.append(current.strip())
        current = ""
    return lines


def blocks():
    for path in DOCS:
        for match in BLOCK.finditer(path.read_text()):
            line = path.read_text()[:match.start()].count("\n") + 1
            yield pytest.param(match.group("info"), commands(match.group("body")), id=f"{path.name}:{line}")


def nemo_rl_words(command: str) -> list[str] | None:
    words = shlex.split(command)
    while words and ("=" in words[0] and not words[0].startswith("-")):
        words = words[1:]  # VAR=value prefixes
    if words[:2] == ["uv", "run"]:
        words = words[2:]
        while words and words[0].startswith("--"):
            words = words[1:]
    return words[1:] if words[:1] == ["nemo-rl"] else None


def runnable(command: str) -> list[str]:
    """The command as this test runs it: `uv run X` through this interpreter, so no sync and no network."""
    words = shlex.split(command)
    if words[:2] == ["uv", "run"]:
        words = words[2:]
        while words and words[0].startswith("--"):
            words = words[1:]
        if words[0] == "nemo-rl":
            return [sys.executable, "-m", "nemo_rl", *words[1:]]
        if words[0] in ("pytest", "python"):
            return [sys.executable, *(["-m", "pytest", "-p", "no:cacheprovider"] if words[0] == "pytest" else []),
                    *words[1:]]
    return words


@pytest.mark.slow  # runs every shown command
@pytest.mark.parametrize("info, lines", list(blocks()))
def test_doc_block(info, lines):
    assert info == "" or NOT_RUN.match(info), f"a block is ```sh or ```sh {{not-run: why}}, found {info!r}"
    for command in lines:
        words = nemo_rl_words(command)
        if words is not None:
            try:
                build_parser().parse_args(words)  # every shown nemo-rl command parses, run or not
            except SystemExit as exc:
                if exc.code == 0:  # --help
                    continue
                pytest.fail(f"`{command}` does not parse (exit {exc.code})")
    if info:
        return
    env = {k: v for k, v in os.environ.items() if k not in ("NEMO_RL_CACHE_DIR",)}
    for command in lines:
        result = subprocess.run(runnable(command), cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, f"`{command}` exited {result.returncode}:\n{result.stdout}\n{result.stderr}"


def test_every_doc_page_is_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text()
    assert all(f"(docs/{path.name})" in readme for path in DOCS[1:])
    assert len(readme.splitlines()) <= 150
