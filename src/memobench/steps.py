"""The pipeline's stages as plain functions, plus the wrapper the workflow
scripts use: progress goes to the rule's log, bad input ends the job with one
line on stderr (and in the log), never a traceback."""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

import pyarrow.parquet as pq

from .download import DownloadError, fetch, verify
from .errors import ConfigError, DataError
from .tables import write_json

USER_ERRORS = (DataError, DownloadError, ConfigError)


def run_step(log_path, func, *args, **kwargs):
    """Run one stage with its log; exit 1 with one line on a user-facing error."""
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w", encoding="utf-8") as logf:

        def log(msg: str) -> None:
            logf.write(msg + "\n")
            logf.flush()

        try:
            return func(*args, log=log, **kwargs)
        except USER_ERRORS as e:
            log(f"ERROR: {e}")
            print(f"memobench: {e}", file=sys.stderr)
            sys.exit(1)
        except Exception as e:  # a bug: keep the traceback in the log
            logf.write(traceback.format_exc())
            logf.flush()
            print(f"memobench: internal error {type(e).__name__}: {e} (traceback in {log_path})", file=sys.stderr)
            sys.exit(1)


def download(dest, urls, expected_bytes, sha256, receipt, log=print):
    """Fetch ``dest`` unless it is already there (the verify stage judges a file
    that is there: a wrong one is reported, never replaced or deleted)."""
    dest = Path(dest)
    if dest.exists():
        log(f"{dest}: present ({dest.stat().st_size} bytes), not downloaded")
    else:
        fetch(urls, dest, expected_bytes, sha256=sha256, log=log)
    write_json(receipt, {"file": str(dest.resolve())})


def verify_raw(raw, out, name, expected_bytes, sha256, log=print):
    log(f"verifying {raw}: expecting {expected_bytes} bytes" + (f" and sha256 {sha256}" if sha256 else ""))
    digest = verify(raw, expected_bytes, sha256)
    size = Path(raw).stat().st_size
    log(f"ok: {size} bytes, sha256 {digest}")
    write_json(out, {"dataset": name, "file": str(raw), "bytes": size, "sha256": digest,
                     "sha256_checked": bool(sha256)})


def manifest(inputs, out, log=print):
    entries = [json.loads(Path(p).read_text(encoding="utf-8")) for p in inputs]
    write_json(out, {"files": entries})
    log(f"manifest: {len(entries)} files")


def normalize(fmt, raw, out_dir, summary, base_dir=None, lenient=False, log=print):
    from . import normalize as nz

    if fmt == "longmemeval":
        stats = nz.normalize_longmemeval(raw, out_dir, log=log, lenient=lenient)
    elif fmt == "locomo":
        stats = nz.normalize_locomo(raw, out_dir, log=log)
    elif fmt == "longmemeval_cn":
        stats = nz.normalize_cn(raw, base_dir, out_dir, log=log)
    elif fmt == "embedded":
        stats = nz.normalize_zh(out_dir, log=log)
    else:
        raise ConfigError(f"no normalizer for format {fmt!r}")
    log(json.dumps(stats))
    write_json(summary, {"format": fmt, "source": str(raw) if raw else "embedded", **stats})


def tokens(events, seq_name, out, log=print):
    from .retrieval import write_tokens

    write_tokens(events, seq_name, out, log=log)


def fts_index(haystacks, events, out, log=print):
    from .ftsindex import build_index

    stats = build_index(haystacks, events, out, log=log)
    log(f"fts index: {stats}")


def retrieve(variant_spec, questions, haystacks, events, tokens_path, fts_index_path, segment, n_segments,
             rankings, outcomes, log=print):
    from .retrieval import write_segment
    from .variants import from_spec

    variant = from_spec(variant_spec)
    write_segment(variant, questions, haystacks, events, segment, n_segments, rankings, outcomes, log=log,
                  tokens_path=tokens_path, fts_index_path=fts_index_path)


def merge(dataset, variant_spec, rankings_in, outcomes_in, data_summary, rankings_out, metrics_out, log=print):
    from . import metrics
    from .retrieval import concat_segments
    from .tables import write_table

    rankings = concat_segments(rankings_in)
    per_segment = [pq.read_table(p).sort_by("q_index").to_pylist() for p in outcomes_in]
    outcomes = [row for seg in per_segment for row in seg]
    result = metrics.compute(outcomes, per_segment)
    meta = {"dataset": dataset, "variant": variant_spec["name"], "harness": variant_spec["harness"],
            "description": variant_spec["description"], "recipe": variant_spec["recipe"],
            "skip_rule": variant_spec["skip"], "baseline": variant_spec.get("baseline", ""),
            # what normalization counted (date fallbacks, unmatched evidence, ...)
            "data": {k: v for k, v in json.loads(Path(data_summary).read_text(encoding="utf-8")).items()
                     if k != "source"}}
    write_table(rankings_out, rankings)
    write_json(metrics_out, {**meta, **result})
    log(f"{dataset} {variant_spec['name']}: {result['questions']} questions, hit@1 {result['hit@1']}, "
        f"hit@5 {result['hit@5']}, hit@10 {result['hit@10']}, MRR sum {result['mrr_sum']}")


def report(metrics_paths, extra_md, md_out, html_out, png_out, official_paths=(), stats_paths=(),
           forest_out=None, heatmap_out=None, log=print):
    from .report import build_report

    build_report(metrics_paths, extra_md, md_out, html_out, png_out, official_paths=official_paths,
                 stats_paths=stats_paths, forest_out=forest_out, heatmap_out=heatmap_out, log=log)


def falsify(dataset, metrics_paths, json_out, md_out, log=print):
    from .falsifier import compare, markdown
    from .tables import write_text

    metrics = {}
    for p in metrics_paths:
        m = json.loads(Path(p).read_text(encoding="utf-8"))
        metrics[m["variant"]] = m
    rows = compare(metrics)
    write_json(json_out, {"dataset": dataset, "comparisons": rows})
    write_text(md_out, markdown(dataset, rows))
    log(f"falsifier {dataset}: {len(rows)} comparisons")


def official(dataset, fmt, variant, questions, haystacks, events, rankings, official_out, run_out, log=print):
    """The field's yardsticks for one variant: official metrics (official.json)
    and the TREC run. ``rankings``: the harness's top 10 or a deeper table with
    the same columns."""
    from . import exports
    from . import official as off

    block, _ = off.compute(fmt, questions, haystacks, events, rankings, log=log)
    run = exports.write_run(rankings, variant, run_out, log=log)
    write_json(official_out, {"dataset": dataset, "variant": variant, "format": fmt,
                              "rankings": Path(rankings).name, "official": block, "run_trec": run})


def retrievallog(fmt, questions, haystacks, events, rankings, out, log=print):
    from .exports import write_retrievallog

    write_retrievallog(fmt, questions, haystacks, events, rankings, out, log=log)


def qrels(questions, out, log=print):
    from .exports import write_qrels

    write_qrels(questions, out, log=log)


def stats(dataset, metrics_paths, outcome_paths, out, log=print):
    """Paired statistics of a dataset's variants; outcome files are grouped by
    their variant directory (results/{dataset}/{variant}/segments/...)."""
    from .stats import dataset_stats

    variants = {}
    for p in metrics_paths:
        m = json.loads(Path(p).read_text(encoding="utf-8"))
        variants[m["variant"]] = m.get("baseline", "")
    outcomes: dict[str, list] = {v: [] for v in variants}
    for p in outcome_paths:
        outcomes[Path(p).parent.parent.name].append(p)
    write_json(out, dataset_stats(dataset, variants, outcomes, log=log))
