"""Bytecode of a worker environment: where Python puts it by default (the store is private to its user)."""

from __future__ import annotations

from pathlib import Path


def install(env: Path, sites: list[Path]) -> None:
    """Nothing to install: `__pycache__` beside the sources is only this user's to write."""


def problem(env: Path, sites: list[Path]) -> str | None:
    """None: no bytecode setting can be wrong."""
    return None
