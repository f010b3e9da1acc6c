"""Top-level `is_megatron_installed`, for code written against the upstream submodule layout."""

from nemo_rl.extras import probe

_probe = probe("megatron")
INSTALLED: bool = _probe.installed
REASON: str | None = _probe.reason
