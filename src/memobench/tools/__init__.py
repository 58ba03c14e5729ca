"""tools: tooling, never run by the pipeline: the generator of LongMemEval/LoCoMo/CN-format files and
the benchmarks.

Imports nothing: a subpackage's __init__ is in the code fingerprint of each of its
modules (tests/unit/core/test_layers.py)."""
