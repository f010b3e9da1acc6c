"""Fakes shared by test files: environments, bundles, projects and records made without uv or git where a test
needs only their shape; and runners of code in a fresh interpreter, so that a read a planted FIFO would block
fails the test instead of hanging the run."""

from __future__ import annotations

import dataclasses
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import forkworld
import pytest
import tomlkit
from gitfixtures import commit

from nemo_rl.cli import main
from nemo_rl.forks import declared, metadata_check, record_files
from nemo_rl.forks.record_files import Record
from nemo_rl.project.model import Project
from nemo_rl.toolchain import archs, layout
from nemo_rl.workers import bundles, environments, housekeeping, manifests


def deps(world, *args):
    return main(["deps", *args, "--project", str(world.project)])


def fake_env(path: Path) -> Path:
    """An environment as far as the overlay and status are concerned: a site-packages directory. A directory made
    for it to live in is a store (nemo_rl/settings.py): mode 0700."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    (path / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages").mkdir(parents=True)
    (path / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return path


def fork_state(world, env, capsys) -> str:
    capsys.readouterr()
    code = deps(world, "status", "--json", "--env", str(env))
    out = capsys.readouterr()
    assert code == 0 and out.out, out.err
    rows = {r["distribution"]: r for r in json.loads(out.out)["forks"]}
    return rows["megatron-core"]["state"]


FLAGS = ["--locked"]


def fake_bundle(world, root: Path, files: dict[str, str] | None = None) -> Path:
    """A bundle as far as check and sync_from go: a cache directory and a manifest for this checkout's inputs."""
    from nemo_rl.jsonout import dumps

    root.mkdir(parents=True)
    cache = root / bundles.CACHE
    for name, text in (files or {"archive-v0/abc/pkg/__init__.py": "X = 1\n", "simple-v1/index": "i\n"}).items():
        (cache / name).parent.mkdir(parents=True, exist_ok=True)
        (cache / name).write_text(text)
    count, total, digest = bundles.content_digest(cache)
    manifest = bundles.Manifest(manifests.SCHEMA, bundles.inputs_for(Project.read(world.project), FLAGS), {}, count,
                                total, "",
                                1.7e9, manifests.Proven((), ()))
    record = b'{"toolchain": {}, "extensions": {}}\n'  # every bundle's CUDA record, here of no extension
    (root / bundles.cuda_archs.SIDECAR).write_bytes(record)
    manifest = dataclasses.replace(manifest, digest=bundles.bundle_seal.seal(digest, manifest, record))
    (root / bundles.MANIFEST).write_text(dumps(manifest))
    return root


RECORD = Record(3, "a" * 40, "Ann Author <ann@fixture.invalid>", "2025-05-01T12:00:00+00:00",
                "  fix: pad tokens: a subject with leading spaces", "b" * 40,
                " megatron/core/tokens.py | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)",
                "kept until upstream merges it\nsecond line")


def make_index(records: list[Record]) -> record_files.Index:
    return record_files.index_for("megatron-core", "https://forks.nemo-rl.invalid/megatron-lm.git", "nemo-rl/main",
                                  "c" * 40, "https://upstream.nemo-rl.invalid/megatron-lm.git", "main", "d" * 40,
                                  "Ours: why the fork exists.", records)


COMMIT = "c" * 40


def fake_installed_fork(tmp_path, version, requires, commit=COMMIT, python="3.12.4", others=("six",),
                        other_version=None):
    """A site-packages holding megatron-core's dist-info (installed from `commit`) and `others`."""
    import json

    site = tmp_path / "env/lib/python3.12/site-packages"
    info = site / f"megatron_core-{version}.dist-info"
    info.mkdir(parents=True)
    lines = "".join(f"Requires-Dist: {r}\n" for r in requires)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: megatron-core\nVersion: {version}\n{lines}")
    if commit:
        (info / "direct_url.json").write_text(json.dumps({"url": "https://forks.nemo-rl.invalid/m.git",
                                                          "vcs_info": {"vcs": "git", "commit_id": commit}}))
    for name in others:  # at a version every requirement here allows: a refused one is its own problem
        fits = other_version or {"six": "1.17", "numpy": "2.1", "urllib3": "2.2"}.get(name, "1.0")
        other = site / f"{name}-{fits}.dist-info"
        other.mkdir()
        (other / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {fits}\n")
    (tmp_path / "env/pyvenv.cfg").write_text(f"home = /usr\nversion_info = {python}\n")
    return tmp_path / "env"


def fake_project(tmp_path, version="0.2.0", requires=("six>=1.16",), depends=("six",), drop=("pytest",),
                 add=()):
    """pyproject.toml with megatron-core's derived entry and drop/add lists, and the uv.lock uv would write."""
    entry = declared.Entry("megatron-core", version, None, tuple(requires))
    project = tmp_path / "project"
    project.mkdir(parents=True)
    doc = tomlkit.parse('[project]\nname = "p"\nversion = "0"\n[project.optional-dependencies]\n'
                        'mcore = ["megatron-core"]\n[tool.uv]\n[tool.nemo-rl.forks.megatron-core]\n')
    table = doc["tool"]["nemo-rl"]["forks"]["megatron-core"]
    table["drop"] = [{"name": n, "why": "a reason"} for n in drop]
    table["add"] = [{"requirement": r, "why": "a reason"} for r in add]
    declared.write_entry(doc, entry)
    (project / "pyproject.toml").write_text(tomlkit.dumps(doc))
    lock = {"version": 1, "package": [
        {"name": "megatron-core", "version": version,
         "source": {"git": f"https://forks.nemo-rl.invalid/m.git?rev={COMMIT}#{COMMIT}"},
         "dependencies": [{"name": d} for d in depends]}],
        "manifest": {"dependency-metadata": [{"name": "megatron-core", "version": version,
                                              "requires-dist": list(requires)}]}}
    (project / "uv.lock").write_text(tomlkit.dumps(lock))
    return project


DROP = {"pytest": "a test tool the fork lists as a runtime requirement"}



def pin(world, rev):
    assert deps(world, "bump", "megatron-core", "--rev", rev) == 0


def derived_world(world):
    """megatron-core's fork declares nemo-toolkit (locked through the project's own source) and pytest (dropped)."""
    rev = commit(world.forks["megatron-core"].fork, "declare requirements", {"pyproject.toml": forkworld.fork_pyproject(
        world, dependencies=["nemo-toolkit", "pytest>=8"])})
    pin(world, rev)
    forkworld.derive_metadata(world, DROP)
    return rev


def planted_env(venvs: Path, key: str, project: Path, checkout: str | None) -> Path:
    env = fake_env(venvs / key)
    meta = {"version": 1, "key": key, "flags": FLAGS, "lock_hash": "x", "project": str(project)}
    (env / environments.META).write_text(json.dumps(meta | ({"checkout": checkout} if checkout is not None else {})))
    return env


def env_row(project: Path, env: Path) -> housekeeping.Row:
    return {r.path: r for r in housekeeping.listing(Project.read(project))}[env]


def fatbin(entries: list[tuple[int, int]]) -> bytes:
    """One fatbin container holding (kind, sm) entries with 8-byte payloads."""
    body = b"".join(struct.pack("<HHIQ", kind, 1, 64, 8) + struct.pack("<12xI32x", sm) + b"\0" * 8
                    for kind, sm in entries)
    return struct.pack("<IHHQ", archs.FATBIN_MAGIC, 1, 16, len(body)) + body


def elf_with(section: bytes, name: bytes = b".nv_fatbin") -> bytes:
    """A minimal ELF64: header, the section's bytes, a name table, three section headers (null, it, names)."""
    names = b"\0" + name + b"\0.shstrtab\0"
    data_off, names_off = 64, 64 + len(section)
    shoff = names_off + len(names)
    header = b"\x7fELF\x02\x01\x01" + b"\0" * 9 + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0,
                                                              64, 3, 2)
    sections = [struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
                struct.pack("<IIQQQQIIQQ", 1, 1, 2, 0, data_off, len(section), 0, 0, 8, 0),
                struct.pack("<IIQQQQIIQQ", 2 + len(name), 3, 0, 0, names_off, len(names), 0, 0, 1, 0)]
    return header + section + names + b"".join(sections)


def revision_http(revision: str, sha256: str) -> bytes:
    """What uv writes beside a revision: msgpack [revision, [{"Sha256": hex}], size], then its HTTP policy."""
    return (b"\x93" + bytes([0xA0 + len(revision)]) + revision.encode() + b"\x91\x81\xa6Sha256\xd9\x40"
            + sha256.encode() + b"\xce\x00\x02\x87\xc8" + b"\0" * 16 + b"https://files.invalid/x.tar.gz")


def msgpack_str(text: str) -> bytes:
    data = text.encode()
    return (bytes([0xA0 | len(data)]) if len(data) < 32 else bytes([0xD9, len(data)])) + data


def uv_pointer(archive_id: str, sha256: str, filename: str | None) -> bytes:
    """A pointer as uv 0.13 writes one: msgpack [id, [{"Sha256": hex}], filename, ...], its HTTP policy after."""
    fields = [msgpack_str(archive_id), bytes([0x91, 0x81]) + msgpack_str("Sha256") + msgpack_str(sha256)]
    fields += [msgpack_str(filename), b"\x00"] if filename else [b"\xce\x00\x00\x01\x00"]
    return bytes([0x90 | (len(fields) + 1)]) + b"".join(fields) + b"\xc0" + b"\x00\x02\x23" * 8


LOCK = """\
version = 1
requires-python = ">=3.12"

[[package]]
name = "Tiny_Pkg"
version = "1.0"
source = {{ registry = "https://pypi.org/simple" }}
sdist = {{ url = "https://files.example/tiny_pkg-1.0.tar.gz", hash = "sha256:{sdist}" }}
wheels = [
    {{ url = "https://files.example/tiny_pkg-1.0-py3-none-any.whl", hash = "sha256:{wheel}" }},
]
"""


CLI_HANG_S = 60  # a read that blocks on a FIFO never returns: far past any honest run of these commands


def _python(code: str, env: dict[str, str]) -> tuple[int, str]:
    """`code` in a fresh interpreter, so that a read which would block forever fails the test instead of the run."""
    try:
        done = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True,
                              text=True, timeout=CLI_HANG_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung on a planted FIFO: {code}")
    return done.returncode, done.stdout + done.stderr


def _cli(world, env: dict[str, str], *args: str) -> tuple[int, str]:
    argv = [*args, "--project", str(world.project)]
    return _python(f"import sys; from nemo_rl.cli import main; sys.exit(main({argv!r}))", env)


READ_HANG_S = 20  # a read of a few bytes takes milliseconds; a FIFO blocks forever


def _never_hangs(code: str) -> str:
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=READ_HANG_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung on a planted FIFO: {code}")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()
def _clone(world, where: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(world.forks["megatron-core"].fork), str(where)], check=True)
    return where


def run_cli(capsys, *args):
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out + captured.err
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
    path.write_text(path.read_text().replace(Project.read(world.project).fork("megatron-core").rev, new))
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


FIX = "run `nemo-rl deps patches megatron-core`"


def status(world, env, capsys) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["deps", "status", "--check", "--project", str(world.project), "--env", str(env)])
    return rc, capsys.readouterr().out


def fixed(world, env, capsys):
    """The command both checks named, then a sync from the lock: both green, installed = locked."""
    assert main(["deps", "patches", "megatron-core", "--project", str(world.project)]) == 0
    forkworld.uv_run(world, "sync", "--quiet", "--locked", "--extra", "mcore", env_dir=env)
    assert offline(world, capsys)[0] == 0
    rc, out = status(world, env, capsys)
    assert rc == 0 and "megatron-core: ok" in out, out


def bump(world, *args: str) -> int:
    return main(["deps", "bump", "megatron-core", *args, "--project", str(world.project)])


def entry(world):
    return metadata_check.entry(Project.read(world.project), "megatron-core")


def locked(world):
    return Project.read(world.project).packages["megatron-core"]


def _backend_commit(world, metadata: str, pyproject_name: str | None = "megatron-core") -> str:
    """A fork commit whose in-tree build backend writes `metadata` as its METADATA."""
    project = f'[project]\nname = "{pyproject_name}"\nversion = "0.2.0"\n' if pyproject_name else ""
    backend = f'''import os
def prepare_metadata_for_build_wheel(d, config_settings=None):
    os.makedirs(os.path.join(d, "megatron_core-0.2.0.dist-info"))
    with open(os.path.join(d, "megatron_core-0.2.0.dist-info", "METADATA"), "w") as f:
        f.write({metadata!r})
    return "megatron_core-0.2.0.dist-info"
'''
    return commit(world.forks["megatron-core"].fork, "backend", {
        "pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n' + project,
        "backend.py": backend})


def _state(world):
    paths = [world.project / "pyproject.toml", world.project / "uv.lock", *(world.project / "patches").rglob("*")]
    return {str(p): p.read_bytes() for p in paths if p.is_file()}


def fake_package_tree(root: Path, lib: str) -> None:
    """The paths Debian's packages put the toolkit in (the contents do not matter to the layout)."""
    toolkit = root / "usr/lib/nvidia-cuda-toolkit"
    files = ["usr/bin/nvcc", "usr/lib/nvidia-cuda-toolkit/bin/nvcc", "usr/lib/nvidia-cuda-toolkit/bin/cicc",
             "usr/lib/nvidia-cuda-toolkit/bin/crt/link.stub", "usr/lib/nvidia-cuda-toolkit/libdevice/libdevice.10.bc",
             "usr/include/cuda_runtime.h", "usr/include/crt/host_config.h", f"usr/lib/{lib}/libcudart.so.12.4.127",
             f"usr/lib/{lib}/libcudadevrt.a", f"usr/lib/{lib}/libnvvm.so.4.0.0",
             *(f"usr/bin/{tool}" for tool in layout.USR_BIN_TOOLS)]
    for relative in files:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(relative)
    (root / "usr/bin/nvcc").write_text("#!/bin/sh\nexec /usr/lib/nvidia-cuda-toolkit/bin/nvcc \"$@\"\n")
    os.symlink("libcudart.so.12.4.127", root / f"usr/lib/{lib}/libcudart.so")
    os.symlink("libnvvm.so.4.0.0", root / f"usr/lib/{lib}/libnvvm.so")
    os.symlink("/etc/nvcc.profile", toolkit / "bin/nvcc.profile")  # Debian's: absolute /usr paths
    os.symlink("libnvrtc.so.12", root / f"usr/lib/{lib}/libnvrtc.so")  # libnvrtc12 is not taken
