"""The machine's own apt mirror, from /etc/apt, as a private sources file for the toolkit's suite."""

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
    """The `Types: deb` stanzas of a `.sources` file."""
    sources = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = None
        for line in stanza.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if line[0].isspace() and key:  # a multi-line Signed-By block
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


def os_release_fields(os_release: Path) -> dict[str, str]:
    try:
        text = os_release.read_text()
    except OSError:
        return {}
    return {m.group(1): m.group(2) for m in re.finditer(r'^([A-Z_]+)="?([^"\n]*)"?$', text, re.M)}


DEBS_FIX = ("download Debian trixie's .deb files (pool/non-free/n/nvidia-cuda-toolkit/ and pool/main/c/cccl/) into "
            "one directory and pass it with --debs")
UBUNTU_FIX = f"install NVIDIA's `cuda-toolkit-12-6` and set CUDA_HOME=/usr/local/cuda-12.6, or {DEBS_FIX}"


def require_debian(os_release: Path = Path("/etc/os-release")) -> str | None:
    fields = os_release_fields(os_release)
    ident, like, codename = fields.get("ID", ""), fields.get("ID_LIKE", "").split(), fields.get("VERSION_CODENAME", "")
    if ident == "debian":  # guard: toolkit-only-debian-is-asked-for-trixie
        return codename if re.fullmatch(r"[a-z0-9-]+", codename) else None
    name = fields.get("PRETTY_NAME") or ident or "this machine's distribution"
    if ident == "ubuntu" or "ubuntu" in like:  # guard: toolkit-ubuntu-s-sources-are-refused
        raise NemoRLError(f"{name} is not Debian: its mirror lacks trixie", UBUNTU_FIX)
    raise NemoRLError(f"{name} is not Debian ({os_release} says ID={ident or 'nothing'})",
                      DEBS_FIX + ", or install NVIDIA's CUDA 12 toolkit and set CUDA_HOME")


def archive_source(sources: list[Source], codename: str | None) -> Source:
    """The entry listing the release itself (`bookworm`, not `bookworm-security`)."""
    for source in sources:
        if codename and codename in source.suites:
            return source
    plain = [s for s in sources if any("-" not in suite and "/" not in suite for suite in s.suites)]  # guard: toolkit-the-archive-entry-not-security-s
    if plain:
        return plain[0]
    raise NemoRLError(f"no apt source for the release {codename or 'unknown'} in {APT_ETC}/sources.list(.d)",
                      "configure a Debian mirror in /etc/apt/sources.list.d/, or pass the .deb files with --debs")


# a newline in a deb822 value would start a field of its own (`Trusted: yes`), a space another value
_DEB822_WORD = re.compile(r"(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9.+~_/-]*(?<!/)\Z")  # no `..`, no absolute suite
_DEB822_URI = re.compile(r"[^\s\x00-\x1f\x7f]+\Z")
_BREAKS = "a newline or another control character would start a new line in apt's sources"


def deb822_word(value: str, what: str) -> str:
    """`value` when apt reads it as one suite or component."""
    if not _DEB822_WORD.match(value) or (what == "component" and "/" in value):  # guard: toolkit-a-suite-or-component-stays-one-word
        why = _BREAKS if values.breaks_lines(value) else (f"a {what} is one word of letters, digits and . + ~ _ - "
                                                          "(a suite may hold an inner /), without ..")
        raise NemoRLError(f"{value!r:.80} is not a {what} apt reads as one: {why}",
                          f"give a name such as {'trixie' if what == 'suite' else 'main'}")
    return value


def deb822_words(value: str, what: str) -> list[str]:
    if values.breaks_lines(value.replace(" ", "")) or not value.split():  # guard: toolkit-components-with-a-newline-are
        raise NemoRLError(f"{what} {value!r:.80} is no list of words: " + (_BREAKS if value.split() else "it is empty"),
                          "separate the names by spaces, e.g. 'main contrib non-free'")
    return value.split()


def private_sources(source: Source, suite: str, components: tuple[str, ...]) -> str:
    """A deb822 stanza of the mirror, suite and components; raises NemoRLError unless each stays one value."""
    bad = [uri for uri in source.uris if not _DEB822_URI.match(uri)]
    if bad:  # guard: toolkit-a-mirror-uri-stays-one-value
        raise NemoRLError(f"the mirror URI {bad[0]!r:.120} read from {APT_ETC} holds whitespace or a control "
                          "character", f"fix that entry of {APT_ETC}/sources.list(.d), or pass .deb files with --debs")
    deb822_word(suite, "suite")
    for component in components:
        deb822_word(component, "component")
    lines = ["Types: deb", f"URIs: {' '.join(source.uris)}", f"Suites: {suite}",
             f"Components: {' '.join(components)}"]
    if source.signed_by:
        lines.append("Signed-By: " + source.signed_by.replace("\n", "\n "))
    return "\n".join(lines) + "\n"
