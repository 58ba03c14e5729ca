"""results/report.md, results/report.html (real tables) and the plots.

Two families of numbers sit side by side and are labelled everywhere:

* **harness metrics** (hit@k, MRR): the Memo harness's own rules, the numbers
  this project reproduces exactly, with the published value beside ours;
* **official metrics** (recall_any@k, recall_all@k, ndcg_any@k): LongMemEval's
  own retrieval scoring (OFFICIAL_METRICS.md), LoCoMo's evidence recall.

Paired statistics (stats.py) give each variant's difference to its baseline
and to v0.8.0 with a 95% interval, drawn as a forest plot. Reference
retrievers (docs/baselines.md: bm25-official, bm25s, fts5-bm25, minilm,
wordllama), a user's retrievers and fusions of other variants' lists are
variants like the others, labelled as such, and sit with the Memo variants in
one table against v0.8.0.
"""

from __future__ import annotations

import html
import json
from decimal import Decimal
from pathlib import Path

from .jsmath import to_fixed
from .metrics import pct
from .missing import markdown as missing_markdown
from .published import GUIDE_TABLE, published
from .recipe import REFERENCE_BACKENDS
from .variants import FUSION_BACKEND, PYTHON_BACKEND
from .tables import atomic_path, write_text

METRICS = ("hit@1", "hit@5", "hit@10", "mrr")
DATA_COUNTS = {
    "date_fallbacks": "unparseable dates (harness fallback used)",
    "evidence_unmatched": "evidence strings matching no dia_id",
    "duplicate_question_ids": "duplicate question ids",
    "unparseable_items": "elements that did not parse (skipped)",
    "truncated_tail": "truncated last element (not read)",
    "unpaired": "CN rows pairing to no question",
}


def kind(m: dict) -> str:
    """What ranked a run (its recipe's backend): Memo, a reference retriever, your retriever, or a fusion."""
    backend = (m.get("recipe") or {}).get("backend")
    return ("reference retriever" if backend in REFERENCE_BACKENDS else
            "your retriever" if backend == PYTHON_BACKEND else
            "fusion" if backend == FUSION_BACKEND else "Memo")


def is_reference(m: dict) -> bool:
    """A run of a retriever other than the Memo engine (a reference retriever, your own, or a fusion)."""
    return kind(m) != "Memo"


def label(m: dict) -> str:
    """The variant's name as the report's tables show it."""
    return f"{m['variant']} ({kind(m)})" if is_reference(m) else m["variant"]


def printed(m: dict, key: str, digits: int | None = None) -> str | None:
    """The value as the harness prints it: ``(100 * count / n).toFixed(1)`` for
    a hit rate (in that order: 100 * (count / n) rounds some ties differently),
    ``(sum / n).toFixed(4)`` for MRR."""
    if key == "mrr":
        return to_fixed(m["mrr"], 4 if digits is None else digits) if m.get("mrr") is not None else None
    if not m.get("hit_denominator"):
        return None
    return pct(m[key], m["hit_denominator"], 1 if digits is None else digits)


def _diff(m: dict, key: str, theirs: str) -> str:
    """Difference at the published value's own precision (0.651 is 3 decimals)."""
    digits = len(theirs.split(".")[1]) if "." in theirs else 0
    d = Decimal(printed(m, key, digits)) - Decimal(theirs)
    return "=" if d == 0 else f"{d:+}"


def _cell(m: dict, key: str, pub: dict) -> str:
    ours = printed(m, key)
    if ours is None:
        return "-"
    text = ours + ("%" if key != "mrr" else "")
    if key != "mrr":
        text += f" ({m[key]})"
    if key in pub:
        text += f" / {pub[key]} {_diff(m, key, pub[key])}"
    return text


def markdown(runs: list[dict]) -> str:
    out = ["# memobench report", "",
           "Each cell: our value (count) / the published value and the difference "
           "(`=` when equal to the printed digit). Rates are over the evaluated questions.", ""]
    out += ["| dataset | variant | questions | hit@1 | hit@5 | hit@10 | MRR | random hit@1 |",
            "|---|---|---|---|---|---|---|---|"]
    for m in runs:
        pub = published(m["dataset"], m["variant"])
        rnd = m.get("random", {}).get("hit@1")
        out.append(
            f"| {m['dataset']} | {label(m)} | {m['questions']} | "
            + " | ".join(_cell(m, k, pub) for k in METRICS)
            + f" | {to_fixed(100 * rnd, 1) + '%' if rnd is not None else '-'} |"
        )
    for m in runs:
        out += ["", f"## {m['dataset']} / {m['variant']}", "", f"{m['description']} ({m['harness']}).", ""]
        if m.get("mean_pool_size"):
            rnd = m["random"]
            out.append(
                f"Mean pool {m['mean_pool_size']:.1f} sessions; random ranking: hit@1 "
                f"{to_fixed(100 * rnd['hit@1'], 1)}%, hit@5 {to_fixed(100 * rnd['hit@5'], 1)}%, "
                f"hit@10 {to_fixed(100 * rnd['hit@10'], 1)}%."
            )
        skipped = ", ".join(f"{k} {v}" for k, v in m["skipped"].items()) or "none"
        forced = ", ".join(f"{k} {v}" for k, v in m["counted_as_miss"].items()) or "none"
        out += [f"Items {m['items']}; evaluated {m['questions']}; skipped: {skipped}; "
                f"counted as misses: {forced}.", ""]
        data = {k: v for k, v in (m.get("data") or {}).items()
                if k in DATA_COUNTS and v}
        if data:
            out += ["Data: " + ", ".join(f"{DATA_COUNTS[k]} {v}" for k, v in data.items()) + ".", ""]
        out += ["| type | n | hit@1 | hit@5 | MRR |", "|---|---|---|---|---|"]
        for t, b in m["by_type"].items():
            out.append(f"| {t} | {b['questions']} | {printed(b, 'hit@1')}% | {printed(b, 'hit@5')}% | "
                       f"{to_fixed(b['mrr'], 3)} |")
        segs = m.get("segments") or []
        if len(segs) > 1:
            out += ["", "| segment | n | hit@1 | hit@5 | hit@10 | MRR |", "|---|---|---|---|---|---|"]
            for s in segs:
                out.append(f"| {s['segment']} | {s['questions']} | " + " | ".join(
                    (printed(s, k) or "-") + ("%" if k != "mrr" and printed(s, k) else "") for k in METRICS) + " |")
            mm = m.get("mrr_mean_of_printed_segments")
            if mm is not None:
                out += ["", f"Mean of the printed segment MRRs (how the published M total was formed): "
                            f"{to_fixed(mm, 4)}; exact merged MRR: {printed(m, 'mrr')}."]
    return "\n".join(out) + "\n"


def variant_table(runs: list[dict]) -> str:
    """The guide's variant table (LongMemEval-S), rebuilt from the runs present."""
    by_key = {(m["dataset"], m["variant"]): m for m in runs}
    rows = [(label, v, verdict) for label, v, verdict in GUIDE_TABLE if ("longmemeval_s", v) in by_key]
    if not rows:
        return ""
    out = ["", "## Variant table (LongMemEval-S, benchmark guide)", "",
           "| variant | ours: hit@1 / hit@5 / hit@10 / MRR | published | guide's verdict |", "|---|---|---|---|"]
    for label, v, verdict in rows:
        m = by_key[("longmemeval_s", v)]
        pub = published("longmemeval_s", v)
        ours = " / ".join((printed(m, k) or "-") + ("%" if k != "mrr" else "") for k in METRICS)
        theirs = " / ".join(pub.get(k, "-") for k in METRICS)
        out.append(f"| {label} (`{v}`) | {ours} | {theirs} | {verdict} |")
    return "\n".join(out) + "\n"


def plot(runs: list[dict], png_out) -> None:
    """Horizontal bars, one group per dataset and variant (a full run has ~50)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 0.42 * len(runs) + 1.6))
    height = 0.27
    labels = [f"{m['dataset']} / {m['variant']}" for m in runs]
    for j, k in enumerate(("hit@1", "hit@5", "hit@10")):
        vals = [100 * (m.get(k + "_rate") or 0) for m in runs]
        ax.barh([i + (j - 1) * height for i in range(len(runs))], vals, height, label=k)
    ax.set_yticks(range(len(runs)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("% of evaluated questions")
    ax.set_xlim(0, 100)
    ax.set_title("hit@k per dataset and variant")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.6 / (0.42 * len(runs) + 1.6)), ncol=3, frameon=False)
    fig.tight_layout()
    _save(fig, png_out)


def provenance_section(manifest_path, runs) -> str:
    """What produced the results, once: the environment of the runs (a run
    computed with another SQLite, Python or library version is named), and the
    package source fingerprints with how many runs used each."""
    envs: dict[str, list[str]] = {}
    sources: dict[str, int] = {}
    for r in runs:
        provs = r.get("provenance")
        for prov in (provs if isinstance(provs, list) else [provs]):
            prov = dict(prov or {})
            src = prov.pop("source", "unknown")
            sources[src] = sources.get(src, 0) + 1
            envs.setdefault(json.dumps(prov, sort_keys=True), []).append(f"{r['dataset']}/{r['variant']}")
    if not envs and manifest_path is not None:
        prov = dict(json.loads(Path(manifest_path).read_text(encoding="utf-8")).get("provenance", {}))
        sources[prov.pop("source", "unknown")] = 0
        envs[json.dumps(prov, sort_keys=True)] = []
    if not envs:
        return ""
    lines = ["\n## Provenance\n"]
    ordered = sorted(envs.items(), key=lambda kv: -len(kv[1]))
    for n, (env, names) in enumerate(ordered):
        if n:
            lines.append(f"\nAlso computed with other versions: {', '.join(names)}\n")
        lines += ["| what | version |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in json.loads(env).items()]
    lines.append("\nPackage source fingerprint(s): "
                 + ", ".join(f"`{src}` ({k} runs)" for src, k in sorted(sources.items())))
    return "\n".join(lines) + "\n"


OFFICIAL_KS = (1, 5, 10, 30, 50)


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _md_official(runs: list[dict]) -> str:
    rows = [m for m in runs if m.get("official")]
    if not rows:
        return ""
    out = ["", "## Official metrics (LongMemEval's own scoring; not the harness's hit@k)", "",
           "recall_all@k: every gold session in the top k; recall_any@k: at least one; ndcg_any@k with "
           "LongMemEval's discount. Averaged over the file's questions less abstention and no-user-target "
           "questions (LongMemEval); LoCoMo over questions with evidence sessions.", "",
           "| dataset | variant | n | excluded | depth | recall_any@5 | recall_all@5 | ndcg_any@5 | recall_any@10 "
           "| recall_all@10 | ndcg_any@10 |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for m in rows:
        o = m["official"]
        exc = ", ".join(f"{k} {v}" for k, v in o["excluded"].items())
        cells = [_pct(o.get(f"{n}@{k}")) if f"{n}@{k}" in o else "-"
                 for k in (5, 10) for n in ("recall_any", "recall_all", "ndcg_any")]
        out.append(f"| {m['dataset']} | {m['variant']} | {o['questions']} | {exc} | {o['depth']} | "
                   + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def _md_against_reference(runs: list[dict], stats: list[dict]) -> str:
    """Memo variants and reference retrievers in one table per dataset, each
    with its paired difference to v0.8.0 (datasets that run a reference
    retriever)."""
    from .stats import REFERENCE, fmt_ci

    against = {(s["dataset"], c["variant"]): c for s in stats for c in s["comparisons"]
               if c["baseline"] == REFERENCE}
    datasets = list(dict.fromkeys(m["dataset"] for m in runs if is_reference(m)))
    if not datasets:
        return ""
    out = ["", f"## Memo variants and reference retrievers, paired against {REFERENCE}", "",
           "Harness metrics over the same questions and gold (a reference retriever takes its dataset's harness "
           f"skip rule); Δ: variant - {REFERENCE} per question, percentage points (MRR x 100), bootstrap 95% "
           "interval, paired randomization p-value.", "",
           "| dataset | variant | kind | n | hit@1 | hit@5 | hit@10 | MRR | Δhit@1 [95% CI] | p | Δhit@5 [95% CI] | p "
           "| ΔMRR×100 [95% CI] | p |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for ds in datasets:
        for m in (m for m in runs if m["dataset"] == ds):
            c = against.get((ds, m["variant"]))
            cells = []
            for k in ("hit@1", "hit@5", "mrr"):
                mm = c["metrics"][k] if c else None
                cells += ([fmt_ci(mm), "-" if mm["p"] is None else f"{mm['p']:.4f}"] if mm
                          else ["(reference point)" if m["variant"] == REFERENCE else "-", "-"])
            rates = [(printed(m, k) or "-") + ("%" if k != "mrr" and printed(m, k) else "") for k in METRICS]
            out.append(f"| {ds} | {m['variant']} | {kind(m)} | {m['questions']} | " + " | ".join(rates + cells) + " |")
    return "\n".join(out) + "\n"


def _md_stats(stats: list[dict]) -> str:
    from .stats import fmt_ci

    rows = [(s["dataset"], c) for s in stats for c in s["comparisons"]]
    if not rows:
        return ""
    out = ["", "## Paired differences (harness metrics, per question)", "",
           "Difference variant - baseline in percentage points (MRR x 100) over the questions both "
           "evaluated, bootstrap 95% interval, paired randomization p-value.", "",
           "| dataset | variant | against | n | Δhit@1 [95% CI] | p | Δhit@5 [95% CI] | p | ΔMRR×100 [95% CI] | p |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for ds, c in rows:
        cells = []
        for k in ("hit@1", "hit@5", "mrr"):
            mm = c["metrics"][k]
            cells += [fmt_ci(mm), "-" if mm["p"] is None else f"{mm['p']:.4f}"]
        out.append(f"| {ds} | {c['variant']} | {c['baseline']} | {c['n']} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- HTML

CSS = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:0.86em}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right;vertical-align:top}
th{background:#f2f2f2}
td.l,th.l{text-align:left}
th.harness{background:#dde8f6} th.official{background:#f6e7d6}
td.sat{background:#fff3c4}
.pub{color:#666;font-size:0.85em;display:block}
.eq{color:#1a7f37}.ne{color:#b42318}
.note{color:#555;font-size:0.9em;max-width:70em}
img{max-width:100%}
"""


def _e(x) -> str:
    return html.escape(str(x))


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
        text += f"<span class='pub'>published {_e(pub[key])} <span class='{'eq' if d == '=' else 'ne'}'>{_e(d)}</span></span>"
    title = " title='95% or more: saturated, differences are hard to see'" if sat else ""
    return f"<td class='{'sat' if sat else ''}'{title}>{text}</td>"


def _official_cells(o: dict | None, names: list[str]) -> str:
    if not o:
        return "".join("<td>-</td>" for _ in names) + "<td>-</td>"
    cells = [f"<td>{o['questions']}</td>"]
    for n in names:
        k = int(n.split("@")[1])
        v = o.get(n)
        if v is None:
            cells.append("<td>-</td>")
            continue
        mark = "<sup title='k beyond the list depth: the list is shorter than k'>†</sup>" if k > o["depth"] else ""
        sat = n.startswith("recall") and v >= 0.95
        cells.append(f"<td class='{'sat' if sat else ''}'>{100 * v:.1f}%{mark}</td>")
    return "".join(cells)


def _html_main_tables(runs: list[dict]) -> list[str]:
    out = []
    by_ds: dict[str, list[dict]] = {}
    for m in runs:
        by_ds.setdefault(m["dataset"], []).append(m)
    for ds, ms in by_ds.items():
        offs = [m.get("official") for m in ms if m.get("official")]
        lme = any("ndcg_any@5" in o for o in offs)
        names = ([f"{n}@{k}" for k in (5, 10) for n in ("recall_any", "recall_all", "ndcg_any")] if lme
                 else [f"{n}@{k}" for k in (5, 10) for n in ("recall_any", "recall_all")])
        rules = ("LongMemEval official rules" if lme else "LoCoMo evidence sessions") if offs else "none for this format"
        out.append(f"<h3>{_e(ds)}</h3><table>")
        out.append(f"<tr><th class='l' rowspan='2'>variant</th>"
                   f"<th class='harness' colspan='5'>HARNESS metrics (Memo harness rules, what we reproduce)</th>"
                   f"<th class='official' colspan='{len(names) + 1}'>OFFICIAL metrics ({_e(rules)})</th>"
                   f"<th rowspan='2'>random hit@1</th></tr>")
        out.append("<tr><th class='harness'>n</th>" + "".join(
            f"<th class='harness'>{k}</th>" for k in ("hit@1", "hit@5", "hit@10", "MRR"))
            + "<th class='official'>n</th>" + "".join(f"<th class='official'>{n}</th>" for n in names) + "</tr>")
        for m in ms:
            pub = published(m["dataset"], m["variant"])
            rnd = (m.get("random") or {}).get("hit@1")
            out.append(f"<tr><td class='l'>{_e(label(m))}</td><td>{m['questions']}</td>"
                       + "".join(_rate_cell(m, k, pub) for k in METRICS)
                       + _official_cells(m.get("official"), names)
                       + f"<td>{_pct(rnd)}</td></tr>")
        out.append("</table>")
        excl = [(m["variant"], m["official"]) for m in ms if m.get("official")]
        if excl:
            o0 = excl[0][1]
            parts = ", ".join(f"{k} {v}" for k, v in o0["excluded"].items())
            extra = ""
            if "categories_1_4" in o0:
                c = o0["categories_1_4"]
                extra = (" Categories 1-4 only (mem0's convention, category 5 adversarial): "
                         + "; ".join(f"{_e(v)} recall_all@10 {_pct(o['categories_1_4'].get('recall_all@10'))} "
                                     f"(n {o['categories_1_4']['questions']})" for v, o in excl) + ".")
            out.append(f"<p class='note'>Official: averaged over {o0['questions']} questions; excluded: "
                       f"{_e(parts)}; lists to depth {o0['depth']} († marks k beyond it). Questions a variant "
                       f"gave no list count with an empty list.{extra}</p>")
    return out


def _html_stats(stats: list[dict]) -> list[str]:
    from .stats import fmt_ci

    out = []
    for s in stats:
        if not s["comparisons"]:
            continue
        out.append(f"<h3>{_e(s['dataset'])}</h3><table><tr><th class='l' rowspan='2'>variant</th>"
                   "<th class='l' rowspan='2'>against</th><th rowspan='2'>n (paired)</th>"
                   + "".join(f"<th colspan='4' class='harness'>{k} (harness)</th>" for k in ("hit@1", "hit@5", "MRR"))
                   + "</tr><tr>" + "<th>variant</th><th>baseline</th><th>Δ [95% CI]</th><th>p</th>" * 3 + "</tr>")
        for c in s["comparisons"]:
            cells = []
            for k in ("hit@1", "hit@5", "mrr"):
                mm = c["metrics"][k]
                fmt = (lambda x: "-" if x is None else f"{x:.4f}") if k == "mrr" else _pct
                sat = "sat" if mm["saturated"] else ""
                p_text = "-" if mm["p"] is None else f"{mm['p']:.4f}"
                ci = fmt_ci(mm, 100, 1) if k != "mrr" else fmt_ci(mm, 1, 4)
                cells += [f"<td class='{sat}'>{fmt(mm['variant'])}</td>", f"<td class='{sat}'>{fmt(mm['baseline'])}</td>",
                          f"<td>{ci}</td>", f"<td>{p_text}</td>"]
            out.append(f"<tr><td class='l'>{_e(c['variant'])}</td><td class='l'>{_e(c['baseline'])} "
                       f"<small>({_e(c['against'])})</small></td><td>{c['n']}</td>" + "".join(cells) + "</tr>")
        out.append("</table>")
    return out


def _md_to_html(md: str) -> str:
    """The small Markdown subset this project writes (headings, tables,
    paragraphs) as HTML, for the analyze and falsifier sections."""
    out, table, para = [], [], []

    def flush_table():
        if table:
            rows = [r for r in table if not set(r.replace("|", "").strip()) <= set("-: ")]
            out.append("<table>")
            for i, r in enumerate(rows):
                cells = [c.strip() for c in r.strip().strip("|").split("|")]
                tag = "th" if i == 0 else "td"
                out.append("<tr>" + "".join(f"<{tag} class='l'>{_e(c)}</{tag}>" for c in cells) + "</tr>")
            out.append("</table>")
            table.clear()

    def flush_para():
        if para:
            out.append(f"<p>{_e(' '.join(para))}</p>")
            para.clear()

    for line in md.splitlines():
        if line.startswith("|"):
            flush_para()
            table.append(line)
            continue
        flush_table()
        if line.startswith("#"):
            flush_para()
            level = min(len(line) - len(line.lstrip("#")) + 1, 6)
            out.append(f"<h{level}>{_e(line.lstrip('#').strip())}</h{level}>")
        elif not line.strip():
            flush_para()
        else:
            para.append(line.strip())
    flush_table()
    flush_para()
    return "\n".join(out)


def _html_details(runs: list[dict]) -> list[str]:
    out = []
    for m in runs:
        out.append(f"<h3>{_e(m['dataset'])} / {_e(m['variant'])}</h3>"
                   f"<p class='note'>{_e(m['description'])} ({_e(m['harness'])}). Items {m['items']}; evaluated "
                   f"{m['questions']}; skipped: {_e(', '.join(f'{k} {v}' for k, v in m['skipped'].items()) or 'none')}; "
                   f"counted as misses: {_e(', '.join(f'{k} {v}' for k, v in m['counted_as_miss'].items()) or 'none')}.</p>")
        out.append("<table><tr><th class='l'>type</th><th>n</th><th class='harness'>hit@1</th>"
                   "<th class='harness'>hit@5</th><th class='harness'>MRR</th></tr>")
        for t, b in m["by_type"].items():
            out.append(f"<tr><td class='l'>{_e(t)}</td><td>{b['questions']}</td><td>{printed(b, 'hit@1')}%</td>"
                       f"<td>{printed(b, 'hit@5')}%</td><td>{to_fixed(b['mrr'], 3)}</td></tr>")
        out.append("</table>")
    return out


def html_report(runs, stats, extra_md, images: dict[str, str], missing_md: str = "") -> str:
    out = ["<!doctype html><html><head><meta charset='utf-8'><title>memobench report</title>"
           f"<style>{CSS}</style></head><body>", "<h1>memobench report</h1>",
           "<p class='note'><b>Two kinds of numbers, never interchangeable.</b> "
           "<b>Harness metrics</b> (blue: hit@1, hit@5, hit@10, MRR) follow the Memo harness's rules: the "
           "first rank of an <code>answer_session_ids</code> session in the top 10, over the questions the harness "
           "evaluates; they reproduce the published numbers, shown under each cell with the difference "
           "(<span class='eq'>=</span> when equal to the printed digit). <b>Official metrics</b> (orange: "
           "recall_any@k, recall_all@k, ndcg_any@k) follow LongMemEval's own retrieval scoring: gold = the "
           "haystack sessions whose id contains <code>answer</code> and whose user turns carry the answer, "
           "abstention and no-user-target questions excluded. hit@10 is not recall_all@10: quote the one whose "
           "rules match the number you compare against. Cells at 95% or more are shaded (saturated). "
           "n is the number of questions behind each rate.</p>"]
    if missing_md:
        out.append(_md_to_html(missing_md))
    out.append("<h2>Harness and official metrics</h2>")
    out += _html_main_tables(runs)
    together = _md_against_reference(runs, stats)
    if together:
        out.append(_md_to_html(together))
    if images.get("forest") or stats:
        out.append("<h2>Paired differences to the baseline and to v0.8.0</h2>"
                   "<p class='note'>Per question, variant minus baseline over the questions both evaluated; mean "
                   "difference with a bootstrap 95% interval (10,000 resamples) and a paired randomization "
                   "p-value (10,000 sign flips), seeded so reruns are identical.</p>")
        if images.get("forest"):
            out.append(f"<img src='{_e(images['forest'])}' alt='forest plot of paired differences'>")
        out += _html_stats(stats)
    if images.get("heatmap"):
        out.append("<h2>Per question type (harness hit@1)</h2>"
                   f"<img src='{_e(images['heatmap'])}' alt='hit@1 per question type'>")
    if images.get("hitk"):
        out.append(f"<h2>hit@k per run</h2><img src='{_e(images['hitk'])}' alt='hit@k plot'>")
    vt = variant_table(runs)
    if vt:
        out.append(_md_to_html(vt))
    out.append("<h2>Per variant</h2>")
    out += _html_details(runs)
    for text in extra_md:
        out.append(_md_to_html(text))
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _save(fig, png_out) -> None:
    import matplotlib.pyplot as plt

    with atomic_path(png_out) as tmp:
        fig.savefig(tmp, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)


def forest_plot(stats: list[dict], png_out) -> None:
    """Each comparison's mean difference with its 95% interval, one panel per metric."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [(s["dataset"], c) for s in stats for c in s["comparisons"] if c["n"]]
    fig, axes = plt.subplots(1, 3, figsize=(12, 0.32 * max(len(rows), 1) + 1.6), sharey=True)
    labels = [f"{ds}: {c['variant']} − {c['baseline']}" for ds, c in rows]
    for ax, key in zip(axes, ("hit@1", "hit@5", "mrr")):
        for i, (_, c) in enumerate(rows):
            mm = c["metrics"][key]
            lo, hi = mm["ci95"]
            color = "#b42318" if hi < 0 else "#1a7f37" if lo > 0 else "#555"
            ax.errorbar([100 * mm["diff"]], [i], xerr=[[100 * (mm["diff"] - lo)], [100 * (hi - mm["diff"])]],
                        fmt="o", color=color, ms=4, capsize=2)
        ax.axvline(0, color="#999", lw=0.8)
        ax.set_xlabel(("Δ " + key + " (points)") if key != "mrr" else "Δ MRR × 100")
        ax.set_yticks(range(len(rows)), labels, fontsize=7)
        ax.invert_yaxis() if key == "hit@1" else None
    axes[0].set_title("paired difference, 95% bootstrap CI", loc="left", fontsize=9)
    if not rows:
        axes[0].text(0.5, 0.5, "no comparisons", transform=axes[0].transAxes, ha="center")
    fig.tight_layout()
    _save(fig, png_out)


def heatmap(runs: list[dict], png_out) -> None:
    """Harness hit@1 per question type, one panel per dataset."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_ds: dict[str, list[dict]] = {}
    for m in runs:
        if m.get("by_type"):
            by_ds.setdefault(m["dataset"], []).append(m)
    heights = [0.3 * len(ms) + 1.4 for ms in by_ds.values()] or [2]
    fig, axes = plt.subplots(len(heights), 1, figsize=(10, sum(heights)), gridspec_kw={"height_ratios": heights},
                             squeeze=False)
    for ax, (ds, ms) in zip(axes[:, 0], by_ds.items()):
        types = list(dict.fromkeys(t for m in ms for t in m["by_type"]))
        grid = [[(m["by_type"][t]["hit@1_rate"] if t in m["by_type"] and m["by_type"][t]["hit@1_rate"] is not None
                  else float("nan")) for t in types] for m in ms]
        im = ax.imshow(grid, aspect="auto", vmin=0, vmax=1, cmap="viridis")
        for i, row in enumerate(grid):
            for j, v in enumerate(row):
                if v == v:
                    ax.text(j, i, f"{100 * v:.0f}", ha="center", va="center", fontsize=6,
                            color="white" if v < 0.6 else "black")
        n = {t: max(m["by_type"].get(t, {}).get("questions", 0) for m in ms) for t in types}
        ax.set_xticks(range(len(types)), [f"{t}\n(n {n[t]})" for t in types], fontsize=7)
        ax.set_yticks(range(len(ms)), [m["variant"] for m in ms], fontsize=7)
        ax.set_title(f"{ds}: harness hit@1 % per question type", fontsize=9, loc="left")
        fig.colorbar(im, ax=ax, fraction=0.02)
    if not by_ds:
        axes[0, 0].text(0.5, 0.5, "no runs", ha="center")
    fig.tight_layout()
    _save(fig, png_out)


def build_report(metrics_paths, extra_md, md_out, html_out, png_out, official_paths=(), stats_paths=(),
                 forest_out=None, heatmap_out=None, manifest_path=None, log=print, missing=None) -> None:
    """``missing``: {dataset: why} of the datasets that could not run (missing.py),
    listed with how to get them at the top of the report."""
    runs = [json.loads(Path(p).read_text(encoding="utf-8")) for p in metrics_paths]
    official = {}
    for p in official_paths:
        o = json.loads(Path(p).read_text(encoding="utf-8"))
        official[(o["dataset"], o["variant"])] = o["official"]
    for m in runs:  # fold official.json into the run, as metrics.json's `official`
        if (m["dataset"], m["variant"]) in official:
            m["official"] = official[(m["dataset"], m["variant"])]
    stats = [json.loads(Path(p).read_text(encoding="utf-8")) for p in stats_paths]
    extras = [Path(p).read_text(encoding="utf-8") for p in extra_md] + [provenance_section(manifest_path, runs)]
    md = (markdown(runs) + _md_against_reference(runs, stats) + variant_table(runs) + _md_official(runs)
          + _md_stats(stats))
    gone = missing_markdown(missing or {})
    if gone:  # right under the title, before the tables of what did run
        title, rest = md.split("\n", 1)
        md = f"{title}\n\n{gone}{rest}"
    for text in extras:
        md += "\n" + text
    write_text(md_out, md)
    plot(runs, png_out)
    images = {"hitk": Path(png_out).name}
    if forest_out:
        forest_plot(stats, forest_out)
        images["forest"] = Path(forest_out).name
    if heatmap_out:
        heatmap(runs, heatmap_out)
        images["heatmap"] = Path(heatmap_out).name
    write_text(html_out, html_report(runs, stats, extras, images, missing_md=gone))
    log(f"report: {len(runs)} runs, {len(missing or {})} datasets missing, {sum(1 for m in runs if m.get('official'))} with official metrics, "
        f"{sum(len(s['comparisons']) for s in stats)} comparisons")
