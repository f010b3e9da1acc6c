"""On-disk records: frozen dataclasses as JSON with a `version`, never migrated."""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from pathlib import Path
from typing import Any

from nemo_rl import values
from nemo_rl.errors import NemoRLError
from nemo_rl.jsonout import SCALARS, plain
from nemo_rl.project import state_dir


class _Wrong(Exception):
    pass


READABLE_MAX = 1 << 16  # json's C encoder writes no indent: 5 times faster on a record of 35,000 files


class AnotherVersion(NemoRLError):
    """A record of another version: never read as absent."""


def write(path: Path, record: Any, version: int, *, mode: int | None = None, given: tuple[str, ...] = ()) -> None:
    """Write the dataclass `record` to `path` atomically, without the fields in `given`."""
    fields = {f.name: plain(getattr(record, f.name)) for f in dataclasses.fields(record) if f.name not in given}
    text = json.dumps({"version": version, **fields}, separators=(",", ":"), sort_keys=True)
    if len(text) < READABLE_MAX:  # indented for whoever opens it; a large one (a node copy's files) stays compact
        text = json.dumps({"version": version, **fields}, indent=1, sort_keys=True)
    state_dir.write_atomic(path, text, mode=mode)


def read[T](file: Path, kind: type[T], version: int, *, fix: str | None = None, name: str = "the record nemo-rl writes",
             size_limit: int = values.STATE_FILE_MAX, **given: Any) -> T | None:
    """The record at `file`, or None when missing or unreadable; with `fix`, an unreadable one raises NemoRLError
    (AnotherVersion for another version). `given`: the fields write left out."""
    try:
        data = values.state_json(file, fix or "", limit=size_limit)
    except FileNotFoundError:
        return None
    except NemoRLError:
        if fix is None:
            return None
        raise
    if isinstance(data, dict) and data.get("version") != version:  # guard: codec-another-version-is-rebuilt
        if fix is None:
            return None
        found = f"version {data['version']!r:.20}" if "version" in data else "no version"
        raise AnotherVersion(f"{file} is {name} of another nemo-rl ({found}; this one reads version {version})",  # guard: codec-another-version-is-refused-with-the-fix
                             fix)
    fields = {k: v for k, v in data.items() if k != "version"} if isinstance(data, dict) else data
    try:
        return _value(kind, fields, given)
    except _Wrong as exc:
        if fix is None:
            return None
        raise NemoRLError(f"{file} is not {name} ({exc})", fix) from exc


@functools.cache
def _fields(kind: type) -> tuple[tuple[str, Any, bool], ...]:
    hints, missing = typing.get_type_hints(kind), dataclasses.MISSING
    return tuple((f.name, hints[f.name], f.default is missing and f.default_factory is missing)
                 for f in dataclasses.fields(kind))


def _value(kind: Any, data: Any, given: dict[str, Any] | None = None) -> Any:
    if type(data) is kind and kind in SCALARS:
        return data
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    fields = _fields(kind) if isinstance(kind, type) and dataclasses.is_dataclass(kind) else None
    if fields is not None:
        if not isinstance(data, dict):
            raise _Wrong(f"{kind.__name__}: not an object")
        given = dict(given or {})
        for name, hint, required in fields:
            if name in given:
                continue
            if name in data:
                try:
                    given[name] = _value(hint, data[name])
                except _Wrong as exc:
                    raise _Wrong(f"{name}: {exc}") from None
            elif required:
                raise _Wrong(f"no {name}")
        if set(data) - set(given):  # guard: codec-an-unknown-field-is-another-shape
            raise _Wrong(f"unknown {', '.join(sorted(set(data) - set(given)))}")
        return kind(**given)
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            try:
                return _value(arg, data)
            except _Wrong:
                continue
        raise _Wrong(f"{data!r:.40} is none of {kind}")
    if origin is tuple:
        if not isinstance(data, list) or (args[-1:] != (...,) and len(args) != len(data)):
            raise _Wrong(f"{data!r:.40} is not a {kind}")
        items = [args[0]] * len(data) if args[-1:] == (...,) else list(args)
        return tuple([_value(a, v) for a, v in zip(items, data, strict=True)])
    if origin is list:
        if not isinstance(data, list):
            raise _Wrong(f"{data!r:.40} is not a list")
        return [_value(args[0], v) for v in data]
    if origin is dict:
        if not isinstance(data, dict):
            raise _Wrong(f"{data!r:.40} is not an object")
        return {k: _value(args[1], v) for k, v in data.items()}
    if kind is Path:
        if not isinstance(data, str):
            raise _Wrong(f"{data!r:.40} is not a path")
        return Path(data)
    if kind is Any:
        return data
    if kind is float and type(data) is int:
        return float(data)
    if type(data) is not kind or kind not in SCALARS:  # guard: codec-a-field-of-another-type
        raise _Wrong(f"{data!r:.40} is not a {getattr(kind, '__name__', kind)}")
    return data
