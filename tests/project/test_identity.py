"""A checkout's id (project/identity.py): made once, agreed on by builds racing to make it, read through the
plain-file reader, never through a `.nemo-rl` link, and not needed on a read-only checkout."""

from __future__ import annotations

import errno
import os
import shutil
import threading
from pathlib import Path

import pytest

from nemo_rl.errors import NemoRLError
from nemo_rl.project import identity


def test_a_damaged_checkout_id_is_named_and_two_builds_agree_on_a_new_one(tmp_path):
    (tmp_path / identity.ID_FILE).parent.mkdir()
    (tmp_path / identity.ID_FILE).write_text("not hex\n")
    with pytest.raises(NemoRLError, match="not a checkout id"):
        identity.ensure_checkout_id(tmp_path)
    (tmp_path / identity.ID_FILE).unlink()
    made: list[str] = []
    failed: list[BaseException] = []

    def build():
        try:
            made.append(identity.ensure_checkout_id(tmp_path))
        except BaseException as exc:
            failed.append(exc)

    threads = [threading.Thread(target=build) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failed and len(made) == 8
    assert len(set(made)) == 1 and made[0] == identity.checkout_id(tmp_path)
    assert [p.name for p in (tmp_path / identity.ID_FILE).parent.iterdir()] == ["checkout-id"]  # no temporaries


def test_an_id_another_build_linked_first_is_read(tmp_path, monkeypatch):
    """Another build links its id into place after this one read none there: this build's own link then fails,
    and it reads theirs (never calls it damaged, never keeps its own)."""
    theirs, real_link = "a" * 32, os.link

    def link_second(src, dst):
        (tmp_path / identity.ID_FILE).write_text(theirs + "\n")  # the other build, just before this one links
        return real_link(src, dst)

    monkeypatch.setattr(os, "link", link_second)
    assert identity.ensure_checkout_id(tmp_path) == theirs
    assert [p.name for p in (tmp_path / identity.ID_FILE).parent.iterdir()] == ["checkout-id"]  # no temporaries


def test_an_id_linked_in_just_after_the_read_is_read(tmp_path, monkeypatch):
    """Another build links its id right after this one read nothing there: what was read decides (no second look
    that would see a file and call it damaged)."""
    from nemo_rl import values

    theirs, real, reads = "b" * 32, values.read_plain_file, []

    def read_then_linked(path, limit=values.STATE_FILE_MAX):
        reads.append(path)
        try:
            return real(path, limit)
        finally:
            if len(reads) == 1:
                (tmp_path / identity.ID_FILE).parent.mkdir(exist_ok=True)
                (tmp_path / identity.ID_FILE).write_text(theirs + "\n")

    monkeypatch.setattr(values, "read_plain_file", read_then_linked)
    assert identity.ensure_checkout_id(tmp_path) == theirs


def test_a_nemo_rl_link_is_refused_not_read_through(tmp_path):
    """A `.nemo-rl` link (committed by a pull request) to a directory holding someone's id: never this checkout's."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / identity.ID_FILE.name).write_text("c" * 32 + "\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / identity.ID_FILE.parent).symlink_to(elsewhere)
    with pytest.raises(NemoRLError, match="is a symbolic link"):
        identity.ensure_checkout_id(project)
    assert identity.checkout_id(project) is None


def _nemo_rl_removed_after_made(monkeypatch, times: int) -> None:
    """A bump or recover in another terminal removes the empty .nemo-rl right after this build made it."""
    from nemo_rl.project import state_dir

    real, removed = state_dir.state_root, []

    def state_root(project, *, create=False):
        root = real(project, create=create)
        if create and len(removed) < times:
            removed.append(root)
            state_dir.remove_empty(root)
        return root

    monkeypatch.setattr(state_dir, "state_root", state_root)


def test_a_nemo_rl_directory_removed_meanwhile_is_made_again(tmp_path, monkeypatch):
    _nemo_rl_removed_after_made(monkeypatch, times=1)
    made = identity.ensure_checkout_id(tmp_path)
    assert identity.ID.fullmatch(made) and identity.checkout_id(tmp_path) == made


def test_the_last_try_that_links_the_id_returns_it(tmp_path, monkeypatch):
    """Every try but the last lost: the last one's id is read back, not called gone."""
    _nemo_rl_removed_after_made(monkeypatch, times=identity.ATTEMPTS - 1)
    made = identity.ensure_checkout_id(tmp_path)
    assert identity.ID.fullmatch(made) and identity.checkout_id(tmp_path) == made


def test_a_nemo_rl_directory_removed_with_its_files_before_the_link_is_made_again(tmp_path, monkeypatch):
    """`rm -rf .nemo-rl` in another terminal between the id's write and its link: tried again, no raw error."""
    real_link, removed = os.link, []

    def link(source, target, *args, **kwargs):
        if not removed:
            removed.append(source)
            shutil.rmtree(tmp_path / identity.ID_FILE.parent)
        return real_link(source, target, *args, **kwargs)

    monkeypatch.setattr(os, "link", link)
    made = identity.ensure_checkout_id(tmp_path)
    assert removed and identity.checkout_id(tmp_path) == made and identity.ID.fullmatch(made)
    assert sorted(p.name for p in (tmp_path / identity.ID_FILE.parent).iterdir()) == [identity.ID_FILE.name]


def test_a_nemo_rl_directory_removed_every_time_is_a_clear_error(tmp_path, monkeypatch):
    _nemo_rl_removed_after_made(monkeypatch, times=identity.ATTEMPTS)
    with pytest.raises(NemoRLError, match="removed after each of 3 tries") as caught:
        identity.ensure_checkout_id(tmp_path)
    assert "run again once nothing else removes" in caught.value.remedy


def test_a_read_only_checkout_builds_without_an_id(tmp_path, monkeypatch):
    """A checkout in an image or on a read-only mount: no id can be written, and none is needed to build."""
    real_mkdir = Path.mkdir

    def read_only(self, *args, **kwargs):
        if self == tmp_path / identity.ID_FILE.parent:
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", read_only)
    assert identity.ensure_checkout_id(tmp_path) == "" and not (tmp_path / identity.ID_FILE.parent).exists()
