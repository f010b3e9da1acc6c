"""`nemo-rl toolchain cuda DIR` parsed (toolchain/cuda.py)."""

from __future__ import annotations

import pytest

from nemo_rl.cli import main


def test_a_bad_arch_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["toolchain", "cuda", str(tmp_path / "cuda"), "--arch", "sm_90"])
    assert exit_info.value.code == 2


def test_the_printed_exports_hold_max_jobs_and_the_preflight_comes_before_the_build(tmp_path, monkeypatch, capsys):
    import os

    from nemo_rl.toolchain import assemble

    home = tmp_path / "cuda"

    def assembled(directory, **kwargs):  # what a verified toolkit returns; its making is tested in test_assemble.py
        return assemble.Toolkit(directory, "12.4", kwargs["arch"], (kwargs["arch"],), {"nvidia-cuda-toolkit": "12.4"},
                                True)

    monkeypatch.setattr(assemble, "assemble", assembled)
    assert main(["toolchain", "cuda", str(home), "--arch", "80"]) == 0
    lines = [line.strip() for line in capsys.readouterr().out.splitlines()]
    exports = next(line for line in lines if line.startswith("export CUDA_HOME="))
    assert exports == (f"export CUDA_HOME={home} PATH={home}/bin:$PATH NVTE_CUDA_ARCHS=80 "
                       f"MAX_JOBS={len(os.sched_getaffinity(0))}")
    preflight = lines.index("uv run nemo-rl doctor --extra mcore --preflight   # go (exit 0) before the long build")
    assert preflight < lines.index("uv sync --locked --extra mcore")
