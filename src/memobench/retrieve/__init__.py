"""retrieve: the retrieve stage's jobs: sibling variants ranked in one pass and shared through a sealed
cache, imported runs read into the same tables.

Imports nothing: a subpackage's __init__ is in the code fingerprint of each of its
modules (tests/test_layers.py)."""
