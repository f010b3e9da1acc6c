"""What a node trusts in a bundle beyond its manifest: the digests a site pins (whoever can write a bundle can
write its manifest) and files that share an inode with nothing outside the bundle."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from nemo_rl.errors import NemoRLError

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}\Z")  # \Z: `$` also matches before a final newline


def pinned_digests() -> set[str]:
    """The bundle digests this site trusts ($NEMO_RL_BUNDLE_DIGESTS: `sha256:...` separated by spaces or commas,
    as `nemo-rl envs pack` prints them); empty when unset (any bundle whose content matches its manifest)."""
    setting = os.environ.get("NEMO_RL_BUNDLE_DIGESTS", "")
    found = {d for d in setting.replace(",", " ").split() if d}
    bad = [d for d in found if not _DIGEST.match(d)]
    if bad:
        raise NemoRLError(f"NEMO_RL_BUNDLE_DIGESTS holds {bad[0]!r:.80}, which is not a bundle digest",
                          "set it to the digests `nemo-rl envs pack` printed (sha256: and 64 hex digits), separated "
                          "by spaces")
    return found


def digest_argument(value: str) -> str:
    """`--digest`: a bundle digest as pack prints it; bare hex is taken as sha256."""
    digest = value if value.startswith("sha256:") else f"sha256:{value}"
    if not _DIGEST.match(digest.lower()):
        raise NemoRLError(f"--digest {value!r:.80} is not a bundle digest",
                          "pass the digest `nemo-rl envs pack` printed: sha256: and 64 hex digits")
    return digest.lower()


def refuse_foreign_links(root: Path, work_caches: list[Path]) -> None:
    """A bundle file with another hard link is one inode with a file outside the bundle (pack never makes one,
    and nodes copy what they install): an install would read it, and whatever writes it changes the other."""
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            info = os.lstat(os.path.join(dirpath, name))
            if stat.S_ISREG(info.st_mode) and info.st_nlink > 1 + _our_links(root, dirpath, name, info, work_caches):
                raise NemoRLError(f"{os.path.join(dirpath, name)} in bundle {root.parent} has {info.st_nlink} hard "
                                  "links: it is one file with something outside the bundle",
                                  f"copy the bundle again from the builder (`cp -r`, which makes no hard links): "
                                  f"{root.parent}")


def _our_links(root: Path, dirpath: str, name: str, info: os.stat_result, work_caches: list[Path]) -> int:
    """Links to this file held by node builds running from the bundle now (their working caches)."""
    relative = Path(dirpath, name).relative_to(root)
    count = 0
    for work in work_caches:
        try:
            other = os.lstat(work / relative)
        except OSError:
            continue
        count += (other.st_ino, other.st_dev) == (info.st_ino, info.st_dev)
    return count
