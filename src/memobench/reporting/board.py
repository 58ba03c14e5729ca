"""The board: every variant whose results are in the folder, however they were made (this run's
config, an earlier run's overlay, ``memobench score``, the Python API), grouped by dataset.

A result this run's config does not make is read back from its own files and joins the report's
tables, plots and paired tests beside the run's own, unless it is stale: computed on another data
file than the one this run verified (its figures are of other questions or gold), which is listed
apart and compared with nothing. One computed by other code than the code now installed is kept
and marked: the pipeline would not remake it, so its figures are the older code's.

Each entry says where it came from, its definition (what ranked it), its data file and its date;
the leaderboard of a dataset sorts the entries by a measure with a 95% interval per figure
(Wilson's for a hit rate, the normal one for MRR)."""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path

from ..core import layout
from ..core.doc import Code, Heading, Para, Table
from ..evaluation.measures import HARNESS_MEASURES, MEASURES
from .labels import by_dataset, kind, label

THIS_RUN = "this run's config"
EARLIER = "an earlier run (another config or overlay)"
SCORED = "memobench score / the Python API"
VERIFIED = "a verified bundle (memobench verify)"

# the measures a leaderboard may be sorted by (each with a 95% interval)
BOARD_MEASURES = HARNESS_MEASURES
Z95 = 1.959963984540054


def _json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def made_by(results: Path, dataset: str, variant: str, ours: bool) -> str:
    """Where a result came from: this run's config, ``memobench score`` (its overlay is kept under
    results/.score/), or an earlier run."""
    if ours:
        return THIS_RUN
    folder = Path(layout.path(layout.METRICS, root=results, dataset=dataset, variant=variant)).parent
    if (folder / "bundle.json").is_file():  # bundle.MARKER: memobench verify rescored it and every figure held
        return VERIFIED
    overlay = Path(layout.path(layout.SCORE_OVERLAY, root=results, dataset=dataset, variant=variant))
    return SCORED if overlay.is_file() else EARLIER


def definition(m: dict) -> str:
    """What ranked a variant, as its metrics.json records it (the fields that decide its figures),
    in one line: its kind, then its recipe, retriever, fusion, run or service."""
    parts = {k: m[k] for k in ("recipe", "backend", "documents", "retriever", "fusion", "run", "system", "grain")
             if m.get(k) not in (None, {}, [])}
    run = parts.get("run")
    if isinstance(run, dict):  # an imported run: the file and its bytes, not what the import counted
        parts["run"] = {k: run[k] for k in ("file", "format", "sha256") if k in run}
    text = json.dumps(parts, sort_keys=True, default=str)  # with spaces: a long definition wraps on a page
    return f"{kind(m)} {text}" if parts else kind(m)


def date_of(path: Path) -> str:
    """A result file's date, UTC, to the minute."""
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    except OSError:
        return "-"


def data_label(m: dict) -> str:
    f = m.get("data_file") or {}
    if not f.get("file"):
        return f.get("label") or "-"
    sha = f" sha256 {f['sha256'][:12]}" if f.get("sha256") else ""
    return f"{f['file']} ({f.get('label', '-')}{sha})"


def stale_reason(m: dict, current: dict | None, source: str | None) -> tuple[str | None, str | None]:
    """(why the entry's figures are not this folder's data, why its code is not the installed
    code): ``current`` the data file this run verified for the dataset (manifest), ``source``
    the installed package's source fingerprint. The first keeps an entry out of every table and
    test; the second marks it."""
    data = None
    theirs = (m.get("data_file") or {})
    if current is not None and theirs.get("file") is not None:
        if theirs.get("sha256") and current.get("sha256") and theirs["sha256"] != current["sha256"]:
            data = (f"computed on another data file (sha256 {theirs['sha256'][:12]}; this folder's "
                    f"{current['sha256'][:12]})")
        elif theirs.get("bytes") is not None and theirs.get("bytes") != current.get("bytes"):
            data = f"computed on another data file ({theirs['bytes']} bytes; this folder's {current.get('bytes')})"
    code = None
    prov = m.get("provenance")
    made = prov.get("source") if isinstance(prov, dict) else None
    if source and made and made != source:
        code = f"computed by other code (source {made[:12]}; installed {source[:12]})"
    return data, code


def annotate(m: dict, metrics_path, results: Path, ours: bool, current: dict | None, source: str | None) -> dict:
    """``m`` (a metrics.json with its official.json folded in, read from ``metrics_path``) with its
    board facts under ``board``; ``results`` the folder the report covers."""
    data, code = stale_reason(m, current, source)
    m["board"] = {"made_by": made_by(results, m["dataset"], m["variant"], ours),
                  # the run's own are dated by the report itself: its bytes stay the same on a forced rerun
                  "definition": definition(m), "data": data_label(m),
                  "date": "this run" if ours else date_of(Path(metrics_path)),
                  "folder": str(Path(metrics_path).parent), "stale": data, "code": None if ours else code}
    return m


# --------------------------------------------------------------------------- intervals


def wilson(count: int, n: int) -> tuple[float, float] | None:
    """Wilson's 95% interval of a proportion (exact enough at 0 and n, unlike the normal one)."""
    if not n:
        return None
    p = count / n
    z2 = Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def mean_interval(values: list[float]) -> tuple[float, float] | None:
    """The normal 95% interval of a mean (MRR over the questions)."""
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean - Z95 * sd / math.sqrt(n), mean + Z95 * sd / math.sqrt(n)


def intervals(m: dict, results: Path) -> dict[str, tuple[float, float] | None]:
    """Each board measure's 95% interval: a hit rate's from metrics.json's count, a mean's (MRR) from the
    questions' values (outcomes.parquet, as stats.py reads them)."""
    out: dict = {}
    n = m.get("hit_denominator") or m.get("questions") or 0
    means = [k for k in BOARD_MEASURES if not MEASURES[k].counted]
    for k in BOARD_MEASURES:
        out[k] = wilson(m[k], n) if MEASURES[k].counted and isinstance(m.get(k), int) else None
    path = outcomes_path(m, results)
    if means and path.is_file():
        from ..evaluation.stats import read_outcomes

        per, _ = read_outcomes([path])
        for k in means:
            values = [q[k] for q in per.values() if k in q]
            # the interval only of the figure it belongs to: the same questions' mean as metrics.json's
            if values and m.get(k) is not None and abs(sum(values) / len(values) - m[k]) < 1e-9:
                out[k] = mean_interval(values)
    return out


def outcomes_path(m: dict, results: Path) -> Path:
    """A board entry's merged outcomes.parquet (beside its metrics.json)."""
    folder = (m.get("board") or {}).get("folder")
    if folder:
        return Path(folder) / Path(layout.OUTCOMES).name
    return Path(layout.path(layout.OUTCOMES, root=results, dataset=m["dataset"], variant=m["variant"]))


def value(m: dict, k: str) -> float | None:
    """A board measure as a fraction (hit rates: metrics.json's rate of the count) or in its own units (MRR)."""
    return m.get(f"{k}_rate") if MEASURES[k].counted else m.get(k)


def with_interval(m: dict, k: str, ci) -> str:
    v = value(m, k)
    if v is None:
        return "-"
    if MEASURES[k].counted:
        text = f"{100 * v:.1f}%"
        return text + (f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci else "")
    return f"{v:.4f}" + (f" [{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "")


def leaderboard(runs: list[dict], results: Path, by: str = "hit@1") -> dict[str, list[dict]]:
    """Per dataset, its entries sorted by ``by`` (best first), each a row: rank, variant, made_by,
    the measures with their intervals (``{k}``, ``{k}_low``, ``{k}_high``), date, data, definition."""
    from ..evaluation.budgets import is_budget_name

    budget = is_budget_name(by)  # recall within a token budget (official.json's budgets), sorted by as a column
    if by not in BOARD_MEASURES and not budget:
        raise ValueError(f"no measure {by!r} to sort by: one of {', '.join(BOARD_MEASURES)}, or recall_any@{{T}}tok "
                         f"or recall_all@{{T}}tok of a token budget T")
    out = {}
    for ds, ms in by_dataset(runs).items():
        rows = []
        for m in ms:
            b = m.get("board") or {}
            cis = intervals(m, results)
            row = {"dataset": ds, "variant": m["variant"], "kind": kind(m), "made_by": b.get("made_by", "-"),
                   "questions": m.get("questions")}
            for k in BOARD_MEASURES:
                ci = cis.get(k)
                row[k] = value(m, k)
                row[f"{k}_low"], row[f"{k}_high"] = ci if ci else (None, None)
            if budget:  # None for an entry without that budget (another budget list) or at turn grain: the
                # board's measures are of sessions, a turn variant's budgets of turns (another gold)
                within = m.get("budgets") or {}
                row[by] = within.get(by) if within.get("grain", "session") == "session" else None
            row.update({"code": b.get("code") or "", "date": b.get("date", "-"), "data_file": b.get("data", "-"),
                        "definition": b.get("definition", "-"), "_m": m, "_ci": cis})
            rows.append(row)
        rows.sort(key=lambda r: (r[by] is None, -(r[by] or 0), r["variant"]))
        for i, r in enumerate(rows, 1):
            r["rank"] = i
        out[ds] = rows
    return out


def board_blocks(runs: list[dict], stale: list[dict], results: Path, by: str = "hit@1") -> list:
    """The report's "Board" section: per dataset, every entry sorted by ``by`` with its 95% intervals,
    where it came from, its data file and date; then the stale entries, compared with nothing."""
    boards = leaderboard(runs, results, by)
    out: list = [Heading(2, "Board: every result in this folder, by dataset", anchor="board"),
                 Para(["Every variant whose results are in this folder, however they were made (this run's config, "
                       "an earlier run's overlay, ", Code("memobench score"), ", the Python API), sorted by ",
                       MEASURES[by].label, ". Intervals: 95%, Wilson's for a hit rate, the normal one for MRR. Each "
                       "entry is in the tables, plots and paired tests below with the others of its dataset. ",
                       Code("memobench board --by mrr"), " sorts by another measure and writes each table as CSV "
                       "and LaTeX (docs/results.md#the-board)."], cls="note")]
    for ds, rows in boards.items():
        table = [[r["rank"], label(r["_m"]) + (" (other code)" if r["code"] else ""), r["made_by"], r["questions"],
                  *(with_interval(r["_m"], k, r["_ci"].get(k)) for k in BOARD_MEASURES), r["data_file"], r["date"]]
                 for r in rows]
        out += [Heading(3, ds),
                Table(["#", "variant", "made by", "questions", *(MEASURES[k].label for k in BOARD_MEASURES),
                       "data file", "date"], table, left=(1, 2, 8, 9), cls="board")]
        coded = [r for r in rows if r["code"]]
        if coded:
            out.append(Para([f"{r['variant']}: {r['code']}; the pipeline would not remake it, so its figures are "
                             "the older code's (rerun it to refresh them). " for r in coded], cls="note"))
        out.append(Para(["Definitions: "] + [x for r in rows for x in (Code(r["variant"]), f" {r['definition']}; ")],
                        cls="note defs"))
    if stale:
        out += [Heading(3, "Stale entries"),
                Para("Results in this folder computed on another data file than the one this run verified for "
                     "their dataset: their questions or gold are not this file's, so they are in no table, plot "
                     "or paired test. Rerun them (or delete their folders) to clear this list.", cls="note"),
                Table(["dataset", "variant", "made by", "why", "date"],
                      [[m["dataset"], m["variant"], m["board"]["made_by"], m["board"]["stale"], m["board"]["date"]]
                       for m in stale], left=(0, 1, 2, 3))]
    return out


# --------------------------------------------------------------------------- paired tests over the whole board


def board_stats(runs: list[dict], stats: list[dict], results: Path, ours: set, log=print) -> list[dict]:
    """``stats`` (the run's stats.json, one per dataset) with each dataset that has entries this run
    does not make recomputed over all of its entries: every variant against its harness baseline and
    v0.8.0 where present, and every pair of them (Holm's correction over the whole family), from their
    merged outcomes. The run's own stats.json files are left as they are."""
    from ..evaluation.stats import dataset_stats

    by_ds = {s["dataset"]: s for s in stats}
    out = dict(by_ds)
    for ds, ms in by_dataset(runs).items():
        ms = [m for m in ms if outcomes_path(m, results).is_file()]  # per question: the tests' input
        if all((ds, m["variant"]) in ours for m in ms) or len(ms) < 2:
            continue
        variants = {m["variant"]: m.get("baseline") or None for m in ms}  # metrics.json's harness baseline
        outcomes = {m["variant"]: [outcomes_path(m, results)] for m in ms}
        out[ds] = dataset_stats(ds, variants, outcomes, log=log)
        log(f"board: {ds}: paired tests over {len(ms)} entries")
    return [out[ds] for ds in out]
