"""The latency files (rule ``latency``): ``latency.md`` and ``latency.html`` with a table per
dataset of the timed variants' search latency (memory services' requests,
in-process retrievers' calls; cold and warm, p50/p95/p99 with their
intervals), ingestion and hit@5, ``latency.json`` with the same numbers, and
``latency.png``: hit@5 against warm p50 and p95 search latency, one point
pair per variant (a fusion's step alone is no search: it is left out of the
plot), a panel per dataset, and below it, where a variant measured a load
curve (system.load), its latency against throughput, and where services have
token budgets, their recall within each budget against latency
(latency_budgets.py); with a table per dataset
of the services' own costs (server starts, ingestion, time to searchable, peak
memory) and load levels (numbers: evaluation/latency.py)."""

from __future__ import annotations

import html
import json
from pathlib import Path

from ..core import layout
from ..core.doc import Heading, Html, Markdown, Para, Table, to_html, to_markdown
from ..evaluation.latency import RECALL, summarize
from ..catalog.registry import kind_of
from ..retrieval.timings import COLD, MEASURES
from .html import CSS
from .numbers import plain

# where the timings tables lie (the folder of layout.TIMINGS), for the page's text
TIMINGS_FOLDER = layout.TIMINGS.split("{", 1)[0]


def _ms(q: dict | None, interval: bool = True) -> str:
    if not q:
        return "-"
    text = plain(q["ms"])
    return f"{text} [{plain(q['low'])}, {plain(q['high'])}]" if interval else text


def blocks(summaries: list[dict], png_name: str) -> list:
    """The latency page: what it measures, then a table per dataset, then the plot."""
    out = [Heading(1, "Search latency"),
           Para("Each search and ingestion request of the memory services (system variants), and each call of "
                "the in-process retrievers (reference and Python retrievers; a fusion's step alone), timed on the "
                "monotonic clock (milliseconds; [95% bootstrap interval]). Measurements of this run: they differ "
                f"from run to run ({TIMINGS_FOLDER}), unlike every other result. A cold search is a namespace's "
                "first after its ingestion in that job (in-process: the first call on its haystack in the job, "
                "which builds what is built per haystack): each row says what its cold search includes, so read "
                "a service's cold beside an in-process one with that in mind; warm are the others and the repeats "
                "(system.warm_repeats; a Python retriever's determinism check). Failed searches are left out of "
                "the percentiles and counted; a retried one is timed from its first attempt to its answer, backoff "
                "included, and counted as retried. Outside the server: a warm "
                "search's time less what the server said it spent (HTTP's Server-Timing header, MCP's result "
                "_meta): the client, the connection, the protocol and JSON. Ingestion: per request (with "
                "system.concurrency requests in flight). The Memo variants are not timed: one engine pass ranks "
                "them all, and its time is no single variant's.")]
    header = ["variant", RECALL, "searches (cold / warm, failed, retried)", "cold p50 (ms)", "a cold search includes",
              "warm p50 (ms)", "warm p95 (ms)", "warm p99 (ms)",
              "outside the server p50 / p95 (ms)", "ingested sessions", "ingest p50 (ms)", "sessions/s per request"]
    by_ds: dict[str, list[dict]] = {}
    for s in summaries:
        by_ds.setdefault(s["dataset"], []).append(s)
    for ds, rows in by_ds.items():
        table = []
        for s in rows:
            ing, cold, warm, outside = s["ingest"], s["cold"], s["warm"], s["outside_server"]
            table.append([
                f"{s['variant']} ({_kind(s)})", "-" if s[RECALL] is None else f"{100 * s[RECALL]:.1f}%",
                f"{cold['n']} / {warm['n']}, {s['failed']}, {s.get('retried', 0)}", _ms(cold.get("p50"), False),
                COLD.get(s.get("kind"), "-"), _ms(warm.get("p50")),
                _ms(warm.get("p95")), _ms(warm.get("p99")),
                (f"{_ms(outside.get('p50'), False)} / {_ms(outside.get('p95'), False)}" if outside["n"]
                 else "- (no Server-Timing)"),
                str(ing["sessions"]), "-" if ing["p50_ms"] is None else plain(ing["p50_ms"]),
                "-" if ing["sessions_per_s"] is None else f"{ing['sessions_per_s']:.1f}"])
        out += [Heading(2, ds), Table(header, table), *_service_costs(rows)]
    from .latency_budgets import blocks as budget_blocks

    out += budget_blocks(summaries)
    out += [Heading(2, "Recall against search latency"),
            Markdown(f"![hit@5 against warm search latency]({png_name})"),
            Html(f"<img src='{html.escape(png_name, quote=True)}' alt='hit@5 against warm search latency'>")]
    return out


def _spread(x: dict | None) -> str:
    if not x or not x.get("n"):
        return "-"
    return f"{x['n']}: {plain(x['p50_ms'])} / {plain(x['max_ms'])}"


def _service_costs(rows: list[dict]) -> list:
    """The services' own costs (their servers' starts, a namespace's ingestion and time to searchable, a
    stdio server's peak memory) and the load curves, for the variants that have them."""
    out = []
    costs = [s for s in rows if s.get("start", {}).get("n") or s.get("ready", {}).get("n")
             or s.get("ready", {}).get("timed_out") or s.get("ingest", {}).get("namespaces")
             or s.get("memory", {}).get("servers")]
    if costs:
        table = []
        for s in costs:
            ing, ready, mem = s["ingest"], s["ready"], s["memory"]
            table.append([s["variant"], _spread(s["start"]),
                          "-" if not ing.get("namespaces") else f"{ing['namespaces']}: {plain(ing['wall_s'])} s, "
                          + ("-" if ing["per_session_ms"] is None else f"{plain(ing['per_session_ms'])} ms/session"),
                          "-" if not (ready["n"] or ready["timed_out"])
                          else f"until {ready['until']}: {_spread(ready)}, {ready['timed_out']} timed out",
                          "-" if mem.get("peak_mb") is None else f"{mem['peak_mb']:.1f} ({mem['servers']} server(s))"])
        out += [Para("A service's own costs. Server starts: a stdio server's process start and handshake, apart "
                     "from its searches (with a server per namespace, one per namespace): how many, p50 / largest "
                     "ms. Ingestion: the namespaces ingested, their requests' wall time in total, and per session. "
                     "Time to searchable (system.ready): from a namespace's last ingest answer until the service "
                     "searches it, p50 / largest ms. Peak memory: a stdio server's peak resident memory (VmHWM, "
                     "the process and its descendants; the largest of its servers), MiB."),
                Table(["variant", "server starts (n: p50 / max ms)", "ingestion (namespaces: total, per session)",
                       "time to searchable (n: p50 / max ms)", "peak memory (MiB)"], table)]
    loaded = [s for s in rows if s.get("load")]
    if loaded:
        table = [[s["variant"], str(lv["concurrency"]), f"{lv['searches']}, {lv['failed']}",
                  "-" if lv["searches_per_s"] is None else f"{lv['searches_per_s']:.1f}",
                  _ms(lv.get("p50")), _ms(lv.get("p95"))]
                 for s in loaded for lv in s["load"].values()]
        out += [Para("Load (system.load): on one warmed namespace, its questions' searches again with this many in "
                     "flight at once, each level bounded in searches and seconds; throughput is the searches "
                     "answered per second of the level's wall time. No list is read from them."),
                Table(["variant", "in flight", "searches, failed", "searches/s", "p50", "p95"], table)]
    return out


def _kind(summary: dict) -> str:
    """What a row's times measure, in a word or two."""
    if summary.get("served_by"):  # which server measured it: its name and version, its package or host
        return f"service: {summary['served_by']}"
    return {MEASURES["system"]: "service", MEASURES["fusion"]: "fusion step"}.get(summary.get("measures"), "in-process")


def _plotted(summary: dict) -> str:
    """The phase a variant's point shows: warm, or cold where it has no warm search (an in-process
    retriever on LongMemEval: one question per haystack, every call builds its index)."""
    return "warm" if summary["warm"]["n"] else "cold"


def plot(summaries: list[dict], png_out) -> None:
    """hit@5 against warm p50 (filled) and p95 (open) search latency (cold where a variant has no warm
    search, so labelled), one point pair per variant, one panel per dataset (log-scaled latency)."""
    from .figures import STYLE, _pyplot, _save

    plt = _pyplot()
    from matplotlib.ticker import FuncFormatter, NullFormatter

    by_ds: dict[str, list[dict]] = {}
    for s in summaries:
        if s.get("measures") != MEASURES["fusion"]:
            by_ds.setdefault(s["dataset"], []).append(s)
    from .latency_budgets import groups, panel

    loaded = {ds: [s for s in rows if s.get("load")] for ds, rows in by_ds.items()}
    loaded = {ds: rows for ds, rows in loaded.items() if rows}
    budgeted = groups(summaries)  # a row of panels: the services' recall within token budgets
    n = max(1, len(by_ds), len(budgeted))
    n_rows = 1 + bool(loaded) + bool(budgeted)
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(n_rows, n, figsize=(5.5 * n, 4.2 * n_rows), squeeze=False)
        for ax in axes.flat[len(by_ds):n]:  # a first-row panel of no dataset
            ax.set_axis_off()
        for ax, ds in zip(axes[1] if loaded else [], by_ds):
            _load_panel(ax, ds, loaded.get(ds, []))
        if loaded:
            for ax in axes[1][len(by_ds):]:
                ax.set_axis_off()
        if budgeted:
            for j, ax in enumerate(axes[-1]):
                if j < len(budgeted):
                    panel(ax, *list(budgeted.items())[j])
                else:
                    ax.set_axis_off()
        for ax, (ds, rows) in zip(axes[0], by_ds.items()):
            xs = []
            stacked: dict[float, int] = {}  # labels at one recall stack upward, not over each other
            for s in rows:
                phase = _plotted(s)
                p50, p95 = s[phase].get("p50"), s[phase].get("p95")
                if not p50 or s[RECALL] is None:
                    continue
                y = 100 * s[RECALL]
                xs += [p50["ms"], p95["ms"]]
                ax.plot([p50["ms"], p95["ms"]], [y, y], color="#4f8fd6", linewidth=1.5)
                ax.plot([p50["ms"]], [y], "o", color="#1f4e8c")
                ax.plot([p95["ms"]], [y], "o", markerfacecolor="white", color="#1f4e8c")
                level = stacked[y] = stacked.get(y, -1) + 1
                ax.annotate(s["variant"] + (" (cold)" if phase == "cold" else ""), (p50["ms"], y),
                            textcoords="offset points", xytext=(0, 7 + 11 * level), ha="center", fontsize=9)
            ax.set_xscale("log")
            if xs:  # at least a decade wide, so that the log axis has labelled ticks
                ax.set_xlim(min(xs) / 3, max(xs) * 3)
            ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xlabel("search latency (ms), warm: p50 filled, p95 open")
            ax.set_ylabel(f"{RECALL} (%)")
            ax.set_ylim(0, 100 + 10 + 5 * max(stacked.values(), default=0))
            ax.set_title(ds)
            ax.grid(True, alpha=0.3)
        fig.tight_layout()
        _save(fig, png_out)


def _load_panel(ax, ds: str, rows: list[dict]) -> None:
    """Search latency (p50 filled, p95 open) against throughput, a line per variant through its levels of
    concurrency (each point labelled with its level)."""
    for s in rows:
        levels = [lv for lv in s["load"].values() if lv.get("p50") and lv.get("searches_per_s")]
        xs = [lv["searches_per_s"] for lv in levels]
        line, = ax.plot(xs, [lv["p50"]["ms"] for lv in levels], "o-", label=f"{s['variant']} p50")
        ax.plot(xs, [lv["p95"]["ms"] for lv in levels], "o--", markerfacecolor="white", color=line.get_color(),
                label=f"{s['variant']} p95")
        for lv in levels:
            ax.annotate(str(lv["concurrency"]), (lv["searches_per_s"], lv["p50"]["ms"]), textcoords="offset points",
                        xytext=(6, -12), ha="left", fontsize=8)
    if not rows:
        ax.set_axis_off()
        return
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    ax.set_xlabel("throughput (searches/s); label: searches in flight")
    ax.set_ylabel("search latency (ms)")
    ax.set_title(f"{ds}: latency against throughput")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)


def build(timings: dict, metrics: dict, md_out, json_out, png_out, html_out, log=print,
          budgets: dict | None = None) -> None:
    """The latency files from every timed variant's timings tables (``timings``: {(dataset, variant):
    its segments' tables}) and metrics.json (``metrics``: {(dataset, variant): its content});
    ``budgets``: {(dataset, variant): its official.json's token budgets}."""
    import pyarrow.parquet as pq

    from ..core.atomic import write_text
    from ..evaluation.budgets import any_name
    from ..retrieval.timings import schema_meta
    from ..services.identity import served_text

    summaries = []
    n = 0
    for (ds, v), m in metrics.items():
        tables = [pq.read_table(p) for p in timings.get((ds, v), [])]
        rows = [r for t in tables for r in t.to_pylist()]
        n += len(rows)
        measures = next((schema_meta(t.schema).get("measures") for t in tables), None)
        b = (budgets or {}).get((ds, v))
        summaries.append({**summarize(ds, v, rows, m), "measures": measures, "kind": kind_of(m),
                          **({"served_by": served_text(m.get("system"))} if m.get("kind") == "system" else {}),
                          # recall within each token budget, beside the latency (latency_budgets.py)
                          **({"budgets": {"grain": b["grain"], "tokenizer": b["tokenizer"], "budgets": b["budgets"],
                                          **{any_name(t): b[any_name(t)] for t in b["budgets"]}}} if b else {})})
    write_text(json_out, json.dumps(summaries, indent=2, sort_keys=True) + "\n")
    page = blocks(summaries, Path(png_out).name)
    write_text(md_out, to_markdown(page).rstrip("\n") + "\n")
    write_text(html_out, "<!doctype html><html><head><meta charset='utf-8'><title>memobench latency</title>"
                         f"<style>{CSS}</style></head><body>{to_html(page)}</body></html>\n")
    plot(summaries, png_out)
    log(f"latency: {len(summaries)} timed variant(s), {n} timed requests and calls")
