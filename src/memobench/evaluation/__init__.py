"""evaluation: scoring a variant's lists: harness metrics, official metrics, exports for the field's
tools, paired statistics, published numbers, the analyses (analyze.cjs, the M direction check).

Imports nothing: a subpackage's __init__ is in the code fingerprint of each of its
modules (tests/unit/core/test_layers.py)."""
