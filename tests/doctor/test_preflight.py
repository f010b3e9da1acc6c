"""The build preflight (doctor/preflight.py): what it says when nvcc or the cuDNN headers are missing."""

from __future__ import annotations

import sys

import pytest


def test_the_preflight_names_the_command_when_nvcc_is_missing(tmp_path, monkeypatch):
    from nemo_rl.doctor import preflight

    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    item, toolkit = preflight.check_nvcc("12.6")
    if item.ok:
        pytest.skip(f"/usr/local/cuda holds a CUDA 12 nvcc: {item.detail}")
    # none at all, or /usr/local/cuda of another major (a CUDA 13 beside torch's 12)
    assert toolkit.nvcc is None or "torch was built with CUDA 12.6" in item.detail
    assert "`uv run nemo-rl toolchain cuda ~/cuda-12 --arch 90`" in item.fix


def test_cudnn_headers_only_in_the_wheel_fail_with_the_export_line(tmp_path, monkeypatch):
    """uv builds transformer-engine in an isolated environment: the wheel's headers count once CUDNN_PATH names
    them, as torch's extension build adds $CUDNN_PATH/include."""
    from nemo_rl.doctor import preflight

    wheel = tmp_path / "site" / "nvidia" / "cudnn"
    (wheel / "include").mkdir(parents=True)
    (wheel / "include" / "cudnn_version.h").write_text("#define CUDNN_MAJOR 9\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site")])
    for name in ("CUDNN_PATH", "CUDNN_HOME", "CUDA_HOME", "CPATH"):
        monkeypatch.delenv(name, raising=False)
    from nemo_rl.toolchain import layout

    if any(layout.has_cudnn_header(d) for d in preflight.SYSTEM_HEADER_DIRS):
        pytest.skip("cuDNN headers are installed system-wide here")
    item = preflight.check_cudnn()
    assert not item.ok and f"`export CUDNN_PATH={wheel}`" in item.fix
    monkeypatch.setenv("CUDNN_PATH", str(wheel))
    assert preflight.check_cudnn().ok


def test_a_real_nvcc_is_asked_to_compile_for_each_declared_arch(monkeypatch):
    from nemo_rl import toolchain
    from nemo_rl.doctor import preflight

    nvcc = toolchain.find_nvcc()
    version = toolchain.nvcc_version(nvcc)
    if version is None or not version.startswith("12.") or int(version.split(".")[1]) >= 8:
        pytest.skip("needs a CUDA 12 nvcc older than 12.8, which knows no sm_100 (set CUDA_HOME; "
                    "`nemo-rl toolchain cuda DIR` makes one)")
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("NVTE_CUDA_ARCHS", "90;100")
    item = preflight.check_archs(nvcc, version, compiles=True)
    assert not item.ok and "cannot compile for sm_100" in item.detail and "--list-gpu-arch" in (item.fix or "")
    monkeypatch.setenv("NVTE_CUDA_ARCHS", "90")  # the fix: architectures it knows
    assert preflight.check_archs(nvcc, version, compiles=True).ok


def test_the_archs_the_preflight_shows_are_those_of_the_nvcc_it_found(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from nemo_rl.doctor import preflight

    nvcc = tmp_path / "cuda" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.8, V12.8.93'\n")
    nvcc.chmod(0o755)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    monkeypatch.delenv("NVTE_CUDA_ARCHS", raising=False)
    python = SimpleNamespace(satisfied=True, version="3.12", requires_python=None)
    items = preflight.run_all(None, python, SimpleNamespace(installed=True, cuda_version="12.6"))
    archs = next(item for item in items if item.name == "gpu architectures")
    assert "builds for 70;80;89;90;100;120" in archs.detail  # 12.8's defaults; an unknown version's lack 100
