"""Config validation with one clear line per problem (jsonschema underneath),
the schema's defaults applied, and the checks a schema cannot express."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from .errors import ConfigError
from .formats import DEFAULT_FAMILY, FORMATS, LME_FORMATS, has_raw_file

# Dataset and variant names become path components under results/.
SAFE_NAME = r"[A-Za-z0-9][A-Za-z0-9._+-]*"
# Folders a dataset's results hold beside its variants: a variant must not take these names.
RESERVED = frozenset({"normalized", "tokens", "fts", "analyze", "segments", "logs", "cache", "exports", "prepared"})


def dataset_family(dataset: dict) -> str:
    """The family whose built-in variants and harness rules apply to a configured dataset."""
    return dataset.get("family") or DEFAULT_FAMILY[dataset["format"]]


def _where(path) -> str:
    return ".".join(str(p) for p in path) or "(top level)"


def _with_defaults(cls):
    """A validator class that fills in each property's ``default`` as it validates."""
    import jsonschema  # here, not at the top: a job reading dataset_family starts without it

    validate_properties = cls.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub and name not in instance:
                    instance[name] = sub["default"] if not isinstance(sub["default"], (list, dict)) \
                        else type(sub["default"])(sub["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(cls, {"properties": set_defaults})


def validate(config: dict, schema_path) -> None:
    """Check ``config`` against the schema (filling in its defaults), then the
    rules the schema cannot state; raise one ConfigError line for the first problem."""
    import jsonschema
    import yaml

    non_json = not_json(config)
    if non_json:
        # the config reaches the jobs as JSON (params): a value JSON cannot hold would fail there, mid-run
        raise ConfigError(f"config: {non_json}")
    # libyaml's loader where PyYAML has it: the same schema, read ten times faster at every Snakemake start
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    schema = yaml.load(Path(schema_path).read_text(encoding="utf-8"), Loader=loader)
    validator = _with_defaults(jsonschema.Draft202012Validator)(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(e.path), list(map(str, e.path))))
    if errors:
        e = errors[0]
        if e.validator == "additionalProperties":
            extra = sorted(set(e.instance) - set(e.schema.get("properties", {})))
            allowed = ", ".join(e.schema.get("properties", {}))
            what = f"unknown key {', '.join(map(repr, extra))}" + (f" (allowed: {allowed})" if allowed else "")
        elif e.validator == "required":
            what = e.message
        else:
            what = f"{e.instance!r} is not valid: {e.message}"
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        raise ConfigError(f"config: {_where(e.path)}: {what}{more}")
    check(config)


# what YAML gives for values JSON has no type for (safe_load's tags)
_YAML_TYPES = {"date": "a YAML date", "datetime": "a YAML timestamp", "set": "a YAML set (!!set)",
               "bytes": "YAML binary data (!!binary)", "int": "an integer", "float": "a number",
               "bool": "a boolean", "NoneType": "null", "tuple": "a list"}


def not_json(value, path: tuple = ()) -> str | None:
    """Where and what the first value of ``value`` that JSON cannot hold is
    (a date, a set, binary data, a non-string key, a non-finite number), as
    ``path: what; the fix``; None when it is all JSON."""
    where = _where(path)
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                return (f"{where}: key {k!r} is {_YAML_TYPES.get(type(k).__name__, f'a {type(k).__name__}')}, "
                        f"not a string; quote it ('{k}')")
            found = not_json(v, (*path, k))
            if found:
                return found
        return None
    if isinstance(value, list):
        return next((f for i, v in enumerate(value) if (f := not_json(v, (*path, i)))), None)
    if value is None or isinstance(value, (str, bool, int)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{where}: {value!r} is not a JSON number; give a finite number"
    what = _YAML_TYPES.get(type(value).__name__, f"a {type(value).__name__}")
    fix = "give a list" if isinstance(value, (set, frozenset)) else f"quote it ('{value}')" \
        if not isinstance(value, bytes) else "give a string"
    return f"{where}: {what}, which JSON cannot hold; {fix}"


def check(config: dict) -> None:
    datasets = config["datasets"]
    config.setdefault("run", list(datasets))
    for name in config["run"]:
        if name not in datasets:
            raise ConfigError(f"config: run lists {name!r}, which is not under datasets")
    for name, ds in datasets.items():
        where = f"config: dataset {name!r}"
        if not re.fullmatch(SAFE_NAME, name):
            raise ConfigError(f"{where}: a dataset name may hold only letters, digits and ._+- "
                              f"and must not start with a dot or a symbol")
        fmt = ds["format"]
        if ds.get("family") and ds["family"] not in FORMATS[fmt].families:
            raise ConfigError(f"{where}: family {ds['family']!r} does not read format {fmt!r} (its families: "
                              f"{', '.join(FORMATS[fmt].families)})")
        if has_raw_file(fmt):
            for key in ("file", "bytes"):
                if key not in ds:
                    raise ConfigError(f"{where}: {key} is required for format {fmt!r}")
            check_file(config["data_dir"], ds["file"], where)
        searched = FORMATS[fmt].searches_haystacks_of
        if searched:
            base = ds.get("haystacks_from")
            if base not in datasets or datasets[base]["format"] != searched:
                raise ConfigError(f"{where}: haystacks_from must name a {searched}-format dataset "
                                  f"(got {base!r})")
        for v in ds["variants"]:
            if not re.fullmatch(SAFE_NAME, v) or v in RESERVED:
                raise ConfigError(f"{where}: variant name {v!r} is not allowed (letters, digits and ._+- "
                                  f"only; not one of {', '.join(sorted(RESERVED))})")
    listed = {v for ds in datasets.values() for v in ds["variants"]}
    want = (config.get("statistics") or {}).get("compare", "all")
    if want != "all":
        unknown = [v for v in want if v not in listed]
        if unknown:
            raise ConfigError(f"config: statistics.compare names {', '.join(map(repr, unknown))}, which no dataset "
                              f"lists under variants")
    for v, entry in (config.get("variants") or {}).items():
        if not re.fullmatch(SAFE_NAME, v) or v in RESERVED:
            raise ConfigError(f"config: variants: name {v!r} is not allowed (letters, digits and ._+- only; "
                              f"not one of {', '.join(sorted(RESERVED))})")
        if "retriever" in entry and ({"base", "recipe"} & set(entry)):
            raise ConfigError(f"config: variants.{v}: a retriever variant takes no base or recipe (those change a "
                              f"built-in variant); give one or the other")
        if "system" in entry and ({"base", "recipe", "retriever", "run", "fuse"} & set(entry)):
            raise ConfigError(f"config: variants.{v}: a system variant takes no base, recipe, retriever, run or "
                              f"fuse (the service ranks its lists); give one or the other")
        if "fuse" in entry and ({"base", "recipe", "retriever", "run"} & set(entry)):
            raise ConfigError(f"config: variants.{v}: a fusion variant takes no base, recipe, retriever or run (it "
                              f"fuses other variants' lists); give one or the other")
        if not {"base", "retriever", "run", "fuse", "system"} & set(entry):
            raise ConfigError(f"config: variants.{v}: give base (the built-in variant it changes, with recipe), "
                              f"retriever (your own Python callable), run (another system's output file), fuse "
                              f"(other variants' lists fused) or system (a running memory service)")
    for name, ds in datasets.items():
        for v in ds["variants"]:
            for other in ((config.get("variants") or {}).get(v) or {}).get("fuse", {}).get("of") or []:
                if other not in ds["variants"]:
                    raise ConfigError(f"config: dataset {name!r}: variant {v!r} fuses {other!r}, which is not listed "
                                      f"for this dataset; add it to datasets.{name}.variants")


def check_file(data_dir: str, file: str, where: str) -> None:
    """A relative ``file`` must stay inside data_dir (an absolute path is a deliberate choice)."""
    if os.path.isabs(file):
        return
    root = os.path.normpath(os.path.abspath(data_dir))
    full = os.path.normpath(os.path.abspath(os.path.join(data_dir, file)))
    if os.path.commonpath([root, full]) != root or full == root:
        raise ConfigError(f"{where}: file {file!r} leaves data_dir; give a path inside it, or an absolute path")


def retrieval_log_pairs(config: dict) -> list[tuple[str, str]]:
    """The (dataset, variant) pairs whose ``retrievallog.jsonl`` the default
    target makes: the configured variants of LongMemEval-format datasets that
    match a ``dataset/variant`` glob of ``exports.retrieval_log`` (fnmatch,
    each side on its own), in configured order. A glob that matches none of
    them stops the run: it is a typo, or names a format with no retrieval log."""
    from fnmatch import fnmatchcase

    datasets = config["datasets"]
    wanted: set[tuple[str, str]] = set()
    for pattern in (config.get("exports") or {}).get("retrieval_log") or []:
        pds, _, pv = pattern.partition("/")
        hits = [(ds, v) for ds, entry in datasets.items() if fnmatchcase(ds, pds)
                for v in entry.get("variants") or [] if fnmatchcase(v, pv)]
        logs = [(ds, v) for ds, v in hits if datasets[ds]["format"] in LME_FORMATS]
        if not logs:
            why = (f"matches only variants of datasets of format "
                   f"{', '.join(sorted({datasets[ds]['format'] for ds, _ in hits}))}, which have no retrieval log"
                   if hits else "matches no configured variant of a dataset")
            raise ConfigError(f"config: exports.retrieval_log: {pattern!r} {why} (the retrieval log is made "
                              f"for {', '.join(sorted(LME_FORMATS))} datasets; write dataset/variant)")
        wanted.update(logs)
    pairs = [(ds, v) for ds, entry in datasets.items() for v in entry.get("variants") or []]
    return [p for p in dict.fromkeys(pairs) if p in wanted]
