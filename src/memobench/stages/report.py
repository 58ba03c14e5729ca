"""The report stage (its rule: ``report``)."""

from __future__ import annotations

from .adapter import Job, stage


@stage("report", inputs=["metrics", "extras", "manifest", "official", "stats", "exports"],
       optional=["receipts"], outputs=["md", "html", "plot", "forest", "heatmap", "frontier"], params=["needs", "others", "latency"])
def report(job: Job) -> None:
    from ..datasets.missing import find_missing, receipts_by_dataset
    from ..reporting.report import build_report

    i, o = job.input, job.output
    missing = find_missing(receipts_by_dataset(i.get("receipts", [])), job.params.needs)
    build_report(i.metrics, i.extras, o.md, o.html, o.plot, official_paths=i.official, stats_paths=i.stats,
                 forest_out=o.forest, heatmap_out=o.heatmap, frontier_out=o.frontier, manifest_path=i.manifest, log=job.log,
                 missing=missing, workers=job.threads, others=job.params.others, latency_made=job.params.latency)
