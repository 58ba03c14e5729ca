"""What a run of the workflow makes and what each job reads: the plan logic
behind workflow/rules/common.smk, as plain functions of the validated config.

``config`` is the config after :func:`memobench.core.config.validate` (defaults
applied); ``specs`` is :func:`variant_specs`'s ``{dataset: {variant: spec}}``.
Paths come from :mod:`memobench.core.layout`. Nothing here imports Snakemake: a
wrong target raises :class:`ConfigError` with the line common.smk prints, and
the Snakemake side (checkpoints, rule outputs, the DAG) stays in the .smk
files.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .core import layout
from .datasets.inparts import MAX_PARTS, parts_for
from .core.config import RESERVED, SAFE_NAME, dataset_family
from .core.formats import FORMATS, LME_FORMATS, has_raw_file
from .core.errors import ConfigError
from .memo.tokenize import FTS5_TOKENS
from .catalog.registry import embedding_inputs, kind_of
from .catalog.variant import LIST_FIELDS, to_spec
from .catalog.variants import resolve


# --------------------------------------------------------------------------- datasets and variants


def family(config: dict, ds: str) -> str:
    return dataset_family(config["datasets"][ds])


def variant_specs(config: dict) -> dict[str, dict[str, dict]]:
    """Every configured variant of every dataset, resolved (a bad name raises
    ConfigError before any job runs)."""
    out = {}
    for ds, entry in config["datasets"].items():
        out[ds] = {}
        for v in entry["variants"]:
            try:
                out[ds][v] = to_spec(resolve(v, family(config, ds), config["variants"]))
            except ConfigError as e:
                raise ConfigError(f"config: dataset {ds!r}: {e}") from None
    return out


def raw_path(config: dict, ds: str) -> str:
    f = config["datasets"][ds]["file"]
    return f if os.path.isabs(f) else os.path.join(config["data_dir"], f)


def base_dataset(config: dict, ds: str) -> str:
    """The dataset whose haystacks, sessions and events a dataset searches."""
    return config["datasets"][ds].get("haystacks_from", ds)


def is_lme(config: dict, ds: str) -> bool:
    return config["datasets"][ds]["format"] in LME_FORMATS


def segments(config: dict, ds: str) -> list[str]:
    return [layout.segment_name(i) for i in range(1, config["datasets"][ds]["segments"] + 1)]


def segment_files(config: dict, ds: str, variant: str, suffix: str = ".parquet") -> list[str]:
    return [layout.path(layout.SEGMENT_TABLE, dataset=ds, variant=variant, segment=s, suffix=suffix)
            for s in segments(config, ds)]


def compared(config: dict, ds: str) -> list[str]:
    """The variants of a dataset that stats.json compares pair by pair (statistics.compare), in configured order."""
    want = config["statistics"]["compare"]
    return [v for v in config["datasets"][ds]["variants"] if want == "all" or v in want]


def run_pairs(config: dict) -> list[tuple[str, str]]:
    """The run's (dataset, variant) pairs, in configured order."""
    return [(ds, v) for ds in config["run"] for v in config["datasets"][ds]["variants"]]


def falsified_datasets(config: dict, specs: dict) -> list[str]:
    """Segmented datasets that run an experiment variant next to its baseline."""
    return [ds for ds in config["run"] if len(segments(config, ds)) > 1
            and any(s["baseline"] in specs[ds] for s in specs[ds].values())]


def downloaded_datasets(config: dict) -> list[str]:
    """The datasets the run needs a raw file of (through the download
    checkpoint, then verify): those of the run with a file, and the datasets
    whose haystacks they search."""
    datasets, run = config["datasets"], config["run"]
    needed = [ds for ds in run if has_raw_file(datasets[ds]["format"])]
    needed += [base_dataset(config, ds) for ds in run if base_dataset(config, ds) != ds]
    return list(dict.fromkeys(needed))


def needs(config: dict) -> dict[str, str]:
    """dataset -> the dataset whose haystacks it searches (missing with it)."""
    return {ds: base_dataset(config, ds) for ds in config["run"] if base_dataset(config, ds) != ds}


# --------------------------------------------------------------------------- checked wildcards
# A target's wildcards, checked against the config: the line each raises is
# the one the run prints (`memobench: ...`), naming the fix.


def check_dataset(config: dict, ds: str) -> str:
    datasets = config["datasets"]
    if ds not in datasets:
        raise ConfigError(f"{layout.RESULTS}/{ds}/...: dataset {ds!r} is not configured (configured: "
                          f"{', '.join(datasets)}); add it under datasets in config.yaml or a --configfile overlay")
    return ds


def check_variant(config: dict, specs: dict, ds: str, variant: str) -> dict:
    check_dataset(config, ds)
    if variant not in specs[ds]:
        raise ConfigError(f"{layout.RESULTS}/{ds}/{variant}/...: variant {variant!r} is not listed for dataset "
                          f"{ds!r} (listed: {', '.join(specs[ds]) or 'none'}); add it to datasets.{ds}.variants")
    return specs[ds][variant]


def check_segment(config: dict, ds: str, variant: str, segment: str) -> int:
    n = config["datasets"][check_dataset(config, ds)]["segments"]
    i = layout.segment_index(segment)
    if not 1 <= i <= n:
        raise ConfigError(f"{layout.path(layout.SEGMENTS, dataset=ds, variant=variant)}/{segment}...: dataset {ds!r} has "
                          f"{n} segment(s): {layout.segment_name(1)}..{layout.segment_name(n)}")
    return i


def run_file(spec: dict, ds: str, variant: str, cwd: str) -> str:
    """An imported run's file, which must be there."""
    if not spec.get("run"):
        raise ConfigError(f"{layout.RESULTS}/{ds}/{variant}/...: variant {variant!r} is not an imported run "
                          f"under dataset {ds!r}")
    path = spec["run"]["file"]
    if not os.path.isfile(path):
        raise ConfigError(f"config: variants.{variant}.run.file: {path}: no such file (relative paths start "
                          f"from the working directory, {cwd}); give the run file's path")
    return path


def check_files(config: dict, specs: dict, cwd: str) -> None:
    """The files the run's variants name, there (an imported run's file, a
    retriever's modules), or the ConfigError line :func:`run_file` and the
    retrieve and prepare rules' code fingerprints would raise. Checked when
    the workflow is parsed: those are input functions and params of jobs
    that follow a download checkpoint, evaluated only once it has run, so
    the line came after the downloads."""
    from .retrieval.callables import sources

    for ds in config["run"]:
        for v, spec in specs[ds].items():
            if spec.get("run"):
                run_file(spec, ds, v, cwd)
            elif kind_of(spec) == "python":
                for key in ("callable", "prepare"):
                    if spec["retriever"].get(key):
                        try:
                            sources(spec["retriever"][key], cwd)
                        except (ConfigError, OSError) as e:
                            raise ConfigError(f"config: dataset {ds!r}: variant {v!r}: {e}") from None


def retrieve_spec(config: dict, spec: dict) -> dict:
    """The retrieve rule's ``variant`` param: what decides a variant's lists
    (a description does not); a user's Python retriever carries the run's
    ``user_retrievers`` limits, since a timed-out question is ranked as a miss."""
    out = {k: v for k, v in spec.items() if k in LIST_FIELDS}
    if kind_of(out) == "python":
        limits = config.get("user_retrievers") or {}
        out["retriever"] = {**out["retriever"], "limits": {k: limits[k] for k in ("timeout_s", "max_timeouts")
                                                           if k in limits}}
    return out


def prepare_spec(config: dict, ds: str, variant: str) -> dict:
    """The settings that decide a prepared table: the variant resolved for
    the dataset (the base dataset of those that search its haystacks)."""
    where = layout.path(layout.PREPARED, dataset=ds, variant=variant)
    try:
        v = resolve(variant, family(config, ds), config["variants"])
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None
    if not (v.retriever or {}).get("prepare"):
        raise ConfigError(f"{where}: variant {variant!r} is not a retriever with a prepare step")
    spec = to_spec(v)
    return {"name": spec["name"], "recipe": spec["recipe"], "skip": "",
            "retriever": {"prepare": v.retriever["prepare"], "params": v.retriever["params"]}}


# --------------------------------------------------------------------------- what each job reads


def normalized(ds: str, table: str) -> str:
    return layout.path(layout.NORMALIZED_TABLE, dataset=ds, table=table)


def normalize_inputs(config: dict, ds: str) -> dict:
    fmt = config["datasets"][ds]["format"]
    inputs = {} if not has_raw_file(fmt) else {"verified": layout.path(layout.VERIFIED, dataset=ds)}
    if FORMATS[fmt].searches_haystacks_of:
        inputs["base_questions"] = normalized(base_dataset(config, ds), "questions")
    return inputs


def normalize_threads(config: dict, ds: str) -> int:
    """The cores a dataset's normalize job asks for (Snakemake gives it at
    most ``--cores``): a large file of a format read in parts gets one per
    part it would be read in (datasets/inparts.py); its tables do not depend on it."""
    d = config["datasets"][ds]
    return parts_for(d.get("bytes"), MAX_PARTS) if FORMATS[d["format"]].reads_in_parts else 1


def search_inputs(config: dict, ds: str, names, tokenizer: str, variant: str | None = None,
                  segment: str | None = None, fused=(), grain: str = "session") -> dict:
    """The paths of the named inputs (``names``) of a job that ranks a
    dataset's questions: which ones a variant reads is its retriever's
    (memobench.catalog.registry.inputs_of; memobench.catalog.registry.input_names for the
    Memo and reference backends: the FTS5 tokens only for the FTS backend, no
    tokens for a reference retriever, its session vectors for an embedding
    retriever, a user retriever's prepared table when it has a prepare step,
    and for a fusion the segment's deep tables of the variants it fuses, its
    turn tables for a turn fusion)."""
    base = base_dataset(config, ds)
    paths = {
        "questions": normalized(ds, "questions"),
        "haystacks": normalized(base, "haystacks"),
        "events": normalized(base, "events"),
        "tokens": layout.path(layout.TOKENS, dataset=base, tokenizer=tokenizer),
        "fts_tokens": layout.path(layout.TOKENS, dataset=base, tokenizer=FTS5_TOKENS),
        **{name: layout.path(layout.EMBEDDINGS, dataset=base, model=model) for model, name in embedding_inputs().items()},
        "prepared": layout.path(layout.PREPARED, dataset=base, variant=variant),
        "fused": [layout.path(layout.SEGMENT_TABLE, dataset=ds, variant=v, segment=segment,
                              suffix=layout.SEGMENT_SUFFIXES["turns" if grain == "turn" else "deep"])
                  for v in fused],
    }
    return {n: p for n, p in paths.items() if n in names}


def import_inputs(config: dict, ds: str, variant: str, run: str, run_format: str, grain: str = "session") -> dict:
    """An import_run job's inputs: the run file and its record (its sha256, taken once for every segment)."""
    base = base_dataset(config, ds)
    inputs = {"run": run, "record": layout.path(layout.RUN_RECORD, dataset=ds, variant=variant),
              "questions": normalized(ds, "questions"), "haystacks": normalized(base, "haystacks")}
    if run_format == "retrievallog" or grain == "turn":  # scoring ids (which sessions hold a user target), turns
        inputs["events"] = normalized(base, "events")
    return inputs


def merge_inputs(config: dict, ds: str, variant: str, grain: str = "session") -> dict:
    """The variant's segments, the tables its official metrics read, and the
    check records of the raw files they came from (official.json names them)."""
    base = base_dataset(config, ds)
    files = {"verified": ds, **({"base_verified": base} if base != ds else {})}
    return {
        **{kind: segment_files(config, ds, variant, suffix) for kind, suffix in layout.SEGMENT_SUFFIXES.items()},
        "data_summary": layout.path(layout.NORMALIZED_SUMMARY, dataset=ds),
        "questions": normalized(ds, "questions"),
        "haystacks": normalized(base, "haystacks"),
        "events": normalized(base, "events"),
        **{name: layout.path(layout.VERIFIED, dataset=d) for name, d in files.items()
           if has_raw_file(config["datasets"][d]["format"])},
        # the token counts for recall within token budgets (a format with official metrics): a session
        # variant's of the sessions, a turn variant's of the turns (each its own job)
        **(({"context_turns": layout.path(layout.CONTEXT_TURNS, dataset=base)} if grain == "turn" else
            {"context": layout.path(layout.CONTEXT_SESSIONS, dataset=base)})
           if FORMATS[config["datasets"][ds]["format"]].scorer else {}),
    }


def budgets_tokenizer(config: dict) -> dict:
    """The budgets' tokenizer, named and with its file's sha256 (evaluation.context.spec_of)."""
    from .evaluation.context import spec_of

    return spec_of(config["budgets"]["tokenizer"])


def budget_tokens(config: dict) -> list[int]:
    """The token budgets, ascending and distinct."""
    return sorted(set(config["budgets"]["tokens"]))


def retrievallog_inputs(config: dict, ds: str, variant: str, grain: str = "session") -> dict:
    """The merged deep list (and a turn variant's turn lists), the tables its
    official metrics read, and the sessions' log JSON (made once per base
    dataset). A retrieval log is LongMemEval's format: asking for one of
    another format's dataset fails here."""
    if not is_lme(config, ds):
        raise ConfigError(f"{layout.path(layout.RETRIEVAL_LOG, dataset=ds, variant=variant)}: dataset {ds!r} has "
                          f"format {config['datasets'][ds]['format']!r}; a retrieval log is made for "
                          f"{', '.join(LME_FORMATS)} datasets only")
    base = base_dataset(config, ds)
    return {
        "deep": layout.path(layout.DEEP, dataset=ds, variant=variant),
        "questions": normalized(ds, "questions"),
        "haystacks": normalized(base, "haystacks"),
        "events": normalized(base, "events"),
        "sessions": layout.path(layout.SESSIONS_JSON, dataset=base),
        **({"turns": layout.path(layout.TURNS, dataset=ds, variant=variant)} if grain == "turn" else {}),
    }


def falsify_inputs(config: dict, ds: str) -> list[str]:
    return [layout.path(layout.METRICS, dataset=ds, variant=v) for v in config["datasets"][ds]["variants"]]


def stats_inputs(config: dict, ds: str) -> list[str]:
    """The segments' outcomes, not the merged metrics: stats runs beside the merge jobs."""
    return [f for v in config["datasets"][ds]["variants"]
            for f in segment_files(config, ds, v, layout.SEGMENT_SUFFIXES["outcomes"])]


def merged_outcomes(config: dict, ds: str, kind: str) -> list[str]:
    """Each variant's merged ``outcomes`` or ``official`` file (stats.json's token budgets read both)."""
    pattern = {"outcomes": layout.OUTCOMES, "official": layout.OFFICIAL}[kind]
    return [layout.path(pattern, dataset=ds, variant=v) for v in config["datasets"][ds]["variants"]]


def baselines(specs: dict, ds: str) -> dict[str, str]:
    """Each variant's harness baseline (the pairs stats.json compares), in configured order."""
    return {v: s["baseline"] for v, s in specs[ds].items()}


# --------------------------------------------------------------------------- what the run makes


def verified_files(config: dict) -> list[str]:
    return [layout.path(layout.VERIFIED, dataset=ds) for ds in downloaded_datasets(config)]


def receipt_files(config: dict) -> list[str]:
    return [layout.path(layout.RAW_RECEIPT, dataset=ds) for ds in downloaded_datasets(config)]


def metrics_files(config: dict) -> list[str]:
    return [layout.path(layout.METRICS, dataset=ds, variant=v) for ds, v in run_pairs(config)]


def other_results(config: dict) -> dict[str, str]:
    """The variants' results this folder holds that the config's run does not make (an earlier run's
    overlay, ``memobench score``): {"dataset/variant": a digest of its metrics.json and official.json}. The report
    puts them on its board beside the run's own (reporting/board.py), so that one report covers the folder; as its params
    they remake it when one appears or changes."""
    import glob
    import hashlib

    ours = set(metrics_files(config))
    out = {}
    for found in sorted(glob.glob(layout.path(layout.METRICS, dataset="*", variant="*"))):
        made = Path(found).as_posix()
        if made in ours:
            continue
        dataset, variant = Path(made).parts[-3:-1]
        digest = hashlib.sha256(Path(found).read_bytes())
        official = Path(layout.path(layout.OFFICIAL, dataset=dataset, variant=variant))
        if official.is_file():  # the report folds it in too
            digest.update(official.read_bytes())
        out[f"{dataset}/{variant}"] = digest.hexdigest()[:16]
    return out


def system_pairs(config: dict, specs: dict) -> list[tuple[str, str]]:
    """The (dataset, variant) pairs of the run's memory services (system variants)."""
    return [(ds, v) for ds, v in run_pairs(config) if kind_of(specs[ds][v]) == "system"]


def timed_pairs(config: dict, specs: dict) -> list[tuple[str, str]]:
    """The (dataset, variant) pairs the latency page shows: every timed variant of the run
    (retrieval/timings.py: memory services, reference and Python retrievers, fusions), when the run
    has a memory service or config ``latency`` asks for the page; else none (no latency rule)."""
    from .retrieval.timings import MEASURES

    if not (config.get("latency") or system_pairs(config, specs)):
        return []
    return [(ds, v) for ds, v in run_pairs(config) if kind_of(specs[ds][v]) in MEASURES]


def latency_timings(config: dict, specs: dict) -> list[str]:
    """The timings tables the latency rule reads: every segment's of every timed variant."""
    return [layout.path(layout.TIMINGS, dataset=ds, variant=v, segment=s)
            for ds, v in timed_pairs(config, specs) for s in segments(config, ds)]


def latency_metrics(config: dict, specs: dict, pattern: str = layout.METRICS) -> list[str]:
    """The timed variants' metrics.json (``pattern``: or another of their files, official.json)."""
    return [layout.path(pattern, dataset=ds, variant=v) for ds, v in timed_pairs(config, specs)]


def report_extras(config: dict, specs: dict) -> list[str]:
    """The report's analyze and falsifier sections, read from their JSON (the
    report escapes and lays out their rows itself)."""
    return [layout.path(layout.ANALYZE_SUMMARY, dataset=ds) for ds in config["run"]
            if config["datasets"][ds]["analyze"]] + [
        layout.path(layout.FALSIFIER, dataset=ds) for ds in falsified_datasets(config, specs)]


def official_files(config: dict) -> list[str]:
    """official.json per dataset x variant (the report folds them in)."""
    return [layout.path(layout.OFFICIAL, dataset=ds, variant=v) for ds, v in run_pairs(config)]


def _with_variants(config: dict) -> list[str]:
    return [ds for ds in config["run"] if config["datasets"][ds]["variants"]]


def stats_files(config: dict) -> list[str]:
    return [layout.path(layout.STATS, dataset=ds) for ds in _with_variants(config)]


def export_files(config: dict, specs: dict) -> list[str]:
    """The TREC exports (docs/protocol.md#the-output-contract), so rule all (through the report)
    makes them. Not the retrieval logs: each is about the raw file's size, made
    only where exports.retrieval_log lists it or when its path is asked for (a
    target of rule all alone, retrievallog_pairs, so one more reruns nothing
    but its job)."""
    out = [layout.path(layout.RUN_TREC, dataset=ds, variant=v) for ds, v in run_pairs(config)]
    out += [layout.path(layout.QRELS, dataset=ds) for ds in _with_variants(config)]
    # a turn variant's turn run, and the turn qrels of its dataset
    turns = [(ds, v) for ds, v in run_pairs(config) if specs[ds][v].get("grain") == "turn"]
    out += [layout.path(layout.TURN_RUN_TREC, dataset=ds, variant=v) for ds, v in turns]
    return out + [layout.path(layout.TURN_QRELS, dataset=ds) for ds in dict.fromkeys(ds for ds, _ in turns)]


def retrievallog_pairs(config: dict, listed, exists=os.path.exists) -> list[tuple[str, str]]:
    """The run's (dataset, variant) pairs whose retrieval log rule all keeps up
    to date: those exports.retrieval_log lists (``listed``,
    memobench.core.config.retrieval_log_pairs), and those whose log is there (asked
    for by its path once: remade when its variant reruns, never left stale;
    deleting it is how one stops it)."""
    listed = set(listed)
    return [(ds, v) for ds, v in run_pairs(config) if is_lme(config, ds) and (
        (ds, v) in listed or exists(layout.path(layout.RETRIEVAL_LOG, dataset=ds, variant=v)))]


def result_jobs(config: dict, specs: dict, logs) -> list[tuple[str, dict]]:
    """The (rule, wildcards) of every job whose outputs are results users rely
    on (docs/results.md#result-files), in the order rule all lists them; the
    paths are those rules' outputs (common.smk's result_files reads them from
    the rules, so a new output is covered too). ``logs``: retrievallog_pairs."""
    out = []
    for ds, v in run_pairs(config):
        out += [("retrieve", {"dataset": ds, "variant": v, "segment": s}) for s in segments(config, ds)]
        out.append(("merge", {"dataset": ds, "variant": v}))
        # a user retriever's prepared table: read only by up-to-date retrieve
        # jobs, a deleted one would otherwise stay deleted
        if ((specs.get(ds) or {}).get(v, {}).get("retriever") or {}).get("prepare"):
            out.append(("prepare", {"dataset": base_dataset(config, ds), "variant": v}))
    out += [("retrievallog", {"dataset": ds, "variant": v}) for ds, v in logs]
    for ds in config["run"]:
        if config["datasets"][ds]["variants"]:
            out += [("qrels", {"dataset": ds}), ("stats", {"dataset": ds})]
        if config["datasets"][ds]["analyze"]:
            out.append(("analyze", {"dataset": ds}))
    out += [("falsify", {"dataset": ds}) for ds in falsified_datasets(config, specs)]
    if timed_pairs(config, specs):
        out.append(("latency", {}))
    return out + [("report", {}), ("manifest", {})]


# --------------------------------------------------------------------------- missing datasets (memobench.datasets.missing)


def drop_datasets(paths, datasets) -> list[str]:
    """``paths`` less those of the given datasets (results/{dataset}/...)."""
    prefixes = tuple(p for ds in datasets for p in layout.dataset_prefixes(ds))
    return [p for p in paths if not (prefixes and p.startswith(prefixes))]


def without_downloads(config: dict, paths) -> list[str]:
    """``paths`` of the datasets that need no download (the embedded set)."""
    downloaded, waits = downloaded_datasets(config), needs(config)
    keep = tuple(p for ds in config["run"] if ds not in downloaded and ds not in waits
                 for p in layout.dataset_prefixes(ds))
    return [p for p in paths if keep and p.startswith(keep)]


def end_lines(config: dict, planned) -> list[str]:
    """What the end of a run says about its missing datasets (memobench.datasets.missing.end_lines):
    those of ``planned`` (the datasets whose download job the run holds) whose
    raw file is not there and whose receipt records a failed download, and
    those that search their haystacks. Read from the receipts themselves,
    whatever ran before."""
    from .datasets.missing import end_lines as lines_of, find_missing, read_receipt

    receipts = {ds: read_receipt(layout.path(layout.RAW_RECEIPT, dataset=ds)) for ds in downloaded_datasets(config)
                if ds in planned and not os.path.exists(raw_path(config, ds))}
    missing = find_missing(receipts, {ds: b for ds, b in needs(config).items() if b in planned})
    return lines_of(missing, [ds for ds in config["run"] if ds not in missing])


# --------------------------------------------------------------------------- wildcard constraints

# a reserved folder name is never a variant or dataset (the wildcard is always followed by "/")
NAME = f"(?!(?:{'|'.join(sorted(RESERVED))})/){SAFE_NAME}"


def imported_variants(specs: dict) -> str:
    """The variant names of imported runs, as a regex ("(?!)", matching
    nothing, when there is none): the import_run rule reads them, the
    retrieve rule never ranks them."""
    return "|".join(sorted({re.escape(v) for vs in specs.values() for v, s in vs.items() if s.get("run")})) or "(?!)"


def turn_variants(specs: dict) -> str:
    """The variant names that rank turns (``grain: turn``), as a regex ("(?!)" when none)."""
    return "|".join(sorted({re.escape(v) for vs in specs.values() for v, s in vs.items()
                            if s.get("grain") == "turn"})) or "(?!)"


def ranked_variants(specs: dict) -> str:
    return f"(?!(?:{imported_variants(specs)})/){NAME}"


def what_ranked(spec: dict) -> dict:
    """What ranked a variant, as metrics.json states it (``spec``: the rule's variant params): its
    ``kind`` and only what applies to it. The Memo engine's whole ``recipe``; a reference retriever's
    recipe backend and documents (the rest of a recipe is the Memo pipeline's); a Python retriever's
    ``retriever`` (callable, prepare, params, documents); a fusion's ``fusion`` (of, method, k); a
    memory service's ``system`` (services.definition.variant.public: protocol, address without secrets, grain). An
    imported run is its ``run`` block."""
    kind, recipe = kind_of(spec), spec["recipe"]
    if kind == "memo":
        return {"kind": kind, "recipe": recipe}
    if kind == "reference":
        return {"kind": kind, "recipe": {k: recipe[k] for k in ("backend", "documents")}}
    if kind == "python":
        return {"kind": kind, "retriever": {**spec["retriever"], "documents": recipe["documents"]}}
    if kind == "fusion":
        return {"kind": kind, "fusion": spec["retriever"]}
    if kind == "system":
        from .services.definition.variant import public

        return {"kind": kind, "system": public(spec["retriever"], spec.get("grain", "session"))}
    return {"kind": kind}


def merge_spec(spec: dict) -> dict:
    """The merge rule's variant params: the variant's spec and what ranked it (:func:`what_ranked`),
    stated here so that the merge job, which writes it into metrics.json, imports no retriever's code
    (an edit to one reruns its variants' merges only through their retrieve jobs)."""
    return {**spec, "ranked": what_ranked(spec)}
