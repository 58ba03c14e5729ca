"""The report's plots (PNG): harness hit@k per dataset and variant, the
forest plot of the paired differences, the hit@1 heatmap per question type;
drawn at once in forked processes when there are workers."""

from __future__ import annotations

import os

from ..evaluation.measures import HITS, MEASURES, PAIRED
from ..core.atomic import atomic_path
from .labels import by_dataset, is_locomo, label, type_label
from .numbers import printed

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

    # tight_layout has placed the axes and left a placeholder layout engine, for which savefig would
    # lay the figure out once more in a draw of its own: none left, the figure is drawn once
    fig.set_layout_engine(None)
    with atomic_path(png_out) as tmp:
        fig.savefig(tmp, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)


def plot(runs: list[dict], png_out) -> None:
    """Harness hit@1/5/10 as horizontal bars with their values, one panel per dataset."""
    plt = _pyplot()
    by_ds = by_dataset(runs)
    heights = [0.62 * len(ms) + 1.2 for ms in by_ds.values()] or [2.0]
    # each rate's bar colour, and the colour of a value printed inside it
    colors = {"hit@1": ("#1f4e8c", "white"), "hit@5": ("#4f8fd6", "white"), "hit@10": ("#a8c8ee", "black")}
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(len(heights), 1, figsize=(12, sum(heights) + 0.5),
                                 gridspec_kw={"height_ratios": heights}, squeeze=False)
        bar = 0.27
        for ax, (ds, ms) in zip(axes[:, 0], by_ds.items()):
            for j, k in enumerate(HITS):
                ys = [i + (j - 1) * bar for i in range(len(ms))]
                vals = [m.get(k + "_rate") for m in ms]
                ax.barh(ys, [100 * (v or 0) for v in vals], bar, label=k, color=colors[k][0])
                for y, v, m in zip(ys, vals, ms):
                    if v is None:
                        continue
                    # the value the tables print: after the bar, or inside its end where it would pass 100%
                    inside = 100 * v > INSIDE_FROM
                    ax.text(100 * v + (-0.8 if inside else 0.8), y, printed(m, k), va="center", fontsize=10,
                            ha="right" if inside else "left", color=colors[k][1] if inside else "black")
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
                scale = MEASURES[key].unit.scale
                ends = [0.0]
                # one errorbar call per colour with its rows' points (one per row: 0.6 s of the plot); rows do
                # not overlap, so the image is the one a call per row draws
                by_color: dict[str, tuple[list, list, list, list]] = {}
                for i, c in enumerate(cs):
                    mm = c["metrics"][key]
                    lo, hi = mm["ci95"]
                    d = mm["diff"]
                    color = DOWN if hi < 0 else UP if lo > 0 else FLAT
                    xs, ys, left, right = by_color.setdefault(color, ([], [], [], []))
                    xs.append(scale * d)
                    ys.append(i)
                    left.append(scale * (d - lo))
                    right.append(scale * (hi - d))
                    ends += [scale * lo, scale * hi]
                for color, (xs, ys, left, right) in by_color.items():
                    ax.errorbar(xs, ys, xerr=[left, right], fmt="o", color=color, ms=5, capsize=3)
                span = (max(ends) - min(ends)) or scale / 100
                ax.set_xlim(min(ends) - 0.08 * span, max(ends) + 0.08 * span)
                ax.axvline(0, color="#999", lw=0.8)
                ax.set_ylim(len(cs) - 0.5, -0.5)
                ax.set_yticks(range(len(cs)), names if key == PAIRED[0] else [""] * len(cs))
                ax.set_xlabel(f"Δ {MEASURES[key].label} ({MEASURES[key].diff_unit})")
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
    by_ds = {ds: [m for m in ms if m.get("by_type")] for ds, ms in by_dataset(runs).items()}
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


def draw(plots: list[tuple], workers: int) -> None:
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
