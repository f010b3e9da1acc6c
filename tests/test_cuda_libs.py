"""Loading the CUDA wheels' libraries before transformer-engine's import, and naming the one the loader lacks.
The real import of transformer_engine.pytorch on a CPU machine is in the cuda_toolkit tier (test_mcore_build.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from nemo_rl import cuda_libs, extras, toolchain
from nemo_rl.doctor import report
from nemo_rl.project.model import Project

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def wheels(tmp_path, monkeypatch):
    """A site-packages directory with nvidia/<wheel>/lib layouts, first on sys.path; preload's cache cleared."""
    site = tmp_path / "site"
    for name in ("cuda_nvrtc", "cudnn"):
        (site / "nvidia" / name / "lib").mkdir(parents=True)
    (site / "nvidia/cuda_nvrtc/lib/libnvrtc.so.12").write_bytes(b"not an ELF file")
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    cuda_libs.preload.cache_clear()
    yield site
    cuda_libs.preload.cache_clear()


def test_preload_loads_by_path_and_never_raises(wheels):
    libz = next((p for p in ("/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1",
                             "/lib/aarch64-linux-gnu/libz.so.1") if os.path.exists(p)), None)
    if libz is None:
        pytest.skip("needs a libz.so.1 to stand in for a CUDA library")
    os.symlink(libz, wheels / "nvidia/cudnn/lib/libcudnn.so.9")
    done = cuda_libs.preload()
    assert "libcudnn.so.9" in done.loaded
    assert "libnvrtc.so.12" in done.failed and "libnvrtc.so.12" not in done.loaded  # kept, not raised


def test_cuda_home_points_at_the_nvrtc_wheel_for_the_import_only(wheels, tmp_path, monkeypatch):
    debian = tmp_path / "cuda"  # a toolkit from Debian's packages: no libnvrtc.so.12 in it
    (debian / "lib64").mkdir(parents=True)
    os.symlink("libnvrtc.so.12", debian / "lib64" / "libnvrtc.so")  # dangling
    monkeypatch.setenv("CUDA_HOME", str(debian))
    with cuda_libs.for_transformer_engine():
        assert os.environ["CUDA_HOME"] == str(wheels / "nvidia" / "cuda_nvrtc")
    assert os.environ["CUDA_HOME"] == str(debian)
    (debian / "lib64" / "libnvrtc.so.12").write_bytes(b"a real one")  # NVIDIA's toolkit has it: left alone
    with cuda_libs.for_transformer_engine():
        assert os.environ["CUDA_HOME"] == str(debian)
    monkeypatch.delenv("CUDA_HOME")
    monkeypatch.delenv("CUDA_PATH", raising=False)
    if cuda_libs._has_nvrtc("/usr/local/cuda"):
        return
    with cuda_libs.for_transformer_engine():
        assert os.environ["CUDA_HOME"] == str(wheels / "nvidia" / "cuda_nvrtc")
    assert "CUDA_HOME" not in os.environ


@pytest.mark.parametrize("reason, library, words", [
    ("import transformer_engine.pytorch failed: OSError: libcublas.so.12: cannot open shared object file: No such "
     "file or directory", "libcublas.so.12", "nvidia-cublas-cu12"),
    ("import transformer_engine.pytorch failed: CalledProcessError: Command 'ldconfig -p | grep 'libnvrtc'' returned "
     "non-zero exit status 1.", "libnvrtc.so.12", "nvidia-cuda-nvrtc-cu12"),
    ("OSError: libcuda.so.1: cannot open shared object file: No such file or directory", "libcuda.so.1", "driver"),
    ("OSError: libfoo.so.3: cannot open shared object file", "libfoo.so.3", "LD_LIBRARY_PATH"),
])
def test_doctor_names_the_missing_library_and_the_fix(reason, library, words):
    found = cuda_libs.missing_library(reason)
    assert found is not None and found[0] == library and words in found[1]
    probe = extras.Probe(extras.component("transformer_engine"), False, True, "2.3.0", None, reason)
    state, remedy = report.component_state(probe, None)
    assert state == "broken" and f"the loader cannot find {library}" in remedy


def test_an_unrelated_import_failure_keeps_the_sync_remedy():
    assert cuda_libs.missing_library("ModuleNotFoundError: No module named 'einops'") is None
    probe = extras.Probe(extras.component("transformer_engine"), False, True, "2.3.0", None, "No module 'einops'")
    assert report.component_state(probe, None)[1].startswith(extras.SYNC_REMEDY)


@pytest.mark.parametrize("gpu", [False, True])
def test_a_working_transformer_engine_without_a_gpu_says_what_was_not_checked(gpu, monkeypatch):
    monkeypatch.setattr(report.extras, "probe_component",
                        lambda component: extras.Probe(component, True, True, "1", None, None))
    monkeypatch.setattr(report.toolchain, "torch_info",
                        lambda: toolchain.TorchInfo(True, "2.7.0", gpu, "12.6", None))
    notes = report.collect(Project.read(ROOT), "mcore").notes
    assert (report.NO_GPU_NOTE in notes) is not gpu


def test_cuda_home_at_usr_is_not_walked(tmp_path):
    """CUDA_HOME=/usr (Debian's own CUDA): the toolkit's library directories are looked at, never the whole tree
    (a recursive glob follows /usr/bin/X11 -> /usr/bin for ever)."""
    from nemo_rl import cuda_libs

    loop = tmp_path / "home" / "bin"
    loop.mkdir(parents=True)
    (loop / "X11").symlink_to(loop)
    deep = tmp_path / "home" / "share" / "deep"
    deep.mkdir(parents=True)
    (deep / "libnvrtc.so.12").write_text("")  # not where a toolkit keeps it
    assert not cuda_libs._has_nvrtc(str(tmp_path / "home"))
    (tmp_path / "home" / "lib64").mkdir()
    (tmp_path / "home" / "lib64" / "libnvrtc.so.12").write_text("")
    assert cuda_libs._has_nvrtc(str(tmp_path / "home"))
