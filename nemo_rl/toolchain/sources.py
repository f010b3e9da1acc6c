"""The machine's own apt mirror, read from /etc/apt, as a private sources file for the suite that ships the
toolkit. No host is written in code: the URIs (and keyring) are those of the entry for the machine's release,
so a proxy or local mirror the machine is configured for is used as is."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from nemo_rl import values
from nemo_rl.errors import NemoRLError

APT_ETC = Path("/etc/apt")


@dataclass(frozen=True)
class Source:
    uris: tuple[str, ...]
    suites: tuple[str, ...]
    signed_by: str | None


def parse_deb822(text: str) -> list[Source]:
    """Stanzas of a `.sources` file with Types: deb (comments and deb-src stanzas skipped)."""
    sources = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = None
        for line in stanza.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if line[0].isspace() and key:  # a continuation line (a multi-line Signed-By block)
                fields[key] += "\n" + line.strip()
                continue
            key, _, value = line.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()
        if "deb" in fields.get("types", "").split() and fields.get("uris") and fields.get("enabled", "yes") != "no":
            sources.append(Source(tuple(fields["uris"].split()), tuple(fields.get("suites", "").split()),
                                  fields.get("signed-by")))
    return sources


def parse_one_line(text: str) -> list[Source]:
    """`deb [signed-by=...] URI SUITE COMPONENTS...` lines of a sources.list."""
    sources = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        match = re.match(r"deb\s+(?:\[(?P<opts>[^\]]*)\]\s+)?(?P<uri>\S+)\s+(?P<suite>\S+)", line)
        if match:
            opts = dict(o.partition("=")[::2] for o in (match["opts"] or "").split())
            sources.append(Source((match["uri"],), (match["suite"],), opts.get("signed-by")))
    return sources


def machine_sources(etc: Path = APT_ETC) -> list[Source]:
    found = []
    if (etc / "sources.list").is_file():
        found += parse_one_line((etc / "sources.list").read_text(errors="replace"))
    for path in sorted((etc / "sources.list.d").glob("*.list")):
        found += parse_one_line(path.read_text(errors="replace"))
    for path in sorted((etc / "sources.list.d").glob("*.sources")):
        found += parse_deb822(path.read_text(errors="replace"))
    return found


def release_codename(os_release: Path = Path("/etc/os-release")) -> str | None:
    try:
        text = os_release.read_text()
    except OSError:
        return None
    match = re.search(r"^VERSION_CODENAME=\"?([a-z0-9-]+)\"?$", text, re.M)
    return match.group(1) if match else None


UBUNTU_FIX = (
    "Ubuntu's archive has no Debian suite, and its own nvidia-cuda-toolkit (multiverse: 12.0 in 24.04, 11.5 in "
    "22.04) is older than transformer-engine 2.3 needs. Either install NVIDIA's CUDA 12 toolkit from NVIDIA's apt "
    "repository for your release (the `cuda-toolkit-12-6` package, matching torch's CUDA 12.6) and set "
    "CUDA_HOME=/usr/local/cuda-12.6, or download Debian trixie's .deb files (any Debian mirror, pool/non-free/n/"
    "nvidia-cuda-toolkit/ and pool/main/c/cccl/; the binaries need glibc 2.34, which Ubuntu 22.04 and newer have) "
    "into one directory and pass it with --debs")


def _os_release_fields(os_release: Path) -> dict[str, str]:
    try:
        text = os_release.read_text()
    except OSError:
        return {}
    return {m.group(1): m.group(2) for m in re.finditer(r'^([A-Z_]+)="?([^"\n]*)"?$', text, re.M)}


def require_debian(os_release: Path = Path("/etc/os-release")) -> None:
    """The suite's packages come from the machine's mirror: that mirror must be Debian's archive, which holds
    trixie. Ubuntu (and its derivatives) or another distribution is refused with what to do there."""
    fields = _os_release_fields(os_release)
    ident, like = fields.get("ID", ""), fields.get("ID_LIKE", "").split()
    if ident == "debian":  # guard: toolkit-only-debian-is-asked-for-trixie
        return
    name = fields.get("PRETTY_NAME") or ident or "this machine's distribution"
    if ident == "ubuntu" or "ubuntu" in like:  # guard: toolkit-ubuntu-s-sources-are-refused
        raise NemoRLError(f"{name} is not Debian: its apt mirror does not carry Debian's suite trixie", UBUNTU_FIX)
    raise NemoRLError(f"{name} is not Debian ({os_release} says ID={ident or 'nothing'}): its apt sources, if any, "
                      "do not carry Debian's suite trixie",
                      "download Debian trixie's .deb files (any Debian mirror, pool/non-free/n/nvidia-cuda-toolkit/ "
                      "and pool/main/c/cccl/) into one directory and pass it with --debs (only dpkg-deb is needed), "
                      "or install NVIDIA's CUDA 12 toolkit and set CUDA_HOME")


def archive_source(sources: list[Source], codename: str | None) -> Source:
    """The entry of the distribution's main archive: the one listing the release itself (`bookworm`, not
    `bookworm-security` or `bookworm-updates`, which live on other hosts or lack the packages)."""
    for source in sources:
        if codename and codename in source.suites:
            return source
    plain = [s for s in sources if any("-" not in suite and "/" not in suite for suite in s.suites)]  # guard: toolkit-the-archive-entry-not-security-s
    if plain:
        return plain[0]
    raise NemoRLError(f"no apt source for the distribution's archive in {APT_ETC}/sources.list(.d) "
                      f"(release {codename or 'unknown'})",
                      "configure the machine's Debian mirror in /etc/apt/sources.list.d/, or download "
                      "the .deb files elsewhere and pass their directory with --debs")


# One value of a deb822 list field (a suite, a component): a newline in it would start a field of its own
# (`Trusted: yes` turns off signature checks), a space another value.
_DEB822_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+~_/-]*\Z")
# A URI of the machine's mirror: anything but whitespace and control characters.
_DEB822_URI = re.compile(r"[^\s\x00-\x1f\x7f]+\Z")


def deb822_word(value: str, what: str) -> str:
    """`value` when it is one word apt reads as one suite or component; else a NemoRLError saying what is wrong."""
    if not _DEB822_WORD.match(value):  # guard: toolkit-a-suite-or-component-stays-one-word
        why = ("a newline or another control character would start a line of its own in apt's sources"
               if values.breaks_lines(value) else "a suite or component is one word of letters, digits and . + ~ _ / -")
        raise NemoRLError(f"{value!r:.80} is not a {what} apt reads as one: {why}",
                          f"give the {what} by its name, such as {'trixie' if what == 'suite' else 'main'}")
    return value


def deb822_words(value: str, what: str) -> list[str]:
    """The space-separated words of `value` (--components); a control character anywhere is refused by name."""
    if values.breaks_lines(value.replace(" ", "")) or not value.split():  # guard: toolkit-components-with-a-newline-are
        raise NemoRLError(f"{what} {value!r:.80} is no list of words: " + (
            "a newline or another control character would start a line of its own in apt's sources"
            if value.split() else "it is empty"), "separate the names by spaces, e.g. 'main contrib non-free'")
    return value.split()


def private_sources(source: Source, suite: str, components: tuple[str, ...]) -> str:
    """A deb822 stanza: the machine's mirror, the toolkit's suite and components, each checked to stay one value
    of its field (the arguments at the parser too; the mirror's URIs come from /etc/apt)."""
    bad = [uri for uri in source.uris if not _DEB822_URI.match(uri)]
    if bad:  # guard: toolkit-a-mirror-uri-stays-one-value
        raise NemoRLError(f"the mirror URI {bad[0]!r:.120} read from {APT_ETC} holds whitespace or a control "
                          "character, which would break the private sources stanza",
                          f"fix that entry of {APT_ETC}/sources.list(.d), or pass the .deb files with --debs")
    deb822_word(suite, "suite")
    for component in components:
        deb822_word(component, "component")
    lines = ["Types: deb", f"URIs: {' '.join(source.uris)}", f"Suites: {suite}",
             f"Components: {' '.join(components)}"]
    if source.signed_by:  # a key embedded in the stanza keeps its continuation lines
        lines.append("Signed-By: " + source.signed_by.replace("\n", "\n "))
    return "\n".join(lines) + "\n"
