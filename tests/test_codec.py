"""The record codec (nemo_rl/codec.py): one writer, one reader; another version or shape is rebuilt or refused."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from nemo_rl import codec
from nemo_rl.errors import NemoRLError


@dataclasses.dataclass(frozen=True)
class Inner:
    name: str
    size: int


@dataclasses.dataclass(frozen=True)
class Rec:
    path: Path
    names: tuple[str, ...]
    inner: Inner
    by_name: dict[str, Inner]
    ratio: float
    note: str | None = None


REC = Rec(Path("/a/b"), ("x", "y"), Inner("i", 3), {"k": Inner("j", 4)}, 0.5)


def test_a_record_reads_back_as_written_with_its_mode(tmp_path):
    codec.write(tmp_path / "r.json", REC, 2, mode=0o600)
    assert codec.read(tmp_path / "r.json", Rec, 2) == REC
    assert json.loads((tmp_path / "r.json").read_text())["version"] == 2
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16"])
def test_a_record_an_editor_saved_with_a_byte_order_mark_reads(tmp_path, encoding):
    codec.write(tmp_path / "r.json", REC, 2)
    (tmp_path / "r.json").write_text((tmp_path / "r.json").read_text(), encoding=encoding)
    assert codec.read(tmp_path / "r.json", Rec, 2, fix="rebuild") == REC


def test_a_missing_record_is_none(tmp_path):
    assert codec.read(tmp_path / "none.json", Rec, 1, fix="rebuild") is None


def test_a_record_of_another_version_is_rebuilt(tmp_path):
    codec.write(tmp_path / "r.json", REC, 1)
    assert codec.read(tmp_path / "r.json", Rec, 2) is None


def test_a_record_of_another_version_that_cannot_be_rebuilt_is_refused_with_its_fix(tmp_path):
    codec.write(tmp_path / "r.json", REC, 1)
    with pytest.raises(codec.AnotherVersion) as refused:
        codec.read(tmp_path / "r.json", Rec, 2, fix="remove it", name="a test record")
    assert refused.value.what == (f"{tmp_path / 'r.json'} is a test record of another nemo-rl (version 1; this one "
                                  "reads version 2)")
    assert refused.value.remedy == "remove it"


@pytest.mark.parametrize("edit", [
    lambda d: d.pop("names"),
    lambda d: d.update(extra=1),
    lambda d: d.update(names="xy"),
    lambda d: d["inner"].update(size="3"),
    lambda d: d["inner"].update(size=True),
    lambda d: d["by_name"].update(k=[]),
    lambda d: d.update(path=None),
    lambda d: d.update(names=["x", 1]),
], ids=["missing", "unknown", "not-a-list", "str-for-int", "bool-for-int", "list-for-object", "null-path",
        "int-in-tuple"])
def test_a_record_of_another_shape_is_rebuilt_or_refused_with_the_fix(tmp_path, edit):
    codec.write(tmp_path / "r.json", REC, 1)
    data = json.loads((tmp_path / "r.json").read_text())
    edit(data)
    (tmp_path / "r.json").write_text(json.dumps(data))
    assert codec.read(tmp_path / "r.json", Rec, 1) is None
    with pytest.raises(NemoRLError, match="is not the record nemo-rl writes") as refused:
        codec.read(tmp_path / "r.json", Rec, 1, fix=f"rm {tmp_path / 'r.json'}")
    os.system(refused.value.remedy or "")  # the fix, followed: the record is gone, so it is rebuilt
    assert codec.read(tmp_path / "r.json", Rec, 1, fix="unused") is None


@pytest.mark.parametrize("bad", [b"{", b"\xff", b"[" * 100_000])
def test_a_record_that_does_not_parse_is_rebuilt_or_refused(tmp_path, bad):
    (tmp_path / "r.json").write_bytes(bad)
    assert codec.read(tmp_path / "r.json", Rec, 1) is None
    with pytest.raises(NemoRLError, match="cannot read"):
        codec.read(tmp_path / "r.json", Rec, 1, fix="remove it")


def test_a_fifo_in_place_of_a_record_is_never_waited_on(tmp_path):
    os.mkfifo(tmp_path / "r.json")
    assert codec.read(tmp_path / "r.json", Rec, 1) is None


def test_an_int_reads_as_a_float_field(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps({"version": 1, "name": "n", "size": 1}))
    assert codec.read(tmp_path / "r.json", Inner, 1) == Inner("n", 1)
    (tmp_path / "r.json").write_text(json.dumps({"version": 1, **codec.plain(REC), "ratio": 1}))
    assert codec.read(tmp_path / "r.json", Rec, 1) == dataclasses.replace(REC, ratio=1.0)


@dataclasses.dataclass(frozen=True)
class FloatFirst:
    x: float | int
    by: dict[str, float | int]


@dataclasses.dataclass(frozen=True)
class IntFirst:
    x: int | float
    by: dict[str, int | float]


def test_a_union_is_tried_in_its_own_order_whatever_was_read_before(tmp_path):
    """`float | int` and `int | float` are equal types: neither may take the other's order."""
    for kind, value in ((FloatFirst, 1.0), (IntFirst, 1), (FloatFirst, 1.0)):
        codec.write(tmp_path / "r.json", kind(1, {"k": 1}), 1)
        read = codec.read(tmp_path / "r.json", kind, 1)
        assert (type(read.x), type(read.by["k"])) == (type(value), type(value))
