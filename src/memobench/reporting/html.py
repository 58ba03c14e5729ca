"""results/report.html: its style sheet, the HTML-only main tables (harness
and official metrics side by side per dataset) and the whole HTML report.
Every value from data or configuration is escaped; the HTML is never made by
parsing the Markdown."""

from __future__ import annotations

import html

from ..core.doc import to_html
from ..evaluation.measures import HARNESS_MEASURES, MEASURES, OFFICIAL_MEASURES, SATURATED
from ..evaluation.official import LOCOMO_CATEGORIES
from ..evaluation.published import published
from .labels import by_dataset, label
from .numbers import percent, printed, published_diff
from .sections import (DEPTH_MEANS, depths, latency_note, matrix_blocks, paired_blocks, per_type_blocks, pool_note, reading_guide, warned, warnings_note, attribution_note, type_paired_blocks,
                       variant_table)

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
table.board td.l,.defs{overflow-wrap:anywhere}
"""


def _e(x) -> str:
    return html.escape(str(x))


def _rate_cell(m: dict, key: str, pub: dict) -> str:
    ours = printed(m, key)
    if ours is None:
        return "<td>-</td>"
    measure = MEASURES[key]
    sat = measure.unit.saturates and m.get(key + "_rate") is not None and m[key + "_rate"] >= SATURATED
    text = ours + measure.unit.suffix
    if measure.counted:
        text += f" <small>({m[key]}/{m['hit_denominator']})</small>"
    if key in pub:
        d = published_diff(m, key, pub[key])
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
        mark = "<sup title='k beyond this variant&#x27;s list depth: every list of it is shorter than k'>†</sup>" if k > o["depth"] else ""
        sat = MEASURES[n].unit.saturates and v >= SATURATED
        cells.append(f"<td class='{'sat' if sat else ''}'>{percent(v)}{mark}</td>")
    return "".join(cells)


def html_main_tables(runs: list[dict]) -> list[str]:
    out = []
    for ds, ms in by_dataset(runs).items():
        offs = [m.get("official") for m in ms if m.get("official")]
        lme = any(next(k for k in OFFICIAL_MEASURES if MEASURES[k].lme_only) in o for o in offs)
        names = [k for k in OFFICIAL_MEASURES if lme or not MEASURES[k].lme_only]
        rules = ("LongMemEval official rules" if lme else "LoCoMo evidence sessions") if offs else "none for this format"
        out.append(f"<h3>{_e(ds)}</h3><table>")
        out.append("<tr><th class='l' rowspan='2'>variant</th>"
                   f"<th class='harness' colspan='{1 + len(HARNESS_MEASURES)}'>"
                   "HARNESS metrics (Memo harness rules, what we reproduce)</th>"
                   f"<th class='official' colspan='{len(names) + 1}'>OFFICIAL metrics ({_e(rules)})</th>"
                   "<th rowspan='2'>random hit@1</th></tr>")
        out.append("<tr><th class='harness'>n</th>" + "".join(
            f"<th class='harness'>{MEASURES[k].label}</th>" for k in HARNESS_MEASURES)
            + "<th class='official'>n</th>" + "".join(f"<th class='official'>{n}</th>" for n in names) + "</tr>")
        for m in ms:
            pub = published(m["dataset"], m["variant"])
            rnd = (m.get("random") or {}).get("hit@1")
            out.append(f"<tr><td class='l'>{_e(warned(m))}</td><td>{_e(m['questions'])}</td>"
                       + "".join(_rate_cell(m, k, pub) for k in HARNESS_MEASURES)
                       + _official_cells(m.get("official"), names)
                       + f"<td>{percent(rnd)}</td></tr>")
        out.append("</table>")
        warnings = warnings_note(ms)
        if warnings is not None:
            out.append(to_html([warnings]))
        attributed = attribution_note(ms)
        if attributed is not None:
            out.append(to_html([attributed]))
        pools = pool_note(ms)
        if pools is not None:
            out.append(to_html([pools]))
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
                       f"{_e(parts)}; list depth {_e(depths(ms))} ({_e(DEPTH_MEANS)}; † marks such a k). Questions "
                       f"a variant gave no list count with an empty list.{extra}</p>")
    return out


def html_report(runs, stats, extras: list, images: dict[str, str], missing: list | None = None,
                others: list | None = None) -> str:
    """``extras``: blocks (analyze, falsifier, provenance); ``missing``: the missing-datasets blocks;
    ``others``: the folder's results that this run does not make (sections.other_results_blocks)."""
    paired = paired_blocks(runs, stats)
    matrix = matrix_blocks(runs, stats)
    by_type = type_paired_blocks(runs, stats)
    nav = ([("missing", "Missing datasets")] * bool(missing) + [("results", "Results")]
           + [("others", "Board")] * bool(others)
           + [("paired", "Paired differences")] * bool(paired) + [("matrix", "Who beats whom")] * bool(matrix)
           + [("typediff", "Differences per type")] * bool(by_type) + [("types", "Per question type")]
           + [("hitk", "hit@k plot")] * bool(images.get("hitk"))
           + [("provenance", "Provenance")] * any(b and b[0].text == "Provenance" for b in extras))
    out = ["<!doctype html><html><head><meta charset='utf-8'><title>memobench report</title>"
           f"<style>{CSS}</style></head><body>", "<h1>memobench report</h1>",
           "<nav>" + "".join(f"<a href='#{a}'>{_e(t)}</a>" for a, t in nav) + "</nav>",
           to_html(reading_guide(html_colours=True)), to_html(latency_note(runs))]
    if missing:
        out.append(to_html(missing))
    out.append("<h2 id='results'>Harness and official metrics</h2>")
    out += html_main_tables(runs)
    if others:
        out.append("<div id='others'>" + to_html(others) + "</div>")
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
