# Config validation, input functions and helpers shared by all rules.

import os
import re
import sys

sys.path.insert(0, os.path.join(workflow.basedir, "src"))  # the package, installed or not

from memobench.analyze import RECIPE as ANALYZE_RECIPE
from memobench.config import RESERVED, SAFE_NAME, dataset_family, validate
from memobench.errors import ConfigError
from memobench.fingerprint import stage_fingerprint
from memobench.fts5 import FTS5_TOKENS
from memobench.provenance import file_stamp
from memobench.recipe import EMBEDDING_INPUTS, FIELDS, input_names
from memobench.retrievers import code_fingerprint, inputs_of
from memobench.variants import from_spec, resolve, to_spec


def fail(msg):
    """One clear `memobench:` line naming the fix, no traceback and no schema dump."""
    print(f"memobench: {msg}", file=sys.stderr)
    sys.exit(1)


try:
    validate(config, os.path.join(workflow.basedir, "workflow", "schemas", "config.schema.yaml"))
except ConfigError as e:
    fail(str(e))

DATA_DIR = config["data_dir"]
DATASETS = config["datasets"]
CUSTOM_VARIANTS = config["variants"]
RUN = config["run"]
RESULTS = "results"
STAGE_SCRIPT = "../scripts/stage.py"  # every rule runs it (relative to this folder)


STAGE_SCRIPT_PATH = os.path.join(workflow.basedir, "workflow", "scripts", "stage.py")


def code(stage):
    """The stage's code fingerprint: its module import closure and the script
    (src/memobench/fingerprint.py). A params entry, so an edit reruns exactly
    the stages that run the edited code, and what follows them."""
    return stage_fingerprint(stage, STAGE_SCRIPT_PATH)


_RETRIEVE_CODES = {}


def retrieve_code(w):
    """A retrieve job's code fingerprint: the stage's shared modules and its
    variant's retriever's code (the Memo engine, the reference retrievers, or
    a user's source files; retrievers.code_fingerprint), so editing one
    retriever reruns only the variants it ranks."""
    spec = variant_of(w)
    key = repr(spec)
    if key not in _RETRIEVE_CODES:
        try:
            _RETRIEVE_CODES[key] = code_fingerprint(from_spec(spec), STAGE_SCRIPT_PATH)
        except (ConfigError, OSError) as e:
            fail(f"config: dataset {w.dataset!r}: variant {w.variant!r}: {e}")
    return _RETRIEVE_CODES[key]


def family(ds):
    return dataset_family(DATASETS[ds])


def variant_spec(ds, name):
    try:
        return to_spec(resolve(name, family(ds), CUSTOM_VARIANTS))
    except ConfigError as e:
        fail(f"config: dataset {ds!r}: {e}")


# Resolve every configured variant now, so a bad name fails before any job runs.
VARIANT_SPECS = {ds: {v: variant_spec(ds, v) for v in DATASETS[ds]["variants"]} for ds in DATASETS}


def raw_path(ds):
    f = DATASETS[ds]["file"]
    return f if os.path.isabs(f) else os.path.join(DATA_DIR, f)


def raw_stamp(ds):
    """The raw file's size, mtime and inode (None before it exists): verify's
    rerun trigger for a file replaced by another, whatever its size or mtime."""
    path = raw_path(ds)
    return file_stamp(path) if os.path.exists(path) else None


def receipt_path(ds):
    return f"{RESULTS}/{ds}/raw.json"


# --------------------------------------------------------------------------- targets
# Every target either runs or fails in one line that names the fix.


def dataset_of(w):
    ds = w.dataset
    if ds not in DATASETS:
        fail(f"{RESULTS}/{ds}/...: dataset {ds!r} is not configured (configured: {', '.join(DATASETS)}); "
             f"add it under datasets in config.yaml or a --configfile overlay")
    return ds


def variant_of(w):
    ds = dataset_of(w)
    if w.variant not in VARIANT_SPECS[ds]:
        fail(f"{RESULTS}/{ds}/{w.variant}/...: variant {w.variant!r} is not listed for dataset {ds!r} "
             f"(listed: {', '.join(VARIANT_SPECS[ds]) or 'none'}); add it to datasets.{ds}.variants")
    return VARIANT_SPECS[ds][w.variant]


def segment_of(w):
    n = DATASETS[dataset_of(w)]["segments"]
    i = int(w.segment[3:])
    if not 1 <= i <= n:
        fail(f"{RESULTS}/{w.dataset}/{w.variant}/segments/{w.segment}...: dataset {w.dataset!r} has "
             f"{n} segment(s): seg1..seg{n}")
    return i


def norm_dir(ds):
    return f"{RESULTS}/{ds}/normalized"


def base_dataset(ds):
    """The dataset whose haystacks, sessions and events a dataset searches."""
    return DATASETS[ds].get("haystacks_from", ds)


def segments(ds):
    return [f"seg{i}" for i in range(1, DATASETS[ds]["segments"] + 1)]


def segment_files(ds, variant, suffix=".parquet"):
    return [f"{RESULTS}/{ds}/{variant}/segments/{s}{suffix}" for s in segments(ds)]


def run_pairs():
    return [(ds, v) for ds in RUN for v in DATASETS[ds]["variants"]]


def falsified_datasets():
    """Segmented datasets that run an experiment variant next to its baseline."""
    out = []
    for ds in RUN:
        specs = VARIANT_SPECS[ds]
        if len(segments(ds)) > 1 and any(s["baseline"] in specs for s in specs.values()):
            out.append(ds)
    return out


def report_extras():
    return [f"{RESULTS}/{ds}/analyze/analyze.md" for ds in RUN if DATASETS[ds]["analyze"]] + [
        f"{RESULTS}/{ds}/falsifier.md" for ds in falsified_datasets()
    ]


def verified_files():
    needed = [ds for ds in RUN if DATASETS[ds]["format"] != "embedded"]
    needed += [base_dataset(ds) for ds in RUN if base_dataset(ds) != ds]
    return [f"{RESULTS}/{ds}/verified.json" for ds in dict.fromkeys(needed)]


TABLE_NAMES = ["questions", "haystacks", "sessions", "events"]


# --------------------------------------------------------------------------- input functions


def raw_file(w):
    """The raw file, known only once the download checkpoint has run: verify
    takes it as an input (never an output, so no rerun can delete it), and a
    replaced file reruns verify and everything that follows."""
    ds = dataset_of(w)
    checkpoints.download.get(dataset=ds)
    return raw_path(ds)


def normalize_inputs(w):
    ds = dataset_of(w)
    fmt = DATASETS[ds]["format"]
    inputs = {} if fmt == "embedded" else {"verified": f"{RESULTS}/{ds}/verified.json"}
    if fmt == "longmemeval_cn":
        inputs["base_questions"] = f"{norm_dir(base_dataset(ds))}/questions.parquet"
    return inputs


def search_inputs(ds, names, seq, variant=None, segment=None, fused=()):
    """The paths of the named inputs (``names``) of a job that ranks a
    dataset's questions: which ones a variant reads is its retriever's
    (memobench.retrievers.inputs_of; memobench.recipe.input_names for the
    Memo and reference backends: the FTS5 tokens only for the FTS backend, no
    tokens for a reference retriever, its session vectors for an embedding
    retriever, a user retriever's prepared table when it has a prepare step,
    and for a fusion the segment's deep tables of the variants it fuses)."""
    base = base_dataset(ds)
    paths = {
        "questions": f"{norm_dir(ds)}/questions.parquet",
        "haystacks": f"{norm_dir(base)}/haystacks.parquet",
        "events": f"{norm_dir(base)}/events.parquet",
        "tokens": f"{RESULTS}/{base}/tokens/{seq}.parquet",
        "fts_tokens": f"{RESULTS}/{base}/tokens/{FTS5_TOKENS}.parquet",
        **{name: f"{RESULTS}/{base}/embeddings/{model}.parquet" for model, name in EMBEDDING_INPUTS.items()},
        "prepared": f"{RESULTS}/{base}/prepared/{variant}.parquet",
        "fused": [f"{RESULTS}/{ds}/{v}/segments/{segment}.deep.parquet" for v in fused],
    }
    return {n: p for n, p in paths.items() if n in names}


def retrieve_inputs(w):
    segment_of(w)
    spec = variant_of(w)
    names = inputs_of(from_spec(spec))
    # a fusion's inputs: the variants it fuses, each listed for the dataset (config.check)
    fused = spec["retriever"]["of"] if "fused" in names else ()
    return search_inputs(w.dataset, names, spec["recipe"]["seq"], spec["name"], w.segment, fused)


def analyze_inputs(w):
    return search_inputs(dataset_of(w), input_names(ANALYZE_RECIPE.backend), ANALYZE_RECIPE.seq)


def merge_inputs(w):
    """The variant's segments, and the tables its official metrics read."""
    variant_of(w)
    base = base_dataset(w.dataset)
    return {
        "rankings": segment_files(w.dataset, w.variant),
        "outcomes": segment_files(w.dataset, w.variant, ".questions.parquet"),
        "deep": segment_files(w.dataset, w.variant, ".deep.parquet"),
        "data_summary": f"{norm_dir(w.dataset)}/summary.json",
        "questions": f"{norm_dir(w.dataset)}/questions.parquet",
        "haystacks": f"{norm_dir(base)}/haystacks.parquet",
        "events": f"{norm_dir(base)}/events.parquet",
    }


# --------------------------------------------------------------------------- official metrics and exports

LME_FORMATS = ("longmemeval", "longmemeval_cn")


def is_lme(ds):
    return DATASETS[ds]["format"] in LME_FORMATS


# The datasets whose merge job also writes the retrieval log (merge.smk:
# merge_lme); "(?!)" matches nothing.
LME_DATASETS = "|".join(re.escape(ds) for ds in sorted(DATASETS) if is_lme(ds)) or "(?!)"


def merge_lme_inputs(w):
    """merge's inputs and the sessions' log JSON (made once per base dataset)."""
    return {**merge_inputs(w), "sessions": f"{RESULTS}/{base_dataset(w.dataset)}/exports/sessions.bin"}


def official_files():
    """official.json per dataset x variant (the report folds them in)."""
    return [f"{RESULTS}/{ds}/{v}/official.json" for ds, v in run_pairs()]


def stats_files():
    return [f"{RESULTS}/{ds}/stats.json" for ds in RUN if DATASETS[ds]["variants"]]


def export_files():
    """Everything PROTOCOL section 5 promises, so rule all (through the report) makes it."""
    out = [f"{RESULTS}/{ds}/{v}/run.trec" for ds, v in run_pairs()]
    out += [f"{RESULTS}/{ds}/{v}/retrievallog.jsonl" for ds, v in run_pairs() if is_lme(ds)]
    out += [f"{RESULTS}/{ds}/qrels.trec" for ds in RUN if DATASETS[ds]["variants"]]
    return out



# --------------------------------------------------------------------------- shared retrieval


def write_retrieve_plan():
    """The retrieve jobs this invocation runs, for shared_retrieval.py: a job
    ranks its sibling variants ahead only when their own jobs are planned.
    Snakemake's DAG is not a public API: without it the plan is marked
    incomplete and the jobs share only missing outputs (correct either way)."""
    from memobench.shared_retrieval import write_plan

    try:
        dag = workflow.dag
        jobs = [(j.wildcards.dataset, j.wildcards.variant, int(j.wildcards.segment[3:]))
                for j in dag.needrun_jobs() if j.rule.name == "retrieve"]
        complete = not any(dag.checkpoint_jobs)
    except Exception:
        jobs, complete = [], False
    write_plan(RESULTS, jobs, complete)


def drop_local_rate_limit():
    """Snakemake's submission limit (--max-jobs-per-timespan, default 100/1s)
    paces cluster submissions; on a local run it only arms a (non-daemon)
    one-second timer after each scheduling pass, and the last one keeps the
    finished run alive for up to a second. A local run at the default drops it;
    a limit the user set is kept. Not a public API: without it, nothing changes."""
    try:
        limit = workflow.scheduling_settings.max_jobs_per_timespan
        if workflow.local_exec and (limit.max_jobs, limit.timespan) == (100, 1):
            workflow.scheduler.job_rate_limiter = None
    except Exception:
        pass


onstart:
    write_retrieve_plan()
    drop_local_rate_limit()


# a reserved folder name is never a variant or dataset (the wildcard is always followed by "/")
_NAME = f"(?!(?:{'|'.join(sorted(RESERVED))})/){SAFE_NAME}"


wildcard_constraints:
    dataset=_NAME,
    variant=_NAME,
    segment=r"seg[0-9]+",
    seq="|".join([*FIELDS["seq"].metadata["choices"], FTS5_TOKENS]),
    model="|".join(EMBEDDING_INPUTS),


# --------------------------------------------------------------------------- missing datasets
# A download that fails is recorded in the dataset's receipt, not a failed job
# (src/memobench/missing.py): the run finishes every dataset it can, the
# report lists the missing ones, and the last rule (datasets.smk) fails while
# any is missing. The input functions below wait for every download
# checkpoint, then leave out the missing datasets and those that search their
# haystacks.

from snakemake.exceptions import IncompleteCheckpointException

from memobench.missing import find_missing, read_receipt


def downloaded_datasets():
    """The datasets the run needs a raw file of, through the download checkpoint."""
    needed = [ds for ds in RUN if DATASETS[ds]["format"] != "embedded"]
    needed += [base_dataset(ds) for ds in RUN if base_dataset(ds) != ds]
    return list(dict.fromkeys(needed))


def receipt_files():
    return [receipt_path(ds) for ds in downloaded_datasets()]


# dataset -> the dataset whose haystacks it searches (missing with it)
NEEDS = {ds: base_dataset(ds) for ds in RUN if base_dataset(ds) != ds}


_ATTEMPTS = {}


def download_attempt(w):
    """The download checkpoint's `attempt` param, which its receipt keeps: 1 at
    first; once the file is there, the attempt that got it (unchanged, so
    nothing reruns); while the receipt records a failed download, one more (a
    changed param, so every run retries the download). Computed once per
    dataset and run: Snakemake deletes the receipt before the job runs and may
    evaluate the param again then."""
    ds = dataset_of(w)
    if ds not in _ATTEMPTS:
        r = read_receipt(receipt_path(ds))
        _ATTEMPTS[ds] = 1 if not r else r.get("attempt", 0) + 1 if r.get("missing") else r.get("attempt", 1)
    return _ATTEMPTS[ds]


def missing_datasets():
    """{dataset: why} of the run's datasets that cannot run (memobench.missing).
    Raises Snakemake's IncompleteCheckpointException while the download
    checkpoint of a dataset whose raw file is not there has yet to run (every
    receipt is an input of the report, so the downloads still run side by
    side). A raw file that is there cannot go missing (the download stage
    keeps it), so its dataset's jobs are known, and dry-run, at once."""
    receipts, pending = {}, None
    for ds in downloaded_datasets():
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


def present_only(paths):
    """An input function: ``paths`` less those of missing datasets (results/{dataset}/...)."""

    def inputs(w):
        prefixes = tuple(f"{RESULTS}/{ds}/" for ds in missing_datasets())
        return [p for p in paths if not (prefixes and p.startswith(prefixes))]

    return inputs


def without_downloads(paths):
    """``paths`` of the datasets that need no download (the embedded set): an
    input of the last rule, so that their jobs start beside the downloads
    instead of waiting for the report's inputs to be known."""
    keep = tuple(f"{RESULTS}/{ds}/" for ds in RUN if ds not in downloaded_datasets() and ds not in NEEDS)
    return [p for p in paths if keep and p.startswith(keep)]
