"""Backends by name, the torch smoke, doctor --smoke rendering and schema, and planted broken extras."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from nemo_rl import extras
from nemo_rl.cli import main
from nemo_rl.doctor import smoke
from nemo_rl.errors import MissingExtraError, NemoRLError
from nemo_rl.models import ModelConfig, build_model

SMOKE_KEYS = {"name", "component", "status", "detail", "seconds", "failure_lines"}


def test_unknown_backend_lists_the_valid_ones():
    with pytest.raises(NemoRLError) as info:
        build_model(ModelConfig(), "jax")
    assert "unknown model backend 'jax'" in str(info.value) and "megatron, torch" in str(info.value)


def test_config_rejects_heads_that_do_not_divide():
    with pytest.raises(ValueError, match="not divisible"):
        ModelConfig(hidden_size=66, num_attention_heads=4)


def test_torch_backend_forward_backward_on_cpu():
    import torch

    from nemo_rl.models.torch_lm import next_token_loss

    config = ModelConfig(num_layers=1)
    model = build_model(config, "torch")
    tokens = torch.randint(0, config.vocab_size, (2, 8))
    assert model(tokens).shape == (2, 8, config.vocab_size)
    loss = next_token_loss(model, tokens)
    loss.backward()
    assert torch.isfinite(loss) and all(p.grad is not None for p in model.parameters())
    # causal: the first position's logits ignore later tokens
    changed = tokens.clone()
    changed[:, -1] = (changed[:, -1] + 1) % config.vocab_size
    assert torch.allclose(model(tokens)[:, 0], model(changed)[:, 0], atol=1e-5)


@pytest.mark.skipif(extras.probe("megatron").present, reason="megatron-core is installed here")
def test_megatron_backend_without_the_extra_raises_the_guard():
    with pytest.raises(MissingExtraError) as info:
        build_model(ModelConfig(), "megatron")
    assert "the Megatron GPT backend needs the mcore extra" in str(info.value)
    assert "uv sync --extra mcore" in str(info.value)


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
    assert result.failure_lines[0].startswith("at ") and "test_models_and_smoke.py" not in result.failure_lines[0]
    assert result.failure_lines[-1].startswith("fix: run `uv sync --extra mcore`")
    verbose = smoke.run_check(smoke.Check("demo", "megatron", broken), verbose=True)
    assert any("Traceback (most recent call last)" in line for line in verbose.failure_lines)


def test_every_smoke_component_has_a_remedy_from_the_one_table():
    from nemo_rl import extras

    for check in smoke.CHECKS:
        assert extras.remedy_for(check.component)
    with pytest.raises(NemoRLError, match="(?s)unknown mcore component 'megatrn'.*megatron, nemo, transformer_engine"):
        extras.require("megatrn", purpose="x")


def plant(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def doctor_in_subprocess(path, *args):
    env = {**os.environ, "PYTHONPATH": str(path)}
    proc = subprocess.run([sys.executable, "-m", "nemo_rl", "doctor", "--smoke", *args], env=env,
                          capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


BROKEN_MEGATRON = {
    "megatron/__init__.py": "",
    "megatron/core/__init__.py": """
        import subprocess
        raise subprocess.CalledProcessError(1, ["ldconfig", "-p"])  # as TE 2.3 does without CUDA libraries
    """,
    "megatron_core-0.13.0rc0.dist-info/METADATA": "Metadata-Version: 2.1\nName: megatron-core\nVersion: 0.13.0rc0\n",
    "transformer_engine/__init__.py": "",
    "transformer_engine/pytorch/__init__.py": "raise OSError('libcudart.so.12: cannot open shared object file')\n",
    "transformer_engine-2.3.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: transformer-engine\nVersion: 2.3.0\n",
}


@pytest.mark.skipif(extras.probe("megatron").present, reason="a real megatron-core would shadow the planted one")
@pytest.mark.slow
def test_doctor_renders_planted_broken_extra_without_traceback(tmp_path):
    plant(tmp_path, BROKEN_MEGATRON)
    code, out = doctor_in_subprocess(tmp_path)
    assert code == 0  # the default environment was requested, and torch works
    assert "megatron-core        broken" in out
    assert "why: import megatron.core failed: CalledProcessError" in out
    assert "why: import transformer_engine.pytorch failed: OSError: libcudart.so.12" in out
    assert "fail    megatron: parallel state" in out and "MissingExtraError" in out
    assert "Traceback" not in out
    code, out = doctor_in_subprocess(tmp_path, "--extra", "mcore")
    assert code == 1 and "result: NOT healthy (the mcore environment)" in out
    assert "smoke check failed: megatron: parallel state" in out
    code, out = doctor_in_subprocess(tmp_path, "--extra", "mcore", "--verbose")
    assert "Traceback (most recent call last)" in out and "CalledProcessError" in out
