"""`nemo-rl doctor --smoke`: small real runs of each installed component."""

from __future__ import annotations

import contextlib
import importlib
import math
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from nemo_rl import extras
from nemo_rl.models import megatron_gpt
from nemo_rl.models.config import ModelConfig
from nemo_rl.models.torch_lm import build_torch_lm, next_token_loss

CONFIG = ModelConfig()


class Skip(Exception):
    pass


@dataclass(frozen=True)
class Check:
    name: str
    component: str  # "torch" or a key of extras.own()
    run: Callable[[], str]


@dataclass(frozen=True)
class Result:
    name: str
    component: str
    status: str
    detail: str
    seconds: float
    failure_lines: tuple[str, ...] = ()


def _need(key: str) -> None:
    probe = extras.probe(key)
    if not probe.present and not probe.installed:
        raise Skip(f"{probe.reason}; {extras.SYNC_REMEDY}")
    extras.require(key, purpose=f"the {key} smoke check")


def _need_gpu(what: str) -> None:
    import torch

    if not torch.cuda.is_available():
        raise Skip(f"no CUDA device: {what}")


def torch_lm(device: str) -> str:
    import torch

    if device == "cuda":
        _need_gpu("the GPU run of the torch model needs one")
    model = build_torch_lm(CONFIG).to(device)
    tokens = torch.randint(0, CONFIG.vocab_size, (4, CONFIG.max_sequence_length), device=device)
    loss = next_token_loss(model, tokens)
    loss.backward()
    value = float(loss.detach())
    if not math.isfinite(value):
        raise AssertionError(f"loss is not finite: {value}")
    params = list(model.named_parameters())
    no_grad = [name for name, p in params if p.grad is None or not torch.isfinite(p.grad).all()]
    if no_grad:
        raise AssertionError(f"parameters without finite gradients: {', '.join(no_grad)}")
    return f"loss {value:.3f}, gradients on all {len(params)} parameters"


def megatron_parallel_state() -> str:  # pragma: mcore
    _need("megatron")
    return f"world size 1 over {megatron_gpt.init_parallel_state()}"


def megatron_build() -> str:  # pragma: mcore
    _need("megatron")
    megatron_gpt.init_parallel_state()
    model = megatron_gpt.build_megatron_gpt(CONFIG)
    count = sum(p.numel() for p in model.parameters())
    return f"GPTModel, local layer spec, {count} parameters on {next(model.parameters()).device}"


def megatron_forward_backward(use_transformer_engine: bool) -> str:  # pragma: mcore
    _need("megatron")
    _need_gpu("Megatron's forward pass calls torch.cuda")
    if use_transformer_engine:
        _need("transformer_engine")
    megatron_gpt.init_parallel_state()
    model = megatron_gpt.build_megatron_gpt(CONFIG, use_transformer_engine=use_transformer_engine)
    loss = megatron_gpt.gpt_forward_backward(model, CONFIG)
    if not math.isfinite(loss):
        raise AssertionError(f"loss is not finite: {loss}")
    return f"loss {loss:.3f}"


def te_linear(fp8: bool) -> str:  # pragma: mcore
    _need("transformer_engine")
    _need_gpu("transformer-engine runs on GPUs only")
    import torch
    import transformer_engine.pytorch as te

    if fp8:
        capability = torch.cuda.get_device_capability()
        if capability < (8, 9):
            raise Skip(f"fp8 needs compute capability 8.9 or newer; this GPU has {capability[0]}.{capability[1]}")
    layer = te.Linear(64, 64).cuda()
    inputs = torch.randn(32, 64, device="cuda", requires_grad=True)
    if fp8:
        from transformer_engine.common import recipe

        with te.fp8_autocast(enabled=True, fp8_recipe=recipe.DelayedScaling(fp8_format=recipe.Format.E4M3)):
            out = layer(inputs)
    else:
        out = layer(inputs)
    out.sum().backward()
    if inputs.grad is None or not torch.isfinite(inputs.grad).all():
        raise AssertionError("no finite input gradient")
    return "forward and backward" + (" under fp8 autocast (E4M3)" if fp8 else "")


def nemo_entry_points() -> str:  # pragma: mcore
    _need("nemo")
    entry_points = extras.component("nemo").entry_points
    for module in entry_points:
        importlib.import_module(module)
    return "imported " + ", ".join(entry_points)


CHECKS = [
    Check("torch: causal LM fwd/bwd (cpu)", "torch", lambda: torch_lm("cpu")),
    Check("torch: causal LM fwd/bwd (cuda)", "torch", lambda: torch_lm("cuda")),
    Check("megatron: parallel state", "megatron", megatron_parallel_state),
    Check("megatron: build GPT (local spec)", "megatron", megatron_build),
    Check("megatron: GPT fwd/bwd (local spec)", "megatron", lambda: megatron_forward_backward(False)),
    Check("megatron: GPT fwd/bwd (TE spec)", "megatron", lambda: megatron_forward_backward(True)),
    Check("transformer-engine: Linear fwd/bwd", "transformer_engine", lambda: te_linear(False)),
    Check("transformer-engine: fp8 autocast", "transformer_engine", lambda: te_linear(True)),
    Check("nemo: nemo.tron entry points", "nemo", nemo_entry_points),
]


def failure_lines(exc: BaseException, remedy: str, verbose: bool) -> list[str]:
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/nemo_rl/" in f.filename.replace("\\", "/")]
    lines = []
    if ours:
        lines.append(f"at {ours[-1].filename}:{ours[-1].lineno} in {ours[-1].name}")
    lines.append(f"fix: {remedy}")
    if verbose:
        lines += "".join(traceback.format_exception(exc)).rstrip().splitlines()
    return lines


def run_check(check: Check, verbose: bool) -> Result:
    start = time.perf_counter()
    lines: list[str] = []
    try:
        status, detail = "pass", check.run()
    except Skip as skip:
        status, detail = "skip", str(skip)
    except Exception as exc:
        status, detail = "fail", f"{type(exc).__name__}: {exc}".splitlines()[0]
        lines = failure_lines(exc, extras.remedy_for(check.component), verbose)
    return Result(check.name, check.component, status, detail, round(time.perf_counter() - start, 3), tuple(lines))


def run_all(verbose: bool = False) -> list[Result]:
    results = [run_check(check, verbose) for check in CHECKS]
    if extras.probe("megatron").installed:  # pragma: mcore
        with contextlib.suppress(Exception):  # cleanup only
            megatron_gpt.destroy_parallel_state()
    return results
