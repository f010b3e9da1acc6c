"""Where nemo-rl keeps state (settings): the defaults, and a setting that cannot be used is the user's to fix."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from fakes import FLAGS, run_cli

from nemo_rl import settings
from nemo_rl.cli import main
from nemo_rl.errors import NemoRLError
from nemo_rl.project.model import Project
from nemo_rl.workers import bundles, housekeeping


def test_the_cache_follows_its_setting_then_xdg_then_home(tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_RL_CACHE_DIR", str(tmp_path / "set"))
    assert settings.cache_dir() == tmp_path / "set" and (tmp_path / "set").is_dir()
    monkeypatch.delenv("NEMO_RL_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert settings.cache_dir() == tmp_path / "xdg" / "nemo-rl"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert settings.cache_dir() == tmp_path / "home" / ".cache" / "nemo-rl"  # conftest's $HOME


@pytest.mark.parametrize("make, message", [
    (lambda tmp: "relative/cache", "is not an absolute path"),
    (lambda tmp: (tmp / "file").write_text("x") and str(tmp / "file"), "is not a directory"),
])
def test_an_unusable_cache_setting_is_an_error(tmp_path, monkeypatch, make, message):
    monkeypatch.setenv("NEMO_RL_CACHE_DIR", make(tmp_path))
    with pytest.raises(NemoRLError, match=message):
        settings.cache_dir()


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write a read-only directory")
def test_a_read_only_cache_is_an_error(tmp_path, monkeypatch):
    tmp_path.joinpath("ro").mkdir(mode=0o500)
    monkeypatch.setenv("NEMO_RL_CACHE_DIR", str(tmp_path / "ro"))
    with pytest.raises(NemoRLError, match="is not writable"):
        settings.cache_dir()


def test_worker_environments_follow_their_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    assert settings.venv_dir(create=False) == tmp_path / "venvs" and not (tmp_path / "venvs").exists()
    assert settings.venv_dir() == tmp_path / "venvs" and (tmp_path / "venvs").is_dir()
    monkeypatch.delenv("NEMO_RL_VENV_DIR")
    assert settings.venv_dir(create=False) == settings.CHECKOUT_DIR / "venvs"


def test_an_unusable_venv_setting_names_it(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "file"))
    with pytest.raises(NemoRLError, match=r"NEMO_RL_VENV_DIR .*file cannot be used") as caught:
        settings.venv_dir()
    assert "point NEMO_RL_VENV_DIR at a directory you may write" in caught.value.remedy


@pytest.mark.parametrize("name, read", [("NEMO_RL_VENV_DIR", lambda: settings.venv_dir()),
                                        ("NEMO_RL_VENV_DIR", lambda: settings.venv_dir(create=False)),
                                        ("NEMO_RL_CACHE_DIR", settings.cache_dir)])
@pytest.mark.parametrize("setting", ["rel", "./venvs", "../shared/venvs"])
def test_a_relative_path_setting_is_refused_naming_the_path_it_means(tmp_path, monkeypatch, name, read, setting):
    """Like NEMO_RL_BUNDLE_DIR: a relative path names another directory from every working directory (each Ray
    worker resolves it against its own), so it is refused, with the absolute path it names from here, and
    nothing is made."""
    here = tmp_path / "work" / "here"
    here.mkdir(parents=True)
    monkeypatch.chdir(here)
    monkeypatch.setenv(name, setting)
    with pytest.raises(NemoRLError, match=f"{name} '{re.escape(setting)}' is not an absolute path") as refused:
        read()
    assert f"{name}={os.path.normpath(here / setting)!r}" in refused.value.remedy
    assert list((tmp_path / "work").rglob("*")) == [here]


def test_a_relative_venv_setting_is_an_error_from_the_cli(tmp_path, monkeypatch, capsys):
    from nemo_rl.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", "rel")
    assert main(["envs", "list", "--project", str(settings.CHECKOUT_DIR)]) == 1
    err = capsys.readouterr().err
    assert "NEMO_RL_VENV_DIR 'rel' is not an absolute path" in err, err
    assert f"NEMO_RL_VENV_DIR={str(tmp_path / 'rel')!r}" in err, err
    monkeypatch.setenv("NEMO_RL_VENV_DIR", "~/venvs")  # ~ is the home directory wherever the command runs
    assert settings.venv_dir(create=False) == Path.home() / "venvs"


@pytest.mark.parametrize("setting", ["", "  "])
def test_an_empty_bundle_dir_is_refused_everywhere_it_is_read(world, tmp_path, monkeypatch, capsys, setting):
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", setting)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    for read in (lambda: bundles.find(Project.read(world.project), FLAGS), bundles.configured,
                 housekeeping._prune_packs,
                 lambda: housekeeping.bundle_rows(Project.read(world.project))):
        with pytest.raises(NemoRLError, match="NEMO_RL_BUNDLE_DIR is set but empty") as refused:
            read()
        assert "unset NEMO_RL_BUNDLE_DIR" in refused.value.remedy
    for verb in ("list", "prune"):
        capsys.readouterr()
        assert main(["envs", verb, "--project", str(world.project)]) == 1
        assert "set but empty" in capsys.readouterr().err


@pytest.mark.parametrize("end, named", [(" ", "a space"), ("\r", "a carriage return"), ("\t", "a tab")])
def test_a_bundle_dir_with_whitespace_is_named(world, tmp_path, monkeypatch, capsys, end, named):
    from nemo_rl.cli import main

    (tmp_path / "bundles").mkdir()
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", str(tmp_path / "bundles") + end)
    capsys.readouterr()
    assert main(["envs", "list", "--project", str(world.project)]) == 1
    err = capsys.readouterr().err
    assert f"ends with {named}" in err and repr(str(tmp_path / "bundles") + end) in err, err
@pytest.mark.parametrize("setting", ["bundles", "./bundles", "../shared/bundles"])
def test_a_relative_bundle_dir_is_refused_everywhere_it_is_read(world, tmp_path, monkeypatch, capsys, setting):
    """Like NEMO_RL_CACHE_DIR: a relative NEMO_RL_BUNDLE_DIR names another directory from each working directory
    (a worker's is not the driver's), so it is refused with the absolute path it names from here."""
    from nemo_rl.cli import main
    from nemo_rl.errors import NemoRLError
    from nemo_rl.workers import bundles, housekeeping

    (tmp_path / "bundles").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", setting)
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(tmp_path / "venvs"))
    for read in (lambda: bundles.find(Project.read(world.project), ["--locked"]), bundles.configured,
                 housekeeping._prune_packs,
                 lambda: housekeeping.bundle_rows(Project.read(world.project))):
        with pytest.raises(NemoRLError, match="is not an absolute path") as refused:
            read()
        assert f"NEMO_RL_BUNDLE_DIR={os.path.normpath(tmp_path / setting)!r}" in refused.value.remedy
    for verb in ("list", "prune"):
        capsys.readouterr()
        assert main(["envs", verb, "--project", str(world.project)]) == 1
        assert "not an absolute path" in capsys.readouterr().err
    monkeypatch.setenv("NEMO_RL_BUNDLE_DIR", str(tmp_path / "bundles"))  # the fix it gives works
    assert main(["envs", "list", "--project", str(world.project)]) == 0


@pytest.mark.parametrize("setting", ["file", "read-only"])
def test_cache_dir_setting_mistakes_exit_1(world, capsys, monkeypatch, tmp_path, setting):
    target = tmp_path / "cache"
    if setting == "file":
        target.write_text("not a directory")
    monkeypatch.setenv("NEMO_RL_CACHE_DIR", str(target / "sub") if setting == "read-only" else str(target))
    if setting == "read-only":
        target.mkdir()
        monkeypatch.setattr(os, "access", lambda path, mode: False)  # root may write anywhere; the user may not
    code, out = run_cli(capsys, "deps", "patches", "--project", str(world.project))
    assert code == 1 and "NEMO_RL_CACHE_DIR" in out and "bug in nemo-rl" not in out
