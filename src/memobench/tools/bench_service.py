"""Benchmark of driving a memory service, not a test.

    python -m memobench.tools.bench_service --locomo locomo10.json --retriever NAME [--work bench_work]

normalizes LoCoMo, starts the reference server (``memobench serve``, its own
process on 127.0.0.1), and ranks every question through a system variant
(the retrieve stage's own code: ingestion, searches, checks, timings) and
through the in-process reference variant; it checks that the two give the
same lists and scores, and prints, from the system variant's timings, the
warm searches' time as the client measured it, as the server says it spent
it (its Server-Timing header), and the difference: what the framework, the
connection, HTTP and JSON add to each search (p50 and p95, milliseconds),
with ingestion per session.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _segment(variant, norm: Path, root: Path, dataset: str, entry: dict | None):
    import pyarrow.parquet as pq

    from ..catalog.variants import resolve
    from ..core import layout
    from ..retrieval.sharing import write_segment

    v = resolve(variant, "locomo", {variant: entry} if entry else {})
    out = {k: Path(layout.path(layout.SEGMENT_TABLE, root=root, dataset=dataset, variant=variant, segment="seg1",
                               suffix=suffix)) for k, suffix in layout.SEGMENT_SUFFIXES.items()}
    timings = Path(layout.path(layout.TIMINGS, root=root, dataset=dataset, variant=variant, segment="seg1"))
    t = layout.table_paths(norm)
    started = time.monotonic()
    write_segment(v, t["questions"], t["haystacks"], t["events"], 1, 1, out["rankings"], out["outcomes"],
                  deep_out=out["deep"], log=lambda m: None, timings_out=timings, dataset=dataset)
    wall = time.monotonic() - started
    # an in-process variant's job writes no timings here (the retrieve stage writes its empty table)
    return pq.read_table(out["deep"]), pq.read_table(timings).to_pylist() if timings.exists() else [], wall


def main(argv=None) -> int:
    from ..catalog.registry import names
    from ..core import layout
    from ..datasets.normalize import normalize_locomo

    p = argparse.ArgumentParser(prog="python -m memobench.tools.bench_service", description=__doc__.split("\n\n")[0])
    p.add_argument("--locomo", required=True, help="the real locomo10.json")
    p.add_argument("--retriever", required=True, choices=names("reference"),
                   help="the reference retriever the server serves")
    p.add_argument("--work", help="a folder for the normalized tables and results (default: a temporary one)")
    a = p.parse_args(argv)
    work = Path(a.work or tempfile.mkdtemp(prefix="bench_service_"))
    norm = work / "norm"
    if not layout.table_paths(norm)["events"].exists():
        normalize_locomo(a.locomo, norm, log=lambda m: None)
    server = subprocess.Popen([sys.executable, "-m", "memobench.cli", "serve", "--retriever", a.retriever,
                               "--documents", "all", "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().split(" on ")[1].strip()
        results = work / layout.RESULTS
        ref, _, ref_wall = _segment(a.retriever, norm, results, "locomo10", None)
        svc, rows, svc_wall = _segment("svc", norm, results, "locomo10",
                                       {"system": {"url": url, "warm_repeats": 1}})
    finally:
        server.kill()
        server.wait()
    warm = [r for r in rows if r["operation"] == "search" and r["phase"] == "warm" and r["ok"]]
    total = np.array([r["seconds"] for r in warm]) * 1000
    own = np.array([r["server_seconds"] for r in warm]) * 1000
    ingest = np.array([r["seconds"] for r in rows if r["operation"] == "ingest"]) * 1000
    same = svc.equals(ref)

    def pq_(x, q):
        return f"{np.percentile(x, q):.3f}"

    print(f"LoCoMo through the reference server ({a.retriever}, HTTP on 127.0.0.1): {len(warm)} warm searches, "
          f"{len(ingest)} sessions ingested; lists and scores equal to the in-process variant: {same}")
    print("| per warm search (ms) | p50 | p95 |")
    print("|---|---:|---:|")
    print(f"| client (the whole request) | {pq_(total, 50)} | {pq_(total, 95)} |")
    print(f"| server (its Server-Timing) | {pq_(own, 50)} | {pq_(own, 95)} |")
    print(f"| outside the server (client - server) | {pq_(total - own, 50)} | {pq_(total - own, 95)} |")
    print(f"ingestion: p50 {pq_(ingest, 50)} ms a session; the service variant's job {svc_wall:.1f} s (searches "
          f"twice: warm_repeats 1), the in-process variant's {ref_wall:.1f} s")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
