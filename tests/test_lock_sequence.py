"""issue 25's "done when", as one sequence on fixture forks: deps commands, `uv lock` and hand edits, each
leaving a uv.lock whose fork differs from what the fork builds, and after each `deps status` and the CI offline
check (`nemo-rl deps patches --check --offline`, what .ci/run runs) both say so and name the command that fixes it;
that command is run and both are green again, with the environment synced from the lock."""

import tomllib

import forkworld
from fakes import derived_world
from gitfixtures import commit

from nemo_rl.cli import main
from nemo_rl.forks import metadata_check
from nemo_rl.project import lockfile

FIX = "run `nemo-rl deps patches megatron-core`"
OPEN = "requires-dist = ["


def status(world, env, capsys) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["deps", "status", "--check", "--project", str(world.project), "--env", str(env)])
    return rc, capsys.readouterr().out


def offline(world, capsys) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["deps", "patches", "--check", "--offline", "--project", str(world.project)])
    return rc, capsys.readouterr().out


def both_report(world, env, capsys, state, *found):
    """Both checks fail, status in `state`, each naming the fix; the CI check's output names each of `found`."""
    rc, out = status(world, env, capsys)
    assert rc == 1 and f"megatron-core: {state}" in out and FIX in out, out
    rc, out = offline(world, capsys)
    assert rc == 1 and "megatron-core: DRIFT" in out and f"fix: {FIX}" in out, out
    for text in found:
        assert text in out, (text, out)


def fixed(world, env, capsys):
    """The command both checks named, then a sync from the lock: both green, installed = locked."""
    assert main(["deps", "patches", "megatron-core", "--project", str(world.project)]) == 0
    forkworld.uv_run(world, "sync", "--quiet", "--locked", "--extra", "mcore", env_dir=env)
    assert offline(world, capsys)[0] == 0
    rc, out = status(world, env, capsys)
    assert rc == 0 and "megatron-core: ok" in out, out


def edit(path, old, new):
    text = path.read_text()
    assert text.count(old) == 1, (old, text)
    path.write_text(text.replace(old, new))


def locked(world):
    lock = tomllib.loads((world.project / "uv.lock").read_text())
    return next(p for p in lock["package"] if p["name"] == "megatron-core")


def test_no_sequence_of_commands_and_edits_leaves_a_lying_lock_unreported(world, capsys, tmp_path):
    env = tmp_path / "env"
    derived_world(world)
    forkworld.uv_run(world, "sync", "--quiet", "--locked", "--extra", "mcore", env_dir=env)
    assert status(world, env, capsys) == (0, status(world, env, capsys)[1]) and offline(world, capsys)[0] == 0
    pyproject, lock = world.project / "pyproject.toml", world.project / "uv.lock"
    fork = world.forks["megatron-core"].fork

    # 1. the rev edited by hand, then `uv lock --upgrade-package`: the fork builds 0.2.0 and requires six, the
    #    lock still says 0.1.0 without six
    newer = commit(fork, "release 0.2.0, needs six", {"pyproject.toml": forkworld.fork_pyproject(
        world, version="0.2.0", dependencies=["nemo-toolkit", "pytest>=8", "six>=1; python_version < '3.11'",
                                              "six>=1.16; python_version >= '3.11'"])})
    edit(pyproject, lockfile.fork(world.project, "megatron-core").rev, newer)
    forkworld.uv_run(world, "lock", "--quiet", "--upgrade-package", "megatron-core")
    assert locked(world)["version"] == "0.1.0"
    both_report(world, env, capsys, "records stale", "patches/megatron-core/index.toml")
    fixed(world, env, capsys)
    assert locked(world)["version"] == "0.2.0"
    # both requirements of six (split by marker) are locked
    manifest = tomllib.loads(lock.read_text())["manifest"]["dependency-metadata"]
    requires = next(e for e in manifest if e["name"] == "megatron-core")["requires-dist"]
    assert sum(r.startswith("six") for r in requires) == 2, requires

    # 2. uv.lock's fork version edited by hand
    package = '[[package]]\nname = "megatron-core"\nversion = '
    edit(lock, package + '"0.2.0"', package + '"0.3.0"')
    both_report(world, env, capsys, "metadata stale", "uv.lock: [[package]] megatron-core version: expected 0.2.0")
    fixed(world, env, capsys)

    # 3. uv.lock's fork dependencies edited by hand: six left out
    package = locked(world)
    assert {d["name"] for d in package["dependencies"]} >= {"six", "nemo-toolkit"}
    text = lock.read_text()
    start = text.index('[[package]]\nname = "megatron-core"')
    block = text[start:text.index("[[package]]", start + 1)]
    six = next(line for line in block.splitlines() if '{ name = "six"' in line)
    lock.write_text(text.replace(block, block.replace(six + "\n", "")))
    both_report(world, env, capsys, "metadata stale", "[[package]] megatron-core dependencies")
    fixed(world, env, capsys)

    # 4. the requires-dist uv.lock recorded for the entry edited by hand
    text = lock.read_text()
    manifest_at = text.index("[[manifest.dependency-metadata]]\nname = \"megatron-core\"")
    requires_at = text.index(OPEN, manifest_at)
    lock.write_text(text[:requires_at] + 'requires-dist = ["rich", ' + text[requires_at + len(OPEN):])
    both_report(world, env, capsys, "metadata stale", "[[manifest.dependency-metadata]] requires-dist")
    fixed(world, env, capsys)

    # 5. the dependency-metadata entry edited by hand (a requirement the fork does not declare), then `uv lock`
    entry_at = pyproject.read_text().index('[[tool.uv.dependency-metadata]]\nname = "megatron-core"')
    text = pyproject.read_text()
    requires_at = text.index(OPEN, entry_at)
    pyproject.write_text(text[:requires_at] + 'requires-dist = ["rich", ' + text[requires_at + len(OPEN):])
    forkworld.uv_run(world, "lock", "--quiet")
    both_report(world, env, capsys, "metadata stale", "[[tool.uv.dependency-metadata]] megatron-core requires-dist")
    fixed(world, env, capsys)
    assert "rich" not in str(metadata_check.entry(world.project, "megatron-core").requires_dist)

    # 6. a `deps bump` to a fork commit that moves the version again lands a lock that says it
    release = commit(fork, "release 0.4.0", {"pyproject.toml": forkworld.fork_pyproject(
        world, version="0.4.0", dependencies=["nemo-toolkit", "pytest>=8", "six>=1.16"])})
    assert main(["deps", "bump", "megatron-core", "--rev", release, "--project", str(world.project)]) == 0
    assert locked(world)["version"] == "0.4.0"
    assert offline(world, capsys)[0] == 0
    rc, out = status(world, env, capsys)
    assert rc == 1 and "megatron-core: env stale" in out and "uv sync --locked --extra mcore" in out
    forkworld.uv_run(world, "sync", "--quiet", "--locked", "--extra", "mcore", env_dir=env)
    assert status(world, env, capsys)[0] == 0


def test_records_that_agree_offline_but_not_with_the_fork_show_in_what_is_installed(world, capsys, tmp_path):
    """Recorded [declares], entry and lock agree with one another, so the offline check has nothing to see; the
    environment uv syncs from that lock holds the fork's own metadata, and status and verify compare with it."""
    from nemo_rl.forks import declared, fork_cache, metadata_check, records

    env = tmp_path / "env"
    derived_world(world)
    fork = lockfile.fork(world.project, "megatron-core")
    directory = records.records_dir(world.project, "megatron-core")
    base, recs = records.compute(fork_cache.fetched(fork, fork.rev), fork, fork.rev)
    wrong = declared.Declares("0.0.9", ">=3.10", ("pytest>=8",), fork.rev)  # the fork builds 0.1.0, needs nemo-toolkit
    records.write(directory, *records.build(directory, records.read_index(directory), fork, fork.rev, base, recs,
                                            wrong))
    metadata_check.rewrite_pyproject(world.project, "megatron-core", wrong)
    forkworld.uv_run(world, "lock", "--quiet", "--upgrade-package", "megatron-core")
    assert offline(world, capsys)[0] == 0  # nothing offline can prove: the fork is not at hand
    forkworld.uv_run(world, "sync", "--quiet", "--locked", "--extra", "mcore", env_dir=env)
    rc, out = status(world, env, capsys)
    assert rc == 1 and "megatron-core: installed differs" in out
    assert "megatron-core 0.1.0 is installed but uv.lock says 0.0.9" in out and "+nemo-toolkit" in out
    assert FIX in out and "then `uv sync --locked --extra mcore`" in out
    capsys.readouterr()
    assert main(["deps", "verify", "megatron-core", "--project", str(world.project)]) == 1
    out = capsys.readouterr().out
    assert "megatron-core: installed another version: megatron-core 0.1.0 is installed but uv.lock says 0.0.9" in out
    assert "megatron-core: installed requirements differ" in out and "+nemo-toolkit" in out
    assert "nemo-toolkit, which megatron-core requires, is not installed" not in out  # left out on purpose
    assert main(["deps", "patches", "--check", "--project", str(world.project)]) == 1  # online: the fork says so
    fixed(world, env, capsys)
