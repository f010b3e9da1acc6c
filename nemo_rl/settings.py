"""The directories nemo-rl keeps state in, from their settings, checked: a setting that points at a file or
at a directory the user may not write is theirs to fix (a NemoRLError), never a crash."""

from __future__ import annotations

import os
import stat
from pathlib import Path

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
    """`parent_name` under the cache directory, made 0700, and used only when it is a real directory of this
    user's that nobody else may write: uv runs in it, and another user's (or a link planted there) could hold a
    workspace root that uv would take for the copy's."""
    cache = cache_dir()
    above = os.stat(cache)
    if above.st_uid not in (os.geteuid(), 0) or (above.st_mode & 0o022 and not above.st_mode & stat.S_ISVTX):  # guard: settings-a-cache-directory-others-may
        raise NemoRLError(f"the cache directory {cache} may be changed by another user (owner uid {above.st_uid}, "
                          f"mode {stat.S_IMODE(above.st_mode):04o}): nemo-rl runs uv only in directories of yours "
                          "alone", "point NEMO_RL_CACHE_DIR at a directory of yours that others may not write")
    path = cache / parent_name
    path.mkdir(mode=0o700, exist_ok=True)  # guard: settings-a-private-directory-is-made
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:  # guard: settings-a-private-directory-is-this
        kind = ("a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a directory" if not stat.S_ISDIR(
            info.st_mode) else f"owned by uid {info.st_uid}" if info.st_uid != os.geteuid() else
            f"mode {stat.S_IMODE(info.st_mode):04o}, which others may use")
        raise NemoRLError(f"{path} is {kind}: nemo-rl runs uv only in a directory of yours alone",
                          f"remove it with `rm -rf {path}`; nemo-rl makes it again, mode 0700")
    return path


def _venv_dir_name() -> str:
    return "NEMO_RL_VENV_DIR" if os.environ.get("NEMO_RL_VENV_DIR") else "the worker environment directory"


def venv_dir_error(path: Path, exc: OSError) -> NemoRLError:
    name = _venv_dir_name()
    return NemoRLError(f"{name} {path} cannot be used: {exc.strerror or exc}",
                       "point NEMO_RL_VENV_DIR at a directory you may write (the same path on every node)")


def venv_dir(create: bool = True) -> Path:
    setting = os.environ.get("NEMO_RL_VENV_DIR")
    path = Path(os.path.expanduser(setting)) if setting else CHECKOUT_DIR / "venvs"
    if setting and not path.is_absolute():  # guard: settings-a-relative-nemo-rl-venv-dir-is; each Ray worker would read it from its own working directory
        raise relative_setting("NEMO_RL_VENV_DIR", setting)
    if not create:
        if path.is_dir():  # guard: settings-listing-and-pruning-hold-the; listing and pruning too: what acts on the entries must trust who may move them
            _refuse_unsafe(path)
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=0o755, exist_ok=True)  # guard: settings-the-venv-directory-nemo-rl; under umask 002 too: group members may not swap environments
    except (FileExistsError, NotADirectoryError, PermissionError) as exc:
        raise venv_dir_error(path, exc) from exc
    if not os.access(path, os.W_OK | os.X_OK):
        raise venv_dir_error(path, PermissionError(13, "permission denied (read-only)"))
    _refuse_unsafe(path)
    return path


def _refuse_unsafe(path: Path) -> None:
    info = path.stat()
    # A directory's owner may rename or remove any entry in it, sticky or not, whatever its mode says (root, and
    # a user an ACL lets write, get past the access check): git's rule for repositories, root included, and as
    # there the user sudo ran as is root's own
    trusted = {0, os.geteuid()}
    if os.geteuid() == 0 and (sudo := os.environ.get("SUDO_UID", "")).isdigit():
        trusted.add(int(sudo))  # guard: settings-the-user-sudo-ran-as-is-root-s
    if info.st_uid not in trusted:  # guard: settings-a-venv-directory-must-be-root-s
        raise NemoRLError(f"{_venv_dir_name()} {path} is owned by another user (uid {info.st_uid}), who may move "
                          "an environment away and put their own in its place",
                          "point NEMO_RL_VENV_DIR at a directory you (or root) own; root in a container over a host "
                          "user's checkout: a directory of the container's own (e.g. /var/cache/nemo-rl/venvs)")
    # sticky (as /tmp is): each may rename only their own entries
    if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:  # guard: settings-a-shared-venv-directory-must-be
        raise NemoRLError(f"{_venv_dir_name()} {path} may be written by group or others and is not sticky: "
                          "whoever may rename entries in it can move an environment away and put their own in its "
                          "place",
                          f"share a directory root or you own with `chmod +t` (as /tmp is), or `chmod go-w "
                          f"{path}`, or point NEMO_RL_VENV_DIR at a directory only you may write")


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
