"""What the timed variants' timings say (rule ``latency``; its files:
reporting/latency.py): per dataset and timed variant (memory services,
in-process retrievers: retrieval/timings.py), search latency at
p50, p95 and p99 with bootstrap 95% intervals, cold (a namespace's first
search after its ingestion) apart from warm, ingestion per request, and the
time a warm search spent outside the server (where the server says what it
spent: a ``Server-Timing`` header), beside the variant's hit@5 from
metrics.json; and a service's own costs: its servers' starts, its
namespaces' ingestion in total and per session and time to searchable
(system.ready), a stdio server's peak memory, and the load curve
(system.load: throughput and latency per level of concurrency).

Timings are measurements of one run (retrieval/timings.py): these files
differ from run to run, and no other result reads them. The intervals are
percentile bootstraps of the requests (resampled with replacement, a stream
seeded by dataset, variant and phase), so the same timings give the same
bytes."""

from __future__ import annotations


import numpy as np

from .resampling import seeded

QUANTILES = (50, 95, 99)
BOOTSTRAP = 2000
RECALL = "hit@5"  # the plot's and the table's recall: the harness hit@5


def _quantiles(seconds: np.ndarray, rng: np.random.Generator) -> dict:
    """p50/p95/p99 (ms) of ``seconds`` and their percentile-bootstrap 95% intervals."""
    if not len(seconds):
        return {}
    ms = seconds * 1000.0
    draws = rng.choice(ms, size=(BOOTSTRAP, len(ms)), replace=True)
    out = {}
    for q in QUANTILES:
        boots = np.percentile(draws, q, axis=1)
        out[f"p{q}"] = {"ms": float(np.percentile(ms, q)), "low": float(np.percentile(boots, 2.5)),
                        "high": float(np.percentile(boots, 97.5))}
    return out


def summarize(dataset: str, variant: str, rows: list[dict], metrics: dict) -> dict:
    """One variant's latency summary from its timings rows (every segment's) and metrics.json."""
    searches = [r for r in rows if r["operation"] == "search"]
    ok = [r for r in searches if r["ok"]]
    out = {"dataset": dataset, "variant": variant, RECALL: metrics.get(f"{RECALL}_rate"),
           "searches": len(searches), "failed": len(searches) - len(ok),
           # answered after more than one attempt: timed from the first to the answer, backoff included
           "retried": sum(1 for r in ok if (r.get("attempts") or 1) > 1)}
    for phase in ("cold", "warm"):
        secs = np.array([r["seconds"] for r in ok if r["phase"] == phase], dtype=np.float64)
        out[phase] = {"n": int(len(secs)), **_quantiles(secs, seeded("latency", dataset, variant, phase))}
    # the time outside the server (the client, the connection, HTTP and JSON both ways): warm searches
    # whose server said what it spent (Server-Timing)
    outside = np.array([r["seconds"] - r["server_seconds"] for r in ok
                        if r["phase"] == "warm" and r.get("server_seconds") is not None], dtype=np.float64)
    out["outside_server"] = {"n": int(len(outside)), **_quantiles(outside, seeded("latency", dataset, variant,
                                                                                  "outside"))}
    ingests = np.array([r["seconds"] for r in rows if r["operation"] == "ingest" and r["ok"]], dtype=np.float64)
    # a namespace's ingestion as a whole (its requests first to last, wall time): in total and per session
    whole = [r for r in rows if r["operation"] == "ingestion" and r["ok"] and r["seconds"] is not None]
    wall, sent = sum(r["seconds"] for r in whole), sum(r.get("value") or 0 for r in whole)
    # the sessions ingested: the namespaces' own count where they say (a batch ingest sends a haystack in one
    # request, a session sent in parts takes several), else one request per session (timings without them)
    sessions = int(sent) if whole else int(len(ingests))
    out["ingest"] = {"sessions": sessions,
                     "seconds": float(ingests.sum()) if len(ingests) else 0.0,
                     "p50_ms": float(np.percentile(ingests * 1000.0, 50)) if len(ingests) else None,
                     "sessions_per_s": float(sessions / ingests.sum()) if len(ingests) and ingests.sum() else None,
                     "namespaces": len(whole), "wall_s": float(wall) if whole else None,
                     "per_session_ms": float(wall * 1000.0 / sent) if sent else None}
    out["start"] = _spread([r for r in rows if r["operation"] == "start"])
    ready = [r for r in rows if r["operation"] == "ready"]
    out["ready"] = {**_spread(ready), "until": next((r["phase"] for r in ready), None),
                    "timed_out": sum(1 for r in ready if not r["ok"])}
    peaks = [r["value"] for r in rows if r["operation"] == "memory" and r.get("value") is not None]
    out["memory"] = {"servers": len(peaks), "peak_mb": max(peaks) / 2**20 if peaks else None}
    out["load"] = _load(dataset, variant, rows)
    return out


def _spread(rows: list[dict]) -> dict:
    """How many of a kind of wait (a server's start, a namespace's time to searchable) and their p50
    and largest, in ms (no interval: there are as few as namespaces)."""
    ms = np.array([r["seconds"] * 1000.0 for r in rows if r["ok"] and r["seconds"] is not None], dtype=np.float64)
    return {"n": int(len(ms)), "p50_ms": float(np.percentile(ms, 50)) if len(ms) else None,
            "max_ms": float(ms.max()) if len(ms) else None}


def _load(dataset: str, variant: str, rows: list[dict]) -> dict:
    """{concurrency: its searches, failed, wall seconds, throughput (answered searches/s), p50 and p95
    with intervals} of the load curve (system.load: services/job/load.py); {} without one."""
    out = {}
    # each segment's job measures its own curve: a level's windows (one a segment) are summed, as its searches are
    windows: dict[str, float] = {}
    for w in rows:
        if w["operation"] == "load_window":
            windows[w["phase"]] = windows.get(w["phase"], 0.0) + float(w["seconds"] or 0.0)
    for level in sorted(windows, key=int):
        wall = windows[level]
        done = [r for r in rows if r["operation"] == "load" and r["phase"] == level]
        ok = np.array([r["seconds"] for r in done if r["ok"]], dtype=np.float64)
        q = _quantiles(ok, seeded("latency", dataset, variant, f"load-{level}"))
        out[level] = {"concurrency": int(level), "searches": len(done), "failed": len(done) - len(ok),
                      "seconds": wall, "searches_per_s": float(len(ok) / wall) if wall else None,
                      "p50": q.get("p50"), "p95": q.get("p95")}
    return out
