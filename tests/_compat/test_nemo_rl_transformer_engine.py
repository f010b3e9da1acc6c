"""The import hook every environment holding nemo-rl gets: a plain `import transformer_engine` runs inside
`nemo_rl.cuda_libs.for_transformer_engine()`. A stand-in transformer_engine records what its loader would see."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPAT = ROOT / "nemo_rl" / "_compat"

# transformer_engine 2.3's layout: the package imports `common`, whose import looks for NVRTC under CUDA_HOME
FAKE_TE = {
    "transformer_engine/__init__.py": "from transformer_engine import common\n",
    "transformer_engine/common/__init__.py": "import os\nCUDA_HOME = os.environ.get('CUDA_HOME')\n",
}


@pytest.fixture
def site(tmp_path):
    """A site directory as nemo-rl's wheel fills it: the hook's .pth (nemo_rl comes from PYTHONPATH), and a stand-in
    transformer_engine beside the nvidia-cuda-nvrtc-cu12 wheel's layout."""
    site = tmp_path / "site"
    (site / "nvidia" / "cuda_nvrtc" / "lib").mkdir(parents=True)
    shutil.copy(COMPAT / "nemo_rl_transformer_engine.pth", site / "nemo_rl_transformer_engine.pth")
    for name, text in FAKE_TE.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    return site


def run_python(site: Path, code: str, cuda_home: Path) -> list[str]:
    """`code` in a fresh interpreter that adds `site` as a site directory (its .pth files run) and imports
    nemo_rl from this checkout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_HOME": str(cuda_home)}
    env.pop("CUDA_PATH", None)
    script = f"import site; site.addsitedir({str(site)!r}); {code}"
    return subprocess.run([sys.executable, "-S", "-c", script], env=env, capture_output=True, text=True,
                          check=True).stdout.split()


def test_a_plain_import_finds_nvrtc_in_the_wheel_and_leaves_cuda_home_as_it_was(site, tmp_path):
    toolkit = tmp_path / "cuda"  # a toolkit from Debian's packages: no libnvrtc in it
    (toolkit / "lib64").mkdir(parents=True)
    seen = run_python(site, "import os, transformer_engine; "
                      "print(transformer_engine.common.CUDA_HOME, os.environ['CUDA_HOME'])", toolkit)
    assert seen == [str(site / "nvidia" / "cuda_nvrtc"), str(toolkit)]


def test_the_hook_leaves_other_imports_to_the_path_finder(site, tmp_path):
    seen = run_python(site, "import json, transformer_engine.common as c; print(type(json.__loader__).__name__, "
                      "type(c.__loader__).__name__)", tmp_path)
    assert seen == ["SourceFileLoader", "_Loader"]


def test_the_checkout_environment_runs_the_checkouts_own_hook():
    """`uv sync` installs nemo-rl editable: the .pth comes with it (pyproject.toml's force-include) and imports
    the hook from the checkout's source, so an edit to it takes effect without a reinstall."""
    out = subprocess.run([sys.executable, "-c", "import sys; print(*[sys.modules[f.__module__].__file__ "
                          "for f in sys.meta_path if f.__module__.startswith('nemo_rl')])"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == [str(COMPAT / "nemo_rl_transformer_engine.py")]
