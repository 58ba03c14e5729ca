"""Published numbers (benchmark-guide.md, PROTOCOL.md 4, HARNESSES.md 8), as
printed: percentages with one decimal, MRR with the printed digits."""

# (dataset key, variant) -> {metric: printed value}
PUBLISHED = {
    ("longmemeval_s", "v0.8.0"): {"hit@1": "78.2", "hit@5": "92.4", "hit@10": "97.4", "mrr": "0.8469"},
    ("longmemeval_s", "v0.8.0-index"): {"hit@1": "78.2", "hit@5": "92.4", "hit@10": "97.4", "mrr": "0.8469"},
    ("longmemeval_s", "v0.5.0"): {"hit@1": "74.8", "hit@5": "89.8", "hit@10": "95.2", "mrr": "0.8116"},
    ("longmemeval_m", "v0.8.0"): {"hit@1": "54.6", "hit@5": "78.6", "hit@10": "83.8", "mrr": "0.6452"},
    ("longmemeval_m", "v0.8.0-index"): {"hit@1": "54.6", "hit@5": "78.6", "mrr": "0.6457"},
    ("locomo10", "v0.8.0"): {"hit@1": "60.2", "hit@5": "87.2", "hit@10": "93.5", "mrr": "0.7183"},
    ("locomo10", "v0.5.0"): {"hit@1": "53.2", "hit@5": "80.4", "hit@10": "91.1", "mrr": "0.651"},
    ("locomo10", "v0.4.0"): {"hit@1": "43.7", "hit@5": "73.7", "hit@10": "87.3", "mrr": "0.568"},
}

# The published exp6-m segment rows (HARNESSES.md 6.13).
PUBLISHED_M_SEGMENTS = {
    1: {"hit@1": "52.0", "hit@5": "80.0", "hit@10": "87.0", "mrr": "0.6261"},
    2: {"hit@1": "61.0", "hit@5": "87.0", "hit@10": "91.0", "mrr": "0.7223"},
    3: {"hit@1": "73.0", "hit@5": "90.0", "hit@10": "93.0", "mrr": "0.8013"},
    4: {"hit@1": "55.0", "hit@5": "77.0", "hit@10": "83.0", "mrr": "0.6489"},
    5: {"hit@1": "32.0", "hit@5": "59.0", "hit@10": "65.0", "mrr": "0.4299"},
}


def published(dataset: str, variant: str) -> dict:
    return PUBLISHED.get((dataset, variant), {})
