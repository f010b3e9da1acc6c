"""The mcore components, which of them work here, and `require`."""

from __future__ import annotations

import email.message
import email.parser
import functools
import importlib
import importlib.metadata
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from nemo_rl import settings, uv, values
from nemo_rl.errors import MissingExtraError, NemoRLError
from nemo_rl.project import lockfile
from nemo_rl.project.model import Project

SYNC_REMEDY = f"run `{uv.sync_command()}`"
TORCH_REMEDY = "run `uv sync` (torch is a base dependency)"


@dataclass(frozen=True)
class Component:
    key: str
    distribution: str
    module: str  # its import proves the component works
    remedy: str
    entry_points: tuple[str, ...] = ()  # further modules nemo-rl imports


# transformer_engine alone imports without its torch extension
NOT_FORKS = (
    Component("transformer_engine", "transformer-engine", "transformer_engine.pytorch",
              SYNC_REMEDY + "; its build needs a CUDA 12 nvcc and cuDNN headers"),
)


def of_fork(fork: lockfile.Fork) -> Component:
    remedy = f"{SYNC_REMEDY} {fork.remedy}" if fork.remedy else SYNC_REMEDY
    remedy = values.printable(remedy)  # guard: fork-remedy-printable
    return Component(fork.component or fork.distribution, fork.distribution,
                     fork.module or fork.distribution.replace("-", "_"), remedy, fork.entry_points)


def components(forks: Iterable[lockfile.Fork]) -> dict[str, Component]:
    """The project's components by key: the forks', then the others."""
    taken = {"torch", *(c.key for c in NOT_FORKS)}
    result: dict[str, Component] = {}
    for comp in map(of_fork, forks):
        if comp.key in result or comp.key in taken:  # guard: fork-component-names-are-unique
            where = f"[tool.nemo-rl.forks.{comp.distribution}]"
            raise NemoRLError(f"{where} component {comp.key!r} names another component",
                              f"set component in {where} to a free name "
                              f"(taken: {', '.join(sorted(taken | set(result)))})")
        result[comp.key] = comp
    return {**result, **{c.key: c for c in NOT_FORKS}}


def modules_to_import(forks: Iterable[lockfile.Fork], path: list[str] | None = None) -> list[str]:
    """The imports that prove the environment on `path` (None: sys.path) works."""
    return ["ray", *(c.module for c in components(forks).values()
                     if find_installed(c.distribution, path))]  # guard: proof-transformer-engine-imported-by-the


@functools.cache
def own() -> dict[str, Component]:
    """nemo-rl's own components, read once per process from its checkout."""
    return components(Project.read(settings.CHECKOUT_DIR).forks_as_pinned)


def component(key: str) -> Component:
    known = own()
    if key not in known:
        raise NemoRLError(f"unknown mcore component {key!r}", f"use one of: {', '.join(sorted(known))}")
    return known[key]


def remedy_for(key: str) -> str:
    """The fix for a component key, torch included."""
    return TORCH_REMEDY if key == "torch" else component(key).remedy


@dataclass(frozen=True)
class Probe:
    component: Component
    installed: bool  # importable and working
    present: bool  # its metadata exists
    version: str | None
    commit: str | None
    reason: str | None  # why `installed` is False

    def __bool__(self) -> bool:
        return self.installed


@dataclass(frozen=True)
class Installed:
    """A distribution as its metadata says it is installed."""

    version: str | None  # None: its metadata cannot be read
    commit: str | None  # from PEP 610 direct_url.json
    requires: tuple[str, ...] = ()


_METADATA_FILES = ("METADATA", "PKG-INFO")


def find_installed(distribution: str, path: list[str] | None = None) -> Installed | None:
    """`distribution` on `path` (None: sys.path), or None when absent."""
    found = (importlib.metadata.distributions(name=distribution) if path is None else
             importlib.metadata.distributions(name=distribution, path=path))
    return _first((dist, _headers(dist)) for dist in found)


def installed_on(path: list[str] | None = None) -> dict[str, Installed]:
    """Every distribution on `path` (None: sys.path) by PEP 503 name, chosen as find_installed chooses."""
    named: dict[str, list[tuple[importlib.metadata.Distribution, Any]]] = {}
    for dist in importlib.metadata.distributions(path=path) if path is not None else importlib.metadata.distributions():
        headers = _headers(dist)
        name = headers.get("Name") if headers is not None else None
        if not name:  # guard: installed-a-nameless-distribution-by-its-directory; as find_installed finds it
            name = _directory_name(dist)
        if name:
            named.setdefault(re.sub(r"[-_.]+", "-", name).lower(), []).append((dist, headers))
    return {key: found for key, candidates in named.items() if (found := _first(candidates)) is not None}


def _first(candidates: Iterable[tuple[importlib.metadata.Distribution, Any]]) -> Installed | None:
    """The first with a metadata file, readable or not, as Python imports it; else the first at all."""
    first = None
    for dist, headers in candidates:
        if headers is not None:
            return _installed(dist, headers)
        first = first or dist
    return None if first is None else _installed(first, email.message.Message())


def _directory_name(dist: importlib.metadata.Distribution) -> str | None:
    """The name of a `NAME-VERSION.dist-info` or `.egg-info` directory, or of the egg holding an `EGG-INFO`."""
    where = str(getattr(dist, "_path", "")).rstrip("/")
    base = os.path.basename(os.path.dirname(where) if os.path.basename(where) == "EGG-INFO" else where)
    stem, suffix = os.path.splitext(base)
    return stem.partition("-")[0] if suffix in (".dist-info", ".egg-info", ".egg") else None


def _headers(dist: importlib.metadata.Distribution) -> Any:
    """The metadata's headers, parsed once (never its description); empty where they cannot be read; None for a
    directory without a metadata file, as a cut-short install leaves."""
    try:
        text = dist.read_text("METADATA")
        text = dist.read_text("PKG-INFO") if text is None else text
        headers = dist.metadata if text is None else email.parser.HeaderParser().parsestr(text.partition("\n\n")[0])
    except (UnicodeDecodeError, OSError):
        return email.message.Message()
    where = str(getattr(dist, "_path", ""))
    if text is None and not len(headers) and not any(os.path.lexists(os.path.join(where, n)) for n in _METADATA_FILES):
        return None
    return headers


def _text(dist: importlib.metadata.Distribution, name: str) -> str | None:
    try:
        return dist.read_text(name)
    except (UnicodeDecodeError, OSError):  # a broken install reads as one without the file
        return None


def _installed(dist: importlib.metadata.Distribution, headers: Any) -> Installed:
    requires = headers.get_all("Requires-Dist")
    # only an egg-info's requires.txt adds to the headers; dist.requires would parse all of METADATA again
    if not requires and _text(dist, "requires.txt") is not None:
        try:
            requires = dist.requires
        except (UnicodeDecodeError, OSError):
            requires = None
    return Installed(headers.get("Version"), commit_from_direct_url(_text(dist, "direct_url.json")),
                     tuple(requires or ()))


def commit_from_direct_url(text: str | None) -> str | None:
    if not text:
        return None
    try:
        vcs_info = json.loads(text).get("vcs_info") or {}
        commit = vcs_info.get("commit_id")
    except (ValueError, AttributeError, RecursionError):
        return None
    return commit if isinstance(commit, str) else None


def probe(key: str) -> Probe:
    """Whether nemo-rl's own component `key` works here; never raises."""
    try:
        comp = component(key)
    except NemoRLError as exc:
        return Probe(Component(key, key, key, exc.remedy or SYNC_REMEDY), False, False, None, None, exc.what)  # guard: a-probe-never-raises
    return probe_component(comp)


@functools.cache
def probe_component(comp: Component) -> Probe:
    dist = find_installed(comp.distribution)
    if dist is None:
        return Probe(comp, False, False, None, None, f"{comp.distribution} is not installed")
    try:
        importlib.import_module(comp.module)
    # a half-working transformer-engine raises CalledProcessError, the wrong Python SyntaxError
    except (Exception, SystemExit) as exc:
        reason = f"import {comp.module} failed: {type(exc).__name__}: {exc}"
        return Probe(comp, False, True, dist.version, dist.commit, reason)
    return Probe(comp, True, True, dist.version, dist.commit, None)


def is_megatron_installed() -> bool:
    return probe("megatron").installed


def is_nemo_installed() -> bool:
    return probe("nemo").installed


def is_te_installed() -> bool:
    return probe("transformer_engine").installed


def require(*keys: str, purpose: str) -> None:
    """Raise MissingExtraError unless every component in `keys` imports and works."""
    failed = [probe(key) for key in keys if not probe(key).installed]
    if not failed:
        return
    missing = [p.component.distribution for p in failed]
    details = "; ".join(str(p.reason) for p in failed)
    remedies = "; ".join(dict.fromkeys(p.component.remedy for p in failed))
    raise MissingExtraError(f"{purpose} needs the mcore extra, but {', '.join(missing)} "
                            f"{'is' if len(missing) == 1 else 'are'} not usable ({details})", remedies, missing)
