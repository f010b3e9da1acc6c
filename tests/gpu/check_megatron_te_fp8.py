"""On a GPU: a Megatron GPT forward/backward with transformer-engine's layer spec, in bf16 and under an fp8 recipe.

    uv run --locked --extra mcore python tests/gpu/check_megatron_te_fp8.py [--steps 3]

Needs: an NVIDIA GPU with its driver (libcuda.so.1), fp8 needs compute capability 8.9 or newer (H100/H200:
9.0); the mcore extra installed with transformer-engine built for the device's architecture
(NVTE_CUDA_ARCHS including it, see docs/mcore.md); no network. It first checks that the torch extension's cubins
fit the device (read from the binary), then runs each case and prints one table row per case: loss, whether
every gradient is finite, and the time of a step. Exit 0 when every case passed, 1 otherwise. It stops itself
after --limit seconds (default 540), so it fits a 10-minute device slot with room to start. Not collected by
pytest (the name does not start with test_).
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
import time
from pathlib import Path


def _extension_fits() -> str:
    import torch
    import transformer_engine_torch

    from nemo_rl.toolchain.archs import fatbin_archs, runs_on

    major, minor = torch.cuda.get_device_capability()
    gpu = major * 10 + minor
    archs = fatbin_archs(Path(transformer_engine_torch.__file__))
    if archs is None or not runs_on(archs, gpu):
        raise SystemExit(f"transformer_engine_torch holds cubins for sm {archs.sm if archs else 'none'}, the GPU "
                         f"is sm_{gpu}: rebuild with NVTE_CUDA_ARCHS={gpu} after "
                         "`uv cache clean transformer-engine-torch`")
    return f"sm_{gpu} ({torch.cuda.get_device_name()}); extension cubins sm {', '.join(map(str, archs.sm))}"


def _model(fp8: bool):
    import torch
    from megatron.core import tensor_parallel
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_with_transformer_engine_spec
    from megatron.core.transformer.transformer_config import TransformerConfig

    torch.manual_seed(1234)
    tensor_parallel.model_parallel_cuda_manual_seed(1234)
    # fp8 GEMMs need dimensions divisible by 16 and a token count divisible by 8
    config = TransformerConfig(num_layers=2, hidden_size=256, num_attention_heads=8, ffn_hidden_size=1024,
                               bf16=True, params_dtype=torch.bfloat16, hidden_dropout=0.0, attention_dropout=0.0,
                               fp8="hybrid" if fp8 else None, fp8_recipe="delayed" if fp8 else None,
                               fp8_amax_history_len=16 if fp8 else 1)
    model = GPTModel(config=config, transformer_layer_spec=get_gpt_layer_with_transformer_engine_spec(),
                     vocab_size=1024, max_sequence_length=128)
    return model.cuda()


def _step(model) -> tuple[float, bool]:
    import torch

    from nemo_rl.models.batch import causal_mask_and_position_ids

    tokens = torch.randint(0, 1024, (4, 128), device="cuda")
    mask, positions = causal_mask_and_position_ids(tokens)
    model.zero_grad(set_to_none=True)
    loss = model(tokens, positions, mask, labels=torch.roll(tokens, -1, dims=1)).float().mean()
    loss.backward()
    finite = all(torch.isfinite(p.grad).all().item() for p in model.parameters() if p.grad is not None)
    torch.cuda.synchronize()
    return float(loss.detach()), finite


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="steps per case (the first includes warm-up)")
    parser.add_argument("--limit", type=int, default=540, help="stop after this many seconds")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGALRM, lambda *_: sys.exit(f"stopped after {args.limit} s"))
    signal.alarm(args.limit)

    import torch

    from nemo_rl import extras
    from nemo_rl.models.megatron_gpt import init_parallel_state

    if not torch.cuda.is_available():
        print("no CUDA device (torch.cuda.is_available() is False): nothing to check", file=sys.stderr)
        return 1
    extras.require("megatron", "transformer_engine", purpose="the GPU check")  # loads the CUDA wheels' libraries
    print("device:", _extension_fits())
    init_parallel_state()
    cases = [("TE layer spec, bf16", False)]
    if torch.cuda.get_device_capability() >= (8, 9):
        cases.append(("TE layer spec, fp8 hybrid (delayed scaling)", True))
    else:
        print("fp8: skipped (needs compute capability 8.9 or newer)")
    print("| case | loss (last step) | gradients finite | step time (s, after the first) |")
    print("|---|---|---|---|")
    ok = True
    for name, fp8 in cases:
        model = _model(fp8)
        times, loss, finite = [], math.nan, False
        for _ in range(args.steps):
            start = time.perf_counter()
            loss, finite = _step(model)
            times.append(time.perf_counter() - start)
        passed = math.isfinite(loss) and finite
        ok &= passed
        steady = sorted(times[1:])[len(times[1:]) // 2] if len(times) > 1 else times[0]
        print(f"| {name} | {loss:.4f} | {'yes' if finite else 'NO'} | {steady:.4f} |")
        del model
        torch.cuda.empty_cache()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
