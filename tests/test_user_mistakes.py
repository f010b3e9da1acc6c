"""Ordinary mistakes exit 1 (2 for bad arguments) with the file or setting and the fix, never a traceback."""

import os

import pytest

from nemo_rl.cli import main
from nemo_rl.errors import NemoRLError


def run_cli(capsys, *args):
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize("name, data, expected", [
    ("pyproject.toml", b"[tool.nemo-rl.forks.x]\nbranch = '\xff'\n", "not valid UTF-8"),
    ("pyproject.toml", b"[tool]\nuv = 3\n[tool.nemo-rl.forks]\n", "must be a table"),
    ("pyproject.toml", b"[tool.uv]\nsources = 'x'\n[tool.nemo-rl.forks.a]\n", "[tool.uv.sources] must be a table"),
    ("pyproject.toml", b"[tool.nemo-rl]\nforks = [1]\n", "[tool.nemo-rl.forks] must be a table"),
    ("uv.lock", b"version = 1\npackage = 'x'\n", "regenerate it with `uv lock`"),
    ("uv.lock", b"\xe9", "not valid UTF-8"),
])
def test_broken_project_files_exit_1(world, capsys, name, data, expected):
    (world.project / name).write_bytes(data)
    code, out = run_cli(capsys, "deps", "status", "--project", str(world.project))
    assert code == 1 and expected in out and "Traceback" not in out and "bug in nemo-rl" not in out


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


def test_read_only_checkout_exits_1(world, capsys):
    patches = world.project / "patches" / "megatron-core"
    patches.chmod(0o555)
    try:
        code, out = run_cli(capsys, "deps", "patches", "megatron-core", "--project", str(world.project))
    finally:
        patches.chmod(0o755)
    assert code == 1 and "is not writable" in out and "bug in nemo-rl" not in out


def test_missing_git_is_named_not_the_network(world, capsys, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    code, out = run_cli(capsys, "deps", "bump", "megatron-core", "--branch", "nemo-rl/main",
                        "--project", str(world.project))
    assert code == 1 and "cannot run git" in out and "install git" in out and "network" not in out


def test_unknown_component_and_cpu_forward_are_nemo_rl_errors():
    from nemo_rl import extras
    from nemo_rl.models import ModelConfig, build_model
    from nemo_rl.models.megatron_gpt import gpt_forward_backward

    with pytest.raises(NemoRLError, match="unknown mcore component"):
        extras.require("megatrn", purpose="x")
    config = ModelConfig(num_layers=1)
    with pytest.raises(NemoRLError, match="needs a CUDA device"):
        gpt_forward_backward(build_model(config, "torch"), config)


def test_causal_mask_and_position_ids_match_a_reference():
    import torch

    from nemo_rl.models.batch import causal_mask_and_position_ids

    eod = 0
    tokens = torch.tensor([[5, 1, 0, 7, 8, 0, 3, 4], [0, 2, 2, 2, 0, 0, 2, 2], [3] * 8])
    mask, positions = causal_mask_and_position_ids(tokens, eod, reset_position_ids=True, reset_attention_mask=True)
    for b, row in enumerate(tokens.tolist()):
        document, position, docs, pos = 0, 0, [], []
        for token in row:  # the reference: walk the sequence, an EOD ends its own document
            docs.append(document)
            pos.append(position)
            position += 1
            if token == eod:
                document, position = document + 1, 0
        assert positions[b].tolist() == pos
        for q in range(8):
            for k in range(8):
                assert bool(mask[b, 0, q, k]) == (k > q or docs[q] != docs[k]), (b, q, k)
    plain_mask, plain_positions = causal_mask_and_position_ids(tokens)
    assert plain_mask.shape == (1, 1, 8, 8) and plain_positions.tolist() == [list(range(8))] * 3
    assert plain_mask[0, 0].tolist() == [[k > q for k in range(8)] for q in range(8)]
