"""Where every result lies: the one definition of the ``results/`` tree
(docs/results.md#result-files, docs/tables.md).

Each name below is a pattern with Snakemake-style wildcards (``{dataset}``,
``{variant}``, ``{segment}``, ...): a rule file takes it as it is, as an
output pattern, and package code fills it in with :func:`path`. The folder
the patterns start from is :data:`RESULTS`, relative to the working
directory; :func:`path` moves a pattern under another root (a test's
``tmp_path``, a benchmark's work folder) and :func:`root_of` finds the root
again from a path made from a pattern. No path below is spelled anywhere
else in ``src/`` or ``workflow/`` (tests/unit/core/test_layout.py checks it).
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

RESULTS = "results"

# per dataset
DATASET = f"{RESULTS}/{{dataset}}"
RAW_RECEIPT = f"{DATASET}/raw.json"
VERIFIED = f"{DATASET}/verified.json"
NORMALIZED = f"{DATASET}/normalized"
NORMALIZED_TABLE = f"{NORMALIZED}/{{table}}.parquet"
# the four normalized tables, in the order normalize writes them (their schemas: tables.TABLES)
TABLE_NAMES = ("questions", "haystacks", "sessions", "events")
NORMALIZED_SUMMARY = f"{NORMALIZED}/summary.json"
# ``{tokenizer}``: a recipe's tokenizer (its ``seq`` field) or fts5
TOKENS = f"{DATASET}/tokens/{{tokenizer}}.arrow"
EMBEDDINGS = f"{DATASET}/embeddings/{{model}}.parquet"
# each session's and turn's tokens as a reader receives it, under the budgets' tokenizer (evaluation/context.py)
CONTEXT_SESSIONS = f"{DATASET}/context_tokens/sessions.parquet"
# events.parquet, not turns.parquet: a variant folder's turns.parquet would match it
CONTEXT_TURNS = f"{DATASET}/context_tokens/events.parquet"
PREPARED = f"{DATASET}/prepared/{{variant}}.parquet"
SESSIONS_JSON = f"{DATASET}/exports/sessions.bin"
QRELS = f"{DATASET}/qrels.trec"
# the gold turns of a dataset with a turn variant (evaluation.exports.write_turn_qrels)
TURN_QRELS = f"{DATASET}/qrels.turns.trec"
STATS = f"{DATASET}/stats.json"
ANALYZE = f"{DATASET}/analyze"
ANALYZE_ROWS = f"{ANALYZE}/questions.parquet"
ANALYZE_SUMMARY = f"{ANALYZE}/summary.json"
ANALYZE_MD = f"{ANALYZE}/analyze.md"
FALSIFIER = f"{DATASET}/falsifier.json"
FALSIFIER_MD = f"{DATASET}/falsifier.md"
# a segment's tables a sibling variant's retrieve job computed ahead (memobench.retrieval.sharing)
SHARED_CACHE = f"{DATASET}/cache/{{segment}}"
# the namespaces a memory service variant has ingested, across its jobs (memobench.services.ledger)
SYSTEM_LEDGER = f"{RESULTS}/cache/system/{{variant}}.jsonl"

# per dataset and variant: a segment's tables, then the merged ones (the
# per-question outcomes are outcomes.parquet, not questions.parquet: that name
# is the normalized input table's)
VARIANT = f"{DATASET}/{{variant}}"
SEGMENTS = f"{VARIANT}/segments"
# a segment's name, the ``{segment}`` wildcard: seg1, seg2, ... (segment_name, segment_index)
_SEGMENT_PREFIX = "seg"
SEGMENT_PATTERN = f"{_SEGMENT_PREFIX}[0-9]+"  # the wildcard's constraint (a regular expression)
# ``{suffix}``: one of SEGMENT_SUFFIXES
SEGMENT_TABLE = f"{SEGMENTS}/{{segment}}{{suffix}}"
SEGMENT_SUFFIXES = {"rankings": ".parquet", "outcomes": ".outcomes.parquet", "deep": ".deep.parquet",
                    "turns": ".turns.parquet"}
# an imported run's file as recorded once (its bytes and sha256), before any of its segments reads it
RUN_RECORD = f"{SEGMENTS}/run-file.json"
RANKINGS = f"{VARIANT}/rankings.parquet"
OUTCOMES = f"{VARIANT}/outcomes.parquet"
METRICS = f"{VARIANT}/metrics.json"
DEEP = f"{VARIANT}/deep.parquet"
# a turn variant's whole turn lists (retrieval/turns.py; empty for a session variant)
TURNS = f"{VARIANT}/turns.parquet"
OFFICIAL = f"{VARIANT}/official.json"
RUN_TREC = f"{VARIANT}/run.trec"
TURN_RUN_TREC = f"{VARIANT}/run.turns.trec"  # a turn variant's turn lists as a TREC run, scored with TURN_QRELS
RETRIEVAL_LOG = f"{VARIANT}/retrievallog.jsonl"

# `memobench score`'s config overlay for one imported run (not a result)
SCORE_OVERLAY = f"{RESULTS}/.score/{{dataset}}/{{variant}}.yaml"
# its paired comparison against the variant it was compared with (stats.json holds the pipeline's own)
SCORE_PAIRED = f"{RESULTS}/.score/{{dataset}}/{{variant}}.paired.{{against}}.json"
# held by one `memobench score` (or the Python API's score) at a time in a working directory
SCORE_LOCK = f"{RESULTS}/.score/run.lock"

# the whole run
REPORT_MD = f"{RESULTS}/report.md"
REPORT_HTML = f"{RESULTS}/report.html"
HITK_PNG = f"{RESULTS}/hitk.png"
FOREST_PNG = f"{RESULTS}/forest.png"
HEATMAP_PNG = f"{RESULTS}/heatmap.png"
# recall within token budgets per dataset, the Pareto front marked (reporting/frontier.py)
FRONTIER_PNG = f"{RESULTS}/frontier.png"
# the memory services' latency (from their timings: these differ from run to run)
LATENCY_MD = f"{RESULTS}/latency.md"
LATENCY_HTML = f"{RESULTS}/latency.html"
LATENCY_JSON = f"{RESULTS}/latency.json"
LATENCY_PNG = f"{RESULTS}/latency.png"
MANIFEST = f"{RESULTS}/manifest.json"
DATASETS = f"{RESULTS}/datasets.json"
# the retrieve jobs this invocation runs (memobench.retrieval.sharing.write_plan)
RETRIEVE_PLAN = f"{RESULTS}/cache/retrieve_plan.json"
# a job's log is LOGS/<rule>/<its wildcards>.log, its benchmark BENCHMARKS/<rule>/<its wildcards>.tsv
LOGS = f"{RESULTS}/logs"
BENCHMARKS = f"{LOGS}/benchmarks"
# a retrieve job's timed requests (memory services): measurements, not results, so with the logs
TIMINGS_DATASET = f"{LOGS}/timings/{{dataset}}"
TIMINGS = f"{TIMINGS_DATASET}/{{variant}}/{{segment}}.parquet"

_WILDCARD = re.compile(r"\{(\w+)\}")


def path(pattern: str, root=None, **wildcards) -> str:
    """``pattern`` with the given wildcards filled in (the others left as
    they are, so a rule can still match them), under ``root`` instead of
    :data:`RESULTS` when one is given. ``path(SEGMENT_TABLE, suffix=".parquet")``
    is the retrieve rule's output pattern; ``path(METRICS, dataset="s",
    variant="v0.8.0")`` is ``results/s/v0.8.0/metrics.json``."""
    out = _WILDCARD.sub(lambda m: str(wildcards[m[1]]) if m[1] in wildcards else m[0], pattern)
    if root is not None:
        out = str(PurePosixPath(Path(root).as_posix()) / PurePosixPath(out).relative_to(RESULTS))
    return out


def root_of(made: str | Path, pattern: str) -> Path:
    """The results folder a path made from ``pattern`` lies under (``made``
    may be relative or absolute): ``root_of("results/s/v/segments/seg1.parquet",
    path(SEGMENT_TABLE, suffix=".parquet"))`` is ``results``."""
    depth = len(PurePosixPath(pattern).parts) - len(PurePosixPath(RESULTS).parts)
    return Path(made).parents[depth - 1]


def segment_name(i: int) -> str:
    """Segment ``i``'s name (1-based): ``segment_name(2) == "seg2"``."""
    return f"{_SEGMENT_PREFIX}{i}"


def segment_index(name: str) -> int:
    """The number of the segment named ``name`` (:func:`segment_name`'s inverse)."""
    if not re.fullmatch(SEGMENT_PATTERN, name):
        raise ValueError(f"not a segment name: {name!r}")
    return int(name[len(_SEGMENT_PREFIX):])


def table_paths(folder) -> dict[str, Path]:
    """The normalized tables' files in ``folder`` (a dataset's normalized
    folder, or a test's), by table name in :data:`TABLE_NAMES` order: the
    names of :data:`NORMALIZED_TABLE`."""
    name = PurePosixPath(NORMALIZED_TABLE).name
    return {t: Path(folder) / path(name, table=t) for t in TABLE_NAMES}


def dataset_prefixes(dataset: str) -> tuple[str, ...]:
    """What every path of one dataset's files starts with: its results (``results/{dataset}/``)
    and its timings (kept with the logs)."""
    return tuple(path(p, dataset=dataset) + "/" for p in (DATASET, TIMINGS_DATASET))
