"""Top-level `is_megatron_installed` module, kept for code written against the upstream submodule layout.

The wheel installs this file as a top-level module; editable installs reach it through dev-mode-dirs.
"""

from nemo_rl.extras import probe

_probe = probe("megatron")
INSTALLED: bool = _probe.installed
REASON: str | None = _probe.reason
