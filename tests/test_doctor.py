import json

from nemo_rl.cli import main

COMPONENT_KEYS = {"name", "distribution", "module", "state", "installed", "version", "installed_commit",
                  "locked_commit", "locked_version", "reason", "remedy"}


def test_doctor_json_on_the_default_environment(capsys):
    assert main(["doctor", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == 1 and data["healthy"] is True and data["problems"] == []
    assert set(data) >= {"python", "uv", "torch", "project", "requested_extra", "components"}
    assert data["torch"]["installed"] is True and data["torch"]["version"].startswith("2.7.0")
    by_name = {c["distribution"]: c for c in data["components"]}
    assert set(by_name) == {"megatron-core", "nemo-toolkit", "transformer-engine"}
    for component in by_name.values():
        assert set(component) == COMPONENT_KEYS
    assert by_name["megatron-core"]["locked_commit"] == "a768e50588f6e833741dcd25cfda64a8798f4d8e"
    assert by_name["nemo-toolkit"]["locked_commit"] == "95b6daf96ada0fbdc1aaba81e2a778a4fea2da82"


def test_doctor_wrong_project_is_an_error(tmp_path, capsys):
    assert main(["doctor", "--project", str(tmp_path)]) == 1
    assert "no pyproject.toml with a [tool.nemo-rl.forks] table" in capsys.readouterr().err


def test_doctor_text_and_requested_extra(capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "result: healthy (the default environment)" in out
    if "megatron-core        not installed" in out:
        assert "fix: run `uv sync --extra mcore`" in out
        assert main(["doctor", "--extra", "mcore"]) == 1
        assert "result: NOT healthy (the mcore environment)" in capsys.readouterr().out


def test_component_state_agrees_with_deps_status():
    from nemo_rl import extras
    from nemo_rl.doctor.report import component_state

    locked = "a768e50588f6e833741dcd25cfda64a8798f4d8e"
    megatron = extras.COMPONENTS["megatron"]

    def probe(commit, installed=True, present=True):
        return extras.Probe(megatron, installed, present, "0.13.0rc0", commit, None if installed else "boom")

    assert component_state(probe(locked), locked) == ("ok", None)
    state, remedy = component_state(probe("0" * 40), locked)
    assert state == "env stale" and "another commit than uv.lock" in remedy
    state, remedy = component_state(probe(None), locked)  # a local wheel: no PEP 610 commit
    assert state == "env stale" and "without a git commit record" in remedy
    assert component_state(probe(None), None) == ("ok", None)  # a registry package has no locked commit
    assert component_state(probe(None, installed=False), locked)[0] == "broken"
    assert component_state(probe(None, installed=False, present=False), locked)[0] == "not installed"
