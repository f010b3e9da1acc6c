"""Top-level `is_nemo_installed`, for code written against the upstream submodule layout."""

from nemo_rl.extras import probe

_probe = probe("nemo")
INSTALLED: bool = _probe.installed
REASON: str | None = _probe.reason
