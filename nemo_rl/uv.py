"""Find uv, and the uv commands nemo-rl runs."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from nemo_rl import values
from nemo_rl.errors import NemoRLError
from nemo_rl.process import Result, Running, run, start, waited

# what uv reads beside pyproject.toml: copied into the staging copy that uv locks, never landed
SETTINGS_FILES = (".python-version",)
INSTALL_UV = "run `pipx install 'uv>=0.13,<0.14'`, or set $UV to the uv executable"


def find_uv_bin() -> str:
    """The `uv` package's binary first (it is a dependency), then $UV, then PATH."""
    with contextlib.suppress(ModuleNotFoundError, FileNotFoundError):
        import uv

        return uv.find_uv_bin()
    # `uv run` exports $UV: the right binary inside worker processes
    from_env = os.environ.get("UV")
    if from_env and Path(from_env).is_file():
        return from_env
    on_path = shutil.which("uv")
    if on_path:
        return on_path
    raise NemoRLError("cannot find the uv executable", INSTALL_UV)


def uv(
    args: Sequence[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None, remedy: str | None = None,
    stream: bool = False, timeout: float | None = None,
) -> Result:
    return run([find_uv_bin(), *args], cwd=cwd, env=env, remedy=remedy, stream=stream, timeout=timeout)


def version() -> str:
    return uv(["--version"]).stdout.strip()


def cache_dir(honour_config: bool = False) -> Path | None:
    """This user's uv cache, or None; one a checkout's files choose only with `honour_config`."""
    flags, cwd = ([], None) if honour_config else (["--no-config"], "/")
    result = run([find_uv_bin(), *flags, "cache", "dir"], cwd=cwd, check=False, timeout=30)  # guard: seed-never-the-cache-a-checkout-s-config
    text = result.stdout.strip()
    return Path(text) if result.returncode == 0 and text and "\n" not in text else None


# settings that tell uv to leave uv.lock as it is; FALSE: uv's words for false
RELOCK_STOPPERS = ("UV_FROZEN", "UV_LOCKED")
FALSE = ("", "0", "false", "no", "off", "f", "n")


def require_relock(again: str) -> None:
    """Refuse a command that must relock uv.lock while the environment tells uv not to."""
    stoppers = [name for name in RELOCK_STOPPERS if os.environ.get(name, "").strip().lower() not in FALSE]
    if stoppers:  # guard: uv-frozen-or-locked-is-named-before-a
        raise NemoRLError(f"{' and '.join(f'{n}={os.environ[n]!r}' for n in stoppers)} in the environment stops "
                          "the relock this command needs; nothing was changed",
                          f"run it without {' and '.join(stoppers)}: `env {' '.join(f'-u {n}' for n in stoppers)} "
                          f"{again}`")


# uv settings that change what `uv lock` resolves: uv.lock is what the project's own settings make of it
RESOLUTION_SETTINGS = ("UV_RESOLUTION", "UV_PRERELEASE", "UV_FORK_STRATEGY", "UV_EXCLUDE_NEWER",
                       "UV_EXCLUDE_NEWER_PACKAGE", "UV_NO_SOURCES", "UV_NO_SOURCES_PACKAGE", "UV_INDEX_STRATEGY",
                       "UV_CONSTRAINT", "UV_OVERRIDE", "UV_BUILD_CONSTRAINT", "UV_UPGRADE", "UV_UPGRADE_PACKAGE")


def resolving_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment with `extra` and without RESOLUTION_SETTINGS."""
    env = {**os.environ, **(extra or {})}
    for name in RESOLUTION_SETTINGS:
        env.pop(name, None)  # guard: uv-a-resolution-setting-never-reaches-the
    return env


def require_same_options(before: Mapping, after: Mapping, what: str) -> None:
    """Refuse a staged uv.lock whose [options] differ from the committed one's."""
    old, new = before.get("options", {}), after.get("options", {})
    if old != new:  # guard: uv-a-changed-lock-options-table-is-refused
        changed = sorted(k for k in {*old, *new} if old.get(k) != new.get(k))
        shown = ", ".join(f"{k} = {values.printable(repr(new.get(k, '(none)')))}" for k in changed)
        keys = ", ".join(k.removesuffix("-mode") for k in changed)  # uv.toml's names: resolution, not resolution-mode
        raise NemoRLError(f"uv lock wrote [options] {shown} into the staged uv.lock from a uv setting outside the "
                          "project; nothing was changed",
                          f"remove {keys} from your uv.toml or $UV_CONFIG_FILE, then run {what} again")


def sync_command(extra: str = "mcore") -> str:
    """The command that installs `extra` once the pre-flight passes."""
    return f"uv run nemo-rl doctor --extra mcore --preflight && uv sync --locked --extra {extra}"


LOCK_REMEDY = "for an unreachable git host, run `git config --global url.<mirror>.insteadOf <url>`"


def lock_started(project: Path, *, upgrade_package: str | None = None, offline: bool = False) -> Running:
    args = [find_uv_bin(), "lock", "--project", str(project), *(["--offline"] if offline else []),
            *(["--upgrade-package", upgrade_package] if upgrade_package else [])]
    return start(args, cwd=project, env=resolving_env(), remedy=LOCK_REMEDY)


lock = waited(lock_started)


BUILD_REFUSED = "checking it needs a build, which nemo-rl never runs"
OTHER_PYTHON = "nemo-rl runs on a Python the project does not allow"
STALE = "uv.lock needs to be updated"
UNFINISHED = "uv did not run to its end"
LOCK_CHECK_S = 60.0
# uv's words when --no-build stops it, besides "Building source distributions for X is disabled"
_REFUSALS = ("because building from source is disabled",  # guard: trust-a-local-directory-uv-will-not
             "is marked as `--no-build` but has no binary distribution")


def lock_mismatch(project: Path) -> str | None:
    """Why uv.lock in `project` (a copy) does not match pyproject.toml, or None; no network, no build."""
    cache = cache_dir()
    # uv allows only file:// on its own fetches, not on the submodules git updates
    env = resolving_env({"GIT_ALLOW_PROTOCOL": "file", "GIT_TERMINAL_PROMPT": "0"})  # guard: trust-git-in-the-lock-check-reaches-no
    try:
        result = run([find_uv_bin(), "lock", "--check", "--offline", "--no-build", "--color", "never",  # guard: trust-the-lock-check-builds-nothing
                      *(["--cache-dir", str(cache)] if cache else []), "--python", sys.executable,
                      "--project", str(project)], cwd=project, env=env, check=False, timeout=LOCK_CHECK_S)
    except NemoRLError as exc:
        return f"{UNFINISHED}: {values.printable(exc.what.splitlines()[0])}"
    if result.returncode == 0:
        return None
    lines = [values.printable(line.strip()) for line in (result.stderr or result.stdout).splitlines()  # guard: trust-uv-s-words-are-shown-printable
             if line.strip()]
    refused = [line for line in lines if "Building source distributions for" in line and "is disabled" in line  # guard: trust-a-refusal-coloured-by-uv-is-still
               or any(words in line for words in _REFUSALS)]
    if refused:  # guard: trust-uv-s-refusal-to-build-is-found-in
        return f"{BUILD_REFUSED}: {refused[0].removeprefix('cause: ').removeprefix('hint: ')}"
    errors = [line for line in lines if line.startswith("error:")]  # uv's last line is often a general hint
    if any("incompatible with the project's Python requirement" in line for line in errors):  # guard: trust-another-python-is-not-called-a
        return f"{OTHER_PYTHON} ({sys.executable}; {errors[-1].removeprefix('error: ')})"
    if any("needs to be updated" in line for line in errors):  # guard: trust-uv-s-own-stale-lock-is-told-apart
        return STALE
    if not lines:
        return f"uv lock --check exited {result.returncode}"
    last = lines.index(errors[-1]) if errors else len(lines) - 1  # guard: trust-uv-s-error-line-is-the-reason
    return " ".join(lines[last:last + 2])  # the error, and the line that says why


def sync(project: Path, *, flags: Sequence[str] = (), environment: Path | None = None, stream: bool = False,
         extra_env: Mapping[str, str] | None = None) -> Result:
    env = resolving_env(extra_env)  # `--locked` follows the lock only as the project's own settings resolve it
    if environment is not None:
        env["UV_PROJECT_ENVIRONMENT"] = str(environment)
        env.pop("VIRTUAL_ENV", None)  # an activated venv would make uv warn and could mislead it
    return uv(["sync", "--project", str(project), *flags], cwd=project, env=env, stream=stream)


def run_with(requirements: Sequence[str], args: Sequence[str], *, cwd: Path, python: str,
             extra_env: Mapping[str, str], offline: bool = False, timeout: float | None = None,
             keep: int | None = None) -> Result:
    """Run `args` in a throwaway environment of exactly `requirements`."""
    with_args = [arg for req in requirements for arg in ("--with", req)]
    # project configuration from `/`, not the fork's checkout in `cwd`; the user's own uv configuration still applies
    return run([find_uv_bin(), "run", "--project", os.path.abspath(os.sep), "--no-project", "--isolated", "--quiet",  # guard: fast-the-user-s-uv-configuration-is-read
                *(["--offline"] if offline else []), "--python", python, *with_args, *args],
               cwd=cwd, env=resolving_env(extra_env), timeout=timeout, keep=keep)


def venv(path: Path, *, python: str) -> Result:
    """A relocatable environment at `path`, to be renamed into place."""
    return uv(["venv", "--quiet", "--relocatable", "--python", python, str(path)])


def environment_lock_holder(env: Path) -> str | None:
    """Who holds uv's lock on the environment `env`, or None; never raises or waits."""
    try:
        fd = os.open(env / ".lock", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        facts = os.fstat(fd)
        if not stat.S_ISREG(facts.st_mode):
            return None
        try:  # held for an instant when free: a uv starting then waits that instant
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return _flock_owner(facts) or "another process"  # guard: uv-a-held-environment-lock-is-seen
        except OSError:  # a filesystem without locks
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _flock_owner(facts: os.stat_result) -> str | None:
    """A process holding a flock on the file of `facts`, from /proc/locks."""
    wanted = f"{os.major(facts.st_dev):02x}:{os.minor(facts.st_dev):02x}:{facts.st_ino}"
    try:
        table = Path("/proc/locks").read_text()
    except OSError:
        return None
    for line in table.splitlines():
        fields = line.split()
        # "1: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE 0 EOF" (READ when shared); a waiter's has "->" after the number
        if fields[1:3] == ["FLOCK", "ADVISORY"] and len(fields) > 5 and fields[5] == wanted:
            try:
                command = Path(f"/proc/{fields[4]}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                command = ""
            shown = values.printable(command.strip()[:200])
            return f"process {fields[4]}" + (f" ({shown})" if shown else "")
    return None
