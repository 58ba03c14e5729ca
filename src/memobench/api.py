"""The Python API (docs/python-api.md): ``memobench.score``, ``memobench.load``,
``memobench.list_datasets``, ``memobench.list_variants`` and
``memobench.list_conventions`` for notebooks.

Nothing here computes a metric: :func:`score` runs ``memobench score``'s own
code (score_engine.py, which `memobench score` shares: the generated overlay, Snakemake on its targets, the cached
stages reused) for a run file, a Python function (a retriever variant naming
its file), a configured variant or a memory service, and hands back the
figures it prints; :func:`load` reads the
files the pipeline wrote into tidy DataFrames (per-question hits from the
measures' own definitions, evaluation/measures.py). pandas is imported inside
the functions: ``import memobench`` stays light for the pipeline's jobs."""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from .core.errors import excerpt

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["MemobenchError", "ScoreResult", "Results", "score", "load", "list_datasets", "list_variants",
           "list_conventions"]


class MemobenchError(Exception):
    """A memobench error: its text is the one ``memobench:`` line the command line prints."""


def _error(e: Exception) -> MemobenchError:
    from .core.secrets import mask

    return MemobenchError(mask(f"memobench: {e}"))  # a secret read from the environment, starred


@dataclass
class ScoreResult:
    """One scored run, as ``memobench score`` prints it.

    ``metrics``: the harness figures of metrics.json (its counts and rates:
    ``questions``, ``hit@k``, ``hit@k_rate``, ``mrr``, ``items``, ``skipped``,
    ``counted_as_miss``, ...); ``official``: official.json's ``official`` block
    (None where the dataset has no official scorer); ``paired``: the paired
    comparison against ``against`` (stats.py's ``compare``: per measure
    ``diff``, ``ci95``, ``p``, ``p_analytic``), None without one, and
    ``paired_note`` says why where the run covers too few questions;
    ``against_metrics``: the compared variant's figures; ``latency``: a
    memory service's search latency, as printed (evaluation/latency.py's
    ``summarize``: ``warm``/``cold`` percentiles in ms with their 95%
    intervals, ``failed``, ``ingest``; a measurement of this run), None for
    the other kinds; ``text``: the printed report."""

    dataset: str
    variant: str
    against: str | None
    metrics: dict
    official: dict | None
    paired: dict | None
    paired_note: str | None = None
    against_metrics: dict | None = None
    latency: dict | None = None
    text: str = field(default="", repr=False)

    def __str__(self) -> str:
        return self.text


def _named(block: dict | None) -> dict | None:
    """official.json's block with the name of the averaging convention its top-level figures follow
    (``convention``: ``run_retrieval``, ``all_categories``; the others under ``conventions``)."""
    if not block:
        return block
    from .score_text import official_convention

    return {"convention": official_convention(block), **block}


def _figures(m: dict) -> dict:
    """metrics.json's counts and rates (its numbers, and the skip and miss counts), not its descriptions."""
    out = {k: v for k, v in m.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    for k in ("skipped", "counted_as_miss"):
        if k in m:
            out[k] = dict(m[k])
    return out


_PATH = (str, os.PathLike)


def _checked(call: str, **given) -> None:
    """Each argument of ``call`` of a type it takes, or one ``memobench:`` line naming the first that is
    not (``given``: name -> (value, the types it may be, what it is in words)); a bool is no number."""
    for arg, (value, types, what) in given.items():
        if value is None and type(None) in types:
            continue
        number = int in types and not any(t is bool for t in types)
        if not isinstance(value, types) or (number and isinstance(value, bool)):
            raise MemobenchError(f"memobench: {call}(): {arg} is {what}; got {type(value).__name__} "
                                 f"{excerpt(repr(value))}")


def _configfiles(configfile, call: str) -> list[str]:
    """``configfile`` as a list of files: one path (a string is one file, never its characters) or several."""
    if isinstance(configfile, _PATH):
        return [os.fspath(configfile)]
    try:
        files = list(configfile)
    except TypeError:
        files = None
    if files is None or not all(isinstance(c, _PATH) for c in files):
        raise MemobenchError(f"memobench: {call}(): configfile is a config file's path, or a list of them; got "
                             f"{type(configfile).__name__} {excerpt(repr(configfile))}")
    return [os.fspath(c) for c in files]


def _callable_spec(fn: Callable | str | os.PathLike, what: str = "retriever") -> str:
    """``fn`` as the pipeline's jobs import it: ``"path/to/file.py:function"`` (a string is kept as it is).
    A function must be defined at the top level of a module that has a .py file: a lambda, a closure, a
    method bound to an object or a function of the notebook itself (``__main__``) cannot be imported by
    the jobs, which run in new processes (:class:`MemobenchError` says so, in one line)."""
    if isinstance(fn, (str, os.PathLike)):
        return os.fspath(fn)
    if not callable(fn):
        raise MemobenchError(f"memobench: {what}={fn!r}: give a function, or 'path/to/file.py:function'")
    qual, module = getattr(fn, "__qualname__", None), getattr(fn, "__module__", None)
    label = qual or repr(fn)
    why, file = None, None
    if qual is None or module is None:
        why = "it has no module and name (a functools.partial? give its keyword arguments as params=)"
    elif "<lambda>" in qual:
        why = "it is a lambda"
    elif "<locals>" in qual:
        why = "it is defined inside a function"
    elif inspect.ismethod(fn) and not inspect.isclass(fn.__self__):
        why = "it is a method bound to an object"
    elif module == "__main__":
        why = "it is defined in the notebook or script itself"
    else:
        try:
            file = inspect.getsourcefile(sys.modules[module])
        except (KeyError, TypeError):
            file = None
        found: Any = sys.modules.get(module)
        for part in qual.split("."):
            found = getattr(found, part, None)
        if file is None or not file.endswith(".py") or not Path(file).is_file():
            why = f"its module {module} has no .py file"
        elif found is not fn and getattr(found, "__func__", found) is not getattr(fn, "__func__", fn):
            why = f"{module}.{qual} is not this function (a decorator or a later definition replaced it)"
    if why:
        raise MemobenchError(f"memobench: {what} {label}: {why}; the pipeline's jobs run in new processes and "
                             f"import it from a file: put it at the top level of a .py file (e.g. my_retrievers.py "
                             f"beside the notebook) and import it from there, or give 'my_retrievers.py:function'")
    return f"{Path(file).resolve()}:{qual}"


def score(run_file: str | Path | None = None, dataset: str | None = None, against: str | None = None,
          name: str | None = None, format: str | None = None, workdir: str | Path = ".",
          configfile: str | Path | Iterable[str | Path] = (), *, retriever: Callable | str | None = None,
          params: dict | None = None, documents: str | None = None, prepare: Callable | str | None = None,
          variant: str | None = None, system: str | dict | None = None, mcp: str | None = None,
          k: int | None = None, grain: str = "session", cores: int = 1, workflow: str | Path | None = None,
          verbose: bool = False) -> ScoreResult:
    """Score one thing on ``dataset`` as ``memobench score ... --dataset DATASET`` does (the same
    pipeline, overlay and cache: a rerun with the same input does nothing) and return its figures.
    Give one of:

    * ``run_file``: a run file (``format``: ``trec``, ``json`` or ``retrievallog``, default read from
      the file), as ``memobench score RUN``;
    * ``retriever``: your Python retriever (docs/retrievers.md), a function defined at the top level of a
      .py file (the jobs import it from there, in new processes) or ``"path/to/file.py:function"`` /
      ``"module:function"``, with its ``params`` (keyword arguments of every call), ``documents``
      (``user`` or ``all``) and ``prepare`` (per-session work), as ``memobench score --retriever``;
    * ``variant``: a built-in variant or one of the config's (``"bm25s"``), as ``--variant``;
    * ``system``: a memory service's URL (or the config's ``system:`` mapping), or ``mcp``: an MCP
      server's command or URL, with ``k`` its search depth, as ``--system`` / ``--mcp``.

    ``against``: the variant to compare with (default ``v0.8.0`` where the dataset's family has it);
    ``name``: the scored variant's name (default the file's or the function's name); ``grain``:
    ``turn`` for a run or retriever ranking turns; ``workdir``: the folder holding ``results/``;
    ``configfile``: config overlays, as ``--configfile``; ``workflow``: the project's checkout (default
    ``$MEMOBENCH_WORKFLOW``, else ``workdir`` or a folder above it); ``cores``: Snakemake's ``--cores``.
    Prints nothing unless ``verbose`` (then the pipeline's progress lines as it runs, and the report).
    Raises :class:`MemobenchError` with the command's ``memobench:`` line."""
    from . import score_engine as command
    from .core.errors import ConfigError

    if dataset is None:
        raise MemobenchError("memobench: give dataset= (a configured dataset, e.g. locomo10; list_datasets() "
                             "lists them)")
    name_ = (str, type(None))
    _checked("score", run_file=(run_file, (*_PATH, type(None)), "a run file's path"),
             dataset=(dataset, (str,), "a configured dataset's name"),
             against=(against, name_, "a variant's name"), name=(name, name_, "the scored variant's name"),
             format=(format, name_, "a run format's name"), workdir=(workdir, _PATH, "a folder's path"),
             params=(params, (dict, type(None)), "a mapping of keyword arguments"),
             documents=(documents, name_, "user or all"), variant=(variant, name_, "a variant's name"),
             system=(system, (str, dict, type(None)), "a service's URL or its system: mapping"),
             mcp=(mcp, name_, "an MCP server's command or URL"), k=(k, (int, type(None)), "a whole number"),
             grain=(grain, (str,), "session or turn"), cores=(cores, (int,), "a whole number"),
             workflow=(workflow, (*_PATH, type(None)), "a folder's path"), verbose=(verbose, (bool,), "True or False"))
    configfile = _configfiles(configfile, "score")
    spec = None
    if retriever is not None:
        spec = {"callable": _callable_spec(retriever), "params": params, "documents": documents,
                "prepare": None if prepare is None else _callable_spec(prepare, "prepare")}
    elif params is not None or documents is not None or prepare is not None:
        raise MemobenchError("memobench: params=, documents= and prepare= are a retriever's; give retriever= too")
    workdir = Path(workdir)
    args = argparse.Namespace(run=None if run_file is None else str(run_file), system=system, mcp=mcp,
                              retriever=spec, variant=variant, dataset=dataset, against=against, format=format,
                              name=name, k=k, grain=grain, configfile=configfile,
                              directory=str(workdir), cores=str(cores), workflow=None, snakefile=None,
                              quiet=not verbose)
    try:
        args.snakefile = str(command.find_workflow(None if workflow is None else str(workflow),
                                                   cwd=workdir.resolve()))
        got = command.scored(args)
    except (command.ScoreError, ConfigError) as e:
        raise _error(e) from None
    if verbose:
        print(got["text"])
    paired = got["paired"]
    return ScoreResult(dataset=got["dataset"], variant=got["variant"], against=got["against"],
                       metrics=_figures(got["metrics"]), official=_named(got["official"].get("official")),
                       paired=paired if isinstance(paired, dict) else None,
                       paired_note=paired if isinstance(paired, str) else None,
                       against_metrics=None if got["against_metrics"] is None else _figures(got["against_metrics"]),
                       latency=got.get("latency"), text=got["text"])


@dataclass
class Results:
    """The pipeline's results as tidy DataFrames (docs/tables.md#the-python-apis-dataframes):
    ``outcomes`` (one row per question and variant), ``metrics`` and ``official`` (long form: one
    row per figure), ``paired`` (stats.json's comparisons, one row per measure) and ``latency``
    (latency.json, one row per service variant; empty where there is none)."""

    outcomes: pd.DataFrame
    metrics: pd.DataFrame
    official: pd.DataFrame
    paired: pd.DataFrame
    latency: pd.DataFrame

    def __repr__(self) -> str:
        return "Results(" + ", ".join(f"{k}: {len(getattr(self, k))} rows" for k in
                                      ("outcomes", "metrics", "official", "paired", "latency")) + ")"


def _read(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise MemobenchError(f"memobench: {path}: cannot read it ({e})") from None


def _file(results: Path, pattern: str, ds: str, v: str = "*") -> Path:
    from .core import layout

    return Path(layout.path(pattern, root=results, dataset=ds, variant=v))


def _variant_folders(results: Path) -> list[tuple[str, str, Path]]:
    """(dataset, variant, results folder) of every variant folder holding a metrics.json, sorted."""
    from .core import layout

    found = Path(layout.path(layout.METRICS, root=".", dataset="*", variant="*"))
    return sorted((f.parent.parent.name, f.parent.name, results) for f in results.glob(str(found)))


OUTCOME_COLUMNS = ["dataset", "variant", "q_index", "question_id", "question_type", "category", "status", "reason",
                   "in_types", "gold_rank", "n_ranked"]


def _outcomes(folders) -> pd.DataFrame:
    import pandas as pd

    from .core import layout
    from .evaluation.measures import HARNESS_MEASURES, MEASURES
    from .evaluation.official import LOCOMO_CATEGORIES

    frames = []
    for ds, v, folder in folders:
        path = _file(folder, layout.OUTCOMES, ds, v)
        if not path.is_file():
            continue
        d = pd.read_parquet(path)
        d.insert(0, "dataset", ds)
        d.insert(1, "variant", v)
        official = _file(folder, layout.OFFICIAL, ds, v)
        locomo = official.is_file() and _read(official).get("format") == "locomo"
        # LoCoMo's question type is its category's number: its name beside it (the report's)
        d["category"] = d["question_type"].map(LOCOMO_CATEGORIES) if locomo else None
        d = d[[c for c in OUTCOME_COLUMNS if c in d.columns]]
        evaluated = d["status"] == "evaluated"
        for m in HARNESS_MEASURES:  # each measure's own definition of a question's value from its rank
            d[m] = [MEASURES[m].of_rank(int(r)) if e else None for r, e in zip(d["gold_rank"], evaluated)]
            d[m] = d[m].astype("boolean" if MEASURES[m].counted else "Float64")
        frames.append(d)
    if not frames:
        return pd.DataFrame(columns=OUTCOME_COLUMNS)
    return pd.concat(frames, ignore_index=True)


def _metrics(folders) -> pd.DataFrame:
    import pandas as pd

    from .core import layout
    from .evaluation.measures import HARNESS_MEASURES

    rows = []
    for ds, v, folder in folders:
        m = _read(_file(folder, layout.METRICS, ds, v))
        blocks = [(None, m), *sorted((m.get("by_type") or {}).items())]
        for qtype, b in blocks:
            for k in HARNESS_MEASURES:
                value = b.get(f"{k}_rate", b.get(k))
                if value is None:
                    continue
                rows.append({"dataset": ds, "variant": v, "question_type": qtype, "metric": k, "value": value,
                             "count": b.get(k) if f"{k}_rate" in b else None, "questions": b.get("questions"),
                             "grain": m.get("grain", "session"), "convention": "harness"})
    return pd.DataFrame(rows, columns=["dataset", "variant", "question_type", "metric", "value", "count",
                                       "questions", "grain", "convention"])


OFFICIAL_COLUMNS = ["dataset", "variant", "grain", "subset", "convention", "metric", "value", "questions"]


def _official(folders) -> pd.DataFrame:
    """official.json's figures under each averaging convention it gives (its ``conventions``; an older file
    without them: its top-level figures, convention None), and a turn variant's at turn level."""
    import pandas as pd

    from .core import layout

    rows = []

    def add(ds, v, grain, subset, convention, block):
        for k, value in block.items():
            if "@" in k and isinstance(value, (int, float)) and not isinstance(value, bool):
                rows.append({"dataset": ds, "variant": v, "grain": grain, "subset": subset, "convention": convention,
                             "metric": k, "value": value, "questions": block.get("questions")})

    def add_block(ds, v, grain, block):
        conventions = block.get("conventions") or {None: block}
        for name, conv in conventions.items():
            add(ds, v, grain, "all", name, conv)
        if isinstance(block.get("turn2session"), dict):  # LongMemEval's session figures of a turn ranking
            add(ds, v, grain, "turn2session", next(iter(conventions)),
                {**block["turn2session"], "questions": block.get("questions")})

    for ds, v, folder in folders:
        path = _file(folder, layout.OFFICIAL, ds, v)
        if not path.is_file():
            continue
        off = _read(path)
        if off.get("official"):
            add_block(ds, v, "session", off["official"])
        if off.get("turn"):
            add_block(ds, v, "turn", off["turn"])
    return pd.DataFrame(rows, columns=OFFICIAL_COLUMNS)


PAIRED_COLUMNS = ["dataset", "variant", "baseline", "against", "metric", "n", "variant_value", "baseline_value",
                  "diff", "ci_low", "ci_high", "p", "p_analytic", "p_holm", "saturated", "source"]


def _scored_pairs(results: Path) -> list[tuple[str, dict]]:
    """The paired comparisons ``memobench score`` (and :func:`score`) kept (layout.SCORE_PAIRED), each
    while both variants' metrics.json are still the ones it compared (none newer)."""
    from .core import layout

    out = []
    for path in sorted(results.glob(str(Path(layout.path(layout.SCORE_PAIRED, root=".", dataset="*", variant="*",
                                                         against="*"))))):
        c = _read(path)
        made = [_file(results, layout.METRICS, c.get("dataset", ""), v) for v in (c.get("variant"), c.get("baseline"))]
        if all(m.is_file() and m.stat().st_mtime <= path.stat().st_mtime for m in made):
            out.append((c["dataset"], c))
    return out


def _paired(results: Path) -> pd.DataFrame:
    """stats.json's comparisons (the pipeline's stats stage), then the pairs only ``memobench score``
    compared (its kept comparisons: ``source`` says which; those have no ``p_holm``)."""
    import pandas as pd

    from .core import layout

    found = []
    for path in sorted(results.glob(str(Path(layout.path(layout.STATS, root=".", dataset="*"))))):
        s = _read(path)
        found += [(s.get("dataset", path.parent.name), c, Path(layout.STATS).name) for c in s.get("comparisons") or []]
    in_stats = {(ds, c["variant"], c["baseline"]) for ds, c, _ in found}
    found += [(ds, c, "memobench score") for ds, c in _scored_pairs(results)
              if (ds, c["variant"], c["baseline"]) not in in_stats]
    rows = []
    for ds, c, source in found:
        for k, mm in (c.get("metrics") or {}).items():
            ci = mm.get("ci95") or [None, None]
            rows.append({"dataset": ds, "variant": c["variant"],
                         "baseline": c["baseline"], "against": c.get("against"), "metric": k, "n": mm.get("n"),
                         "variant_value": mm.get("variant"), "baseline_value": mm.get("baseline"),
                         "diff": mm.get("diff"), "ci_low": ci[0], "ci_high": ci[1], "p": mm.get("p"),
                         "p_analytic": mm.get("p_analytic"), "p_holm": mm.get("p_holm"),
                         "saturated": mm.get("saturated"), "source": source})
    return pd.DataFrame(rows, columns=PAIRED_COLUMNS)


def load(results: str | Path = "results", dataset: str | None = None) -> Results:
    """Read the pipeline's results folder (``results/``) into tidy DataFrames (:class:`Results`):
    every variant folder holding a metrics.json, every dataset's stats.json, and latency.json where
    there is one; ``dataset``: that dataset's only (a folder holding several datasets has the same
    variant names in each). Reads only; runs nothing. Raises :class:`MemobenchError` for a missing
    folder or a dataset it holds no results of."""
    import pandas as pd

    from .core import layout

    _checked("load", results=(results, _PATH, "the results folder's path"))
    root = Path(results)
    if not root.is_dir():
        raise MemobenchError(f"memobench: {results}: no such results folder; give the folder the pipeline "
                             f"writes (results/ of the working directory), or run the pipeline first")
    folders = _variant_folders(root)
    if dataset is not None:
        held = sorted({ds for ds, _, _ in folders})
        folders = [f for f in folders if f[0] == dataset]
        if not folders:
            raise MemobenchError(f"memobench: {results}: no results of dataset {dataset!r}; it holds "
                                 f"{', '.join(held) or 'none'}")
    latency_json = root / Path(layout.LATENCY_JSON).relative_to(layout.RESULTS)
    latency = pd.json_normalize(_read(latency_json)) if latency_json.is_file() else pd.DataFrame()
    paired = _paired(root)
    if dataset is not None:
        paired = paired[paired["dataset"] == dataset].reset_index(drop=True)
        if "dataset" in latency.columns:
            latency = latency[latency["dataset"] == dataset].reset_index(drop=True)
    return Results(outcomes=_outcomes(folders), metrics=_metrics(folders), official=_official(folders),
                   paired=paired, latency=latency)


def _config(workdir: str | Path, configfile: Iterable[str | Path], workflow: str | Path | None) -> dict:
    from . import score_engine as command
    from .core.errors import ConfigError

    _checked("list_datasets", workdir=(workdir, _PATH, "a folder's path"),
             workflow=(workflow, (*_PATH, type(None)), "a folder's path"))
    try:
        snakefile = command.find_workflow(None if workflow is None else str(workflow), cwd=Path(workdir).resolve())
        return command.load_config(snakefile, _configfiles(configfile, "list_datasets"))
    except (command.ScoreError, ConfigError) as e:
        raise _error(e) from None


def list_datasets(workdir: str | Path = ".", configfile: str | Path | Iterable[str | Path] = (), *,
             workflow: str | Path | None = None) -> pd.DataFrame:
    """The configured datasets (config.yaml and the ``configfile`` overlays, merged as Snakemake
    merges them): one row each with its ``family``, ``format``, ``file``, ``segments`` and
    ``variants``; ``run`` says whether the config's ``run:`` list names it."""
    import pandas as pd

    from .core.config import dataset_family

    config = _config(workdir, configfile, workflow)
    run = config.get("run") or []
    return pd.DataFrame([{"dataset": name, "family": dataset_family(e), "format": e.get("format"),
                          "file": e.get("file"), "segments": e.get("segments"), "variants": list(e.get("variants") or []),
                          "run": name in run} for name, e in config["datasets"].items()],
                        columns=["dataset", "family", "format", "file", "segments", "variants", "run"])


def list_variants(family: str | None = None) -> pd.DataFrame:
    """The built-in variants, as ``memobench variants`` lists them: ``variant``, ``families``,
    ``harness``, ``description`` (the reference retrievers last); ``family`` keeps one family's."""
    import pandas as pd

    from .catalog.variant import FAMILIES
    from .cli import VARIANT_HEADER, variant_rows

    if family is not None and family not in FAMILIES:
        raise MemobenchError(f"memobench: family {family!r}: give one of {', '.join(FAMILIES)}")
    return pd.DataFrame(variant_rows([family] if family else FAMILIES), columns=list(VARIANT_HEADER))


CONVENTION_COLUMNS = ["convention", "file", "formats", "measures", "description"]


def list_conventions() -> pd.DataFrame:
    """The scoring conventions the results and the report use, one row each: ``harness`` (the Memo
    harness's rules, metrics.json: the ``convention`` of :attr:`Results.metrics`), then the official
    averaging conventions (official.json's ``conventions``: the ``convention`` of
    :attr:`Results.official`, the report's "Official metrics by convention" table). ``formats``: the
    dataset formats scored under it; ``measures``: its figures' names; ``description``: what it averages
    over."""
    import pandas as pd

    from .core import layout
    from .core.formats import FORMATS
    from .evaluation.measures import HARNESS_MEASURES
    from .evaluation.official import CONVENTIONS, metric_names
    from .evaluation.published import HARNESS_PROTOCOL

    rows = [{"convention": "harness", "file": Path(layout.METRICS).name, "formats": list(FORMATS),
             "measures": list(HARNESS_MEASURES), "description": HARNESS_PROTOCOL}]
    for name, text in CONVENTIONS.items():
        scorer = "longmemeval" if text.startswith("LongMemEval") else "locomo"  # whose convention it is
        formats = [f for f, d in FORMATS.items() if d.scorer == scorer]
        rows.append({"convention": name, "file": Path(layout.OFFICIAL).name, "formats": formats,
                     "measures": metric_names(formats[0]), "description": text})
    return pd.DataFrame(rows, columns=CONVENTION_COLUMNS)
