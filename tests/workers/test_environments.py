"""A worker environment's metadata record (workers.environments.WorkerEnv): written and read by itself, older
files (with keys no one reads) still read, and a file of the wrong shape refused with its path."""

from __future__ import annotations

import json

import pytest

from nemo_rl.errors import NemoRLError
from nemo_rl.workers.environments import META, WorkerEnv


def record(tmp_path) -> WorkerEnv:
    return WorkerEnv("k" * 24, tmp_path / ("k" * 24), ("--locked", "--extra", "mcore"), tmp_path / "project",
                     "f" * 64)


def test_the_record_reads_back_what_it_wrote_after_the_rename(tmp_path):
    env = record(tmp_path)
    staging = tmp_path / "staging"
    staging.mkdir()
    env.write(staging)
    staging.rename(env.path)  # built beside its final path, then renamed into place
    assert WorkerEnv.read(env.path) == env


def test_a_file_written_before_the_record_still_reads(tmp_path):
    env = record(tmp_path)
    env.path.mkdir()
    (env.path / META).write_text(json.dumps({"key": env.key, "flags": list(env.flags), "project": str(env.project),
                                             "lock_hash": env.lock_hash, "python": "3.12.1", "created": 1.0}))
    assert WorkerEnv.read(env.path) == env


def test_no_file_is_no_environment(tmp_path):
    assert WorkerEnv.read(tmp_path) is None


@pytest.mark.parametrize("change", [
    {"key": "another-key"}, {"flags": "--locked"}, {"flags": [1]}, {"lock_hash": None}, {"project": 3},
])
def test_metadata_of_the_wrong_shape_is_refused(tmp_path, change):
    env = record(tmp_path)
    env.write(tmp_path)
    env.path.mkdir()
    meta = {**json.loads((tmp_path / META).read_text()), **change}
    (env.path / META).write_text(json.dumps(meta))
    with pytest.raises(NemoRLError, match="is not worker-environment metadata") as caught:
        WorkerEnv.read(env.path)
    assert str(env.path) in caught.value.remedy


def test_unreadable_metadata_is_refused(tmp_path):
    (tmp_path / META).write_text("{not json")
    with pytest.raises(NemoRLError, match="cannot read"):
        WorkerEnv.read(tmp_path)
