"""The list depths of the benchmark's protocol, defined once
(docs/protocol.md#deep-lists-and-exports): a harness list is the first
``TOP`` sessions, the deep list the first ``DEPTH`` (what the official
metrics, ``run.trec`` and the retrieval log read; a score of
``DEPTH + 1 - rank`` where a ranker has none of its own). Imported by the
engine, the retrievers and the exports, so it stays free of imports."""

TOP = 10
DEPTH = 50
