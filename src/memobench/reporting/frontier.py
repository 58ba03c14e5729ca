"""The recall-tokens frontier (docs/protocol.md#token-budgets): per dataset
and grain (a turn variant's gold is turns, a session variant's sessions: not
one front), each variant's recall within each token budget, as a table and a
plot, the Pareto front marked: a point (budget, recall) is on it when no
variant reaches at least its recall within at most its budget, one of them
strictly better."""

from __future__ import annotations

from ..core.doc import Code, Heading, Html, Para, Table
from .labels import by_dataset, label
from .numbers import percent

MARK = " ◆"  # a point on the Pareto front


def points(m: dict) -> list[tuple[int, float]]:
    """(budget, recall_any within it) of a run's budgets block, in budget order."""
    b = m.get("budgets") or {}
    return [(t, b[f"recall_any@{t}tok"]) for t in b.get("budgets", []) if b.get(f"recall_any@{t}tok") is not None]


def pareto(pts: list[tuple[float, float]]) -> set[int]:
    """The indexes of the points no other point dominates (no more cost and no less value, one strictly)."""
    return {i for i, (c, v) in enumerate(pts)
            if not any((c2 <= c and v2 >= v) and (c2 < c or v2 > v) for c2, v2 in pts)}


def fronts(ms: list[dict]) -> dict[tuple[str, int], bool]:
    """{(variant, budget): on the dataset's front} over every variant's points."""
    flat = [(m["variant"], t, r) for m in ms for t, r in points(m)]
    on = pareto([(t, r) for _, t, r in flat])
    return {(v, t): i in on for i, (v, t, _) in enumerate(flat)}


def by_grain(runs: list[dict]) -> dict[str, list[dict]]:
    """The runs with budgets by dataset, then grain: {title: runs}, a turn grain's titled apart."""
    out: dict[str, list[dict]] = {}
    for ds, ms in by_dataset([m for m in runs if points(m)]).items():
        for m in ms:
            turn = m["budgets"].get("grain") == "turn"
            out.setdefault(f"{ds}, turn grain" if turn else ds, []).append(m)
    return out


def frontier_blocks(runs: list[dict], image: str | None = None) -> list:
    """The report's "Recall within token budgets" section: one table per dataset with budgets, and
    ``image`` (the plot's file name) in the HTML."""
    from html import escape

    with_budgets = by_grain(runs)
    if not with_budgets:
        return []
    first = next(iter(with_budgets.values()))[0]["budgets"]
    tok = first["tokenizer"]
    out = [Heading(2, "Recall within token budgets", anchor="token-budgets"),
           Para(["Each session variant's deep list as a reader receives it: the sessions' text in rank order "
                 "(a turn variant's turn list, its turns', at turn grain: apart, its gold is turns), "
                 "counted with ", Code(tok["name"]), f" (file sha256 {tok['sha256'][:12]}…). recall_any within T "
                 "tokens: the share of the questions with a gold session whose whole text ends within the first T "
                 "tokens of that context (the official metrics' gold and questions, their top-level convention). ◆: "
                 "on the dataset's Pareto front (no variant reaches as much recall within as few tokens). Context "
                 "tokens at 10: the tokens the first ten listed sessions make; tokens to the first gold: the median "
                 "over the questions whose list holds one (docs/protocol.md#token-budgets)."], cls="note")]
    for ds, ms in with_budgets.items():
        budgets = ms[0]["budgets"]["budgets"]
        on = fronts(ms)
        rows = []
        for m in ms:
            b = m["budgets"]
            rows.append([label(m), Code(b["convention"]), b["questions"],
                         *((percent(b.get(f"recall_any@{t}tok")) + (MARK if on.get((m["variant"], t)) else ""))
                           for t in budgets),
                         _tokens(b.get("context_tokens@10")), _tokens(b.get("tokens_to_first_gold_median"))])
        out += [Heading(3, ds),
                Table(["variant", "convention", "questions", *(f"within {t:,} tokens" for t in budgets),
                       "context tokens at 10", "tokens to the first gold"], rows, left=2)]
        if any(m["budgets"]["tokenizer"] != tok for m in ms):
            out.append(Para("Not every variant here was counted with the same tokenizer: compare within one.",
                            cls="note"))
    if image:
        out.append(Html(f"<img src='{escape(image, quote=True)}' alt='recall within token budgets per dataset'>"))
    return out


def _tokens(x) -> str:
    return "-" if x is None else f"{x:,.0f}"


def frontier_plot(runs: list[dict], png_out) -> None:
    """recall_any against the budget (tokens, log scale), one panel per dataset, the front marked."""
    from .figures import STYLE, _pyplot, _save

    plt = _pyplot()
    by_ds = by_grain(runs)
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(max(len(by_ds), 1), 1, figsize=(10, 4.2 * max(len(by_ds), 1) + 0.3), squeeze=False)
        for ax, (ds, ms) in zip(axes[:, 0], by_ds.items()):
            on = fronts(ms)
            front = sorted((t, r) for m in ms for t, r in points(m) if on[(m["variant"], t)])
            if front:
                ax.step([t for t, _ in front], [100 * r for _, r in front], where="post", color="#bbbbbb",
                        linewidth=6, alpha=0.6, label="Pareto front", zorder=1)
            for m in ms:
                pts = points(m)
                ax.plot([t for t, _ in pts], [100 * r for _, r in pts], marker="o", label=label(m), zorder=2)
            ax.set_xscale("log", base=2)
            ax.set_xticks([t for t, _ in points(ms[0])], [f"{t:,}" for t, _ in points(ms[0])])
            ax.set_ylim(0, 100)
            ax.set_xlabel(f"token budget ({ms[0]['budgets']['tokenizer']['name']})")
            ax.set_ylabel("recall_any, %")
            ax.set_title(f"{ds}: recall within a token budget (n = {ms[0]['budgets']['questions']})", loc="left")
            ax.legend(loc="lower right", frameon=False, fontsize=9)
        if not by_ds:
            axes[0, 0].text(0.5, 0.5, "no runs with token budgets", ha="center", transform=axes[0, 0].transAxes)
        fig.tight_layout()
    _save(fig, png_out)
