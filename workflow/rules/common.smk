# Config validation, input functions and wildcard constraints shared by all
# rules: one-liners over the package. What a run makes and what each job reads
# is src/memobench/plan.py, where every result lies src/memobench/core/layout.py;
# the handlers that reach into Snakemake's internals are hooks.smk.

import os
import sys

sys.path.insert(0, os.path.join(workflow.basedir, "src"))  # the package, installed or not

from memobench import plan
from memobench.core import layout
from memobench.core.config import retrieval_log_pairs, validate
from memobench.core.formats import has_raw_file
from memobench.core.errors import ConfigError
from memobench.core.fingerprint import stage_fingerprint
from memobench.memo.tokenize import FTS5_TOKENS
from memobench.datasets.missing import attempt_param, read_receipt
from memobench.core.provenance import file_digest, file_stamp
from memobench.memo.recipe import ANALYZE_RECIPE, FIELDS
from memobench.catalog.registry import code_fingerprint, embedding_inputs, input_names, inputs_of, kind_of
from memobench.catalog.variant import from_spec
from memobench.retrieval.sharing import group_leaders
from memobench.stages.adapter import files_literal, job_literal, named_values
from snakemake_interface_executor_plugins.settings import DeploymentMethod


def fail(msg):
    """One clear `memobench:` line naming the fix, no traceback and no schema dump."""
    print(f"memobench: {msg}", file=sys.stderr)
    sys.exit(1)


def checked(f, *args):
    """``f(*args)``, or the run stops on the ConfigError's line (memobench.plan's checks)."""
    try:
        return f(*args)
    except ConfigError as e:
        fail(str(e))


try:
    validate(config, os.path.join(workflow.basedir, "workflow", "schemas", "config.schema.yaml"))
    # (dataset, variant) pairs whose retrieval log the default target makes (exports.retrieval_log)
    RETRIEVAL_LOGS = retrieval_log_pairs(config)
    # Every configured variant, resolved now, so a bad name fails before any job runs.
    VARIANT_SPECS = plan.variant_specs(config)
    # and the files they name, there: a job's input function would say so only after the downloads
    plan.check_files(config, VARIANT_SPECS, os.getcwd())
except ConfigError as e:
    fail(str(e))

DATASETS = config["datasets"]
RUN = config["run"]
RESULTS = layout.RESULTS
LOGS = layout.LOGS
BENCHMARKS = layout.BENCHMARKS
STAGE_SCRIPT_PATH = os.path.join(workflow.basedir, "workflow", "scripts", "stage.py")  # every rule runs it

# Every rule's job is one command (stage_command): workflow/scripts/stage.py
# with the job on its stdin (stage_params; memobench.stages.adapter says why
# not `script:`). The interpreter and the script reach the command through
# the environment, which jobs inherit (as params, moving the venv would rerun
# every job): this process's interpreter, or the environment's `python` under
# --sdm conda, as Snakemake's own `script:` chooses.
os.environ.update(
    MEMOBENCH_PYTHON="python" if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method else sys.executable,
    MEMOBENCH_STAGE_SCRIPT=STAGE_SCRIPT_PATH,
)


def stage_command(rule):
    """The shell command of the rule named ``rule``, which runs its stage."""
    return (f'"$MEMOBENCH_PYTHON" "$MEMOBENCH_STAGE_SCRIPT" {rule} '
            "{threads} {log:q} <<'MEMOBENCH_JOB'\n{params.job}\n{params.files}\nMEMOBENCH_JOB")


def stage_params(**params):
    """A rule's params as the two entries its command passes on: ``job``, its
    params (each a value, or a function of the wildcards) and wildcards, which
    Snakemake records, so that a change to any of them reruns the job; and
    ``files``, its named inputs and outputs, which Snakemake does not record
    (a function of them; their own rerun triggers watch them). Each is the
    line its stage reads (memobench.stages.job_literal, files_literal)."""

    def job(wildcards):
        values = {name: value(wildcards) if callable(value) else value for name, value in params.items()}
        return job_literal(values, dict(wildcards.items()))

    def files(wildcards, input, output):
        return files_literal(named_values(input), named_values(output))

    return {"job": job, "files": files}


def code(stage):
    """The stage's code fingerprint: its module import closure and the script
    (src/memobench/core/fingerprint.py). A params entry, so an edit reruns exactly
    the stages that run the edited code, and what follows them."""
    return stage_fingerprint(stage, STAGE_SCRIPT_PATH)


_RETRIEVE_CODES = {}


def retrieve_code(w):
    """A retrieve job's code fingerprint: the stage's shared modules and its
    variant's retriever's code (the Memo engine, the reference retrievers, or
    a user's source files; catalog.registry.code_fingerprint), so editing one
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
    return plan.family(config, ds)


def raw_path(ds):
    return plan.raw_path(config, ds)


def raw_stamp(ds):
    """The raw file's size, mtime and inode (None before it exists): verify's
    rerun trigger for a file replaced by another, whatever its size or mtime."""
    path = raw_path(ds)
    return file_stamp(path) if os.path.exists(path) else None


def receipt_path(ds):
    return layout.path(layout.RAW_RECEIPT, dataset=ds)


# --------------------------------------------------------------------------- targets
# Every target either runs or fails in one line that names the fix (memobench.plan.check_*).


def dataset_of(w):
    return checked(plan.check_dataset, config, w.dataset)


def variant_of(w):
    return checked(plan.check_variant, config, VARIANT_SPECS, w.dataset, w.variant)


def retrieve_variant(w):
    return plan.retrieve_spec(config, variant_of(w))


# each dataset's retrieve jobs that lead a group of siblings (retrieval.sharing.group_leaders)
RETRIEVE_LEADERS = {ds: group_leaders([from_spec(s) for s in specs.values()]) for ds, specs in VARIANT_SPECS.items()}


def retrieve_priority(w):
    """A group's leading job (its pass ranks the siblings) before the others,
    which mostly copy what it ranked; both before side jobs (0)."""
    return 1 if w.variant in RETRIEVE_LEADERS.get(w.dataset, ()) else 0.5


def memory_service_jobs(w):
    """A memory service's retrieve job counts 1 against the resource ``memory_service``: with
    ``--resources memory_service=N`` at most N of them run at once, locally or on a cluster
    (docs/memory-services.md#on-a-cluster); every other job 0."""
    return int(kind_of(variant_of(w)) == "system")


def segment_of(w):
    return checked(plan.check_segment, config, w.dataset, w.variant, w.segment)


def segments(ds):
    return plan.segments(config, ds)


def run_pairs():
    return plan.run_pairs(config)


# the datasets whose raw file the run downloads and verifies, and dataset ->
# the dataset whose haystacks it searches (missing with it)
DOWNLOADED = plan.downloaded_datasets(config)
NEEDS = plan.needs(config)


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


_ATTEMPTS = {}


def download_attempt(w):
    """The download checkpoint's `attempt` param (memobench.datasets.missing.attempt_param):
    it changes while the receipt records a failed download, so every run
    retries it, and says so in Snakemake's rerun reason. Computed once per
    dataset and run: Snakemake deletes the receipt before the job runs and may
    evaluate the param again then."""
    ds = dataset_of(w)
    if ds not in _ATTEMPTS:
        _ATTEMPTS[ds] = attempt_param(read_receipt(receipt_path(ds)))
    return _ATTEMPTS[ds]


def normalize_inputs(w):
    return plan.normalize_inputs(config, dataset_of(w))


def search_inputs(ds, names, tokenizer, variant=None, segment=None, fused=(), grain="session"):
    return plan.search_inputs(config, ds, names, tokenizer, variant, segment, fused, grain)


def embeddings_code(w):
    """An embeddings job's code fingerprint: the stage less the other models'
    encoders (its module imported here, not at parse: it imports numpy and pyarrow)."""
    from memobench.retrieval.reference.embeddings import code_fingerprint

    return code_fingerprint(w.model, STAGE_SCRIPT_PATH)


def retrieve_inputs(w):
    segment_of(w)
    spec = variant_of(w)
    names = inputs_of(from_spec(spec))
    # a fusion's inputs: the variants it fuses, each listed for the dataset (config.check)
    fused = spec["retriever"]["of"] if "fused" in names else ()
    return search_inputs(w.dataset, names, spec["recipe"]["seq"], spec["name"], w.segment, fused,
                         spec.get("grain", "session"))


def analyze_inputs(w):
    return search_inputs(dataset_of(w), input_names(ANALYZE_RECIPE.backend), ANALYZE_RECIPE.seq)


def merge_inputs(w):
    return plan.merge_inputs(config, w.dataset, w.variant, variant_of(w).get("grain", "session"))


def retrievallog_inputs(w):
    return checked(plan.retrievallog_inputs, config, w.dataset, w.variant, variant_of(w).get("grain", "session"))


def run_file(w):
    """The imported run's file (import_run.smk), which must be there (one line naming the fix if not)."""
    return checked(plan.run_file, variant_of(w), w.dataset, w.variant, os.getcwd())


def run_content(w):
    """The run file's size and sha256: record_run's rerun trigger, in place of its mtime (import_run.smk)."""
    return file_digest(run_file(w))


def import_inputs(w):
    segment_of(w)
    spec = variant_of(w)
    inputs = plan.import_inputs(config, w.dataset, w.variant, run_file(w), spec["run"]["format"],
                                spec.get("grain", "session"))
    # its content is record_run's param, and the record it writes an input here: the file's mtime decides nothing
    return {**inputs, "run": ancient(inputs["run"])}


def prepare_spec(w):
    """Your retriever's prepare step (prepare.smk): the settings that decide a prepared table."""
    return checked(plan.prepare_spec, config, dataset_of(w), w.variant)


def prepare_code(w):
    from memobench.retrieval.python import prepare_fingerprint

    try:
        return prepare_fingerprint(from_spec(prepare_spec(w)), STAGE_SCRIPT_PATH)
    except (ConfigError, OSError) as e:
        fail(f"config: variant {w.variant!r}: {e}")


# --------------------------------------------------------------------------- what rule all and the report read


def result_files():
    """Every result users rely on (docs/results.md#result-files), each an
    input of rule all. Snakemake makes a missing file again only when a job
    that reads it has to run: a deleted run.trec, qrels.trec or variant folder
    whose report is up to date would stay deleted, and the report go on listing
    it. As a target of rule all, a deleted result is made again (and what reads
    it, the report included). The list is every output of the jobs
    memobench.plan.result_jobs names, read from the rules themselves, so a new
    output is covered too (the retrieval logs: those listed or already made,
    plan.retrievallog_pairs); called once every rule is defined (the
    Snakefile's rule all)."""
    logs = plan.retrievallog_pairs(config, RETRIEVAL_LOGS)
    out = [p for rule, wildcards in plan.result_jobs(config, VARIANT_SPECS, logs)
           for p in _outputs_of(getattr(rules, rule), **wildcards)]
    return list(dict.fromkeys(out))


def _outputs_of(rule, **wildcards):
    return [expand(str(p), **wildcards)[0] for p in rule.output]


def present_only(paths):
    """An input function: ``paths`` less those of missing datasets (hooks.smk's missing_datasets)."""
    return lambda w: plan.drop_datasets(paths, missing_datasets())


def without_downloads(paths):
    """``paths`` of the datasets that need no download (the embedded set): an
    input of the last rule, so that their jobs start beside the downloads
    instead of waiting for the report's inputs to be known."""
    return plan.without_downloads(config, paths)


def datasets_receipts(w):
    """The last rule's receipts, once the download checkpoints have run (so
    the job is looked at again with the receipts they wrote)."""
    missing_datasets()
    return plan.receipt_files(config)


# --------------------------------------------------------------------------- wildcard constraints


wildcard_constraints:
    dataset=plan.NAME,
    variant=plan.NAME,
    segment=layout.SEGMENT_PATTERN,
    # a recipe's tokenizer (the recipe field seq) or fts5
    tokenizer="|".join([*FIELDS["seq"].metadata["choices"], FTS5_TOKENS]),
    model="|".join(embedding_inputs()),


# Imported runs (import_run.smk) are read, never ranked: the retrieve rule
# does not match them (memobench.plan.imported_variants).
IMPORTED_VARIANTS = plan.imported_variants(VARIANT_SPECS)
RANKED_VARIANTS = plan.ranked_variants(VARIANT_SPECS)
# the variants that rank turns (grain: turn): only they have a turn run (exports.smk)
TURN_VARIANTS = plan.turn_variants(VARIANT_SPECS)
