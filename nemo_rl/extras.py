"""What of the mcore extra is installed, at which commit, and the one guard every Megatron/NeMo path uses.

Probes never raise: a half-working transformer-engine raises CalledProcessError (not ImportError) from
`import megatron.core` on machines without CUDA libraries, so they catch Exception and keep the reason.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import json
from dataclasses import dataclass

from nemo_rl.errors import MissingExtraError

SYNC_REMEDY = "run `uv sync --extra mcore`, or prefix your command with `uv run --extra mcore`"


@dataclass(frozen=True)
class Component:
    key: str
    distribution: str
    module: str


COMPONENTS: dict[str, Component] = {
    "megatron": Component("megatron", "megatron-core", "megatron.core"),
    "nemo": Component("nemo", "nemo-toolkit", "nemo"),
    # transformer_engine alone imports without its torch extension; .pytorch is what Megatron uses.
    "transformer_engine": Component("transformer_engine", "transformer-engine", "transformer_engine.pytorch"),
}


@dataclass(frozen=True)
class Probe:
    component: Component
    installed: bool  # importable and working
    present: bool  # the distribution's metadata exists, working or not
    version: str | None
    commit: str | None
    reason: str | None  # why `installed` is False

    def __bool__(self) -> bool:
        return self.installed


def _distribution(name: str) -> importlib.metadata.Distribution | None:
    try:
        return importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def installed_commit(distribution: str) -> str | None:
    """The git commit a distribution was installed from (PEP 610 direct_url.json), else None."""
    dist = _distribution(distribution)
    return commit_from_direct_url(dist.read_text("direct_url.json")) if dist else None


def commit_from_direct_url(text: str | None) -> str | None:
    if not text:
        return None
    try:
        vcs_info = json.loads(text).get("vcs_info") or {}
    except (ValueError, AttributeError):
        return None
    commit = vcs_info.get("commit_id")
    return commit if isinstance(commit, str) else None


def _is_missing_module(exc: ModuleNotFoundError, module: str) -> bool:
    parts = module.split(".")
    return exc.name in {".".join(parts[: i + 1]) for i in range(len(parts))}


@functools.cache
def probe(key: str) -> Probe:
    component = COMPONENTS[key]
    dist = _distribution(component.distribution)
    version = dist.version if dist else None
    commit = commit_from_direct_url(dist.read_text("direct_url.json")) if dist else None
    try:
        importlib.import_module(component.module)
    except ModuleNotFoundError as exc:
        if dist is None and _is_missing_module(exc, component.module):
            reason = f"{component.distribution} is not installed"
        else:  # a dependency of an installed package is missing: a broken install, not an absent one
            reason = f"import {component.module} failed: {type(exc).__name__}: {exc}"
        return Probe(component, False, dist is not None, version, commit, reason)
    except (Exception, SystemExit) as exc:
        reason = f"import {component.module} failed: {type(exc).__name__}: {exc}"
        return Probe(component, False, dist is not None, version, commit, reason)
    return Probe(component, True, dist is not None, version, commit, None)


def is_megatron_installed() -> bool:
    return probe("megatron").installed


def is_nemo_installed() -> bool:
    return probe("nemo").installed


def is_te_installed() -> bool:
    return probe("transformer_engine").installed


def require(*keys: str, purpose: str) -> None:
    """Raise MissingExtraError unless every component in `keys` imports and works.

    Called first by every Megatron/NeMo code path, so a missing or broken extra never surfaces as a
    raw ImportError traceback from deep inside a model builder.
    """
    failed = [probe(key) for key in keys if not probe(key).installed]
    if not failed:
        return
    missing = [p.component.distribution for p in failed]
    details = "; ".join(str(p.reason) for p in failed)
    raise MissingExtraError(
        f"{purpose} needs the mcore extra, but {', '.join(missing)} "
        f"{'is' if len(missing) == 1 else 'are'} not usable ({details})",
        f"{SYNC_REMEDY}; `nemo-rl doctor --extra mcore` shows what is installed and why it fails",
        missing,
    )
