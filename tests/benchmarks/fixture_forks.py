"""Generated upstream and fork repositories of realistic shape for the layout benchmark.

A package tree of a few hundred modules, a long history (git fast-import keeps generation to seconds), and
large binary "docs images" that history keeps, as Megatron-LM and NeMo do. Deterministic for a given seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from nemo_rl.process import run

AUTHOR = "Bench Author <bench@fixture.invalid> 1714560000 +0000"


@dataclass(frozen=True)
class Shape:
    modules: int = 600
    module_bytes: int = 3000
    commits: int = 400
    files_per_commit: int = 3
    images: int = 12  # 2 figures rewritten 12 times: history outweighs the head, as in the real repos
    image_bytes: int = 2 * 1024 * 1024
    downstream: int = 5


def _text(rng: random.Random, size: int) -> bytes:
    words = ["def", "return", "self", "tensor", "config", "layer", "rank", "parallel", "(", ")", ":", "\n    "]
    out = []
    while sum(len(w) + 1 for w in out) < size:
        out.append(rng.choice(words) if rng.random() < 0.6 else f"name_{rng.randrange(10**6)}")
    return " ".join(out).encode()


def fast_import(repo: Path, distribution: str, module: str, shape: Shape, seed: int) -> dict[str, str]:
    """Create upstream history in `repo` (bare); return {"base": sha at the fork point, "head": upstream head}."""
    rng = random.Random(seed)
    top = "/".join(module.split("."))
    paths = [f"{top}/sub{i // 15:03d}/mod{i:04d}.py" for i in range(shape.modules)]
    pyproject = (
        f'[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n\n'
        f'[project]\nname = "{distribution}"\nversion = "0.1.0"\nrequires-python = ">=3.10"\n\n'
        f'[tool.hatch.build.targets.wheel]\npackages = ["{module.split(".")[0]}"]\n'
    ).encode()
    stream = bytearray()
    mark_of_base = shape.commits * 2 // 3

    def commit(mark: int, message: str, files: dict[str, bytes], parent: int | None) -> None:
        stream.extend(b"commit refs/heads/main\nmark :%d\n" % mark)
        stream.extend(b"author %s\ncommitter %s\n" % (AUTHOR.encode(), AUTHOR.encode()))
        stream.extend(b"data %d\n%s\n" % (len(message), message.encode()))
        if parent:
            stream.extend(b"from :%d\n" % parent)
        for path, data in files.items():
            stream.extend(b"M 100644 inline %s\ndata %d\n" % (path.encode(), len(data)) + data + b"\n")

    initial = {p: _text(rng, shape.module_bytes) for p in paths}
    initial["pyproject.toml"] = pyproject
    parts = module.split(".")
    for depth in range(1, len(parts) + 1):
        initial["/".join(parts[:depth]) + "/__init__.py"] = b'VERSION = "0.1.0"\n'
    commit(1, "initial import", initial, None)
    for mark in range(2, shape.commits + 1):
        files = {rng.choice(paths): _text(rng, shape.module_bytes) for _ in range(shape.files_per_commit)}
        if mark % (shape.commits // max(shape.images, 1)) == 0:  # docs images that history keeps forever
            files[f"docs/images/figure{mark % 2}.png"] = rng.randbytes(shape.image_bytes)
        commit(mark, f"upstream change {mark}", files, mark - 1)
    stream.extend(b"reset refs/heads/fork-point\nfrom :%d\n\n" % mark_of_base)
    run(["git", "init", "-q", "--bare", "--initial-branch=main", str(repo)])
    run(["git", "-C", str(repo), "fast-import", "--quiet"], input_text=bytes(stream))
    base = run(["git", "-C", str(repo), "rev-parse", "fork-point"]).stdout.strip()
    run(["git", "-C", str(repo), "update-ref", "-d", "refs/heads/fork-point"])
    head = run(["git", "-C", str(repo), "rev-parse", "main"]).stdout.strip()
    return {"base": base, "head": head}


def make_fork(upstream: Path, fork: Path, base: str, module: str, shape: Shape, seed: int) -> str:
    """Clone `upstream` at `base` into a bare `fork` and add downstream commits; return the fork's head."""
    rng = random.Random(seed + 1)
    run(["git", "clone", "-q", "--bare", "--no-local", str(upstream), str(fork)])
    top = "/".join(module.split("."))
    stream = bytearray()
    stream.extend(b"reset refs/heads/nemo-rl/main\nfrom %s\n\n" % base.encode())
    for i in range(1, shape.downstream + 1):
        message = f"downstream change {i}"
        data = _text(rng, shape.module_bytes)
        stream.extend(b"commit refs/heads/nemo-rl/main\n")
        stream.extend(b"author %s\ncommitter %s\n" % (AUTHOR.encode(), AUTHOR.encode()))
        stream.extend(b"data %d\n%s\n" % (len(message), message.encode()))
        stream.extend(b"M 100644 inline %s/downstream%d.py\ndata %d\n" % (top.encode(), i, len(data)) + data + b"\n")
    run(["git", "-C", str(fork), "fast-import", "--quiet"], input_text=bytes(stream))
    for repo in (upstream, fork):  # serve blob filters and by-SHA fetches, as GitHub does
        run(["git", "-C", str(repo), "config", "uploadpack.allowFilter", "true"])
        run(["git", "-C", str(repo), "config", "uploadpack.allowAnySHA1InWant", "true"])
    return run(["git", "-C", str(fork), "rev-parse", "refs/heads/nemo-rl/main"]).stdout.strip()
