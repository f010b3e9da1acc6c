"""The verification record (nemo_rl/workers/verified.py): what it notices, and what a worker's own imports do
not change. Fast: a fake environment, no Python run in it."""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path

from nemo_rl.workers import verified


def verified_env(tmp_path: Path) -> tuple[Path, Path]:
    project = tmp_path / "project"
    project.mkdir()
    (project / "uv.lock").write_text("version = 1\n")
    env = tmp_path / "env"
    package = env / "lib" / "python3.12" / "site-packages" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (env / "bin").mkdir()
    dirs = verified.watched_dirs(env)
    files = ["lib/python3.12/site-packages/pkg/__init__.py"]
    verified.write(env, project, platform.python_version(), verified.driver_ray(sys.prefix), dirs, files)
    assert verified.still_verified(env, project)
    return env, project


def test_a_workers_first_import_writing_bytecode_keeps_the_record(tmp_path):
    """Python writes pkg/__pycache__/ at a worker's first import of pkg: that must not cost a full verification."""
    env, project = verified_env(tmp_path)
    cache = env / "lib" / "python3.12" / "site-packages" / "pkg" / "__pycache__"
    cache.mkdir()
    (cache / "__init__.cpython-312.pyc").write_bytes(b"\0")
    assert verified.still_verified(env, project)


def test_a_file_added_beside_the_verified_ones_is_noticed(tmp_path):
    env, project = verified_env(tmp_path)
    site = env / "lib" / "python3.12" / "site-packages"
    (site / "evil.pth").write_text("import os\n")
    assert not verified.still_verified(env, project)


def test_a_hand_made_record_of_any_shape_is_no_record(tmp_path):
    env, project = verified_env(tmp_path)
    for text in ["[" * 100_000, json.dumps({"dirs": ["bin\u0000"], "files": [], "state": "x", "lock_hash": "y",
                                             "python": "3", "ray": None})]:
        (env / verified.RECORD).write_text(text)
        assert not verified.still_verified(env, project)
    os.remove(env / verified.RECORD)
    assert not verified.still_verified(env, project)
