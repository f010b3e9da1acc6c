"""Run as a script in a fork's build environment (standard library only), never imported: pyproject_hooks' own
hook script, loaded once, answers get_requires_for_build_wheel and, when the backend asks for nothing the
environment was not made with, the next hook at once into a control directory of its own, which the front end's
second call then reads (fork_metadata). Two hooks, one interpreter start and one backend import.

argv: pyproject_hooks' hook script, get_requires' control directory, the next hook's name, its control directory,
a file holding the environment's requirements (JSON).
"""

import importlib.util
import json
import os
import sys


def main() -> None:
    script, first, next_hook, ahead, given_file = sys.argv[1:6]
    with open(given_file, encoding="utf-8") as f:  # read before the backend runs
        given = json.load(f)
    # as the hook script itself does: this file's directory must not shadow the backend's imports
    here = os.path.realpath(os.path.dirname(__file__))
    sys.path[:] = [path for path in sys.path if os.path.realpath(path) != here]
    spec = importlib.util.spec_from_file_location("_in_process", script)
    if spec is None or spec.loader is None:
        sys.exit(f"cannot load {script}")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    sys.argv = [script, "get_requires_for_build_wheel", first]
    hooks.main()
    with open(os.path.join(first, "output.json"), encoding="utf-8") as f:
        asked = json.load(f).get("return_val")
    if isinstance(asked, list) and all(isinstance(r, str) for r in asked) and set(asked) <= set(given):
        sys.argv = [script, next_hook, ahead]
        hooks.main()


if __name__ == "__main__":
    main()
