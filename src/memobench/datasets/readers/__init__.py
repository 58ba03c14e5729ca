"""The dataset formats' readers, one module per format (formats.py names each
format's entry in normalize.py), and what they share (common.py)."""
