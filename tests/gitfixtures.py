"""Real git repositories for tests: fixed author and dates, no signing, no user configuration."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

from nemo_rl.process import run

FIXED_ENV = {
    "GIT_AUTHOR_NAME": "Fixture Author", "GIT_AUTHOR_EMAIL": "author@fixture.invalid",
    "GIT_COMMITTER_NAME": "Fixture Committer", "GIT_COMMITTER_EMAIL": "committer@fixture.invalid",
    "GIT_AUTHOR_DATE": "2025-05-01T12:00:00+00:00", "GIT_COMMITTER_DATE": "2025-05-01T12:00:00+00:00",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, **FIXED_ENV}
    return run(["git", "-C", str(repo), "-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main", *args],
               env=env).stdout.strip()


def write(repo: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def commit(repo: Path, message: str, files: dict[str, str]) -> str:
    write(repo, files)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def init(repo: Path) -> Path:
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    return repo


def package_files(distribution: str, module: str, version: str, body: str = "", extra: str = "") -> dict[str, str]:
    """A tiny pure-Python distribution with static metadata (uv reads it without building)."""
    top = module.split(".")[0]
    init_path = "/".join(module.split(".")) + "/__init__.py"
    return {
        "pyproject.toml": f"""\
            [build-system]
            requires = ["hatchling"]
            build-backend = "hatchling.build"

            [project]
            name = "{distribution}"
            version = "{version}"
            requires-python = ">=3.10"
            {extra}

            [tool.hatch.build.targets.wheel]
            packages = ["{top}"]
            """,
        init_path: f'VERSION = "{version}"\n{body}',
    }


def small_history(root: Path) -> tuple[Path, list[str], list[str]]:
    """main: add a.py and b.txt, change a.py, delete b.txt; `side` (from the first commit) changes a.py again."""
    repo = init(root / "repo")
    first = commit(repo, "add files", {"pkg/a.py": "A = 1\n", "b.txt": "bee\n"})
    second = commit(repo, "change a", {"pkg/a.py": "A = 2\n"})
    git(repo, "rm", "-q", "b.txt")
    git(repo, "commit", "-q", "-m", "remove b")
    third = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "side", first)
    side = commit(repo, "side change of a", {"pkg/a.py": "A = 3\n"})
    clean = commit(repo, "side adds c", {"pkg/c.py": "C = 1\n"})
    git(repo, "checkout", "-q", "main")
    return repo, [first, second, third], [side, clean]
