"""Top-level `is_megatron_installed` module, kept for code written against the upstream submodule layout.

The wheel installs this file as a top-level module (pyproject.toml's force-include; editable installs
get a copy too).
"""

from nemo_rl.extras import probe

_probe = probe("megatron")
INSTALLED: bool = _probe.installed
REASON: str | None = _probe.reason
