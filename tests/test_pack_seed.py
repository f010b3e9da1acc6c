"""A pack's fresh cache is seeded with the wheels the builder's uv cache built from the lock's sdists (no second
transformer-engine compile): the built wheel and the unpacked copy it links to, never the build's sources, never
a link out of the user's cache, and nothing for a package the lock takes as a wheel."""

from __future__ import annotations

import os
from pathlib import Path

from nemo_rl.workers import pack_seed

LOCK = {"package": [
    {"name": "transformer-engine-torch", "version": "2.3.0", "source": {"registry": "https://pypi.org/simple"},
     "sdist": {"url": "u"}},
    {"name": "torch", "version": "2.7.0", "source": {"registry": "https://pypi.org/simple"}, "sdist": {"url": "t"},
     "wheels": [{"url": "w"}]},
    {"name": "megatron-core", "version": "0.13.0", "source": {"git": "https://example.invalid/m.git"}},
    {"name": "../evil", "version": "1", "source": {"registry": "r"}, "sdist": {"url": "e"}}]}
REVISION = "sdists-v11/pypi/transformer-engine-torch/2.3.0/REV"


def user_cache(root: Path) -> Path:
    cache = root / "user-cache"
    built = cache / REVISION / "SETTINGS"
    built.mkdir(parents=True)
    (built / "transformer_engine_torch-2.3.0-cp312-cp312-linux_x86_64.whl").write_bytes(b"wheel")
    (built / "metadata.msgpack").write_bytes(b"m")
    unpacked = cache / "archive-v0" / "ID"
    (unpacked / "transformer_engine").mkdir(parents=True)
    (unpacked / "transformer_engine" / "ext.so").write_bytes(b"so")
    os.symlink("../../../../../../archive-v0/ID", built / "transformer_engine_torch-2.3.0-cp312-cp312-linux_x86_64")
    (root / "outside").mkdir()
    (root / "outside" / "secret").write_text("not the cache's\n")
    os.symlink(root / "outside", built / "outside")  # not uv's: never followed
    (cache / REVISION / "src").mkdir()
    (cache / REVISION / "src" / "setup.py").write_text("build scratch\n")
    (cache / REVISION.replace("2.3.0/REV", "2.2.0")).mkdir(parents=True)  # another version: not the lock's
    (cache / "sdists-v11/pypi/torch/2.7.0").mkdir(parents=True)
    (cache / "sdists-v11/pypi/torch/2.7.0/built.whl").write_bytes(b"t")
    return cache


def test_the_built_wheel_and_its_unpacked_copy_are_seeded(tmp_path):
    fresh = tmp_path / "fresh"
    assert pack_seed.seed(user_cache(tmp_path), fresh, LOCK) == ["transformer-engine-torch"]
    built = fresh / REVISION / "SETTINGS"
    assert (built / "transformer_engine_torch-2.3.0-cp312-cp312-linux_x86_64.whl").read_bytes() == b"wheel"
    unpacked = built / "transformer_engine_torch-2.3.0-cp312-cp312-linux_x86_64"
    assert unpacked.is_symlink() and (unpacked / "transformer_engine" / "ext.so").read_bytes() == b"so"
    assert os.path.realpath(unpacked).startswith(os.path.realpath(fresh) + os.sep)  # the fresh cache's own copy
    assert not (fresh / REVISION / "src").exists()  # build scratch stays behind
    assert not (built / "outside").is_symlink()
    assert not (fresh / "sdists-v11/pypi/transformer-engine-torch/2.2.0").exists()
    assert not (fresh / "sdists-v11/pypi/torch").exists()  # the lock takes torch as a wheel


def test_no_user_cache_seeds_nothing(tmp_path):
    assert pack_seed.seed(None, tmp_path / "fresh", LOCK) == []
    assert pack_seed.seed(tmp_path / "absent", tmp_path / "fresh", LOCK) == []
    assert not (tmp_path / "fresh").exists()
    assert pack_seed.sdist_builds(LOCK) == {"transformer-engine-torch": "2.3.0"}


def test_a_fork_left_out_by_the_flags_is_not_expected():
    """`--no-install-package nemo-toolkit` (the mcore extra without NeMo): a node's verification must not ask
    for the fork the flags leave out on purpose, and still asks for the others."""
    from nemo_rl.project import lockfile

    root = Path(__file__).resolve().parent.parent
    flags = ["--locked", "--extra", "mcore", "--no-install-package", "nemo-toolkit"]
    assert not lockfile.extras_require(root, flags, "nemo-toolkit")
    assert lockfile.extras_require(root, flags, "megatron-core")
    assert lockfile.extras_require(root, flags[:3], "nemo-toolkit")
