"""catalog: what a variant is. Every retriever's row (its name, kind, label,
description, embedding input, module and rank function), registered by the
module that defines the retriever (``row.register``); the catalog of rows
(``registry``), the Variant (``variant``), and the named variants of each
harness family (``variants``).

Imports nothing: a subpackage's __init__ is in the code fingerprint of each of its
modules (tests/unit/core/test_layers.py)."""
