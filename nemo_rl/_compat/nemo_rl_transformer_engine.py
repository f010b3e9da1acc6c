"""Imported at start by a .pth file: runs transformer_engine and its `common` module inside
`cuda_libs.for_transformer_engine()`."""

import sys

WRAPPED = ("transformer_engine", "transformer_engine.common")


class _Loader:
    def __init__(self, loader):
        self._loader = loader

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def exec_module(self, module):
        try:
            from nemo_rl.cuda_libs import for_transformer_engine
        except Exception:  # a broken nemo-rl must not stop transformer_engine's import
            return self._loader.exec_module(module)
        with for_transformer_engine():
            self._loader.exec_module(module)


class Finder:
    """Finds the modules of WRAPPED as the path finder does, wrapping their loader."""

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
