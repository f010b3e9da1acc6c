"""A fork commit that starts importing a new package: declared, it is locked with the pin; undeclared, verify fails
until it is added (the derived entry's add list)."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import http.server
import os
import shutil
import threading
import zipfile

import forkworld
import pytest
from gitfixtures import commit, write

from nemo_rl.cli import main
from nemo_rl.deps import verify
from nemo_rl.errors import NemoRLError
from nemo_rl.process import run
from nemo_rl.project import lockfile
from nemo_rl.project.model import Project


@pytest.fixture
def wheels(tmp_path, monkeypatch):
    """A local directory of wheels (no network): tinydep 1.0, a pure-Python package built here."""
    source = tmp_path / "tinydep-src"
    write(source, {
        "pyproject.toml": '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
                          '[project]\nname = "tinydep"\nversion = "1.0"\n',
        "tinydep/__init__.py": "VALUE = 1\n",
    })
    out = tmp_path / "wheels"
    run([forkworld.uv_bin(), "build", "--wheel", "--quiet", "--out-dir", str(out), str(source)])
    monkeypatch.setenv("UV_FIND_LINKS", str(out))
    return out


def fork_commit(world, message, dependencies, body):
    fork = world.forks["megatron-core"].fork
    pyproject = (fork / "pyproject.toml").read_text()
    start = pyproject.index("requires-python")
    head = pyproject[:start] + f"dependencies = {dependencies!r}\n".replace("'", '"') + pyproject[start:]
    head = head.replace("dependencies = [", "dependencies = [", 1)
    if pyproject.count("dependencies = ") > 0:
        head = pyproject.split("dependencies = ")[0] + f"dependencies = {dependencies!r}\n".replace("'", '"') + \
            pyproject.split("dependencies = ", 1)[1].split("\n", 1)[1]
    return commit(fork, message, {"pyproject.toml": head, "megatron/core/__init__.py": body})


def test_a_module_the_fork_imports_undeclared_fails_verify_until_added(world, wheels, capsys):
    forkworld.derive_metadata(world, {})
    new = fork_commit(world, "feat: use tinydep", [], 'import tinydep\nVERSION = "0.1.0"\n')  # not declared
    assert main(["deps", "bump", "megatron-core", "--rev", new, "--project", str(world.project)]) == 0
    capsys.readouterr()
    assert main(["deps", "verify", "megatron-core", "--project", str(world.project)]) == 1
    out = capsys.readouterr().out
    assert "import megatron.core: FAILED: ModuleNotFoundError" in out
    assert 'add { requirement = "tinydep", why = "<what imports it>" } to add = [...] in ' \
           "[tool.nemo-rl.forks.megatron-core]" in out and "`nemo-rl deps patches megatron-core`" in out

    forkworld.derive_metadata(world, {}, {"tinydep>=1.0": "megatron.core imports it and does not declare it"})
    assert main(["deps", "verify", "megatron-core", "--project", str(world.project)]) == 0
    out = capsys.readouterr().out
    assert "import megatron.core: ok" in out
    # verifying one fork installs its closure only: the other fork is left out, and said so
    assert "skipped nemo-toolkit: not part of verifying megatron-core" in out


def test_a_requirement_the_fork_declares_is_locked_with_the_pin(world, wheels, capsys):
    forkworld.derive_metadata(world, {})
    new = fork_commit(world, "feat: use tinydep", ["tinydep>=1.0"], 'import tinydep\nVERSION = "0.1.0"\n')
    capsys.readouterr()
    assert main(["deps", "bump", "megatron-core", "--rev", new, "--project", str(world.project)]) == 0
    out = capsys.readouterr().out
    assert "+ tinydep>=1.0" in out and "NOT COVERED" not in out
    # a package the lock did not hold needs the index: uv's offline lock (or its failure) is not kept
    assert "(locked online: the offline lock was thrown away: " in out and "locked offline" not in out
    assert "tinydep" in Project.read(world.project).packages
    assert main(["deps", "verify", "megatron-core", "--project", str(world.project)]) == 0

    dropped = fork_commit(world, "drop tinydep", [], 'VERSION = "0.1.0"\n')
    assert main(["deps", "bump", "megatron-core", "--rev", dropped, "--project", str(world.project)]) == 0
    out = capsys.readouterr().out
    # the entry changed, yet every package left is locked as it was: offline gives the online lock
    assert "- tinydep>=1.0" in out and "(locked offline: " in out and "tinydep: removed (was 1.0)" in out
    assert "tinydep" not in Project.read(world.project).packages
    forkworld.uv_run(world, "lock", "--check")  # what an online lock gives


@pytest.mark.parametrize("verb", [["bump", "megatron-core", "--rev", "NEW"], ["patches", "megatron-core"]])
def test_a_uv_toml_is_refused_where_a_staging_copy_locks(world, capsys, verb):
    """uv reads a project's uv.toml instead of pyproject.toml's [tool.uv] (a derived entry is lost with it), and
    from a staging copy its relative paths name other directories: bump and patches refuse it, naming the fix."""
    (world.project / "uv.toml").write_text('find-links = ["wheels"]\n')
    before = world.files()
    new = fork_commit(world, "next", [], 'VERSION = "0.1.0"\n')
    assert main(["deps", *[new if a == "NEW" else a for a in verb], "--project", str(world.project)]) == 1
    err = capsys.readouterr().err
    assert f"{world.project / 'uv.toml'} exists: uv reads it instead of pyproject.toml's [tool.uv]" in err
    assert "~/.config/uv/uv.toml" in err and world.files() == before


@pytest.mark.parametrize("verb", [["bump", "megatron-core", "--rev", "NEW"], ["patches", "megatron-core"]])
def test_a_relative_path_source_is_refused_where_a_staging_copy_locks(world, tmp_path, capsys, verb):
    path = world.project / "pyproject.toml"
    source = '[tool.uv.sources]\nlocal = { path = "../x" }\n'
    path.write_text(path.read_text().replace("[tool.uv.sources]\n", source, 1))
    before = world.files()
    new = fork_commit(world, "next", [], 'VERSION = "0.1.0"\n')
    assert main(["deps", *[new if a == "NEW" else a for a in verb], "--project", str(world.project)]) == 1
    err = capsys.readouterr().err
    assert "[tool.uv.sources] local is the relative path '../x'" in err and "absolute path" in err
    assert world.files() == before


def test_a_workspace_is_refused_where_a_staging_copy_locks(world, capsys):
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text() + '\n[tool.uv.workspace]\nmembers = ["packages/*"]\n')
    before = world.files()
    new = fork_commit(world, "next", [], 'VERSION = "0.1.0"\n')
    assert main(["deps", "bump", "megatron-core", "--rev", new, "--project", str(world.project)]) == 1
    assert "declares a uv workspace, which `deps bump` cannot lock" in capsys.readouterr().err
    assert world.files() == before


def test_a_relative_path_source_is_named_not_checked_by_status(world, capsys):
    """Checked from copies of pyproject.toml and uv.lock, a relative path would name another directory."""
    path = world.project / "pyproject.toml"
    source = '[tool.uv.sources]\nlocal = { path = "../x" }\n'
    path.write_text(path.read_text().replace("[tool.uv.sources]\n", source, 1))
    assert main(["deps", "status", "--check", "--project", str(world.project)]) == 1
    assert ("uv.lock was not checked against pyproject.toml: pyproject.toml: [tool.uv.sources] local is the relative "
            "path '../x'") in capsys.readouterr().out


@pytest.mark.parametrize("target", ["/dev/zero", "fifo", "/dev/null"])
def test_a_settings_file_linked_to_a_device_is_refused_not_copied(world, capsys, target):
    """A pull request's .python-version that links to /dev/zero would fill the disk as it is copied into the
    staging copy, one to a FIFO hang it: refused, naming the file, and nothing changes. (/dev/null is the one a
    guard run needs: without the check, a bump that goes on, not a full disk.)"""
    name = ".python-version"
    before = world.files()
    if target == "fifo":
        target = str(world.project.parent / "fifo")
        os.mkfifo(target)
    (world.project / name).unlink(missing_ok=True)
    (world.project / name).symlink_to(target)
    new = fork_commit(world, "next", [], 'VERSION = "0.1.0"\n')
    assert main(["deps", "bump", "megatron-core", "--rev", new, "--project", str(world.project)]) == 1
    err = capsys.readouterr().err
    assert f"cannot read {world.project / name}" in err and "a regular file, or remove it" in err
    assert world.files() == before and not list((world.project / ".nemo-rl").glob("staging-*"))


def test_a_python_version_linked_to_a_shared_one_is_read_through_the_link(world, capsys):
    shared = world.project.parent / "shared-python-version"
    shared.write_text("3.12\n")
    (world.project / ".python-version").symlink_to(shared)
    new = fork_commit(world, "next", [], 'VERSION = "0.1.0"\n')
    assert main(["deps", "bump", "megatron-core", "--rev", new, "--project", str(world.project)]) == 0
    assert Project.read(world.project).fork("megatron-core").rev == new


def _index(root, versions: list[str]) -> None:
    """A PEP 503 index at `root` that serves exactly these versions of a pure-Python tinydep."""
    files, page = root / "files", root / "simple" / "tinydep"
    files.mkdir(parents=True, exist_ok=True)
    page.mkdir(parents=True, exist_ok=True)
    links = []
    for version in versions:
        wheel = files / f"tinydep-{version}-py3-none-any.whl"
        info = f"tinydep-{version}.dist-info"
        with zipfile.ZipFile(wheel, "w") as z:
            z.writestr("tinydep/__init__.py", "")
            z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: tinydep\nVersion: {version}\n")
            z.writestr(f"{info}/WHEEL",
                       "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
            z.writestr(f"{info}/RECORD", "")
        sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
        links.append(f'<a href="../../files/{wheel.name}#sha256={sha}">{wheel.name}</a>')
    (page / "index.html").write_text("<html><body>\n" + "\n".join(links) + "\n</body></html>\n")


@pytest.fixture
def index(tmp_path, monkeypatch):
    """An HTTP index on loopback whose pages uv must ask again each time (max-age=0), as it would PyPI's later."""
    root = tmp_path / "index"
    root.mkdir()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def end_headers(self):
            self.send_header("Cache-Control", "max-age=0")
            super().end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("UV_INDEX", f"http://127.0.0.1:{server.server_address[1]}/simple")
    yield root
    server.shutdown()
    server.server_close()
    thread.join()


def test_a_bump_moves_the_fork_and_leaves_what_the_index_changed_to_its_own_lock(world, index, capsys):
    """Between two bumps the index takes tinydep 1.0 down and publishes 1.1. The second bump (a new requirement
    line, so a new derived entry) locks offline and keeps tinydep as committed, which `uv lock --check` accepts;
    `uv lock --upgrade-package tinydep` then takes in the index's change, apart from the bump (docs/forks.md)."""
    _index(index, ["1.0"])
    forkworld.derive_metadata(world, {})
    new = fork_commit(world, "feat: use tinydep", ["tinydep"], 'import tinydep\nVERSION = "0.1.0"\n')
    assert main(["deps", "bump", "megatron-core", "--rev", new, "--project", str(world.project)]) == 0
    assert str(Project.read(world.project).packages["tinydep"].version) == "1.0"
    shutil.rmtree(index)
    _index(index, ["1.1"])
    newer = fork_commit(world, "feat: tinydep>=0.5", ["tinydep>=0.5"], 'import tinydep\nVERSION = "0.1.0"\n')
    capsys.readouterr()
    assert main(["deps", "bump", "megatron-core", "--rev", newer, "--project", str(world.project)]) == 0
    out = capsys.readouterr().out
    assert "(locked offline: every other package as committed)" in out and "tinydep: 1.0" not in out
    assert str(Project.read(world.project).packages["tinydep"].version) == "1.0"
    forkworld.uv_run(world, "lock", "--check")
    forkworld.uv_run(world, "lock")  # a lock that still satisfies pyproject.toml is kept as it is
    assert str(Project.read(world.project).packages["tinydep"].version) == "1.0"
    forkworld.uv_run(world, "lock", "--upgrade-package", "tinydep")
    assert str(Project.read(world.project).packages["tinydep"].version) == "1.1"


def test_unreadable_fork_metadata_is_a_clear_line(world, capsys):
    fork = world.forks["megatron-core"].fork
    pyproject = (fork / "pyproject.toml").read_text()
    broken = commit(fork, "broken backend",
                    {"pyproject.toml": pyproject.replace('build-backend = "hatchling.build"',
                                                         'build-backend = "no_such_backend.api"')})
    before = world.files()
    capsys.readouterr()
    # what the fork declares is recorded with every pin ([declares], derived entry or not): unreadable, no pin moves
    assert main(["deps", "bump", "megatron-core", "--rev", broken, "--project", str(world.project)]) == 1
    captured = capsys.readouterr()
    assert "the fork's build backend could not produce metadata" in captured.err and "what to do:" in captured.err
    assert "Traceback" not in captured.out + captured.err and world.files() == before


def test_unreadable_fork_metadata_stops_a_bump_that_must_derive_the_entry(world, capsys):
    forkworld.derive_metadata(world, {})
    fork = world.forks["megatron-core"].fork
    pyproject = (fork / "pyproject.toml").read_text()
    broken = commit(fork, "broken backend",
                    {"pyproject.toml": pyproject.replace('build-backend = "hatchling.build"',
                                                         'build-backend = "no_such_backend.api"')})
    before = world.files()
    capsys.readouterr()
    assert main(["deps", "bump", "megatron-core", "--rev", broken, "--project", str(world.project)]) == 1
    err = capsys.readouterr().err
    assert "[[tool.uv.dependency-metadata]] entry cannot be derived" in err and "Traceback" not in err
    assert world.files() == before


FORK = lockfile.Fork("megatron-core", "https://forks.nemo-rl.invalid/m.git", "a" * 40, "main",
                     "https://upstream.nemo-rl.invalid/m.git", "main", None)


def write_pyproject(tmp_path, text: str):
    (tmp_path / "pyproject.toml").write_text(text)
    return tmp_path


def test_the_modules_nemo_rl_relies_on_are_imported_once_each():
    nemo = dataclasses.replace(FORK, distribution="nemo-toolkit", module="nemo.tron.init",
                               entry_points=("nemo.tron.init", "nemo.tron.config"))
    assert verify.modules_for(nemo) == ["nemo.tron.init", "nemo.tron.config"]
    assert verify.modules_for(FORK) == ["megatron_core"]  # no module declared: the distribution's name


def test_the_extra_that_requires_the_fork(tmp_path):
    project = write_pyproject(tmp_path, '[project]\nname = "p"\nversion = "0"\n[project.optional-dependencies]\n'
                              'docs = ["sphinx"]\nmcore = ["Megatron_Core>=0.1", "nemo-toolkit"]\n')
    assert verify.extra_for(Project.read(project), "megatron-core") == "mcore"
    with pytest.raises(NemoRLError, match="no extra in \\[project.optional-dependencies\\] requires torch"):
        verify.extra_for(Project.read(project), "torch")


def test_a_missing_module_goes_to_the_add_list_of_a_derived_entry_else_to_the_entry(tmp_path):
    (tmp_path / "plain").mkdir()
    plain = write_pyproject(tmp_path / "plain",
                            '[project]\nname = "p"\nversion = "0"\n[tool.nemo-rl.forks.megatron-core]\n')
    line = verify.fix_line(Project.read(plain), FORK, "einops")
    assert line.startswith('add "einops" to requires-dist of the [[tool.uv.dependency-metadata]] entry')
    (tmp_path / "derived").mkdir()
    derived = write_pyproject(tmp_path / "derived",
                              '[project]\nname = "p"\nversion = "0"\n[tool.nemo-rl.forks.megatron-core]\n'
                              'drop = [{ name = "wandb", why = "logging" }]\n')
    line = verify.fix_line(Project.read(derived), FORK, "einops")
    assert line.startswith('add { requirement = "einops", why = "<what imports it>" } to add = [...] in '
                           "[tool.nemo-rl.forks.megatron-core]")
    assert "`nemo-rl deps patches megatron-core`" in line


def test_verify_uses_the_lock_as_it_is(world, capsys):
    """`deps verify` checks uv.lock, never a re-resolved set: a stale lock fails instead of being relocked."""
    path = world.project / "pyproject.toml"
    path.write_text(path.read_text().replace("dependencies = []", 'dependencies = ["iniconfig"]'))
    lock_before = (world.project / "uv.lock").read_bytes()
    assert main(["deps", "verify", "megatron-core", "--project", str(world.project)]) == 1
    assert (world.project / "uv.lock").read_bytes() == lock_before
