"""Text that others write (a lock file in a shared directory, a record a pull request edits, a path in a state
file) reaches the terminal shown, never acted on: no escape sequence erases a line, fakes one or retitles the
terminal."""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from nemo_rl import values
from nemo_rl.cli import main
from nemo_rl.deps import status
from nemo_rl.forks.records import Difference
from nemo_rl.progress import progress
from nemo_rl.project.develop_state import CheckoutFacts
from nemo_rl.workers import environments

# erase the line, go up, erase, return: then a fake verdict, then a new terminal title
FAKE = "\x1b[2K\x1b[1A\x1b[2K\rok: all checks passed\n\x1b]0;owned\x07"
SHOWN = r"\x1b[2K\x1b[1A\x1b[2K\rok: all checks passed\n\x1b]0;owned\x07"
SHOWN_LINES = r"\x1b[2K\x1b[1A\x1b[2K\rok: all checks passed" + "\n" + r"\x1b]0;owned\x07"


def test_printable_escapes_what_a_terminal_acts_on_and_keeps_the_rest():
    assert values.printable(FAKE) == SHOWN
    # C1 CSI, DEL, a bidirectional override, a line separator, a soft hyphen
    assert values.printable("a\x9b2Jb\x7fc\u202ed\u2028e\xadf") == r"a\x9b2Jb\x7fc\u202ed\u2028e\xadf"
    assert values.printable("x\ny\tz", lines=True) == r"x" + "\n" + r"y\tz"
    assert values.printable("x\ny") == r"x\ny"
    text = "megatron-core: add tokens entry, Müller, 日本, C:\\path 'quoted'"
    assert values.printable(text) == text
    assert values.printable(values.printable(FAKE)) == SHOWN


def test_a_progress_line_shows_escapes(capsys):
    progress(f"waiting for {FAKE}")
    assert capsys.readouterr().err == f"==> waiting for {SHOWN}\n"


def test_a_lock_holder_s_description_is_shown_not_acted_on(tmp_path, capsys):
    """The description a holder wrote into the key's lock file is printed in "waiting for ..."."""
    where = environments.Slot(tmp_path, "k" * 24)
    where.lock_path.write_text(FAKE)
    holder = os.open(where.lock_path, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)
    release = threading.Timer(0.5, os.close, (holder,))
    release.start()
    try:
        with where.locked() as got:
            assert got
    finally:
        release.join()
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "\r" not in err
    assert f"==> waiting for {SHOWN} to finish worker environment {'k' * 24}\n" in err


def test_an_error_message_shows_escapes(tmp_path, monkeypatch, capsys):
    project = tmp_path / f"p{FAKE}"  # a name found on disk (typed, the parser refuses it), named in the error
    project.mkdir()
    monkeypatch.chdir(project)
    assert main(["deps", "status"]) == 1
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "\r" not in err
    # a message of several lines (a command's indented output) keeps its lines: only the newline is left as it is
    assert f"p{SHOWN_LINES}" in err
    assert err.startswith("error: ") and "\n  what to do: " in err


@pytest.mark.parametrize("raised", [OSError(errno.ENOSPC, "No space left on device", f"/d{FAKE}"),
                                    RuntimeError(f"/d{FAKE}")], ids=["a file's error", "an unexpected error"])
def test_an_os_or_unexpected_error_shows_escapes(world, monkeypatch, capsys, raised):
    from nemo_rl.deps import status as command

    def fails(project, args):
        raise raised

    monkeypatch.setattr(command, "run", fails)
    assert main(["deps", "status", "--project", str(world.project)]) in (1, 3)
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "\r" not in err
    assert "/d\\x1b[2K" in err


def test_a_record_difference_shows_escapes():
    shown = str(Difference("0001-x.patch", "subject", f"add tokens{FAKE}", "add tokens"))
    assert shown == f"0001-x.patch: subject: expected add tokens{SHOWN}, found add tokens"


def test_status_shows_a_developed_checkout_s_path_with_escapes():
    row = status.ForkStatus("megatron-core", "https://forks.nemo-rl.invalid/m.git", "nemo-rl/main", "a" * 40,
                            "a" * 40, "a" * 40, "0.1.0", None, None, 0, [], None, "ok", None)
    gone = replace(row, state="checkout gone", developing=CheckoutFacts(Path(f"/w{FAKE}"), None, 0, False,
                                                                       missing=True),
                   remedy=f"the develop checkout /w{FAKE} is gone")
    text = status.render([gone], [])
    assert "\x1b" not in text and "\r" not in text
    assert f"  developing /w{SHOWN} (missing)" in text.splitlines()
    assert f"  fix        the develop checkout /w{SHOWN} is gone" in text.splitlines()


def test_a_pull_request_s_escape_in_a_record_subject_cannot_hide_the_drift(world, capsys):
    index = world.project / "patches/megatron-core/index.toml"
    text = index.read_text()
    assert 'subject = "add tokens entry"' in text
    index.write_text(text.replace('subject = "add tokens entry"', 'subject = "add tokens entry\\u001b[2K\\r"', 1))
    capsys.readouterr()
    assert main(["deps", "patches", "--check", "--offline", "--project", str(world.project)]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out
    assert "megatron-core: DRIFT" in out
    assert r"subject: expected add tokens entry\x1b[2K\r, found add tokens entry" in out


def test_envs_list_shows_what_a_shared_directory_holds_with_escapes(world, tmp_path, monkeypatch, capsys):
    """An environment's metadata (flags, project) and a bundle's manifest come from a shared directory."""
    import json

    from fakes import fake_env

    venvs = tmp_path / "venvs"
    monkeypatch.setenv("NEMO_RL_VENV_DIR", str(venvs))
    env = fake_env(venvs / ("0" * 24))
    (env / environments.META).write_text(json.dumps({"key": env.name, "flags": ["--locked", FAKE], "lock_hash": "x",
                                                     "version": 1, "project": str(world.project)}))
    capsys.readouterr()
    assert main(["envs", "list", "--project", str(world.project)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and SHOWN in out, out


def test_a_forks_commit_subject_is_shown_with_escapes_by_bump_and_upstream(world, capsys):
    """Subjects come from the fork's history: `deps bump` and `deps upstream` print them."""
    from gitfixtures import commit

    fork = world.forks["megatron-core"].fork
    rev = commit(fork, f"feat: {FAKE}", {"megatron/core/more.py": "MORE = 1\n"})
    capsys.readouterr()
    assert main(["deps", "bump", "megatron-core", "--rev", rev, "--project", str(world.project)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and r"\x1b[2K" in out, out
    assert main(["deps", "upstream", "megatron-core", "--project", str(world.project)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and r"\x1b[2K" in out, out
