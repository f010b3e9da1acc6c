"""Every printed fix, followed: a failure state per row, the command that meets it, the fix it printed run
verbatim in a shell from the project directory, and the first failure gone (a later, other failure is fine; the
same one again is a loop). Rows share one fixture world, built once, each in a copy of its own."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import forkworld
import pytest
from fakes import fake_env
from gitfixtures import commit

from nemo_rl.cli import main
from nemo_rl.forks.records import WHY_PLACEHOLDER
from nemo_rl.project import develop_state, journal, state_dir


@dataclass(frozen=True)
class Row:
    """`setup(world, monkeypatch)` makes the failure; `command(world)` is the argv that meets it; `failure` is the
    first failure's words; the fix is every `command` the printed fix quotes (or the ones `take` picks, when it
    offers a choice), joined with &&. A fix that names something the user must fill in says so in its words:
    `fill` maps each placeholder to a value, and the row checks the rest."""

    name: str
    setup: Callable[[forkworld.World, pytest.MonkeyPatch], object]
    command: Callable[[forkworld.World], list[str]]
    failure: str
    take: tuple[int, ...] | None = None
    fill: dict[str, str] = field(default_factory=dict)
    retry: bool = True  # the fix is a step before the command: run the command again after it
    again: Callable[[forkworld.World], list[str]] | None = None  # what runs after the fix, when not the command


def run_here(world, capsys, argv: list[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def printed_fix(out: str) -> str:
    """The fix as printed: after `what to do:` of an error, or a status row's `fix` line."""
    found = re.search(r"what to do: (.*)", out, re.S) or re.search(r"^\s*fix:?\s+(.*)$", out, re.M)
    assert found, f"no fix printed:\n{out}"
    return found.group(1)


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess:
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # this checkout's nemo-rl and uv
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PATH": path})


def bump_argv(world) -> list[str]:
    return ["deps", "bump", "megatron-core", "--rev", world.forks["megatron-core"].downstream[0]]


STATUS = ["deps", "status", "--check"]


def moved_pin(world, monkeypatch):
    """pyproject.toml names another commit than uv.lock: edited by hand, never relocked."""
    fork = world.forks["megatron-core"]
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text().replace(f'rev = "{fork.head}"', f'rev = "{fork.downstream[0]}"'))


def killed_landing(world, monkeypatch):
    """A bump killed after its journal was written, before uv.lock moved."""
    staging = world.project / state_dir.STAGING_ROOT / "staging-1-a"
    staging.mkdir(parents=True)
    (staging / "uv.lock").write_text((world.project / "uv.lock").read_text())
    before = {"uv.lock": journal.digest(world.project / "uv.lock")}
    (staging / journal.JOURNAL).write_text(json.dumps({"version": 1, "moves": ["uv.lock"], "before": before}))


def killed_landing_then_edited(world, monkeypatch):
    """A killed landing, and uv.lock edited by hand after it: recovering would overwrite the edit."""
    killed_landing(world, monkeypatch)
    with (world.project / "uv.lock").open("a") as lock:
        lock.write("# edited after the landing was cut short\n")


def applied_nowhere(world, monkeypatch):
    """Developed before the project's environment existed, then the environment made without the overlay."""
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(world.root / "env"))
    assert main(["deps", "develop", "megatron-core"]) == 0
    fake_env(world.root / "env")


IDENTITY = ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL")


def developed(world, monkeypatch) -> Path:
    """megatron-core developed, into the project's environment, from the checkout nemo-rl makes under .nemo-rl/;
    committers named."""
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(fake_env(world.root / "env")))
    for key in IDENTITY:
        monkeypatch.setenv(key, "dev" if key.endswith("NAME") else "dev@nemo-rl.invalid")
    assert main(["deps", "develop", "megatron-core"]) == 0
    return develop_state.read(world.project)["megatron-core"].checkout


def checkout_gone(world, monkeypatch):
    import shutil

    shutil.rmtree(developed(world, monkeypatch))


def rebase_under_way(world, monkeypatch):
    """A rebase of the develop checkout stopped at a conflict, left for the user."""
    checkout = developed(world, monkeypatch)
    upstream = world.forks["megatron-core"].upstream
    commit(upstream, "upstream edits the same line", {"megatron/core/tokens.py": "def tokens():\n    return [9]\n"})
    git = ["git", "-C", str(checkout)]
    subprocess.run([*git, "fetch", "-q", "upstream"], check=True)
    assert subprocess.run([*git, "rebase", "upstream/main"], capture_output=True).returncode != 0


def no_identity(world, monkeypatch):
    developed(world, monkeypatch)
    for key in (*IDENTITY, "EMAIL"):
        monkeypatch.delenv(key, raising=False)
    count = int(os.environ.get("GIT_CONFIG_COUNT", "0"))  # after the world's insteadOf settings
    monkeypatch.setenv(f"GIT_CONFIG_KEY_{count}", "user.useConfigOnly")
    monkeypatch.setenv(f"GIT_CONFIG_VALUE_{count}", "true")
    monkeypatch.setenv("GIT_CONFIG_COUNT", str(count + 1))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


def refusing_hook(world, monkeypatch):
    """A pre-rebase hook (core.hooksPath) that refuses every rebase."""
    developed(world, monkeypatch)
    hooks = world.root / "hooks"
    hooks.mkdir()
    (hooks / "pre-rebase").write_text("#!/bin/sh\necho 'rebases wait for the release' >&2\nexit 1\n")
    (hooks / "pre-rebase").chmod(0o755)
    count = int(os.environ.get("GIT_CONFIG_COUNT", "0"))
    monkeypatch.setenv(f"GIT_CONFIG_KEY_{count}", "core.hooksPath")
    monkeypatch.setenv(f"GIT_CONFIG_VALUE_{count}", str(hooks))
    monkeypatch.setenv("GIT_CONFIG_COUNT", str(count + 1))


def merge_under_way(world, monkeypatch):
    """A merge in the develop checkout stopped at a conflict."""
    checkout = developed(world, monkeypatch)
    git = ["git", "-C", str(checkout)]
    conflicted = checkout / "megatron/core/conflict.py"
    for branch, text in (("other", "A\n"), ("-", "B\n")):
        subprocess.run([*git, "switch", "-q", *(["-c"] if branch != "-" else []), branch], check=True)
        conflicted.write_text(text)
        subprocess.run([*git, "add", "."], check=True)
        subprocess.run([*git, "commit", "-qm", text.strip()], check=True)
    assert subprocess.run([*git, "merge", "other"], capture_output=True).returncode != 0


def unsaved_edits(world, monkeypatch):
    checkout = developed(world, monkeypatch)
    (checkout / "megatron/core/feature.py").write_text("FEATURE = 2  # unsaved\n")
    (checkout / "notes.txt").write_text("untracked\n")


def onto_done_before(world, monkeypatch):
    """An earlier --onto made its branch (and left the checkout on it)."""
    developed(world, monkeypatch)
    assert main(ONTO) == 0


def stale_records(world, monkeypatch):
    (world.project / "patches" / "megatron-core" / "index.toml").unlink()


def linked(name: str):
    def setup(world, monkeypatch):
        outside = world.root / "outside" / name
        outside.parent.mkdir()
        (world.project / name).rename(outside)
        (world.project / name).symlink_to(outside)
    return setup


def state_dir_committed(world, monkeypatch):
    """A commit of the project brought files under .nemo-rl/."""
    subprocess.run(["git", "init", "-q", str(world.project)], check=True)
    commit(world.project, "a commit brings .nemo-rl/", {f"{state_dir.STAGING_ROOT}/develop.json": "{}\n"})


def pack_while_developing(world, monkeypatch):
    developed(world, monkeypatch)
    (world.root / "bundle").mkdir()  # after the fix, the pack stops at this (a later refusal) instead of packing


def nameless_package(world, monkeypatch):
    """uv.lock edited by hand: a [[package]] lost its name."""
    path = world.project / "uv.lock"
    path.write_text(path.read_text().replace('[[package]]\nname = "megatron-core"', '[[package]]\nname = 1', 1))


def committed_pyproject_linked(world, monkeypatch):
    """pyproject.toml, committed, then replaced by a link to a device."""
    subprocess.run(["git", "init", "-q", str(world.project)], check=True)
    commit(world.project, "the project", {})
    (world.project / "pyproject.toml").unlink()
    (world.project / "pyproject.toml").symlink_to("/dev/zero")


def upstream_clone(world, monkeypatch):
    """A clone of upstream, which lacks the fork's pinned commit, named as the checkout to develop from."""
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(fake_env(world.root / "env")))
    fork = world.forks["megatron-core"]
    subprocess.run(["git", "clone", "-q", str(fork.upstream), str(world.root / "mine")], check=True)


def killed_pack(world, monkeypatch):
    """What `envs pack` leaves when it is killed: its directory under a .packing- name."""
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(world.root / "venvs"))
    (world.root / "bundle.packing-1").mkdir()


def record_missing_a_fact(world, monkeypatch):
    """A record of patches/ edited by hand: its patch-id line is gone."""
    record = next(p for p in sorted((world.project / "patches" / "megatron-core").iterdir()) if p.name != "index.toml")
    record.write_text("".join(line for line in record.read_text().splitlines(keepends=True)
                              if not line.startswith("patch-id:")))


def env_not_made(world, monkeypatch):
    """The project's environment is an empty directory: `uv sync` never ran."""
    (world.root / "env").mkdir()
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(world.root / "env"))


def records_linked(world, monkeypatch):
    """patches/megatron-core is a link to a copy outside the project (a pull request committed it so)."""
    import shutil

    records = world.project / "patches" / "megatron-core"
    shutil.copytree(records, world.root / "records-elsewhere")
    shutil.rmtree(records)
    records.symlink_to(world.root / "records-elsewhere")


def a_fifo(name: str):
    def setup(world, monkeypatch):
        (world.project / name).unlink()
        os.mkfifo(world.project / name)
    return setup


def state_dir_linked(world, monkeypatch):
    elsewhere = world.root / "elsewhere"
    elsewhere.mkdir()
    (world.project / state_dir.STAGING_ROOT).symlink_to(elsewhere)


def wrong_base(world, monkeypatch):
    """The fork table's base is not the pin's merge base with upstream (an edit by hand)."""
    fork = world.forks["megatron-core"]
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text().replace(f'base = "{fork.base}"', f'base = "{fork.head}"', 1))


def why_note_a_placeholder(world, monkeypatch):
    """Records written again (`deps patches` after a lost index): the why-note is the placeholder."""
    path = world.project / "patches" / "megatron-core" / "index.toml"
    path.write_text(path.read_text().replace(forkworld.WHY, WHY_PLACEHOLDER))


def a_record_a_fifo(world, monkeypatch):
    record = next((world.project / "patches" / "megatron-core").glob("0001-*.patch"))
    record.unlink()
    os.mkfifo(record)



ONTO = ["deps", "develop", "megatron-core", "--onto", "upstream/main"]

ROWS = [
    Row("uv-frozen-in-the-environment", lambda w, mp: mp.setenv("UV_FROZEN", "1"), bump_argv,
        "UV_FROZEN='1' in the environment", retry=False),
    Row("uv-locked-in-the-environment", lambda w, mp: mp.setenv("UV_LOCKED", "1"), bump_argv,
        "UV_LOCKED='1' in the environment", retry=False),
    Row("a-pin-moved-without-a-relock", moved_pin, lambda w: STATUS, "megatron-core: lock stale"),
    Row("a-wrong-base", wrong_base, lambda w: ["deps", "patches", "--check", "--offline"], "base: expected", take=(0,)),
    Row("a-landing-killed", killed_landing, bump_argv, "was cut short"),
    Row("a-landing-killed-then-edited", killed_landing_then_edited, lambda w: ["deps", "recover"],
        "changed in the project since", take=(0,)),
    Row("a-landing-killed-seen-by-status", killed_landing, lambda w: STATUS, "landing interrupted"),
    Row("develop-not-applied", applied_nowhere, lambda w: [*STATUS, "--env", str(w.root / "env")],
        "megatron-core: develop not applied", fill={"<checkout>": ".nemo-rl/develop/megatron-core"}),
    Row("a-fork-left-developed", developed, lambda w: [*STATUS, "--env", str(w.root / "env")],
        "megatron-core: developing"),
    Row("developed-twice", developed, lambda w: ["deps", "develop", "megatron-core"], "is already developed from"),
    Row("a-develop-checkout-gone", checkout_gone, lambda w: ONTO, "is gone"),
    Row("onto-during-a-rebase", rebase_under_way, lambda w: ONTO, "in the middle of a rebase", take=(1,)),
    Row("onto-without-a-committer", no_identity, lambda w: ONTO, "git cannot name a committer"),
    Row("onto-refused-by-a-hook", refusing_hook, lambda w: ONTO, "refused the rebase", take=(0,)),
    Row("onto-during-a-merge", merge_under_way, lambda w: ONTO, "a merge is under way", take=(-1,)),
    Row("onto-with-unsaved-edits", unsaved_edits, lambda w: ONTO, "has uncommitted changes and untracked", take=(0,)),
    Row("onto-again-over-its-branch", onto_done_before, lambda w: ONTO, "already has the branch", take=(-2, -1)),
    Row("records-gone", stale_records, lambda w: STATUS, "megatron-core: records stale", take=(0,)),
    Row("uv-lock-a-link", linked("uv.lock"), bump_argv, "is a symbolic link"),
    Row("nemo-rl-dir-committed", state_dir_committed, bump_argv, "file(s) git tracks", take=(0,)),
    Row("pack-while-developing", pack_while_developing, lambda w: ["envs", "pack", "BASE", str(w.root / "bundle")],
        "a fork is under `nemo-rl deps develop`"),
    Row("uv-lock-a-package-without-a-name", nameless_package, bump_argv, "entries without a name",
        take=(1,)),
    Row("pyproject-a-link", committed_pyproject_linked, lambda w: STATUS, "is a symbolic link to /dev/zero",
        fill={"COMMIT": "HEAD"}),
    Row("develop-from-a-clone-of-upstream", upstream_clone,
        lambda w: ["deps", "develop", "megatron-core", str(w.root / "mine")], "lacks the pinned commit", take=(0,)),
    Row("a-half-made-pack", killed_pack,
        lambda w: ["envs", "build", "BASE", "--from", str(w.root / "bundle.packing-1")], "is an unfinished pack",
        fill={"PY_EXECUTABLE": "BASE", " DIR": " ../bundle"},
        again=lambda w: ["envs", "build", "BASE", "--from", str(w.root / "bundle")]),
    Row("a-record-missing-a-fact", record_missing_a_fact, lambda w: ["deps", "patches", "--check", "--offline"],
        "is missing patch-id"),
    Row("develop-before-the-environment", env_not_made, lambda w: ["deps", "develop", "megatron-core"],
        "has no site-packages"),
    Row("records-a-link", records_linked, lambda w: ["deps", "patches", "--check", "--offline"],
        "is a symbolic link", take=(0, 2)),
    Row("a-develop-checkout-gone-seen-by-status", checkout_gone, lambda w: [*STATUS, "--env", str(w.root / "env")],
        "megatron-core: checkout gone", take=(0,)),
    Row("uv-lock-a-fifo", a_fifo("uv.lock"), lambda w: ["deps", "status"], "is not a regular file (a FIFO)"),
    Row("nemo-rl-dir-a-link", state_dir_linked, bump_argv, "is a symbolic link", take=(0,)),
    Row("the-why-note-a-placeholder", why_note_a_placeholder, lambda w: ["deps", "patches", "--check", "--offline"],
        "found the placeholder", take=(1,),
        fill={"$EDITOR": "sed -i 's/TODO: say what.*needs it\\./It adds tokens./'"}),
    Row("a-record-a-fifo", a_record_a_fifo, lambda w: ["deps", "patches", "--check", "--offline"],
        "found a FIFO"),
    Row("a-record-a-fifo-seen-by-status", a_record_a_fifo, lambda w: STATUS, "megatron-core: records stale"),
]


HOSTILE_DIR = "victim $(touch PWNED)"  # an unquoted path in a fix splits at the space onto `victim`, or runs touch


@pytest.fixture
def fixture_world(world_template, tmp_path, monkeypatch):
    """A copy of the session's fixture world (built once, about 3 s) under HOSTILE_DIR, with the project as the
    working directory."""
    (tmp_path / "victim").write_text("not the project's\n")
    w = forkworld.copy_world(world_template, tmp_path / HOSTILE_DIR / "world")
    forkworld.apply_env(w, monkeypatch)
    monkeypatch.chdir(w.project)
    return w


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_the_printed_fix_makes_its_failure_go(fixture_world, capsys, monkeypatch, row):
    world = fixture_world
    row.setup(world, monkeypatch)
    code, out = run_here(world, capsys, row.command(world))
    assert code != 0 and row.failure in out, out
    fix = printed_fix(out)
    commands = re.findall(r"`([^`]+)`", fix)
    commands = [commands[i] for i in row.take] if row.take is not None else commands
    assert commands, f"the fix names no command: {fix}"
    line = " && ".join(commands)
    for placeholder, value in row.fill.items():
        assert placeholder in line, f"{placeholder} is not in the fix: {fix}"
        line = line.replace(placeholder, value)
    done = shell(line, world.project)
    assert done.returncode == 0 and row.failure not in done.stdout + done.stderr, (line, done.stdout + done.stderr)
    victim = world.root.parent.parent / "victim"
    assert victim.read_text() == "not the project's\n" and not list(world.root.parent.parent.rglob("PWNED")), line
    if row.retry:
        code, again = run_here(world, capsys, (row.again or row.command)(world))
        assert row.failure not in again, f"the fix `{line}` left the same failure:\n{again}"


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_a_fix_printed_away_from_the_project_works_from_there(fixture_world, capsys, monkeypatch, row):
    """Run with --project from another directory, the printed fix goes there first, and works pasted here."""
    world = fixture_world
    row.setup(world, monkeypatch)
    monkeypatch.chdir(world.root)
    argv = row.command(world)
    argv = argv if "--project" in argv else [*argv, "--project", str(world.project)]
    code, out = run_here(world, capsys, argv)
    assert code != 0 and row.failure in out, out
    commands = re.findall(r"`([^`]+)`", printed_fix(out))
    assert commands and commands[0].startswith("cd "), out
    if row.take is not None:
        commands = [commands[0], *(commands[i + 1 if i >= 0 else i] for i in row.take)]
    line = " && ".join(commands)
    for placeholder, value in row.fill.items():
        line = line.replace(placeholder, value)
    done = shell(line, world.root)
    assert done.returncode == 0 and row.failure not in done.stdout + done.stderr, (line, done.stdout + done.stderr)
