"""The docs cannot drift: every ```sh block in README.md, CHANGELOG.md and docs/ is run (or, when marked
```sh {not-run: why}, at least every `nemo-rl` command in it must parse), and every relative link reaches its
file and heading."""

import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from nemo_rl.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]  # each linked from the README
DOCS = [ROOT / "README.md", *PAGES]
BLOCK = re.compile(r"^```sh(?P<info>[^\n]*)\n(?P<body>.*?)^```", re.M | re.S)
NOT_RUN = re.compile(r"^ \{not-run: [^}]+\}$")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
LINK = re.compile(r"\[[^\]\n]*\]\((?P<target>[^)\s]+)\)")


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
    for command in (part for line in lines for part in line.split(" && ")):
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


def builds_an_extra(body: str) -> bool:
    return re.search(r"^[^#\n]*\buv sync\b[^#\n]*--extra", body, re.M) is not None


@pytest.mark.parametrize("body", [m.group("body") for path in DOCS for m in BLOCK.finditer(path.read_text())
                                  if builds_an_extra(m.group("body"))])
def test_a_doc_block_that_builds_an_extra_stops_on_a_preflight_no_go(body, tmp_path):
    calls = tmp_path / "calls"
    for name in ("uv", "git"):  # the pre-flight says no-go; everything else succeeds and is recorded
        stub = tmp_path / "bin" / name
        stub.parent.mkdir(exist_ok=True)
        stub.write_text(f'#!/bin/sh\necho "{name} $*" >> {calls}\ncase "$*" in *--preflight*) exit 1;; esac\n')
        stub.chmod(0o755)
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    subprocess.run(["sh", "-c", body], cwd=tmp_path, env=env, check=False, capture_output=True, timeout=60)
    ran = calls.read_text().splitlines()
    assert any("--preflight" in line for line in ran)
    assert [line for line in ran if line.startswith("uv sync")] == []


def test_builds_an_extra_finds_the_sync_of_an_extra_only():
    assert builds_an_extra("uv run x\nUV_NO_GITHUB_FAST_PATH=1 uv sync --extra mcore   # build\n")
    assert not builds_an_extra("uv sync --locked\nuv run x   # then uv sync --extra mcore\n")


def test_every_doc_page_is_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text()
    assert [path.name for path in PAGES if f"({path.relative_to(ROOT)})" not in readme] == []
    assert len(readme.splitlines()) <= 150


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the page's headings: lower case, punctuation dropped, spaces as hyphens, a repeated
    one numbered."""
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#+ (.+)$", FENCE.sub("", path.read_text()), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        seen[slug] = seen.get(slug, -1) + 1
        found.add(slug if seen[slug] == 0 else f"{slug}-{seen[slug]}")
    return found


@pytest.mark.parametrize("page", DOCS, ids=lambda path: path.name)
def test_every_relative_link_reaches_its_file_and_heading(page):
    broken = []
    for match in LINK.finditer(FENCE.sub("", page.read_text())):
        target = match.group("target")
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page
        if not path.is_file():
            broken.append(f"{target}: no such file")
        elif anchor and anchor not in anchors(path):
            broken.append(f"{target}: no such heading in {path.relative_to(ROOT)}")
    assert broken == []


@pytest.mark.parametrize("page", DOCS, ids=lambda path: path.name)
def test_no_first_person(page):
    prose = re.sub(r"`[^`\n]*`", "", FENCE.sub("", page.read_text()))  # code says what it says
    assert re.findall(r"\b(?:[Ww]e|[Oo]urs?|[Uu]s|I)\b", prose) == []


def test_each_benchmark_has_its_figures_in_performance_md():
    performance = (ROOT / "docs" / "performance.md").read_text()
    scripts = sorted(path.name for path in (ROOT / "tests" / "benchmarks").glob("bench_*.py"))
    assert scripts and [name for name in scripts if f"tests/benchmarks/{name}" not in performance] == []
    assert len(performance.splitlines()) <= 150  # the current figures only: earlier rounds go to CHANGELOG.md


@pytest.mark.parametrize("page", [p for p in DOCS if p.name != "CHANGELOG.md"], ids=lambda path: path.name)
def test_every_test_path_a_page_names_exists(page):  # CHANGELOG.md may name what is gone
    named = set(re.findall(r"\btests/[\w/]+\.py\b", page.read_text()))
    assert sorted(path for path in named if not (ROOT / path).is_file()) == []


README_BLOCK = re.compile(r"^```(?P<lang>\w*)(?P<info>[^\n]*)\n(?P<body>.*?)^```", re.M | re.S)


def undefined_names(code: str) -> list[str]:
    """Names the code reads at module level (or as globals in its functions and classes) that it never binds."""
    import builtins
    import symtable

    top = symtable.symtable(code, "<block>", "exec")
    bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    read, tables = set(), [top]
    while tables:
        table = tables.pop()
        read |= {s.get_name() for s in table.get_symbols()
                 if s.is_referenced() and (table is top or s.is_global() and not s.is_declared_global())}
        tables += table.get_children()
    return sorted(read - bound - set(dir(builtins)))


@pytest.mark.parametrize("lang, info, body", [m.group("lang", "info", "body")
                                              for m in README_BLOCK.finditer((ROOT / "README.md").read_text())])
def test_every_readme_block_runs_or_says_why_not(lang, info, body):
    """```sh blocks run (test_doc_block); any other block says why it does not, and Python is whole as shown."""
    assert lang == "sh" or NOT_RUN.match(info), f"a ```{lang} block of README.md is not run: mark it {{not-run: why}}"
    if lang == "python":
        assert undefined_names(body) == []


def test_undefined_names_finds_a_class_the_snippet_never_defines():
    assert undefined_names("from m import f\nactor = MyActor.options(**f()).remote()\n") == ["MyActor"]
    assert undefined_names("import ray\n@ray.remote\nclass A:\n    def f(self):\n        return A\nA.f\n") == []


def test_the_coverage_floor_docs_give_is_the_one_ci_holds():
    floor = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["coverage"]["report"]["fail_under"]
    assert floor > 0 and f"The floor is {floor} %" in (ROOT / "docs" / "testing.md").read_text()
