"""The hostile review of issue 24's third round, finding by finding: a uv pointer matched by the file it records
(finding 8), interruption after the work is done (2), a failed write to stdout (3), a full disk while staging
(9), a develop checkout git cannot read (4, 5), advice that works when followed (6, 7), a path refused before
anything is written (10), an environment no checkout claims (1)."""

from __future__ import annotations

import errno
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fakes import deps, env_row, fake_env, planted_env, uv_pointer

from nemo_rl import interrupt
from nemo_rl.errors import NemoRLError
from nemo_rl.project import develop_state, identity, landing, state_dir
from nemo_rl.workers import archive_hashes, housekeeping

MANY_TAGS = "cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.manylinux_2_28_x86_64"
LOCK = """\
version = 1
requires-python = ">=3.12"

[[package]]
name = "Tiny_Pkg"
version = "1.0"
source = {{ registry = "https://pypi.org/simple" }}
wheels = [
    {{ url = "https://files.example/tiny_pkg-1.0-MANY_TAGS.whl", hash = "sha256:{wheel}" }},
]
""".replace("MANY_TAGS", MANY_TAGS)


def test_a_pointer_uv_names_by_a_hash_of_its_tags_is_checked(tmp_path):
    """uv keeps a wheel with many tags at `<version>-<16 hex>.http`: matched by the file name inside it."""
    project, cache = tmp_path / "project", tmp_path / "cache"
    project.mkdir()
    wheel = "1" * 64
    (project / "uv.lock").write_text(LOCK.format(wheel=wheel))
    pointer = cache / "wheels-v8/pypi/tiny-pkg/1.0-00b06ae7f1096870.http"
    pointer.parent.mkdir(parents=True)
    uv_order = "cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64"  # uv sorts the tags
    pointer.write_bytes(uv_pointer("A1", wheel, f"tiny_pkg-1.0-{uv_order}.whl"))
    build = cache / "wheels-v8/pypi/setuptools/80.0-py3-none-any.http"  # a build requirement uv.lock does not name
    build.parent.mkdir(parents=True)
    build.write_bytes(uv_pointer("A2", "3" * 64, "setuptools-80.0-py3-none-any.whl"))
    assert archive_hashes.check(cache, project, "bundle b") == (1, ["setuptools-80.0-py3-none-any.whl"])
    pointer.write_bytes(uv_pointer("A1", "0" * 64, f"tiny_pkg-1.0-{uv_order}.whl"))
    with pytest.raises(NemoRLError, match=f"archive of Tiny_Pkg .* records sha256 {'0' * 64}, but uv.lock pins"):
        archive_hashes.check(cache, project, "bundle b")
    # where uv looks up the locked wheel, another wheel of that version: uv.lock names no such file
    pointer.write_bytes(uv_pointer("A1", "0" * 64, "tiny_pkg-1.0-py3-none-any.whl"))
    with pytest.raises(NemoRLError, match="records 'tiny_pkg-1.0-py3-none-any.whl', a wheel uv.lock does not name"):
        archive_hashes.check(cache, project, "bundle b")
    # a wheel's pointer that records no file name: nothing says which wheel it is
    pointer.write_bytes(uv_pointer("A1", wheel, " "))
    with pytest.raises(NemoRLError, match="1.0-00b06ae7f1096870.http is not one uv writes"):
        archive_hashes.check(cache, project, "bundle b")
    # nothing says which archive it stands for: refused by name, never skipped
    pointer.write_bytes(b"\x00not a pointer")
    with pytest.raises(NemoRLError, match="1.0-00b06ae7f1096870.http is not one uv writes"):
        archive_hashes.check(cache, project, "bundle b")


def test_an_overlay_this_checkout_no_longer_records_is_kept_with_its_rm(world, tmp_path, monkeypatch):
    """`rm .nemo-rl/develop.json` (or an edited token) while a worker environment carries the overlay looks, from
    here, exactly like a copy of this checkout (an image: one id in every container) developing in another
    container: the environment is kept, whatever id it records, and its row gives the rm -rf for the user who
    knows. An environment of another id without an overlay names that id and its rm -rf too."""
    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    ours = identity.ensure_checkout_id(world.project)
    for key, checkout in (("0" * 24, ours), ("1" * 24, "c" * 32)):  # this id; another (before `git clean -fdx`)
        env = planted_env(venvs, key, world.project, checkout)
        develop_state.install_overlay(env, "megatron-core", tmp_path / "co", tmp_path / "shadow", "ab" * 16)
        row = env_row(world.project, env)
        assert row.state == "other checkout" and f"rm -rf {shlex.quote(str(env))}" in (row.detail or ""), row
        assert "does not record" in (row.detail or "")
        assert env not in housekeeping.prune(world.project) and env.exists()
    plain = planted_env(venvs, "2" * 24, world.project, "c" * 32)
    row = env_row(world.project, plain)
    assert row.state == "other checkout" and "checkout id cccccccc" in (row.detail or "")
    assert f"rm -rf {shlex.quote(str(plain))}" in (row.detail or ""), row
    assert plain not in housekeeping.prune(world.project) and plain.exists()


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_output_that_cannot_be_written_is_a_failed_command(world, json_flag):
    """A full disk under stdout: the result is lost, so the exit is not 0, and stderr says so in one line."""
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "nemo_rl", "deps", "status", "--project", str(world.project),
                                 *json_flag], stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot write the command's output (stdout): No space left on device" in lines[0]


def test_a_full_disk_while_staging_leaves_no_staging_copy(world, monkeypatch):
    """The copy fails inside `with Staging(...)`'s __enter__, so __exit__ never runs: __enter__ cleans up itself,
    and the message says what to free, not to check the source's path."""
    real = shutil.copy2

    def full(source, target, **kwargs):
        if Path(source).name == "uv.lock":
            raise OSError(errno.ENOSPC, "No space left on device", str(source))
        return real(source, target, **kwargs)

    monkeypatch.setattr(shutil, "copy2", full)
    staging = landing.Staging(world.project, ["pyproject.toml", "uv.lock"], ["patches"])
    with pytest.raises(NemoRLError, match="No space left on device") as refused:
        with staging:
            pytest.fail("staged on a full disk")
    assert "free space on the filesystem of" in refused.value.remedy and "nothing was changed" in refused.value.remedy
    assert not staging.path.exists() and not (world.project / state_dir.STAGING_ROOT / staging.path.name).exists()


def _clone(world, where: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(world.forks["megatron-core"].fork), str(where)], check=True)
    return where


def test_develop_before_uv_sync_gives_advice_that_works(world, tmp_path, monkeypatch, capsys):
    """No environment yet: develop records the checkout and says to run develop again after `uv sync`; doing so
    puts that checkout in front (it used to answer "already developed")."""
    env = tmp_path / "env"
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    mine = _clone(world, tmp_path / "my megatron")
    assert deps(world, "develop", "megatron-core", str(mine)) == 0
    assert f"run `nemo-rl deps develop megatron-core` again to put {mine} in front" in capsys.readouterr().out
    fake_env(env)  # what `uv sync` makes
    assert deps(world, "develop", "megatron-core") == 0, capsys.readouterr().err
    assert develop_state.active_checkout(env, "megatron-core") == mine.resolve()
    assert deps(world, "develop", "megatron-core") == 1  # now it is applied: the answer is "already developed"
    assert "already developed" in capsys.readouterr().err


def test_develop_after_uv_sync_refuses_a_recorded_checkout_that_is_gone(world, tmp_path, monkeypatch, capsys):
    env = tmp_path / "env"
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    mine = _clone(world, tmp_path / "my megatron")
    assert deps(world, "develop", "megatron-core", str(mine)) == 0
    fake_env(env)
    shutil.rmtree(mine)
    capsys.readouterr()
    assert deps(world, "develop", "megatron-core") == 1
    err = capsys.readouterr().err
    assert "is gone" in err and "deps develop --stop megatron-core" in err, err
    assert not develop_state.has_overlay(env, "megatron-core")


@pytest.mark.parametrize("present", [True, False])
def test_a_checkout_path_with_a_line_break_is_refused_before_anything_is_written(world, tmp_path, monkeypatch,
                                                                                capsys, present):
    env = tmp_path / "env"
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    if present:
        fake_env(env)
    mine = _clone(world, tmp_path / "nl\u2028clone")
    assert deps(world, "develop", "megatron-core", str(mine)) == 1
    assert "control character" in capsys.readouterr().err
    assert not (world.project / ".nemo-rl/develop.json").exists()
    assert not develop_state.shadow_dir(world.project, "megatron-core").exists()


def test_a_signal_after_develop_wrote_its_overlay_names_what_was_done(world, tmp_path, monkeypatch, capsys):
    """SIGHUP while develop reads the checkout's facts (git, a checkpoint) after the overlay and develop.json were
    written: the exit is 129 and the message lists those steps, never "nothing was changed"."""
    env = fake_env(tmp_path / "env")
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    mine = _clone(world, tmp_path / "mine")
    facts = develop_state.checkout_facts

    def hangup_meanwhile(*args, **kwargs):
        interrupt.record(signal.SIGHUP)
        return facts(*args, **kwargs)

    monkeypatch.setattr(develop_state, "checkout_facts", hangup_meanwhile)
    try:
        assert deps(world, "develop", "megatron-core", str(mine)) == 129
    finally:
        interrupt.reset()
    err = capsys.readouterr().err
    assert "nothing was changed" not in err and "interrupted after these steps were complete" in err, err
    assert f"{env} imports megatron-core from {mine}" in err and "develop.json records megatron-core" in err
    assert develop_state.active_checkout(env, "megatron-core") == mine


def test_onto_advice_names_a_path_with_spaces_as_one_word(world, tmp_path, monkeypatch, capsys):
    """The advice is pasted into a shell: `git -C /tmp/my clone ü rebase --abort` would be three words."""
    env = fake_env(tmp_path / "env")
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(env))
    mine = _clone(world, tmp_path / "my clone ü")
    assert deps(world, "develop", "megatron-core", str(mine)) == 0
    (mine / ".git" / "rebase-merge").mkdir()  # a rebase under way
    capsys.readouterr()
    assert deps(world, "develop", "megatron-core", "--onto", "main") == 1
    err = capsys.readouterr().err
    assert f"git -C {shlex.quote(str(mine))} rebase --abort" in err, err
    assert f"`git -C {mine} rebase" not in err
