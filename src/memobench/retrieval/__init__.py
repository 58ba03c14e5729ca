"""retrievers: the retriever seam (``registry``) and every retriever: the harness rules they are
measured under, the Memo engine as a retriever, session documents, the reference retrievers
(``baselines``), a user's Python callable, fusion.

Imports nothing: a subpackage's __init__ is in the code fingerprint of each of its
modules (tests/unit/core/test_layers.py)."""
