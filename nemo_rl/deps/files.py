"""Atomic writes, and an all-or-nothing change over several files (pyproject.toml, uv.lock, patches/<dist>/)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write through a temporary file in the same directory, then os.replace: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class Transaction:
    """Snapshot files (and every file under some directories) and put them back byte for byte on failure.

    Used as a context manager: any exception, KeyboardInterrupt included, restores the snapshot and
    re-raises. `rollback()` does the same on purpose (`--dry-run`).
    """

    def __init__(self, files: list[Path], directories: list[Path]) -> None:
        self.directories = directories
        self.snapshot: dict[Path, bytes | None] = {f: (f.read_bytes() if f.exists() else None) for f in files}
        for directory in directories:
            for f in directory.rglob("*") if directory.exists() else ():
                if f.is_file():
                    self.snapshot[f] = f.read_bytes()
        self.created_dirs = [d for d in directories if not d.exists()]

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None:
            self.rollback()
        return False

    def rollback(self) -> None:
        for directory in self.directories:
            for f in directory.rglob("*") if directory.exists() else ():
                if f.is_file() and f not in self.snapshot:
                    f.unlink()
        for path, data in self.snapshot.items():
            if data is None:
                path.unlink(missing_ok=True)
            elif not path.exists() or path.read_bytes() != data:
                write_atomic(path, data)
        for directory in self.created_dirs:
            if directory.exists() and not any(directory.rglob("*")):
                directory.rmdir()
