"""uv.lock never lies about a fork: a hand edit of the fork's locked dependencies (an extra, a marker, another
platform's dependency) fails the offline CI check on any machine and `deps patches` relocks it; an edit made in
another terminal while a command runs is never landed over; an entry spelled differently is rewritten in place.
Real fork fixtures and real uv (tests/forkworld.py)."""

from __future__ import annotations

import forkworld
from fakes import derived_world
from gitfixtures import commit

from nemo_rl.cli import main
from nemo_rl.forks import installed_fork, metadata_check
from nemo_rl.project import lockfile

DEPS = ["nemo-toolkit", "pytest>=8", "six>=1.16", "urllib3[socks]>=2", "idna; platform_machine == 'aarch64'"]
NARROWED = '{ name = "six", marker = "python_full_version < \'3\'" }'


def offline(world, capsys) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["deps", "patches", "--check", "--offline", "--project", str(world.project)])
    return rc, capsys.readouterr().out


def patches(world, capsys) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["deps", "patches", "megatron-core", "--project", str(world.project)])
    captured = capsys.readouterr()
    return rc, captured.out + captured.err


def fork_with_extras(world) -> None:
    """megatron-core's pin moved to a commit requiring an extra and an aarch64-only package, and relocked."""
    derived_world(world)
    fork = world.forks["megatron-core"].fork
    new = commit(fork, "more deps", {"pyproject.toml": forkworld.fork_pyproject(world, dependencies=DEPS)})
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text().replace(lockfile.fork(world.project, "megatron-core").rev, new))
    assert main(["deps", "patches", "megatron-core", "--project", str(world.project)]) == 0


def block(text: str, name: str = "megatron-core") -> tuple[int, int]:
    """Where uv.lock's [[package]] of `name` starts and ends (the file's end for the last one)."""
    start = text.index(f'[[package]]\nname = "{name}"')
    end = text.find("[[package]]", start + 1)
    return start, end if end >= 0 else len(text)



def synced_status(world, tmp_path, capsys):
    """An environment synced from the project's uv.lock as it stands, and `deps status --check` on it, which fails
    (the lie is installed): the environment and what status printed."""
    env = tmp_path / "env"
    forkworld.uv_run(world, "sync", "--quiet", "--locked", "--extra", "mcore", env_dir=env)
    capsys.readouterr()
    assert main(["deps", "status", "--check", "--project", str(world.project), "--env", str(env)]) == 1
    return env, capsys.readouterr().out

def test_a_hand_edited_fork_dependency_fails_ci_and_deps_patches_relocks(world, capsys, tmp_path):
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


def test_an_edit_in_another_terminal_during_a_relock_is_kept(world, capsys, monkeypatch):
    fork_with_extras(world)
    lock = world.project / "uv.lock"
    text = lock.read_text()
    start, end = block(text)
    lied = text[:start] + text[start:end].replace('{ name = "six" }', NARROWED) + text[end:]
    lock.write_text(lied)
    from nemo_rl.deps import patches as patches_verb

    real = patches_verb.uv.lock
    path = world.project / "pyproject.toml"

    def other_terminal(*args, **kwargs):
        # `uv add` in another terminal while the relock runs: it takes no nemo-rl lock
        path.write_text(path.read_text().replace("dependencies = []", 'dependencies = ["colorama"]', 1))
        return real(*args, **kwargs)

    monkeypatch.setattr(patches_verb.uv, "lock", other_terminal)
    rc, out = patches(world, capsys)
    assert rc == 1 and "pyproject.toml changed" in out and "nothing landed" in out, out
    assert 'dependencies = ["colorama"]' in path.read_text() and lock.read_text() == lied
    monkeypatch.setattr(patches_verb.uv, "lock", real)
    assert offline(world, capsys)[0] == 1  # the lie is still named


def test_an_entry_spelled_differently_is_named_and_rewritten_in_place(world, capsys):
    derived_world(world)
    path = world.project / "pyproject.toml"
    text = path.read_text()
    header = '[[tool.uv.dependency-metadata]]\nname = "megatron-core"'
    assert text.count(header) == 1
    path.write_text(text.replace(header, '[[tool.uv.dependency-metadata]]\nname = "Megatron_Core"'))
    rc, out = offline(world, capsys)
    assert rc == 1 and "'Megatron_Core' (the same distribution spelled differently)" in out, out
    rc, out = patches(world, capsys)
    assert rc == 0, out
    assert path.read_text().count("[[tool.uv.dependency-metadata]]") == text.count("[[tool.uv.dependency-metadata]]")
    assert header in path.read_text() and offline(world, capsys)[0] == 0


def test_ci_prints_the_declares_a_change_edits_and_passes_without_history(tmp_path):
    """The offline check cannot prove [declares] (a consistent fake passes it): .ci/run shows a reviewer each
    change to it against the merge base, read from the parsed TOML (a header spelled another valid way is the
    same table), and a pin moved with [declares] kept; it never fails, with or without the history."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    repo = tmp_path / "clone"
    (repo / ".ci").mkdir(parents=True)
    shutil.copy2(Path(__file__).resolve().parent.parent / ".ci/declares-changes", repo / ".ci/declares-changes")
    index = repo / "patches/megatron-core/index.toml"
    index.parent.mkdir(parents=True)

    def git(*args: str) -> str:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", *args], cwd=repo,
                              check=True, capture_output=True, text=True).stdout

    def declares_changes() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(repo / ".ci/declares-changes")], capture_output=True, text=True)

    git("init", "-q", "-b", "main")
    assert "no merge base" in declares_changes().stdout and declares_changes().returncode == 0  # no commit yet
    index.write_text('pinned = "aaa"\n\n[declares]\nversion = "0.1.0"\nrequires-dist = ["six"]\n\n[other]\nx = 1\n')
    git("add", "-A")
    git("commit", "-qm", "base")
    git("checkout", "-qb", "pr")
    index.write_text('pinned = "bbb"\n\n[declares]\nversion = "0.1.0"\nrequires-dist = ["six", "torch"]\n\n'
                     '[other]\nx = 2\n')
    git("commit", "-qam", "a pr")
    found = declares_changes()
    assert found.returncode == 0
    assert "  patches/megatron-core/index.toml: requires-dist: +'torch'" in found.stdout, found.stdout
    assert "pinned" not in found.stdout and "x = " not in found.stdout and "version" not in found.stdout
    for header in (" [declares]", "[ declares ]", "[declares]  # reviewed", '["declares"]'):
        index.write_text(f'pinned = "aaa"\n\n{header}\nversion = "0.9.0"\nrequires-dist = ["six"]\n')
        found = declares_changes()
        assert "  patches/megatron-core/index.toml: version: '0.1.0' -> '0.9.0'" in found.stdout, (header, found)
    index.write_text('pinned = "ccc"\n\n[declares]\nversion = "0.1.0"\nrequires-dist = ["six"]\n')
    found = declares_changes()
    assert "pinned moved ('aaa' -> 'ccc') and [declares] did not" in found.stdout, found.stdout
    # an empty list against none (a fork's records added or removed) is no reordering
    other = repo / "patches/nemo-toolkit/index.toml"
    other.parent.mkdir(parents=True)
    other.write_text('pinned = "ddd"\n\n[declares]\nversion = "0.1.0"\nrequires-dist = []\n')
    found = declares_changes()
    assert "  patches/nemo-toolkit/index.toml: requires-dist: added (an empty list)" in found.stdout, found.stdout
    assert "reordered" not in found.stdout, found.stdout
    shutil.rmtree(other.parent)
    index.write_text("pinned = [\n")
    assert "does not parse as TOML" in declares_changes().stdout
    git("checkout", "-q", "--", ".")
    import os

    def based(name: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(repo / ".ci/declares-changes")], capture_output=True, text=True,
                              env={**os.environ, "NEMO_RL_CI_BASE": name})

    # a base that is HEAD itself compares nothing committed, and says so; git options are no base at all
    for name in ("pr", "HEAD"):
        found = based(name)
        assert f"the base {name!r} is HEAD itself" in found.stdout and "torch" not in found.stdout, (name, found)
    for name in ("--octopus", "--independent", "no-such-ref"):  # never main quietly instead
        found = based(name)
        assert found.returncode == 0 and f"NEMO_RL_CI_BASE={name!r} has no merge base" in found.stdout, (name, found)
    git("checkout", "-q", "main")
    found = declares_changes()
    assert "is HEAD itself" in found.stdout and "declares] changed" not in found.stdout  # nothing changed


def test_a_locked_version_the_fork_refuses_is_named_with_its_cause(world, capsys, tmp_path):
    """uv checks neither a git package's locked metadata nor what an override does to it: six 1.15.0 locked for
    a fork requiring six>=1.16 passes `uv lock --check`, and `uv sync --locked` installs it."""
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
    assert "fix: megatron-core: edit the [tool.uv] override-dependencies entry named above" in out, out
    env, out = synced_status(world, tmp_path, capsys)
    assert "fix        remove or widen the override-dependencies entry named above" in out, out
    found = [str(p) for p in installed_fork.problems(world.project, env, "megatron-core")]
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


def test_a_transitive_version_its_dependent_refuses_is_named_by_status(world, capsys, tmp_path):
    """uv.lock records no specifier for a registry package's own requirements: pysocks 1.5.7 pasted in (urllib3[socks],
    which megatron-core requires, refuses it) passes `uv lock --check --offline`, `uv lock --check` and the offline
    CI check, and `uv sync --locked` installs it. The installed metadata holds the specifier: status names it."""
    fork_with_extras(world)
    lock, path = world.project / "uv.lock", world.project / "pyproject.toml"
    good, pyproject = lock.read_text(), path.read_text()
    path.write_text(pyproject.replace("[tool.uv]\n", '[tool.uv]\noverride-dependencies = ["pysocks==1.5.7"]\n', 1))
    forkworld.uv_run(world, "lock", "--quiet")  # a real [[package]] for pysocks 1.5.7, to paste
    overridden = lock.read_text()
    path.write_text(pyproject)
    start = overridden.index('[[package]]\nname = "pysocks"')
    pysocks = overridden[start:overridden.index("[[package]]", start + 1)]
    g = good.index('[[package]]\nname = "pysocks"')
    lock.write_text(good[:g] + pysocks + good[good.index("[[package]]", g + 1):])
    forkworld.uv_run(world, "lock", "--check", "--offline")  # uv does not catch it (raises if it ever does)
    assert offline(world, capsys)[0] == 0  # nor can the offline check: nothing in uv.lock says what urllib3 needs
    env, out = synced_status(world, tmp_path, capsys)
    assert "megatron-core: installed differs" in out, out
    urllib3 = lockfile.locked_packages(world.project)["urllib3"].version
    said = f"pysocks 1.5.7 is installed but urllib3 {urllib3} (which megatron-core pulls in) requires pysocks"
    assert said in out and "!=1.5.7" in out.split(said)[1].split(":")[0], out
    assert "run `uv lock --upgrade-package pysocks`" in out
    lock.write_text(good)  # the committed lock, synced again: nothing refused
    forkworld.uv_run(world, "sync", "--quiet", "--locked", "--extra", "mcore", env_dir=env)
    assert not installed_fork.problems(world.project, env, "megatron-core")


def _moved_pin_kept_declares(world) -> str:
    """F1: a new fork commit (0.2.0, requires idna) pinned by hand in pyproject.toml and index.toml, relocked with
    `uv lock --upgrade-package`, the index's digest pasted: [declares] (and so uv.lock) still says 0.1.0."""
    from nemo_rl.forks import record_files

    derived_world(world)
    fork = world.forks["megatron-core"].fork
    old = lockfile.fork(world.project, "megatron-core").rev
    new = commit(fork, "0.2.0", {"pyproject.toml": forkworld.fork_pyproject(
        world, version="0.2.0", dependencies=["nemo-toolkit", "pytest>=8", "idna"])})
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text().replace(old, new))
    forkworld.uv_run(world, "lock", "--quiet", "--upgrade-package", "megatron-core")
    directory = world.project / "patches/megatron-core"
    index_path = directory / "index.toml"
    index_path.write_text(index_path.read_text().replace(f'pinned = "{old}"', f'pinned = "{new}"'))
    index = record_files.read_index(directory)
    index_path.write_text(index_path.read_text().replace(str(index.digest), index.expected_digest()))
    return new


def test_a_pin_moved_with_the_old_declares_fails_the_offline_check(world, capsys):
    new = _moved_pin_kept_declares(world)
    assert lockfile.locked_packages(world.project)["megatron-core"].version == "0.1.0"  # uv.lock lies
    rc, out = offline(world, capsys)
    assert rc == 1, out
    assert f"declares commit: expected {new} (the pin" in out, out
    assert "pinned: expected " in out and "(the last [[commit]]" in out, out
    rc, out = patches(world, capsys)  # the one command reads the fork at the new pin
    assert rc == 0, out
    assert lockfile.locked_packages(world.project)["megatron-core"].version == "0.2.0"
    assert offline(world, capsys)[0] == 0


def test_bump_and_patches_refuse_over_a_landing_cut_short(world, capsys):
    """A landing killed after pyproject.toml moved: a bump or `deps patches` run over it would read the half-moved
    pins and land over them (and `deps recover` then refuses the newer files); each names `deps recover`."""
    import json

    from nemo_rl.project import journal, state_dir

    rev = lockfile.fork(world.project, "megatron-core").rev
    staging = world.project / state_dir.STAGING_ROOT / "staging-1-a"
    staging.mkdir(parents=True)
    (staging / "uv.lock").write_text((world.project / "uv.lock").read_text())
    (staging / journal.JOURNAL).write_text(json.dumps({"moves": ["pyproject.toml", "uv.lock"], "before": {
        name: journal.digest(world.project / name) for name in ("pyproject.toml", "uv.lock")}}))
    for args in (["patches"], ["bump", "megatron-core", "--rev", rev], ["bump", "megatron-core", "--rev", rev,
                                                                          "--dry-run"]):
        capsys.readouterr()
        assert main(["deps", *args, "--project", str(world.project)]) == 1, args
        captured = capsys.readouterr()
        said = captured.out + captured.err
        assert "was cut short" in said and "nemo-rl deps recover" in said, (args, said)
    assert main(["deps", "recover", "--project", str(world.project)]) == 0
    assert main(["deps", "patches", "--project", str(world.project)]) == 0


def test_a_fork_without_a_derived_entry_is_checked_against_its_declares(world, capsys, tmp_path):
    """nemo-toolkit has no [[tool.uv.dependency-metadata]] entry: uv locks the metadata it builds itself, and a hand
    edit of its locked version or dependencies is caught against [declares] and relocked by `deps patches`."""
    import tomllib

    fork = world.forks["nemo-toolkit"].fork
    rev = commit(fork, "require six", {"pyproject.toml": forkworld.fork_pyproject(
        world, "nemo-toolkit", dependencies=["six>=1.16"])})
    assert main(["deps", "bump", "nemo-toolkit", "--rev", rev, "--project", str(world.project)]) == 0
    assert metadata_check.entry(world.project, "nemo-toolkit") is None
    index = tomllib.loads((world.project / "patches/nemo-toolkit/index.toml").read_text())
    assert index["declares"] == {"commit": rev, "version": "0.1.0", "requires-python": ">=3.10",
                                 "requires-dist": ["six>=1.16"]}
    assert offline(world, capsys)[0] == 0
    lock = world.project / "uv.lock"
    good = lock.read_text()
    start, end = block(good, "nemo-toolkit")
    text = good[start:end]
    assert 'version = "0.1.0"' in text and '{ name = "six" }' in text, text
    edits = {"version: expected 0.1.0": text.replace('version = "0.1.0"', 'version = "0.7.0"', 1),
             "dependencies: expected six": "\n".join(line for line in text.splitlines()
                                                      if '{ name = "six" }' not in line) + "\n"}
    for said, edited in edits.items():
        lock.write_text(good[:start] + edited + good[end:])
        rc, out = offline(world, capsys)
        assert rc == 1 and f"[[package]] nemo-toolkit {said}" in out, out
        assert "patches/nemo-toolkit/index.toml [declares]" in out and "derived" not in out, out
        capsys.readouterr()
        rc = main(["deps", "patches", "nemo-toolkit", "--project", str(world.project)])
        out = capsys.readouterr().out
        assert rc == 0 and "relocked" in out and "[declares]" in out, out
        assert lock.read_text() == good, said
        assert offline(world, capsys)[0] == 0
    # synced from the lie: status names the relock, and no entry that does not exist
    lock.write_text(good[:start] + edits["version: expected 0.1.0"] + good[end:])
    env, out = synced_status(world, tmp_path, capsys)
    mine = out.split("nemo-toolkit:", 1)[-1]
    assert "nemo-rl deps patches nemo-toolkit" in mine and "dependency-metadata" not in mine, out
    assert "derived" not in mine, out


def test_a_fork_source_edited_in_uv_lock_is_caught_and_relocked(world, capsys):
    """uv fetches a git package from the source uv.lock names, and `uv lock --check` never compares it with
    [tool.uv.sources]: another host, or a subdirectory added, with the commit kept, passed CI."""
    lock = world.project / "uv.lock"
    good = lock.read_text()
    rev = lockfile.fork(world.project, "nemo-toolkit").rev
    url = lockfile.fork(world.project, "nemo-toolkit").url
    assert f'{url}?rev={rev}#{rev}' in good
    for edited in (f"{url.removesuffix('.git')}-evil.git?rev={rev}#{rev}", f"{url}?rev={rev}&subdirectory=sub#{rev}"):
        lock.write_text(good.replace(f"{url}?rev={rev}#{rev}", edited))
        rc, out = offline(world, capsys)
        assert rc == 1 and "nemo-toolkit source" in out and edited.split("#")[0] in out, out
        assert main(["deps", "status", "--check", "--project", str(world.project)]) == 1
        assert "nemo-toolkit: lock stale" in capsys.readouterr().out
        assert main(["deps", "patches", "nemo-toolkit", "--project", str(world.project)]) == 0
        assert "relocked" in capsys.readouterr().out
        assert lock.read_text() == good, edited


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


def test_the_projects_own_locked_edge_to_a_fork_edited_by_hand_fails_ci_and_deps_patches_relocks(world, capsys):
    """uv checks neither the project's locked edges to a fork nor their markers: deleted, or given a marker false on
    one Python no sample names, `uv sync --locked --extra mcore` installs no megatron-core."""
    derived_world(world)
    lock = world.project / "uv.lock"
    good = lock.read_text()
    start, end = block(good, "fixture-project")
    edge = '    { name = "megatron-core" },\n'
    assert good[start:end].count(edge) == 1, good[start:end]
    for edited, said in ((good[start:end].replace(edge, ""), "megatron-core among them"),
                         (good[start:end].replace(edge, edge.replace(
                             " }", ", marker = \"python_full_version != 'v3.11.7'\" }")), "edited by hand")):
        lock.write_text(good[:start] + edited + good[end:])
        rc, out = offline(world, capsys)
        assert rc == 1 and "[[package]] fixture-project optional-dependencies mcore" in out and said in out, out
        rc, out = patches(world, capsys)
        assert rc == 0 and "relocked" in out, out
        assert lock.read_text() == good
        assert offline(world, capsys)[0] == 0
