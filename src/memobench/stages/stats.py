"""The stats stage (its rule: ``stats``)."""

from __future__ import annotations

import os
from pathlib import Path

from ..core.atomic import write_json
from .adapter import Job, stage


# From this many compared variants on, a job with two threads tests the token budgets
# in a second process beside the paired tests of the lists (the budgets' share of the
# job grows with the pairs, the second process's start is a fixed cost).
BUDGETS_APART_FROM = 10


@stage("stats", inputs=["outcomes", "merged", "official"], outputs=["stats"], params=["baselines", "compare"])
def stats(job: Job) -> None:
    """Paired statistics of a dataset's variants; outcome files are grouped by
    their variant directory (results/{dataset}/{variant}/segments/...). The
    stats job waits for every merge, so it mostly runs alone: given two
    threads and many variants, the tests within token budgets, which need
    nothing of the others, run in a forked process beside them (threads
    would share one core: the work is mostly Python), their log lines
    written after the others'. The same stats.json either way."""
    variants = dict(job.params.baselines)
    outcomes: dict[str, list] = {v: [] for v in variants}
    for p in job.input.outcomes:
        outcomes[Path(p).parent.parent.name].append(p)
    # recall within token budgets, from the merged outcomes (their budget columns) and official.json
    merged = {Path(p).parent.name: p for p in job.input.files("merged")}
    official = {Path(p).parent.name: p for p in job.input.files("official")}
    compare = list(job.params.compare)
    args = (job.wildcards.dataset, variants, outcomes, compare, merged, official)
    # one BLAS thread per process: BLAS reads its thread count when numpy loads, below (Snakemake set it
    # to the job's two threads, which the two processes take, or which a few small products would only spin)
    os.environ.update({name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
    if job.threads > 1 and len(compare) >= BUDGETS_APART_FROM and hasattr(os, "fork"):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # forked before this process loads numpy or pyarrow (and their threads); a process that dies
        # fails the job (BrokenProcessPool) rather than leaving it waiting
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
            pending = pool.submit(budget_figures, *args)
            out = _paired(job, variants, outcomes, compare)
            block, lines, error = pending.result()
    else:
        out = _paired(job, variants, outcomes, compare)
        block, lines, error = budget_figures(*args)
    for line in lines:
        job.log(line)
    if error is not None:
        from ..core.errors import ConfigError

        raise ConfigError(error)  # the same one line: a user's error is shown by its message
    if block is not None:
        out["budgets"] = block
    write_json(job.output.stats, out)


def _paired(job: Job, variants, outcomes, compare) -> dict:
    from ..evaluation.stats import dataset_stats

    return dataset_stats(job.wildcards.dataset, variants, outcomes, log=job.log, compare_set=compare)


def budget_figures(dataset, variants, outcomes, compare, merged, official) -> tuple[dict | None, list[str], str | None]:
    """stats.json's ``budgets`` of the compared variants (those the paired
    tests compare), its log lines, and a user's error as its line (a forked
    process returns it; the job raises it)."""
    from ..core.errors import USER_ERRORS
    from ..evaluation.budget_stats import budget_stats, read_variant
    from ..evaluation.stats import compared_variants, left_out_variants

    lines: list[str] = []
    try:
        compared = compared_variants(variants, compare, left_out_variants(variants, outcomes))
        block = budget_stats(dataset, compared, {v: read_variant(merged[v], official[v]) for v in compared},
                             log=lines.append)
    except USER_ERRORS as e:
        return None, lines, str(e)
    return block, lines, None
