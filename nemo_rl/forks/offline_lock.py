"""A bump keeps uv's offline lock only when it moves the fork and nothing else."""

from __future__ import annotations

import tomllib
from typing import Any

Doc = dict[str, Any]


def rejected(committed: str, offline: str, distribution: str, old_rev: str, new_rev: str) -> str | None:
    """Why `offline` is not the committed lock with only the fork moved, or None."""
    try:
        old = tomllib.loads(committed.replace(old_rev, new_rev))  # guard: offline-lock-the-committed-lock-s-sha
    except tomllib.TOMLDecodeError as exc:
        return f"the committed uv.lock does not parse ({exc})"
    try:
        new = tomllib.loads(offline)
    except tomllib.TOMLDecodeError as exc:
        return f"uv wrote a uv.lock that does not parse ({exc})"
    for key in sorted((old.keys() | new.keys()) - {"package", "manifest"}):
        if old.get(key) != new.get(key):  # guard: offline-lock-the-header-compared
            return f"it changed uv.lock's {key!r}"
    if _manifest_rest(old, distribution) != _manifest_rest(new, distribution):  # guard: offline-lock-the-manifest-compared
        return "it changed uv.lock's [manifest] beyond the fork's entry"
    old_fork, old_rest = _packages(old, distribution)
    new_fork, new_rest = _packages(new, distribution)
    committed_by_name: dict[Any, list[Doc]] = {}
    for package in old_rest:
        committed_by_name.setdefault(package.get("name"), []).append(package)
    for package in new_rest:
        if package not in committed_by_name.get(package.get("name"), []):  # guard: offline-lock-no-package-added-or-moved
            return f"it adds or changes {package.get('name')} {package.get('version')}"  # guard: offline-lock-the-reason-names-the
    if len(old_fork) != 1 or len(new_fork) != 1:  # guard: offline-lock-the-fork-locked-once
        return f"it locks {distribution} {len(new_fork)} time(s), the committed lock {len(old_fork)}"
    if new_fork[0].get("source") != old_fork[0].get("source"):  # guard: offline-lock-the-fork-at-the-new-commit
        return f"it locks {distribution} from {new_fork[0].get('source')}, not {old_fork[0].get('source')}"
    return None


def _manifest_rest(doc: Doc, distribution: str) -> Doc:
    manifest = dict(doc.get("manifest", {}))
    manifest["dependency-metadata"] = [e for e in manifest.get("dependency-metadata", [])
                                       if e.get("name") != distribution]  # guard: offline-lock-the-manifest-s-other
    return manifest


def _packages(doc: Doc, distribution: str) -> tuple[list[Doc], list[Doc]]:
    packages = doc.get("package", [])
    return ([p for p in packages if p.get("name") == distribution],
            [p for p in packages if p.get("name") != distribution])
