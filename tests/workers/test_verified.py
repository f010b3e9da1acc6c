"""The verification record (nemo_rl/workers/verified.py): what it notices, and what a worker's own imports do
not change. Fast: a fake environment, no Python run in it."""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
from pathlib import Path

from fakes import _never_hangs

from nemo_rl import extras
from nemo_rl.project import installed
from nemo_rl.project.model import Project
from nemo_rl.workers import verified

DRIVER = (platform.python_version(), verified.driver_ray(sys.prefix))


def still_verified(env: Path, project: Path) -> bool:
    held = Project.read(project)
    modules = extras.modules_to_import(held.forks, installed.site_packages(env))
    return verified.still_verified(env, held.lock_hash, modules)


def verified_env(tmp_path: Path) -> tuple[Path, Path]:
    project = tmp_path / "project"
    project.mkdir()
    (project / "uv.lock").write_text("version = 1\n")
    (project / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    env = tmp_path / "env"
    package = env / "lib" / "python3.12" / "site-packages" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package.parent / "_virtualenv.pth").write_text("import _virtualenv\n")
    (env / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (env / "bin").mkdir()
    os.symlink(sys.executable, env / "bin" / "python")
    dirs = verified.watched_dirs(env)
    files = ["lib/python3.12/site-packages/pkg/__init__.py"]
    verified.write(env, Project.read(project).lock_hash, *DRIVER, ["ray"],
                   dirs, files,
                   verified.snapshot(env, dirs))
    assert still_verified(env, project)
    return env, project


def test_a_workers_first_import_writing_bytecode_keeps_the_record(tmp_path):
    """Python writes pkg/__pycache__/ at a worker's first import of pkg: that must not cost a full verification."""
    env, project = verified_env(tmp_path)
    cache = env / "lib" / "python3.12" / "site-packages" / "pkg" / "__pycache__"
    cache.mkdir()
    (cache / "__init__.cpython-312.pyc").write_bytes(b"\0")
    assert still_verified(env, project)


def test_a_file_added_beside_the_verified_ones_is_noticed(tmp_path):
    env, project = verified_env(tmp_path)
    site = env / "lib" / "python3.12" / "site-packages"
    (site / "evil.pth").write_text("import os\n")
    assert not still_verified(env, project)


def test_a_hand_made_record_of_any_shape_is_no_record(tmp_path):
    env, project = verified_env(tmp_path)
    for text in ["[" * 100_000, json.dumps({"dirs": ["bin\u0000"], "files": [], "state": "x", "lock_hash": "y",
                                             "python": "3", "ray": None})]:
        (env / verified.RECORD).write_text(text)
        assert not still_verified(env, project)
    os.remove(env / verified.RECORD)
    assert not still_verified(env, project)


def settled(monkeypatch, env: Path, project: Path) -> None:
    """Record as if every path had been written long ago (RACY_NS off), so the fast digest is kept."""
    monkeypatch.setattr(verified, "RACY_NS", -10**18)
    dirs = verified.watched_dirs(env)
    verified.write(env, Project.read(project).lock_hash, *DRIVER, ["ray"],
                   dirs,
                   ["lib/python3.12/site-packages/pkg/__init__.py"], verified.snapshot(env, dirs))
    assert verified.read(env).stats is not None


def test_a_settled_record_is_checked_by_its_times_alone(tmp_path, monkeypatch):
    """One stat per path, no directory listed: what keeps actor_options in milliseconds."""
    env, project = verified_env(tmp_path)
    settled(monkeypatch, env, project)
    monkeypatch.setattr(verified, "state", lambda *args: (_ for _ in ()).throw(AssertionError("listed")))
    assert still_verified(env, project)


def test_a_change_is_seen_through_the_times(tmp_path, monkeypatch):
    env, project = verified_env(tmp_path)
    settled(monkeypatch, env, project)
    (env / "lib" / "python3.12" / "site-packages" / "pkg" / "stray.py").write_text("")
    assert not still_verified(env, project)


def test_bytecode_moves_the_times_but_keeps_the_record_and_the_new_times_are_kept(tmp_path, monkeypatch):
    env, project = verified_env(tmp_path)
    settled(monkeypatch, env, project)
    before = verified.read(env).stats
    (env / "lib" / "python3.12" / "site-packages" / "pkg" / "__pycache__").mkdir()
    assert still_verified(env, project)
    assert verified.read(env).stats not in (None, before)  # the next call is a fast one again


def test_times_taken_as_paths_change_are_not_kept(tmp_path):
    """A change within the clock tick of the record leaves the times as they were: such times decide nothing."""
    env, project = verified_env(tmp_path)
    assert verified.read(env).stats is None
    assert still_verified(env, project)


def test_start_up_files_edited_in_place_are_noticed(tmp_path, monkeypatch):
    """pyvenv.cfg, a .pth file and the interpreter's link change no directory's listing."""
    site = tmp_path / "env" / "lib" / "python3.12" / "site-packages"
    for edit in [lambda env: (env / "pyvenv.cfg").write_text("home = /elsewhere\n"),
                 lambda env: (site / "_virtualenv.pth").write_text("import os; os.system('x')\n"),
                 lambda env: (os.remove(env / "bin" / "python"), os.symlink("/bin/sh", env / "bin" / "python"))]:
        env, project = verified_env(tmp_path)
        settled(monkeypatch, env, project)
        edit(env)
        assert not still_verified(env, project)
        shutil.rmtree(tmp_path)
        tmp_path.mkdir()


def test_the_interpreter_the_link_names_is_covered(tmp_path, monkeypatch):
    """bin/python links out of the environment: the base interpreter replaced in place is another interpreter."""
    env, project = verified_env(tmp_path)
    base = tmp_path / "base-python"
    base.write_bytes(b"\x7fELF one")
    os.remove(env / "bin" / "python")
    os.symlink(base, env / "bin" / "python")
    settled(monkeypatch, env, project)
    base.write_bytes(b"\x7fELF another build")
    assert not still_verified(env, project)


def test_a_record_that_covers_less_than_the_environment_is_no_record(tmp_path):
    """A hand-made record whose state is right for what it lists (nothing) proves nothing."""
    env, project = verified_env(tmp_path)
    record = json.loads((env / verified.RECORD).read_text())
    site = "lib/python3.12/site-packages"
    for dirs, files, modules in [([], [], []), ([], record["files"], ["ray"]), (["bin", site], [], ["ray"]),
                                 (["bin", site], record["files"], [])]:
        forged = {**record, "dirs": dirs, "files": files, "modules": modules, "stats": None,
                  "state": verified.state(env, dirs, files)}
        (env / verified.RECORD).write_text(json.dumps(forged))
        assert not still_verified(env, project), (dirs, files, modules)


def test_uv_linking_a_recorded_file_elsewhere_keeps_the_record_and_its_times(tmp_path, monkeypatch):
    """uv hard-links its cached files into every environment it builds: the link count (and with it the ctime)
    of a recorded file moves whenever anything on the machine is synced, and proves nothing about this one."""
    env, project = verified_env(tmp_path)
    settled(monkeypatch, env, project)
    os.link(env / "lib" / "python3.12" / "site-packages" / "pkg" / "__init__.py", tmp_path / "another-env-file")
    monkeypatch.setattr(verified, "state", lambda *args: (_ for _ in ()).throw(AssertionError("listed")))
    assert still_verified(env, project)


def test_lib64_is_walked_once(tmp_path):
    env, _ = verified_env(tmp_path)
    os.symlink("lib", env / "lib64")
    assert not [d for d in verified.watched_dirs(env) if d.startswith("lib64")]


PKG = "lib/python3.12/site-packages/pkg/__init__.py"


def test_an_edit_while_it_is_checked_is_not_recorded(tmp_path):
    """The check read the old bytes; the record would name the new ones: nothing is recorded."""
    env, project = verified_env(tmp_path)
    os.remove(env / verified.RECORD)
    dirs = verified.watched_dirs(env)
    before = verified.snapshot(env, dirs)
    (env / PKG).write_text("x = 'edited during the check'\n")
    assert not verified.write(env, Project.read(project).lock_hash, *DRIVER,
                              ["ray"],
                              dirs, [PKG], before)
    assert not (env / verified.RECORD).exists()


def test_a_directory_made_writable_by_others_is_noticed(tmp_path, monkeypatch):
    """chmod 777 site-packages adds no file: its mode is in the record."""
    env, project = verified_env(tmp_path)
    settled(monkeypatch, env, project)
    os.chmod(env / "lib" / "python3.12" / "site-packages", 0o777)
    assert not still_verified(env, project)


def test_a_linked_directory_pointed_elsewhere_is_noticed(tmp_path, monkeypatch):
    site = tmp_path / "env" / "lib" / "python3.12" / "site-packages"
    for name in ("A", "B"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "x.py").write_text(f"# {name}\n")
    env, project = verified_env(tmp_path)
    os.symlink(tmp_path / "A", site / "ext")
    settled(monkeypatch, env, project)
    os.remove(site / "ext")
    os.symlink(tmp_path / "B", site / "ext")
    assert not still_verified(env, project)


def test_a_listing_that_does_not_read_does_not_hold(tmp_path, monkeypatch):
    """Listed through a descriptor (no /proc needed); a listing that fails proves nothing, when the record is
    written as when it is compared (a failure on both sides must not compare equal)."""
    env, project = verified_env(tmp_path)
    os.remove(env / verified.RECORD)
    real = os.scandir
    monkeypatch.setattr(verified.os, "scandir", lambda p=".": (_ for _ in ()).throw(OSError(5, "EIO"))
                        if isinstance(p, int) else real(p))
    settled_dirs = verified.watched_dirs(env)
    verified.write(env, Project.read(project).lock_hash, *DRIVER, ["ray"],
                   settled_dirs,
                   [PKG], verified.snapshot(env, settled_dirs))
    (env / "lib" / "python3.12" / "site-packages" / "sitecustomize.py").write_text("print('at every start')\n")
    assert not still_verified(env, project)


def test_a_temporary_record_a_killed_write_left_is_removed(tmp_path, monkeypatch):
    env, project = verified_env(tmp_path)
    left = env / f".{verified.RECORD}.abc123.tmp"
    left.write_text("{")
    os.utime(left, (0, 0))
    settled(monkeypatch, env, project)
    assert not left.exists()


def _checked_env(tmp_path: Path, monkeypatch, during=lambda site: None):
    """A worker environment with this checkout's uv.lock and the driver's Ray, checked by `environments.verify`
    with the import check faked (`during` runs inside it)."""
    from nemo_rl import imports
    from nemo_rl.workers import environments

    root = Path(__file__).resolve().parents[2]
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "uv.lock"):
        shutil.copy(root / name, project / name)
    env = tmp_path / "env"
    site = env / "lib" / "python3.12" / "site-packages"
    (site / "ray").mkdir(parents=True)
    (site / "ray" / "__init__.py").write_text("ok = 1\n")
    ray = installed.version(Path(sys.prefix), "ray")
    (site / f"ray-{ray}.dist-info").mkdir()
    (site / f"ray-{ray}.dist-info" / "METADATA").write_text(f"Metadata-Version: 2.1\nName: ray\nVersion: {ray}\n")
    (env / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (env / "bin").mkdir()
    os.symlink(sys.executable, env / "bin" / "python")
    monkeypatch.setattr(installed, "site_packages", lambda e: [str(p) for p in installed.site_packages_dirs(e)])

    def check(python, modules):
        during(site)
        return imports.Result(platform.python_version(), {}, (str(site / "ray" / "__init__.py"),))

    monkeypatch.setattr(imports, "check", check)
    return env, project, lambda: environments.verify(environments.WorkerEnv("k", env, ("--locked",), project, ""),
                                                      Project.read(project))


def test_verification_records_what_it_checked(tmp_path, monkeypatch):
    env, project, verify = _checked_env(tmp_path, monkeypatch)
    verify()
    assert still_verified(env, project)


def test_a_file_edited_during_verification_is_not_recorded(tmp_path, monkeypatch):
    env, project, verify = _checked_env(tmp_path, monkeypatch,
                                        lambda site: (site / "ray" / "__init__.py").write_text("ok = 2\n"))
    verify()
    assert not (env / verified.RECORD).exists()


def test_a_fifo_verification_record_is_no_record(tmp_path):
    from nemo_rl.workers import verified

    os.mkfifo(tmp_path / verified.RECORD)
    assert _never_hangs(f"from pathlib import Path; from nemo_rl.workers import verified; "
                        f"print(verified.read(Path({str(tmp_path)!r})))") == "None"


def test_a_python_loading_through_uv_s_lib64_link_is_recorded(tmp_path):
    """A Python whose platlibdir is lib64 (a Fedora or RHEL system Python) loads pkg through uv's `lib64 -> lib`:
    the record takes it as the snapshot lists it, so the next start is not a full verification."""
    env, project = verified_env(tmp_path)
    os.symlink("lib", env / "lib64")
    dirs = verified.watched_dirs(env)
    files = verified.inside(env, [str(env / "lib64" / "python3.12" / "site-packages" / "pkg" / "__init__.py")])
    assert files == ["lib/python3.12/site-packages/pkg/__init__.py"]
    assert verified.write(env, Project.read(project).lock_hash, *DRIVER, ["ray"], dirs, files,
                          verified.snapshot(env, dirs))
    assert still_verified(env, project)
