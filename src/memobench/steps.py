"""The one adapter between the workflow's rules and the package.

Every rule runs ``workflow/scripts/stage.py``, which calls :func:`run` with
Snakemake's job object. :func:`run` finds the stage registered under the
rule's name, checks that the rule gives exactly the named inputs, outputs and
params the stage declares (a renamed or missing name is a bug caught on the
first run, not a silently wrong positional argument), opens the rule's log and
calls the stage with a :class:`Job`.

Each stage imports the modules it needs inside its body: the workflow derives
each stage's code fingerprint from exactly those imports (``fingerprint.py``),
so an edit reruns the stages that use the edited code and nothing else.
"""

from __future__ import annotations

import errno
import json
import sqlite3
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .errors import USER_ERRORS
from .atomic import write_json
from .progress import set_console

# Params every rule may carry for Snakemake's rerun triggers only.
TRIGGER_PARAMS = frozenset({"code", "stamp"})


@dataclass(frozen=True)
class Stage:
    name: str
    func: Callable
    inputs: frozenset[str]
    optional_inputs: frozenset[str]
    outputs: frozenset[str]
    params: frozenset[str]
    # runs third-party model code (sentence-transformers) that may want pandas
    models: bool = False


STAGES: dict[str, Stage] = {}


def stage(name: str, *, inputs=(), optional=(), outputs=(), params=(), models=False):
    """Register ``func`` as the stage that rule ``name`` runs."""

    def register(func):
        STAGES[name] = Stage(name, func, frozenset(inputs), frozenset(optional), frozenset(outputs),
                             frozenset(params), models)
        return func

    return register


class Names:
    """Read-only attribute access to one kind of a job's named files or values."""

    def __init__(self, kind: str, values: dict):
        self._kind, self._values = kind, dict(values)

    def __getattr__(self, name):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"no {self._kind} named {name!r}") from None

    def get(self, name, default=None):
        return self._values.get(name, default)

    def __contains__(self, name) -> bool:
        return name in self._values


@dataclass(frozen=True)
class Job:
    input: Names
    output: Names
    params: Names
    wildcards: Names
    log: Callable[[str], None]
    # The run's whole config: read only to share work (never a rerun trigger,
    # so nothing a stage writes may depend on it beyond its own params).
    config: dict = field(default_factory=dict)


def _named(items) -> dict:
    """Snakemake's Namedlist as {name: value}; a name bound to several files gives a list."""
    out = {}
    for name in items.keys():
        value = getattr(items, name)
        out[name] = list(value) if isinstance(value, list) else value
    return out


def check_names(st: Stage, inputs, outputs, params) -> list[str]:
    """What a rule gives that its stage does not declare, or lacks that it does."""
    problems = []
    for kind, given, required, allowed in (
        ("input", set(inputs), st.inputs, st.inputs | st.optional_inputs),
        ("output", set(outputs), st.outputs, st.outputs),
        ("params", set(params) - TRIGGER_PARAMS, st.params, st.params),
    ):
        for n in sorted(required - given):
            problems.append(f"missing {kind} {n!r}")
        for n in sorted(given - allowed):
            problems.append(f"undeclared {kind} {n!r}")
    return problems


def environment_message(e: Exception) -> str | None:
    """One line for an ordinary environment failure, with the advice that fits."""
    if isinstance(e, sqlite3.OperationalError):
        text = str(e)
        if "disk is full" in text:
            return f"SQLite: {text}; free some space and rerun (finished outputs are kept)"
        if "readonly" in text or "read-only" in text:
            return f"SQLite: {text}; check the permissions of results/"
        if "locked" in text or "busy" in text:
            return (f"SQLite: {text}: another process is using the same index; let that run finish "
                    f"(snakemake's lock stops two runs on one folder) and rerun")
        return None
    where = e.filename or "a file"
    if e.errno == errno.ENOSPC:
        return f"{where}: no space left on device; free some space and rerun (finished outputs are kept)"
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"{where}: not writable ({e.strerror}); check the permissions of results/ and data_dir"
    if e.errno == errno.EDQUOT:
        return f"{where}: disk quota exceeded; free some space and rerun"
    return None


def run(smk) -> None:
    """Run the stage registered under the rule's name (called by the workflow's script)."""
    st = STAGES.get(smk.rule)
    if st is None:
        sys.exit(f"memobench: internal error: no stage registered for rule {smk.rule!r}")
    inputs, outputs, params = _named(smk.input), _named(smk.output), _named(smk.params)
    problems = check_names(st, inputs, outputs, params)
    if problems:
        sys.exit(f"memobench: internal error: rule {smk.rule!r} does not match its stage: {'; '.join(problems)}")
    if not st.models:
        without_pandas()
    wildcards = dict(smk.wildcards.items())
    run_logged(smk.log[0], st.func, inputs, outputs, params, wildcards, dict(smk.config),
               console=f"{smk.rule} {'/'.join(map(str, wildcards.values()))}".rstrip())


def without_pandas() -> None:
    """Tell pyarrow that pandas is absent. No stage of ours uses pandas, but
    pyarrow imports it (about 0.4 s) the first time ``pa.array`` or a dataset
    read checks whether it was handed a pandas object; with ~100 jobs in a
    full run that is 40 s of CPU for nothing. A stage running model code
    (``models=True``) keeps the normal import system."""
    if "pandas" not in sys.modules and not any(isinstance(f, _NoPandas) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoPandas())


class _NoPandas:
    """An import finder for which pandas does not exist (pyarrow then treats
    it as not installed; a ``None`` in sys.modules would crash its check)."""

    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r} (not imported by memobench's jobs)", name=name)
        return None


def run_logged(log_path, func, inputs: dict, outputs: dict, params: dict, wildcards: dict,
               config: dict | None = None, console: str | None = None) -> None:
    """Run one stage with its log; exit 1 with one line on a user-facing or
    environment error. ``console``: the job's name, e.g. ``retrieve
    locomo10/v0.8.0/seg1``; a long job's progress lines also go to the
    console under it (progress.py)."""
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w", encoding="utf-8") as logf:

        def log(msg: str) -> None:
            logf.write(msg + "\n")
            logf.flush()

        def fail(msg: str) -> None:
            log(f"ERROR: {msg}")
            print(f"memobench: {msg}", file=sys.stderr)
            sys.exit(1)

        job = Job(Names("input", inputs), Names("output", outputs), Names("params", params),
                  Names("wildcard", wildcards), log, config or {})
        if console is not None:
            set_console(lambda line: print(f"memobench: {console}: {line}", file=sys.stderr, flush=True))
        try:
            func(job)
        except USER_ERRORS as e:
            fail(str(e))
        except (OSError, sqlite3.OperationalError) as e:
            msg = environment_message(e)
            if msg is None:
                raise_internal(logf, log_path, e)
            fail(msg)
        except Exception as e:  # a bug: keep the traceback in the log
            raise_internal(logf, log_path, e)
        finally:
            set_console(None)


def raise_internal(logf, log_path, e: BaseException) -> None:
    logf.write(traceback.format_exc())
    logf.flush()
    print(f"memobench: internal error {type(e).__name__}: {e} (traceback in {log_path})", file=sys.stderr)
    sys.exit(1)


# --------------------------------------------------------------------------- stages


@stage("download", outputs=["receipt"], params=["raw", "urls", "bytes", "sha256", "attempt"])
def download(job: Job) -> None:
    """Fetch the raw file unless it is already there (the verify stage judges a
    file that is there: a wrong one is reported, never replaced or deleted). A
    download that fails is recorded in the receipt, not a failed job
    (missing.py): a run of every dataset goes on with the others and says at
    its end what to place where; a target of this dataset stops at its verify
    job with that line. ``attempt`` (missing.attempt_param; the receipt keeps
    it) is the rerun trigger that retries it."""
    from .download import DownloadError, fetch
    from .missing import missing_receipt, present_receipt, retry_line

    p, dest = job.params, Path(job.params.raw)
    if dest.exists():
        job.log(f"{dest}: present ({dest.stat().st_size} bytes), not downloaded")
    else:
        retry = retry_line(dest.name, p.attempt)
        if retry:
            job.log(retry)
            print(f"memobench: {retry}", file=sys.stderr)
        try:
            fetch(p.urls, dest, p.bytes, sha256=p.sha256, log=job.log)
        except DownloadError as e:
            job.log(f"MISSING: {e}")
            print(f"memobench: {dest.name}: {e.brief}; dataset {job.wildcards.dataset} is missing "
                  f"(the run says at its end where to place the file)", file=sys.stderr)
            write_json(job.output.receipt,
                       missing_receipt(dest, str(e), p.bytes, p.sha256, p.urls, p.attempt, brief=e.brief))
            return
    write_json(job.output.receipt, present_receipt(dest, p.attempt))


@stage("verify", inputs=["receipt", "raw"], outputs=["verified"], params=["bytes", "sha256"])
def verify(job: Job) -> None:
    """Check the raw file; a dataset whose download failed has none (raw_file
    in common.smk) and fails here, the one job a target of it reaches."""
    from .download import DownloadError
    from .download import verify as verify_file
    from .provenance import file_stamp

    raw, p = job.input.raw, job.params
    if not raw:  # the download failed (missing.py): what to place where
        from .missing import how_to_get, read_receipt

        raise DownloadError(how_to_get(job.wildcards.dataset, read_receipt(job.input.receipt)))
    job.log(f"verifying {raw}: expecting {p.bytes} bytes" + (f" and sha256 {p.sha256}" if p.sha256 else ""))
    digest = verify_file(raw, p.bytes, p.sha256, log=job.log)
    size = Path(raw).stat().st_size
    job.log(f"ok: {size} bytes, sha256 {digest}")
    write_json(job.output.verified, {"dataset": job.wildcards.dataset, "file": str(raw), "bytes": size,
                                     "sha256": digest, "sha256_checked": bool(p.sha256),
                                     "stamp": file_stamp(raw)})


@stage("manifest", inputs=["verified"], outputs=["manifest"])
def manifest(job: Job) -> None:
    from .provenance import provenance

    paths = job.input.verified if isinstance(job.input.verified, list) else [job.input.verified]
    entries = [json.loads(Path(p).read_text(encoding="utf-8")) for p in paths]
    write_json(job.output.manifest, {"provenance": provenance(), "files": entries})
    job.log(f"manifest: {len(entries)} files")


@stage("normalize", optional=["verified", "base_questions"],
       outputs=["questions", "haystacks", "sessions", "events", "summary"], params=["raw", "format", "lenient"])
def normalize(job: Job) -> None:
    from . import normalize as nz

    p, out_dir = job.params, str(Path(job.output.summary).parent)
    readers = {
        "longmemeval": lambda: nz.normalize_longmemeval(p.raw, out_dir, log=job.log, lenient=p.lenient),
        "locomo": lambda: nz.normalize_locomo(p.raw, out_dir, log=job.log),
        "longmemeval_cn": lambda: nz.normalize_cn(p.raw, str(Path(job.input.base_questions).parent), out_dir,
                                                  log=job.log),
        "embedded": lambda: nz.normalize_zh(out_dir, log=job.log),
    }
    stats = readers[p.format]()
    # CN rows search another dataset's haystacks: their own tables stay empty
    from .tables import TABLES, write_table

    for name, schema in TABLES.items():
        if not Path(getattr(job.output, name)).exists():
            write_table(getattr(job.output, name), schema.empty_table())
    job.log(json.dumps(stats))
    write_json(job.output.summary, {"format": p.format, "source": str(p.raw) if p.raw else "embedded", **stats})


@stage("tokens", inputs=["events"], outputs=["tokens"])
def tokens(job: Job) -> None:
    from .tokenize import write_tokens

    write_tokens(job.input.events, job.wildcards.seq, job.output.tokens, log=job.log)


@stage("retrieve", inputs=["questions", "haystacks"],
       optional=["events", "tokens", "fts_tokens", "embeddings", "wordllama_embeddings", "prepared", "fused"],
       outputs=["rankings", "outcomes", "deep"], params=["variant", "segment", "n_segments"])
def retrieve(job: Job) -> None:
    """One variant's segment, ranked by its retriever (retrievers.py); its
    sibling variants' lists are computed in the same pass when their jobs have
    not run yet (shared_retrieval.py), each keyed by its own code fingerprint."""
    from .provenance import PROVENANCE_KEY, provenance
    from .retrievers import code_fingerprint
    from .shared_retrieval import write_segment_shared
    from .variants import from_spec

    i, o, p = job.input, job.output, job.params
    names = ("questions", "haystacks", "events", "tokens", "fts_tokens", "embeddings", "wordllama_embeddings",
             "prepared", "fused")
    script = Path(__file__).resolve().parents[2] / "workflow" / "scripts" / "stage.py"
    write_segment_shared(from_spec(p.variant), job.config, job.wildcards.dataset, p.segment, p.n_segments,
                         {n: i.get(n) for n in names}, {"rankings": o.rankings, "outcomes": o.outcomes,
                                                        "deep": o.deep}, p.code, log=job.log,
                         # where this segment was computed (SQLite and the rest), for metrics.json
                         metadata=lambda: {PROVENANCE_KEY: json.dumps(provenance(), sort_keys=True)},
                         code_of=lambda v: code_fingerprint(v, script))


@stage("prepare", inputs=["events", "sessions"], outputs=["prepared"], params=["variant"], models=True)
def prepare(job: Job) -> None:
    """A user's retriever's per-session work (its ``prepare`` callable), once
    per distinct session document of a dataset, for every segment and rerun."""
    from .pyretriever import prepare_sessions
    from .variants import from_spec

    stats = prepare_sessions(from_spec(job.params.variant), job.input.events, job.output.prepared, log=job.log,
                             sessions_path=job.input.sessions)
    job.log(f"prepare: {json.dumps(stats, sort_keys=True)}")


@stage("import_run", inputs=["run", "questions", "haystacks"], optional=["events"],
       outputs=["rankings", "outcomes", "deep"], params=["variant", "segment", "n_segments"])
def import_run(job: Job) -> None:
    """An imported run's segment: another system's lists read from its file
    (imported.py) into the tables a retrieve job writes, under the variant's
    skip rule; what the import counted goes into the outcomes' metadata."""
    from .imported import import_segment
    from .metrics import IMPORTED_KEY
    from .provenance import PROVENANCE_KEY, provenance
    from .tables import write_table
    from .variants import from_spec

    i, o, p = job.input, job.output, job.params
    (rankings, outcomes, deep), summary = import_segment(
        from_spec(p.variant), i.run, i.questions, i.haystacks, i.get("events"), job.wildcards.dataset, p.segment,
        p.n_segments, log=job.log)
    meta = {PROVENANCE_KEY: json.dumps(provenance(), sort_keys=True), IMPORTED_KEY: json.dumps(summary, sort_keys=True)}
    write_table(o.outcomes, outcomes.replace_schema_metadata(meta))
    write_table(o.deep, deep)
    write_table(o.rankings, rankings)


@stage("embeddings", inputs=["events", "sessions"], outputs=["embeddings"], params=["format", "model"],
       models=True)
def embeddings(job: Job) -> None:
    """An embedding retriever's vectors of every distinct session of a
    dataset, once: all-MiniLM-L6-v2 (``minilm``; on a CUDA GPU through
    PyTorch when both are present, else numpy on the CPU) or WordLlama
    (``wordllama``, numpy)."""
    from .baselines.embeddings import embed_sessions

    stats = embed_sessions(job.input.events, job.params.format, job.output.embeddings, log=job.log,
                           sessions_path=job.input.sessions, model=job.params.model)
    job.log(f"embeddings: {json.dumps(stats, sort_keys=True)}")


@stage("merge", inputs=["rankings", "outcomes", "deep", "data_summary", "questions", "haystacks", "events"],
       outputs=["rankings", "questions", "metrics", "deep", "official", "run"], params=["variant", "fmt"])
def merge(job: Job) -> None:
    """A variant's segments merged, then the field's yardsticks on the merged
    deep list: official metrics (official.json) and the TREC run. One job, so
    a variant's results cost one process start."""
    from . import exports
    from . import official as off
    from .metrics import concat_rankings, merge_segments
    from .tables import write_table

    i, o, w = job.input, job.output, job.wildcards
    merge_segments(w.dataset, job.params.variant, i.rankings, i.outcomes, i.data_summary,
                   o.rankings, o.questions, o.metrics, log=job.log)
    # the deep lists (depth 50), concatenated in question order like the rankings
    write_table(o.deep, concat_rankings(i.deep))
    block, _ = off.compute(job.params.fmt, i.questions, i.haystacks, i.events, o.deep, log=job.log)
    run = exports.write_run(o.deep, i.questions, w.variant, o.run, log=job.log)
    write_json(o.official, {"dataset": w.dataset, "variant": w.variant, "format": job.params.fmt,
                            "rankings": Path(o.deep).name, "official": block, "run_trec": run})


@stage("retrievallog", inputs=["deep", "questions", "haystacks", "events", "sessions"], outputs=["retrievallog"],
       params=["fmt"])
def retrievallog(job: Job) -> None:
    """A variant's retrieval log (LongMemEval formats), from its merged deep
    list, the official metrics of each question and the sessions' JSON."""
    from .exports import write_retrievallog

    i = job.input
    write_retrievallog(job.params.fmt, i.questions, i.haystacks, i.events, i.deep, job.output.retrievallog,
                       i.sessions, log=job.log)


@stage("analyze", inputs=["questions", "haystacks", "events", "tokens"], optional=["fts_tokens"],
       outputs=["rows", "summary", "md"])
def analyze(job: Job) -> None:
    from .analyze import run_analyze

    i, o = job.input, job.output
    run_analyze(i.questions, i.haystacks, i.events, o.rows, o.summary, o.md, job.wildcards.dataset,
                i.tokens, i.get("fts_tokens"), log=job.log)


@stage("falsify", inputs=["metrics"], outputs=["json", "md"])
def falsify(job: Job) -> None:
    from .falsifier import compare, markdown
    from .tables import write_text

    metrics = {}
    for path in job.input.metrics:
        m = json.loads(Path(path).read_text(encoding="utf-8"))
        metrics[m["variant"]] = m
    rows = compare(metrics)
    write_json(job.output.json, {"dataset": job.wildcards.dataset, "comparisons": rows})
    write_text(job.output.md, markdown(job.wildcards.dataset, rows))
    job.log(f"falsifier {job.wildcards.dataset}: {len(rows)} comparisons")


@stage("report", inputs=["metrics", "extras", "manifest", "official", "stats", "exports"], optional=["receipts"],
       outputs=["md", "html", "plot", "forest", "heatmap"], params=["needs"])
def report(job: Job) -> None:
    from .missing import find_missing, receipts_by_dataset
    from .report import build_report

    i, o = job.input, job.output
    missing = find_missing(receipts_by_dataset(i.get("receipts", [])), job.params.needs)
    build_report(i.metrics, i.extras, o.md, o.html, o.plot, official_paths=i.official, stats_paths=i.stats,
                 forest_out=o.forest, heatmap_out=o.heatmap, manifest_path=i.manifest, log=job.log,
                 missing=missing)


@stage("datasets", optional=["receipts"], outputs=["datasets"],
       params=["run", "needs"])
def datasets(job: Job) -> None:
    """The run's last step: results/datasets.json, which of the config's
    datasets (``run``) are there and which are missing (missing.py); the end
    of the run (datasets.smk) prints its lines and exits non-zero while one
    is missing."""
    from .missing import datasets_record, receipts_by_dataset

    record = datasets_record(job.params.run, receipts_by_dataset(job.input.get("receipts", [])), job.params.needs)
    for line in record["lines"]:
        job.log(line)
    write_json(job.output.datasets, record)


@stage("session_json", inputs=["events"], outputs=["sessions"])
def session_json(job: Job) -> None:
    """Each session's retrieval-log JSON, once per dataset (every variant's log joins it)."""
    from .exports import write_session_json

    write_session_json(job.input.events, job.output.sessions, log=job.log)


@stage("qrels", inputs=["questions"], outputs=["qrels"])
def qrels(job: Job) -> None:
    from .exports import write_qrels

    write_qrels(job.input.questions, job.output.qrels, log=job.log)


@stage("stats", inputs=["outcomes"], outputs=["stats"], params=["baselines", "compare"])
def stats(job: Job) -> None:
    """Paired statistics of a dataset's variants; outcome files are grouped by
    their variant directory (results/{dataset}/{variant}/segments/...)."""
    from .stats import dataset_stats

    variants = dict(job.params.baselines)
    outcomes: dict[str, list] = {v: [] for v in variants}
    for p in job.input.outcomes:
        outcomes[Path(p).parent.parent.name].append(p)
    write_json(job.output.stats, dataset_stats(job.wildcards.dataset, variants, outcomes, log=job.log,
                                               compare_set=list(job.params.compare)))
