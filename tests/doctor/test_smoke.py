"""`nemo-rl doctor --smoke`'s checks (doctor/smoke.py): the JSON schema of their results, and a failure shown as
its type, message, our frame and the remedy."""

from __future__ import annotations

import json

from nemo_rl.cli import main
from nemo_rl.doctor import smoke

SMOKE_KEYS = {"name", "component", "status", "detail", "seconds", "failure_lines"}


def test_doctor_smoke_json_schema(capsys):
    assert main(["doctor", "--smoke", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in data["smoke"]] == [c.name for c in smoke.CHECKS]
    for result in data["smoke"]:
        assert set(result) == SMOKE_KEYS and result["status"] in {"pass", "fail", "skip"}
        assert result["status"] != "skip" or result["detail"]  # every skip says why
    assert data["smoke"][0]["status"] == "pass" and "gradients on all" in data["smoke"][0]["detail"]


def test_failure_shows_type_message_our_frame_and_remedy():
    def broken():
        raise RuntimeError("kernel exploded\nsecond line")

    result = smoke.run_check(smoke.Check("demo", "megatron", broken), verbose=False)
    assert result.status == "fail" and result.detail == "RuntimeError: kernel exploded"
    assert result.failure_lines[0].startswith("at ") and "test_smoke.py" not in result.failure_lines[0]
    assert result.failure_lines[-1].startswith("fix: run `uv run nemo-rl doctor --extra mcore --preflight && uv sync")
    verbose = smoke.run_check(smoke.Check("demo", "megatron", broken), verbose=True)
    assert any("Traceback (most recent call last)" in line for line in verbose.failure_lines)
