"""runs: the run formats, one module per format, each reading and writing it:
TREC (``trec``), LongMemEval's retrieval log (``retrieval_log``) and a JSON
object of lists (``json_run``). An imported run is read by its format's
``read`` (retrieval.imported); the exports write the TREC run and the
retrieval log.

Imports nothing: a subpackage's __init__ is in the code fingerprint of each of its
modules (tests/unit/core/test_layers.py)."""

# each format's name (config ``variants.<name>.run.format``, the schema's enum, ``memobench score --format``)
# -> its module here (which says the same name as its NAME)
FORMATS = {"trec": "trec", "retrievallog": "retrieval_log", "json": "json_run"}
