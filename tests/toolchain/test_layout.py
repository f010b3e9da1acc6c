"""The CUDA_HOME layout made from Debian's package tree (toolchain/layout.py): relocatable, a missing compiler named,
only the links it made swept."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from fakes import fake_package_tree

from nemo_rl.toolchain import layout


def test_the_layout_is_a_relocatable_cuda_home(tmp_path):
    root, home = tmp_path / "root", tmp_path / "home"
    fake_package_tree(root, "x86_64-linux-gnu")
    assert layout.arrange(root, home, "x86_64-linux-gnu") == []
    # the real nvcc, not Debian's wrapper that calls /usr/lib/... by absolute path
    assert (home / "bin/nvcc").read_text() == "usr/lib/nvidia-cuda-toolkit/bin/nvcc"
    assert os.readlink(home / "lib64/libcudart.so") == "libcudart.so.12.4.127"
    assert os.readlink(home / "nvvm/lib64/libnvvm.so") == "libnvvm.so.4.0.0"
    assert not (home / "lib64/libnvrtc.so").is_symlink()  # dangling: transformer-engine's import would load it
    profile = (home / "bin/nvcc.profile").read_text()
    assert not (home / "bin/nvcc.profile").is_symlink() and "/usr" not in profile and "$(_HERE_)" in profile
    moved = tmp_path / "moved"
    shutil.move(home, moved)
    assert layout.missing(moved) == []
    assert arranged_again(root, moved) == []  # idempotent: arranging over a finished layout changes nothing


def arranged_again(root: Path, home: Path) -> list[str]:
    return layout.arrange(root, home, "x86_64-linux-gnu")


def test_a_package_tree_without_the_compiler_is_named(tmp_path):
    root, home = tmp_path / "root", tmp_path / "home"
    fake_package_tree(root, "x86_64-linux-gnu")
    (root / "usr/lib/nvidia-cuda-toolkit/bin/cicc").unlink()
    assert layout.arrange(root, home, "x86_64-linux-gnu") == ["nvvm/bin/cicc"]


def test_only_links_the_layout_made_are_swept(tmp_path):
    root, home = tmp_path / "root", tmp_path / "home"
    fake_package_tree(root, "x86_64-linux-gnu")
    (home / "lib64").mkdir(parents=True)
    os.symlink("not-yet-there.so", home / "lib64" / "mine.so")  # not the layout's: never deleted
    assert layout.arrange(root, home, "x86_64-linux-gnu") == []
    assert (home / "lib64" / "mine.so").is_symlink()
    assert not (home / "lib64" / "libnvrtc.so").is_symlink()  # the layout's own dangling link is
