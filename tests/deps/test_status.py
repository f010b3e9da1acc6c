""""""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import forkworld
import pytest
from fakes import _clone, deps, fake_env, fork_state
from gitfixtures import git

from nemo_rl import uv
from nemo_rl.cli import main
from nemo_rl.deps import status
from nemo_rl.project import develop_state
from nemo_rl.project.develop_state import CheckoutFacts


def status_json(world, capsys, env) -> dict:
    capsys.readouterr()
    assert main(["deps", "status", "--json", "--project", str(world.project), "--env", str(env)]) == 0
    return {row["distribution"]: row for row in json.loads(capsys.readouterr().out)["forks"]}


def test_status_walks_every_state(world, tmp_path, capsys):
    env = tmp_path / "env"
    forkworld.uv_run(world, "venv", "--quiet", str(env))
    rows = status_json(world, capsys, env)
    assert {r["state"] for r in rows.values()} == {"not installed"}
    megatron = world.forks["megatron-core"]
    assert rows["megatron-core"]["pinned_rev"] == rows["megatron-core"]["locked_commit"] == megatron.head

    forkworld.uv_run(world, "sync", "--quiet", "--extra", "mcore", env_dir=env)
    rows = status_json(world, capsys, env)
    assert {r["state"] for r in rows.values()} == {"ok"}
    assert rows["megatron-core"]["installed_commit"] == megatron.head

    # The fork moves; bump re-pins and relocks, so the environment is now behind the lock.
    new_head = forkworld.commit(megatron.fork, "more tokens", {"megatron/core/more.py": "X = 1\n"})
    assert main(["deps", "bump", "megatron-core", "--branch", "nemo-rl/main", "--project", str(world.project)]) == 0
    rows = status_json(world, capsys, env)
    assert rows["megatron-core"]["state"] == "env stale"
    assert rows["megatron-core"]["locked_commit"] == new_head
    assert "uv sync --locked --extra mcore" in rows["megatron-core"]["remedy"]
    assert main(["deps", "status", "--check", "--project", str(world.project), "--env", str(env)]) == 1

    # A plain sync (no --reinstall) sees the locked commit changed and installs it.
    forkworld.uv_run(world, "sync", "--quiet", "--extra", "mcore", env_dir=env)
    rows = status_json(world, capsys, env)
    assert rows["megatron-core"]["state"] == "ok" and rows["megatron-core"]["installed_commit"] == new_head
    assert main(["deps", "status", "--check", "--project", str(world.project), "--env", str(env)]) == 0

    # Editing pyproject's rev by hand without relocking is a stale lock.
    pyproject = world.project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(new_head, megatron.head))
    rows = status_json(world, capsys, env)
    assert rows["megatron-core"]["state"] == "lock stale"
    assert "uv lock --upgrade-package megatron-core" in rows["megatron-core"]["remedy"]
    assert not any("uv.lock" in p for p in rows["megatron-core"]["records_problems"])  # said once, as the state


def test_status_json_schema(world, tmp_path, capsys):
    env = tmp_path / "env"
    forkworld.uv_run(world, "venv", "--quiet", str(env))
    assert main(["deps", "status", "--json", "--project", str(world.project), "--env", str(env)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"schema", "project", "environment", "lock_problem", "forks", "orphaned_records"}
    assert data["schema"] == 2 and data["lock_problem"] is None
    expected = {"distribution", "url", "branch", "pinned_rev", "locked_commit", "installed_commit",
                "installed_version", "upstream_url", "upstream_base", "downstream_commits", "records_problems",
                "developing", "state", "remedy", "environment"}
    for row in data["forks"]:
        assert set(row) == expected
        assert row["state"] in set(status.REMEDIES)
    assert [r["distribution"] for r in data["forks"]] == ["megatron-core", "nemo-toolkit"]


def test_status_refuses_a_directory_that_is_no_environment(world, tmp_path, capsys):
    assert main(["deps", "status", "--project", str(world.project), "--env", str(tmp_path / "nothing")]) == 1
    assert "is not a Python environment" in capsys.readouterr().err


def test_status_text_names_the_remedy(world, tmp_path, capsys):
    env = tmp_path / "env"
    forkworld.uv_run(world, "venv", "--quiet", str(env))
    assert main(["deps", "status", "--project", str(world.project), "--env", str(env)]) == 0
    out = capsys.readouterr().out
    assert "megatron-core: not installed" in out
    assert git(world.forks["nemo-toolkit"].fork, "rev-parse", "HEAD")[:12] in out


def status_check(world, env) -> int:
    return main(["deps", "status", "--check", "--project", str(world.project), "--env", str(env)])


def _dist_info(env: Path, name: str, metadata: bytes | None) -> None:
    info = next(env.glob("lib/python3*/site-packages")) / f"{name}-0.0.1.dist-info"
    info.mkdir()
    (info / "RECORD").write_text("")
    if metadata is not None:
        (info / "METADATA").write_bytes(metadata)


@pytest.mark.parametrize("metadata", [None, b"Version: 0.0.1\n", b"Name: megatron-core\nSummary: \xff\n"],
                         ids=["no-metadata", "no-name", "not-utf8"])
def test_a_fork_install_left_broken_fails_the_check(world, tmp_path, capsys, metadata):
    env = tmp_path / "env"
    forkworld.uv_run(world, "venv", "--quiet", str(env))
    _dist_info(env, "megatron_core", metadata)
    row = status_json(world, capsys, env)["megatron-core"]
    assert row["state"] == "env stale" and "uv sync --locked --extra mcore" in row["remedy"]
    assert status_check(world, env) == 1
    forkworld.uv_run(world, "sync", "--quiet", "--locked", "--extra", "mcore", env_dir=env)  # the fix
    assert status_check(world, env) == 0


def test_status_knows_about_records(world, tmp_path, capsys, monkeypatch):
    """The README's manual recipe (edit rev, relock) without the records step: status says so and how to fix."""
    monkeypatch.chdir(world.project)  # where its fixes run as printed
    env = tmp_path / "env"
    forkworld.uv_run(world, "venv", "--quiet", str(env))
    assert status_check(world, env) == 0
    megatron = world.forks["megatron-core"]
    new_head = forkworld.commit(megatron.fork, "more tokens", {"megatron/core/more.py": "X = 1\n"})
    pyproject = world.project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(megatron.head, new_head))
    forkworld.uv_run(world, "lock", "--quiet", "--upgrade-package", "megatron-core")
    rows = status_json(world, capsys, env)
    assert rows["megatron-core"]["state"] == "records stale"
    assert rows["megatron-core"]["remedy"].startswith("run `nemo-rl deps patches megatron-core`")
    assert any("pinned" in p for p in rows["megatron-core"]["records_problems"])
    assert status_check(world, env) == 1
    assert main(["deps", "patches", "megatron-core", "--project", str(world.project)]) == 0
    assert status_json(world, capsys, env)["megatron-core"]["state"] == "not installed"
    assert status_check(world, env) == 0


def test_status_flags_a_pin_that_is_not_a_full_sha(world, tmp_path, capsys):
    env = tmp_path / "env"
    forkworld.uv_run(world, "venv", "--quiet", str(env))
    megatron = world.forks["megatron-core"]
    pyproject = world.project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(megatron.head, megatron.head[:10]))
    row = status_json(world, capsys, env)["megatron-core"]
    assert row["state"] == "bad pin" and "full 40-hex" in row["remedy"] and "uv lock" not in row["remedy"]
    assert status_check(world, env) == 1


def test_status_fails_when_a_fork_table_is_deleted_but_its_records_remain(world, tmp_path, capsys):
    env = tmp_path / "env"
    forkworld.uv_run(world, "venv", "--quiet", str(env))
    pyproject = world.project / "pyproject.toml"
    text = pyproject.read_text()
    start = text.index("[tool.nemo-rl.forks.nemo-toolkit]")
    pyproject.write_text(text[:start])
    capsys.readouterr()
    assert status_check(world, env) == 1
    assert "patches/nemo-toolkit/: fork: expected [tool.nemo-rl.forks.nemo-toolkit]" in capsys.readouterr().out


def test_a_wrong_lock_and_an_environment_that_differs_are_both_said(world, tmp_path, capsys, monkeypatch):
    """The lock's problem does not hide the environment's: each is named with its own fix, and --check fails."""
    monkeypatch.chdir(world.project)  # where its fixes run as printed
    env = tmp_path / "env"
    megatron = world.forks["megatron-core"]
    forkworld.uv_run(world, "sync", "--quiet", "--extra", "mcore", env_dir=env)
    new_head = forkworld.commit(megatron.fork, "more tokens", {"megatron/core/more.py": "X = 1\n"})
    assert main(["deps", "bump", "megatron-core", "--rev", new_head, "--project", str(world.project)]) == 0
    pyproject = world.project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(new_head, megatron.head))  # a hand edit back, not relocked
    rows = status_json(world, capsys, env)
    assert rows["megatron-core"]["state"] == "lock stale"
    assert "uv lock --upgrade-package megatron-core" in rows["megatron-core"]["remedy"]
    assert rows["megatron-core"]["environment"] == [f"env stale: {status.installed.ENV_STALE}"]
    assert rows["nemo-toolkit"]["state"] == "ok" and rows["nemo-toolkit"]["environment"] == []
    assert main(["deps", "status", "--check", "--project", str(world.project), "--env", str(env)]) == 1
    out = capsys.readouterr().out
    assert "  fix        run `uv lock --upgrade-package megatron-core`" in out
    assert f"  then       env stale: run `{uv.sync_command()}`" in out, out


def test_a_landing_cut_short_names_only_the_fork_it_changes_and_what_moved(world, tmp_path, capsys):
    """Killed after its journal, before any rename: megatron-core's landing is named as not moved yet, and
    nemo-toolkit, which it does not change, is not said to be in it."""
    from nemo_rl.project import journal, state_dir

    env = tmp_path / "env"
    forkworld.uv_run(world, "sync", "--quiet", "--extra", "mcore", env_dir=env)
    moves = ["pyproject.toml", "uv.lock", "patches/megatron-core"]
    staging = world.project / state_dir.STAGING_ROOT / "staging-1-x"
    (staging / "patches").mkdir(parents=True)
    for name in moves[:2]:
        (staging / name).write_text((world.project / name).read_text() + "\n")
    shutil.copytree(world.project / moves[2], staging / moves[2])
    before = {name: journal.digest(world.project / name) for name in moves}
    (staging / journal.JOURNAL).write_text(json.dumps({"version": 1, "moves": moves, "before": before}))
    rows = status_json(world, capsys, env)
    assert rows["megatron-core"]["state"] == "landing interrupted"
    assert "cut short before any of them moved (the project is as before)" in \
        rows["megatron-core"]["remedy"]
    assert rows["nemo-toolkit"]["state"] == "ok"
    assert main(["deps", "status", "--check", "--project", str(world.project), "--env", str(env)]) == 1
    (staging / "uv.lock").rename(world.project / "uv.lock")  # the first rename done
    remedy = status_json(world, capsys, env)["megatron-core"]["remedy"]
    assert "with uv.lock moved and pyproject.toml, patches/megatron-core not (the project mixes" in remedy, remedy


STATES = ["bad pin", "landing interrupted", "lock stale", "records stale", "metadata stale", "checkout unreadable",
          "developing", "checkout gone", "develop not applied"]
CLEAN = dict.fromkeys([*STATES, "not installed"], False)
ROW = status.ForkStatus("megatron-core", "https://forks.nemo-rl.invalid/m.git", "nemo-rl/main", "a" * 40, "a" * 40,
                        "a" * 40, "0.1.0", "https://upstream.nemo-rl.invalid/m.git", "b" * 40, 2, [], None, "ok",
                        None)


def test_nothing_wrong_leaves_the_state_to_the_environment():
    assert status.first_state(CLEAN) is None
    assert status.first_state({**CLEAN, "not installed": True}) == "not installed"


@pytest.mark.parametrize("n", range(len(STATES)))
def test_the_most_fundamental_state_wins(n):
    """Each condition hides every later one: a bad pin before a landing cut short before a stale lock ..."""
    found = status.first_state({**CLEAN, **dict.fromkeys(STATES[n:], True), "not installed": True})
    assert found == STATES[n]
    assert found in status.FAILING and status.REMEDIES[found]


def test_check_fails_on_a_failing_state_a_lock_problem_or_an_orphan():
    assert not status.fails_check([ROW, replace(ROW, state="not installed")], None, [])
    assert status.fails_check([ROW, replace(ROW, state="env stale")], None, [])
    assert status.fails_check([ROW], "uv.lock needs to be updated", [])
    assert status.fails_check([ROW], None, ["patches/gone: no fork table"])


def test_render_shows_the_pins_the_checkout_and_at_most_five_record_problems():
    developing = CheckoutFacts(Path("/work/m"), "c" * 40, 3, dirty=True, rebasing=True)
    row = replace(ROW, state="developing", developing=developing, remedy="run `nemo-rl deps develop --stop x`",
                  records_problems=[f"problem {n}" for n in range(7)], installed_version=None)
    lines = status.render([row], []).splitlines()
    assert lines[0] == "megatron-core: developing"
    assert lines[2] == f"  pinned     {'a' * 12}   locked {'a' * 12}   installed not installed"
    assert lines[4] == (f"  developing /work/m at {'c' * 12}, 3 commit(s) ahead of the pin, dirty, "
                        "REBASING (stopped at a conflict)")
    assert lines[5:10] == [f"  records    problem {n}" for n in range(5)]
    assert lines[10] == "  records    ... and 2 more"
    assert lines[11] == "  fix        run `nemo-rl deps develop --stop x`"
    missing = replace(row, developing=CheckoutFacts(Path("/gone"), None, 0, False, missing=True), records_problems=[])
    assert "  developing /gone (missing)" in status.render([missing], []).splitlines()


def test_a_landing_cut_short_is_the_state_of_the_forks_it_changes_only(tmp_path):
    """A bump of megatron-core cut short says nothing about nemo-toolkit; a journal naming no records, or one that
    cannot be read, may touch any fork."""
    from nemo_rl.forks.records import relative_dir
    from nemo_rl.project.journal import CutShort

    def touches(cut, distribution):
        return cut.touches(relative_dir(distribution))

    bump = CutShort(tmp_path, ("pyproject.toml", "uv.lock", "patches/megatron-core"), (), None)
    assert touches(bump, "megatron-core") and not touches(bump, "nemo-toolkit")
    assert touches(replace(bump, moves=["pyproject.toml"]), "nemo-toolkit")
    assert touches(replace(bump, moves=[], unreadable="cannot read the landing journal"), "nemo-toolkit")


def test_a_landing_cut_short_says_what_moved_and_never_a_move_that_did_not_happen(tmp_path):
    from nemo_rl.project.journal import CutShort

    nothing = CutShort(tmp_path / "s", ("pyproject.toml", "uv.lock", "patches/megatron-core"), (), None)
    said = status.cut_remedy(nothing).format(dist="megatron-core", checkout=None)
    assert "cut short before any of them moved (the project is as before)" in said
    assert f"`rm -rf {tmp_path / 's'}` drops them" in said and "mixes" not in said
    some = replace(nothing, moved=["uv.lock"])
    said = status.cut_remedy(some).format(dist="megatron-core", checkout=None)
    assert "with uv.lock moved and pyproject.toml, patches/megatron-core not (the project mixes" in said
    assert "nemo-rl deps recover" in said


def test_the_environment_beside_a_lock_problem_fails_check_too():
    beside = replace(ROW, state="not installed", environment=("installed differs: x: run `uv sync`",))
    assert status.fails_check([beside], None, [])
    lines = status.render([replace(beside, state="metadata stale", remedy="run `nemo-rl deps patches x`")], [])
    assert lines.splitlines()[-2:] == ["  fix        run `nemo-rl deps patches x`",
                                       "  then       installed differs: x: run `uv sync`"]


def test_a_landing_cut_short_after_every_move_says_the_project_is_whole(tmp_path):
    """Killed while removing its staging copy: every file moved, so nothing mixes; recover removes the copy."""
    from nemo_rl.project.journal import CutShort

    moves = ("pyproject.toml", "uv.lock", "patches/megatron-core")
    said = status.cut_remedy(CutShort(tmp_path / "s", moves, moves, None)).format(dist="megatron-core", checkout=None)
    assert "cut short after every file moved" in said and "the project is whole" in said, said
    assert "mixes" not in said and " and  not" not in said and "nemo-rl deps recover" in said


def test_status_follows_what_the_environment_imports(world, tmp_path, monkeypatch, capsys):
    env = tmp_path / "env"
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    forkworld.uv_run(world, "sync", "--quiet", "--extra", "mcore", env_dir=env)

    def state():
        capsys.readouterr()
        deps(world, "status", "--json", "--env", str(env))
        return {r["distribution"]: r for r in json.loads(capsys.readouterr().out)["forks"]}["megatron-core"]["state"]

    assert deps(world, "develop", "megatron-core") == 0
    (world.project / ".nemo-rl" / "develop.json").unlink()  # `git clean -fdx` or `rm -rf .nemo-rl` takes the state
    assert state() == "developing"  # the overlay still puts the checkout first, so status says so
    assert deps(world, "develop", "--stop", "megatron-core") == 0  # and stop works without the state
    assert state() == "ok"
    assert deps(world, "develop", "megatron-core") == 0
    forkworld.uv_run(world, "venv", "--quiet", "--allow-existing", str(env))
    import shutil

    shutil.rmtree(env)
    forkworld.uv_run(world, "sync", "--quiet", "--extra", "mcore", env_dir=env)  # a rebuilt env runs the pin
    assert state() == "develop not applied"
    assert deps(world, "status", "--check", "--env", str(env)) == 1
def test_status_does_not_say_developing_when_the_overlay_is_gone(world, tmp_path, monkeypatch, capsys):
    env = fake_env(tmp_path / "env")
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    assert deps(world, "develop", "megatron-core") == 0
    assert fork_state(world, env, capsys) == "developing"
    import shutil

    shutil.rmtree(develop_state.shadow_dir(world.project, "megatron-core"))  # what `git clean -fdx` removes
    assert fork_state(world, env, capsys) == "develop not applied"
    shutil.rmtree(world.project / ".nemo-rl")  # `rm -rf .nemo-rl`: the .pth is left, pointing at nothing
    assert fork_state(world, env, capsys) == "not installed"
    assert deps(world, "develop", "--stop", "megatron-core") == 0  # the dead .pth is still removed
    assert not list(env.rglob("*.pth"))
def _status_row(world, env, capsys) -> dict:
    capsys.readouterr()
    assert deps(world, "status", "--json", "--env", str(env)) == 0
    return {r["distribution"]: r for r in json.loads(capsys.readouterr().out)["forks"]}["megatron-core"]


def test_a_deleted_checkout_is_said_to_be_gone(world, tmp_path, monkeypatch, capsys):
    from nemo_rl.doctor import report

    env = fake_env(tmp_path / "env")
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    mine = tmp_path / "my-megatron"
    subprocess.run(["git", "clone", "-q", str(world.forks["megatron-core"].fork), str(mine)], check=True)
    assert deps(world, "develop", "megatron-core", str(mine)) == 0
    assert fork_state(world, env, capsys) == "developing"
    shutil.rmtree(mine)  # the user's own clone, deleted: the overlay's links lead nowhere and the pin runs
    assert develop_state.active_checkout(env, "megatron-core") is None
    row = _status_row(world, env, capsys)
    assert row["state"] == "checkout gone", row
    assert f"the develop checkout {mine} is gone" in row["remedy"]
    assert "deps develop --stop megatron-core" in row["remedy"]
    assert deps(world, "status", "--check", "--env", str(env)) == 1
    assert any(f"its checkout {mine} is gone" in note for note in report.develop_notes(world.project))
    capsys.readouterr()
    assert deps(world, "develop", "megatron-core", str(tmp_path / "another")) == 1
    assert "which is gone" in capsys.readouterr().err
    assert deps(world, "develop", "--stop", "megatron-core") == 0  # the fix it gives works
    assert fork_state(world, env, capsys) == "not installed" and not list(env.rglob("*.pth"))


def test_an_empty_directory_at_the_checkout_is_a_gone_checkout(world, tmp_path, monkeypatch, capsys):
    """The user's clone became an empty directory (a mount that did not come up): no git's raw error."""
    import shutil

    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(fake_env(tmp_path / "env")))
    mine = tmp_path / "my-megatron"
    subprocess.run(["git", "clone", "-q", str(world.forks["megatron-core"].fork), str(mine)], check=True)
    assert deps(world, "develop", "megatron-core", str(mine)) == 0
    shutil.rmtree(mine)
    mine.mkdir()
    capsys.readouterr()
    deps(world, "status")
    out = capsys.readouterr()
    assert "checkout gone" in out.out and "not a git repository" not in out.out + out.err, out
def _rows(world, env, capsys) -> dict:
    capsys.readouterr()
    assert deps(world, "status", "--json", "--env", str(env)) == 0, capsys.readouterr().err
    return {r["distribution"]: r for r in json.loads(capsys.readouterr().out)["forks"]}


def _break(kind: str, clone: Path, worktree: Path) -> None:
    if kind == "main repository moved":
        clone.rename(clone.with_name("clone-moved"))
    elif kind == "empty .git file":
        (worktree / ".git").write_text("")
    else:
        shutil.move(worktree / ".git", worktree.with_name("git-aside"))


@pytest.mark.parametrize("kind", ["main repository moved", "empty .git file", ".git removed"])
def test_a_checkout_git_cannot_read_is_a_state_with_a_fix(world, tmp_path, monkeypatch, capsys, kind):
    """A worktree whose main repository moved, an empty `.git` file, a `.git` moved away: the files are still what
    Python imports, so the fork is "checkout unreadable" (not "gone", not git's raw error), every fork's row is
    shown, --check fails, and the fix given (--stop) works."""
    env = fake_env(tmp_path / "env")
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    clone = _clone(world, tmp_path / "clone")
    worktree = tmp_path / "wtree"
    subprocess.run(["git", "-C", str(clone), "worktree", "add", "-q", str(worktree), "HEAD"], check=True)
    assert deps(world, "develop", "megatron-core", str(worktree)) == 0
    _break(kind, clone, worktree)
    assert develop_state.active_checkout(env, "megatron-core") == worktree  # its files are imported
    rows = _rows(world, env, capsys)
    assert set(rows) == set(world.forks), rows  # the other forks are still reported
    row = rows["megatron-core"]
    assert row["state"] == "checkout unreadable", row
    assert row["developing"]["problem"] and not row["developing"]["missing"]
    assert f"megatron-core is imported from the files of {worktree}" in row["remedy"]
    assert "deps develop --stop megatron-core" in row["remedy"]
    assert ("worktree repair" if kind != ".git removed" else ".git is missing") in row["remedy"]
    assert deps(world, "status", "--env", str(env)) == 0
    assert "(unreadable: " in capsys.readouterr().out
    assert deps(world, "status", "--check", "--env", str(env)) == 1
    capsys.readouterr()
    assert deps(world, "develop", "megatron-core", "--onto", "HEAD") == 1
    err = capsys.readouterr().err
    assert "cannot be rebased" in err and "what to do" in err and "command failed" not in err, err
    shutil.rmtree(develop_state.shadow_dir(world.project, "megatron-core"))  # `git clean -fdx`: the pin runs
    row = _rows(world, env, capsys)["megatron-core"]
    assert row["state"] == "checkout unreadable" and "megatron-core runs the pin" in row["remedy"], row
    assert deps(world, "develop", "--stop", "megatron-core") == 0  # the fix it gives works
    assert develop_state.active_checkout(env, "megatron-core") is None and worktree.is_dir()


def test_a_remedy_made_of_data_is_never_a_format_template(world, tmp_path, capsys):
    """A path or metadata with braces in a remedy built from data is printed as it is, never a crash (exit 3)."""
    from nemo_rl.project import journal, state_dir

    moves = ["uv.lock"]
    staging = world.project / state_dir.STAGING_ROOT / "staging-1-{x}"
    staging.mkdir(parents=True)
    (staging / "uv.lock").write_text((world.project / "uv.lock").read_text() + "\n")
    before = {"uv.lock": journal.digest(world.project / "uv.lock")}
    (staging / journal.JOURNAL).write_text(json.dumps({"version": 1, "moves": moves, "before": before}))
    assert main(["deps", "status", "--project", str(world.project)]) == 0
    assert "staging-1-{x}" in capsys.readouterr().out


def test_status_checks_the_environment_deps_develop_writes(world, capsys, monkeypatch):
    """Run from another environment (a nemo-rl installed elsewhere), status reads the project's own .venv, where
    `uv run` and `deps develop` act; never a loop of fixes that change one environment while it checks another."""
    monkeypatch.delenv("UV_PROJECT_ENVIRONMENT", raising=False)
    forkworld.uv_run(world, "venv", "--quiet", str(world.project / ".venv"))
    capsys.readouterr()
    assert main(["deps", "status", "--json", "--project", str(world.project)]) == 0
    assert json.loads(capsys.readouterr().out)["environment"] == str(world.project / ".venv")


def test_a_broken_develop_state_is_named_with_no_fork_pinned(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0"\nrequires-python = ">=3.10"\n'
                                             "dependencies = []\n[tool.nemo-rl.forks]\n")
    subprocess.run(["uv", "lock", "--offline", "--project", str(tmp_path)], check=True, capture_output=True)
    (tmp_path / ".nemo-rl").mkdir()
    (tmp_path / ".nemo-rl" / "develop.json").write_text("{")
    assert main(["deps", "status", "--check", "--project", str(tmp_path)]) == 1
    assert "develop.json" in capsys.readouterr().err
