"""Installed as the top-level module `_nemo_rl_transformer_engine` and imported at interpreter start by
`nemo_rl_transformer_engine.pth` (pyproject.toml's force-include): every environment holding nemo-rl, the
checkout's `.venv` and each worker environment, then imports transformer_engine plainly. Its package and its
`common` module (the one that loads the CUDA libraries) execute inside `nemo_rl.cuda_libs.for_transformer_engine()`.

At start this adds one entry to `sys.meta_path` and imports nothing; the work waits for the first import of
transformer_engine.
"""

import sys

WRAPPED = ("transformer_engine", "transformer_engine.common")


class _Loader:
    def __init__(self, loader):
        self._loader = loader

    def __getattr__(self, name):  # resource readers, get_code, ...: the real loader's
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        try:
            from nemo_rl.cuda_libs import for_transformer_engine
        except Exception:  # a nemo-rl that no longer imports must not stop transformer_engine's own import
            return self._loader.exec_module(module)
        with for_transformer_engine():
            self._loader.exec_module(module)


class Finder:
    """Finds the modules of WRAPPED as the path finder does and wraps their loader."""

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname not in WRAPPED:  # guard: te-import-hook-wraps-transformer-engine
            return None
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(fullname, path, target)
        if spec is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Loader(spec.loader)
        return spec


def install():
    if Finder not in sys.meta_path:
        sys.meta_path.insert(0, Finder)
