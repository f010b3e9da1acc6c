"""uv.lock's [[package]] of a fork held against what it should lock (forks/locked_fork.py), end to end on fixture
forks and real uv: a hand edit of its dependencies, a version an override forces, an extra pasted or edited; each
fails the offline check, `deps status` names the relock and `deps patches` relocks."""

from __future__ import annotations

import forkworld
from fakes import NARROWED, block, fork_with_extras, offline, patches, synced_status
from gitfixtures import commit

from nemo_rl.cli import main
from nemo_rl.forks import installed_fork
from nemo_rl.project.model import Project


def test_a_hand_edited_fork_dependency_fails_ci_and_deps_patches_relocks(world, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(world.project)  # where its fixes run as printed
    fork_with_extras(world)
    lock = world.project / "uv.lock"
    good = lock.read_text()
    start, end = block(good)
    assert '{ name = "urllib3", extra = ["socks"] }' in good[start:end] and '"idna"' in good[start:end]
    edits = {
        "urllib3[socks]": good[start:end].replace('{ name = "urllib3", extra = ["socks"] }', '{ name = "urllib3" }'),
        "six": good[start:end].replace('{ name = "six" }', NARROWED),
        "idna": "\n".join(line for line in good[start:end].splitlines() if '"idna"' not in line) + "\n",
    }
    for missing, edited in edits.items():
        lock.write_text(good[:start] + edited + good[end:])
        rc, out = offline(world, capsys)
        assert rc == 1 and f"[[package]] megatron-core dependencies: expected {missing}" in out, out
        rc, out = patches(world, capsys)
        assert rc == 0 and "relocked" in out, out
        assert lock.read_text() == good, missing
        assert offline(world, capsys)[0] == 0
    # the narrowed marker, synced: status names the relock (`uv sync` would install the same lie again)
    lock.write_text(good[:start] + edits["six"] + good[end:])
    env, out = synced_status(world, tmp_path, capsys)
    print(out)
    assert "six among them" in out and "fix        run `nemo-rl deps patches megatron-core`" in out, out
    # never a sync alone (it installs the lie again): each sync named comes after the relock
    assert all("uv sync" not in line or line.index("nemo-rl deps patches megatron-core") < line.index("uv sync")
               for line in out.split("nemo-toolkit:")[0].splitlines()), out


def test_a_locked_version_the_fork_refuses_is_named_with_its_cause(world, capsys, tmp_path, monkeypatch):
    """uv checks neither a git package's locked metadata nor what an override does to it: six 1.15.0 locked for
    a fork requiring six>=1.16 passes `uv lock --check`, and `uv sync --locked` installs it."""
    monkeypatch.chdir(world.project)  # where its fixes run as printed
    fork_with_extras(world)
    lock, path = world.project / "uv.lock", world.project / "pyproject.toml"
    good, pyproject = lock.read_text(), path.read_text()
    path.write_text(pyproject.replace("[tool.uv]\n", '[tool.uv]\noverride-dependencies = ["six<1.16"]\n', 1))
    forkworld.uv_run(world, "lock", "--quiet")
    overridden = lock.read_text()
    assert 'name = "six"\nversion = "1.15.0"' in overridden
    rc, out = offline(world, capsys)
    assert rc == 1 and "locked six: expected six>=1.16 (the derived entry), found 1.15.0" in out, out
    assert "override-dependencies sets six<1.16: remove it" in out, out
    assert "fix: megatron-core: remove or widen the [tool.uv] override-dependencies entry named above" in out, out
    env, out = synced_status(world, tmp_path, capsys)
    assert "fix        remove or widen the override-dependencies entry named above" in out, out
    found = [str(p) for p in installed_fork.problems(Project.read(world.project), env, "megatron-core")]
    assert any("six 1.15.0 is installed but megatron-core requires six>=1.16" in p for p in found), found
    rc, out = patches(world, capsys)  # relocking cannot undo an override: said, never rc 0
    assert rc == 1 and "still disagrees" in out and "remove or widen the override" in out, out
    # the same block pasted by hand, without the override
    path.write_text(pyproject)
    start = overridden.index('[[package]]\nname = "six"')
    six = overridden[start:overridden.index("[[package]]", start + 1)]
    g = good.index('[[package]]\nname = "six"')
    lock.write_text(good[:g] + six + good[good.index("[[package]]", g + 1):])
    rc, out = offline(world, capsys)
    assert rc == 1 and "found 1.15.0 (run `uv lock --upgrade-package six`)" in out, out
    rc, out = patches(world, capsys)
    assert rc == 0 and lock.read_text() == good and offline(world, capsys)[0] == 0, out


def test_the_extras_of_a_fork_without_a_derived_entry_are_recorded_and_held(world, capsys):
    """uv locks such a fork's own extras: [declares] records each with the requirements it brings, and an extra's
    locked list edited by hand, or an extra pasted that the fork does not declare, fails CI; `deps patches`
    relocks."""
    import tomllib

    fork = world.forks["nemo-toolkit"].fork
    text = forkworld.fork_pyproject(world, "nemo-toolkit", dependencies=["six>=1.16"])
    assert "\n[tool.hatch.build" in text
    rev = commit(fork, "an extra", {"pyproject.toml": text.replace(
        "\n[tool.hatch.build", '\n[project.optional-dependencies]\ntron = ["idna"]\n\n[tool.hatch.build', 1)})
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text().replace('"nemo-toolkit"', '"nemo-toolkit[tron]"', 1))
    assert main(["deps", "bump", "nemo-toolkit", "--rev", rev, "--project", str(world.project)]) == 0
    index = tomllib.loads((world.project / "patches/nemo-toolkit/index.toml").read_text())
    assert index["declares"]["extras"] == {"tron": ["idna; extra == 'tron'"]}, index["declares"]
    assert offline(world, capsys)[0] == 0
    lock = world.project / "uv.lock"
    good = lock.read_text()
    start, end = block(good, "nemo-toolkit")
    block_text = good[start:end]
    assert "[package.optional-dependencies]\ntron = [" in block_text and '{ name = "idna" }' in block_text, block_text
    edits = {"optional-dependencies tron: expected idna": block_text.replace('    { name = "idna" },\n', "", 1),
             "optional-dependencies evil: expected only the extras the fork declares": block_text.replace(
                 "[package.optional-dependencies]\ntron = [", "[package.optional-dependencies]\nevil = [", 1)}
    for said, edited in edits.items():
        assert edited != block_text, said
        lock.write_text(good[:start] + edited + good[end:])
        rc, out = offline(world, capsys)
        assert rc == 1 and f"[[package]] nemo-toolkit {said}" in out, out
        capsys.readouterr()
        assert main(["deps", "patches", "nemo-toolkit", "--project", str(world.project)]) == 0
        assert lock.read_text() == good, said
