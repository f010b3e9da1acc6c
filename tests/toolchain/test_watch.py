"""`nemo-rl toolchain watch`: the build's progress read from a build tree laid out as uv and torch's extension
build leave it (nemo_rl/toolchain/watch.py)."""

from __future__ import annotations

import fcntl
import os
import signal
import time
from pathlib import Path

import pytest

from nemo_rl import interrupt
from nemo_rl.cli import main
from nemo_rl.toolchain import watch

NOW = 1_800_000_000.0
SOURCES = ("common.cpp", "extensions/gemm.cu", "extensions/attention.cu", "extensions/softmax.cu")


def build_tree(cache: Path, compiled: int, started: float, revision: str = "REVISION") -> Path:
    """uv's cache holding a transformer-engine-torch build `compiled` objects in, begun `started` seconds ago."""
    temp = cache / f"sdists-v11/pypi/transformer-engine-torch/2.3.0/{revision}/src/build/temp.linux-x86_64-cpython-312"
    temp.mkdir(parents=True)
    objects = [temp / (name.rsplit(".", 1)[0] + ".o") for name in SOURCES]
    rules = [f"build {_escaped(obj)}: {'cuda_compile' if obj.name != 'common.o' else 'compile'} /src/{name}"
             for obj, name in zip(objects, SOURCES, strict=True)]
    (temp / "build.ninja").write_text("ninja_required_version = 1.3\ncxx = c++\n\n" + "\n".join(rules) + "\n")
    when = NOW - started
    for obj in objects[:compiled]:
        obj.parent.mkdir(parents=True, exist_ok=True)
        obj.write_bytes(b"\x7fELF")
        os.utime(obj, (when, when))
    os.utime(temp / "build.ninja", (when, when))
    return temp


def _escaped(path: Path) -> str:
    """A path as torch writes it into build.ninja."""
    return str(path).replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


@pytest.fixture(autouse=True)
def clock(monkeypatch):
    monkeypatch.setattr(watch.time, "time", lambda: NOW)


def test_watch_counts_the_objects_compiled_and_estimates_the_rest(tmp_path, capsys):
    temp = build_tree(tmp_path, compiled=1, started=125)
    assert main(["toolchain", "watch", "--dir", str(tmp_path), "--once"]) == 1  # not done yet
    line = capsys.readouterr().out
    assert line.startswith("transformer-engine-torch: 1/4 objects compiled, 2 min 05 s elapsed, about 6 min 15 s left")
    assert line.rstrip().endswith(f"({temp})")


def test_watch_exits_0_when_every_object_is_compiled(tmp_path, capsys):
    build_tree(tmp_path, compiled=4, started=60)
    assert main(["toolchain", "watch", "--dir", str(tmp_path), "--once"]) == 0
    assert "4/4 objects compiled, 1 min 00 s elapsed, about 0 min 00 s left" in capsys.readouterr().out


def test_no_estimate_before_the_first_object(tmp_path):
    temp = build_tree(tmp_path, compiled=0, started=30)
    state = watch.progress(temp / "build.ninja")
    assert (state.done, state.total, state.remaining) == (0, 4, None)
    assert "estimate after the first object" in state.line()


def test_watch_without_a_build_says_how_to_start_one_and_the_fix_works(tmp_path, capsys, monkeypatch):
    def waited(seconds):
        raise AssertionError("--once waited for a build")

    monkeypatch.setattr(watch.time, "sleep", waited)
    assert main(["toolchain", "watch", "--dir", str(tmp_path), "--once"]) == 1
    err = capsys.readouterr().err
    assert f"error: no running transformer-engine-torch build in {tmp_path}" in err and "--dir" in err
    temp = build_tree(tmp_path / "elsewhere", compiled=2, started=10)
    assert main(["toolchain", "watch", "--dir", str(temp.parent.parent), "--once"]) == 1  # the source directory
    assert "2/4 objects compiled" in capsys.readouterr().out


@pytest.mark.parametrize("where", ["build tree", "source directory", "cache"])
def test_the_build_is_found_from_its_tree_its_source_or_the_cache(tmp_path, where):
    temp = build_tree(tmp_path, compiled=0, started=0)
    root = {"build tree": temp, "source directory": temp.parent.parent, "cache": tmp_path}[where]
    assert watch.find_build(root) == temp / "build.ninja"


def test_watch_waits_for_the_build_then_follows_it_to_the_end(tmp_path, capsys, monkeypatch):
    steps = iter([lambda: build_tree(tmp_path, compiled=3, started=30),
                  lambda: (next(tmp_path.rglob("build.ninja")).parent / "extensions/softmax.o").write_bytes(b"")])
    monkeypatch.setattr(watch, "_sleep", lambda seconds: next(steps)())
    assert main(["toolchain", "watch", "--dir", str(tmp_path), "--every", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(",")[0] for line in lines] == ["transformer-engine-torch: 3/4 objects compiled",
                                                      "transformer-engine-torch: 4/4 objects compiled"]


@pytest.mark.parametrize("every", ["0", "-5", "nan", "soon"])
def test_every_must_be_a_positive_number_of_seconds(every, tmp_path, capsys, monkeypatch):
    def waited(seconds):
        raise AssertionError(f"the watcher ran with --every {every}")

    monkeypatch.setattr(watch, "_sleep", waited)
    with pytest.raises(SystemExit) as exited:
        main(["toolchain", "watch", "--dir", str(tmp_path), "--every", every])
    assert exited.value.code == 2
    assert f"argument --every: {every!r} is not a positive number of seconds" in capsys.readouterr().err


@pytest.mark.parametrize("folder", ["plain", "with space", "with:colon", "with$dollar"])
def test_objects_are_counted_in_a_path_ninja_escapes(tmp_path, capsys, folder):
    build_tree(tmp_path / folder, compiled=2, started=60)
    assert main(["toolchain", "watch", "--dir", str(tmp_path / folder), "--once"]) == 1
    assert "2/4 objects compiled" in capsys.readouterr().out


def test_a_build_ninja_listing_no_object_is_an_error_not_done(tmp_path, capsys):
    temp = build_tree(tmp_path, compiled=0, started=60)
    (temp / "build.ninja").write_text("ninja_required_version = 1.3\nrule compile\n  command = c++ $in\n")
    assert main(["toolchain", "watch", "--dir", str(tmp_path), "--once"]) == 1
    assert f"error: {temp / 'build.ninja'} lists no object to compile" in capsys.readouterr().err


def held_env(tmp_path: Path):
    """An environment whose uv lock this process holds, as a running `uv sync` does."""
    env = tmp_path / "venv"
    env.mkdir()
    fd = os.open(env / ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return env, fd


@pytest.mark.parametrize("uv_holds_the_lock", [False, True])
def test_a_build_that_stopped_is_reported_not_running(tmp_path, capsys, uv_holds_the_lock):
    build_tree(tmp_path / "cache", compiled=1, started=3 * 3600)
    env, fd = held_env(tmp_path) if uv_holds_the_lock else (tmp_path / "venv", None)
    try:
        code = main(["toolchain", "watch", "--dir", str(tmp_path / "cache"), "--env", str(env), "--once"])
    finally:
        if fd is not None:
            os.close(fd)
    out, err = capsys.readouterr()
    assert code == 1
    if uv_holds_the_lock:  # a compile that long is slow, not dead
        assert "1/4 objects compiled" in out and err == ""
    else:
        assert "is not running: 1/4 objects, nothing written for 180 min 00 s and no uv holds" in err


def test_a_build_that_starts_later_replaces_a_finished_one(tmp_path, capsys, monkeypatch):
    build_tree(tmp_path, compiled=4, started=24 * 3600, revision="yesterday")
    env, fd = held_env(tmp_path)
    new = iter([lambda: build_tree(tmp_path, compiled=3, started=30, revision="today"),
                lambda: (next(tmp_path.rglob("today/**/build.ninja")).parent / "extensions/softmax.o").touch()])
    monkeypatch.setattr(watch, "_sleep", lambda seconds: next(new)())
    try:
        assert main(["toolchain", "watch", "--dir", str(tmp_path), "--env", str(env), "--every", "1"]) == 0
    finally:
        os.close(fd)
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(",")[0] for line in lines] == ["transformer-engine-torch: 3/4 objects compiled",
                                                      "transformer-engine-torch: 4/4 objects compiled"]
    assert all("/today/" in line for line in lines)


def test_the_build_is_found_in_the_cache_the_users_uv_config_names(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(watch.time, "time", time.time)  # a real uv reads the real clock's files
    cache = tmp_path / "my cache"
    (tmp_path / "config/uv").mkdir(parents=True)
    (tmp_path / "config/uv/uv.toml").write_text(f"cache-dir = {str(cache)!r}\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("UV_CACHE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    build_tree(cache, compiled=1, started=-(time.time() - NOW) + 60)
    assert main(["toolchain", "watch", "--once"]) == 1
    assert "1/4 objects compiled" in capsys.readouterr().out


def test_a_signal_ends_the_watch_without_pointing_at_a_repair(tmp_path, capsys, monkeypatch):
    build_tree(tmp_path, compiled=1, started=60)
    monkeypatch.setattr(watch.time, "sleep", lambda seconds: interrupt.record(signal.SIGTERM))
    try:
        assert main(["toolchain", "watch", "--dir", str(tmp_path)]) == 128 + signal.SIGTERM
    finally:
        interrupt.reset()
    err = capsys.readouterr().err
    assert "interrupted" in err and "deps status" not in err
