"""What an environment says about the fork installed in it (forks/installed_fork.py): its pyvenv.cfg read
through the plain-file reader."""

from __future__ import annotations

import os
import sys

from fakes import _never_hangs


def test_a_fifo_pyvenv_cfg_gives_this_machines_markers(tmp_path):
    os.mkfifo(tmp_path / "pyvenv.cfg")
    out = _never_hangs(f"from pathlib import Path; from nemo_rl.forks import installed_fork; "
                       f"print(installed_fork._markers(Path({str(tmp_path)!r}))['python_version'])")
    assert out == f"{sys.version_info.major}.{sys.version_info.minor}"
