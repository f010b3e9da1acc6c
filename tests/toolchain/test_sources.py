"""The machine's apt sources (toolchain/sources.py): deb822 and one-line files under /etc/apt, the release's archive
entry made the private sources, and only Debian asked for trixie."""

from __future__ import annotations

import pytest

from nemo_rl.errors import NemoRLError
from nemo_rl.toolchain import sources

DEB822 = """\
Types: deb
# a comment
URIs: http://mirror.invalid/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://security.invalid/debian-security
Suites: bookworm-security
Components: main
"""


def test_the_archive_entry_of_the_release_becomes_the_private_sources():
    found = sources.parse_deb822(DEB822)
    archive = sources.archive_source(found, "bookworm")
    assert archive.uris == ("http://mirror.invalid/debian",)
    text = sources.private_sources(archive, "trixie", ("main", "contrib", "non-free"))
    assert text == ("Types: deb\nURIs: http://mirror.invalid/debian\nSuites: trixie\n"
                    "Components: main contrib non-free\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
    # the security stanza alone is not the archive: its host lacks the packages
    with pytest.raises(NemoRLError, match="no apt source"):
        sources.archive_source(found[1:], "bookworm")


def test_one_line_sources_and_files_under_etc(tmp_path):
    etc = tmp_path / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    (etc / "sources.list").write_text("# deb http://old.invalid/debian bookworm main\n"
                                      "deb [arch=amd64 signed-by=/k.gpg] http://one.invalid/debian bookworm main\n")
    (etc / "sources.list.d" / "debian.sources").write_text(DEB822)
    found = sources.machine_sources(etc)
    assert [s.uris[0] for s in found] == ["http://one.invalid/debian", "http://mirror.invalid/debian",
                                           "http://security.invalid/debian-security"]
    assert found[0].signed_by == "/k.gpg"
    assert sources.archive_source(found, "bookworm").uris == ("http://one.invalid/debian",)


@pytest.mark.parametrize("os_release, refused", [
    ('ID=debian\nVERSION_CODENAME=bookworm\n', None),
    ('PRETTY_NAME="Ubuntu 24.04.1 LTS"\nID=ubuntu\nID_LIKE=debian\n', "cuda-toolkit-12-6"),
    ('ID=linuxmint\nID_LIKE="ubuntu debian"\n', "cuda-toolkit-12-6"),
    ('ID="rocky"\nID_LIKE="rhel centos fedora"\n', "--debs")])
def test_only_debian_sources_are_asked_for_trixie(tmp_path, os_release, refused):
    (tmp_path / "os-release").write_text(os_release)
    if refused is None:
        sources.require_debian(tmp_path / "os-release")
        return
    with pytest.raises(NemoRLError, match="is not Debian") as error:
        sources.require_debian(tmp_path / "os-release")
    assert refused in error.value.remedy


MIRROR = sources.Source(("http://mirror.invalid/debian",), ("bookworm",), None)


@pytest.mark.parametrize("source, suite, components, said", [
    (sources.Source(("http://mirror.invalid/debian\x1b[2J",), ("bookworm",), None), "trixie", ("main",),
     "the mirror URI 'http://mirror.invalid/debian\\x1b[2J' read from /etc/apt holds whitespace or a control"),
    (MIRROR, "trixie\nTrusted: yes", ("main",), "'trixie\\nTrusted: yes' is not a suite apt reads as one"),
    (MIRROR, "trixie", ("main", "non-free\nTrusted: yes"), "'non-free\\nTrusted: yes' is not a component apt"),
], ids=["a mirror URI", "a suite", "a component"])
def test_no_value_breaks_out_of_the_private_sources_stanza(source, suite, components, said):
    """The one writer of the stanza checks what it writes, whoever calls it: a value that would start a field of
    its own (`Trusted: yes`) is refused, never written."""
    with pytest.raises(NemoRLError) as refused:
        sources.private_sources(source, suite, components)
    assert refused.value.what.startswith(said), refused.value.what
