"""memobench: exact reproduction of the Memo session-retrieval benchmark harnesses.

The package holds everything that is not Snakemake: dataset readers and
normalization, the retrieval engine, variants, metrics and reports. The
workflow's rules call into it through thin scripts.

For notebooks (docs/python-api.md): ``score`` (a run file scored through the
pipeline), ``load`` (the results as DataFrames), ``list_datasets``, ``list_variants``
and ``MemobenchError``, from memobench.api. They are imported when first used,
so that importing the package (every pipeline job does) stays light.
"""

__version__ = "0.1.0"

__all__ = ["score", "load", "list_datasets", "list_variants", "MemobenchError", "ScoreResult", "Results"]


def __getattr__(name: str):
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'memobench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
