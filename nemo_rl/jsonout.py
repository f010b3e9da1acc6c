"""JSON from the typed results (frozen dataclasses), made in one place."""

from __future__ import annotations

import dataclasses
import json
from pathlib import PurePath

SCALARS = frozenset((str, int, float, bool, type(None)))


def plain(value: object) -> object:
    if type(value) in SCALARS:
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def dumps(value: object) -> str:
    return json.dumps(plain(value), indent=2)
