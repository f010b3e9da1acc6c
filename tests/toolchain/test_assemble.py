"""nemo_rl/toolchain/assemble.py: the stamp, the lock, a foreign directory, --debs; the real assembly in the
cuda_toolkit tier."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from fakes import _never_hangs, fake_package_tree

from nemo_rl import codec
from nemo_rl.cli import main
from nemo_rl.errors import NemoRLError
from nemo_rl.toolchain import apt, assemble, layout, sources


def test_a_fifo_toolkit_stamp_is_no_stamp(tmp_path):
    os.mkfifo(tmp_path / assemble.STAMP)
    assert _never_hangs(f"from pathlib import Path; from nemo_rl.toolchain import assemble; "
                        f"print(assemble.read_stamp(Path({str(tmp_path)!r})))") == "None"


def stamped_toolkit(tmp_path: Path) -> Path:
    """A toolkit as a finished run leaves it: taken, the layout and a stamp with its file list."""
    root, home = tmp_path / "root", tmp_path / "cuda"
    fake_package_tree(root, layout.triplet())
    home.mkdir()
    assemble._take(home)
    assert layout.arrange(root, home) == []
    write_stamp(home, assemble.Stamp({"nvidia-cuda-toolkit": "12.4.131~12.4.1-3"}, "12.4", "trixie",
                                     assemble._listing(home)))
    return home


def write_stamp(home: Path, stamp: assemble.Stamp) -> None:
    codec.write(home / assemble.STAMP, stamp, assemble.STAMP_VERSION)


class Reassembling(Exception):
    pass


def test_a_foreign_directory_is_never_changed(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # were the check gone, no apt: never a 1 GB download
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    assert main(["toolchain", "cuda", str(tmp_path / "mine")]) == 1
    assert "was not made by `nemo-rl toolchain cuda`" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]


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


def test_a_binary_deleted_after_assembly_is_not_trusted_on_the_stamp(tmp_path, monkeypatch):
    home = stamped_toolkit(tmp_path)
    verified = []
    monkeypatch.setattr(assemble, "verify", lambda *a: verified.append(a) or ("12.4", (90,)))
    assert assemble.assemble(home).reused and verified  # the control: as assembled, verified and reused
    (home / "bin" / "fatbinary").write_text("")  # truncated: the name is there, the size is not
    assert assemble._damage(home, assemble.read_stamp(home)) == "1 changed (bin/fatbinary)"
    (home / "nvvm" / "bin" / "cicc").unlink()  # gone (a REQUIRED path: caught by the list, not only by REQUIRED)
    (home / "include" / "crt").rename(home / "include" / "crt-moved")
    assert "missing" in assemble._damage(home, assemble.read_stamp(home))
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


def test_a_verified_toolkit_loses_a_killed_runs_work_directory(tmp_path, monkeypatch):
    """A re-assembly killed after the stamp was written left DIR/.nemo-rl-cuda/ (about 1 GB): the next run that
    verifies the toolkit removes it."""
    home = stamped_toolkit(tmp_path)
    (home / assemble.WORK / "debs").mkdir(parents=True)
    (home / assemble.WORK / "debs" / "nvidia-cuda-toolkit_12.4_amd64.deb").write_bytes(b"x" * 1024)
    monkeypatch.setattr(assemble, "verify", lambda *a: ("12.4", (90,)))
    assert assemble.assemble(home).reused
    assert os.listdir(home / assemble.WORK) == [assemble.TAKEN]


def test_a_reassembly_removes_the_stamp_before_it_starts(tmp_path, monkeypatch):
    """Killed half-way, a re-assembly must not leave the old stamp over a half-made tree."""
    home = stamped_toolkit(tmp_path)
    (home / "bin" / "ptxas").unlink()
    allow_apt(monkeypatch)
    monkeypatch.setattr(apt, "update", lambda *a: (_ for _ in ()).throw(Reassembling()))
    with pytest.raises(Reassembling):
        assemble.assemble(home)
    assert not (home / assemble.STAMP).exists() and (home / assemble.WORK).is_dir()
    assert not assemble._foreign(home, None)  # still ours to finish


def test_a_hand_written_stamp_does_not_skip_the_layout_check(tmp_path, monkeypatch):
    home = stamped_toolkit(tmp_path)
    (home / "bin" / "nvcc").unlink()
    write_stamp(home, assemble.Stamp({}, "12.4", "trixie", {}))
    assert "bin/nvcc" in assemble._damage(home, assemble.read_stamp(home))
    monkeypatch.setattr(assemble, "verify", lambda *a: pytest.fail("trusted a stamp over a missing nvcc"))
    monkeypatch.setattr(sources, "require_debian", lambda os_release: (_ for _ in ()).throw(Reassembling()))
    with pytest.raises(Reassembling):
        assemble.assemble(home)


def test_a_stamp_of_another_version_is_assembled_again(tmp_path, monkeypatch):
    home = stamped_toolkit(tmp_path)
    codec.write(home / assemble.STAMP, assemble.read_stamp(home), assemble.STAMP_VERSION + 1)
    monkeypatch.setattr(assemble, "verify", lambda *a: pytest.fail("trusted a stamp of another version"))
    allow_apt(monkeypatch)
    monkeypatch.setattr(apt, "update", lambda *a: (_ for _ in ()).throw(Reassembling()))
    with pytest.raises(Reassembling):
        assemble.assemble(home)
    assert not (home / assemble.STAMP).exists()


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


def test_a_users_directory_with_an_empty_work_directory_is_not_taken_for_a_killed_run(tmp_path, monkeypatch, capsys):
    """Their files beside an empty .nemo-rl-cuda/: no run of this user's took it, so nothing is written there, and
    the refusal names what the directory holds."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # were the check gone, no apt: never a 1 GB download
    mine = tmp_path / "mine"
    (mine / assemble.WORK).mkdir(parents=True)
    (mine / "notes.txt").write_text("keep")
    assert main(["toolchain", "cuda", str(mine)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {mine} exists and was not made by `nemo-rl toolchain cuda`: it holds "
                          f"{assemble.WORK}, notes.txt (no stamp lists notes.txt)"), err
    assert sorted(p.name for p in mine.iterdir()) == [assemble.WORK, "notes.txt"]
    assert not any((mine / assemble.WORK).iterdir())


def users_directory(tmp_path: Path) -> Path:
    mine = tmp_path / "ud"
    (mine / "bin").mkdir(parents=True)
    (mine / "bin" / "mytool").write_text("#!/bin/sh\n")
    (mine / "notes.txt").write_text("keep")
    return mine


@pytest.mark.parametrize("marks", ["a stray stamp of another shape", "a stamp of a toolkit copied beside them",
                                   "a work directory with its marker"])
def test_a_users_directory_is_never_taken_on_what_a_copy_could_bring(tmp_path, monkeypatch, capsys, marks):
    """A stamp or a work directory copied in with the user's files proves nothing: the user's files stay as they
    were, stamp included, whatever the debs given."""
    mine = users_directory(tmp_path)
    if marks == "a stray stamp of another shape":
        (mine / assemble.STAMP).write_text('{"packages": {}}')
    elif marks == "a stamp of a toolkit copied beside them":
        shutil.copy(stamped_toolkit(tmp_path) / assemble.STAMP, mine / assemble.STAMP)
    else:
        (mine / assemble.WORK).mkdir()
        (mine / assemble.WORK / "started").write_text("")
    before = {p: p.read_bytes() for p in mine.rglob("*") if p.is_file()}
    (tmp_path / "empty").mkdir()
    assert main(["toolchain", "cuda", str(mine), "--debs", str(tmp_path / "empty")]) == 1
    err = capsys.readouterr().err
    assert f"error: {mine} exists and was not made by `nemo-rl toolchain cuda`" in err, err
    assert "bin/mytool" in err or "notes.txt" in err
    assert {p: p.read_bytes() for p in mine.rglob("*") if p.is_file()} == before


def test_a_run_whose_inputs_do_not_check_neither_takes_nor_writes_the_directory(tmp_path, monkeypatch, capsys):
    home = tmp_path / "cuda"
    (tmp_path / "empty").mkdir()
    assert main(["toolchain", "cuda", str(home), "--debs", str(tmp_path / "empty")]) == 1
    assert "has no .deb of" in capsys.readouterr().err
    assert not home.exists()
    home.mkdir()
    (home / "notes.txt").write_text("mine now")
    assert assemble._foreign(home, None) == ["notes.txt"]


def test_what_a_killed_run_left_is_finished(tmp_path, monkeypatch):
    """A run killed after it took DIR left its work directory and files: the user's store says the run took this
    very directory, so the next run goes on."""
    home = tmp_path / "cuda"
    home.mkdir()
    assemble._take(home)
    fake_package_tree(tmp_path / "root", layout.triplet())
    layout.arrange(tmp_path / "root", home)
    allow_apt(monkeypatch)
    monkeypatch.setattr(apt, "update", lambda *a: (_ for _ in ()).throw(Reassembling()))
    with pytest.raises(Reassembling):  # past the refusal: assembling
        assemble.assemble(home)


def test_a_toolkit_copied_with_its_stamp_is_verified_not_assembled_again(tmp_path, monkeypatch):
    """No run of this user's took the copy: its stamp lists every file it holds, and vouches for them."""
    shutil.copytree(stamped_toolkit(tmp_path), tmp_path / "copy", symlinks=True)
    monkeypatch.setattr(assemble, "verify", lambda *a: ("12.4", (90,)))
    assert assemble.assemble(tmp_path / "copy").reused
    (tmp_path / "copy" / assemble.WORK / "mine.txt").write_text("a file the stamp does not list")
    assert assemble._foreign(tmp_path / "copy", assemble.read_stamp(tmp_path / "copy")) == [f"{assemble.WORK}/"]


def test_a_copy_of_a_taken_directory_is_not_taken(tmp_path):
    """The record names the directory the filesystem holds at that path and the token the run wrote in it: a copy
    put in its place, or the directory without the token, is not the one the run took."""
    home = tmp_path / "cuda"
    home.mkdir()
    assemble._take(home)
    (home / "notes.txt").write_text("x")
    assert assemble._foreign(home, None) == []
    home.rename(tmp_path / "old")
    shutil.copytree(tmp_path / "old", home)
    assert assemble._foreign(home, None) == ["notes.txt"]  # the copy's token proves nothing
    shutil.rmtree(home)
    (tmp_path / "old").rename(home)
    (home / assemble.WORK / assemble.TAKEN).unlink()  # as a new directory at a reused inode would lack it
    assert assemble._foreign(home, None) == ["notes.txt"]


def test_a_token_link_a_copy_brought_is_replaced_never_written_through(tmp_path, monkeypatch):
    copy, victim = tmp_path / "copy", tmp_path / "victim"
    shutil.copytree(stamped_toolkit(tmp_path), copy, symlinks=True)
    victim.write_text("keep")
    (copy / assemble.WORK / assemble.TAKEN).unlink()
    os.symlink(victim, copy / assemble.WORK / assemble.TAKEN)
    (copy / "bin" / "nvcc").unlink()  # damaged: assembled again
    allow_apt(monkeypatch)
    monkeypatch.setattr(apt, "update", lambda *a: (_ for _ in ()).throw(Reassembling()))
    with pytest.raises(Reassembling):
        assemble.assemble(copy)
    assert victim.read_text() == "keep" and not (copy / assemble.WORK / assemble.TAKEN).is_symlink()


def allow_apt(monkeypatch) -> None:
    """Past the checks of the machine's apt: a Debian with its tools and sources."""
    monkeypatch.setattr(sources, "require_debian", lambda os_release: "trixie")
    monkeypatch.setattr(apt, "require_tools", lambda: None)
    monkeypatch.setattr(sources, "machine_sources", lambda etc: None)
    mirror = sources.Source(("http://m",), ("trixie",), None)
    monkeypatch.setattr(sources, "archive_source", lambda machine, codename: mirror)
