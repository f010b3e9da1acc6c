"""The user-facing error types."""

from __future__ import annotations

import shlex
from pathlib import Path


class NemoRLError(Exception):
    """An expected failure: what failed, then what to do; exit 1."""

    exit_code = 1

    def __init__(self, what: str, remedy: str | None = None) -> None:
        self.what = what
        self.remedy = remedy
        super().__init__(f"{what}\n  what to do: {remedy}" if remedy else what)


class UsageError(NemoRLError):
    """Arguments that do not fit together: exit 2."""

    exit_code = 2


class Interrupted(KeyboardInterrupt):
    """A signal arrived: unwind and exit 128 + its number."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signum)


class MissingExtraError(NemoRLError, ImportError):
    """An mcore code path ran without a working mcore extra; also an ImportError."""

    def __init__(self, what: str, remedy: str, missing: list[str]) -> None:
        self.missing = missing
        NemoRLError.__init__(self, what, remedy)


def from_elsewhere(remedy: str | None, root: Path | None) -> str | None:
    """`remedy`, preceded by a `cd` to `root` when run elsewhere."""
    if not remedy or root is None or "`" not in remedy or Path.cwd().resolve() == root.resolve():  # guard: a-fix-printed-away-from-the-project-says-cd
        return remedy
    return command("cd {root}", root=root) + ", then " + remedy


def command(template: str, **values: object) -> str:
    """`template` as a backticked shell command, each `{name}` filled shell-quoted."""
    return "`" + template.format(**{key: shlex.quote(str(value)) for key, value in values.items()}) + "`"  # guard: printed-commands-quote-each-value
