"""results/report.md, its HTML form and the hit@k plot."""

from __future__ import annotations

import html
import json
from decimal import Decimal
from pathlib import Path

from .jsmath import to_fixed
from .metrics import pct
from .published import GUIDE_TABLE, published
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
            f"| {m['dataset']} | {m['variant']} | {m['questions']} | "
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
    with atomic_path(png_out) as tmp:
        fig.savefig(tmp, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)


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


def build_report(metrics_paths, extra_md, md_out, html_out, png_out, manifest_path=None, log=print) -> None:
    runs = [json.loads(Path(p).read_text(encoding="utf-8")) for p in metrics_paths]
    md = markdown(runs)
    md += variant_table(runs)
    md += provenance_section(manifest_path, runs)
    for p in extra_md:
        md += "\n" + Path(p).read_text(encoding="utf-8")
    write_text(md_out, md)
    plot(runs, png_out)
    body = html.escape(md)
    write_text(html_out, "<!doctype html><meta charset='utf-8'><title>memobench report</title>"
           f"<img src='{html.escape(Path(png_out).name)}' alt='hit@k plot'><pre>{body}</pre>\n")
    log(f"report: {len(runs)} runs")
