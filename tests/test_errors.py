"""nemo_rl/errors.py: the command helper, and no backticked command built around it."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

from nemo_rl.errors import command

PACKAGE = Path(__file__).resolve().parents[1] / "nemo_rl"

# Values that are not paths and are checked before they reach a message: distribution and extra names (PEP 503),
# a verb's name, numbers, hex SHAs, the branch --onto makes from them, uv.sync_command (an extra's name in a fixed
# command). lock_markers' spans are markers, not commands.
NOT_PATHS = {"dist", "distribution", "fork.distribution", "extra", "command", "major", "longer", "target[:12]",
             "under_way", "work", "uv.sync_command()", "uv.sync_command(extra)"}
NOT_PATHS_IN = {"forks/installed_fork.py": {"name"}, "forks/locked_fork.py": {"name"},
                "forks/lock_markers.py": {"left", "op", "right"},
                # `again` is a command line its callers quote; the stoppers are names from RELOCK_STOPPERS
                "uv.py": {"again", "' '.join((f'-u {n}' for n in stoppers))"}}
TEMPLATE_FIELD = re.compile(r"\{([A-Za-z_][\w.]*(?:\[[^\]]*\])?)(?:![rsa])?(?::[^{}]*)?\}")


def _unquoted_in_backticks(path: Path, root: Path = PACKAGE) -> list[str]:
    """`{value}` placeholders inside a backticked span of an f-string or a .format template."""
    relative = path.relative_to(root).as_posix()
    allowed = NOT_PATHS | NOT_PATHS_IN.get(relative, set())
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            ticks = 0
            for part in node.values:
                if isinstance(part, ast.Constant):
                    ticks += str(part.value).count("`")
                elif ticks % 2 and ast.unparse(part.value) not in allowed:
                    found.append(f"{relative}:{node.lineno}: {{{ast.unparse(part.value)}}}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            for span in node.value.split("`")[1::2]:
                found += [f"{relative}:{node.lineno}: {{{name}}}" for name in TEMPLATE_FIELD.findall(span)
                          if name not in allowed]
    return found


def test_no_backticked_command_interpolates_a_value_without_the_helper():
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) for hit in _unquoted_in_backticks(path)]
    assert not found, "build these with errors.command (it shell-quotes each value):\n" + "\n".join(found)


def test_the_scan_finds_an_unquoted_path_in_a_backticked_command(tmp_path):
    module = tmp_path / "nemo_rl" / "m.py"
    module.parent.mkdir()
    module.write_text('def f(path):\n    return (f"remove it: `rm "\n'
                      '            f"{path}`, then `nemo-rl deps patches {dist}`")\n'
                      'FIX = "run `chmod 700 {path}`"\n')
    assert sorted(_unquoted_in_backticks(module, module.parent)) == ["m.py:2: {path}", "m.py:4: {path}"]


@pytest.mark.parametrize("name", ["victim proj", "p$(touch PWNED)", "it's `here`", "-rf"])
def test_a_printed_command_keeps_a_hostile_path_one_word(tmp_path, name):
    (tmp_path / "x" / name).mkdir(parents=True)
    (tmp_path / "x" / "victim").write_text("")
    printed = command("rm -r -- {path}", path=tmp_path / "x" / name)
    subprocess.run(["bash", "-c", printed.strip("`")], cwd=tmp_path / "x", check=True)
    assert [p.name for p in (tmp_path / "x").iterdir()] == ["victim"]


def test_a_template_keeps_its_own_words_as_written():
    assert command("git -C {repo} add ... && git checkout <commit> -- *.patch", repo="/a b") == \
        "`git -C '/a b' add ... && git checkout <commit> -- *.patch`"
