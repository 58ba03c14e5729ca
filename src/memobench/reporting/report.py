"""results/report.md, results/report.html (real tables) and the plots.

Two families of numbers sit side by side and are labelled everywhere:

* **harness metrics** (hit@k, MRR): the Memo harness's own rules, the numbers
  this project reproduces exactly, with the published value beside ours;
* **official metrics** (recall_any@k, recall_all@k, ndcg_any@k): LongMemEval's
  own retrieval scoring (docs/protocol.md#official-metrics), LoCoMo's evidence recall.

One unit per metric everywhere, tables and plots alike: hit@k and recall in
percent of the questions (their differences in percentage points), MRR as the
harness prints it, a fraction from 0 to 1 (its differences in MRR units).

Paired statistics (stats.py) give each variant's difference to its baseline
and to v0.8.0 with a 95% interval, its minimum detectable difference, its
randomization p-value and its McNemar or t-test p-value with that p-value
after Holm's correction beside it (figures.py names each by its test), in one
table per dataset and a forest plot
with one row of panels per dataset (each on its own scale); a matrix per
dataset marks who beats whom on hit@1 and MRR after the correction, over every
pair of the compared variants; a table per dataset splits each comparison by
question type. Reference
retrievers (docs/baselines.md: bm25-official, bm25s, fts5-bm25, minilm,
wordllama), a user's retrievers, imported runs and fusions of other variants'
lists are variants like the others, labelled as such.

Both files are written from the same structured blocks (doc.py): every value
from data or configuration is escaped for Markdown and for HTML, and the HTML
is never made by parsing the Markdown.
"""

from __future__ import annotations

import html
import json
import os
from decimal import Decimal
from pathlib import Path

from ..doc import Bullets, Cell, Code, Group, Heading, Html, Keep, Para, Strong, Table, to_html, to_markdown
from ..errors import DataError
from ..jsmath import to_fixed
from ..datasets.missing import blocks as missing_blocks
from ..evaluation.official import LOCOMO_CATEGORIES
from ..evaluation.published import GUIDE_TABLE, HARNESS_PROTOCOL, PUBLISHED_OFFICIAL, published
from ..catalog.registry import kind_of
from ..evaluation.stats import ALPHA, BOOTSTRAP, PERMUTATIONS, POWER, REFERENCE, fmt_ci
from .figures import TESTS, difference, level, p_randomization, p_test, percent, printed
from ..tables import atomic_path, write_text

METRICS = ("hit@1", "hit@5", "hit@10", "mrr")
HITS = ("hit@1", "hit@5", "hit@10")
PAIRED = ("hit@1", "hit@5", "mrr")  # what stats.json compares
MATRIX = ("hit@1", "mrr")  # the metrics of the comparison matrix: they still discriminate where hit@5 and hit@10 saturate
BETTER, WORSE, EVEN = "▲", "▼", "·"
DATA_COUNTS = {
    "date_fallbacks": "unparseable dates (harness fallback used)",
    "evidence_unmatched": "evidence strings matching no dia_id",
    "duplicate_question_ids": "duplicate question ids",
    "unparseable_items": "elements that did not parse (skipped)",
    "truncated_tail": "truncated last element (not read)",
    "unpaired": "CN rows pairing to no question",
}


def is_reference(m: dict) -> bool:
    """A run of a reference retriever (its recipe's backend), not a Memo variant."""
    return kind_of(m) == "reference"


def is_imported(m: dict) -> bool:
    """An imported run: another system's lists read from a file (imported.py)."""
    return bool(m.get("run"))


def is_yours(m: dict) -> bool:
    """A run of a user's Python retriever (config ``variants.<name>.retriever``; pyretriever.py)."""
    return kind_of(m) == "python"


def is_fusion(m: dict) -> bool:
    """A fusion of other variants' lists (config ``variants.<name>.fuse``; fusion.py)."""
    return kind_of(m) == "fusion"


def kind(m: dict) -> str:
    """What ranked a run: Memo, a reference retriever, an imported run, your retriever, or a fusion."""
    return ("reference retriever" if is_reference(m) else "imported run" if is_imported(m)
            else "your retriever" if is_yours(m) else "fusion" if is_fusion(m) else "Memo")


def label(m: dict) -> str:
    """The variant's name as the report's tables show it."""
    return m["variant"] if kind(m) == "Memo" else f"{m['variant']} ({kind(m)})"


def metric_name(key: str) -> str:
    return "MRR" if key == "mrr" else key


def is_locomo(m: dict) -> bool:
    return (m.get("data") or {}).get("format") == "locomo" or m.get("skip_rule") == "locomo"


def type_label(m: dict, t: str) -> str:
    """A question type as the report names it: LoCoMo's categories with their names."""
    name = LOCOMO_CATEGORIES.get(t) if is_locomo(m) else None
    return f"{t} ({name})" if name else t


def _diff(m: dict, key: str, theirs: str) -> str:
    """Difference at the published value's own precision (0.651 is 3 decimals)."""
    digits = len(theirs.split(".")[1]) if "." in theirs else 0
    d = Decimal(printed(m, key, digits)) - Decimal(theirs)
    return "=" if d == 0 else f"{d:+}"


def _e(x) -> str:
    return html.escape(str(x))


def _by_dataset(runs: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for m in runs:
        out.setdefault(m["dataset"], []).append(m)
    return out


# ---------------------------------------------------------------- sections (both formats)


def reading_guide(html_colours: bool = False) -> list:
    """How to read the report, at its top (the HTML names its colours)."""
    harness, official, shaded, colours = (
        (" (blue headers: ", " (orange headers: ", " Cells at 95% or more are shaded: saturated, a difference is hard "
         "to see there.", " Green: the interval lies above 0; red: below.") if html_colours else (" (", " (", "", ""))
    return [Bullets([
        [Strong("Harness metrics"), f"{harness}hit@1, hit@5, hit@10, MRR) follow the Memo harness's rules: "
         "the first rank of a gold session in the top 10, over the questions the harness evaluates. They "
         "reproduce the published numbers, shown with the difference (", Code("="), " when equal at the "
         "printed digit)."],
        [Strong("Official metrics"), f"{official}recall_any@k, recall_all@k, ndcg_any@k) follow "
         "LongMemEval's own retrieval scoring (gold: the haystack sessions whose id contains ", Code("answer"),
         " and whose user turns carry the answer; abstention and no-user-target questions excluded), or LoCoMo's "
         "evidence sessions. hit@10 is not recall_all@10: quote the one whose rules match the number you "
         "compare against."],
        [Strong("Units"), ": hit@k and recall are percentages of the questions, their differences percentage "
         "points; MRR is a fraction from 0 to 1 as the harness prints it, its differences in MRR units. n is "
         f"the number of questions behind a rate.{shaded}"],
        [Strong("Paired differences"), f": per question, the variant minus what it is compared against, over the "
         f"questions both evaluated; the mean with a bootstrap 95% interval ({BOOTSTRAP:,} resamples) and a "
         f"two-sided paired randomization p-value ({PERMUTATIONS:,} sign flips; ", Code(f"p < {1 / PERMUTATIONS:g}"),
         " when no flip was as extreme, the most the test can say). Every comparison on a dataset uses the same "
         f"resamples, so identical outcomes give identical intervals.{colours}"],
        [Strong("Multiple comparisons"), ": each difference also has the p-value of an exact McNemar test (hit@k) "
         "or a paired t-test (MRR), and beside it, as ", Code("Holm"), ", that p-value after Holm's correction over "
         "every pair of variants compared on the dataset, per metric; Holm corrects these, not the randomization "
         "p. The comparison matrix marks only differences that survive it. ", Code("MDE"), " is the minimum "
         f"detectable difference at that n ({100 * (1 - ALPHA):g}% two-sided, {100 * POWER:g}% power): a "
         "smaller observed difference is one the set is too small to show reliably."],
    ], cls="note")]


def _published_cell(m: dict, key: str, pub: dict) -> str:
    """Markdown main table: ``60.2% (1190) / 60.2 =``."""
    ours = printed(m, key)
    if ours is None:
        return "-"
    text = ours + ("%" if key != "mrr" else "")
    if key != "mrr":
        text += f" ({m[key]})"
    if key in pub:
        text += f" / {pub[key]} {_diff(m, key, pub[key])}"
    return text


def md_main(runs: list[dict]) -> list:
    rows = []
    for m in runs:
        pub = published(m["dataset"], m["variant"])
        rnd = (m.get("random") or {}).get("hit@1")
        rows.append([m["dataset"], label(m), m["questions"], *(_published_cell(m, k, pub) for k in METRICS),
                     percent(rnd)])
    return [Heading(2, "Harness metrics"),
            Para(["Each cell: our value (count) / the published value and the difference (", Code("="),
                  " when equal to the printed digit). Rates are over the evaluated questions."]),
            Table(["dataset", "variant", "questions", "hit@1", "hit@5", "hit@10", "MRR", "random hit@1"], rows,
                  left=2)]


def md_official(runs: list[dict]) -> list:
    rows = []
    for m in runs:
        o = m.get("official")
        if not o:
            continue
        exc = ", ".join(f"{k} {v}" for k, v in o["excluded"].items())
        rows.append([m["dataset"], label(m), o["questions"], exc, o["depth"]]
                    + [percent(o.get(f"{n}@{k}")) for k in (5, 10) for n in ("recall_any", "recall_all", "ndcg_any")])
    if not rows:
        return []
    return [Heading(2, "Official metrics (LongMemEval's own scoring, LoCoMo's evidence sessions; not the harness's "
                       "hit@k)"),
            Para("recall_all@k: every gold session in the top k; recall_any@k: at least one; ndcg_any@k with "
                 "LongMemEval's discount. Averaged over the file's questions less abstention and no-user-target "
                 "questions (LongMemEval); LoCoMo over questions with evidence sessions."),
            Table(["dataset", "variant", "n", "excluded", "depth", "recall_any@5", "recall_all@5", "ndcg_any@5",
                   "recall_any@10", "recall_all@10", "ndcg_any@10"], rows, left=2)]


def _against(c: dict) -> str:
    """What a comparison is against: the baseline's name, and why when it is the
    variant's own harness baseline."""
    return f"{c['baseline']} (harness baseline)" if c.get("against") == "harness baseline" else c["baseline"]


def _delta_cell(c: dict, key: str) -> Cell:
    mm = c["metrics"][key]
    if mm["diff"] is None:
        return Cell("-")
    lo, hi = mm["ci95"]
    cls = "up" if lo > 0 else "down" if hi < 0 else ""
    if mm.get("saturated"):
        cls += " sat"
    lv = (lambda x: "-" if x is None else f"{x:.4f}") if key == "mrr" else percent
    title = (f"{c['variant']} {lv(mm['variant'])}, {c['baseline']} {lv(mm['baseline'])} over the {c['n']} "
             f"paired questions" + (" (saturated: 95% or more)" if mm.get("saturated") else ""))
    value, interval = difference(mm, key).split(" ", 1)
    return Cell([Keep(value), " ", Keep(interval)], cls=f"{cls} lines".strip(), title=title,
                note=_mde_note(mm, key))


def _mde_text(x, key: str) -> str:
    return f"{100 * x:.1f}" if key != "mrr" else f"{x:.4f}"


def _mde_note(mm: dict, key: str) -> str | None:
    """The pair's minimum detectable difference, in the difference's unit."""
    return None if mm.get("mde") is None else f"MDE {_mde_text(mm['mde'], key)}"


def _p_cell(mm: dict, key: str, n_perm: int) -> Cell:
    """The randomization p, and under it the test's p that Holm corrects, with the corrected one beside it.
    In HTML (class lines) a cell breaks only between a test's name and its value or between two p-values, so
    the table fits the page."""
    label, value = p_randomization(mm, n_perm).split(" ", 1)
    test = p_test(mm, key)
    parts = test.split(", ") if test else []
    note = [Keep(parts[0]), *(x for part in parts[1:] for x in (", ", Keep(part)))] if parts else None
    return Cell([Keep(label), " ", Keep(value)], cls="lines", note=note)


def paired_blocks(runs: list[dict], stats: list[dict]) -> list:
    """One table per dataset: every comparison once, against its harness
    baseline and against v0.8.0."""
    by_key = {(m["dataset"], m["variant"]): m for m in runs}
    out = []
    for s in stats:
        comps = s["comparisons"]
        if not comps:
            continue
        n_perm = s.get("permutations", PERMUTATIONS)
        rows = []
        for c in comps:
            m = by_key.get((s["dataset"], c["variant"]), {})
            only = [f"{c[k]} only in the {w}" for k, w in (("only_variant", "variant"), ("only_baseline", "baseline"))
                    if c.get(k)]
            row = [c["variant"], kind(m), _against(c),
                   Cell(c["n"], note="; ".join(only) or None)]
            for k in PAIRED:
                row += [_delta_cell(c, k), _p_cell(c["metrics"][k], k, n_perm)]
            rows.append(row)
        header = ["variant", "kind", "against", "n (paired)"]
        for k in PAIRED:
            unit = "points" if k != "mrr" else "MRR units"
            header += [f"Δ{metric_name(k)} ({unit}) [95% CI]", f"p: randomization; {TESTS[k]}, Holm"]
        out += [Heading(3, s["dataset"]), Table(header, rows, left=3, cls="paired")]
    if not out:
        return []
    return [Heading(2, f"Paired differences (harness metrics): against the harness baseline and {REFERENCE}",
                    anchor="paired"),
            Para(["Variant minus the variant in ", Strong("against"), ", per question over the questions both "
                  "evaluated: the mean difference with its bootstrap 95% interval and, after it, the minimum "
                  "detectable difference (", Code("MDE"), "); the paired randomization p-value, then the McNemar "
                  "(hit@k) or paired t-test (MRR) p-value with, beside it, that p-value after Holm's correction over "
                  "all the dataset's pairs (", Code("Holm"), "), each named by its test. hit@k in "
                  "percentage points, MRR in MRR units. Each pair appears once."], cls="note"),
            Html("<p class='note'>Green: the interval lies above 0; red: below. A shaded difference: one of its "
                 "two rates is 95% or more (saturated). Hover a difference for both rates.</p>"),
            *out]


def _oriented(s: dict) -> dict[tuple[str, str], tuple[dict, int]]:
    """{(row, column): (the pair's metrics, +1 or -1 to read them as row minus column)}."""
    out = {}
    for p in s.get("pairs") or []:
        out[(p["variant"], p["baseline"])] = (p, 1)
        out[(p["baseline"], p["variant"])] = (p, -1)
    return out


def _mark(mm: dict, sign: int, alpha: float) -> str:
    if mm.get("p_holm") is None or mm["diff"] is None or mm["p_holm"] > alpha or mm["diff"] == 0:
        return EVEN
    return BETTER if sign * mm["diff"] > 0 else WORSE


def _signed(mm: dict, sign: int, key: str) -> str:
    if mm["diff"] is None:
        return "-"
    lo, hi = mm["ci95"]
    flipped = {"diff": sign * mm["diff"], "ci95": [lo, hi] if sign > 0 else [-hi, -lo]}
    return difference(flipped, key)


def _mde_line(s: dict) -> Para | None:
    """The dataset's minimum detectable differences, beside which to read the observed ones."""
    pw = s.get("power") or {}
    ms = pw.get("metrics") or {}
    parts = []
    for k in PAIRED:
        m = ms.get(k) or {}
        if not m.get("pairs"):
            continue
        unit = " points" if k != "mrr" else ""
        parts.append(f"{metric_name(k)} {_mde_text(m['mde_median'], k)}{unit} ({_mde_text(m['mde_min'], k)} to "
                     f"{_mde_text(m['mde_max'], k)}; {_mde_text(m['mde_first_holm_step'], k)} at Holm's first step)")
    if not parts:
        return None
    m0 = next(ms[k] for k in PAIRED if (ms.get(k) or {}).get("pairs"))
    n = f"{m0['n_min']}" if m0["n_min"] == m0["n_max"] else f"{m0['n_min']} to {m0['n_max']}"
    family = (s.get("holm") or {}).get("pairs", {}).get(MATRIX[0], m0["pairs"])
    return Para([Strong("Minimum detectable difference"), f" at n = {n} paired questions "
                 f"({100 * (1 - pw.get('alpha', ALPHA)):g}% two-sided, {100 * pw.get('power', POWER):g}% power, "
                 "(z + z) · sd(d) / √n; the median over the dataset's pairs, their range, and at the level of Holm's "
                 f"first step, α / {family}): " + "; ".join(parts) + ". An observed difference below it is one "
                 "this set is unlikely to show; a saturated rate (95% or more) shrinks both."], cls="note")


def matrix_blocks(runs: list[dict], stats: list[dict]) -> list:
    """Per dataset, who beats whom on hit@1 and MRR after Holm's correction:
    rows and columns the compared variants (numbered), a cell marked when the
    row variant is significantly better or worse than the column one."""
    out = []
    for s in stats:
        names = s.get("compared") or []
        if len(names) < 2:
            continue
        alpha = (s.get("holm") or {}).get("alpha", ALPHA)
        pairs = _oriented(s)
        rows = []
        for i, r in enumerate(names):
            cells, tally = [], {k: [0, 0] for k in MATRIX}
            for j, c in enumerate(names):
                if i == j or (r, c) not in pairs:
                    cells.append(Cell("", cls="diag" if i == j else ""))
                    continue
                p, sign = pairs[(r, c)]
                marks = [_mark(p["metrics"][k], sign, alpha) for k in MATRIX]
                for k, mk in zip(MATRIX, marks):
                    tally[k][0] += mk == BETTER
                    tally[k][1] += mk == WORSE
                cls = "up" if BETTER in marks and WORSE not in marks else \
                    "down" if WORSE in marks and BETTER not in marks else "mixed" if BETTER in marks else ""
                title = f"{r} − {c} over {p['n']} questions: " + "; ".join(
                    f"{metric_name(k)} {_signed(p['metrics'][k], sign, k)}, {p_test(p['metrics'][k], k)}"
                    for k in MATRIX)
                cells.append(Cell("".join(marks), cls=cls, title=title))
            wins = " · ".join(f"{w}/{lo}" for w, lo in tally.values())
            rows.append([f"{i + 1}", r, *cells, wins])
        header = ["#", "variant", *[Cell(str(j + 1), title=c) for j, c in enumerate(names)],
                  f"better/worse than ({' · '.join(metric_name(k) for k in MATRIX)})"]
        family = (s.get("holm") or {}).get("pairs", {})
        size = ", ".join(f"{metric_name(k)} {family[k]}" for k in MATRIX if k in family)
        line = _mde_line(s)
        out += [Heading(3, s["dataset"]),
                Para(f"Row minus column. First mark hit@1, second MRR: {BETTER} the row variant is better, "
                     f"{WORSE} worse, with a Holm-adjusted p of {alpha:g} or less (family: the dataset's distinct "
                     f"pairs, per metric: {size}); {EVEN} no difference that survives the correction. The last "
                     "column counts the columns each row beats and loses to.", cls="note"),
                Html("<div class='scroll'>"), Table(header, rows, left=(1,), cls="matrix"), Html("</div>")]
        if line:
            out.append(line)
    if not out:
        return []
    return [Heading(2, "Who beats whom: every pair, after Holm's correction", anchor="matrix"),
            Para(["Each dataset's compared variants (", Code("statistics.compare"), "), pair by pair over the questions "
                  "both evaluated: hit@1 (McNemar's exact test) and MRR (paired t-test), Holm-corrected per dataset "
                  "and metric. In the HTML report a cell's tooltip gives the differences with their 95% intervals "
                  "and the adjusted p-values; every figure is in stats.json (", Code("pairs"), ")."], cls="note"),
            *out]


def type_paired_blocks(runs: list[dict], stats: list[dict]) -> list:
    """Per dataset, each comparison's paired difference per question type
    (LoCoMo: category): hit@1 with its 95% interval, MRR under it; uncorrected."""
    by_key = {(m["dataset"], m["variant"]): m for m in runs}
    out = []
    for s in stats:
        comps = [c for c in s["comparisons"] if c.get("by_type")]
        if not comps:
            continue
        types = list(dict.fromkeys(t for c in comps for t in c["by_type"]))
        m0 = next((by_key[(s["dataset"], c["variant"])] for c in comps if (s["dataset"], c["variant"]) in by_key),
                  {})
        n = {t: max(c["by_type"][t]["n"] for c in comps if t in c["by_type"]) for t in types}
        rows = []
        for c in comps:
            row = [c["variant"], _against(c)]
            for t in types:
                b = c["by_type"].get(t)
                if b is None:
                    row.append("-")
                    continue
                h, r = b["metrics"]["hit@1"], b["metrics"]["mrr"]
                if h["diff"] is None:
                    row.append("-")
                    continue
                lo, hi = h["ci95"] or (0, 0)
                cls = "up" if lo > 0 else "down" if hi < 0 else ""
                row.append(Cell(difference(h, "hit@1"), cls=cls, note=fmt_ci(r, 1, 3),
                                title=f"n {b['n']}; hit@1: {p_randomization(h)}; MRR: {p_randomization(r)} (uncorrected)"))
            rows.append(row)
        header = ["variant", "against", *[f"{type_label(m0, t)} (n {n[t]})" for t in types]]
        out += [Heading(3, s["dataset"]), Table(header, rows, left=2, cls="paired bytype")]
    if not out:
        return []
    return [Heading(2, "Paired differences per question type (LongMemEval) or category (LoCoMo)", anchor="typediff"),
            Para(["Each comparison of the paired table over one type's questions, on the same resamples restricted "
                  "to them. Each cell: Δhit@1 in percentage points with its 95% interval, then (under it in the HTML) "
                  "ΔMRR in MRR units with its interval. Not corrected for multiplicity: read them as where a difference comes from, not as "
                  "findings of their own. Green: the hit@1 interval lies above 0; red: below."], cls="note"),
            *out]


def variant_table(runs: list[dict]) -> list:
    """The guide's variant table (LongMemEval-S), rebuilt from the runs present."""
    by_key = {(m["dataset"], m["variant"]): m for m in runs}
    rows = []
    for name, v, verdict in GUIDE_TABLE:
        m = by_key.get(("longmemeval_s", v))
        if m is None:
            continue
        pub = published("longmemeval_s", v)
        rows.append([[name, " (", Code(v), ")"], " / ".join(level(m, k) for k in METRICS),
                     " / ".join(pub.get(k, "-") for k in METRICS), verdict])
    if not rows:
        return []
    return [Heading(2, "Variant table (LongMemEval-S, benchmark guide)"),
            Table(["variant", "ours: hit@1 / hit@5 / hit@10 / MRR", "published", "guide's verdict"], rows)]


def _type_table(m: dict) -> Table:
    rows = [[type_label(m, t), b["questions"], *(level(b, k) for k in HITS),
             "-" if b.get("mrr") is None else to_fixed(b["mrr"], 3)] for t, b in m["by_type"].items()]
    first = "category" if is_locomo(m) else "type"
    return Table([first, "n", "hit@1", "hit@5", "hit@10", "MRR"], rows)


def _run_facts(m: dict) -> str:
    """Pool, counts and data notes of a run: the same for every variant of a dataset, as a rule."""
    facts = []
    if m.get("mean_pool_size"):
        rnd = m["random"]
        facts.append(f"Mean pool {m['mean_pool_size']:.1f} sessions; random ranking: hit@1 {percent(rnd['hit@1'])}, "
                     f"hit@5 {percent(rnd['hit@5'])}, hit@10 {percent(rnd['hit@10'])}.")
    skipped = ", ".join(f"{k} {v}" for k, v in m["skipped"].items()) or "none"
    forced = ", ".join(f"{k} {v}" for k, v in m["counted_as_miss"].items()) or "none"
    facts.append(f"Items {m['items']}; evaluated {m['questions']}; skipped: {skipped}; counted as misses: {forced}.")
    data = {k: v for k, v in (m.get("data") or {}).items() if k in DATA_COUNTS and v}
    if data:
        facts.append("Data: " + ", ".join(f"{DATA_COUNTS[k]} {v}" for k, v in data.items()) + ".")
    return " ".join(facts)


def _run_card(m: dict, facts: bool) -> list:
    out = [Heading(4, label(m)), Para(f"{m['description']} ({m['harness']}).", cls="note")]
    if facts:
        out.append(Para(_run_facts(m), cls="note"))
    if is_imported(m):
        r = m["run"]
        ignored = ", ".join(f"{k} {v}" for k, v in r["ignored"].items()) or "none"
        out.append(Para(["Imported run: ", Code(r["file"]),
                         f" ({r['format']}, sha256 {r['sha256'][:16]}); lists for {r['questions_listed']} questions; "
                         f"absent from the run (counted as misses): {r['absent']}; lists ignored for questions the "
                         f"harness rules skip: {ignored}; cut at depth 50: {r['truncated']}."], cls="note"))
    out += retriever_checks(m)
    if m.get("by_type"):
        out.append(_type_table(m))
    segs = m.get("segments") or []
    if len(segs) > 1:
        out.append(Table(["segment", "n", "hit@1", "hit@5", "hit@10", "MRR"],
                         [[s["segment"], s["questions"], *(level(s, k) for k in METRICS)] for s in segs]))
        mm = m.get("mrr_mean_of_printed_segments")
        if mm is not None:
            out.append(Para(f"Mean of the printed segment MRRs (how the published M total was formed): "
                            f"{to_fixed(mm, 4)}; exact merged MRR: {printed(m, 'mrr')}.", cls="note"))
    return out


def retriever_checks(m: dict) -> list:
    """What a user retriever's jobs checked (metrics.json ``determinism``
    and ``timeouts``; pyretriever.py): a note under its card, bold where a
    check failed."""
    det, out = m.get("determinism"), m.get("timeouts")
    if det is None:
        return []
    n = det["checked"]
    if det["differing"]:
        text = [Strong(f"Nondeterministic: {det['differing']} of the {n} questions ranked twice got two different "
                       f"rankings"), f" ({', '.join(det['questions'])}); its numbers would change on a rerun."]
    else:
        text = [f"Deterministic on the {n} questions ranked twice."]
    if out and out["count"]:
        text += [" ", Strong(f"{out['count']} questions took more than {out['limit_s']} s and were ranked as empty "
                             f"lists (misses): {', '.join(out['questions'])}.")]
    return [Para(text, cls="note")]


def per_type_blocks(runs: list[dict], heatmap: str | None = None) -> list:
    out = [Heading(2, "Per question type (LongMemEval) or category (LoCoMo), per variant", anchor="types"),
           Para("Harness metrics over each type's evaluated questions; LoCoMo's categories carry the names of the "
                "LoCoMo paper's question types. The harness prints MRR per type with 3 decimals.", cls="note")]
    if heatmap:
        out.append(Html(f"<img src='{_e(heatmap)}' alt='harness hit@1 per question type'>"))
    for ds, ms in _by_dataset(runs).items():
        facts = {_run_facts(m) for m in ms}
        shared = len(facts) == 1
        out.append(Heading(3, ds))
        if shared:
            text = facts.pop()
            out.append(Para(f"Every variant: {text[:1].lower()}{text[1:]}", cls="note"))
        out.append(Group([_run_card(m, not shared) for m in ms]))
    return out


def provenance_rows(env: dict) -> list[list]:
    """(what, version) rows of an environment: whether SQLite has FTS5 is said
    beside its version (the record's ``fts5`` is a flag, not a version)."""
    rows = []
    for k, v in env.items():
        if k == "fts5":
            continue
        if k == "sqlite" and "fts5" in env:
            v = f"{v} ({'FTS5 compiled in' if env['fts5'] else 'without FTS5'})"
        rows.append([k, v])
    return rows


def provenance_blocks(manifest_path, runs) -> list:
    """What produced the results, once: the environment of the runs (a run
    computed with another SQLite, Python or library version is named), and the
    package source fingerprints with how many runs used each, in words."""
    envs: dict[str, list[str]] = {}
    sources: dict[str, list[str]] = {}
    for r in runs:
        provs = r.get("provenance")
        for prov in (provs if isinstance(provs, list) else [provs]):
            prov = dict(prov or {})
            src = prov.pop("source", "unknown")
            sources.setdefault(src, []).append(f"{r['dataset']}/{r['variant']}")
            envs.setdefault(json.dumps(prov, sort_keys=True), []).append(f"{r['dataset']}/{r['variant']}")
    if not envs and manifest_path is not None:
        prov = dict(json.loads(Path(manifest_path).read_text(encoding="utf-8")).get("provenance", {}))
        sources[prov.pop("source", "unknown")] = []
        envs[json.dumps(prov, sort_keys=True)] = []
    if not envs:
        return []
    out = [Heading(2, "Provenance", anchor="provenance")]
    ordered = sorted(envs.items(), key=lambda kv: -len(kv[1]))
    for n, (env, names) in enumerate(ordered):
        if n:
            out.append(Para(f"Also computed with other versions: {', '.join(names)}"))
        out.append(Table(["what", "version"], provenance_rows(json.loads(env)), left=2))
    explain = ("The source fingerprint is a hash (sha256, first 16 hex digits) of the memobench package's own "
               "source files (its .py, .txt and .json files) as they were when a run was computed: the same "
               "fingerprint means the same code. ")
    if len(sources) == 1:
        ((src, names),) = sources.items()
        count = f"all {len(names)} runs" if names else "the run"
        out.append(Para([explain, f"One fingerprint for {count} of this report: ", Code(src),
                         ", so one version of the code computed every number here."]))
    else:
        parts: list = [explain, f"The runs of this report were computed by {len(sources)} versions of the code: "]
        for i, (src, names) in enumerate(sorted(sources.items(), key=lambda kv: -len(kv[1]))):
            parts += ["; " if i else "", Code(src), f" ({len(names)} runs: {', '.join(names)})"]
        parts.append(". Numbers from different fingerprints may not be comparable: rerun the older runs.")
        out.append(Para(parts))
    return out


def extra_blocks(path) -> list:
    """An analyze summary (analyze/summary.json) or a falsifier result (falsifier.json) as report blocks."""
    d = json.loads(Path(path).read_text(encoding="utf-8"))
    if isinstance(d, dict) and "ceilings" in d:
        from ..evaluation.analyze_section import blocks

        return blocks(d["dataset"], d)
    if isinstance(d, dict) and "comparisons" in d:
        from ..evaluation.falsifier import blocks

        return blocks(d["dataset"], d["comparisons"])
    raise DataError(path, None, "neither an analyze summary nor a falsifier result")


# ---------------------------------------------------------------- HTML only

CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em 2em;max-width:1336px;color:#222;line-height:1.35}
h2{margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:0.15em}
table{border-collapse:collapse;margin:0.4em 0 1.4em;font-size:0.86em;max-width:100%}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right;vertical-align:top}
th{background:#f2f2f2}
td.l,th.l{text-align:left}
td.wrap{overflow-wrap:anywhere}
table.missing{min-width:40em} table.missing td.l:first-child{white-space:nowrap;color:#444}
.line{display:block}
table.paired td:not(.l),table.paired td:first-child{white-space:nowrap}
table.paired th:not(.l){white-space:normal}
table.paired td.lines,table.paired td.lines .sub{white-space:normal} .keep{white-space:nowrap}
th.harness{background:#dde8f6} th.official{background:#f6e7d6}
td.sat{background:#fff3c4}
td.up{color:#1a7f37;font-weight:600} td.down{color:#b42318;font-weight:600}
.pub,.sub{color:#666;font-size:0.85em;display:block;white-space:nowrap;font-weight:400}
.eq{color:#1a7f37}.ne{color:#b42318}
.note{color:#444;font-size:0.92em;max-width:78em}
ul.note li{margin:0.2em 0}
nav{font-size:0.92em;margin:0.5em 0 1em}
nav a{margin-right:1.2em}
code{background:#f3f3f3;padding:0 3px;border-radius:3px;font-size:0.92em}
.group{display:flex;flex-wrap:wrap;gap:0 2.2em;align-items:flex-start}
.card{flex:0 0 26em}
.card h4{margin:0.6em 0 0.2em}
.scroll{overflow-x:auto;max-width:100%}
table.matrix{font-size:0.8em}
table.matrix td,table.matrix th{padding:1px 3px;text-align:center;white-space:nowrap}
table.matrix th:last-child{white-space:normal}
table.matrix td.l,table.matrix th.l{text-align:left}
table.matrix td.up{background:#e3f4e8} table.matrix td.down{background:#fbe4e2} table.matrix td.mixed{background:#fff3c4}
table.matrix td.diag{background:#f2f2f2}
table.bytype th:not(.l){white-space:normal;max-width:11em}
img{max-width:100%}
"""


def _rate_cell(m: dict, key: str, pub: dict) -> str:
    ours = printed(m, key)
    if ours is None:
        return "<td>-</td>"
    sat = key != "mrr" and m.get(key + "_rate") is not None and m[key + "_rate"] >= 0.95
    text = ours + ("%" if key != "mrr" else "")
    if key != "mrr":
        text += f" <small>({m[key]}/{m['hit_denominator']})</small>"
    if key in pub:
        d = _diff(m, key, pub[key])
        text += (f"<span class='pub'>published {_e(pub[key])} "
                 f"<span class='{'eq' if d == '=' else 'ne'}'>{_e(d)}</span></span>")
    title = " title='95% or more: saturated, differences are hard to see'" if sat else ""
    return f"<td class='{'sat' if sat else ''}'{title}>{text}</td>"


def _official_cells(o: dict | None, names: list[str]) -> str:
    if not o:
        return "".join("<td>-</td>" for _ in names) + "<td>-</td>"
    cells = [f"<td>{_e(o['questions'])}</td>"]
    for n in names:
        k = int(n.split("@")[1])
        v = o.get(n)
        if v is None:
            cells.append("<td>-</td>")
            continue
        mark = "<sup title='k beyond the list depth: the list is shorter than k'>†</sup>" if k > o["depth"] else ""
        sat = n.startswith("recall") and v >= 0.95
        cells.append(f"<td class='{'sat' if sat else ''}'>{percent(v)}{mark}</td>")
    return "".join(cells)


def html_main_tables(runs: list[dict]) -> list[str]:
    out = []
    for ds, ms in _by_dataset(runs).items():
        offs = [m.get("official") for m in ms if m.get("official")]
        lme = any("ndcg_any@5" in o for o in offs)
        names = ([f"{n}@{k}" for k in (5, 10) for n in ("recall_any", "recall_all", "ndcg_any")] if lme
                 else [f"{n}@{k}" for k in (5, 10) for n in ("recall_any", "recall_all")])
        rules = ("LongMemEval official rules" if lme else "LoCoMo evidence sessions") if offs else "none for this format"
        out.append(f"<h3>{_e(ds)}</h3><table>")
        out.append("<tr><th class='l' rowspan='2'>variant</th>"
                   "<th class='harness' colspan='5'>HARNESS metrics (Memo harness rules, what we reproduce)</th>"
                   f"<th class='official' colspan='{len(names) + 1}'>OFFICIAL metrics ({_e(rules)})</th>"
                   "<th rowspan='2'>random hit@1</th></tr>")
        out.append("<tr><th class='harness'>n</th>" + "".join(
            f"<th class='harness'>{k}</th>" for k in ("hit@1", "hit@5", "hit@10", "MRR"))
            + "<th class='official'>n</th>" + "".join(f"<th class='official'>{n}</th>" for n in names) + "</tr>")
        for m in ms:
            pub = published(m["dataset"], m["variant"])
            rnd = (m.get("random") or {}).get("hit@1")
            out.append(f"<tr><td class='l'>{_e(label(m))}</td><td>{_e(m['questions'])}</td>"
                       + "".join(_rate_cell(m, k, pub) for k in METRICS)
                       + _official_cells(m.get("official"), names)
                       + f"<td>{percent(rnd)}</td></tr>")
        out.append("</table>")
        excl = [(label(m), m["official"]) for m in ms if m.get("official")]
        if excl:
            o0 = excl[0][1]
            parts = ", ".join(f"{k} {v}" for k, v in o0["excluded"].items())
            extra = ""
            if "categories_1_4" in o0:
                names14 = ", ".join(f"{c} {LOCOMO_CATEGORIES[c]}" for c in ("1", "2", "3", "4"))
                extra = (f" Categories 1-4 only ({names14}; mem0's convention leaves out 5, adversarial): "
                         + "; ".join(f"{_e(v)} recall_all@10 {percent(o['categories_1_4'].get('recall_all@10'))} "
                                     f"(n {_e(o['categories_1_4']['questions'])})" for v, o in excl) + ".")
            out.append(f"<p class='note'>Official: averaged over {_e(o0['questions'])} questions; excluded: "
                       f"{_e(parts)}; lists to depth {_e(o0['depth'])} († marks k beyond it). Questions a variant "
                       f"gave no list count with an empty list.{extra}</p>")
    return out


def html_report(runs, stats, extras: list, images: dict[str, str], missing: list | None = None) -> str:
    """``extras``: blocks (analyze, falsifier, provenance); ``missing``: the missing-datasets blocks."""
    paired = paired_blocks(runs, stats)
    matrix = matrix_blocks(runs, stats)
    by_type = type_paired_blocks(runs, stats)
    nav = ([("missing", "Missing datasets")] * bool(missing) + [("results", "Results")]
           + [("paired", "Paired differences")] * bool(paired) + [("matrix", "Who beats whom")] * bool(matrix)
           + [("typediff", "Differences per type")] * bool(by_type) + [("types", "Per question type")]
           + [("hitk", "hit@k plot")] * bool(images.get("hitk"))
           + [("provenance", "Provenance")] * any(b and b[0].text == "Provenance" for b in extras))
    out = ["<!doctype html><html><head><meta charset='utf-8'><title>memobench report</title>"
           f"<style>{CSS}</style></head><body>", "<h1>memobench report</h1>",
           "<nav>" + "".join(f"<a href='#{a}'>{_e(t)}</a>" for a, t in nav) + "</nav>",
           to_html(reading_guide(html_colours=True))]
    if missing:
        out.append(to_html(missing))
    out.append("<h2 id='results'>Harness and official metrics</h2>")
    out += html_main_tables(runs)
    if paired:
        out.append(to_html(paired[:3]))
        if images.get("forest"):
            out.append(f"<img src='{_e(images['forest'])}' alt='forest plot of the paired differences'>")
        out.append(to_html(paired[3:]))
    out.append(to_html(matrix))
    out.append(to_html(by_type))
    out.append(to_html(per_type_blocks(runs, images.get("heatmap"))))
    if images.get("hitk"):
        out.append(f"<h2 id='hitk'>hit@k per dataset and variant</h2><img src='{_e(images['hitk'])}' alt='hit@k plot'>")
    out.append(to_html(variant_table(runs)))
    for blocks in extras:
        out.append(to_html(blocks))
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def markdown_report(runs, stats, extras: list, missing: list | None = None) -> str:
    blocks = [Heading(1, "memobench report"), *reading_guide(), *(missing or []), *md_main(runs),
              *md_official(runs), *paired_blocks(runs, stats), *matrix_blocks(runs, stats),
              *type_paired_blocks(runs, stats), *variant_table(runs), *per_type_blocks(runs)]
    for b in extras:
        blocks += b
    return to_markdown(blocks).rstrip("\n") + "\n"


# ---------------------------------------------------------------- plots

STYLE = {"font.size": 11, "axes.titlesize": 12, "axes.labelsize": 11, "xtick.labelsize": 10,
         "ytick.labelsize": 10, "legend.fontsize": 10}
UP, DOWN, FLAT = "#1a7f37", "#b42318", "#555555"
INSIDE_FROM = 90  # hit@k plot: a bar longer than this (%) carries its value inside its end, within the axis


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, png_out) -> None:
    import matplotlib.pyplot as plt

    with atomic_path(png_out) as tmp:
        fig.savefig(tmp, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)


def plot(runs: list[dict], png_out) -> None:
    """Harness hit@1/5/10 as horizontal bars with their values, one panel per dataset."""
    plt = _pyplot()
    by_ds = _by_dataset(runs)
    heights = [0.62 * len(ms) + 1.2 for ms in by_ds.values()] or [2.0]
    colors = {"hit@1": "#1f4e8c", "hit@5": "#4f8fd6", "hit@10": "#a8c8ee"}
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(len(heights), 1, figsize=(12, sum(heights) + 0.5),
                                 gridspec_kw={"height_ratios": heights}, squeeze=False)
        bar = 0.27
        for ax, (ds, ms) in zip(axes[:, 0], by_ds.items()):
            for j, k in enumerate(HITS):
                ys = [i + (j - 1) * bar for i in range(len(ms))]
                vals = [m.get(k + "_rate") for m in ms]
                ax.barh(ys, [100 * (v or 0) for v in vals], bar, label=k, color=colors[k])
                for y, v, m in zip(ys, vals, ms):
                    if v is None:
                        continue
                    # the value the tables print: after the bar, or inside its end where it would pass 100%
                    inside = 100 * v > INSIDE_FROM
                    ax.text(100 * v + (-0.8 if inside else 0.8), y, printed(m, k), va="center", fontsize=10,
                            ha="right" if inside else "left", color="white" if inside and k != "hit@10" else "black")
            ax.set_yticks(range(len(ms)), [label(m) for m in ms])
            ax.set_ylim(len(ms) - 0.5, -0.5)
            ax.set_xlim(0, 100)  # a rate: the axis ends at 100%
            ax.set_xticks(range(0, 101, 20))
            n = max(m["questions"] for m in ms)
            ax.set_title(f"{ds}: harness hit@k, % of the evaluated questions (n = {n})", loc="left")
            ax.set_xlabel("% of evaluated questions")
        if not by_ds:
            axes[0, 0].text(0.5, 0.5, "no runs", ha="center", transform=axes[0, 0].transAxes)
        handles, names = axes[0, 0].get_legend_handles_labels()
        if handles:
            fig.legend(handles, names, loc="upper right", ncol=3, frameon=False)
        fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / (sum(heights) + 0.5)))
    _save(fig, png_out)


def forest_plot(stats: list[dict], png_out) -> None:
    """Each comparison's mean difference with its 95% interval: one row of
    panels per dataset (hit@1, hit@5 in points; MRR in MRR units), each panel
    on its own scale, so a dataset of 11 questions does not flatten another's."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    groups = [(s["dataset"], [c for c in s["comparisons"] if c["n"]]) for s in stats]
    groups = [(ds, cs) for ds, cs in groups if cs]
    heights = [0.42 * len(cs) + 1.3 for _, cs in groups] or [2.0]
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(len(heights), 3, figsize=(13, sum(heights)),
                                 gridspec_kw={"height_ratios": heights}, squeeze=False)
        for row, (ds, cs) in zip(axes, groups):
            names = [f"{c['variant']} − {c['baseline']}" for c in cs]
            for ax, key in zip(row, PAIRED):
                scale = 1 if key == "mrr" else 100
                ends = [0.0]
                for i, c in enumerate(cs):
                    mm = c["metrics"][key]
                    lo, hi = mm["ci95"]
                    d = mm["diff"]
                    color = DOWN if hi < 0 else UP if lo > 0 else FLAT
                    ax.errorbar([scale * d], [i], xerr=[[scale * (d - lo)], [scale * (hi - d)]], fmt="o",
                                color=color, ms=5, capsize=3)
                    ends += [scale * lo, scale * hi]
                span = (max(ends) - min(ends)) or (1.0 if scale == 100 else 0.01)
                ax.set_xlim(min(ends) - 0.08 * span, max(ends) + 0.08 * span)
                ax.axvline(0, color="#999", lw=0.8)
                ax.set_ylim(len(cs) - 0.5, -0.5)
                ax.set_yticks(range(len(cs)), names if key == "hit@1" else [""] * len(cs))
                ax.set_xlabel(f"Δ {metric_name(key)} " + ("(MRR units)" if key == "mrr" else "(percentage points)"))
                ax.grid(axis="x", color="#eee")
                ax.xaxis.set_major_locator(MaxNLocator(nbins=6))
            n = max(c["n"] for c in cs)
            row[0].set_title(f"{ds} (n = {n} paired questions)", loc="left", fontweight="bold")
        if not groups:
            axes[0, 0].text(0.5, 0.5, "no comparisons", transform=axes[0, 0].transAxes, ha="center")
        fig.tight_layout()
    _save(fig, png_out)


def heatmap(runs: list[dict], png_out) -> None:
    """Harness hit@1 (%) per question type, one panel per dataset, the colour bar in %."""
    plt = _pyplot()
    by_ds = {ds: [m for m in ms if m.get("by_type")] for ds, ms in _by_dataset(runs).items()}
    by_ds = {ds: ms for ds, ms in by_ds.items() if ms}
    heights = [0.42 * len(ms) + 1.9 for ms in by_ds.values()] or [2.0]
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(len(heights), 1, figsize=(12, sum(heights)),
                                 gridspec_kw={"height_ratios": heights}, squeeze=False)
        for ax, (ds, ms) in zip(axes[:, 0], by_ds.items()):
            types = list(dict.fromkeys(t for m in ms for t in m["by_type"]))
            grid = [[(100 * m["by_type"][t]["hit@1_rate"]
                      if t in m["by_type"] and m["by_type"][t].get("hit@1_rate") is not None else float("nan"))
                     for t in types] for m in ms]
            im = ax.imshow(grid, aspect="auto", vmin=0, vmax=100, cmap="viridis")
            for i, (m, row) in enumerate(zip(ms, grid)):
                for j, (t, v) in enumerate(zip(types, row)):
                    if v == v:  # the value the per-type tables print
                        ax.text(j, i, printed(m["by_type"][t], "hit@1"), ha="center", va="center", fontsize=10,
                                color="white" if v < 60 else "black")
            n = {t: max(m["by_type"].get(t, {}).get("questions", 0) for m in ms) for t in types}
            ax.set_xticks(range(len(types)), [f"{type_label(ms[0], t)}\n(n {n[t]})" for t in types])
            ax.set_yticks(range(len(ms)), [label(m) for m in ms])
            kind = "category" if is_locomo(ms[0]) else "question type"
            ax.set_title(f"{ds}: harness hit@1 (%) per {kind}", loc="left")
            fig.colorbar(im, ax=ax, fraction=0.025, pad=0.01).set_label("hit@1 (%)")
        if not by_ds:
            axes[0, 0].text(0.5, 0.5, "no runs", ha="center", transform=axes[0, 0].transAxes)
        fig.tight_layout()
    _save(fig, png_out)


def _draw(plots: list[tuple], workers: int) -> None:
    """Each (plot function, its arguments); with more than one worker, in
    forked processes at once (each writes its own file; the bytes are the
    same either way). pyplot is imported first, so the children share it."""
    if workers <= 1 or len(plots) <= 1 or not hasattr(os, "fork"):
        for func, *args in plots:
            func(*args)
        return
    import multiprocessing

    _pyplot()
    with multiprocessing.get_context("fork").Pool(min(workers, len(plots))) as pool:
        for pending in [pool.apply_async(func, args) for func, *args in plots]:
            pending.get()


def build_report(metrics_paths, extra_paths, md_out, html_out, png_out, official_paths=(), stats_paths=(),
                 forest_out=None, heatmap_out=None, manifest_path=None, log=print, missing=None,
                 workers: int = 1) -> None:
    """``extra_paths``: analyze summaries (analyze/summary.json) and falsifier
    results (falsifier.json); ``missing``: {dataset: why} of the datasets that
    could not run (missing.py), listed with how to get them at the top;
    ``workers``: the plots drawn at once; ``forest_out``: the forest plot."""
    runs = [json.loads(Path(p).read_text(encoding="utf-8")) for p in metrics_paths]
    official = {}
    for p in official_paths:
        o = json.loads(Path(p).read_text(encoding="utf-8"))
        official[(o["dataset"], o["variant"])] = o["official"]
    for m in runs:  # fold official.json into the run, as metrics.json's `official`
        if (m["dataset"], m["variant"]) in official:
            m["official"] = official[(m["dataset"], m["variant"])]
    stats = [json.loads(Path(p).read_text(encoding="utf-8")) for p in stats_paths]
    extras = ([convention_blocks(runs)] + [extra_blocks(p) for p in extra_paths]
              + [provenance_blocks(manifest_path, runs)])
    gone = missing_blocks(missing or {})
    write_text(md_out, markdown_report(runs, stats, extras, gone))
    plots = [(plot, runs, png_out)]
    images = {"hitk": Path(png_out).name}
    if forest_out:
        plots.append((forest_plot, stats, forest_out))
        images["forest"] = Path(forest_out).name
    if heatmap_out:
        plots.append((heatmap, runs, heatmap_out))
        images["heatmap"] = Path(heatmap_out).name
    _draw(plots, workers)
    write_text(html_out, html_report(runs, stats, extras, images, missing=gone))
    log(f"report: {len(runs)} runs, {len(missing or {})} datasets missing, "
        f"{sum(1 for m in runs if m.get('official'))} with official metrics, "
        f"{sum(len(s['comparisons']) for s in stats)} comparisons")


# ---------------------------------------------------------------- official metrics by convention

CONVENTION_METRICS = ("recall_any@5", "recall_all@5", "ndcg_any@5", "recall_any@10", "recall_all@10", "ndcg_any@10")


def comparable_to(m: dict, dataset: str, convention: str, n) -> str:
    """The published figure a run's convention row can be compared with, or
    why a figure of the same system is not ("" when none is near)."""
    recipe = m.get("recipe") or {}
    for pub in PUBLISHED_OFFICIAL:
        if (pub["dataset"] != dataset or pub["convention"] != convention or is_imported(m)
                or any(recipe.get(k) != v for k, v in pub["match"].items())):
            continue
        if n != pub["questions"]:
            return f"not comparable: same protocol as {pub['source']}, but n {n} (it: {pub['questions']})"
        return f"comparable: {pub['source']}"
    return ""


def convention_rows(runs: list[dict]) -> list[list]:
    rows = []
    for m in runs:
        convs = (m.get("official") or {}).get("conventions") or {}
        for name, c in convs.items():
            exc = ", ".join(f"{k} {v}" for k, v in c.get("excluded", {}).items()) or "-"
            mark = comparable_to(m, m["dataset"], name, c["questions"])
            rows.append([m["dataset"], label(m), Code(name), c["questions"], exc,
                         *(percent(c.get(k)) if k in c else "-" for k in CONVENTION_METRICS),
                         Strong(mark) if mark.startswith("comparable") else mark or "-"])
    return rows


def published_rows(runs: list[dict]) -> list[list]:
    rows = []
    for pub in PUBLISHED_OFFICIAL:
        values = "; ".join(f"{k} {percent(v)}" for k, v in pub["values"].items())
        ours = [label(m) for m in runs if m["dataset"] == pub["dataset"]
                and comparable_to(m, pub["dataset"], pub["convention"],
                                  (((m.get("official") or {}).get("conventions") or {}).get(pub["convention"])
                                   or {}).get("questions", -1)).startswith("comparable")]
        rows.append([pub["source"], pub["system"], pub["dataset"], pub["protocol"],
                     Code(pub["convention"]), pub["questions"], values,
                     Strong("comparable: " + ", ".join(ours)) if ours else "no run here under its protocol"])
    for ds in sorted({m["dataset"] for m in runs}):
        pub = published(ds, REFERENCE)
        hits = "; ".join(f"{k} {pub[k]}%" for k in HITS if k in pub)
        if hits:
            rows.append([f"Memo {REFERENCE} (benchmark guide)", "Memo", ds, HARNESS_PROTOCOL, "-", "-", hits,
                         "not an official convention: compare in the Harness metrics table"])
    return rows


def convention_blocks(runs: list[dict]) -> list:
    """Each run's official metrics under every averaging convention (official.json's
    ``conventions``), beside the published official-metric figures and the
    protocol each was published under; a figure is marked comparable only to
    a run of the same system, convention and question count."""
    rows = convention_rows(runs)
    if not rows:
        return []
    names14 = ", ".join(f"{c} {LOCOMO_CATEGORIES[c]}" for c in ("1", "2", "3", "4"))
    return [Heading(2, "Official metrics by convention", anchor="conventions"),
            Para(["The same per-question official metrics averaged over the question sets the field quotes: ",
                  Code("run_retrieval"), " (LongMemEval's run_retrieval.py: abstention and no-user-target "
                  "questions left out; the Official metrics table), ", Code("print_retrieval_metrics"),
                  " (its print_retrieval_metrics.py, which printed the paper's tables: abstentions only, a "
                  "no-user-target question counting with recall_any 0, recall_all 1, ndcg_any 0), LoCoMo's ",
                  Code("all_categories"), " and ", Code("categories_1_4"), f" ({names14}: the memory-system "
                  "convention of mem0's evaluation, adversarial 5 left out). recall_any@k is not recall_all@k: "
                  "quote each under its own name and convention."]),
            Table(["dataset", "variant", "convention", "n", "excluded", *CONVENTION_METRICS, "published figure"],
                  rows, left=(0, 1, 2, 4, 11)),
            Heading(3, "Published figures"),
            Para("Each with the protocol it was published under. A figure is comparable only to a run of the same "
                 "system under the same convention over the same number of questions; memory-system LoCoMo "
                 "evaluations report over categories 1-4, so compare them with categories_1_4."),
            Table(["source", "system", "dataset", "protocol", "convention", "n", "figures", "comparable"],
                  published_rows(runs), left=(0, 1, 2, 3, 4, 6, 7))]
