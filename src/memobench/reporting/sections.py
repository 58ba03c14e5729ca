"""The report's sections that read the same in Markdown and HTML (doc.py
blocks): the reading guide, the paired differences, the who-beats-whom
matrix, the differences per question type, the variant table, the per-type
cards, provenance, and the analyses' sections."""

from __future__ import annotations

import html
import json
from pathlib import Path

from ..core import layout
from ..core.doc import Bullets, Cell, Code, Group, Heading, Html, Keep, Para, Strong, Table
from ..core.errors import DataError
from ..evaluation.correction import ALPHA, POWER
from ..evaluation.measures import HARNESS_MEASURES, HITS, MATRIX, MEASURES, PAIRED, label as metric_name
from ..evaluation.published import GUIDE_TABLE, REFERENCE, published
from ..evaluation.resampling import BOOTSTRAP, PERMUTATIONS
from .labels import KIND_NAMES, by_dataset, coverage_text, is_imported, is_locomo, kind, label, type_label
from ..core.jsmath import to_fixed
from ..core.protocol import DEPTH
from ..services.identity import served_text
from .numbers import difference, level, mde_text, p_randomization, p_test, percent, printed, value_text

BETTER, WORSE, EVEN = "▲", "▼", "·"
LABELS = tuple(metric_name(k) for k in HARNESS_MEASURES)  # the harness measures' column headers

DATA_COUNTS = {
    "date_fallbacks": "unparseable dates (harness fallback used)",
    "evidence_unmatched": "evidence strings matching no dia_id",
    "duplicate_question_ids": "duplicate question ids",
    "unparseable_items": "elements that did not parse (skipped)",
    "truncated_tail": "truncated last element (not read)",
    "unpaired": "CN rows pairing to no question",
}


def _e(x) -> str:
    return html.escape(str(x))


# what an official table's depth is (official.read_rankings: the deepest rank the variant's lists reach)
DEPTH_MEANS = (f"depth: the length of the variant's longest list, the deepest rank any of its questions' lists "
               f"reaches (lists are read to {DEPTH}); at a k beyond it every list of the variant is shorter than k")


def depths(ms: list[dict]) -> str:
    """The official lists' depth of a dataset's variants: one number when they share it, else each
    depth with its variants (``31 (v0.8.0), 32 (mine, bm25s)``)."""
    by_depth: dict[int, list[str]] = {}
    for m in ms:
        if m.get("official"):
            by_depth.setdefault(m["official"]["depth"], []).append(m["variant"])
    if len(by_depth) == 1:
        return str(next(iter(by_depth)))
    return ", ".join(f"{d} ({', '.join(names)})" for d, names in by_depth.items())


def latency_note(runs: list[dict]) -> list:
    """Where a run with memory services finds their latency: a page of its own, since timings differ from
    run to run and this report does not."""
    services = [m["variant"] for m in runs if kind(m) == KIND_NAMES["system"]]
    if not services:
        return []
    return [Para([Strong("Memory services"), f" ({', '.join(dict.fromkeys(services))}): their search and ingestion "
                  "latency, with recall beside it, is in ", Code("latency.html"), " (and ", Code("latency.md"), ")",
                  " next to this report (docs/memory-services.md): measurements that differ from run to run, kept "
                  "out of this report, whose numbers do not."], cls="note")]


def reading_guide(html_colours: bool = False) -> list:
    """How to read the report, at its top (the HTML names its colours)."""
    harness, official, shaded, colours = (
        (" (blue headers: ", " (orange headers: ", " Cells at 95% or more are shaded: saturated, a difference is hard "
         "to see there.", " Green: the interval lies above 0; red: below.") if html_colours else (" (", " (", "", ""))
    return [Bullets([
        [Strong("Harness metrics"), f"{harness}{', '.join(LABELS)}) follow the Memo harness's rules: "
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
    title = (f"{c['variant']} {value_text(mm['variant'], key)}, {c['baseline']} {value_text(mm['baseline'], key)} "
             f"over the {c['n']} paired questions" + (" (saturated: 95% or more)" if mm.get("saturated") else ""))
    value, interval = difference(mm, key).split(" ", 1)
    return Cell([Keep(value), " ", Keep(interval)], cls=f"{cls} lines".strip(), title=title,
                note=_mde_note(mm, key))


# the MDE of a pair whose differences do not vary (correction.mde: none, not 0)
MDE_NONE = "MDE n/a: no question differs"


def _mde_note(mm: dict, key: str) -> str | None:
    """The pair's minimum detectable difference, in the difference's unit; where its differences do not
    vary (``sd`` 0), that it has none."""
    if mm.get("mde") is not None:
        return f"MDE {mde_text(mm['mde'], key)}"
    return MDE_NONE if mm.get("sd") == 0 and mm.get("diff") == 0 else None


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
        gone = left_out_note(s)
        if not comps:
            out += [Heading(3, s["dataset"]), gone] if gone else []
            continue
        n_perm = s.get("permutations", PERMUTATIONS)
        rows = []
        for c in comps:
            m = by_key.get((s["dataset"], c["variant"]), {})
            only = [f"{c[k]} only in the {w}" for k, w in (("only_variant", "variant"), ("only_baseline", "baseline"))
                    if c.get(k)]
            # a run that covers part of the set: its misses there are in the difference
            row = [Cell(c["variant"], note=coverage_text(m) or None) if m else c["variant"], kind(m), _against(c),
                   Cell(c["n"], note="; ".join(only) or None)]
            for k in PAIRED:
                row += [_delta_cell(c, k), _p_cell(c["metrics"][k], k, n_perm)]
            rows.append(row)
        header = ["variant", "kind", "against", "n (paired)"]
        for k in PAIRED:
            header += [f"Δ{metric_name(k)} ({MEASURES[k].diff_unit_short}) [95% CI]",
                       f"p: randomization; {MEASURES[k].test}, Holm"]
        out += [Heading(3, s["dataset"]), Table(header, rows, left=3, cls="paired"), *([gone] if gone else [])]
    if not out:
        return []
    return [Heading(2, f"Paired differences (harness metrics): against the harness baseline and {REFERENCE}",
                    anchor="paired"),
            Para(["Variant minus the variant in ", Strong("against"), ", per question over the questions both "
                  "evaluated: the mean difference with its bootstrap 95% interval and, after it, the minimum "
                  "detectable difference (", Code("MDE"), "; ", Code(MDE_NONE), " where every question has the "
                  "same outcome in both, so the differences have no spread to size one from); the paired randomization "
                  "p-value, then the McNemar "
                  "(hit@k) or paired t-test (MRR) p-value with, beside it, that p-value after Holm's correction over "
                  "all the dataset's pairs (", Code("Holm"), "), each named by its test. hit@k in "
                  "percentage points, MRR in MRR units. Each pair appears once."], cls="note"),
            Html("<p class='note'>Green: the interval lies above 0; red: below. A shaded difference: one of its "
                 "two rates is 95% or more (saturated). Hover a difference for both rates.</p>"),
            *out]


def left_out_note(s: dict) -> Para | None:
    """The variants of a dataset's statistics left out of its paired tests for covering too few questions."""
    gone = s.get("left_out") or []
    if not gone:
        return None
    names = "; ".join(f"{d['variant']} (covers {d['covered']} of {d['questions']} questions)" for d in gone)
    return Para([Strong("Left out of the paired tests"), f": {names}. A run that lists fewer than "
                 f"{100 * s['min_coverage']:g}% of the evaluated questions is compared with nothing here (nor in the "
                 "matrix): each question it does not list counts as its miss, so its difference would measure how "
                 "much of the set the file covers, not how well it ranks. Its own rates, over every evaluated "
                 "question, are in the tables above."], cls="note")


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
        parts.append(f"{metric_name(k)} {mde_text(m['mde_median'], k)}{MEASURES[k].mde_suffix} "
                     f"({mde_text(m['mde_min'], k)} to "
                     f"{mde_text(m['mde_max'], k)}; {mde_text(m['mde_first_holm_step'], k)} at Holm's first step)")
    if not parts:
        return None
    m0 = next(ms[k] for k in PAIRED if (ms.get(k) or {}).get("pairs"))
    n = f"{m0['n_min']}" if m0["n_min"] == m0["n_max"] else f"{m0['n_min']} to {m0['n_max']}"
    family = (s.get("holm") or {}).get("pairs", {}).get(MATRIX[0], m0["pairs"])
    return Para([Strong("Minimum detectable difference"), f" at n = {n} paired questions "
                 f"({100 * (1 - pw.get('alpha', ALPHA)):g}% two-sided, {100 * pw.get('power', POWER):g}% power, "
                 "(z + z) · sd(d) / √n; the median over the dataset's pairs whose differences vary (a pair with no "
                 "differing question has none), their range, and at the level of Holm's "
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
                h, r = (b["metrics"][k] for k in MATRIX)
                if h["diff"] is None:
                    row.append("-")
                    continue
                lo, hi = h["ci95"] or (0, 0)
                cls = "up" if lo > 0 else "down" if hi < 0 else ""
                first, second = MATRIX
                row.append(Cell(difference(h, first), cls=cls, note=difference(r, second, MEASURES[second].type_digits),
                                title=f"n {b['n']}; {metric_name(first)}: {p_randomization(h)}; "
                                      f"{metric_name(second)}: {p_randomization(r)} (uncorrected)"))
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


def other_results_blocks(others: list[dict]) -> list:
    """The results the folder holds that this run's config does not make (an earlier run's overlay,
    ``memobench score``), so that one report covers the folder: their harness figures as their
    metrics.json has them, apart from this run's tables (no paired test, matrix or plot: each was made
    under its own config, perhaps by another version)."""
    if not others:
        return []
    rows = []
    for m in others:
        try:
            if "unreadable" in m:
                raise ValueError(m["unreadable"])
            rows.append([m["dataset"], label(m), m["questions"], *(level(m, k) for k in HARNESS_MEASURES),
                         m.get("description", "")])
        except (KeyError, TypeError, ValueError) as e:  # an older memobench's file may lack a field
            rows.append([m["dataset"], m["variant"], "-", *("-" for _ in HARNESS_MEASURES),
                         f"not shown: its {Path(layout.METRICS).name} cannot be read ({type(e).__name__}: {e})"])
    return [Heading(2, "Other results in this folder"),
            Para(["Results in this folder that this run's config does not make: an earlier run's, with another "
                  "config overlay, or ", Code("memobench score"), "'s. Their figures are as their ",
                  Code(Path(layout.METRICS).name), " gives them; they are in no paired test, matrix or plot of this report. "
                  "List a variant in this run's config to compare it."], cls="note"),
            Table(["dataset", "variant", "questions", *LABELS, "description"], rows, left=(0, 1, 3 + len(LABELS)))]


def variant_table(runs: list[dict]) -> list:
    """The guide's variant table (LongMemEval-S), rebuilt from the runs present."""
    by_key = {(m["dataset"], m["variant"]): m for m in runs}
    rows = []
    for name, v, verdict in GUIDE_TABLE:
        m = by_key.get(("longmemeval_s", v))
        if m is None:
            continue
        pub = published("longmemeval_s", v)
        rows.append([[name, " (", Code(v), ")"], " / ".join(level(m, k) for k in HARNESS_MEASURES),
                     " / ".join(pub.get(k, "-") for k in HARNESS_MEASURES), verdict])
    if not rows:
        return []
    return [Heading(2, "Variant table (LongMemEval-S, benchmark guide)"),
            Table(["variant", "ours: " + " / ".join(LABELS), "published", "guide's verdict"], rows)]


WARNED = " (warning)"  # after a variant's name in the main tables: its metrics.json lists warnings


def warned(m: dict) -> str:
    """The main tables' variant cell: its label, marked when the variant has warnings."""
    return label(m) + (WARNED if m.get("warnings") else "")


def warnings_note(ms: list[dict]) -> Para | None:
    """A dataset's variants' warnings (metrics.json ``warnings``: a memory service's degenerate answers,
    lists that move between runs, conformance checks skipped), one sentence each, under the table whose
    figures they qualify."""
    said = [w for m in ms for w in m.get("warnings") or ()]
    if not said:
        return None
    return Para([Strong("Warnings: " + " ".join(w.rstrip(".") + "." for w in said))], cls="note")


def attribution_note(ms: list[dict]) -> Para | None:
    """How the lists of a dataset's variants that answer in text were made (metrics.json ``attribution``:
    retrieval/attribution.py), one sentence each, under the table whose figures they are."""
    from ..retrieval.attribution import stated

    said = [f"{label(m)}: {stated(m['attribution'])}" for m in ms if m.get("attribution")]
    if not said:
        return None
    return Para(["Attribution: " + " ".join(w.rstrip(".") + "." for w in said)], cls="note")


def pool_note(ms: list[dict]) -> Para | None:
    """A dataset's pool sizes beside its hit@k columns (metrics.json
    ``pool_at_most`` and ``random``): the share of evaluated questions whose
    haystack holds k sessions or fewer, a random ranking's hit@k, and, in
    bold, each k at or above most pools (more than half the questions), where
    a hit is largely the pool's. Read from the first variant that has them;
    its label is named when another variant's differ (other evaluated
    questions)."""
    have = [m for m in ms if m.get("pool_at_most")]
    if not have:
        return None
    m = have[0]
    at_most, rnd = m["pool_at_most"], m.get("random") or {}
    whose = f" ({label(m)}'s evaluated questions)" if any(
        (o["pool_at_most"], o.get("random")) != (at_most, m.get("random")) for o in have[1:]) else ""
    shares = ", ".join(f"{percent(at_most[k])} {MEASURES[k].cutoff} or fewer" for k in HITS if at_most.get(k) is not None)
    text: list = [f"Pools{whose}: of the evaluated questions, {shares} sessions in their haystack; a random ranking's "
                  + ", ".join(f"{k} {percent(rnd.get(k))}" for k in HITS) + "."]
    for k in HITS:
        if (at_most.get(k) or 0) > 0.5:
            text += [" ", Strong(f"{k}: k is at or above most pools ({percent(at_most[k])} of the questions have "
                                 f"{MEASURES[k].cutoff} sessions or fewer), so a hit there is largely the pool's; "
                                 f"read it beside the random ranking's {percent(rnd.get(k))}.")]
    return Para(text, cls="note")


def _type_table(m: dict) -> Table:
    rows = [[type_label(m, t), b["questions"], *(level(b, k, MEASURES[k].type_digits) for k in HARNESS_MEASURES)]
            for t, b in m["by_type"].items()]
    first = "category" if is_locomo(m) else "type"
    return Table([first, "n", *LABELS], rows)


def _run_facts(m: dict) -> str:
    """Pool, counts and data notes of a run: the same for every variant of a dataset, as a rule."""
    facts = []
    if m.get("mean_pool_size"):
        rnd = m["random"]
        facts.append(f"Mean pool {m['mean_pool_size']:.1f} sessions; random ranking: "
                     + ", ".join(f"{k} {percent(rnd[k])}" for k in HITS) + ".")
    skipped = ", ".join(f"{k} {v}" for k, v in m["skipped"].items()) or "none"
    forced = ", ".join(f"{k} {v}" for k, v in m["counted_as_miss"].items()) or "none"
    facts.append(f"Items {m['items']}; evaluated {m['questions']}; skipped: {skipped}; counted as misses: {forced}.")
    data = {k: v for k, v in (m.get("data") or {}).items() if k in DATA_COUNTS and v}
    if data:
        facts.append("Data: " + ", ".join(f"{DATA_COUNTS[k]} {v}" for k, v in data.items()) + ".")
    return " ".join(facts)


def _run_card(m: dict, facts: bool) -> list:
    served = served_text(m.get("system")) if m.get("kind") == "system" else ""
    out = [Heading(4, label(m)), Para(f"{m['description']} ({m['harness']}"
                                      f"{f'; served by {served}' if served else ''}).", cls="note")]
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
        out.append(Table(["segment", "n", *LABELS],
                         [[s["segment"], s["questions"], *(level(s, k) for k in HARNESS_MEASURES)] for s in segs]))
        mm = m.get("mrr_mean_of_printed_segments")
        if mm is not None:
            out.append(Para(f"Mean of the printed segment MRRs (how the published M total was formed): "
                            f"{to_fixed(mm, MEASURES['mrr'].digits)}; exact merged MRR: {printed(m, 'mrr')}.",
                            cls="note"))
    return out


def retriever_checks(m: dict) -> list:
    """What a user retriever's jobs checked (metrics.json ``determinism``
    and ``timeouts``; retrieval/python.py): a note under its card, bold where a
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
    for ds, ms in by_dataset(runs).items():
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
