"""`nemo-rl toolchain cuda DIR` parsed (toolchain/cuda.py)."""

from __future__ import annotations

import pytest

from nemo_rl.cli import main


def test_a_bad_arch_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["toolchain", "cuda", str(tmp_path / "cuda"), "--arch", "sm_90"])
    assert exit_info.value.code == 2
