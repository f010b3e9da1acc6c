"""The directories nemo-rl keeps state in, from their settings."""

from __future__ import annotations

import os
from pathlib import Path

from nemo_rl import store
from nemo_rl.errors import NemoRLError

# the checkout nemo_rl runs from: the default project of workers and doctor
CHECKOUT_DIR = Path(__file__).resolve().parent.parent


def relative_setting(name: str, setting: str) -> NemoRLError:
    here = os.path.abspath(os.path.expanduser(setting))  # guard: settings-a-relative-path-setting-names
    return NemoRLError(f"{name} {setting!r} is not an absolute path", f"set it to an absolute path, e.g. "
                       f"{name}={here!r}")


def cache_dir() -> Path:
    """$NEMO_RL_CACHE_DIR (default ~/.cache/nemo-rl), made; NemoRLError when not writable."""
    setting = os.environ.get("NEMO_RL_CACHE_DIR")
    if setting and not os.path.isabs(os.path.expanduser(setting)):  # guard: fast-settings-refuse-a-relative-cache
        raise relative_setting("NEMO_RL_CACHE_DIR", setting)
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nemo-rl"
    path = Path(os.path.expanduser(setting)) if setting else default
    name = "NEMO_RL_CACHE_DIR" if setting else "the cache directory"
    fix = "point NEMO_RL_CACHE_DIR at a directory you may write"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise NemoRLError(f"{name} {path} is not a directory", fix) from exc
    except PermissionError as exc:
        raise NemoRLError(f"cannot create {name} {path}: permission denied", fix) from exc
    if not os.access(path, os.W_OK | os.X_OK):
        raise NemoRLError(f"{name} {path} is not writable", fix)
    return path


def private_dir(parent_name: str) -> Path:
    """`parent_name` under the cache directory, a store."""
    return store.open_store(cache_dir() / parent_name, "NEMO_RL_CACHE_DIR")


def venv_dir_error(path: Path, exc: OSError) -> NemoRLError:
    name = "NEMO_RL_VENV_DIR" if os.environ.get("NEMO_RL_VENV_DIR") else "the worker environment directory"
    return NemoRLError(f"{name} {path} cannot be used: {exc.strerror or exc}",
                       "point NEMO_RL_VENV_DIR at a directory you may write")


def venv_dir(create: bool = True) -> Path:
    """The worker environment directory, a store; made unless `create` is False."""
    setting = os.environ.get("NEMO_RL_VENV_DIR")
    path = Path(os.path.expanduser(setting)) if setting else CHECKOUT_DIR / "venvs"
    if setting and not path.is_absolute():  # guard: settings-a-relative-nemo-rl-venv-dir-is
        raise relative_setting("NEMO_RL_VENV_DIR", setting)
    if not create and not os.path.lexists(path):
        return path
    store.open_store(path, "NEMO_RL_VENV_DIR")
    if not os.access(path, os.W_OK | os.X_OK):
        raise venv_dir_error(path, PermissionError(13, "permission denied (read-only)"))
    return path


def bundle_dir() -> Path | None:
    """$NEMO_RL_BUNDLE_DIR, or None when unset."""
    setting = os.environ.get("NEMO_RL_BUNDLE_DIR")
    if setting is None:
        return None
    if not setting.strip():  # guard: an-empty-nemo-rl-bundle-dir-is-refused
        raise NemoRLError(f"NEMO_RL_BUNDLE_DIR is set but empty ({setting!r})",
                          "set it to the bundles' directory, or run `unset NEMO_RL_BUNDLE_DIR`")
    if setting != setting.strip():  # guard: plain-nemo-rl-bundle-dir-s-whitespace-is
        ends = {" ": "a space", "\t": "a tab", "\r": "a carriage return (\\r)", "\n": "a newline"}
        found = sorted({ends.get(c, repr(c)) for c in setting[:len(setting) - len(setting.lstrip())]
                        + setting[len(setting.rstrip()):]})
        raise NemoRLError(f"NEMO_RL_BUNDLE_DIR {setting!r} starts or ends with {' and '.join(found)}",
                          f"set it without the whitespace: NEMO_RL_BUNDLE_DIR={setting.strip()!r}")
    path = os.path.expanduser(setting)
    if not os.path.isabs(path):  # guard: rest-a-relative-nemo-rl-bundle-dir-is
        raise relative_setting("NEMO_RL_BUNDLE_DIR", setting)
    return Path(path)
