"""datasets: reading and checking the raw data: downloads, the four normalized tables, the datasets a
run could not get.

Imports nothing: a subpackage's __init__ is in the code fingerprint of each of its
modules (tests/unit/core/test_layers.py)."""
