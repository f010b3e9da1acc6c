"""Delete each check once and see a test fail: a hand-made mutation run over the checks of `deps patches --check`,
bump's validation, status's states and the worker-environment verification.

    uv run python tests/check_mutations.py            # every mutation
    uv run python tests/check_mutations.py -k digest  # those whose name contains "digest"

Each mutation edits one line of a copy of nemo_rl/ in a temporary directory (the checkout is never changed),
runs the tests that cover it with PYTHONPATH pointing at the copy, and reports "caught" when a test failed.
Not collected by pytest (the file name does not start with test_).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATCHES = "tests/test_deps_patches.py"
STATUS = "tests/test_deps_status.py"
BUMP = "tests/test_deps_bump.py"

# (name, file, original text, mutated text, tests that must catch it)
MUTATIONS = [
    ("offline: index digest", "nemo_rl/deps/records.py", "if index.digest != index.expected_digest():",
     "if False:", PATCHES),
    ("offline: record digest", "nemo_rl/deps/records.py", '("patch-id", record.patch_id),\n                       ("digest", record.digest())',
     '("patch-id", record.patch_id)', PATCHES),
    ("offline: pins vs pyproject", "nemo_rl/deps/records.py", "for key, value in expected.items() if found[key] != value]",
     "for key, value in expected.items() if False]", PATCHES),
    ("offline: lock commit in full", "nemo_rl/deps/records.py", "if locked_commit != fork.rev:",
     "if str(locked_commit)[:7] != fork.rev[:7]:", PATCHES),
    ("offline: entry number (order)", "nemo_rl/deps/records.py", 'if entry.get("number") != position:', "if False:",
     PATCHES),
    ("offline: path inside patches/<dist>/", "nemo_rl/deps/records.py",
     "if not isinstance(record_name, str) or Path(record_name).name != record_name", "if not isinstance(record_name, str)",
     PATCHES),
    ("offline: record file exists", "nemo_rl/deps/records.py", "if not path.is_file():\n        return [*diffs,",
     "if False:\n        return [*diffs,", PATCHES),
    ("offline: stray files", "nemo_rl/deps/records.py", "if path.name not in listed:", "if False:", PATCHES),
    ("offline: why-note", "nemo_rl/deps/records.py", "if require_why and", "if False and", PATCHES),
    ("offline: orphaned records", "nemo_rl/deps/records.py", "for d in sorted(root.iterdir() if root.is_dir() else ()) if d.name not in known]",
     "for d in [] if d.name not in known]", f"{PATCHES} {STATUS}"),
    ("online: index facts", "nemo_rl/deps/records.py", "for key in INDEX_FACTS if expected.facts()[key] != index.facts()[key]]",
     "for key in INDEX_FACTS if False]", PATCHES),
    ("online: record facts", "nemo_rl/deps/records.py", "for key in RECORD_FACTS if found[key] != record.facts()[key]]",
     "for key in RECORD_FACTS if False]", PATCHES),
    ("bump: validation after writing", "nemo_rl/deps/bump.py", "    if problems:\n        raise NemoRLError(\"the bumped",
     "    if False:\n        raise NemoRLError(\"the bumped", BUMP),
    ("bump: read-only refusal", "nemo_rl/project/landing.py", "if path.exists() and (not os.access(path, os.W_OK) or not path.stat().st_mode & 0o200):",
     "if False:", BUMP),
    ("bump: renamed distribution", "nemo_rl/deps/bump.py", "if isinstance(name, str) and canonicalize_name(name) != canonicalize_name(distribution):",
     "if False:", BUMP),
    ("bump: landing journal rolls forward", "nemo_rl/project/landing.py", "if (self.path / JOURNAL).exists():", "if False:",
     BUMP),
    ("status: bad pin", "nemo_rl/deps/status.py", "if fork.bad_rev:", "if False:", STATUS),
    ("status: records stale", "nemo_rl/deps/status.py", "    elif problems:\n", "    elif False:\n", STATUS),
    ("status: lock stale", "nemo_rl/deps/status.py", "    elif locked_commit != fork.rev:\n", "    elif False:\n", STATUS),
    ("status: interrupted bump", "nemo_rl/deps/status.py", "    elif interrupted:\n", "    elif False:\n", BUMP),
    ("status: developing", "nemo_rl/deps/status.py", "    elif developed:\n", "    elif False:\n",
     "tests/test_deps_develop.py"),
    ("workers: Ray version", "nemo_rl/workers/environments.py", 'if facts["ray"] != driver_ray:', "if False:",
     "tests/test_ray_workers.py tests/test_runtime.py"),
    ("workers: uv-run detection off", "nemo_rl/workers/ray_actors.py", "ray_constants.RAY_ENABLE_UV_RUN_RUNTIME_ENV = False",
     "pass", "tests/test_ray_workers.py"),
]


def run_one(name: str, file: str, original: str, mutated: str, tests: str) -> str:
    with tempfile.TemporaryDirectory(prefix="nemo-rl-mutation-") as tmp:
        copy = Path(tmp) / "repo"
        shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".venv", ".git", "venvs", ".nemo-rl",
                                                                   "benchmark-results", "__pycache__"))
        target = copy / file
        text = target.read_text()
        if text.count(original) != 1:
            return f"NOT APPLIED (the original text occurs {text.count(original)} times)"
        target.write_text(text.replace(original, mutated))
        env = {**os.environ, "PYTHONPATH": str(copy)}
        result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests.split()],
                                cwd=copy, env=env, capture_output=True, text=True)
        return "caught" if result.returncode == 1 else f"SURVIVED (pytest exit {result.returncode})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-k", default="", help="only mutations whose name contains this")
    args = parser.parse_args()
    survived = 0
    print("| check removed | tests | result |\n|---|---|---|")
    for name, file, original, mutated, tests in MUTATIONS:
        if args.k not in name:
            continue
        outcome = run_one(name, file, original, mutated, tests)
        survived += outcome != "caught"
        print(f"| {name} | {tests} | {outcome} |", flush=True)
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
