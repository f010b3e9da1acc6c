"""Copying a bundle's uv cache file by file (workers/tree_copy.py): each name copied apart, never through a FIFO,
device or link swapped in, and one file that cannot be copied ends the copy."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import time
from pathlib import Path

import pytest
from fakes import FLAGS, fake_bundle

from nemo_rl.errors import NemoRLError
from nemo_rl.project.model import Project
from nemo_rl.workers import bundle_copy, bundles, tree_copy


def test_hard_links_between_files_of_one_bundle_are_copied_apart(world, tmp_path, monkeypatch):
    """What `cp -a`, `rsync -H` or a deduplicating tool leaves (one inode, two names) is a bundle like any: a
    node that copies copies each name, so the copy shares no inode with the bundle, however many names it has."""
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    monkeypatch.setattr(tree_copy, "linkable", lambda info, device: False)  # another owner's, or filesystem
    files = {"archive-v0/abc/a.py": "X = 1\n", "archive-v0/def/a.py": "X = 1\n", "simple-v1/index": "i\n"}
    bundle = fake_bundle(world, tmp_path / "bundle", files)
    one, two = (bundle / bundles.CACHE / name for name in ("archive-v0/abc/a.py", "archive-v0/def/a.py"))
    two.unlink()
    os.link(one, two)
    os.link(one, tmp_path / "outside.py")  # and the same inode outside the bundle too
    manifest = bundles.check(bundle, Project.read(world.project), FLAGS)
    inodes = []
    monkeypatch.setattr(bundles.uv, "sync", lambda *a, extra_env, **k: inodes.extend(
        os.stat(Path(extra_env["UV_CACHE_DIR"]) / name).st_ino for name in files))
    bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", manifest)
    assert len(set(inodes)) == 3 and os.stat(one).st_ino not in inodes


def test_a_fifo_in_a_bundle_is_refused_never_waited_on(world, tmp_path, monkeypatch):
    import threading

    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    bundle = fake_bundle(world, tmp_path / "bundle")
    fifo = bundle / bundles.CACHE / "simple-v1" / "pipe"
    os.mkfifo(fifo)

    def unblock():  # without the check a reader would wait for ever: a writer that comes and goes ends that
        with open(fifo, "wb"):
            pass

    writer = threading.Timer(5, unblock)
    writer.start()
    try:
        # its manifest only: the copy meets the FIFO
        manifest = bundles.check(bundle, Project.read(world.project), FLAGS)
        with pytest.raises(NemoRLError, match="not a regular file"):
            bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", manifest)
        with pytest.raises(NemoRLError, match="not a file or a link"):
            bundles.content_digest(bundle / bundles.CACHE)
    finally:
        writer.cancel()
        if writer.is_alive():
            writer.join()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root (mknod)")
def test_a_device_in_a_bundle_is_refused_never_opened(world, tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    bundle = fake_bundle(world, tmp_path / "bundle")
    device = bundle / bundles.CACHE / "simple-v1" / "tape"
    os.mknod(device, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # opening a tape drive rewinds it
    manifest = bundles.check(bundle, Project.read(world.project), FLAGS)
    opened, real_open = [], os.open
    monkeypatch.setattr(os, "open", lambda path, *a, **k: (opened.append(str(path)), real_open(path, *a, **k))[1])
    with pytest.raises(NemoRLError, match="not a regular file"):
        bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", manifest)
    assert str(device) not in opened


def test_a_file_swapped_for_a_fifo_after_the_look_is_refused_by_the_copy(world, tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    monkeypatch.setattr(tree_copy, "linkable", lambda info, device: False)  # copied: another owner's
    bundle = fake_bundle(world, tmp_path / "bundle")
    index = bundle / bundles.CACHE / "simple-v1" / "index"
    manifest = bundles.check(bundle, Project.read(world.project), FLAGS)
    real_open = os.open

    def swapped(path, *args, **kwargs):  # the bundle's writer wins the race between the look and the open
        if str(path) == str(index) and index.is_file():
            index.unlink()
            os.mkfifo(index)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", swapped)
    with pytest.raises(NemoRLError, match="not a regular file"):
        bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", manifest)


def test_one_file_that_cannot_be_copied_ends_the_copy(world, tmp_path, monkeypatch):
    """A bad file among 35,000 is said at once, not after every other file was copied and hashed."""
    from nemo_rl.workers import tree_copy

    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    files = {f"archive-v0/abc/m{i:03}.py": f"X = {i}\n" for i in range(300)}
    bundle = fake_bundle(world, tmp_path / "bundle", {"archive-v0/abc/a.py": "A\n", **files})
    manifest = bundles.check(bundle, Project.read(world.project), FLAGS)
    (bundle / bundles.CACHE / "archive-v0/abc/a.py").unlink()
    os.mkfifo(bundle / bundles.CACHE / "archive-v0/abc/a.py")
    calls, real = [], tree_copy._copy_file
    monkeypatch.setattr(tree_copy, "_copy_file", lambda *a: (calls.append(a[0]), real(*a))[1])
    with pytest.raises(NemoRLError, match="not a regular file"):
        bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", manifest)
    after = len(calls) - 1 - calls.index(str(bundle / bundles.CACHE / "archive-v0/abc/a.py"))
    assert calls[0].endswith("a.py") and after <= 2 * (os.cpu_count() or 1), (after, len(calls))  # under way


@pytest.mark.parametrize("errno_", [errno.EACCES, errno.ESTALE])
def test_a_bundle_directory_that_cannot_be_listed_names_the_bundle(world, tmp_path, monkeypatch, errno_):
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    bundle = fake_bundle(world, tmp_path / "bundle", {"archive-v0/abc/a.py": "A\n"})
    manifest = bundles.check(bundle, Project.read(world.project), FLAGS)
    unreadable, real = str(bundle / bundles.CACHE / "archive-v0"), os.open

    def opened(path, flags, *rest, **named):  # root reads any directory: the refusal is injected
        if path == unreadable and flags & os.O_DIRECTORY:
            raise OSError(errno_, os.strerror(errno_), path)
        return real(path, flags, *rest, **named)

    monkeypatch.setattr(os, "open", opened)
    with pytest.raises(NemoRLError, match="cannot list .*archive-v0 of bundle") as caught:
        bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", manifest)
    assert caught.value.remedy == f"copy the bundle again from the builder: {bundle}"


def test_a_bundle_directory_swapped_for_a_link_during_the_copy_is_never_followed(world, tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    bundle = fake_bundle(world, tmp_path / "bundle", {"archive-v0/abc/a.py": "A\n"})
    manifest = bundles.check(bundle, Project.read(world.project), FLAGS)
    swapped, real = str(bundle / bundles.CACHE / "archive-v0" / "abc"), os.open
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "a.py").write_text("planted\n")

    def opened(path, flags, *rest, **named):  # listed as a directory, a link by the time it is opened
        if path == swapped and flags & os.O_DIRECTORY and not os.path.islink(path):
            shutil.rmtree(path)
            os.symlink(tmp_path / "outside", path)
        return real(path, flags, *rest, **named)

    monkeypatch.setattr(os, "open", opened)
    with pytest.raises(NemoRLError, match="cannot list .*abc of bundle"):
        bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", manifest)
    assert (tmp_path / "outside" / "a.py").stat().st_nlink == 1  # nothing outside was linked into the node


def test_a_fifo_planted_after_the_check_is_named(world, tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    bundle = fake_bundle(world, tmp_path / "bundle")
    bundles.check(bundle, Project.read(world.project), FLAGS)
    os.mkfifo(bundle / bundles.CACHE / "simple-v1" / "pipe")
    with pytest.raises(NemoRLError, match="cannot copy .*pipe"):
        bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", bundles.read_manifest(bundle))
    venvs = tmp_path / "venvs"
    assert [p.name for p in venvs.iterdir()] == [bundle_copy.node_lock(venvs).name]  # only the node's lock


def _stat(uid: int, mode: int, device: int = 7, names: int = 1) -> os.stat_result:
    return os.stat_result((mode, 1, device, names, uid, 0, 10, 0, 0, 0))


@pytest.mark.parametrize(("info", "linked"), [
    pytest.param(_stat(os.geteuid(), stat.S_IFREG | 0o644), True, id="ours"),
    pytest.param(_stat(0, stat.S_IFREG | 0o444), True, id="root-s"),
    # another user's: they could write it after the hash
    pytest.param(_stat(os.geteuid() + 1, stat.S_IFREG | 0o644), False, id="another-user-s"),
    pytest.param(_stat(os.geteuid(), stat.S_IFREG | 0o664), False, id="group-writable"),
    pytest.param(_stat(os.geteuid(), stat.S_IFREG | 0o646), False, id="others-writable"),
    pytest.param(_stat(os.geteuid(), stat.S_IFREG | stat.S_ISUID | 0o755), False, id="setuid"),  # a copy drops it
    pytest.param(_stat(os.geteuid(), stat.S_IFREG | 0o644, device=8), False, id="another-filesystem"),
    pytest.param(_stat(os.geteuid(), stat.S_IFIFO | 0o644), False, id="fifo"),
    pytest.param(_stat(os.geteuid(), stat.S_IFREG | 0o644, names=2), False, id="linked-elsewhere-too"),
])
def test_only_files_this_user_or_root_alone_may_write_on_the_same_filesystem_are_linked(info, linked):
    assert tree_copy.linkable(info, 7) is linked


def _inodes(monkeypatch, files) -> list[dict[str, int]]:
    seen: list[dict[str, int]] = []
    monkeypatch.setattr(bundles.uv, "sync", lambda *a, extra_env, **k: seen.append(
        {name: os.stat(Path(extra_env["UV_CACHE_DIR"]) / name).st_ino for name in files}))
    return seen


def test_a_bundle_of_this_user_s_is_linked_and_an_edit_after_is_refused_by_the_next_build(world, tmp_path,
                                                                                         monkeypatch):
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    files = {"archive-v0/abc/mine.py": "A\n", "archive-v0/abc/shared.py": "B\n", "simple-v1/index": "i\n"}
    bundle = fake_bundle(world, tmp_path / "bundle", files)
    cache = bundle / bundles.CACHE
    (cache / "archive-v0/abc/shared.py").chmod(0o666)  # others may write it: copied
    old = time.time() - 60  # older than the racy window: the node copy's stamp records them
    for name in files:
        os.utime(cache / name, (old, old))
    manifest = bundles.check(bundle, Project.read(world.project), FLAGS)
    seen = _inodes(monkeypatch, files)
    bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", manifest)
    assert seen[0]["archive-v0/abc/mine.py"] == os.stat(cache / "archive-v0/abc/mine.py").st_ino
    assert seen[0]["archive-v0/abc/shared.py"] != os.stat(cache / "archive-v0/abc/shared.py").st_ino
    (cache / "archive-v0/abc/mine.py").write_text("Z\n")  # an edit in place: its mtime moves
    with pytest.raises(NemoRLError, match="does not match its manifest"):
        bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", manifest)
    assert len(seen) == 1  # refused before uv installed anything


def test_a_name_swapped_between_the_look_and_the_link_is_copied_not_linked(world, tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    bundle = fake_bundle(world, tmp_path / "bundle")
    index = bundle / bundles.CACHE / "simple-v1" / "index"
    manifest = bundles.check(bundle, Project.read(world.project), FLAGS)
    planted = tmp_path / "planted"
    planted.write_bytes(index.read_bytes())  # the same bytes, but others may write them after the hash
    planted.chmod(0o666)
    real_link = os.link

    def swapped(source, target, **kwargs):  # the bundle's writer wins the race between the look and the link
        if str(source) == str(index):
            os.replace(planted, index)
        return real_link(source, target, **kwargs)

    monkeypatch.setattr(os, "link", swapped)
    seen = _inodes(monkeypatch, ["simple-v1/index"])
    bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", manifest)
    assert seen[0]["simple-v1/index"] != os.stat(index).st_ino


@pytest.mark.parametrize("linked", [True, False], ids=["linked", "copied"])
def test_each_bundle_file_is_read_once_and_the_copy_records_what_it_made(tmp_path, monkeypatch, linked):
    """One pass over the bytes: a copied file is hashed as it is read from the bundle and written, a linked one
    as it is read; nothing of the copy is read back. Each file's record is its size, hash and identity as made."""
    import hashlib

    source, target = tmp_path / "bundle", tmp_path / "copy"
    files = {"archive-v0/abc/big.so": os.urandom(8 << 20), "archive-v0/abc/a.py": b"X = 1\n", "simple-v1/i": b""}
    for name, data in files.items():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_bytes(data)
    target.mkdir()
    if not linked:
        monkeypatch.setattr(tree_copy, "linkable", lambda info, device: False)  # another owner's, or filesystem

    def read_so_far() -> int:  # every read(2) of this process, whichever way it was made
        io = Path("/proc/self/io").read_text()
        return int(io.split("rchar: ")[1].split()[0])

    before = read_so_far()
    copied = tree_copy.copy_cache(source, target, tmp_path)
    read = read_so_far() - before
    assert copied == {name: (len(data), hashlib.sha256(data).hexdigest(),
                             tree_copy.identity(os.lstat(target / name))) for name, data in files.items()}
    total = sum(map(len, files.values()))
    assert total <= read < 1.5 * total, (read, total)


def _old_bundle(world, tmp_path, files):
    bundle = fake_bundle(world, tmp_path / "bundle", files)
    old = time.time() - 60  # older than the racy window: the node copy's stamp records them
    for name in files:
        os.utime(bundle / bundles.CACHE / name, (old, old))
    return bundle, bundles.check(bundle, Project.read(world.project), FLAGS)


def test_an_edit_in_place_whose_mtime_is_put_back_is_refused_by_the_next_build(world, tmp_path, monkeypatch):
    """`cp -p` / `rsync -t --inplace` over a linked bundle file: same inode, size and mtime; its ctime moved."""
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    files = {"archive-v0/abc/m1.py": "print('ok 1')\n", "simple-v1/index": "i\n"}
    bundle, manifest = _old_bundle(world, tmp_path, files)
    seen = _inodes(monkeypatch, files)
    bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", manifest)
    edited = bundle / bundles.CACHE / "archive-v0/abc/m1.py"
    assert seen[0]["archive-v0/abc/m1.py"] == os.stat(edited).st_ino  # linked
    before = os.stat(edited)
    with open(edited, "r+") as fh:  # in place, the same size
        fh.write("print('EVIL')\n")
    os.utime(edited, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert tree_copy.identity(os.stat(edited))[:5] == tree_copy.identity(before)[:5]
    with pytest.raises(NemoRLError, match="does not match its manifest"):
        bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", manifest)
    assert len(seen) == 1  # refused before uv installed anything


def test_a_bundle_file_linked_outside_the_bundle_is_copied_and_an_edit_outside_is_never_installed(world, tmp_path,
                                                                                                  monkeypatch):
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    files = {"archive-v0/abc/lib.py": "X = 1\n", "simple-v1/index": "i\n"}
    bundle, _ = _old_bundle(world, tmp_path, files)
    shared = bundle / bundles.CACHE / "archive-v0/abc/lib.py"
    outside = tmp_path / "outside.py"
    os.link(shared, outside)
    manifest = bundles.check(bundle, Project.read(world.project), FLAGS)
    seen = _inodes(monkeypatch, files)
    bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", manifest)
    assert seen[0]["archive-v0/abc/lib.py"] != os.stat(shared).st_ino
    assert seen[0]["simple-v1/index"] == os.stat(bundle / bundles.CACHE / "simple-v1/index").st_ino  # one name: linked
    before = outside.stat()
    outside.write_text("X = 2\n")  # `cp -p` over the other name: same size, mtime put back
    os.utime(outside, ns=(before.st_atime_ns, before.st_mtime_ns))
    bundles.sync_from(bundle, Project.read(world.project), FLAGS, tmp_path / "env", manifest)
    assert len(seen) == 2 and seen[1]["archive-v0/abc/lib.py"] == seen[0]["archive-v0/abc/lib.py"]  # the kept copy
    copy = next((tmp_path / "venvs").glob(".bundle-copy-*"))
    assert (copy / bundles.CACHE / "archive-v0/abc/lib.py").read_text() == "X = 1\n"


def test_a_signal_ends_the_copy_of_a_large_file_within_it(tmp_path, monkeypatch):
    import signal
    import types

    from nemo_rl import interrupt
    from nemo_rl.errors import Interrupted

    source, target = tmp_path / "big.whl", tmp_path / "copy.whl"
    source.write_bytes(b"x" * 64)
    monkeypatch.setattr(tree_copy, "BLOCK", 4)
    reads: list[int] = []

    def readv(fd: int, buffers: list) -> int:  # a signal arrives while the first block is read
        reads.append(len(buffers[0]))
        interrupt.record(signal.SIGTERM)
        return os.readv(fd, buffers)

    monkeypatch.setattr(tree_copy, "os", types.SimpleNamespace(readv=readv, write=os.write))
    try:
        with open(source, "rb") as src, open(target, "wb") as out, pytest.raises(Interrupted):
            tree_copy._hash_and_write(src.fileno(), out.fileno())
    finally:
        interrupt.reset()
    assert len(reads) == 1 and target.stat().st_size < 64


def test_a_tree_linked_again_takes_the_source_s_links_and_clears_directories_that_refuse(tmp_path, monkeypatch):
    source, target = tmp_path / "copy", tmp_path / "work"
    (source / "d").mkdir(parents=True)
    (source / "d" / "f").write_text("x")
    (source / "d" / "l").symlink_to("f")
    (target / "d" / "old").mkdir(parents=True)
    (target / "d" / "old" / "y").write_text("")
    (target / "d" / "l").symlink_to("elsewhere")
    (target / "d" / "closed" / "z").mkdir(parents=True)
    real_unlink, real_open, refused = os.unlink, os.open, []

    def unlink(path, *args, **kwargs):  # a directory this user made read-only, as root never sees one
        if str(path).endswith("y") and "unlink" not in refused:
            refused.append("unlink")
            raise PermissionError(13, "Permission denied", str(path))
        return real_unlink(path, *args, **kwargs)

    def open_(path, *args, **kwargs):  # one made unreadable (`chmod 000`)
        if str(path).endswith("closed") and "open" not in refused:
            refused.append("open")
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink)
    monkeypatch.setattr(os, "open", open_)
    tree_copy.link_tree(source, target)
    assert sorted(refused) == ["open", "unlink"] and sorted(p.name for p in (target / "d").iterdir()) == ["f", "l"]
    assert os.readlink(target / "d" / "l") == "f"
    assert (target / "d" / "f").stat().st_ino == (source / "d" / "f").stat().st_ino
