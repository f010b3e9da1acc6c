"""`nemo-rl toolchain cuda DIR`: the machine's mirror read from /etc/apt, apt's private state, the CUDA_HOME layout
made from Debian's package tree. The real assembly (1 GB from the mirror) runs in the cuda_toolkit tier."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from nemo_rl.cli import main
from nemo_rl.cudakit import apt, assemble, layout, sources
from nemo_rl.errors import NemoRLError

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


def test_apt_reads_and_writes_only_its_private_state(tmp_path):
    options = apt.options(tmp_path)
    pairs = dict(o.split("=", 1) for o in options[1::2])
    assert pairs["Dir::Etc::SourceList"] == os.devnull  # the machine's lists are never read
    assert pairs["Dir::State::Status"] == os.devnull  # nor its installed packages
    assert pairs["Dir::Etc::Preferences"] == os.devnull  # nor its pins
    for key in ("Dir::State", "Dir::State::Lists", "Dir::Cache", "Dir::Cache::Archives", "Dir::Etc::SourceParts"):
        assert Path(pairs[key]).is_relative_to(tmp_path), key
    assert apt.versions([Path("libnvvm4_12.4.131~12.4.1-2_amd64.deb"), Path("x_1%3a2.0-1_all.deb")]) == {
        "libnvvm4": "12.4.131~12.4.1-2", "x": "1:2.0-1"}


def fake_package_tree(root: Path, lib: str) -> None:
    """The paths Debian's packages put the toolkit in (the contents do not matter to the layout)."""
    toolkit = root / "usr/lib/nvidia-cuda-toolkit"
    files = ["usr/bin/nvcc", "usr/lib/nvidia-cuda-toolkit/bin/nvcc", "usr/lib/nvidia-cuda-toolkit/bin/cicc",
             "usr/lib/nvidia-cuda-toolkit/bin/crt/link.stub", "usr/lib/nvidia-cuda-toolkit/libdevice/libdevice.10.bc",
             "usr/include/cuda_runtime.h", "usr/include/crt/host_config.h", f"usr/lib/{lib}/libcudart.so.12.4.127",
             f"usr/lib/{lib}/libcudadevrt.a", f"usr/lib/{lib}/libnvvm.so.4.0.0",
             *(f"usr/bin/{tool}" for tool in layout.USR_BIN_TOOLS)]
    for relative in files:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(relative)
    (root / "usr/bin/nvcc").write_text("#!/bin/sh\nexec /usr/lib/nvidia-cuda-toolkit/bin/nvcc \"$@\"\n")
    os.symlink("libcudart.so.12.4.127", root / f"usr/lib/{lib}/libcudart.so")
    os.symlink("libnvvm.so.4.0.0", root / f"usr/lib/{lib}/libnvvm.so")
    os.symlink("/etc/nvcc.profile", toolkit / "bin/nvcc.profile")  # Debian's: absolute /usr paths
    os.symlink("libnvrtc.so.12", root / f"usr/lib/{lib}/libnvrtc.so")  # libnvrtc12 is not taken


def test_the_layout_is_a_relocatable_cuda_home(tmp_path):
    root, home = tmp_path / "root", tmp_path / "home"
    fake_package_tree(root, "x86_64-linux-gnu")
    assert layout.arrange(root, home, "x86_64-linux-gnu") == []
    # the real nvcc, not Debian's wrapper that calls /usr/lib/... by absolute path
    assert (home / "bin/nvcc").read_text() == "usr/lib/nvidia-cuda-toolkit/bin/nvcc"
    assert os.readlink(home / "lib64/libcudart.so") == "libcudart.so.12.4.127"
    assert os.readlink(home / "nvvm/lib64/libnvvm.so") == "libnvvm.so.4.0.0"
    assert not (home / "lib64/libnvrtc.so").is_symlink()  # dangling: transformer-engine's import would load it
    profile = (home / "bin/nvcc.profile").read_text()
    assert not (home / "bin/nvcc.profile").is_symlink() and "/usr" not in profile and "$(_HERE_)" in profile
    moved = tmp_path / "moved"
    shutil.move(home, moved)
    assert layout.missing(moved) == []
    assert arranged_again(root, moved) == []  # idempotent: arranging over a finished layout changes nothing


def arranged_again(root: Path, home: Path) -> list[str]:
    return layout.arrange(root, home, "x86_64-linux-gnu")


def test_a_package_tree_without_the_compiler_is_named(tmp_path):
    root, home = tmp_path / "root", tmp_path / "home"
    fake_package_tree(root, "x86_64-linux-gnu")
    (root / "usr/lib/nvidia-cuda-toolkit/bin/cicc").unlink()
    assert layout.arrange(root, home, "x86_64-linux-gnu") == ["nvvm/bin/cicc"]


def test_a_foreign_directory_is_never_changed(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # were the check gone, no apt: never a 1 GB download
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    assert main(["toolchain", "cuda", str(tmp_path / "mine")]) == 1
    assert "was not made by `nemo-rl toolchain cuda`" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]


def test_without_apt_it_says_what_to_do(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert main(["toolchain", "cuda", str(tmp_path / "cuda")]) == 1
    err = capsys.readouterr().err
    assert "apt-get and dpkg-deb are needed" in err and "--debs" in err and "nvidia-cuda-toolkit" in err


def test_a_bad_arch_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["toolchain", "cuda", str(tmp_path / "cuda"), "--arch", "sm_90"])
    assert exit_info.value.code == 2


@pytest.mark.cuda_toolkit
def test_assemble_from_the_mirror_and_compile_for_sm80(tmp_path):
    """The real thing: the machine's mirror, 1 GB of .debs, a kernel for sm_80; then a second run only verifies."""
    if not (shutil.which("apt-get") and shutil.which("dpkg-deb")):
        pytest.skip("needs apt-get and dpkg-deb (a Debian or Ubuntu builder)")
    home = tmp_path / "cuda"
    try:
        made = assemble.assemble(home, arch=80)
    except NemoRLError as exc:
        if "apt-get" in exc.what and "update" in exc.what:
            pytest.skip(f"the mirror is not reachable: {exc.what.splitlines()[0]}")
        raise
    assert made.nvcc_version.startswith("12.") and made.cubins == (80,) and not made.reused
    assert not (home / assemble.WORK).exists() and layout.missing(home) == []
    again = assemble.assemble(home, arch=80)
    assert again.reused and again.packages == made.packages


def test_the_preflight_names_the_command_when_nvcc_is_missing(tmp_path, monkeypatch):
    from nemo_rl.doctor import preflight

    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    item, nvcc = preflight.check_nvcc("12.6")
    if item.ok:
        pytest.skip(f"/usr/local/cuda holds a CUDA 12 nvcc: {item.detail}")
    # none at all, or /usr/local/cuda of another major (a CUDA 13 beside torch's 12)
    assert nvcc is None or "torch was built with CUDA 12.6" in item.detail
    assert "`nemo-rl toolchain cuda ~/cuda-12 --arch 90`" in item.fix


def test_cudnn_headers_only_in_the_wheel_fail_with_the_export_line(tmp_path, monkeypatch):
    """uv builds transformer-engine in an isolated environment: the wheel's headers count once CUDNN_PATH names
    them, as torch's extension build adds $CUDNN_PATH/include."""
    from nemo_rl.doctor import preflight

    wheel = tmp_path / "site" / "nvidia" / "cudnn"
    (wheel / "include").mkdir(parents=True)
    (wheel / "include" / "cudnn_version.h").write_text("#define CUDNN_MAJOR 9\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site")])
    for name in ("CUDNN_PATH", "CUDNN_HOME", "CUDA_HOME", "CPATH"):
        monkeypatch.delenv(name, raising=False)
    if any(preflight._has_cudnn_header(d) for d in preflight.SYSTEM_HEADER_DIRS):
        pytest.skip("cuDNN headers are installed system-wide here")
    item = preflight.check_cudnn()
    assert not item.ok and f"`export CUDNN_PATH={wheel}`" in item.fix
    monkeypatch.setenv("CUDNN_PATH", str(wheel))
    assert preflight.check_cudnn().ok


def stamped_toolkit(tmp_path: Path) -> Path:
    """A toolkit as a finished run leaves it: the layout and a stamp with its file list."""
    root, home = tmp_path / "root", tmp_path / "cuda"
    fake_package_tree(root, layout.triplet())
    assert layout.arrange(root, home) == []
    assemble._write_stamp(home, {"packages": {"nvidia-cuda-toolkit": "12.4.131~12.4.1-3"}, "nvcc": "12.4",
                                 "suite": "trixie", "files": assemble._listing(home)})
    return home


class Reassembling(Exception):
    pass


def test_a_binary_deleted_after_assembly_is_not_trusted_on_the_stamp(tmp_path, monkeypatch):
    home = stamped_toolkit(tmp_path)
    verified = []
    monkeypatch.setattr(assemble, "verify", lambda *a: verified.append(a) or ("12.4", (90,)))
    assert assemble.assemble(home).reused and verified  # the control: as assembled, verified and reused
    (home / "bin" / "fatbinary").write_text("")  # truncated: the name is there, the size is not
    assert assemble._damage(home, assemble._stamp(home)) == "1 changed (bin/fatbinary)"
    (home / "nvvm" / "bin" / "cicc").unlink()  # gone (a REQUIRED path: caught by the list, not only by REQUIRED)
    (home / "include" / "crt").rename(home / "include" / "crt-moved")
    assert "missing" in assemble._damage(home, assemble._stamp(home))
    verified.clear()

    def reassemble(os_release):
        raise Reassembling

    monkeypatch.setattr(sources, "require_debian", reassemble)  # the first step of a new assembly
    with pytest.raises(Reassembling):
        assemble.assemble(home)
    assert not verified


def test_two_runs_on_one_directory_take_turns(tmp_path, monkeypatch, capsys):
    import threading

    from nemo_rl import locks

    home = stamped_toolkit(tmp_path)
    monkeypatch.setattr(assemble, "verify", lambda *a: ("12.4", (90,)))
    fd = locks.open_lock_file(home.parent / f".{home.name}.toolchain-lock")
    assert locks.acquire(fd, None)  # a first run, assembling
    results = []
    second = threading.Thread(target=lambda: results.append(assemble.assemble(home)))
    second.start()
    second.join(1.0)
    assert second.is_alive() and results == []  # waits for the first
    os.close(fd)
    second.join(10)
    assert results and results[0].reused
    assert "another `nemo-rl toolchain cuda` is assembling" in capsys.readouterr().err


def test_only_links_the_layout_made_are_swept(tmp_path):
    root, home = tmp_path / "root", tmp_path / "home"
    fake_package_tree(root, "x86_64-linux-gnu")
    (home / "lib64").mkdir(parents=True)
    os.symlink("not-yet-there.so", home / "lib64" / "mine.so")  # not the layout's: never deleted
    assert layout.arrange(root, home, "x86_64-linux-gnu") == []
    assert (home / "lib64" / "mine.so").is_symlink()
    assert not (home / "lib64" / "libnvrtc.so").is_symlink()  # the layout's own dangling link is


def test_debs_missing_a_package_are_refused_by_name_without_the_network(tmp_path, monkeypatch, capsys):
    debs = tmp_path / "debs"
    debs.mkdir()
    for name in apt.PACKAGES[:-2]:
        (debs / f"{name}_12.4_amd64.deb").write_bytes(b"")
    monkeypatch.setattr(apt, "update", lambda *a: pytest.fail("went to the network"))
    monkeypatch.setattr(apt, "download", lambda *a, **k: pytest.fail("went to the network"))
    assert main(["toolchain", "cuda", str(tmp_path / "cuda"), "--debs", str(debs)]) == 1
    err = capsys.readouterr().err
    assert f"has no .deb of {apt.PACKAGES[-2]}, {apt.PACKAGES[-1]}" in err and "--debs" in err


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


def test_a_verified_toolkit_loses_a_killed_runs_work_directory(tmp_path, monkeypatch):
    """A re-assembly killed after the stamp was written left DIR/.nemo-rl-cuda/ (about 1 GB): the next run that
    verifies the toolkit removes it."""
    home = stamped_toolkit(tmp_path)
    (home / assemble.WORK / "debs").mkdir(parents=True)
    (home / assemble.WORK / "debs" / "nvidia-cuda-toolkit_12.4_amd64.deb").write_bytes(b"x" * 1024)
    monkeypatch.setattr(assemble, "verify", lambda *a: ("12.4", (90,)))
    assert assemble.assemble(home).reused
    assert not (home / assemble.WORK).exists()


def test_a_reassembly_removes_the_stamp_before_it_starts(tmp_path, monkeypatch):
    """Killed half-way, a re-assembly must not leave the old stamp over a half-made tree."""
    home = stamped_toolkit(tmp_path)
    (home / "bin" / "ptxas").unlink()
    monkeypatch.setattr(sources, "require_debian", lambda os_release: (_ for _ in ()).throw(Reassembling()))
    with pytest.raises(Reassembling):
        assemble.assemble(home)
    assert not (home / assemble.STAMP).exists() and (home / assemble.WORK).is_dir()  # still ours to finish


def test_a_hand_written_stamp_does_not_skip_the_layout_check(tmp_path, monkeypatch):
    home = stamped_toolkit(tmp_path)
    (home / "bin" / "nvcc").unlink()
    assemble._write_stamp(home, {"packages": {}, "files": {}})
    assert "bin/nvcc" in assemble._damage(home, assemble._stamp(home))
    monkeypatch.setattr(assemble, "verify", lambda *a: pytest.fail("trusted a stamp over a missing nvcc"))
    monkeypatch.setattr(sources, "require_debian", lambda os_release: (_ for _ in ()).throw(Reassembling()))
    with pytest.raises(Reassembling):
        assemble.assemble(home)


def test_one_lock_however_the_directory_is_spelled(tmp_path, monkeypatch):
    import threading

    from nemo_rl import locks

    home = stamped_toolkit(tmp_path)
    os.symlink(home, tmp_path / "alias")
    monkeypatch.setattr(assemble, "verify", lambda *a: ("12.4", (90,)))
    fd = locks.open_lock_file(home.parent / f".{home.name}.toolchain-lock")
    assert locks.acquire(fd, None)
    results = []
    second = threading.Thread(target=lambda: results.append(assemble.assemble(tmp_path / "alias")))
    second.start()
    second.join(1.0)
    assert second.is_alive() and results == []  # the alias waits for the run on the real path
    os.close(fd)
    second.join(10)
    assert results and results[0].reused and results[0].home == home


def test_a_lock_file_that_cannot_be_made_is_named_with_its_directory(tmp_path, monkeypatch, capsys):
    from nemo_rl import locks

    def refused(path, not_yours=None):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(locks, "open_lock_file", refused)
    assert main(["toolchain", "cuda", str(tmp_path / "cuda")]) == 1
    err = capsys.readouterr().err
    assert f"the lock file {tmp_path}/.cuda.toolchain-lock" in err and f"the lock lives in {tmp_path}" in err


def test_a_toolkit_another_user_locked_first_says_what_to_do(tmp_path, monkeypatch):
    """A group-shared directory: the first user's lock file is theirs, and the fix names the toolkit, not the
    NEMO_RL_* settings that have nothing to do with it."""
    from nemo_rl.errors import NemoRLError

    home = stamped_toolkit(tmp_path)
    (home.parent / f".{home.name}.toolchain-lock").write_text("")
    uid = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: uid + 1)
    with pytest.raises(NemoRLError, match="belongs to") as refused:
        assemble.assemble(home)
    assert "nemo-rl toolchain cuda DIR" in refused.value.remedy and "NEMO_RL_VENV_DIR" not in refused.value.remedy
