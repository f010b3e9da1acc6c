"""The CUDA toolkit assembled under a directory (cudakit/assemble.py): its stamp read through the plain-file
reader."""

from __future__ import annotations

import os

from fakes import _never_hangs


def test_a_fifo_toolkit_stamp_is_no_stamp(tmp_path):
    from nemo_rl.cudakit import assemble

    os.mkfifo(tmp_path / assemble.STAMP)
    assert _never_hangs(f"from pathlib import Path; from nemo_rl.cudakit import assemble; "
                        f"print(assemble._stamp(Path({str(tmp_path)!r})))") == "None"
