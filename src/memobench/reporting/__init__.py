"""reporting: the report (Markdown and HTML, with its figures).

Imports nothing: a subpackage's __init__ is in the code fingerprint of each of its
modules (tests/unit/core/test_layers.py)."""
