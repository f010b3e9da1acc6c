"""A cluster without internet: pack a worker environment once on a builder, build it on nodes offline.

The builder's megatron-core fork has a small C extension: a node that builds from the bundle has no compiler on
PATH, no package index (a closed local port), no git host and an empty uv cache, so its build can only succeed
by installing what the builder compiled."""

import contextlib
import io
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import forkworld
import pytest
from fakes import FLAGS, fake_bundle
from gitfixtures import commit

from nemo_rl.cli import main
from nemo_rl.errors import NemoRLError
from nemo_rl.jsonout import dumps
from nemo_rl.project import identity, installed
from nemo_rl.project.model import Project
from nemo_rl.workers import (
    archive_hashes,
    bundle_pack,
    bundles,
    environments,
    executables,
    manifests,
    tree_copy,
    verified,
)

ROOT = Path(__file__).resolve().parents[2]

MCORE = "uv run --locked --extra mcore"
HELPER_C = textwrap.dedent("""\
    #include <Python.h>
    static PyObject *answer(PyObject *self, PyObject *args) { return PyLong_FromLong(42); }
    static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
    static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_helpers", NULL, -1, methods};
    PyMODINIT_FUNC PyInit__helpers(void) { return PyModule_Create(&module); }
    """)


@pytest.fixture(scope="module")
def builder(ray_world, tmp_path_factory):
    """A copy of the Ray world whose megatron-core pin has a compiled helper, its bundle, and the node command
    pack printed. The project carries nemo_rl itself, as the nemo-rl checkout does."""
    root = tmp_path_factory.mktemp("builder")
    world = forkworld.copy_world(ray_world, root / "world")
    with pytest.MonkeyPatch.context() as monkeypatch:
        forkworld.apply_env(world, monkeypatch)
        monkeypatch.setenv("NEMO_RL_CACHE_DIR", str(root / "cache"))
        monkeypatch.setenv("NEMO_RL_VENV_DIR", str(root / "venvs"))
        megatron = world.forks["megatron-core"]
        head = commit(megatron.fork, "C helper, as Megatron's dataset helper", {
            "pyproject.toml": """\
                [build-system]
                requires = ["setuptools>=68"]
                build-backend = "setuptools.build_meta"

                [project]
                name = "megatron-core"
                version = "0.1.0"
                requires-python = ">=3.10"

                [tool.setuptools.packages.find]
                include = ["megatron*"]
                """,
            "setup.py": "from setuptools import Extension, setup\n"
                        "setup(ext_modules=[Extension('megatron.core._helpers', ['megatron/core/helpers.c'])])\n",
            "megatron/core/helpers.c": HELPER_C,
        })
        assert main(["deps", "bump", "megatron-core", "--rev", head, "--project", str(world.project)]) == 0
        # the project installs itself (an editable build, as nemo-rl does): the node builds that wheel anew
        pyproject = world.project / "pyproject.toml"
        pyproject.write_text(pyproject.read_text().replace("package = false", "package = true") +
                             '\n[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
                             '[tool.hatch.build.targets.wheel]\npackages = ["fixture_project"]\n')
        (world.project / "fixture_project").mkdir()
        (world.project / "fixture_project" / "__init__.py").write_text("")
        shutil.copytree(ROOT / "nemo_rl", world.project / "nemo_rl", ignore=shutil.ignore_patterns("__pycache__"))
        forkworld.uv_run(world, "lock", "--quiet")
        bundle = root / "bundles" / "mcore"
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["envs", "pack", MCORE, str(bundle), "--project", str(world.project)]) == 0
    (hint,) = [line for line in out.getvalue().splitlines() if "on a node" in line]
    return world, bundle, head, shlex.split(hint.split("`")[1])


def snapshot(root: Path) -> dict[str, tuple]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size, p.is_dir())
            for p in [root, *root.rglob("*")] if not p.is_symlink()}


def offline_node(tmp_path: Path, builder_world) -> tuple[Path, dict[str, str]]:
    """A node: another checkout of the same project, and an environment that reaches nothing and compiles nothing."""
    project = tmp_path / "node" / "project"
    shutil.copytree(builder_world.project, project, ignore=shutil.ignore_patterns(".venv", ".nemo-rl"))
    tools = tmp_path / "node" / "bin"
    tools.mkdir()
    for tool in ("git", "sh", "env"):  # no cc, gcc, c++ or ld: a build would fail
        os.symlink(shutil.which(tool), tools / tool)
    os.symlink(forkworld.uv_bin(), tools / "uv")  # uv and a Python: what the node has besides the checkout
    base_python = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    for name in ("python3", base_python.name):
        os.symlink(base_python.resolve(), tools / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_CONFIG", "UV_", "NEMO_RL_", "VIRTUAL_ENV"))}
    blocked = {url: "https://blocked.nemo-rl.invalid/x.git" for url in builder_world.insteadof}  # via the closed port
    closed = "http://127.0.0.1:9"  # every HTTP(S) connection goes to a closed local port
    env.update({"PATH": str(tools), "CC": "/nonexistent/cc", "CXX": "/nonexistent/c++",
                "HTTP_PROXY": closed, "HTTPS_PROXY": closed, "ALL_PROXY": closed, "NO_PROXY": "",
                "UV_CACHE_DIR": str(tmp_path / "node" / "empty-uv-cache"), "UV_NO_GITHUB_FAST_PATH": "1",
                "NEMO_RL_VENV_DIR": str(tmp_path / "node" / "venvs"), "GIT_CONFIG_COUNT": str(len(blocked)),
                "HOME": str(tmp_path / "node")})
    for i, url in enumerate(blocked):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = f"url.{blocked[url]}.insteadOf", url
    return project, env


def node_build(project: Path, env: dict[str, str], command: list[str]) -> subprocess.CompletedProcess:
    """The command `pack` printed (and docs/workers.md gives), run in the node's checkout."""
    assert command[:5] == ["uv", "run", "--no-project", "--offline", "python"], command
    return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=600)


def for_bundle(command: list[str], bundle: Path) -> list[str]:
    return [str(bundle) if word == command[command.index("--from") + 1] else word for word in command]


def test_the_bundle_carries_what_was_built_and_no_history(builder):
    _, bundle, head, _ = builder
    manifest = bundles.read_manifest(bundle)
    assert manifest.distributions["megatron-core"] == f"0.1.0 git {head}"
    assert "ray" in manifest.distributions and manifest.files > 0 and manifest.digest.startswith("sha256:")
    cache = bundle / bundles.CACHE
    assert not list(cache.glob("git-v*"))  # no git history
    assert list(cache.rglob("_helpers*.so"))  # the compiled helper, built once, here
    world = builder[0]
    # uv's own archive pointers, as uv 0.13 writes them, read and matched against uv.lock (Ray's wheel among them)
    assert archive_hashes.check(cache, Project.read(world.project), "the bundle")[0] > 0
    assert any(p.label.startswith("ray-") for p in archive_hashes.pointers(cache))


def test_a_real_archive_pointer_with_another_hash_is_refused(builder, tmp_path):
    world, bundle, _, _ = builder
    (ray,) = [p for p in archive_hashes.pointers(bundle / bundles.CACHE) if p.label.startswith("ray-")]
    copy = tmp_path / "cache" / ray.path.relative_to(bundle / bundles.CACHE)
    copy.parent.mkdir(parents=True)
    data = ray.path.read_bytes()
    recorded = dict(ray.hashes)["sha256"].encode()
    copy.write_bytes(data.replace(recorded, recorded[:-1] + (b"0" if recorded[-1:] != b"0" else b"1")))
    with pytest.raises(NemoRLError, match=f"archive of ray \\({re.escape(ray.label)}\\) records sha256"):
        archive_hashes.check(tmp_path / "cache", Project.read(world.project), "bundle")


def test_a_node_with_only_the_checkout_builds_offline_from_a_read_only_bundle(builder, cluster, tmp_path,
                                                                              monkeypatch):
    world, built, head, command = builder
    bundle = tmp_path / "bundle"  # files of one link each, whatever other tests linked from the builder's
    shutil.copytree(built, bundle, symlinks=True)
    command = for_bundle(command, bundle)
    project, env = offline_node(tmp_path, world)
    assert not (project / ".venv").exists()
    before = snapshot(bundle)
    result = node_build(project, env, command)
    assert result.returncode == 0, result.stderr
    assert snapshot(bundle) == before  # nothing written into the bundle: a read-only one works
    assert "through the working uv cache" in result.stderr
    assert "making the checkout's environment" in result.stderr and (project / ".venv" / "bin" / "python").exists()
    venvs = tmp_path / "node" / "venvs"
    (path,) = [p for p in venvs.iterdir() if not p.name.startswith(".")]
    assert installed.installed(path, "megatron-core").commit == head == Project.read(project).fork("megatron-core").rev
    assert (path / verified.RECORD).exists()
    recorded = environments.WorkerEnv.read(path)
    assert recorded is not None and recorded.checkout == identity.checkout_id(project) is not None  # whose it is
    # the bundle is this user's, on the node's filesystem: the environments link its checked files, copy none
    inodes = {(p.stat().st_dev, p.stat().st_ino) for p in bundle.rglob("*") if p.is_file() and not p.is_symlink()}
    module = path / "lib/python3.12/site-packages/megatron/core/__init__.py"
    assert (module.stat().st_dev, module.stat().st_ino) in inodes
    assert any((p.stat().st_dev, p.stat().st_ino) in inodes for p in (project / ".venv").rglob("*.py"))
    # the driver's `.venv` and the worker environment share Ray's files rather than holding two copies
    site = "lib/python3.12/site-packages/ray"
    shared = [p.relative_to(path / site) for p in (path / site).rglob("*.py")]
    assert shared and all(os.path.samefile(path / site / p, project / ".venv" / site / p) for p in shared)
    assert "imported by the pack from these bytes" in result.stderr  # the node did not import torch again
    assert "lib/python3.12/site-packages/megatron/core/__init__.py" in bundles.read_manifest(bundle).proven.files
    # the checkout's own environment runs nemo-rl offline: what `uv run` gives afterwards
    after = subprocess.run(["uv", "run", "--offline", "python", "-m", "nemo_rl", "envs", "verify", MCORE], cwd=project,
                           env=env, capture_output=True, text=True, timeout=600)
    assert after.returncode == 0 and f"ok: {path}" in after.stdout, after.stderr
    # an actor in that environment imports the compiled fork and reports the locked commit
    import ray

    from nemo_rl import workers

    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))

    @ray.remote(num_cpus=0)
    def report():
        from megatron.core import _helpers

        from nemo_rl.extras import find_installed

        return _helpers.answer(), find_installed("megatron-core").commit

    assert ray.get(report.options(**workers.actor_options(MCORE, project)).remote(), timeout=120) == (42, head)


@pytest.mark.parametrize("damage", ["one byte changed", "truncated", "another uv.lock", "a fork moved",
                                    "another pinned digest", "truncated, digest pinned"])
def test_a_damaged_or_foreign_bundle_is_refused_before_anything_is_installed(builder, tmp_path, damage):
    world, bundle, head, command = builder
    project, env = offline_node(tmp_path, world)
    copy = tmp_path / "bundle"
    shutil.copytree(bundle, copy, symlinks=True)
    biggest = max((p for p in (copy / bundles.CACHE).rglob("*") if p.is_file() and not p.is_symlink()),
                  key=lambda p: p.stat().st_size)
    command = for_bundle(command, copy)
    if damage == "one byte changed":
        data = bytearray(biggest.read_bytes())
        data[len(data) // 2] ^= 1
        biggest.write_bytes(bytes(data))
        expected = "does not match its manifest"
    elif damage.startswith("truncated"):
        biggest.write_bytes(biggest.read_bytes()[: biggest.stat().st_size // 2])
        expected = "does not match its manifest"
        if damage.endswith("pinned"):  # a pinned digest still has the node's copy hashed
            command += ["--digest", bundles.read_manifest(copy).digest]
    elif damage == "another pinned digest":
        command += ["--digest", "sha256:" + "0" * 64]
        expected = "which --digest does not pin"
    elif damage == "a fork moved":
        (project / "uv.lock").write_text((project / "uv.lock").read_text().replace(head, "f" * 40))
        expected = f"uv.lock changed (megatron-core: bundle 0.1.0 git {head[:12]}, uv.lock 0.1.0 git ffffffffffff)"
    else:
        (project / "uv.lock").write_text((project / "uv.lock").read_text() + "\n")
        expected = "uv.lock changed (no package of the bundle moved"
    result = node_build(project, env, command)
    assert result.returncode == 1 and expected in result.stderr, result.stderr
    venvs = tmp_path / "node" / "venvs"
    assert not venvs.exists() or not [p for p in venvs.iterdir() if not p.name.endswith(".lock")]
    assert not (project / ".venv").exists()  # not even the checkout's own environment


STRIKES = {
    # SIGKILL right after the step: the environment synced into the fresh cache, the digest computed, and the
    # manifest written with only the rename into place left
    "after the sync": "real = bundles.uv.sync\ndef strike(*a, **k):\n    real(*a, **k); os.kill(os.getpid(), 9)\n"
                      "bundles.uv.sync = strike",
    "after the digest": "real = bundles.content_digest\ndef strike(*a):\n    real(*a); os.kill(os.getpid(), 9)\n"
                        "bundles.content_digest = strike",
    "before the rename": "bundles.os.rename = lambda *a: os.kill(os.getpid(), 9)",
}


@pytest.mark.parametrize("instant", list(STRIKES))
def test_a_pack_killed_at_any_instant_leaves_nothing_that_passes(builder, tmp_path, instant):
    world, _, _, _ = builder
    dest = tmp_path / "bundles" / "killed"
    script = ("import os, sys\nfrom nemo_rl.workers import bundles\n" + STRIKES[instant] +
              "\nfrom nemo_rl.cli import main\nsys.exit(main(sys.argv[1:]))")
    env = {**os.environ, **world.git_env(), "NEMO_RL_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", script, "envs", "pack", "BASE", str(dest), "--project",
                           str(world.project)], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    (leftover,) = dest.parent.glob(".killed.packing-*")
    assert list((leftover / bundles.CACHE).iterdir())  # struck after files were written
    assert not dest.exists()
    with pytest.raises(Exception, match="not a bundle|unfinished pack"):
        bundles.check(leftover, Project.read(world.project), ["--locked"])
    os.environ["NEMO_RL_BUNDLE_DIR"] = str(dest.parent)
    try:
        assert bundles.configured() == []
    finally:
        del os.environ["NEMO_RL_BUNDLE_DIR"]
    bundle_pack.remove_dead_packs(dest.parent, keep_timed_out=True)  # the dead pack's lock is free
    assert not leftover.exists()


def test_envs_list_shows_bundles_and_pack_refuses_what_it_cannot_make(builder, tmp_path, monkeypatch, capsys):
    world, bundle, _, _ = builder
    forkworld.apply_env(world, monkeypatch)
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", str(bundle.parent))
    assert main(["envs", "list", "--json", "--project", str(world.project)]) == 0
    rows = json.loads(capsys.readouterr().out)["bundles"]
    assert [(Path(r["path"]).name, r["state"]) for r in rows] == [("mcore", "current")]
    assert main(["envs", "pack", "MCORE", str(bundle), "--project", str(world.project)]) == 1
    assert "exists" in capsys.readouterr().err
    assert main(["deps", "develop", "nemo-toolkit", "--project", str(world.project)]) == 0
    assert main(["envs", "pack", "MCORE", str(tmp_path / "b"), "--project", str(world.project)]) == 1
    assert "deps develop" in capsys.readouterr().err
    assert main(["deps", "develop", "--stop", "nemo-toolkit", "--project", str(world.project)]) == 0


def test_the_digest_covers_names_contents_and_links(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_bytes(b"x")
    os.symlink("f", tmp_path / "a" / "l")
    first = bundles.content_digest(tmp_path)
    (tmp_path / "a" / "f").write_bytes(b"y")
    assert bundles.content_digest(tmp_path)[2] != first[2]
    (tmp_path / "a" / "f").write_bytes(b"x")
    os.remove(tmp_path / "a" / "l")
    os.symlink("g", tmp_path / "a" / "l")
    assert bundles.content_digest(tmp_path)[2] != first[2]
    os.remove(tmp_path / "a" / "l")
    os.symlink("f", tmp_path / "a" / "l")
    (tmp_path / "b").mkdir()
    os.symlink("../b", tmp_path / "a" / "dir-link")  # as uv's wheel entries point into archive-v0
    with_link = bundles.content_digest(tmp_path)[2]
    os.remove(tmp_path / "a" / "dir-link")
    os.symlink("../a", tmp_path / "a" / "dir-link")
    assert bundles.content_digest(tmp_path)[2] != with_link


def test_pack_refuses_in_seconds_where_transformer_engine_cannot_build(tmp_path, capsys, monkeypatch):
    """This repository's mcore extra has transformer-engine; this machine has no CUDA 12 nvcc (once CUDA_HOME,
    which the nvcc tests of a guard run set, and an nvcc on PATH are out of the way)."""
    root = Path(__file__).resolve().parents[2]
    from nemo_rl import toolchain

    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("PATH", os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                                               if d and not (Path(d) / "nvcc").exists()))

    if toolchain.transformer_engine_unbuildable(Project.read(root).packages) is None:
        pytest.skip("transformer-engine can be built here")
    assert main(["envs", "pack", "MCORE", str(tmp_path / "bundles" / "b"), "--project", str(root)]) == 1
    err = capsys.readouterr().err
    assert "transformer-engine cannot be built on this builder" in err and "CUDA_HOME" in err
    assert not (tmp_path / "bundles").exists()  # refused before anything started


def test_find_returns_only_a_bundle_made_for_these_inputs(tmp_path, monkeypatch):
    """A node never installs a bundle of another uv.lock, Python, platform, uv or flags: find compares each."""
    from dataclasses import replace

    from nemo_rl.errors import NemoRLError
    from nemo_rl.jsonout import dumps

    project = tmp_path / "project"
    project.mkdir()
    (project / "uv.lock").write_text("version = 1\n")
    (project / "pyproject.toml").write_text("")
    flags = ["--locked", "--extra", "mcore"]
    here = bundles.inputs_for(Project.read(project), flags)
    foreign = {"a-other-lock": replace(here, lock_hash="0" * 64), "b-other-flags": replace(here, flags=("--locked",)),
               "c-other-python": replace(here, python="3.0.0"), "d-other-uv": replace(here, uv_version="0.0.1"),
               "e-other-platform": replace(here, platform="win32-arm64")}
    root = tmp_path / "bundles"
    for name, inputs in [*foreign.items(), ("f-fits", here)]:
        (root / name).mkdir(parents=True)
        manifest = bundles.Manifest(manifests.SCHEMA, inputs, {}, 0, 0, "sha256:" + "0" * 64, 1.7e9,
                                    manifests.Proven((), ()))
        (root / name / bundles.MANIFEST).write_text(dumps(manifest) + "\n")
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", str(root))
    assert bundles.find(Project.read(project), flags) == root / "f-fits"  # the five before it in order do not fit
    shutil.rmtree(root / "f-fits")
    with pytest.raises(NemoRLError) as refused:
        bundles.find(Project.read(project), flags)
    for name, reason in [("a-other-lock", "uv.lock changed"), ("b-other-flags", "other sync flags"),
                         ("c-other-python", "another Python"), ("d-other-uv", "another uv"),
                         ("e-other-platform", "another platform")]:
        assert f"{name}: {reason}" in refused.value.what


def test_sync_flags_take_what_uv_sync_takes():
    assert executables.sync_flags("uv run --locked --extra mcore --no-install-package transformer-engine") == [
        "--locked", "--extra", "mcore", "--no-install-package", "transformer-engine"]
    with pytest.raises(NemoRLError, match="'--with', which `uv sync` does not take"):
        executables.sync_flags("uv run --locked --with x")


GOOD = manifests.Manifest(manifests.SCHEMA, manifests.Inputs("0" * 64, ("--locked",), "3.12.1", "linux-x86_64",
                                                             "uv 0.13.9"),
                          {"ray": "2.49.0", "megatron-core": "0.1.0 git " + "a" * 40}, 3, 10, "sha256:x", 1.7e9,
                          manifests.Proven(("ray", "megatron.core"), ("lib/python3.12/site-packages/ray/__init__.py",)))


@pytest.mark.parametrize("field, value, expected", [
    ("distributions", ["ray"], "distributions is not a map"),
    ("distributions", {"ray": 2}, "distributions is not a map"),
    ("distributions", {"../x": "1.0"}, "distributions is not a map"),
    ("distributions", {"megatron-core": "0.1.0 git abc"}, "distributions is not a map"),
    ("created", "yesterday", "created is not a time"),
    ("created", True, "created is not a time"),
    ("created", float("inf"), "created is not a time"),
    ("files", -1, "files is not a count"),
    ("bytes", 1.5, "bytes is not a count"),
    ("proven", {"modules": ["ray"], "files": ["../../etc/passwd"]}, "proven is not"),
    ("proven", {"modules": ["ray; rm"], "files": []}, "proven is not"),
    ("proven", {"modules": ["ray"], "files": ["/etc/passwd"]}, "proven is not"),
    ("proven", {"modules": ["ray"], "files": ["lib/a\x00b.py"]}, "proven is not"),
    ("proven", {"modules": ["ray"], "files": ["lib/a\nb.py"]}, "proven is not"),
])
def test_the_manifests_own_fields_are_checked_where_read(tmp_path, field, value, expected):
    assert bundles.read_manifest(_manifest_at(tmp_path, {})).distributions == GOOD.distributions
    with pytest.raises(NemoRLError, match=f"cannot read the bundle manifest .*{expected}"):
        bundles.read_manifest(_manifest_at(tmp_path, {field: value}))


def _manifest_at(root: Path, changes: dict) -> Path:
    data = {**json.loads(dumps(GOOD)), **changes}
    (root / bundles.MANIFEST).write_text(json.dumps(data))
    return root


def test_the_node_bootstrap_goes_on_with_verbose(tmp_path, monkeypatch):
    """`-v` survives the re-execution inside the `.venv` the bootstrap made."""
    from types import SimpleNamespace

    from nemo_rl.envs import build

    monkeypatch.setattr(sys, "base_prefix", sys.prefix)  # as under `uv run --no-project`
    monkeypatch.setattr(bundles, "build_driver", lambda *args: SimpleNamespace(digest="sha256:" + "0" * 64))
    became = []
    monkeypatch.setattr(build.os, "execv", lambda python, argv: became.append(argv))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    main(["envs", "build", "MCORE", "--from", str(tmp_path / "bundle"), "-v", "--project", str(tmp_path)])
    assert became and "-v" in became[0]


def test_a_half_made_checkout_environment_is_made_again_never_in_a_loop(tmp_path, monkeypatch):
    """`uv run --no-project` picks the checkout's `.venv` when its interpreter runs, Ray or not: without Ray it is
    made from the bundle (the bootstrap), once; in the `.venv` the bootstrap made, no Ray is an error."""
    from nemo_rl.envs import build

    venv = tmp_path / ".venv"
    site = venv / "lib" / "python3.12" / "site-packages"
    site.mkdir(parents=True)
    monkeypatch.setattr(sys, "prefix", str(venv))
    # what the interpreter of that `.venv` would see on its own sys.path
    monkeypatch.setattr(installed, "site_packages", lambda env: [str(p) for p in installed.site_packages_dirs(env)])
    monkeypatch.delenv("UV_PROJECT_ENVIRONMENT", raising=False)
    monkeypatch.delenv(build.REEXEC, raising=False)
    assert build._without_driver(tmp_path)
    monkeypatch.setenv(build.REEXEC, str(venv.resolve()))
    with pytest.raises(NemoRLError, match="has no Ray after it was made"):
        build._without_driver(tmp_path)
    monkeypatch.delenv(build.REEXEC)
    (site / "ray-2.0.0.dist-info").mkdir()
    (site / "ray-2.0.0.dist-info" / "METADATA").write_bytes(b"Name: ray\nSummary: caf\xe9\n")
    assert build._without_driver(tmp_path)  # a Ray whose metadata cannot be read is made again too
    (site / "ray-2.0.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: ray\nVersion: 2.0.0\n")
    assert not build._without_driver(tmp_path)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "another-env"))  # someone else's environment: used as is
    assert not build._without_driver(tmp_path)


def test_a_checkout_environment_whose_build_was_killed_is_made_again(tmp_path, monkeypatch):
    """Ray in, a dependency not yet: the mark build_driver removes last says the `.venv` is unfinished."""
    from nemo_rl.envs import build

    venv = tmp_path / ".venv"
    site = venv / "lib" / "python3.12" / "site-packages"
    (site / "ray-2.0.0.dist-info").mkdir(parents=True)
    (site / "ray-2.0.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: ray\nVersion: 2.0.0\n")
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setattr(installed, "site_packages", lambda env: [str(p) for p in installed.site_packages_dirs(env)])
    monkeypatch.delenv("UV_PROJECT_ENVIRONMENT", raising=False)
    monkeypatch.delenv(build.REEXEC, raising=False)
    assert not build._without_driver(tmp_path)
    bundles.driver_unfinished(tmp_path).touch()
    assert build._without_driver(tmp_path)


def test_copies_into_the_working_cache_are_never_writable_by_others(tmp_path):
    """uv keeps a cached file's mode in the environment: a bundle's group-writable file must not stay so."""
    source = tmp_path / "bucket"
    (source / "pkg").mkdir(parents=True)
    (source / "pkg" / "mod.py").write_text("x = 1\n")
    os.chmod(source / "pkg" / "mod.py", 0o666)
    os.chmod(source / "pkg", 0o777)
    (tmp_path / "copied").mkdir()
    old = os.umask(0)  # whatever the umask: under 022 it alone would take the bits off
    try:
        tree_copy.copy_cache(source, tmp_path / "copied", source)
    finally:
        os.umask(old)
    root = tmp_path / "copied"
    assert (root / "pkg" / "mod.py").read_text() == "x = 1\n"
    assert not [p for p in [root, *root.rglob("*")] if p.stat().st_mode & 0o022], root


@pytest.mark.parametrize("ray_metadata", [None, b"Name: ray\nSummary: caf\xe9\n"], ids=["none", "not-utf8"])
def test_a_driver_without_ray_is_named_not_the_worker_environment(tmp_path, monkeypatch, ray_metadata):
    """Rebuilding the worker environment cannot give the driver Ray: the fix names the driver's."""
    from nemo_rl.workers import environments

    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    os.symlink(sys.executable, env / "bin" / "python")
    (tmp_path / "driver").mkdir()
    if ray_metadata is not None:  # a Ray whose metadata cannot be read: a plain sync keeps it
        site = tmp_path / "driver" / "lib" / "python3.12" / "site-packages" / "ray-2.0.0.dist-info"
        site.mkdir(parents=True)
        (site / "METADATA").write_bytes(ray_metadata)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "driver"))
    monkeypatch.setattr(installed, "site_packages", lambda env: [str(p) for p in installed.site_packages_dirs(env)])
    with pytest.raises(NemoRLError, match="has no Ray") as raised:
        environments.verify(environments.WorkerEnv("k", env, ("--locked",), tmp_path, ""), Project.read(tmp_path))
    remedy = raised.value.remedy
    assert "uv cache clean ray && uv sync --locked --inexact --reinstall-package ray" in remedy
    assert str(env) not in remedy


def test_a_checkout_environment_a_killed_build_left_with_ray_in_is_made_again_offline(builder, tmp_path):
    """The bootstrap was killed after it installed Ray, before msgpack: the documented command makes it whole."""
    world, bundle, head, command = builder
    project, env = offline_node(tmp_path, world)
    assert node_build(project, env, command).returncode == 0
    venv = project / ".venv"
    assert not bundles.driver_unfinished(project).exists()
    site = next(venv.glob("lib/python*/site-packages"))
    for path in [p for p in site.iterdir() if p.name.lower().startswith("msgpack")]:
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    bundles.driver_unfinished(project).touch()  # what build_driver leaves when it is killed midway
    result = node_build(project, env, command)
    assert result.returncode == 0, result.stderr
    assert "making the checkout's environment" in result.stderr and installed.installed(venv, "msgpack")
    assert not bundles.driver_unfinished(project).exists()


@pytest.mark.parametrize("state", ["python link dangling", "interpreter only"])
def test_a_broken_checkout_environment_is_made_again_offline(builder, tmp_path, state):
    """The documented command on a node whose `.venv` is broken: a dangling interpreter link (uv run --no-project
    passes over it) or an interpreter with nothing installed (uv run --no-project picks it)."""
    world, bundle, head, command = builder
    project, env = offline_node(tmp_path, world)
    venv = project / ".venv"
    subprocess.run(["uv", "venv", "--quiet", str(venv)], cwd=project, env=env, check=True, timeout=120)
    if state == "python link dangling":
        (venv / "bin" / "python").unlink()
        os.symlink("/nonexistent/python3.12", venv / "bin" / "python")
    result = node_build(project, env, command)
    assert result.returncode == 0, result.stderr
    assert installed.installed(venv, "ray") and "making the checkout's environment" in result.stderr


def test_a_link_out_of_the_bundle_is_refused(tmp_path):
    root = tmp_path / "cache"
    (root / "wheels-v1").mkdir(parents=True)
    (root / "archive-v0" / "abc").mkdir(parents=True)
    (root / "wheels-v1" / "ok").symlink_to("../archive-v0/abc")  # what uv makes
    bundles.content_digest(root)
    # the last leaves the bundle and comes back in by its directory's name: inside here, outside in any copy of it
    for target in ("/etc/passwd", "../../outside", "../archive-v0/../../x", "../../cache/archive-v0/abc"):
        (root / "wheels-v1" / "bad").symlink_to(target)
        with pytest.raises(NemoRLError, match="links out of the bundle"):
            bundles.content_digest(root)
        (root / "wheels-v1" / "bad").unlink()


def test_a_newline_in_a_name_or_link_target_is_refused(tmp_path):
    """A name or link target holding a newline could spell two entries of the digest; uv never writes one."""
    for name, target in (("a\nF b", None), ("l", "f\nL m f")):
        root = tmp_path / f"cache-{len(name)}"
        root.mkdir()
        if target is None:
            (root / name).write_bytes(b"x")
        else:
            (root / name).symlink_to(target)
        with pytest.raises(NemoRLError, match="newline in its name or link target"):
            bundles.content_digest(root)


def test_a_site_pins_the_bundles_it_trusts(world, tmp_path, monkeypatch, capsys):
    bundle = fake_bundle(world, tmp_path / "bundles" / "b")
    digest = bundles.read_manifest(bundle).digest
    other = "sha256:" + "0" * 64
    assert bundles.check(bundle, Project.read(world.project), FLAGS, digest).digest == digest
    with pytest.raises(NemoRLError, match="--digest does not pin"):
        bundles.check(bundle, Project.read(world.project), FLAGS, other)
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIGESTS", other)
    with pytest.raises(NemoRLError, match="NEMO_RL_BUNDLE_DIGESTS does not pin"):
        bundles.check(bundle, Project.read(world.project), FLAGS)
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", str(bundle.parent))
    with pytest.raises(NemoRLError, match="not in NEMO_RL_BUNDLE_DIGESTS"):
        bundles.find(Project.read(world.project), FLAGS)
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIGESTS", f"{other}, {digest}")
    assert bundles.find(Project.read(world.project), FLAGS) == bundle
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIGESTS", "md5:abc")
    with pytest.raises(NemoRLError, match="not a bundle digest"):
        bundles.find(Project.read(world.project), FLAGS)
    monkeypatch.delenv("NEMO_RL_BUNDLE_DIGESTS")
    for bad in ("abc", "sha256:" + "g" * 64):
        assert main(["envs", "build", "BASE", "--from", str(bundle), "--digest", bad, "--project",
                     str(world.project)]) == 1
        assert "is not a bundle digest" in capsys.readouterr().err
    assert main(["envs", "build", "BASE", "--digest", digest, "--project", str(world.project)]) == 2


def test_a_broken_bundle_never_hides_a_good_one_and_an_empty_dir_is_no_network(world, tmp_path, monkeypatch, capsys):
    root = tmp_path / "bundles"
    root.mkdir()
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", str(root))
    with pytest.raises(NemoRLError, match=f"NEMO_RL_BUNDLE_DIR {root} holds no bundle"):
        bundles.find(Project.read(world.project), FLAGS)
    (root / "a-broken").mkdir()
    (root / "a-broken" / bundles.MANIFEST).write_text("{")
    good = fake_bundle(world, root / "b-good")
    capsys.readouterr()
    assert bundles.find(Project.read(world.project), FLAGS) == good
    assert f"skipping bundle {root / 'a-broken'}" in capsys.readouterr().err


def test_a_link_out_of_the_bundle_through_another_link_is_refused(tmp_path):
    """`q -> p/../../etc/passwd` reads as inside the bundle; the kernel follows `p -> ../..` first."""
    root = tmp_path / "cache"
    deep = root / "archive-v0" / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (deep / "p").symlink_to("../../..")
    (deep / "q").symlink_to("p/../../../../../etc/passwd")
    with pytest.raises(NemoRLError, match="links out of the bundle"):
        bundles.content_digest(root)


def test_an_empty_digest_is_refused_never_taken_for_no_pin(world, tmp_path, monkeypatch, capsys):
    """`--digest "$DIGEST"` or NEMO_RL_BUNDLE_DIGESTS=$DIGESTS with the variable unset: the site believes it pins."""
    bundle = fake_bundle(world, tmp_path / "bundles" / "b")
    capsys.readouterr()
    assert main(["envs", "build", "BASE", "--from", str(bundle), "--digest", "", "--project", str(world.project)]) == 1
    assert "is not a bundle digest" in capsys.readouterr().err
    with pytest.raises(NemoRLError, match="is not a bundle digest"):
        bundles.check(bundle, Project.read(world.project), FLAGS, "")
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", str(bundle.parent))
    for setting in ("", " , ;"):
        monkeypatch.setenv("NEMO_RL_BUNDLE_DIGESTS", setting)
        with pytest.raises(NemoRLError, match="NEMO_RL_BUNDLE_DIGESTS is set but holds no digest"):
            bundles.find(Project.read(world.project), FLAGS)
    monkeypatch.delenv("NEMO_RL_BUNDLE_DIGESTS")
    assert bundles.find(Project.read(world.project), FLAGS) == bundle
