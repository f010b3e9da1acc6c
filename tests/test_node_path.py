"""nemo-rl's node path runs on the standard library: `uv run --no-project --offline python -m nemo_rl envs build
... --from BUNDLE` starts in a Python with nothing installed, before the bundle made the checkout's `.venv`. A
module-level import of a third-party package anywhere on that path crashes the documented command (exit 3)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_cli_and_the_node_build_import_with_the_standard_library_alone():
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from nemo_rl import cli; cli.build_parser(); "
            "import nemo_rl.envs.command, nemo_rl.workers.bundles, nemo_rl.workers.environments; "
            "import nemo_rl.workers.verified; "
            "bad = sorted(m for m in ('packaging', 'tomlkit', 'ray', 'pyproject_hooks') if m in sys.modules); "
            "print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([str(base), "-I", "-S", "-c", code, str(ROOT)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
