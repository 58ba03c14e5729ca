"""One retrieve job of a variant, run in-process on a normalized dataset: how the
memory-service tests compare a service's lists with the in-process retriever's."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from memobench.catalog.variants import resolve
from memobench.core import layout
from memobench.retrieval.sharing import write_segment


def rank_one_segment(norm: Path, root: Path, name: str, entry: dict | None = None, log=None):
    """One segment of ``name`` (a variant, a system one when ``entry`` is given) written under ``root``:
    (rankings, outcomes, deep) tables, and the job's log lines."""
    lines = []
    v = resolve(name, "s", {name: entry} if entry else {})
    out = {kind: Path(layout.path(layout.SEGMENT_TABLE, root=root / "results", dataset="lme", variant=name,
                                  segment="seg1", suffix=suffix)) for kind, suffix in layout.SEGMENT_SUFFIXES.items()}
    for p in out.values():
        p.parent.mkdir(parents=True, exist_ok=True)
    t = layout.table_paths(norm)
    timings = Path(layout.path(layout.TIMINGS, root=root / "results", dataset="lme", variant=name, segment="seg1"))
    write_segment(v, t["questions"], t["haystacks"], t["events"], 1, 1, out["rankings"], out["outcomes"],
                  deep_out=out["deep"], log=log or lines.append, timings_out=timings, dataset="lme")
    return tuple(pq.read_table(out[k]) for k in ("rankings", "outcomes", "deep")), lines
