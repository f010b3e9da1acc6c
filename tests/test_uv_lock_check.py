"""What `uv lock --check` said, read by nemo_rl.uv.lock_mismatch: pure, on uv's words as it may write them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from nemo_rl import uv
from nemo_rl.process_output import Result

REFUSAL = "Building source distributions for `evil` is disabled"


def said(monkeypatch, stderr: str, returncode: int = 1) -> str | None:
    monkeypatch.setattr(uv, "run", lambda args, **kwargs: Result(list(args), returncode, "", stderr))
    return uv.lock_mismatch(Path("/nonexistent"))


@pytest.mark.parametrize("line", [f"  cause: {REFUSAL}", f"\x1b[1m\x1b[31mcause\x1b[39m\x1b[0m: {REFUSAL}",
                                  f"error: {REFUSAL}",
                                  "hint: Wheels are required for `evil` because building from source is disabled",
                                  "error: Distribution `evil==0.1 @ editable+/x/evil` can't be installed because it "
                                  "is marked as `--no-build` but has no binary distribution"])
def test_a_refusal_to_build_is_found_however_uv_frames_it(monkeypatch, line):
    why = said(monkeypatch, f"error: Failed to build `evil @ file:///x`\n{line}\n")
    assert why is not None and why.startswith(uv.BUILD_REFUSED) and "`evil" in why


def test_another_python_is_not_called_a_mismatch(monkeypatch):
    why = said(monkeypatch, "error: The requested interpreter resolved to Python 3.11.2, which is incompatible "
                            "with the project's Python requirement: `==3.12.*`\n")
    assert why == (f"{uv.OTHER_PYTHON} ({sys.executable}; The requested interpreter resolved to Python 3.11.2, "
                   "which is incompatible with the project's Python requirement: `==3.12.*`)")


def test_uvs_last_line_is_the_reason_made_printable(monkeypatch):
    assert said(monkeypatch, "Resolved 3 packages\nerror: Failed to parse `uv.lock`\x1b]0;x\x07\n") == (
        "error: Failed to parse `uv.lock`\\x1b]0;x\\x07")
    assert said(monkeypatch, "", returncode=0) is None and said(monkeypatch, "") == "uv lock --check exited 1"


def test_a_check_uv_could_not_make_is_not_a_stale_lock(monkeypatch, tmp_path):
    from nemo_rl.project import uv_inputs

    (tmp_path / "uv.lock").write_text("")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0.1"\n')
    for why, says in [(f"{uv.OTHER_PYTHON} (/usr/bin/python3)", "with a Python that requires-python allows"),
                      (f"{uv.BUILD_REFUSED}: {REFUSAL}", "then `uv lock --check` if that code is trusted")]:
        monkeypatch.setattr(uv, "lock_mismatch", lambda project, why=why: why)
        problem = uv_inputs.lock_problem(tmp_path, [])
        assert problem is not None and problem.startswith("uv.lock was not checked") and says in problem
        assert "run `uv lock` and commit it" not in problem


def test_uvs_error_line_is_the_reason_not_its_closing_hint(monkeypatch):
    assert said(monkeypatch, "error: Failed to parse `uv.lock`\n  Caused by: TOML parse error at line 1\n"
                             "hint: To update the lockfile, run `uv lock`.\n") == (
        "error: Failed to parse `uv.lock` Caused by: TOML parse error at line 1")


def test_only_uvs_own_stale_lock_is_called_stale(monkeypatch):
    assert said(monkeypatch, "Resolved 3 packages in 1ms\nerror: The lockfile at `uv.lock` needs to be updated, but "
                             "`--check` was provided. To update the lockfile, run `uv lock`.\n") == uv.STALE
    why = said(monkeypatch, "error: No `project` table found in: `/x/pyproject.toml`\n")
    assert why == "error: No `project` table found in: `/x/pyproject.toml`"


def test_uv_lock_is_the_remedy_only_for_a_stale_lock(monkeypatch, tmp_path):
    from nemo_rl.project import uv_inputs

    (tmp_path / "uv.lock").write_text("")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0.1"\n')
    monkeypatch.setattr(uv, "lock_mismatch", lambda project: uv.STALE)
    assert uv_inputs.lock_problem(tmp_path, []) == "uv.lock does not match pyproject.toml: run `uv lock` and commit it"
    monkeypatch.setattr(uv, "lock_mismatch", lambda project: "error: No `project` table found")
    problem = uv_inputs.lock_problem(tmp_path, [])
    assert problem is not None and problem.startswith("uv could not check uv.lock") and "run `uv lock`" not in problem
