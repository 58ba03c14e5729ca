"""memobench: exact reproduction of the Memo session-retrieval benchmark harnesses.

The package holds everything that is not Snakemake: dataset readers and
normalization, the retrieval engine, variants, metrics and reports. The
workflow's rules call into it through thin scripts.

For notebooks (docs/python-api.md): ``score`` (a run file scored through the
pipeline), ``load`` (the results as DataFrames), ``datasets``, ``variants``
and ``MemobenchError``, from memobench.api. They are imported when first used,
so that importing the package (every pipeline job does) stays light.
"""

__version__ = "0.1.0"

__all__ = ["score", "load", "datasets", "variants", "MemobenchError", "ScoreResult", "Results"]


# ``memobench.datasets`` names the function, though a subpackage of that name (the dataset readers) exists:
# importing a submodule sets its name on the package, and this package keeps its own instead (the
# subpackage is imported by its full name, ``memobench.datasets.x``, from sys.modules as ever).
_SHADOWED = frozenset({"datasets"})


class _Package(__import__("types").ModuleType):
    def __setattr__(self, name, value):
        if name in _SHADOWED and type(value) is __import__("types").ModuleType:
            return
        super().__setattr__(name, value)


__import__("sys").modules[__name__].__class__ = _Package


def __getattr__(name: str):
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'memobench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
