"""Recall within a token budget against search latency, on the latency page
(docs/protocol.md#token-budgets): per dataset and grain, each memory
service's recall_any within each budget (its official.json's ``budgets``)
beside its p50 search latency (warm; cold where it has no warm search), as a
table and a panel row of ``latency.png``, the Pareto front of each budget
marked: no service reaches as much recall within that budget at a lower
latency. Services only: an in-process retriever's call is no request."""

from __future__ import annotations

from ..core.doc import Heading, Para, Table
from ..evaluation.budgets import any_name
from ..retrieval.timings import MEASURES
from .frontier import MARK, pareto
from .numbers import percent, plain


def latency_ms(s: dict) -> float | None:
    """A summary's p50 search latency (ms): warm, or cold without a warm search."""
    p50 = s["warm" if s["warm"]["n"] else "cold"].get("p50")
    return p50["ms"] if p50 else None


def groups(summaries: list[dict]) -> dict[str, list[dict]]:
    """The services with budgets and a latency, by dataset then grain: {title: summaries}."""
    out: dict[str, list[dict]] = {}
    for s in summaries:
        if s.get("measures") == MEASURES["system"] and s.get("budgets") and latency_ms(s) is not None:
            turn = s["budgets"]["grain"] == "turn"
            out.setdefault(f"{s['dataset']}, turn grain" if turn else s["dataset"], []).append(s)
    return out


def fronts(ms: list[dict]) -> dict[tuple[str, int], bool]:
    """{(variant, budget): on that budget's front} of one group's services."""
    out = {}
    for t in ms[0]["budgets"]["budgets"]:
        pts = [(latency_ms(s), s["budgets"].get(any_name(t))) for s in ms]
        kept = [j for j, (_, r) in enumerate(pts) if r is not None]
        on = pareto([pts[j] for j in kept])
        out.update({(ms[j]["variant"], t): i in on for i, j in enumerate(kept)})
    return out


def blocks(summaries: list[dict]) -> list:
    by = groups(summaries)
    if not by:
        return []
    out = [Heading(2, "Recall within a token budget against search latency"),
           Para("Each memory service's recall_any within each token budget (official.json's budgets: the gold "
                "within the first T tokens of the context its list delivers, docs/protocol.md#token-budgets) "
                f"beside its p50 search latency (warm; cold where it has none).{MARK}: on that budget's Pareto "
                "front, no service reaching as much recall within the budget at a lower latency.")]
    for title, ms in by.items():
        budgets = ms[0]["budgets"]["budgets"]
        on = fronts(ms)
        rows = [[s["variant"], plain(latency_ms(s)),
                 *(percent(s["budgets"].get(any_name(t))) + (MARK if on.get((s["variant"], t)) else "")
                   for t in budgets)] for s in ms]
        out += [Heading(3, title), Table(["service", "search p50 (ms)", *(f"within {t:,} tokens" for t in budgets)],
                                         rows, left=1)]
    return out


def panel(ax, title: str, ms: list[dict]) -> None:
    """recall_any within each budget (a colour each) against p50 search latency (log), each budget's
    front a step line."""
    on = fronts(ms)
    for t in ms[0]["budgets"]["budgets"]:
        pts = sorted((latency_ms(s), 100 * s["budgets"][any_name(t)], on[(s["variant"], t)]) for s in ms
                     if s["budgets"].get(any_name(t)) is not None)
        line, = ax.plot([x for x, _, _ in pts], [y for _, y, _ in pts], "o", label=f"within {t:,} tokens")
        front = [(x, y) for x, y, f in pts if f]
        ax.step([x for x, _ in front], [y for _, y in front], where="post", color=line.get_color(), alpha=0.5)
    for s in ms:
        ax.annotate(s["variant"], (latency_ms(s), 2), textcoords="offset points", xytext=(0, 0), ha="center",
                    fontsize=8, rotation=90)
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_xscale("log")
    xs = [latency_ms(s) for s in ms]
    ax.set_xlim(min(xs) / 3, max(xs) * 3)  # at least a decade wide: labelled ticks
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(0, 100)
    ax.set_xlabel("p50 search latency (ms)")
    ax.set_ylabel("recall_any within the budget (%)")
    ax.set_title(f"{title}: recall within a token budget against latency", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
