"""The directories nemo-rl keeps state in, from their settings, checked: a setting that points at a file or
at a directory the user may not write is theirs to fix (a NemoRLError), never a crash."""

from __future__ import annotations

import os
from pathlib import Path

from nemo_rl import store
from nemo_rl.errors import NemoRLError

# The checkout nemo_rl runs from (an editable install): the default project of workers and doctor, and where
# the default venvs/ lives.
CHECKOUT_DIR = Path(__file__).resolve().parent.parent


def relative_setting(name: str, setting: str) -> NemoRLError:
    """A relative path setting names another directory from every working directory (a Ray worker's is not the
    driver's): refused, with the absolute path it names from here."""
    here = os.path.abspath(os.path.expanduser(setting))  # guard: settings-a-relative-path-setting-names
    return NemoRLError(f"{name} {setting!r} is not an absolute path (a relative one names another directory from "
                       "every working directory, a Ray worker's included)",
                       f"set it to an absolute path, e.g. {name}={here!r} for the one it names from here")


def cache_dir() -> Path:
    """$NEMO_RL_CACHE_DIR (default ~/.cache/nemo-rl), checked: a file or an unwritable directory is the user's
    setting to fix, not a crash."""
    setting = os.environ.get("NEMO_RL_CACHE_DIR")
    if setting and not os.path.isabs(os.path.expanduser(setting)):  # guard: fast-settings-refuse-a-relative-cache
        raise relative_setting("NEMO_RL_CACHE_DIR", setting)
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nemo-rl"
    path = Path(os.path.expanduser(setting)) if setting else default
    name = "NEMO_RL_CACHE_DIR" if setting else "the cache directory"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise NemoRLError(f"{name} {path} is not a directory", "point NEMO_RL_CACHE_DIR at a directory") from exc
    except PermissionError as exc:
        raise NemoRLError(f"cannot create {name} {path}: permission denied",
                          "point NEMO_RL_CACHE_DIR at a directory you may write") from exc
    if not os.access(path, os.W_OK | os.X_OK):
        raise NemoRLError(f"{name} {path} is not writable", "point NEMO_RL_CACHE_DIR at a directory you may write")
    return path


def private_dir(parent_name: str) -> Path:
    """`parent_name` under the cache directory: a store of this user's alone (store.open_store)."""
    return store.open_store(cache_dir() / parent_name, "NEMO_RL_CACHE_DIR")


def _venv_dir_name() -> str:
    return "NEMO_RL_VENV_DIR" if os.environ.get("NEMO_RL_VENV_DIR") else "the worker environment directory"


def venv_dir_error(path: Path, exc: OSError) -> NemoRLError:
    name = _venv_dir_name()
    return NemoRLError(f"{name} {path} cannot be used: {exc.strerror or exc}",
                       "point NEMO_RL_VENV_DIR at a directory you may write (the same path on every node)")


def venv_dir(create: bool = True) -> Path:
    """The worker environment directory: a store of this user's alone (store.open_store); with `create` False, a
    missing one is named, not made."""
    setting = os.environ.get("NEMO_RL_VENV_DIR")
    path = Path(os.path.expanduser(setting)) if setting else CHECKOUT_DIR / "venvs"
    if setting and not path.is_absolute():  # guard: settings-a-relative-nemo-rl-venv-dir-is; each Ray worker would read it from its own working directory
        raise relative_setting("NEMO_RL_VENV_DIR", setting)
    if not create and not os.path.lexists(path):
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=0o700, exist_ok=True)
    except (FileExistsError, NotADirectoryError, PermissionError) as exc:
        raise venv_dir_error(path, exc) from exc
    store.open_store(path, "NEMO_RL_VENV_DIR")
    if not os.access(path, os.W_OK | os.X_OK):
        raise venv_dir_error(path, PermissionError(13, "permission denied (read-only)"))
    return path


def bundle_dir() -> Path | None:
    """$NEMO_RL_BUNDLE_DIR, read here only: None when unset. Set means offline from bundles, never the network, so
    a value that names no directory (empty, blanks: a shared mount or a variable that did not come up) is refused,
    never taken for unset."""
    setting = os.environ.get("NEMO_RL_BUNDLE_DIR")
    if setting is None:
        return None
    if not setting.strip():  # guard: an-empty-nemo-rl-bundle-dir-is-refused
        raise NemoRLError(f"NEMO_RL_BUNDLE_DIR is set but empty ({setting!r}): a shared mount or a variable that did "
                          "not come up, and nemo-rl never falls back to the network while it is set",
                          "set it to the directory holding the bundles `nemo-rl envs pack` made, or unset it "
                          "(`unset NEMO_RL_BUNDLE_DIR`) to build from the network")
    if setting != setting.strip():  # guard: plain-nemo-rl-bundle-dir-s-whitespace-is; a \r from a Windows-edited env file, a space from a copy: no such directory
        ends = {" ": "a space", "\t": "a tab", "\r": "a carriage return (\\r)", "\n": "a newline"}
        found = sorted({ends.get(c, repr(c)) for c in setting[:len(setting) - len(setting.lstrip())]
                        + setting[len(setting.rstrip()):]})
        raise NemoRLError(f"NEMO_RL_BUNDLE_DIR {setting!r} starts or ends with {' and '.join(found)}",
                          f"set it without the whitespace: NEMO_RL_BUNDLE_DIR={setting.strip()!r} (a \\r comes from "
                          "a file saved with Windows line ends)")
    path = os.path.expanduser(setting)
    if not os.path.isabs(path):  # guard: rest-a-relative-nemo-rl-bundle-dir-is; read from every node's and worker's own cwd: one setting, many directories
        raise relative_setting("NEMO_RL_BUNDLE_DIR", setting)
    return Path(path)
