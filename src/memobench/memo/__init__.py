"""memo: the reproduced Memo harness engine and its recipes: tokenizers, stemmer, time words, the typed
recipe registry, the named variants, ranking, FTS5 discovery in memory, tokens as ids.

Imports nothing: a subpackage's __init__ is in the code fingerprint of each of its
modules (tests/unit/core/test_layers.py)."""
