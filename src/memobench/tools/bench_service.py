"""Benchmark of driving a memory service, not a test.

    python -m memobench.tools.bench_service --locomo locomo10.json --retriever NAME [--work bench_work]

normalizes LoCoMo, starts the reference server (``memobench serve``, its own
process on 127.0.0.1, over the HTTP API, MCP stdio and MCP streamable HTTP),
and ranks every question through a system variant
(the retrieve stage's own code: ingestion, searches, checks, timings) and
through the in-process reference variant; it checks that the two give the
same lists and scores, and prints, from the system variant's timings, the
warm searches' time as the client measured it, as the server says it spent
it (HTTP's Server-Timing header, MCP's result ``_meta``), and the
difference: what the framework, the connection, the protocol and JSON add
to each search (p50 and p95, milliseconds), with ingestion per session.
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


PROTOCOLS = ("http", "mcp-stdio", "mcp-http")


def _drive(protocol: str, retriever: str, norm: Path, results: Path):
    """The system variant's (deep list, timings, wall seconds) over ``protocol``, against the reference server."""
    command = [sys.executable, "-m", "memobench.cli", "serve", "--retriever", retriever, "--documents", "all"]
    if protocol == "mcp-stdio":  # the job starts the server itself
        return _segment("svc-" + protocol, norm, results, "locomo10",
                        {"system": {"mcp": {"command": command + ["--mcp", "stdio"]}, "warm_repeats": 1}})
    extra = ["--mcp", "http"] if protocol == "mcp-http" else []
    server = subprocess.Popen(command + extra + ["--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().split(" on ")[1].strip()
        system = {"mcp": {"url": url}} if protocol == "mcp-http" else {"url": url}
        return _segment("svc-" + protocol, norm, results, "locomo10", {"system": {**system, "warm_repeats": 1}})
    finally:
        server.kill()
        server.wait()


def sdk_floor(retriever: str, n: int = 1000) -> tuple[float, float]:
    """p50 and p95 (ms) of the MCP SDK's own round trip over stdio, without memobench's client: ``count``
    (a trivial tool) called ``n`` times from the SDK's async client, less the server's reported time."""
    import asyncio

    from mcp import Client, StdioServerParameters

    from ..services.transport.client import server_seconds
    from ..services.transport.mcp import META_TIMING

    async def run() -> list[float]:
        params = StdioServerParameters(command=sys.executable, args=["-m", "memobench.cli", "serve", "--mcp", "stdio",
                                                                     "--retriever", retriever])
        out = []
        async with Client(params, cache=None) as client:
            await client.call_tool("reset", {"namespace": "floor"})
            for _ in range(n):
                started = time.monotonic()
                result = await client.call_tool("count", {"namespace": "floor"})
                out.append(time.monotonic() - started - server_seconds((result.meta or {}).get(META_TIMING)))
        return out

    ms = np.array(asyncio.run(run())) * 1000
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 95))


def main(argv=None) -> int:
    from ..catalog.registry import names
    from ..core import layout
    from ..datasets.normalize import normalize_locomo

    p = argparse.ArgumentParser(prog="python -m memobench.tools.bench_service", description=__doc__.split("\n\n")[0])
    p.add_argument("--locomo", required=True, help="the real locomo10.json")
    p.add_argument("--retriever", required=True, choices=names("reference"),
                   help="the reference retriever the server serves")
    p.add_argument("--protocols", nargs="+", choices=PROTOCOLS, default=list(PROTOCOLS),
                   help="how the service is reached (default: all three)")
    p.add_argument("--work", help="a folder for the normalized tables and results (default: a temporary one)")
    a = p.parse_args(argv)
    work = Path(a.work or tempfile.mkdtemp(prefix="bench_service_"))
    norm = work / "norm"
    if not layout.table_paths(norm)["events"].exists():
        normalize_locomo(a.locomo, norm, log=lambda m: None)
    results = work / layout.RESULTS
    ref, _, ref_wall = _segment(a.retriever, norm, results, "locomo10", None)

    def pq_(x, q):
        return f"{np.percentile(x, q):.3f}"

    print(f"LoCoMo through the reference server ({a.retriever}) on 127.0.0.1; the in-process variant's job "
          f"{ref_wall:.1f} s")
    print("| protocol | warm searches | lists equal | client p50 | p95 | server p50 | p95 | outside the server p50 | "
          "p95 | ingest p50 (ms a session) | job (s) |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    all_same = True
    for protocol in a.protocols:
        svc, rows, wall = _drive(protocol, a.retriever, norm, results)
        warm = [r for r in rows if r["operation"] == "search" and r["phase"] == "warm" and r["ok"]]
        total = np.array([r["seconds"] for r in warm]) * 1000
        own = np.array([r["server_seconds"] for r in warm]) * 1000
        ingest = np.array([r["seconds"] for r in rows if r["operation"] == "ingest"]) * 1000
        same = svc.equals(ref)
        all_same &= same
        print(f"| {protocol} | {len(warm)} | {same} | {pq_(total, 50)} | {pq_(total, 95)} | {pq_(own, 50)} | "
              f"{pq_(own, 95)} | {pq_(total - own, 50)} | {pq_(total - own, 95)} | {pq_(ingest, 50)} | {wall:.1f} |")
    print("(milliseconds per warm search; the server's time is what it reports: HTTP's Server-Timing header, "
          "MCP's result _meta; a service job searches twice: warm_repeats 1)")
    if "mcp-stdio" in a.protocols:
        p50, p95 = sdk_floor(a.retriever)
        print(f"the MCP SDK alone over stdio (its async client calling a trivial tool, no memobench client): outside "
              f"the server p50 {p50:.3f} ms, p95 {p95:.3f} ms")
    return 0 if all_same else 1


if __name__ == "__main__":
    sys.exit(main())
