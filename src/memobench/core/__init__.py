"""core: the foundations every layer uses: one-line errors, the one atomic writer, progress
lines, the Parquet tables, JavaScript number/string semantics, the list depths, report text
as blocks, provenance, the results paths (layout), the dataset formats, config checks and
code fingerprints. Imports no other subpackage.

Imports nothing: a subpackage's __init__ is in the code fingerprint of each of its
modules (tests/unit/core/test_layers.py)."""
