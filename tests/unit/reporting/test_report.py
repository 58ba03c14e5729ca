"""The report (report.md, report.html) from hand-made runs: hostile values from
data and configuration stay inside their cells in both formats, LoCoMo's
categories carry their names, each paired comparison appears once, p-values
at the permutation floor read as bounds; ten variants' comparison matrix marks
exactly the pairs that survive Holm's correction and fits the page, beside the
minimum detectable differences; the HTML in a real headless browser. The
per-question outcomes go through the real metrics and stats code."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.helpers import browser
from memobench.evaluation import analyze, falsifier, metrics, official, stats
from memobench import cli
from memobench.core import doc
from memobench.datasets import missing
from memobench.reporting import conventions, figures, markdown, numbers, sections
from memobench.reporting.report import build_report
from memobench.retrieval.memo import OUTCOMES

# a question type, a LoCoMo category, a variant's description or a reason holding
# a cell separator, a line break, markup, a code span and a script
HOSTILE = "a|b\nc `d` <script>window.__memobenchInjected = true</script> *e* [f](javascript:g) & h"
FOLDED = HOSTILE.replace("\n", " ")


def _outcomes(ranks, types, pool=20):
    return [{"q_index": i, "question_id": f"q{i}", "question_type": t, "status": "evaluated", "reason": None,
             "in_types": True, "gold_rank": r, "pool_size": pool, "gold_in_pool": 1}
            for i, (r, t) in enumerate(zip(ranks, types))]


def _run(tmp, dataset, variant, ranks, types, fmt="longmemeval", description="a variant", baseline="",
         skip_rule="run", pool=20):
    rows = _outcomes(ranks, types, pool)
    d = tmp / dataset / variant
    d.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=OUTCOMES), d / "outcomes.parquet")
    m = metrics.compute(rows)
    m.update(dataset=dataset, variant=variant, harness="run.cjs", description=description, baseline=baseline,
             recipe={"backend": "fts"}, skip_rule=skip_rule, data={"format": fmt},
             provenance={"source": "0123456789abcdef", "python": "3"})
    (d / "metrics.json").write_text(json.dumps(m))
    return d / "metrics.json", d / "outcomes.parquet"


def _stats(tmp, dataset, variants, outcome_files):
    s = stats.dataset_stats(dataset, variants, {v: [outcome_files[v]] for v in variants}, log=lambda m: None)
    p = tmp / dataset / "stats.json"
    p.write_text(json.dumps(s))
    return p


def _md_rows(md: str):
    """Each Markdown table as (header cells, [row cells]), split on unescaped pipes."""
    tables, cur = [], None
    for line in md.splitlines():
        if line.startswith("|"):
            cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
            if cur is None:
                cur = (cells, [])
                tables.append(cur)
            elif not set(line) <= set("|-: "):
                cur[1].append(cells)
        else:
            cur = None
    return tables


class _Tables(HTMLParser):
    """Tables as rows of (tag, colspan, text); script tags counted."""

    def __init__(self):
        super().__init__()
        self.tables, self.scripts, self._cell = [], 0, None

    def handle_starttag(self, tag, attrs):
        if tag == "script":
            self.scripts += 1
        elif tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = [tag, int(dict(attrs).get("colspan", 1)), ""]
            self.tables[-1][-1].append(self._cell)

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[2] += data


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("hostile")
    res = tmp_path / "results"
    ds = "lme"
    n = 40
    types = [HOSTILE if i % 2 else "plain" for i in range(n)]
    m0, o0 = _run(res, ds, "v0.8.0", [1] * 30 + [3] * 10, types)
    m1, o1 = _run(res, ds, "mine", [0] * 35 + [1] * 5, types, description=HOSTILE, baseline="v0.8.0")
    m2, o2 = _run(res, ds, "twin", [0] * 35 + [1] * 5, types, baseline="mine")
    lm, lo = _run(res, "loco", "v0.8.0", [1, 2, 0, 1, 5, 1], ["4", "5", "2", "1", "3", "9"], fmt="locomo",
                  skip_rule="locomo")
    st = [_stats(res, ds, {"v0.8.0": "", "mine": "v0.8.0", "twin": "mine"}, {"v0.8.0": o0, "mine": o1, "twin": o2})]
    rows = [{"rank": 0 if i % 3 else 1, "cause": analyze.CAUSES[i % 4], "coverage": 1, "window_size": 4,
             "question_type": HOSTILE if i % 2 else "plain", "ceiling_union": True, "ceiling_top10": False,
             "idf_rerank_hit": False, "question": HOSTILE, "gold_events": 1, "gold_sessions": 1, "merged_rank": 3}
            for i in range(8)]
    (res / ds / "summary.json").write_text(json.dumps({"dataset": ds, **analyze.summarize(rows)}))
    (res / ds / "falsifier.json").write_text(json.dumps({"dataset": ds, "comparisons": [
        {"variant": HOSTILE, "baseline": "v0.8.0", "segments": [], "verdict": HOSTILE}]}))
    gone = {"far": missing.missing_receipt(tmp_path / "far.json", f"far.json: {HOSTILE}", 5, None,
                                           [f"http://x/{HOSTILE}"], {missing.ATTEMPT: 1})}
    out = {k: res / f"report.{k}" for k in ("md", "html")}
    # the plots drawn at once, as the report job draws them when it has the cores
    inputs = ([m0, m1, m2, lm], [res / ds / "summary.json", res / ds / "falsifier.json"])
    build_report(*inputs, out["md"], out["html"], res / "hitk.png", stats_paths=st, forest_out=res / "forest.png",
                 heatmap_out=res / "heatmap.png", log=lambda m: None, missing=gone, workers=3)
    return out["md"].read_text(), out["html"], res, dict(inputs=inputs, stats_paths=st, missing=gone)


def test_hostile_values_stay_in_their_markdown_cells(hostile_report):
    md, _, _, _ = hostile_report
    assert "<script" not in md and "&lt;script>" in md and "&lt;/script>" in md
    tables = _md_rows(md)
    assert len(tables) >= 8
    for header, rows in tables:
        for r in rows:
            assert len(r) == len(header), (header, r)
    cells = [c.strip() for _, rows in tables for r in rows for c in r]
    escaped = doc.md_text(HOSTILE)
    assert "\n" not in escaped and "a\\|b" in escaped and "\\`d\\`" in escaped and "[f\\](" in escaped
    # the per-type table, the analyze and falsifier tables and the missing-datasets table hold it whole
    assert cells.count(escaped) >= 4
    assert f"http://x/{escaped}" in cells  # the missing dataset's URL
    assert escaped + " (run.cjs)." in md  # the description, escaped, as a paragraph


def test_hostile_values_stay_in_their_html_cells(hostile_report):
    _, html_path, _, _ = hostile_report
    p = _Tables()
    p.feed(html_path.read_text())
    assert p.scripts == 0  # none of the values became a script
    texts = []
    for t in p.tables:
        width = sum(c[1] for c in t[0])
        for row in t[1:]:
            if any(c[0] == "td" for c in row):
                assert sum(c[1] for c in row) == width, row
        texts += [c[2] for row in t for c in row]
    assert texts.count(HOSTILE) >= 4  # whole, unsplit, as text
    assert "`" not in "".join(x for x in texts if HOSTILE not in x)  # no Markdown code span leaks into HTML


def test_locomo_categories_pairs_and_p_values(hostile_report):
    md, html_path, _, _ = hostile_report
    html = html_path.read_text()
    for cat, name in (("4", "single-hop"), ("5", "adversarial"), ("2", "temporal"), ("1", "multi-hop"),
                      ("3", "open-domain")):
        assert f"| {cat} ({name}) |" in md and f"{cat} ({name})" in html
    assert "| 9 |" in md  # an unknown category keeps its bare number
    paired = md.split("## Paired differences")[1].split("\n## ")[0]
    rows = [r for _, rs in _md_rows(paired) for r in rs]
    pairs = [(r[0].strip(), r[2].strip()) for r in rows]
    assert sorted(pairs) == [("mine", "v0.8.0 (harness baseline)"), ("twin", "mine (harness baseline)"),
                             ("twin", "v0.8.0")]
    assert "v0.8.0 (v0.8.0)" not in md + html
    # mine vs v0.8.0: 35 hits lost of 40, no sign flip gets there: a bound, not a value
    mine = next(r for r in rows if r[0].strip() == "mine")
    # under it the p-value after Holm over the dataset's 3 pairs: McNemar's exact p (5 wins, 30 losses) x 3
    assert mine[5].strip() == "randomization < 0.0001 McNemar < 0.0001, Holm < 0.0001"
    assert mine[4].strip().startswith("-")
    assert "p < 0.0001" in md and "| 0.0001 |" not in paired
    # the MRR difference in MRR units: -0.7083 = 5/40 - (30 + 10/3)/40, its minimum detectable difference beside it
    assert re.fullmatch(r"-0\.7083 \[-0\.\d{4}, -0\.\d{4}\] MDE 0\.\d{4}", mine[8].strip()), mine[8]
    twin = next(r for r in rows if r[0].strip() == "twin" and r[2].strip().startswith("mine"))
    # the same outcomes: nothing to correct
    assert twin[5].strip() == "randomization 1.0000 McNemar 1.0000, Holm 1.0000"


def test_report_in_a_browser_keeps_hostile_values_inert(hostile_report, tmp_path):
    _, html_path, _, _ = hostile_report
    r = browser.measure(html_path, tmp_path)
    assert r["scripts"] == 1 and not r["injected"]  # only the measuring script; the data's did not run
    assert r["scrollWidth"] <= browser.WIDTH, r
    assert [x for x in r["rows"] if x[0] != x[1]] == []
    assert len(r["images"]) == 3 and all(w > 0 for w, _ in r["images"])


def test_missing_datasets_read_at_1400_pixels_in_a_browser(tmp_path):
    """The "Missing datasets" section in headless chromium at 1,400 pixels: the
    place to put the file, its sha256 and each URL each on one line of its
    own, none broken every few characters into a narrow column."""
    path = tmp_path / "home" / "someone" / "projects" / "memobench-checkout" / "data" / "longmemeval_s.json"
    urls = ["https://huggingface.co/datasets/xiaowu0162/longmemeval/resolve/main/longmemeval_s",
            "https://hf-mirror.com/datasets/xiaowu0162/longmemeval/resolve/main/longmemeval_s"]
    reason = (f"longmemeval_s.json: could not download (no network?): tried {urls[0]} (Name or service not known), "
              f"{urls[1]} (Name or service not known). Place the file (278025796 bytes) at {path} and rerun.")
    gone = {"longmemeval_s": missing.missing_receipt(path, reason, 278025796, "ab" * 32, urls, {missing.ATTEMPT: 1}),
            "longmemeval_cn": {"needs": "longmemeval_s"}}
    res = tmp_path / "results"
    m0, _ = _run(res, "zh", "zh-B", [1, 2, 0], ["t"] * 3)
    build_report([m0], [], res / "report.md", res / "report.html", res / "hitk.png", log=lambda m: None, missing=gone)
    r = browser.measure(res / "report.html", tmp_path, section="missing")
    assert r["scrollWidth"] <= browser.WIDTH, r["scrollWidth"]
    boxes = r["section"]

    def one_line(text):
        box = [b for b in boxes if b["text"] == text][-1]  # the innermost element holding exactly it
        assert box["height"] < 1.6 * box["lineHeight"], (text, box)  # not wrapped
        return box

    place, sha = one_line(str(path)), one_line("ab" * 32)
    assert place["width"] > 300 and sha["width"] > 300, (place, sha)
    lines = [one_line(u) for u in urls]  # each URL an element of its own, on its own line
    assert lines[0]["top"] + 0.9 * lines[0]["height"] <= lines[1]["top"], lines
    # the dataset that waits for another says so in its own table
    assert any(b["text"] == "searches the haystacks of longmemeval_s, which is missing" for b in boxes)
    assert browser.screenshot(res / "report.html", tmp_path / "shot.png", tmp_path, height=1400) > 0.01


def test_markdown_code_spans_and_line_starts():
    assert doc.md_code("a`b|c") == "``a`b\\|c``"
    assert doc.md_inline("# not a heading").startswith("\\#")
    assert doc.md_inline("1. not a list").startswith("1\\.")
    assert doc.to_html([doc.Para(["x ", doc.Code("<y>")])]) == "<p>x <code>&lt;y&gt;</code></p>"


def test_falsifier_and_analyze_markdown_escape_their_rows():
    md = falsifier.markdown("d", [{"variant": HOSTILE, "baseline": "b", "segments": [], "verdict": "v"}])
    (header, rows), = _md_rows(md)
    assert len(rows[0]) == len(header) and rows[0][0].strip() == doc.md_text(HOSTILE)


def test_variants_cli_names_each_familys_harness(capsys):
    cli.main(["variants", "--family", "locomo"])
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("v0.8.0 "))
    assert "locomo.cjs" in line and "run.cjs" not in line
    cli.main(["variants"])
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("v0.8.0 "))
    assert "run.cjs (s), run-m.cjs (m), locomo.cjs (locomo)" in line


def test_variants_cli_lists_memo_variants_then_the_references_under_a_header_in_aligned_columns(capsys):
    from memobench.catalog.variant import FAMILIES
    from memobench.catalog.variants import references

    refs = {n for f in FAMILIES for n in references(f)}
    for argv in (["variants"], ["variants", "--family", "s"], ["variants", "--family", "zh"]):
        cli.main(argv)
        lines = capsys.readouterr().out.splitlines()
        header, rows = lines[0], lines[1:]
        assert header.split() == ["variant", "families", "harness", "description"], header
        starts = [header.index(w) for w in ("families", "harness", "description")]
        for row in rows:
            for at in starts:  # every column starts where its header does
                assert row[at - 2:at] == "  " and row[at] != " ", (argv, row, at)
        names = [r.split()[0] for r in rows]
        kinds = [n in refs for n in names]
        assert any(kinds) and not all(kinds)
        assert kinds == sorted(kinds), (argv, names)  # the reference retrievers last, as the help says


def _conventions(n_rr, n_prm, v):
    metrics = {f"{name}@{k}": v for name in ("recall_any", "recall_all", "ndcg_any") for k in official.KS}
    conv = {"run_retrieval": {"convention": official.CONVENTIONS["run_retrieval"], "questions": n_rr,
                              "excluded": {"abstention": 30, "no_user_target": n_prm - n_rr}, **metrics},
            "print_retrieval_metrics": {"convention": official.CONVENTIONS["print_retrieval_metrics"],
                                        "questions": n_prm, "excluded": {"abstention": 30}, **metrics}}
    return {"rules": "LongMemEval official", "depth": 50, "questions": n_rr,
            "excluded": conv["run_retrieval"]["excluded"], **metrics, "conventions": conv}


def test_conventions_table_marks_comparable_only_where_the_protocol_matches(tmp_path):
    """bm25-official (user turns) on longmemeval_m under print_retrieval_metrics
    over 470 questions is comparable to LongMemEval's Table 9; the same run's
    run_retrieval row, an all-turns BM25, a Memo variant, another dataset and
    a subset of M are not; an imported run is never."""
    res = tmp_path / "results"
    runs = [("longmemeval_m", "bm25-official", {"backend": "bm25-official", "documents": "user"}, 419, 470),
            ("longmemeval_m", "bm25-official-all", {"backend": "bm25-official", "documents": "all"}, 419, 470),
            ("longmemeval_m", "v0.8.0", {"backend": "fts"}, 419, 470),
            ("longmemeval_s", "bm25-official", {"backend": "bm25-official", "documents": "user"}, 419, 470),
            ("m_sample", "bm25-official", {"backend": "bm25-official", "documents": "user"}, 40, 45)]
    metrics_paths, official_paths = [], []
    for i, (ds, variant, recipe, n_rr, n_prm) in enumerate(runs):
        mp, _ = _run(res, ds, variant, [1] * 10, ["t"] * 10)
        m = json.loads(mp.read_text())
        m["recipe"] = recipe
        mp.write_text(json.dumps(m))
        op = mp.parent / "official.json"
        op.write_text(json.dumps({"dataset": ds, "variant": variant,
                                  "official": _conventions(n_rr, n_prm, 0.5 + i / 100)}))
        metrics_paths.append(mp)
        official_paths.append(op)
    out = {k: res / f"report.{k}" for k in ("md", "html")}
    # the raw files: M's of the original release's size (no sha256 on record), S's another release
    files = [{"dataset": "longmemeval_m", "file": "/d/longmemeval_m.json", "bytes": 2745274681, "sha256": "ab" * 32},
             {"dataset": "longmemeval_s", "file": "/d/longmemeval_s_cleaned.json", "bytes": 277383315,
              "sha256": "cd" * 32}]
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"provenance": {}, "files": files}))
    build_report(metrics_paths, [], out["md"], out["html"], res / "hitk.png", official_paths=official_paths,
                 log=lambda m: None, manifest_path=manifest)
    md = out["md"].read_text()
    assert "## Official metrics by convention" in md and "### Published figures" in md
    data_files = next(rows for header, rows in _md_rows(md) if header[-1].strip() == "what it is")
    assert [r[-1].strip() for r in data_files] == [
        "LongMemEval-M, original release (longmemeval_m) (by its byte count)",
        "not a published release"]
    tables = _md_rows(md)
    conv = next(rows for header, rows in tables if "convention" in header[2] and "published figure" in header[-1])
    assert len(conv) == 2 * len(runs)
    marked = [(r[0].strip(), r[1].strip(), r[2].strip().strip("`"), r[3].strip()) for r in conv
              if r[-1].strip().startswith("**comparable")]
    assert marked == [("longmemeval_m", "bm25-official (reference retriever)", "print_retrieval_metrics", "470")]
    assert "Table 9" in conv[1][-1] and conv[0][-1].strip() == "-"  # run_retrieval row: no marker
    pub = next(rows for header, rows in tables if header[0].strip() == "source")
    t9 = next(r for r in pub if "Table 9" in r[0])
    assert "recall_all@5 63.4%" in t9[6] and "ndcg_any@10 54.0%" in t9[6]
    assert t9[-1].strip() == "**comparable: bm25-official (reference retriever)**"
    memo = [r for r in pub if r[0].strip().startswith("Memo")]
    assert {r[2].strip() for r in memo} == {"longmemeval_m", "longmemeval_s"}  # the datasets with published hit@k
    assert all("comparable" not in r[-1] or "not an official" in r[-1] for r in memo)
    assert "hit@1 54.6%" in next(r[6] for r in memo if r[2].strip() == "longmemeval_m")
    # a subset of M under M's name: same system and convention, another n
    bm25 = {"recipe": runs[0][2], "data_file": {"known": "longmemeval_m-original"}}
    assert conventions.comparable_to(bm25, "longmemeval_m", "print_retrieval_metrics", 470).startswith("comparable")
    assert conventions.comparable_to(bm25, "longmemeval_m", "print_retrieval_metrics", 45).startswith("not comparable")
    assert conventions.comparable_to({**bm25, "run": {"file": "x"}}, "longmemeval_m", "print_retrieval_metrics", 470) == ""
    # the same run without its file on record, or on another release's file: not comparable, saying why
    bare = conventions.comparable_to({"recipe": runs[0][2]}, "longmemeval_m", "print_retrieval_metrics", 470)
    assert bare.startswith("not comparable") and "not recorded" in bare
    other = {**bm25, "data_file": {"known": None, "label": "not a published release"}}
    assert "this run's file: not a published release" in conventions.comparable_to(
        other, "longmemeval_m", "print_retrieval_metrics", 470)
    # the same retriever ranking turns: its sessions are read at their best turn, not Table 9's session lists
    turns = conventions.comparable_to({**bm25, "grain": "turn"}, "longmemeval_m", "print_retrieval_metrics", 470)
    assert turns.startswith("not comparable") and "ranked turns" in turns
    # the HTML from the same rows
    p = _Tables()
    p.feed(out["html"].read_text())
    html_marked = [[c[2] for c in r] for t in p.tables for r in t if r and r[-1][2].startswith("comparable:")]
    assert len(html_marked) == 2  # the convention row and the Table 9 row
    assert html_marked[0][:3] == ["longmemeval_m", "bm25-official (reference retriever)", "print_retrieval_metrics"]


LME_TYPES = ["single-session-user", "multi-session", "single-session-preference", "temporal-reasoning",
             "knowledge-update", "single-session-assistant"]


@pytest.fixture(scope="module")
def ten_variants(tmp_path_factory):
    """Ten variants of growing skill over 120 questions of LongMemEval's six
    types (long names, as the report's rows will have); each the next one's
    harness baseline."""
    tmp = tmp_path_factory.mktemp("ten")
    res = tmp / "results"
    rng = np.random.default_rng(17)
    names = ["v0.8.0"] + [f"exp4-C-lenIdfOracle-{i}" if i % 2 else f"bm25-official-variant-{i}" for i in range(1, 10)]
    types = [LME_TYPES[i % 6] for i in range(120)]
    ease = rng.random(120)
    paths, outs = [], {}
    for k, v in enumerate(names):
        skill = 0.1 + 0.07 * k
        ranks = [1 if rng.random() < skill + 0.3 * ease[i] else int(rng.integers(0, 11)) for i in range(120)]
        m, o = _run(res, "lme", v, ranks, types, baseline=names[k - 1] if k else "")
        paths.append(m)
        outs[v] = o
    st = _stats(res, "lme", {v: (names[k - 1] if k else "") for k, v in enumerate(names)}, outs)
    out = {k: res / f"report.{k}" for k in ("md", "html")}
    build_report(paths, [], out["md"], out["html"], res / "hitk.png", stats_paths=[st], forest_out=res / "forest.png",
                 heatmap_out=res / "heatmap.png", log=lambda m: None)
    return out["md"].read_text(), out["html"], json.loads(st.read_text()), names


def test_plots_drawn_at_once_are_the_same_bytes(hostile_report, tmp_path):
    """The report job draws its three plots in forked processes when it has
    the cores (the fixture's build); each file is the one drawn in sequence,
    byte for byte."""
    _, _, res, built = hostile_report
    names = ["forest.png", "heatmap.png", "hitk.png", "report.html", "report.md"]
    at_once = {n: (res / n).read_bytes() for n in names}
    build_report(*built["inputs"], tmp_path / "report.md", tmp_path / "report.html", tmp_path / "hitk.png",
                 stats_paths=built["stats_paths"], forest_out=tmp_path / "forest.png",
                 heatmap_out=tmp_path / "heatmap.png", log=lambda m: None, missing=built["missing"], workers=1)
    in_sequence = {p.name: p.read_bytes() for p in sorted(tmp_path.iterdir())}
    assert sorted(in_sequence) == names
    assert all(len(b) > 1000 for n, b in in_sequence.items() if n.endswith(".png"))
    assert in_sequence == at_once


def test_matrix_marks_who_beats_whom_after_holm(ten_variants):
    md, _, s, names = ten_variants
    section = md.split("## Who beats whom")[1].split("\n## ")[0]
    (header, rows), = _md_rows(section)
    assert [c.strip() for c in header[:12]] == ["#", "variant", *map(str, range(1, 11))]
    pairs = {(p["variant"], p["baseline"]): p for p in s["pairs"]}
    assert len(pairs) == 45
    cells = {}
    for i, r in enumerate(rows):
        assert r[1].strip() == names[i]
        for j in range(10):
            cells[(i, j)] = r[2 + j].strip()
        wins = [[0, 0], [0, 0]]
        for j, c in enumerate(names):
            if i == j:
                assert cells[(i, j)] == ""
                continue
            p, sign = (pairs[(names[i], c)], 1) if (names[i], c) in pairs else (pairs[(c, names[i])], -1)
            want = ""
            for k, key in enumerate(("hit@1", "mrr")):
                mm = p["metrics"][key]
                mark = "·" if mm["p_holm"] > 0.05 else "▲" if sign * mm["diff"] > 0 else "▼"
                wins[k][0] += mark == "▲"
                wins[k][1] += mark == "▼"
                want += mark
            assert cells[(i, j)] == want, (names[i], c)
        assert r[12].strip() == f"{wins[0][0]}/{wins[0][1]} · {wins[1][0]}/{wins[1][1]}"
    flip = {"▲": "▼", "▼": "▲", "·": "·"}
    assert all(cells[(j, i)] == "".join(flip[x] for x in cells[(i, j)]) for i, j in cells)
    marks = "".join(cells.values())
    assert "▲" in marks and "·" in marks  # some pairs survive the correction, some do not
    # a pair with a small uncorrected p can still fail after Holm's correction over the 45 pairs
    assert any(p["metrics"]["hit@1"]["p_analytic"] < 0.05 < p["metrics"]["hit@1"]["p_holm"] for p in s["pairs"])
    mde = s["power"]["metrics"]
    assert (f"hit@1 {100 * mde['hit@1']['mde_median']:.1f} points ({100 * mde['hit@1']['mde_min']:.1f} to "
            f"{100 * mde['hit@1']['mde_max']:.1f}; {100 * mde['hit@1']['mde_first_holm_step']:.1f} at Holm's first "
            "step)") in section
    assert f"MRR {mde['mrr']['mde_median']:.4f} (" in section and "n = 120 paired questions" in section


def test_paired_and_per_type_tables_carry_mde_and_holm(ten_variants):
    md, _, s, _ = ten_variants
    paired = md.split("## Paired differences (harness")[1].split("\n## ")[0]
    (header, rows), = _md_rows(paired)
    c = s["comparisons"][0]
    row = next(r for r in rows if r[0].strip() == c["variant"] and r[2].strip().startswith(c["baseline"]))
    h = c["metrics"]["hit@1"]
    assert row[4].strip().endswith(f"MDE {100 * h['mde']:.1f}") and row[5].strip().split()[-1] == f"{h['p_holm']:.4f}"
    bytype = md.split("## Paired differences per question type")[1].split("\n## ")[0]
    (header, rows), = _md_rows(bytype)
    assert [x.strip() for x in header[2:]] == [f"{t} (n 20)" for t in LME_TYPES]
    assert len(rows) == len(s["comparisons"])
    b = c["by_type"][LME_TYPES[0]]["metrics"]
    assert rows[0][2].strip() == f"{numbers.fmt_ci(b['hit@1'], 100, 1)} {numbers.fmt_ci(b['mrr'], 1, 3)}"


P_CELL = re.compile(r"randomization (< )?(\d\.\d{4}) (McNemar|t-test) (< )?(\d\.\d{4}), Holm (< )?(\d\.\d{4})")


def test_each_p_value_is_named_by_its_test_and_holm_sits_beside_the_p_it_corrects(ten_variants):
    """The randomization p stands apart; Holm's correction is of the McNemar
    (hit@k) or t-test (MRR) p and is printed beside it, so it never reads
    smaller than the p next to it."""
    md, _, s, _ = ten_variants
    paired = md.split("## Paired differences (harness")[1].split("\n## ")[0]
    (header, rows), = _md_rows(paired)
    heads = [h.strip() for h in header]
    assert heads[5] == "p: randomization; McNemar, Holm" and heads[9] == "p: randomization; t-test, Holm"
    comps = {(c["variant"], c["baseline"]): c for c in s["comparisons"]}
    assert len(rows) == len(comps)
    for r in rows:
        c = next(c for (v, b), c in comps.items() if v == r[0].strip() and r[2].strip().startswith(b))
        for col, key in ((5, "hit@1"), (7, "hit@5"), (9, "mrr")):
            m = P_CELL.fullmatch(r[col].strip())
            assert m, r[col]
            assert m[3] == ("t-test" if key == "mrr" else "McNemar")
            mm = c["metrics"][key]
            assert float(m[5]) == pytest.approx(max(mm["p_analytic"], 1e-4) if m[4] else mm["p_analytic"], abs=5e-5)
            assert float(m[7]) >= float(m[5]) or m[4], r[col]  # corrected, beside what it corrects
    # the McNemar and t-test p of the single pair memobench score compares read the same, without Holm

    mm = {**s["comparisons"][0]["metrics"]["hit@1"]}
    mm.pop("p_holm")
    assert numbers.p_test(mm, "hit@1").startswith("McNemar ") and "Holm" not in numbers.p_test(mm, "hit@1")


def test_matrix_fits_the_page_in_a_browser(ten_variants, tmp_path):
    _, html_path, _, _ = ten_variants
    r = browser.measure(html_path, tmp_path)
    assert r["scrollWidth"] <= browser.WIDTH, r
    assert [x for x in r["rows"] if x[0] != x[1]] == []
    right = dict(zip(r["tableClasses"], r["tables"]))
    assert set(right) >= {"matrix", "paired", "paired bytype"}
    # the matrix and every other table inside the 1400-pixel window, not scrolled
    assert max(r["tables"]) <= browser.WIDTH, list(zip(r["tableClasses"], r["tables"]))


def test_hitk_plot_axis_ends_at_100_percent_with_every_value_inside(tmp_path, monkeypatch):
    """A rate's axis ends at 100%; a bar near it carries its value inside its end."""
    res = tmp_path / "results"
    m0, _ = _run(res, "lme", "v0.8.0", [1] * 39 + [3], ["t"] * 40)  # hit@1 97.5%, hit@5 100%
    m1, _ = _run(res, "lme", "mine", [1] * 10 + [0] * 30, ["t"] * 40)
    figs = []
    monkeypatch.setattr(figures, "_save", lambda fig, png: figs.append(fig))
    figures.plot([json.loads(p.read_text()) for p in (m0, m1)], tmp_path / "hitk.png")
    (fig,) = figs
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        assert ax.get_xlim() == (0, 100)
        box = ax.get_window_extent(renderer)
        texts = [t for t in ax.texts if t.get_text()]
        assert {t.get_text() for t in texts} >= {"97.5", "100.0", "25.0"}
        for t in texts:
            tb = t.get_window_extent(renderer)
            assert box.x0 <= tb.x0 and tb.x1 <= box.x1, (t.get_text(), tb, box)


def test_provenance_gives_versions_and_says_fts5_beside_sqlite(tmp_path):
    import sqlite3

    from memobench.core.provenance import provenance

    m = json.loads(_run(tmp_path, "lme", "v0.8.0", [1, 2, 0], ["t"] * 3)[0].read_text())
    m["provenance"] = provenance()
    (table,) = [b for b in sections.provenance_blocks(None, [m]) if isinstance(b, doc.Table)]
    rows = {r[0]: r[1] for r in table.rows}
    assert "fts5" not in rows and all(v not in (True, False, "True", "False") for v in rows.values()), rows
    assert rows["sqlite"] == f"{sqlite3.sqlite_version} (FTS5 compiled in)"
    from importlib.metadata import version

    for dist in ("snakemake", "numpy", "pandas", "scipy"):
        assert rows[dist] == version(dist), dist


def test_memobench_score_prints_each_figure_as_the_report_does(ten_variants, tmp_path):
    """The same comparison, rates and official metrics read the same in the
    report and in `memobench score`'s output: p-values named by their test,
    MRR differences in MRR units, official metrics in percent."""
    from memobench import score_text as score

    md, html_path, s, names = ten_variants
    c = next(c for c in s["comparisons"] if c["baseline"] == "v0.8.0" and c["variant"] != names[1])
    paired = md.split("## Paired differences (harness")[1].split("\n## ")[0]
    (header, rows), = _md_rows(paired)
    row = next(r for r in rows if r[0].strip() == c["variant"] and r[2].strip() == "v0.8.0")
    lines = score.paired_lines(c)
    for line, (d_col, p_col) in zip(lines[1:], ((4, 5), (6, 7), (8, 9))):
        m = re.fullmatch(r"  (\S+)\s+(.+?)  p: (.+?); (.+)", line)
        assert m, line
        diff, rand, test = m[2], m[3], m[4]
        assert row[d_col].strip() == f"{diff} MDE {row[d_col].split('MDE ')[1].strip()}", (line, row[d_col])
        assert "Holm" not in test or test.count("Holm") == 1
        assert row[p_col].strip() == f"{rand} {test}", (line, row[p_col])
    assert re.fullmatch(r"  MRR    [+-]0\.\d{4} \[[+-]0\.\d{4}, [+-]0\.\d{4}\]  p: randomization .+", lines[3])
    # harness rates: the report's main table cell starts with what memobench score prints
    runs = {p.parent.name: json.loads(p.read_text()) for p in html_path.parent.glob("lme/*/metrics.json")}
    main_rows = {r[1].strip(): r for r in _md_rows(md.split("## Harness metrics")[1].split("\n## ")[0])[0][1]}
    for v, m in runs.items():
        line = score.harness_line(v, m)
        for col, key in ((3, "hit@1"), (4, "hit@5"), (5, "hit@10"), (6, "mrr")):
            printed_cli = re.search(rf" {re.escape(key)} (\S+)", line)[1]
            assert main_rows[v][col].strip().split(" ")[0] == printed_cli, (v, key, line, main_rows[v][col])
    # official metrics: the report's official table and memobench score print the same percent
    m = dict(runs[names[0]])
    m["official"] = {**_conventions(100, 110, 0.43215), "rules": "LongMemEval official"}
    (table,) = [b for b in markdown.md_official([m]) if isinstance(b, doc.Table)]
    cells = dict(zip(table.header, table.rows[0]))
    line = score.official_line(names[0], m["official"], "longmemeval")
    for k in score.official_shown("longmemeval"):
        assert f"{k} {cells[k]}" in line, (k, line, cells[k])


def test_pools_sit_beside_the_hit_columns_and_a_k_at_or_above_most_pools_is_flagged(tmp_path):
    """Pools of 8 sessions: hit@10 is flagged (every pool holds 10 or fewer),
    hit@5 is not; pools of 20 flag nothing. In report.md under the harness
    table, one line per dataset; in report.html under that dataset's table."""
    res = tmp_path / "results"
    small, _ = _run(res, "locomo10", "v0.8.0", [1, 0, 3, 7], ["1"] * 4, fmt="locomo", skip_rule="locomo", pool=8)
    large, _ = _run(res, "zh", "zh-B", [1, 2, 0], ["t"] * 3, skip_rule="zh", pool=20)
    build_report([small, large], [], res / "report.md", res / "report.html", res / "hitk.png", log=lambda m: None)
    md = (res / "report.md").read_text(encoding="utf-8")
    flag = "hit@10: k is at or above most pools (100.0% of the questions have 10 sessions or fewer)"
    lines = {ds: [ln for ln in md.splitlines() if ln.startswith(f"{ds}: Pools")] for ds in ("locomo10", "zh")}
    assert len(lines["locomo10"]) == len(lines["zh"]) == 1, lines
    assert f"**{flag}" in lines["locomo10"][0] and "hit@5: k is" not in lines["locomo10"][0]
    assert "0.0% 5 or fewer, 100.0% 10 or fewer sessions" in lines["locomo10"][0]
    assert "at or above most pools" not in lines["zh"][0]
    assert "a random ranking's hit@1 12.5%, hit@5 62.5%, hit@10 100.0%" in lines["locomo10"][0]
    html = (res / "report.html").read_text(encoding="utf-8")
    locomo = html.split("<h3>locomo10</h3>", 1)[1].split("<h3>", 1)[0]
    assert locomo.index("</table>") < locomo.index(f"<b>{flag}")
    assert html.count(flag) == 1


def test_turn_section_names_each_grain_and_is_absent_without_turn_variants():
    figures_ = {f"{n}@{k}": 0.5 for n in ("recall_any", "recall_all", "ndcg_any") for k in official.KS}
    turn = {"questions": 8, "excluded": {"abstention": 1, "no_user_target": 1}, "turns_per_question": 12.25,
            **figures_, "recall_all@5": 0.625, "turn2session": {**figures_, "recall_all@5": 0.875},
            "harness_over_turns": {"questions": 7, "hit@5": 0.75}}
    session = {"dataset": "lme", "variant": "bm25s", "recipe": {"backend": "bm25s"}}
    ranked = {**session, "variant": "t", "grain": "turn", "turn": turn}
    assert conventions.turn_blocks([session]) == []
    md = doc.to_markdown(conventions.turn_blocks([session, ranked]))
    row = next(line for line in md.splitlines() if line.startswith("| lme"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:5] == ["lme", "t (reference retriever, ranks turns)", "8", "abstention 1, no_user_target 1", "12.2"]
    assert cells[5] == "62.5%" and cells[9] == "87.5%" and cells[-2:] == ["75.0%", "7"]
