# Config validation, input functions and helpers shared by all rules.

import hashlib
import os
import re
from pathlib import Path

import sys


sys.path.insert(0, os.path.join(workflow.basedir, "src"))  # the package, installed or not

import memobench
from memobench.config import validate
from memobench.errors import ConfigError
from memobench.variants import resolve, to_spec



def _config_error(msg):
    # One clear line, no traceback and no schema dump.
    print(f"memobench: {msg}", file=sys.stderr)
    sys.exit(1)


try:
    validate(config, os.path.join(workflow.basedir, "workflow", "schemas", "config.schema.yaml"))
except ConfigError as e:
    _config_error(str(e))

DATA_DIR = config["data_dir"]
DATASETS = config["datasets"]
CUSTOM_VARIANTS = config.get("variants") or {}
RUN = config.get("run", list(DATASETS))
RESULTS = "results"
PKG_DIR = Path(memobench.__file__).parent
DEFAULT_FAMILY = {"longmemeval": "s", "locomo": "locomo", "longmemeval_cn": "cn", "embedded": "zh"}


for _name in RUN:
    if _name not in DATASETS:
        _config_error(f"config: run lists {_name!r}, which is not under datasets")
for _name, _ds in DATASETS.items():
    if _ds["format"] == "longmemeval_cn" and _ds.get("haystacks_from") not in DATASETS:
        _config_error(f"config: dataset {_name!r}: haystacks_from must name a longmemeval dataset")
    for _key in ("file", "bytes"):
        if _ds["format"] != "embedded" and _key not in _ds:
            _config_error(f"config: dataset {_name!r}: {_key} is required for format {_ds['format']!r}")


def family(ds):
    return DATASETS[ds].get("family") or DEFAULT_FAMILY[DATASETS[ds]["format"]]


def variant_spec(ds, name):
    try:
        return to_spec(resolve(name, family(ds), CUSTOM_VARIANTS))
    except ConfigError as e:
        _config_error(f"config: dataset {ds!r}: {e}")


# Resolve every configured variant now, so a bad name fails before any job runs.
VARIANT_SPECS = {ds: {v: variant_spec(ds, v) for v in DATASETS[ds].get("variants", [])} for ds in DATASETS}


def raw_path(ds):
    f = DATASETS[ds]["file"]
    return f if os.path.isabs(f) else os.path.join(DATA_DIR, f)


def code_hash(*modules):
    """Hash of the package modules a rule runs; a params entry, so editing
    them reruns exactly the rules that use them (and what follows)."""
    h = hashlib.sha256()
    for m in modules:
        h.update((PKG_DIR / f"{m}.py").read_bytes())
    return h.hexdigest()[:16]


NORMALIZE_CODE = code_hash("normalize", "tables", "dates", "jsmath", "errors")
RETRIEVE_CODE = code_hash("engine", "tokenize", "jsmath", "variants", "retrieval", "stemmer", "timewords")
TOKENS_CODE = code_hash("tokenize", "retrieval", "tables")
FTS_INDEX_CODE = code_hash("ftsindex", "tables")
MERGE_CODE = code_hash("metrics", "retrieval", "steps")


def norm_dir(ds):
    return f"{RESULTS}/{ds}/normalized"


def base_dataset(ds):
    """The dataset whose haystacks, sessions and events a dataset searches."""
    return DATASETS[ds].get("haystacks_from", ds)


def segments(ds):
    return [f"seg{i}" for i in range(1, DATASETS[ds].get("segments", 1) + 1)]


def segment_files(ds, variant, suffix=".parquet"):
    return [f"{RESULTS}/{ds}/{variant}/segments/{s}{suffix}" for s in segments(ds)]


def run_pairs():
    return [(ds, v) for ds in RUN for v in DATASETS[ds].get("variants", [])]


def falsified_datasets():
    """Segmented datasets that run an experiment variant next to its baseline."""
    out = []
    for ds in RUN:
        specs = VARIANT_SPECS[ds]
        if len(segments(ds)) > 1 and any(s["baseline"] in specs for s in specs.values()):
            out.append(ds)
    return out


def report_extras():
    return [f"{RESULTS}/{ds}/analyze/analyze.md" for ds in RUN if DATASETS[ds].get("analyze")] + [
        f"{RESULTS}/{ds}/falsifier.md" for ds in falsified_datasets()
    ]


def verified_files():
    return [f"{RESULTS}/{ds}/verified.json" for ds in RUN if DATASETS[ds]["format"] != "embedded"] + [
        f"{RESULTS}/{base_dataset(ds)}/verified.json" for ds in RUN if base_dataset(ds) != ds
    ]


TABLE_NAMES = ["questions", "haystacks", "sessions", "events"]


def normalize_inputs(w):
    ds = w.dataset
    inputs = {"verified": f"{RESULTS}/{ds}/verified.json"}
    if DATASETS[ds]["format"] == "longmemeval_cn":
        inputs["base_questions"] = f"{norm_dir(base_dataset(ds))}/questions.parquet"
    return inputs


def retrieve_inputs(w):
    """A retrieve (or analyze) job's inputs; the FTS index only for the FTS backend."""
    base = base_dataset(w.dataset)
    recipe = VARIANT_SPECS[w.dataset][w.variant]["recipe"] if "variant" in w.keys() else {"seq": "ascii", "backend": "fts"}
    inputs = {
        "questions": f"{norm_dir(w.dataset)}/questions.parquet",
        "haystacks": f"{norm_dir(base)}/haystacks.parquet",
        "events": f"{norm_dir(base)}/events.parquet",
        "tokens": f"{RESULTS}/{base}/tokens/{recipe['seq']}.parquet",
    }
    if recipe["backend"] == "fts":
        inputs["fts_index"] = f"{RESULTS}/{base}/fts/index.sqlite"
    return inputs


wildcard_constraints:
    dataset="|".join(re.escape(d) for d in DATASETS),
    segment=r"seg[0-9]+",
    seq="ascii|cjkr|zh|exp6|prod",


wildcard_constraints:
    variant="|".join(re.escape(v) for specs in VARIANT_SPECS.values() for v in specs) or "^$",
