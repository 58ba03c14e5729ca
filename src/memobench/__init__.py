"""memobench: exact reproduction of the Memo session-retrieval benchmark harnesses.

The package holds everything that is not Snakemake: dataset readers and
normalization, the retrieval engine, variants, metrics and reports. The
workflow's rules call into it through thin scripts.

For notebooks (docs/python-api.md), from memobench.api:

* ``score``: a run file, a Python function, a configured variant or a memory
  service scored through the pipeline, as ``memobench score`` (a ``ScoreResult``);
* ``load``: a results folder as tidy DataFrames (a ``Results``);
* ``list_datasets``, ``list_variants``, ``list_conventions``: what can be scored,
  and the scoring conventions of the figures;
* ``MemobenchError``: every error, its text the command line's ``memobench:`` line.

They are imported when first used, so that importing the package (every
pipeline job does) stays light.
"""

__version__ = "0.1.0"

__all__ = ["score", "load", "list_datasets", "list_variants", "list_conventions", "MemobenchError", "ScoreResult",
           "Results"]


def __getattr__(name: str):
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'memobench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
