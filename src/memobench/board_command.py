"""`memobench board`: the board of a results folder (every variant's results, however made) as
tables a paper or a spreadsheet takes: the leaderboard per dataset, the harness metrics, the
official metrics by convention and the paired comparisons, each as CSV and LaTeX, and per dataset
a figure of recall and hit rate against k. Reads the folder only; runs nothing."""

from __future__ import annotations

import json
from pathlib import Path

from .core import layout
from .core.atomic import write_text
from .reporting.board import BOARD_MEASURES, annotate, leaderboard


class MemobenchError(Exception):
    """A board not made: its text is the one ``memobench:`` line printed."""

LEADERBOARD_COLUMNS = ["dataset", "rank", "variant", "kind", "made_by", "questions",
                       *(c for k in BOARD_MEASURES for c in (k, f"{k}_low", f"{k}_high")),
                       "stale", "code", "date", "data_file", "definition"]


def add_arguments(p) -> None:
    p.add_argument("--results", default=layout.RESULTS, help="the results folder (default: results)")
    p.add_argument("--by", default="hit@1", type=sort_measure,
                   help=f"the measure each dataset's leaderboard is sorted by: {', '.join(BOARD_MEASURES)}, or "
                        f"recall within a token budget, recall_any@1024tok or recall_all@1024tok (default hit@1)")
    p.add_argument("--out", help="where the CSV, LaTeX and figure files go (default: RESULTS/board)")


def sort_measure(name: str) -> str:
    """``--by``'s value: a board measure or recall within a token budget."""
    import argparse

    from .evaluation.budgets import is_budget_name

    if name not in BOARD_MEASURES and not is_budget_name(name):
        raise argparse.ArgumentTypeError(f"{name!r}: one of {', '.join(BOARD_MEASURES)}, or recall_any@{{T}}tok or "
                                         f"recall_all@{{T}}tok of a token budget T (official.json's budgets)")
    return name


def entries(results: Path) -> list[dict]:
    """Every variant folder's metrics.json (its official.json folded in), with its board facts;
    a stale one (another data file than the manifest's) is kept and marked (``board.stale``)."""
    from .core.provenance import source_fingerprint

    files = {}
    manifest = results / Path(layout.MANIFEST).name
    if manifest.is_file():
        files = {f["dataset"]: f for f in json.loads(manifest.read_text(encoding="utf-8")).get("files", [])}
    source = source_fingerprint()
    out = []
    for path in sorted(results.glob("*/*/" + Path(layout.METRICS).name)):
        try:
            m = json.loads(path.read_text(encoding="utf-8"))
            official = path.parent / Path(layout.OFFICIAL).name
            if official.is_file():
                o = json.loads(official.read_text(encoding="utf-8"))
                m["official"] = o.get("official")
                m["budgets"] = o.get("budgets")
                m["data_file"] = o.get("data_file") or m.get("data_file")
        except (OSError, ValueError) as e:
            raise MemobenchError(f"memobench: {path}: cannot read it ({e})") from None
        if not isinstance(m.get("questions"), int):
            continue  # not a variant's merged metrics (an older or partial file)
        annotate(m, path, results, False, files.get(m["dataset"]), source)
        out.append(m)
    return out


def tables(results: Path, by: str = "hit@1") -> dict:
    """{name: DataFrame}: ``leaderboard`` (every dataset's, sorted by ``by``), ``harness`` (one row per
    variant, its harness rates), ``official`` (one row per variant and averaging convention) and
    ``paired`` (each dataset's paired tests over all of its entries but the stale, as the report's
    board computes them: one row per comparison and measure)."""
    import pandas as pd

    from .evaluation.measures import HARNESS_MEASURES
    from .reporting.board import board_stats, value

    found = entries(results)
    if not found:
        raise MemobenchError(f"memobench: {results}: no variant's results (results/DATASET/VARIANT/metrics.json) "
                             f"to put on a board; run the pipeline or memobench score first")
    rows = []
    for ds, board in leaderboard(found, results, by).items():
        for r in board:
            rows.append({**{k: v for k, v in r.items() if not k.startswith("_")},
                         "stale": r["_m"]["board"]["stale"] or ""})
    harness = pd.DataFrame([{"dataset": m["dataset"], "variant": m["variant"], "questions": m["questions"],
                             **{k: value(m, k) for k in HARNESS_MEASURES}} for m in found])
    official = []
    for m in found:
        block = m.get("official") or {}
        for conv, b in (block.get("conventions") or {}).items():
            official.append({"dataset": m["dataset"], "variant": m["variant"], "convention": conv,
                             "questions": b.get("questions"),
                             **{k: v for k, v in b.items() if "@" in k and isinstance(v, (int, float))}})
    fresh = [m for m in found if not m["board"]["stale"]]
    paired = []
    for s in board_stats(fresh, [], results, set(), log=lambda line: None):
        for kind, cs in (("comparison", s.get("comparisons", [])), ("pair", s.get("pairs", []))):
            for c in cs:
                for k, mm in c["metrics"].items():
                    ci = mm.get("ci95") or [None, None]
                    paired.append({"dataset": s["dataset"], "kind": kind, "variant": c["variant"],
                                   "baseline": c["baseline"], "metric": k, "n": mm.get("n"), "diff": mm.get("diff"),
                                   "ci_low": ci[0], "ci_high": ci[1], "p": mm.get("p"),
                                   "p_analytic": mm.get("p_analytic"), "p_holm": mm.get("p_holm")})
    columns = LEADERBOARD_COLUMNS + ([by] if by not in BOARD_MEASURES else [])  # a budget sorted by: its column
    return {"leaderboard": pd.DataFrame(rows, columns=columns), "harness": harness,
            "official": pd.DataFrame(official), "paired": pd.DataFrame(paired)}


def latex(df) -> str:
    """A DataFrame as a LaTeX tabular (booktabs), every cell escaped; numbers as they are."""
    def esc(x) -> str:
        if x is None or (isinstance(x, float) and x != x):
            return "--"
        text = str(x)
        for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("$", r"\$"), ("#", r"\#"),
                     ("_", r"\_"), ("{", r"\{"), ("}", r"\}"), ("~", r"\textasciitilde{}"), ("^", r"\^{}")):
            text = text.replace(a, b) if a != "\\" else text.replace(a, "\0")
        return text.replace("\0", r"\textbackslash{}")

    lines = [r"\begin{tabular}{" + "l" * len(df.columns) + "}", r"\toprule",
             " & ".join(esc(c) for c in df.columns) + r" \\", r"\midrule"]
    lines += [" & ".join(esc(x) for x in row) + r" \\" for row in df.itertuples(index=False)]
    return "\n".join(lines + [r"\bottomrule", r"\end{tabular}"]) + "\n"


def recall_figure(results: Path, out: Path) -> list[Path]:
    """Per dataset, official recall_any@k and recall_all@k against k (official.json: k = 1 to 50) with
    the harness's hit@1, @5, @10 as points, one line colour per variant; the files written."""
    import matplotlib

    from .evaluation.measures import HITS, MEASURES

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_ds: dict[str, list] = {}
    for path in sorted(results.glob("*/*/" + Path(layout.OFFICIAL).name)):
        o = json.loads(path.read_text(encoding="utf-8"))
        block = o.get("official")
        metrics = path.parent / Path(layout.METRICS).name
        if not block or not metrics.is_file():
            continue
        by_ds.setdefault(path.parent.parent.name, []).append(
            (path.parent.name, block, json.loads(metrics.read_text(encoding="utf-8"))))
    written = []
    for ds, rows in by_ds.items():
        fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
        for v, block, m in rows:
            for i, (ax, what) in enumerate(zip(axes, ("recall_any", "recall_all"))):
                ks = sorted(int(k.split("@")[1]) for k in block if k.partition("@")[0] == what)
                line, = ax.plot(ks, [100 * block[f"{what}@{k}"] for k in ks], marker="o", label=v)
                if i == 0:  # the harness's hit@k beside recall_any@k: a gold session in the top k, by its rules
                    hits = [(MEASURES[k].cutoff, m.get(f"{k}_rate")) for k in HITS if m.get(f"{k}_rate") is not None]
                    ax.scatter([k for k, _ in hits], [100 * h for _, h in hits], marker="x", color=line.get_color())
        for ax, what in zip(axes, ("recall_any@k (x: harness hit@k)", "recall_all@k")):
            ax.set_xscale("log")
            ax.set_xlabel("k (sessions retrieved)")
            ax.set_title(what)
            ax.grid(alpha=0.3)
        axes[0].set_ylabel("% of questions")
        axes[0].legend(fontsize=7)
        fig.suptitle(f"{ds}: recall and hit rate against k")
        path = out / f"recall_at_k.{ds}.png"
        fig.savefig(path, bbox_inches="tight", dpi=100)
        plt.close(fig)
        written.append(path)
    return written


def text(board) -> str:
    """The leaderboard as printed: per dataset, rank, variant, its measures with intervals."""
    from .evaluation.budgets import is_budget_name
    from .reporting.board import with_interval

    out = []
    for ds, rows in board.items():
        out.append(f"{ds}:")
        for r in rows:
            mark = " STALE: " + r["_m"]["board"]["stale"] if r["_m"]["board"]["stale"] else ""
            cells = "  ".join(f"{k} {with_interval(r['_m'], k, r['_ci'].get(k))}" for k in BOARD_MEASURES)
            cells += "".join(f"  {k} {'-' if r[k] is None else f'{100 * r[k]:.1f}%'}" for k in r
                             if is_budget_name(k))  # a budget sorted by
            out.append(f"  {r['rank']:3d}  {r['variant']:24s} n {r['questions']:5d}  {cells}  ({r['made_by']}){mark}")
    return "\n".join(out)


def main(args) -> int:
    results = Path(args.results)
    try:
        if not results.is_dir():
            raise MemobenchError(f"memobench: {results}: no such results folder")
        out = Path(args.out) if args.out else results / "board"
        out.mkdir(parents=True, exist_ok=True)
        frames = tables(results, args.by)
        written = []
        for name, df in frames.items():
            write_text(out / f"{name}.csv", df.to_csv(index=False))
            write_text(out / f"{name}.tex", latex(df))
            written += [out / f"{name}.csv", out / f"{name}.tex"]
        written += recall_figure(results, out)
        print(text(leaderboard(entries(results), results, args.by)))
        print(f"\nwritten: {', '.join(str(p) for p in written)}")
        return 0
    except MemobenchError as e:
        import sys

        print(e, file=sys.stderr)
        return 1
