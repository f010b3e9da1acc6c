"""A bundle's uv cache held against uv.lock's hashes (nemo_rl/workers/archive_hashes.py): each pointer matched to
the locked file it records, anything else refused by name."""

from __future__ import annotations

import dataclasses
import json

import pytest
from fakes import FLAGS, LOCK, fake_bundle, uv_pointer

from nemo_rl.errors import NemoRLError
from nemo_rl.project.model import Project
from nemo_rl.workers import archive_hashes, bundles


def test_index_archives_carry_uv_locks_hashes(tmp_path):
    project, cache = tmp_path / "project", tmp_path / "cache"
    project.mkdir()
    wheel, sdist = "1" * 64, "2" * 64
    (project / "uv.lock").write_text(LOCK.format(wheel=wheel, sdist=sdist))
    (project / "pyproject.toml").write_text("")
    pointer = cache / "wheels-v8/pypi/tiny-pkg/1.0-py3-none-any.http"
    revision = cache / "sdists-v11/pypi/tiny-pkg/1.0/revision.http"
    for path in (pointer, revision):
        path.parent.mkdir(parents=True)
    pointer.write_bytes(uv_pointer("A1", wheel, "tiny_pkg-1.0-py3-none-any.whl"))
    revision.write_bytes(uv_pointer("R1", sdist, None))
    other = cache / "wheels-v8/pypi/unlocked/2.0-py3-none-any.http"  # an archive uv.lock does not name
    other.parent.mkdir(parents=True)
    other.write_bytes(uv_pointer("A2", "3" * 64, "unlocked-2.0-py3-none-any.whl"))
    assert archive_hashes.check(cache, Project.read(project), "bundle b")[0] == 2
    pointer.write_bytes(uv_pointer("A1", "4" * 64, "tiny_pkg-1.0-py3-none-any.whl"))
    with pytest.raises(NemoRLError, match=f"archive of Tiny_Pkg .* records sha256 {'4' * 64}, but uv.lock pins "
                                          f"sha256:{wheel}") as refused:
        archive_hashes.check(cache, Project.read(project), "bundle b")
    assert "nemo-rl envs pack" in refused.value.remedy
    pointer.write_bytes(uv_pointer("A1", wheel, "tiny_pkg-1.0-py3-none-any.whl"))
    revision.write_bytes(uv_pointer("R1", "5" * 64, None))
    with pytest.raises(NemoRLError, match="tiny-pkg 1.0 sdist"):
        archive_hashes.check(cache, Project.read(project), "bundle b")


def test_a_node_refuses_a_bundle_whose_archive_uv_lock_never_pinned(world, tmp_path, monkeypatch):
    """Checked on the node's own copy, after its digest: the copy uv reads is the copy checked."""
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    wheel = "6" * 64
    (world.project / "uv.lock").write_text((world.project / "uv.lock").read_text() + "\n" + LOCK.split("\n", 3)[3]
                                           .format(wheel=wheel, sdist="2" * 64))
    name = "wheels-v8/pypi/tiny-pkg/1.0-py3-none-any.http"
    files = {"simple-v1/index": "i\n", name: ""}
    bundle = fake_bundle(world, tmp_path / "bundle", files)
    (bundle / bundles.CACHE / name).write_bytes(uv_pointer("A1", "7" * 64, "tiny_pkg-1.0-py3-none-any.whl"))
    manifest = bundles.read_manifest(bundle)  # the bundle's writer rewrites the manifest too: the digest matches
    count, total, digest = bundles.content_digest(bundle / bundles.CACHE)
    resealed = dataclasses.replace(manifest, files=count, bytes=total, digest="")
    record = (bundle / bundles.cuda_archs.SIDECAR).read_bytes()
    sealed = bundles.bundle_seal.seal(digest, resealed, record)
    raw = json.loads((bundle / bundles.MANIFEST).read_text())
    raw.update({"files": count, "bytes": total, "digest": sealed})
    (bundle / bundles.MANIFEST).write_text(json.dumps(raw))
    synced = []
    monkeypatch.setattr(bundles.uv, "sync", lambda *a, **k: synced.append(a))
    with pytest.raises(NemoRLError, match="uv.lock pins sha256:" + wheel):
        bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", bundles.read_manifest(bundle))
    assert synced == [] and manifest.digest != sealed


def test_an_archive_pointer_is_keyed_by_its_path_and_every_hash_counts(tmp_path):
    """uv reads the pointer at `<name>/<stem>.http` whatever file name is written inside it; with two hash
    entries it may take either."""
    from fakes import LOCK, uv_pointer
    from fakes import msgpack_str as _mp

    from nemo_rl.workers import archive_hashes

    project, cache = tmp_path / "project", tmp_path / "cache"
    project.mkdir()
    wheel = "1" * 64
    (project / "uv.lock").write_text(LOCK.format(wheel=wheel, sdist="2" * 64))
    (project / "pyproject.toml").write_text("")
    pointer = cache / "wheels-v8/pypi/tiny-pkg/1.0-py3-none-any.http"
    pointer.parent.mkdir(parents=True)
    pointer.write_bytes(uv_pointer("A1", wheel, "tiny_pkg-1.0-py3-none-any.whl"))
    assert archive_hashes.check(cache, Project.read(project), "bundle b")[0] == 1
    pointer.write_bytes(uv_pointer("A1", "0" * 64, "not_in_lock-1.0-py3-none-any.whl"))
    with pytest.raises(NemoRLError, match="lies where another wheel.s pointer lies: it records .not_in_lock-1.0"):
        archive_hashes.check(cache, Project.read(project), "bundle b")
    for first, second in ((wheel, "0" * 64), ("0" * 64, wheel)):
        entries = b"".join(bytes([0x81]) + _mp("Sha256") + _mp(h) for h in (first, second))
        pointer.write_bytes(bytes([0x95]) + _mp("A1") + bytes([0x92]) + entries
                            + _mp("tiny_pkg-1.0-py3-none-any.whl") + b"\x00\xc0")
        with pytest.raises(NemoRLError, match=f"records sha256 {'0' * 64}, {wheel}"):
            archive_hashes.check(cache, Project.read(project), "bundle b")




MANY_TAGS = "cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.manylinux_2_28_x86_64"
MANY_TAGS_LOCK = """\
version = 1
requires-python = ">=3.12"

[[package]]
name = "Tiny_Pkg"
version = "1.0"
source = {{ registry = "https://pypi.org/simple" }}
wheels = [
    {{ url = "https://files.example/tiny_pkg-1.0-MANY_TAGS.whl", hash = "sha256:{wheel}" }},
]
""".replace("MANY_TAGS", MANY_TAGS)


def test_a_pointer_uv_names_by_a_hash_of_its_tags_is_checked(tmp_path):
    """uv keeps a wheel with many tags at `<version>-<16 hex>.http`: matched by the file name inside it."""
    project, cache = tmp_path / "project", tmp_path / "cache"
    project.mkdir()
    wheel = "1" * 64
    (project / "uv.lock").write_text(MANY_TAGS_LOCK.format(wheel=wheel))
    (project / "pyproject.toml").write_text("")
    pointer = cache / "wheels-v8/pypi/tiny-pkg/1.0-00b06ae7f1096870.http"
    pointer.parent.mkdir(parents=True)
    uv_order = "cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64"  # uv sorts the tags
    pointer.write_bytes(uv_pointer("A1", wheel, f"tiny_pkg-1.0-{uv_order}.whl"))
    build = cache / "wheels-v8/pypi/setuptools/80.0-py3-none-any.http"  # a build requirement uv.lock does not name
    build.parent.mkdir(parents=True)
    build.write_bytes(uv_pointer("A2", "3" * 64, "setuptools-80.0-py3-none-any.whl"))
    assert archive_hashes.check(cache, Project.read(project), "bundle b") == (1, ["setuptools-80.0-py3-none-any.whl"])
    pointer.write_bytes(uv_pointer("A1", "0" * 64, f"tiny_pkg-1.0-{uv_order}.whl"))
    with pytest.raises(NemoRLError, match=f"archive of Tiny_Pkg .* records sha256 {'0' * 64}, but uv.lock pins"):
        archive_hashes.check(cache, Project.read(project), "bundle b")
    # where uv looks up the locked wheel, another wheel of that version: uv.lock names no such file
    pointer.write_bytes(uv_pointer("A1", "0" * 64, "tiny_pkg-1.0-py3-none-any.whl"))
    with pytest.raises(NemoRLError, match="records 'tiny_pkg-1.0-py3-none-any.whl', a wheel uv.lock does not name"):
        archive_hashes.check(cache, Project.read(project), "bundle b")
    # a wheel's pointer that records no file name: nothing says which wheel it is
    pointer.write_bytes(uv_pointer("A1", wheel, " "))
    with pytest.raises(NemoRLError, match="1.0-00b06ae7f1096870.http is not one uv writes"):
        archive_hashes.check(cache, Project.read(project), "bundle b")
    # nothing says which archive it stands for: refused by name, never skipped
    pointer.write_bytes(b"\x00not a pointer")
    with pytest.raises(NemoRLError, match="1.0-00b06ae7f1096870.http is not one uv writes"):
        archive_hashes.check(cache, Project.read(project), "bundle b")
