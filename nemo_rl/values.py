"""Checks of values read from files or typed by users."""

from __future__ import annotations

import argparse
import json
import numbers
import os
import re
import stat
import unicodedata
from pathlib import Path

from nemo_rl.errors import NemoRLError

FULL_SHA = re.compile(r"^[0-9a-f]{40}\Z")  # guard: values-a-sha-ends-at-the-end-not-before
# PEP 508 names: never '..', '/', or a leading '-'; \Z, since `$` matches before a final newline
DISTRIBUTION_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?\Z")  # guard: values-a-name-ends-at-the-end
_BRANCH_BAD = re.compile(r"(^[-/.])|(\.\.)|(//)|([\x00-\x20\x7f~^:?*\[\\])|(@\{)|(\.lock\Z)|(/\Z)|(\.\Z)")
# a newline in a .pth file starts a line, and one starting with `import` runs in every Python there
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_URL = re.compile(r"^(https?|ssh|git|file)://[^\s\x00-\x1f\x7f]+\Z"  # guard: values-a-url-ends-at-the-end
                  r"|^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^\s\x00-\x1f\x7f-][^\s\x00-\x1f\x7f]*\Z")


def distribution_name(value: str, where: str) -> str:
    if not DISTRIBUTION_NAME.match(value):
        raise NemoRLError(f"{where}: {value!r} is not a distribution name", "use a name such as megatron-core")
    return value


def full_sha(value: str, where: str) -> str:
    if not FULL_SHA.match(value):
        raise NemoRLError(f"{where}: {value!r:.60} is not a full 40-hex commit SHA",
                          "write what `git rev-parse <rev>` prints in a clone of the fork")
    return value


def branch_name(value: str, where: str) -> str:
    if not value or _BRANCH_BAD.search(value):
        raise NemoRLError(f"{where}: {value!r:.60} is not a usable branch name",
                          "use the branch's plain name, e.g. main or user/topic")
    return value


def git_url(value: str, where: str) -> str:
    if not _URL.match(value):
        raise NemoRLError(f"{where}: {value!r:.80} is not a git URL nemo-rl will fetch",
                          "use an https://, ssh://, git:// or file:// URL, or user@host:path")
    return value


def inside(root: Path, relative: str | Path, where: str) -> Path:
    """`root / relative`, proven to stay inside `root` after resolving links and '..'."""
    path = (root / relative).resolve()
    if not path.is_relative_to(root.resolve()) or path == root.resolve():
        raise NemoRLError(f"{where}: {str(relative)!r:.80} points outside {root}", f"fix or delete {where}")
    return path


def breaks_lines(text: str) -> bool:
    """Whether `text` holds a control character or a line break."""
    return bool(_CONTROL.search(text)) or len(text.splitlines()) > 1 or not text.isprintable()


def plain_path(path: Path | str, where: str) -> Path:
    """A path safe to write as one line of a .pth file or a script."""
    if breaks_lines(str(path)):  # guard: never-line-separators-python-may-split
        raise NemoRLError(f"{where} {str(path)!r:.120} contains a newline or another control character",
                          "move it to a path without control characters")
    return Path(path)


def path_argument(text: str) -> Path:
    """argparse's type for a path written into other files."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path names no directory")
    try:
        return plain_path(text, "the path")  # guard: parser-a-path-that-breaks-a-line-is
    except NemoRLError as exc:
        raise argparse.ArgumentTypeError(exc.what) from exc


# what a terminal acts on rather than shows
_UNSHOWN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def printable(text: str, *, lines: bool = False) -> str:
    """`text` with what a terminal would act on escaped as repr does; `lines` keeps newlines."""
    return "".join(repr(ch)[1:-1] if unicodedata.category(ch) in _UNSHOWN and not (lines and ch == "\n") else ch  # guard: terminal-a-newline-is-kept-only-in-a
                   for ch in text)


STATE_FILE_MAX = 16 * 1024 * 1024


class NotAPlainFile(OSError):
    """Not a regular file, or larger than its cap."""


def file_kind(mode: int) -> str:
    kinds = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "a regular file")


def read_plain_file(path: Path, limit: int = STATE_FILE_MAX) -> bytes:
    """The bytes of the regular file `path`, at most `limit`; else NotAPlainFile."""
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode):  # guard: plain-the-reader-refuses-links-and-fifos
        kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else f"not a regular file ({file_kind(info.st_mode)})"
        raise NotAPlainFile(f"{path} is {kind}")
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):  # guard: plain-the-reader-checks-the-file-it
            raise NotAPlainFile(f"{path} was replaced while it was read")
        chunks, size = [], 0
        while chunk := os.read(fd, min(1 << 20, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:  # guard: plain-the-reader-s-size-cap
                raise NotAPlainFile(f"{path} is larger than {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def state_json(path: Path, fix: str, name: str = "", limit: int = STATE_FILE_MAX) -> object:
    """The JSON of a state file; NemoRLError when unreadable."""
    where = f"{name} {path}" if name else str(path)
    try:
        return json.loads(read_plain_file(path, limit))  # bytes: a byte-order mark or UTF-16 from an editor reads
    except FileNotFoundError:
        raise
    except RecursionError as exc:
        raise NemoRLError(f"cannot read {where}: it is nested too deeply to be a file nemo-rl wrote", fix) from exc
    except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise NemoRLError(f"cannot read {where}: {exc}", fix) from exc


# threading.TIMEOUT_MAX is about 9.2e9 s
TIMEOUT_MAX_S = 1e9


def timeout_seconds(value: object, where: str) -> float:
    """A real number of seconds above zero and at most TIMEOUT_MAX_S."""
    seconds = None
    if not isinstance(value, bool) and isinstance(value, numbers.Real):  # guard: process-a-boolean-timeout-is-refused; numpy's numbers too
        try:
            seconds = float(value)
        except OverflowError:
            pass
    if seconds is None and isinstance(value, numbers.Number) and not isinstance(value, numbers.Complex | bool):  # guard: plain-a-decimal-timeout-is-refused-by
        raise NemoRLError(f"{where}: timeout {value!r:.40} is a {type(value).__name__}, not a real number of seconds",
                          "pass an int or a float")
    if seconds is None or not 0 < seconds <= TIMEOUT_MAX_S:  # guard: never-a-timeout-above-zero
        raise NemoRLError(f"{where}: timeout {value!r:.40} is not a number of seconds above zero "
                          f"(and at most {TIMEOUT_MAX_S:g})", "pass a finite number of seconds, e.g. timeout=30")
    return seconds


_BUNDLE_DIGEST = re.compile(r"^(sha256:)?[0-9a-f]{64}\Z")
_DIGEST_SEPARATORS = re.compile(r"[\s,;]+")  # guard: digests-separated-by-semicolons
DIGEST_FORMAT = "sha256: and 64 hex digits, as `nemo-rl envs pack` prints it"


def bundle_digest(value: str, where: str) -> str:
    """One digest as `sha256:<lower hex>`."""
    text = value.strip().lower()  # guard: a-digest-in-either-case
    if not _BUNDLE_DIGEST.match(text):
        inner = " (it holds a space or a separator: one digest is one word)" if re.search(r"[\s,;]", text) else ""
        if len(text) > 1 and text[0] == text[-1] and text[0] in "'\"":  # guard: plain-a-quoted-digest-says-to-drop-the
            inner = " (it is in quotes: drop them, the shell already took its own)"
        raise NemoRLError(f"{where}: {value!r:.90} is not a bundle digest{inner}", f"give {DIGEST_FORMAT}")
    return text if text.startswith("sha256:") else f"sha256:{text}"


def bundle_digests(setting: str, where: str) -> set[str]:
    if re.search(r":\s", setting):  # guard: a-space-after-sha256-is-named
        raise NemoRLError(f"{where}: {setting!r:.90} has a space after a colon: one digest is one word",
                          f"give each digest as {DIGEST_FORMAT}")
    return {bundle_digest(item, where) for item in _DIGEST_SEPARATORS.split(setting) if item}
