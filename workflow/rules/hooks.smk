# What reaches into Snakemake itself rather than its rules: the
# onstart/onsuccess/onerror handlers and the wait for the download
# checkpoints. Each touches Snakemake's internals (workflow.dag,
# workflow.scheduler, snakemake.exceptions), which are no public API, so each
# says why it exists and what happens when the internal is not there. The
# logic they run is the package's (memobench.plan, memobench.datasets.missing).

from snakemake.exceptions import IncompleteCheckpointException

from memobench.datasets.missing import find_missing


# --------------------------------------------------------------------------- missing datasets
# A download that fails is recorded in the dataset's receipt, not a failed job
# (src/memobench/datasets/missing.py): the run finishes every dataset it can, the
# report lists the missing ones, and the last rule (datasets.smk) fails while
# any is missing. The report's, the manifest's and the last rule's input
# functions (present_only, datasets_receipts in common.smk) wait here for
# every download checkpoint, then leave out the missing datasets and those
# that search their haystacks.


def missing_datasets():
    """{dataset: why} of the run's datasets that cannot run (memobench.datasets.missing).
    Raises Snakemake's IncompleteCheckpointException while the download
    checkpoint of a dataset whose raw file is not there has yet to run (every
    receipt is an input of the report, so the downloads still run side by
    side): Snakemake then evaluates the input function again once the
    checkpoint has run. A raw file that is there cannot go missing (the
    download stage keeps it), so its dataset's jobs are known, and dry-run,
    at once."""
    receipts, pending = {}, None
    for ds in DOWNLOADED:
        try:
            checkpoints.download.get(dataset=ds)
        except IncompleteCheckpointException as e:
            if not os.path.exists(raw_path(ds)):
                pending = pending or e
            continue
        receipts[ds] = read_receipt(receipt_path(ds))
    if pending is not None:
        raise pending
    return find_missing(receipts, NEEDS)


# --------------------------------------------------------------------------- onstart


def write_retrieve_plan():
    """Why: a retrieve job ranks its sibling variants ahead (retrieval/sharing.py)
    only when their own jobs are planned, so it needs the retrieve jobs this
    invocation runs. Snakemake's DAG is not a public API: without it the plan
    is marked incomplete and the jobs share only missing outputs (correct
    either way)."""
    from memobench.retrieval.sharing import write_plan

    try:
        dag = workflow.dag
        jobs = [(j.wildcards.dataset, j.wildcards.variant, layout.segment_index(j.wildcards.segment))
                for j in dag.needrun_jobs() if j.rule.name == "retrieve"]
        complete = not any(dag.checkpoint_jobs)
    except Exception:
        jobs, complete = [], False
    write_plan(RESULTS, jobs, complete, config)


def drop_local_rate_limit():
    """Why: Snakemake's submission limit (--max-jobs-per-timespan, default
    100/1s) paces cluster submissions; on a local run it only arms a
    (non-daemon) one-second timer after each scheduling pass, and the last one
    keeps the finished run alive for up to a second. A local run at the
    default drops it; a limit the user set is kept. Not a public API: without
    it, nothing changes."""
    try:
        limit = workflow.scheduling_settings.max_jobs_per_timespan
        if workflow.local_exec and (limit.max_jobs, limit.timespan) == (100, 1):
            workflow.scheduler.job_rate_limiter = None
    except Exception:
        pass


def record_params_without_pandas():
    """Why: Snakemake records each finished job's params through a serializer
    that hashes pandas objects whenever pandas is installed, and picking it
    imports pandas into Snakemake's own process at the first job's end: 0.3 to
    0.7 s between two jobs of every run. A param can be a pandas object only
    once pandas is imported, so the serializer is the pandas-aware one only
    then, looked up at each call: the records are the same. Applied as the
    workflow is parsed, before the DAG compares any params. Not a public API:
    without the attributes it expects, nothing changes."""
    try:
        from snakemake.persistence import PersistenceBase

        if not all(hasattr(PersistenceBase, a) for a in
                   ("_serialize_param", "_serialize_param_pandas", "_serialize_param_builtin")):
            return
        PersistenceBase._serialize_param = property(
            lambda self: self._serialize_param_pandas if "pandas" in sys.modules else self._serialize_param_builtin)
    except Exception:
        pass


record_params_without_pandas()


onstart:
    write_retrieve_plan()
    drop_local_rate_limit()


# --------------------------------------------------------------------------- onsuccess / onerror


def end_of_run(success):
    """Why: the exit status must say whether a dataset is missing, whatever
    an earlier run left, and a job that fails would add a job-error block
    after the lines (datasets.smk). While a dataset of this run is missing:
    one `memobench:` line per missing dataset and a summary, and on an
    otherwise successful run exit status 1. "Of this run": those whose
    download job is in this invocation's DAG, so a target of one dataset (a
    segment) is judged by its own datasets; the lines are printed after a
    failed run only when the DAG holds the last rule (a target of a missing
    dataset failed in its verify job with the same line). Read from the
    receipts themselves (memobench.plan.end_lines). Snakemake's DAG is not a
    public API: without it every dataset of the config counts."""
    try:
        jobs = list(workflow.dag.jobs)
        planned = {j.wildcards["dataset"] for j in jobs if j.rule.name == "download"}
        last = any(j.rule.name == "datasets" for j in jobs)
    except Exception:
        planned, last = set(DOWNLOADED), True
    lines = plan.end_lines(config, planned)
    if not lines or not (success or last):
        return
    sys.stdout.flush()
    for line in lines:
        print(f"memobench: {line}", file=sys.stderr)
    sys.stderr.flush()
    if success:
        sys.exit(1)


onsuccess:
    end_of_run(True)


onerror:
    end_of_run(False)
