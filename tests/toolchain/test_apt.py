"""apt on its private state (toolchain/apt.py), and what `nemo-rl toolchain cuda` says without apt."""

from __future__ import annotations

import os
from pathlib import Path

from nemo_rl.cli import main
from nemo_rl.toolchain import apt


def test_apt_reads_and_writes_only_its_private_state(tmp_path):
    options = apt.options(tmp_path)
    pairs = dict(o.split("=", 1) for o in options[1::2])
    assert pairs["Dir::Etc::SourceList"] == os.devnull  # the machine's lists are never read
    assert pairs["Dir::State::Status"] == os.devnull  # nor its installed packages
    assert pairs["Dir::Etc::Preferences"] == os.devnull  # nor its pins
    for key in ("Dir::State", "Dir::State::Lists", "Dir::Cache", "Dir::Cache::Archives", "Dir::Etc::SourceParts"):
        assert Path(pairs[key]).is_relative_to(tmp_path), key
    assert apt.versions([Path("libnvvm4_12.4.131~12.4.1-2_amd64.deb"), Path("x_1%3a2.0-1_all.deb")]) == {
        "libnvvm4": "12.4.131~12.4.1-2", "x": "1:2.0-1"}


def test_without_apt_it_says_what_to_do(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert main(["toolchain", "cuda", str(tmp_path / "cuda")]) == 1
    err = capsys.readouterr().err
    assert "apt-get and dpkg-deb are needed" in err and "--debs" in err and "nvidia-cuda-toolkit" in err
