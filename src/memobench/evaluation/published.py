"""Published numbers (docs/harnesses.md#published-numbers), as
printed: percentages with one decimal, MRR with the printed digits."""

import json
from pathlib import Path

REFERENCE = "v0.8.0"  # the release every variant is compared against (stats.json, memobench score)

# (dataset key, variant) -> {metric: printed value}
PUBLISHED = {
    ("longmemeval_s", "v0.8.0"): {"hit@1": "78.2", "hit@5": "92.4", "hit@10": "97.4", "mrr": "0.8469"},
    ("longmemeval_s", "v0.8.0-index"): {"hit@1": "78.2", "hit@5": "92.4", "hit@10": "97.4", "mrr": "0.8469"},
    ("longmemeval_s", "v0.5.0"): {"hit@1": "74.8", "hit@5": "89.8", "hit@10": "95.2", "mrr": "0.8116"},
    ("longmemeval_s", "v0.4.0"): {"hit@1": "54.6", "hit@5": "75.0", "hit@10": "82.8", "mrr": "0.636"},
    ("longmemeval_m", "v0.8.0"): {"hit@1": "54.6", "hit@5": "78.6", "hit@10": "83.8", "mrr": "0.6452"},
    ("longmemeval_m", "v0.8.0-index"): {"hit@1": "54.6", "hit@5": "78.6", "mrr": "0.6457"},
    ("longmemeval_s", "exp-V0"): {"hit@1": "36.2", "hit@5": "68.4", "hit@10": "80.0", "mrr": "0.498"},
    ("longmemeval_s", "exp-V1"): {"hit@1": "5.2", "hit@5": "22.8", "hit@10": "40.8", "mrr": "0.135"},
    ("longmemeval_s", "exp-V2"): {"hit@1": "46.6", "hit@5": "74.8", "hit@10": "84.8", "mrr": "0.586"},
    ("longmemeval_s", "exp-V3"): {"hit@1": "50.8", "hit@5": "72.4", "hit@10": "81.0", "mrr": "0.600"},
    ("longmemeval_s", "exp-V4"): {"hit@1": "39.4", "hit@5": "67.0", "hit@10": "78.6", "mrr": "0.509"},
    ("longmemeval_s", "exp2-V6"): {"hit@1": "54.6", "hit@5": "75.0", "hit@10": "82.8", "mrr": "0.636"},
    ("longmemeval_s", "exp3-V6"): {"hit@1": "74.8", "hit@5": "89.8", "hit@10": "95.2", "mrr": "0.812"},
    ("longmemeval_s", "exp3-T1"): {"hit@1": "74.8", "hit@5": "89.8", "hit@10": "95.2", "mrr": "0.812"},
    ("longmemeval_s", "exp3-T2h"): {"hit@1": "72.4", "hit@5": "87.0", "hit@10": "92.0", "mrr": "0.785"},
    ("longmemeval_s", "exp3-T2s"): {"hit@1": "74.8", "hit@5": "89.8", "hit@10": "95.2", "mrr": "0.812"},
    ("longmemeval_s", "exp3-T2m"): {"hit@1": "74.2", "hit@5": "89.4", "hit@10": "94.6", "mrr": "0.805"},
    ("longmemeval_s", "exp4-A0-base"): {"hit@1": "74.8", "hit@5": "89.8", "hit@10": "95.2", "mrr": "0.8116"},
    ("longmemeval_s", "exp4-A2+15"): {"hit@1": "75.6"},
    ("longmemeval_s", "exp5-base"): {"hit@1": "74.8"},
    ("longmemeval_s", "exp5-S1"): {"hit@1": "73.8"},
    ("longmemeval_s", "exp5-S2"): {"hit@1": "76.0", "mrr": "0.8187"},
    ("longmemeval_cn", "cn-A"): {"hit@1": "33.6"},
    ("longmemeval_cn", "cn-A2"): {"hit@1": "44.4"},
    ("longmemeval_cn", "cn-B"): {"hit@1": "0.0"},
    # zh.cjs prints whole percentages: 0/11 and 10/11.
    ("zh", "zh-A"): {"hit@1": "0"},
    ("zh", "zh-B"): {"hit@1": "91"},
    ("locomo10", "v0.8.0"): {"hit@1": "60.2", "hit@5": "87.2", "hit@10": "93.5", "mrr": "0.7183"},
    ("locomo10", "v0.5.0"): {"hit@1": "53.2", "hit@5": "80.4", "hit@10": "91.1", "mrr": "0.651"},
    ("locomo10", "v0.4.0"): {"hit@1": "43.7", "hit@5": "73.7", "hit@10": "87.3", "mrr": "0.568"},
}

# The published exp6-m segment rows (docs/harnesses.md#exp6cjs-and-exp6-mcjs).
PUBLISHED_M_SEGMENTS = {
    1: {"hit@1": "52.0", "hit@5": "80.0", "hit@10": "87.0", "mrr": "0.6261"},
    2: {"hit@1": "61.0", "hit@5": "87.0", "hit@10": "91.0", "mrr": "0.7223"},
    3: {"hit@1": "73.0", "hit@5": "90.0", "hit@10": "93.0", "mrr": "0.8013"},
    4: {"hit@1": "55.0", "hit@5": "77.0", "hit@10": "83.0", "mrr": "0.6489"},
    5: {"hit@1": "32.0", "hit@5": "59.0", "hit@10": "65.0", "mrr": "0.4299"},
}


def published(dataset: str, variant: str) -> dict:
    return PUBLISHED.get((dataset, variant), {})


# The guide's variant table (LongMemEval-S), in its order: (label, variant, verdict).
GUIDE_TABLE = [
    ("V0 matched-term count (0.3.x)", "exp-V0", "replaced"),
    ("V1 tokens + bigrams, equal weight", "exp-V1", "rejected (the published number comes from a loop bug)"),
    ("V2 token-length weights", "exp-V2", "kept as component"),
    ("V3 tokens + pairs x2", "exp-V3", "superseded by V6"),
    ("V4 wider per-term page (2x API)", "exp-V4", "rejected: costs 2x calls, gains little"),
    ("V6 token + pair length weights (0.4.x)", "exp2-V6", "shipped in 0.4.0"),
    ("V6 + content-word-first window (0.5.0)", "exp3-V6", "shipped in 0.5.0"),
    ("T1 date-word expansion", "exp3-T1", "no-op"),
    ("T2h hard since filter", "exp3-T2h", "rejected: wrong windows silently drop gold"),
    ("T2s soft time boost", "exp3-T2s", "neutral (the boost is never applied)"),
    ("T2m dual-path merge", "exp3-T2m", "slightly negative, rejected"),
    ("A2 +15 stop words (exp4)", "exp4-A2+15", "not shipped"),
    ("C-idfProxy (exp4)", "exp4-C-idfProxy", "not shipped: failed the M direction check"),
    ("S1 stems, no dedup (exp5)", "exp5-S1", "worse"),
    ("S2 deduped stems (exp5)", "exp5-S2", "not shipped: gain did not survive the M check"),
    ("0.8.0 df-proxy IDF (shipped)", "v0.8.0", "shipped"),
]


# Official-metric figures published by others, each with the protocol it was
# printed under. ``convention``: the official.json convention it was averaged
# by (official.CONVENTIONS); ``match``: the recipe fields a run needs to be
# the same system; ``questions``: the count it was averaged over; ``grain``: what
# the system ranked (sessions unless said); ``file``: the data file (DATA_FILES).
# A run is comparable to a figure only when all five agree (reporting/conventions.py).
# The data files published figures were computed on. A run's raw file (its bytes and
# sha256 in results/manifest.json) is one of these when its sha256 matches, or, where
# no sha256 is on record, its byte count (the release's published size). The same
# retriever scores differently on another release of a dataset (LongMemEval's authors
# later released cleaned S and M files), so a figure is comparable only on its file.
DATA_FILES = {
    "longmemeval_s-original": {"label": "LongMemEval-S, original release (longmemeval_s)", "bytes": 278025796,
                               "sha256": None},
    "longmemeval_m-original": {"label": "LongMemEval-M, original release (longmemeval_m)", "bytes": 2745274681,
                               "sha256": None},
    "locomo10": {"label": "LoCoMo10 (snap-research/LoCoMo locomo10.json)", "bytes": 2805274,
                 "sha256": "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4"},
}


def identify_file(n_bytes: int | None, sha256: str | None) -> dict:
    """Which known data file a raw file is: ``{"known": key or None, "label",
    "matched_by": "sha256" | "bytes" | None}``: by sha256 where both are
    known, else by byte count (a file whose sha256 differs from the release's
    is another file, whatever its size)."""
    for key, f in DATA_FILES.items():
        if f["sha256"] is not None and sha256 is not None:
            if sha256 == f["sha256"]:
                return {"known": key, "label": f["label"], "matched_by": "sha256"}
        elif n_bytes == f["bytes"]:
            return {"known": key, "label": f["label"], "matched_by": "bytes"}
    return {"known": None, "label": "not a published release", "matched_by": None}


def data_file(verified_path) -> dict:
    """A dataset's raw file as the verify stage checked it (``verified.json``),
    named for official.json and ``memobench score``: its name, bytes and sha256
    (null unless checked) and which published release it is
    (:func:`identify_file`); a dataset with no raw file (the built-in zh set):
    ``{"file": None}``."""
    if verified_path is None:
        return {"file": None, "label": "none (the dataset is built in)"}
    v = json.loads(Path(verified_path).read_text(encoding="utf-8"))
    known = identify_file(v.get("bytes"), v.get("sha256"))
    return {"file": Path(v["file"]).name, "bytes": v["bytes"], "sha256": v.get("sha256"),
            "release": known["known"], "label": known["label"], "matched_by": known["matched_by"]}


PUBLISHED_OFFICIAL = [
    {"source": "LongMemEval paper, Table 9", "system": "flat BM25, session level", "dataset": "longmemeval_m",
     "file": "longmemeval_m-original", "convention": "print_retrieval_metrics", "questions": 470,
     "match": {"backend": "bm25-official", "documents": "user"},
     "protocol": "LongMemEval official rules, averaged by print_retrieval_metrics.py (abstentions left out, "
                 "no-user-target questions kept); user-turn session documents",
     "values": {"recall_all@5": 0.634, "ndcg_any@5": 0.516, "recall_all@10": 0.710, "ndcg_any@10": 0.540}},
]

# Memo's own published figures are hit@k under the Memo harness's protocol
# (PUBLISHED above): the first gold rank in the top 10 over the questions the
# harness evaluates, which is none of the official conventions.
HARNESS_PROTOCOL = ("Memo harness: hit@k, a gold session (answer_session_ids) in the top k, over the questions "
                    "the harness evaluates")
