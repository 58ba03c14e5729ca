# Config validation, input functions and helpers shared by all rules.

import os
import sys

sys.path.insert(0, os.path.join(workflow.basedir, "src"))  # the package, installed or not

from memobench.analyze import RECIPE as ANALYZE_RECIPE
from memobench.config import RESERVED, SAFE_NAME, dataset_family, retrieval_log_pairs, validate
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
    # (dataset, variant) pairs whose retrieval log the default target makes (exports.retrieval_log)
    RETRIEVAL_LOGS = retrieval_log_pairs(config)
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


def compared(ds):
    """The variants of a dataset that stats.json compares pair by pair (statistics.compare), in configured order."""
    want = config["statistics"]["compare"]
    return [v for v in DATASETS[ds]["variants"] if want == "all" or v in want]


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
    """The report's analyze and falsifier sections, read from their JSON (the
    report escapes and lays out their rows itself)."""
    return [f"{RESULTS}/{ds}/analyze/summary.json" for ds in RUN if DATASETS[ds]["analyze"]] + [
        f"{RESULTS}/{ds}/falsifier.json" for ds in falsified_datasets()
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
    replaced file reruns verify and everything that follows. None when the
    download failed: the verify job of a target of a missing dataset then
    fails in one line that says what to place where."""
    ds = dataset_of(w)
    checkpoints.download.get(dataset=ds)
    path = raw_path(ds)
    if not os.path.exists(path) and (read_receipt(receipt_path(ds)) or {}).get("missing"):
        return []
    return path


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


# --------------------------------------------------------------------------- imported runs (import_run.smk)


def run_file(w):
    """The imported run's file, which must be there (one line naming the fix if not)."""
    spec = variant_of(w)
    if not spec.get("run"):
        fail(f"{RESULTS}/{w.dataset}/{w.variant}/...: variant {w.variant!r} is not an imported run under "
             f"dataset {w.dataset!r}")
    path = spec["run"]["file"]
    if not os.path.isfile(path):
        fail(f"config: variants.{w.variant}.run.file: {path}: no such file (relative paths start from the "
             f"working directory, {os.getcwd()}); give the run file's path")
    return path


def import_inputs(w):
    segment_of(w)
    ds, base = w.dataset, base_dataset(w.dataset)
    inputs = {"run": run_file(w), "questions": f"{norm_dir(ds)}/questions.parquet",
              "haystacks": f"{norm_dir(base)}/haystacks.parquet"}
    if variant_of(w)["run"]["format"] == "retrievallog":  # scoring ids: which sessions hold a user target
        inputs["events"] = f"{norm_dir(base)}/events.parquet"
    return inputs


# --------------------------------------------------------------------------- your retriever's prepare step (prepare.smk)


def prepare_spec(w):
    """The settings that decide a prepared table: the variant resolved for
    the dataset (the base dataset of those that search its haystacks)."""
    ds = dataset_of(w)
    try:
        v = resolve(w.variant, family(ds), CUSTOM_VARIANTS)
    except ConfigError as e:
        fail(f"{RESULTS}/{ds}/prepared/{w.variant}.parquet: {e}")
    if not (v.retriever or {}).get("prepare"):
        fail(f"{RESULTS}/{ds}/prepared/{w.variant}.parquet: variant {w.variant!r} is not a retriever with a "
             f"prepare step")
    spec = to_spec(v)
    return {"name": spec["name"], "recipe": spec["recipe"], "skip": "",
            "retriever": {"prepare": v.retriever["prepare"], "params": v.retriever["params"]}}


def prepare_code(w):
    from memobench.pyretriever import prepare_fingerprint

    try:
        return prepare_fingerprint(from_spec(prepare_spec(w)), STAGE_SCRIPT_PATH)
    except (ConfigError, OSError) as e:
        fail(f"config: variant {w.variant!r}: {e}")



# --------------------------------------------------------------------------- official metrics and exports

LME_FORMATS = ("longmemeval", "longmemeval_cn")


def is_lme(ds):
    return DATASETS[ds]["format"] in LME_FORMATS


def retrievallog_inputs(w):
    """The merged deep list, the tables its official metrics read, and the
    sessions' log JSON (made once per base dataset). A retrieval log is
    LongMemEval's format: asking for one of another format's dataset fails here."""
    variant_of(w)
    ds = w.dataset
    if not is_lme(ds):
        fail(f"{RESULTS}/{ds}/{w.variant}/retrievallog.jsonl: dataset {ds!r} has format "
             f"{DATASETS[ds]['format']!r}; a retrieval log is made for {', '.join(LME_FORMATS)} datasets only")
    base = base_dataset(ds)
    return {
        "deep": f"{RESULTS}/{ds}/{w.variant}/deep.parquet",
        "questions": f"{norm_dir(ds)}/questions.parquet",
        "haystacks": f"{norm_dir(base)}/haystacks.parquet",
        "events": f"{norm_dir(base)}/events.parquet",
        "sessions": f"{RESULTS}/{base}/exports/sessions.bin",
    }


def retrievallog_pairs():
    """The run's (dataset, variant) pairs whose retrieval log rule all keeps up
    to date: those exports.retrieval_log lists, and those whose log is there
    (asked for by its path once: remade when its variant reruns, never left
    stale; deleting it is how one stops it)."""
    listed = set(RETRIEVAL_LOGS)
    return [(ds, v) for ds, v in run_pairs() if is_lme(ds) and (
        (ds, v) in listed or os.path.exists(f"{RESULTS}/{ds}/{v}/retrievallog.jsonl"))]


def official_files():
    """official.json per dataset x variant (the report folds them in)."""
    return [f"{RESULTS}/{ds}/{v}/official.json" for ds, v in run_pairs()]


def stats_files():
    return [f"{RESULTS}/{ds}/stats.json" for ds in RUN if DATASETS[ds]["variants"]]


def export_files():
    """The TREC exports (docs/protocol.md#the-output-contract), so rule all (through the report)
    makes them. Not the retrieval logs: each is about the raw file's size, made
    only where exports.retrieval_log lists it or when its path is asked for (a
    target of rule all alone, retrievallog_pairs, so one more reruns nothing
    but its job)."""
    out = [f"{RESULTS}/{ds}/{v}/run.trec" for ds, v in run_pairs()]
    out += [f"{RESULTS}/{ds}/qrels.trec" for ds in RUN if DATASETS[ds]["variants"]]
    return out


def result_files():
    """Every result users rely on (docs/results.md#result-files), each an
    input of rule all. Snakemake makes a missing file again only when a job
    that reads it has to run: a deleted run.trec, qrels.trec or variant folder
    whose report is up to date would stay deleted, and the report go on listing
    it. As a target of rule all, a deleted result is made again (and what reads
    it, the report included). The list is every output of the rules that make
    results, read from the rules themselves, so a new output is covered too
    (the retrieval logs: those listed or already made, retrievallog_pairs); called once
    every rule is defined (the Snakefile's rule all)."""
    out = []
    for ds, v in run_pairs():
        for s in segments(ds):
            out += _outputs_of(rules.retrieve, dataset=ds, variant=v, segment=s)
        out += _outputs_of(rules.merge, dataset=ds, variant=v)
    for ds, v in retrievallog_pairs():
        out += _outputs_of(rules.retrievallog, dataset=ds, variant=v)
    for ds in RUN:
        if DATASETS[ds]["variants"]:
            out += _outputs_of(rules.qrels, dataset=ds) + _outputs_of(rules.stats, dataset=ds)
        if DATASETS[ds]["analyze"]:
            out += _outputs_of(rules.analyze, dataset=ds)
    for ds in falsified_datasets():
        out += _outputs_of(rules.falsify, dataset=ds)
    out += _outputs_of(rules.report) + _outputs_of(rules.manifest)
    return list(dict.fromkeys(out))


def _outputs_of(rule, **wildcards):
    return [expand(str(p), **wildcards)[0] for p in rule.output]



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


# Imported runs (import_run.smk) are read, never ranked: the
# retrieve rule does not match them ("(?!)" matches nothing).
IMPORTED_VARIANTS = "|".join(sorted({re.escape(v) for ds in DATASETS for v, s in VARIANT_SPECS[ds].items()
                                     if s.get("run")})) or "(?!)"
RANKED_VARIANTS = f"(?!(?:{IMPORTED_VARIANTS})/){_NAME}"


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

from memobench.missing import attempt_param, end_lines, find_missing, read_receipt


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
    """The download checkpoint's `attempt` param (memobench.missing.attempt_param):
    it changes while the receipt records a failed download, so every run
    retries it, and says so in Snakemake's rerun reason. Computed once per
    dataset and run: Snakemake deletes the receipt before the job runs and may
    evaluate the param again then."""
    ds = dataset_of(w)
    if ds not in _ATTEMPTS:
        _ATTEMPTS[ds] = attempt_param(read_receipt(receipt_path(ds)))
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


def datasets_receipts(w):
    """The last rule's receipts, once the download checkpoints have run (so
    the job is looked at again with the receipts they wrote)."""
    missing_datasets()
    return receipt_files()


def end_of_run(success):
    """The onsuccess/onerror handler (datasets.smk): while a dataset of this
    run is missing, one `memobench:` line per missing dataset and a summary,
    and on an otherwise successful run exit status 1. "Of this run": those
    whose download job is in this invocation's DAG, so a target of one
    dataset (a segment) is judged by its own datasets; the lines are printed
    after a failed run only when the DAG holds the last rule (a target of a
    missing dataset failed in its verify job with the same line). Read from
    the receipts themselves, whatever ran before. Snakemake's DAG is not a
    public API: without it every dataset of the config counts."""
    try:
        jobs = list(workflow.dag.jobs)
        planned = {j.wildcards["dataset"] for j in jobs if j.rule.name == "download"}
        last = any(j.rule.name == "datasets" for j in jobs)
    except Exception:
        planned, last = set(downloaded_datasets()), True
    receipts = {ds: read_receipt(receipt_path(ds)) for ds in downloaded_datasets()
                if ds in planned and not os.path.exists(raw_path(ds))}
    lines = end_lines(find_missing(receipts, {ds: b for ds, b in NEEDS.items() if b in planned}))
    if not lines or not (success or last):
        return
    sys.stdout.flush()
    for line in lines:
        print(f"memobench: {line}", file=sys.stderr)
    sys.stderr.flush()
    if success:
        sys.exit(1)
