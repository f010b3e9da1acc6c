"""A fixture world: upstream and fork repositories of tiny megatron-core / nemo-toolkit packages, and a
project pinning the forks through [tool.uv.sources], reached through insteadOf as a mirror site would."""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass, field, replace
from pathlib import Path

from gitfixtures import commit, git, init, package_files

from nemo_rl.process import run

FORKS = {
    "megatron-core": ("megatron.core", "megatron-lm"),
    "nemo-toolkit": ("nemo", "nemo"),
}
# the module nemo-rl imports to prove a fork works (its table's `module`), where it is not the package's own
PROOF = {"nemo-toolkit": "nemo.tron.init"}


@dataclass
class Fork:
    distribution: str
    module: str
    upstream: Path
    fork: Path
    fork_url: str
    upstream_url: str
    base: str
    head: str
    downstream: list[str] = field(default_factory=list)


@dataclass
class World:
    root: Path
    project: Path
    forks: dict[str, Fork]
    insteadof: dict[str, str]

    def git_env(self) -> dict[str, str]:
        env = {"GIT_CONFIG_COUNT": str(len(self.insteadof))}
        for i, (url, path) in enumerate(self.insteadof.items()):
            env[f"GIT_CONFIG_KEY_{i}"] = f"url.{path}.insteadOf"
            env[f"GIT_CONFIG_VALUE_{i}"] = url
        return env

    def files(self) -> dict[str, bytes]:
        """Every file bump may touch, by relative path: pyproject.toml, uv.lock and patches/."""
        paths = [self.project / "pyproject.toml", self.project / "uv.lock", *(self.project / "patches").rglob("*")]
        return {str(p.relative_to(self.project)): p.read_bytes() for p in paths if p.is_file()}


def make_fork(root: Path, distribution: str, module: str | None = None, repo_name: str | None = None) -> Fork:
    """Upstream and fork repositories of a tiny `distribution` (FORKS names the module and repository of the two
    the world starts with)."""
    module, repo_name = (module, repo_name) if module and repo_name else FORKS[distribution]
    upstream = init(root / "upstream" / repo_name)
    # the module nemo-rl imports to prove the fork works (its table's), as the real forks have it
    proof = {"nemo-toolkit": {"nemo/tron/__init__.py": "", "nemo/tron/init.py": "READY = True\n"}}
    commit(upstream, "initial import", {**package_files(distribution, module, "0.1.0"), **proof.get(distribution, {})})
    base = commit(upstream, "upstream feature", {"/".join(module.split(".")) + "/feature.py": "FEATURE = 1\n"})
    fork = root / "fork" / repo_name
    run(["git", "clone", "-q", str(upstream), str(fork)])
    git(fork, "checkout", "-q", "-b", "nemo-rl/main")
    tokens = "/".join(module.split(".")) + "/tokens.py"
    first = commit(fork, "add tokens entry", {tokens: "def tokens():\n    return [1, 2]\n"})
    head = commit(fork, "fix: pad tokens", {tokens: "def tokens():\n    return [1, 2, 0]\n"})
    # upstream moves on after the fork point, as real upstreams do
    commit(upstream, "upstream later work", {"/".join(module.split(".")) + "/later.py": "LATER = 1\n"})
    for repo in (upstream, fork):  # served as GitHub serves: blob filters and fetches by SHA
        git(repo, "config", "uploadpack.allowFilter", "true")
        git(repo, "config", "uploadpack.allowAnySHA1InWant", "true")
    return Fork(distribution, module, upstream, fork, f"https://forks.nemo-rl.invalid/{repo_name}.git",
                f"https://upstream.nemo-rl.invalid/{repo_name}.git", base, head, [first, head])


def project_pyproject(forks: dict[str, Fork]) -> str:
    sources = "\n".join(f'{f.distribution} = {{ git = "{f.fork_url}", rev = "{f.head}" }}' for f in forks.values())
    tables = "\n".join(
        textwrap.dedent(f"""
        [tool.nemo-rl.forks.{f.distribution}]
        branch = "nemo-rl/main"
        upstream-url = "{f.upstream_url}"
        upstream-branch = "main"
        base = "{f.base}"
        module = "{PROOF.get(f.distribution, f.module)}"
        """) for f in forks.values())
    return textwrap.dedent("""\
        [project]
        name = "fixture-project"
        version = "0.1.0"
        requires-python = ">=3.10"
        dependencies = []

        [project.optional-dependencies]
        mcore = ["megatron-core", "nemo-toolkit"]

        [tool.uv]
        package = false

        [tool.uv.sources]
        # the forks: full SHAs only
        """) + sources + "\n" + tables


def make_world(root: Path) -> World:
    forks = {d: make_fork(root, d) for d in FORKS}
    insteadof = {}
    for f in forks.values():
        insteadof[f.fork_url] = str(f.fork)
        insteadof[f.upstream_url] = str(f.upstream)
    project = root / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(project_pyproject(forks))
    return World(root, project, forks, insteadof)


def copy_world(template: World, root: Path) -> World:
    """A copy of `template` at `root`: repositories, locked project and records (uv.lock and patches/ hold public
    URLs only, so only the insteadOf map and the recorded paths change)."""
    import shutil

    shutil.copytree(template.root, root, symlinks=True)

    def moved(path: Path) -> Path:
        return root / path.relative_to(template.root)

    forks = {d: replace(f, upstream=moved(f.upstream), fork=moved(f.fork)) for d, f in template.forks.items()}
    insteadof = {url: str(moved(Path(path))) for url, path in template.insteadof.items()}
    return World(root, moved(template.project), forks, insteadof)


def apply_env(world: World, monkeypatch) -> None:
    for key, value in world.git_env().items():
        monkeypatch.setenv(key, value)


def uv_bin() -> str:
    from nemo_rl.uv import find_uv_bin

    return find_uv_bin()


def uv_run(world: World, *args: str, env_dir: Path | None = None) -> str:
    env = dict(os.environ)
    if env_dir is not None:
        env["UV_PROJECT_ENVIRONMENT"] = str(env_dir)
    return run([uv_bin(), *args], cwd=world.project, env=env).stdout


WHY = "Ours: why the fork exists."


def make_records(world: World) -> None:
    """patches/<dist>/ for every fork, with a why-note: a complete project, as a maintainer commits it."""
    from nemo_rl.cli import main
    from nemo_rl.forks.records import WHY_PLACEHOLDER

    assert main(["deps", "patches", "--project", str(world.project)]) == 0
    for dist in world.forks:
        path = world.project / "patches" / dist / "index.toml"
        path.write_text(path.read_text().replace(WHY_PLACEHOLDER, WHY))


def add_fork(world: World, monkeypatch, distribution: str, module: str, repo_name: str) -> Fork:
    """A fork added as a maintainer adds one: its repositories (reached through insteadOf), then in pyproject.toml
    its source, its table and the mcore extra, then `nemo-rl deps patches DIST` (records, relock)."""
    import tomlkit

    from nemo_rl.cli import main
    from nemo_rl.forks.records import WHY_PLACEHOLDER

    fork = world.forks[distribution] = make_fork(world.root, distribution, module, repo_name)
    world.insteadof.update({fork.fork_url: str(fork.fork), fork.upstream_url: str(fork.upstream)})
    apply_env(world, monkeypatch)
    path = world.project / "pyproject.toml"
    doc = tomlkit.parse(path.read_text())
    source = tomlkit.inline_table()
    source.update({"git": fork.fork_url, "rev": fork.head})
    doc["tool"]["uv"]["sources"][distribution] = source
    doc["tool"]["nemo-rl"]["forks"][distribution] = {
        "branch": "nemo-rl/main", "upstream-url": fork.upstream_url, "upstream-branch": "main", "base": fork.base,
        "module": module}
    doc["project"]["optional-dependencies"]["mcore"].append(distribution)
    path.write_text(tomlkit.dumps(doc))
    assert main(["deps", "patches", distribution, "--project", str(world.project)]) == 0
    index = world.project / "patches" / distribution / "index.toml"
    index.write_text(index.read_text().replace(WHY_PLACEHOLDER, WHY))
    return fork


def fork_pyproject(world: World, distribution: str = "megatron-core", *, version: str | None = "0.1.0",
                   dependencies: list[str] = ()) -> str:
    """The fork's pyproject.toml at its head with `dependencies` and a static `version` (None: dynamic, read by
    hatch from the package's __init__.py, as Megatron reads package_info.py)."""
    import re

    text = re.sub(r"\ndependencies = \[.*\]", "", (world.forks[distribution].fork / "pyproject.toml").read_text())
    text = re.sub(r'version = "[^"]*"', 'version = "0.1.0"', text, count=1)
    text = text.replace('requires-python = ">=3.10"', 'requires-python = ">=3.10"\ndependencies = ['
                        + ", ".join(f'"{d}"' for d in dependencies) + "]", 1)
    if version is None:
        module = world.forks[distribution].module.replace(".", "/")
        text = text.replace('version = "0.1.0"', 'dynamic = ["version"]').replace(
            "[tool.hatch.build", f'[tool.hatch.version]\npath = "{module}/__init__.py"\n\n[tool.hatch.build', 1)
    else:
        text = text.replace('version = "0.1.0"', f'version = "{version}"')
    return text


def derive_metadata(world: World, drop: dict[str, str], add: dict[str, str] = {}) -> None:  # noqa: B006
    """Give megatron-core a derived [[tool.uv.dependency-metadata]] entry, as this repository has: `drop` and `add`
    ({requirement: why}) in its fork table, an entry, then `deps patches megatron-core` derives it and relocks."""
    import tomlkit

    from nemo_rl.cli import main

    path = world.project / "pyproject.toml"
    doc = tomlkit.parse(path.read_text())
    table = doc["tool"]["nemo-rl"]["forks"]["megatron-core"]
    table["drop"] = [{"name": name, "why": why} for name, why in drop.items()]
    table["add"] = [{"requirement": req, "why": why} for req, why in add.items()]
    entry = "" if "[[tool.uv.dependency-metadata]]" in path.read_text() else (
        '\n# derived by `nemo-rl deps patches`\n[[tool.uv.dependency-metadata]]\nname = "megatron-core"\n'
        'version = "0.0.0"\nrequires-dist = []\n')
    path.write_text(tomlkit.dumps(doc) + entry)
    assert main(["deps", "patches", "megatron-core", "--project", str(world.project)]) == 0
