"""The archives a uv cache holds, held against uv.lock's hashes (workers/archive_hashes.py): each pointer is matched to
the locked file it records, and one that names no locked file or none at all is refused by name."""

from __future__ import annotations

import pytest
from fakes import uv_pointer

from nemo_rl.errors import NemoRLError
from nemo_rl.workers import archive_hashes

MANY_TAGS = "cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.manylinux_2_28_x86_64"
LOCK = """\
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
    (project / "uv.lock").write_text(LOCK.format(wheel=wheel))
    pointer = cache / "wheels-v8/pypi/tiny-pkg/1.0-00b06ae7f1096870.http"
    pointer.parent.mkdir(parents=True)
    uv_order = "cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64"  # uv sorts the tags
    pointer.write_bytes(uv_pointer("A1", wheel, f"tiny_pkg-1.0-{uv_order}.whl"))
    build = cache / "wheels-v8/pypi/setuptools/80.0-py3-none-any.http"  # a build requirement uv.lock does not name
    build.parent.mkdir(parents=True)
    build.write_bytes(uv_pointer("A2", "3" * 64, "setuptools-80.0-py3-none-any.whl"))
    assert archive_hashes.check(cache, project, "bundle b") == (1, ["setuptools-80.0-py3-none-any.whl"])
    pointer.write_bytes(uv_pointer("A1", "0" * 64, f"tiny_pkg-1.0-{uv_order}.whl"))
    with pytest.raises(NemoRLError, match=f"archive of Tiny_Pkg .* records sha256 {'0' * 64}, but uv.lock pins"):
        archive_hashes.check(cache, project, "bundle b")
    # where uv looks up the locked wheel, another wheel of that version: uv.lock names no such file
    pointer.write_bytes(uv_pointer("A1", "0" * 64, "tiny_pkg-1.0-py3-none-any.whl"))
    with pytest.raises(NemoRLError, match="records 'tiny_pkg-1.0-py3-none-any.whl', a wheel uv.lock does not name"):
        archive_hashes.check(cache, project, "bundle b")
    # a wheel's pointer that records no file name: nothing says which wheel it is
    pointer.write_bytes(uv_pointer("A1", wheel, " "))
    with pytest.raises(NemoRLError, match="1.0-00b06ae7f1096870.http is not one uv writes"):
        archive_hashes.check(cache, project, "bundle b")
    # nothing says which archive it stands for: refused by name, never skipped
    pointer.write_bytes(b"\x00not a pointer")
    with pytest.raises(NemoRLError, match="1.0-00b06ae7f1096870.http is not one uv writes"):
        archive_hashes.check(cache, project, "bundle b")
