"""memobench: exact reproduction of the Memo session-retrieval benchmark harnesses.

The package holds everything that is not Snakemake: dataset readers and
normalization, the retrieval engine, variants, metrics and reports. The
workflow's rules call into it through thin scripts.
"""

__version__ = "0.1.0"
