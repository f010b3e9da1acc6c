"""A pack's fresh cache is seeded with the wheels the builder's uv cache built from the lock's sdists (no second
transformer-engine compile): the built wheel and the unpacked copy it links to, from the revision the lock's
sdist hash names, never the build's sources, never a link other than uv's own, never a file this user does not
own or others may write, never a wheel lacking a declared arch, and nothing for a package the lock takes as a
wheel. The cache is the one $UV_CACHE_DIR or uv's defaults name, never a checkout's."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from fakes import elf_with, fatbin, revision_http

from nemo_rl import uv
from nemo_rl.project.model import Project
from nemo_rl.toolchain import archs
from nemo_rl.workers import pack_seed

SHA = "2b0adb75d7a5bf590cc5452276db6badb0963de99e6c50c7fde6a3a8a7c504e9"
LOCK = {"package": [
    {"name": "transformer-engine-torch", "version": "2.3.0", "source": {"registry": "https://pypi.org/simple"},
     "sdist": {"url": "u", "hash": f"sha256:{SHA}"}},
    {"name": "torch", "version": "2.7.0", "source": {"registry": "https://pypi.org/simple"},
     "sdist": {"url": "t", "hash": f"sha256:{SHA}"}, "wheels": [{"url": "w"}]},
    {"name": "megatron-core", "version": "0.13.0", "source": {"git": "https://example.invalid/m.git"}},
    {"name": "../evil", "version": "1", "source": {"registry": "r"}, "sdist": {"url": "e", "hash": f"sha256:{SHA}"}},
    {"name": "up", "version": "..", "source": {"registry": "r"}, "sdist": {"url": "e", "hash": f"sha256:{SHA}"}}]}
VERSION = "sdists-v11/pypi/transformer-engine-torch/2.3.0"
REVISION = f"{VERSION}/REV"
WHEEL = "transformer_engine_torch-2.3.0-cp312-cp312-linux_x86_64"
SO = "transformer_engine_torch.cpython-312-x86_64-linux-gnu.so"


def user_cache(root: Path, sm: tuple[int, ...] = (90,)) -> Path:
    cache = root / "user-cache"
    built = cache / REVISION / "SETTINGS"
    built.mkdir(parents=True)
    (cache / VERSION / "revision.http").write_bytes(revision_http("REV", SHA))
    (built / f"{WHEEL}.whl").write_bytes(b"wheel")
    (built / "metadata.msgpack").write_bytes(b"m")
    (built / "2.3.0-cp312-cp312-linux_x86_64.lock").write_bytes(b"")
    unpacked = cache / "archive-v0" / "ID"
    (unpacked / "transformer_engine").mkdir(parents=True)
    (unpacked / "transformer_engine" / SO).write_bytes(elf_with(fatbin([(archs.CUBIN, a) for a in sm])))
    (cache / "archive-v0" / "OTHER").mkdir()  # another wheel's: never copied for this one
    os.symlink("../../../../../../archive-v0/ID", built / WHEEL)
    (root / "outside").mkdir()
    (root / "outside" / "secret").write_text("not the cache's\n")
    os.symlink(root / "outside", built / "outside")  # not uv's: never followed
    (cache / REVISION / "src").mkdir()
    (cache / REVISION / "src" / "setup.py").write_text("build scratch\n")
    (cache / VERSION.replace("2.3.0", "2.2.0") / "R").mkdir(parents=True)  # another version: not the lock's
    (cache / "sdists-v11/pypi/torch/2.7.0").mkdir(parents=True)
    (cache / "sdists-v11/pypi/torch/2.7.0/built.whl").write_bytes(b"t")
    for dirpath, dirnames, filenames in os.walk(cache):  # as uv leaves it under umask 022, whatever this one is
        for name in [*dirnames, *filenames]:
            if not os.path.islink(os.path.join(dirpath, name)):
                os.chmod(os.path.join(dirpath, name), 0o755 if name in dirnames else 0o644)
    return cache


def seed(cache: Path, fresh: Path, sm: tuple[int, ...] = (90,)) -> list[str]:
    return [s.name for s in pack_seed.seed(cache, fresh, LOCK, lambda: sm)]


def test_the_built_wheel_and_its_unpacked_copy_are_seeded(tmp_path):
    fresh = tmp_path / "fresh"
    seeded = pack_seed.seed(user_cache(tmp_path), fresh, LOCK, lambda: (90,))
    assert [(s.name, s.entry, s.sm) for s in seeded] == [("transformer-engine-torch", f"{REVISION}/SETTINGS", (90,))]
    built = fresh / REVISION / "SETTINGS"
    assert (built / f"{WHEEL}.whl").read_bytes() == b"wheel"
    assert (fresh / VERSION / "revision.http").is_file()
    unpacked = built / WHEEL
    assert unpacked.is_symlink() and (unpacked / "transformer_engine" / SO).is_file()
    assert os.path.realpath(unpacked).startswith(os.path.realpath(fresh) + os.sep)  # the fresh cache's own copy
    assert not (fresh / "archive-v0" / "OTHER").exists()
    assert not (fresh / REVISION / "src").exists()  # build scratch stays behind
    assert not (built / "outside").is_symlink() and not (built / "2.3.0-cp312-cp312-linux_x86_64.lock").exists()
    assert not (fresh / VERSION.replace("2.3.0", "2.2.0")).exists()
    assert not (fresh / "sdists-v11/pypi/torch").exists()  # the lock takes torch as a wheel


def test_a_wheel_built_with_default_settings_is_seeded_from_the_revision_itself(tmp_path):
    """uv keeps such a wheel (jieba's, wget's) in the revision directory, beside the sources, not in SETTINGS/."""
    cache = user_cache(tmp_path)
    built = cache / REVISION / "SETTINGS"
    for name in (f"{WHEEL}.whl", "metadata.msgpack"):
        (built / name).rename(cache / REVISION / name)
    os.symlink("../../../../../archive-v0/ID", cache / REVISION / WHEEL)
    shutil.rmtree(built)
    fresh = tmp_path / "fresh"
    assert [s.entry for s in pack_seed.seed(cache, fresh, LOCK, lambda: (90,))] == [REVISION]
    assert (fresh / REVISION / f"{WHEEL}.whl").read_bytes() == b"wheel"
    assert (fresh / REVISION / WHEEL / "transformer_engine" / SO).is_file()
    assert not (fresh / REVISION / "src").exists()


def test_no_user_cache_seeds_nothing(tmp_path):
    assert pack_seed.seed(None, tmp_path / "fresh", LOCK) == []
    assert pack_seed.seed(tmp_path / "absent", tmp_path / "fresh", LOCK) == []
    assert not (tmp_path / "fresh").exists()
    assert pack_seed.sdist_builds(LOCK) == {"transformer-engine-torch": ("2.3.0", SHA)}


def test_the_cache_is_never_the_one_a_checkout_names(tmp_path, monkeypatch):
    """A pull request's `[tool.uv] cache-dir` or uv.toml must not choose what the bundle is seeded from."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "0"\n[tool.uv]\ncache-dir = "planted"\n')
    (checkout / "uv.toml").write_text('cache-dir = "planted-too"\n')
    monkeypatch.chdir(checkout)
    monkeypatch.delenv("UV_CACHE_DIR")
    named = uv.cache_dir()
    assert named == tmp_path / "home" / ".cache" / "uv"  # conftest's XDG_CACHE_HOME: the user's default
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "mine"))
    assert uv.cache_dir() == tmp_path / "mine"
    (checkout / "relative").mkdir()
    monkeypatch.setenv("UV_CACHE_DIR", "relative")
    found, why = pack_seed.user_cache()
    assert found is None and "not an absolute path" in why


def test_a_file_others_may_write_is_never_seeded(tmp_path):
    cache = user_cache(tmp_path)
    wheel = cache / REVISION / "SETTINGS" / f"{WHEEL}.whl"
    wheel.chmod(0o664)  # a planted wheel, or one others could have replaced
    assert seed(cache, tmp_path / "fresh") == []
    assert not (tmp_path / "fresh" / REVISION).exists()
    wheel.chmod(0o644)
    (cache / "archive-v0" / "ID" / "transformer_engine").chmod(0o777)  # the unpacked copy uv installs from
    assert seed(cache, tmp_path / "fresh2") == []
    if os.geteuid() != 0:
        return  # another owner needs chown
    (cache / "archive-v0" / "ID" / "transformer_engine").chmod(0o755)
    os.chown(wheel, 4242, 4242)
    assert seed(cache, tmp_path / "fresh3") == []


def test_linked_buckets_and_indexes_are_not_followed(tmp_path):
    cache = user_cache(tmp_path)
    planted = tmp_path / "planted"
    shutil.move(cache / "sdists-v11", planted)
    os.symlink(planted, cache / "sdists-v11")
    assert seed(cache, tmp_path / "fresh") == []
    os.unlink(cache / "sdists-v11")
    (cache / "sdists-v11" / "index").mkdir(parents=True)
    os.symlink(planted / "pypi", cache / "sdists-v11" / "index" / "abc")  # a named index's directory, linked
    assert seed(cache, tmp_path / "fresh2") == []


@pytest.mark.parametrize("target", ["../../../../../..", "../../../../../../archive-v0"])
def test_a_link_to_the_cache_or_the_whole_archive_is_dropped(tmp_path, target):
    cache = user_cache(tmp_path)
    os.symlink(target, cache / REVISION / "SETTINGS" / "crafted")
    assert seed(cache, tmp_path / "fresh") == ["transformer-engine-torch"]  # no IndexError, no exit 3
    assert not (tmp_path / "fresh" / REVISION / "SETTINGS" / "crafted").is_symlink()
    assert not (tmp_path / "fresh" / "archive-v0" / "OTHER").exists()  # the archive is not copied whole


def test_a_wheel_without_a_declared_arch_is_built_again(tmp_path):
    """NVTE_CUDA_ARCHS is not in uv's cache key: a wheel built for 90, packed for 80;90, is left unseeded (the
    pack builds it for both), and the user's cache keeps it."""
    cache = user_cache(tmp_path, sm=(90,))
    assert seed(cache, tmp_path / "fresh", sm=(80, 90)) == []
    assert not (tmp_path / "fresh" / "archive-v0").exists() and not (tmp_path / "fresh" / REVISION).exists()
    assert (cache / REVISION / "SETTINGS" / f"{WHEEL}.whl").exists()
    assert seed(cache, tmp_path / "fresh2", sm=(90,)) == ["transformer-engine-torch"]


def test_only_the_revision_of_the_locks_sdist_is_seeded(tmp_path):
    cache = user_cache(tmp_path)
    (cache / VERSION / "revision.http").write_bytes(revision_http("REV", "0" * 64))  # another sdist's build
    assert seed(cache, tmp_path / "fresh") == []
    (cache / VERSION / "revision.http").write_bytes(revision_http("REV", SHA))
    shutil.copytree(cache / REVISION, cache / f"{VERSION}/OLD", symlinks=True)  # a revision the lock does not name
    assert seed(cache, tmp_path / "fresh2") == ["transformer-engine-torch"]
    assert not (tmp_path / "fresh2" / VERSION / "OLD").exists()


def test_a_revision_file_over_its_cap_is_named_never_cut(tmp_path, capsys):
    cache = user_cache(tmp_path)
    (cache / VERSION / "revision.http").write_bytes(revision_http("REV", SHA) + bytes(1 << 20))
    assert seed(cache, tmp_path / "fresh") == []
    assert "revision.http is larger than 1048576 bytes" in capsys.readouterr().err


def test_a_file_vanishing_or_a_fifo_leaves_that_wheel_unseeded(tmp_path, monkeypatch):
    """`uv cache clean` in another terminal while a pack seeds: seeding is an optimisation, the pack goes on."""
    cache = user_cache(tmp_path)
    os.mkfifo(cache / REVISION / "SETTINGS" / "pipe", 0o644)
    assert seed(cache, tmp_path / "fresh") == ["transformer-engine-torch"]  # never opened, never copied
    assert not os.path.lexists(tmp_path / "fresh" / REVISION / "SETTINGS" / "pipe")
    checked = pack_seed._check_archs

    def cleaned_meanwhile(plans, declared):
        sm = checked(plans, declared)
        (cache / REVISION / "SETTINGS" / "metadata.msgpack").unlink()
        return sm

    monkeypatch.setattr(pack_seed, "_check_archs", cleaned_meanwhile)
    assert seed(cache, tmp_path / "fresh2") == []
    assert not (tmp_path / "fresh2" / REVISION / "SETTINGS").exists()  # what was copied of it is removed


def test_no_seed_never_reads_the_users_cache(tmp_path, monkeypatch, capsys):
    cache = user_cache(tmp_path)
    monkeypatch.setattr(pack_seed, "user_cache", lambda: (cache, f"the uv cache {cache}"))
    monkeypatch.setenv("NVTE_CUDA_ARCHS", "90")
    assert pack_seed.from_user_cache(tmp_path / "fresh", LOCK, False) == []
    assert not (tmp_path / "fresh").exists() and "--no-seed" in capsys.readouterr().err
    assert [s.name for s in pack_seed.from_user_cache(tmp_path / "fresh", LOCK, True)] == ["transformer-engine-torch"]
    assert f"as built in {cache}/{REVISION}/SETTINGS" in capsys.readouterr().err  # says what, from where
    from nemo_rl.cli import main

    with pytest.raises(SystemExit):
        main(["envs", "pack", "--help"])
    assert "--no-seed" in capsys.readouterr().out


def test_a_fork_left_out_by_the_flags_is_not_expected():
    """`--no-install-package nemo-toolkit` (the mcore extra without NeMo): a node's verification must not ask
    for the fork the flags leave out on purpose, and still asks for the others."""

    root = Path(__file__).resolve().parents[2]
    flags = ["--locked", "--extra", "mcore", "--no-install-package", "nemo-toolkit"]
    assert not Project.read(root).extras_require(flags, "nemo-toolkit")
    assert Project.read(root).extras_require(flags, "megatron-core")
    assert Project.read(root).extras_require(flags[:3], "nemo-toolkit")
