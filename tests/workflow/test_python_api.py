"""The Python API (docs/python-api.md) on the real LoCoMo file: the page's
example runs as written, in a copy of the project set up as the README says
(the LoCoMo file in `data/`, the page's `my_retrievers.py` beside the
notebook), and the API's figures for a run file, a Python function and a
configured variant are `memobench score`'s and the pipeline's (metrics.json,
official.json, stats.json), to the last digit."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys

import pytest

from tests.helpers import REPO
from tests.helpers.doc_examples import blocks, user_project

PAGE = REPO / "docs" / "python-api.md"
FIGURES = ("questions", "hit@1", "hit@5", "hit@10", "hit@1_rate", "hit@5_rate", "hit@10_rate", "mrr", "mrr_sum",
           "items")


@pytest.fixture(scope="module")
def example(tmp_path_factory, locomo_path):
    """The page's notebook block run in the project's copy, its module block written to
    my_retrievers.py there: (the copy, the block's namespace, what it printed)."""
    module, code = blocks(PAGE.read_text(encoding="utf-8"), "python")
    assert module.startswith("# my_retrievers.py\n")
    proj = user_project(tmp_path_factory.mktemp("python_api") / "memobench", locomo_path)
    (proj / "my_retrievers.py").write_text(module, encoding="utf-8")
    namespace: dict = {"__name__": "__example__"}
    here = os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    os.chdir(proj)
    sys.path.insert(0, str(proj))  # a notebook's folder is on its path: `from my_retrievers import ...`
    backend = os.environ.get("MPLBACKEND")
    os.environ["MPLBACKEND"] = "Agg"
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            exec(compile(code, str(PAGE), "exec"), namespace)
    finally:
        os.chdir(here)
        sys.path.remove(str(proj))
        sys.modules.pop("my_retrievers", None)
        if backend is None:
            os.environ.pop("MPLBACKEND", None)
        else:
            os.environ["MPLBACKEND"] = backend
    import matplotlib.pyplot as plt

    plt.close("all")
    return proj, namespace, out.getvalue() + err.getvalue()


def _json(path):
    return json.loads(path.read_text(encoding="utf-8"))


def test_the_page_example_runs_as_written(example):
    from memobench.evaluation.official import LOCOMO_CATEGORIES

    proj, ns, printed = example
    result, mine, bm25s, res = ns["result"], ns["mine"], ns["bm25s"], ns["res"]
    assert (result.dataset, result.variant, result.against) == ("locomo10", "recency", "v0.8.0")
    assert (mine.variant, mine.against) == ("overlap", "recency")  # named after the function, against the run
    assert (bm25s.variant, bm25s.against) == ("bm25s", "v0.8.0")
    assert "memobench" not in printed and "steps" not in printed  # quiet: only the example's own prints
    assert set(res.outcomes["variant"]) == {"recency", "v0.8.0", "overlap", "bm25s"}
    by_category = ns["by_category"]
    assert set(by_category.index.get_level_values("category")) == set(LOCOMO_CATEGORIES.values())
    m = _json(proj / "results" / "locomo10" / "v0.8.0" / "metrics.json")
    for qtype, block in m["by_type"].items():  # the per-type table's questions: the same mean as the harness's
        assert by_category.loc[(LOCOMO_CATEGORIES[qtype], "v0.8.0"), "hit@1"] == pytest.approx(block["hit@1_rate"],
                                                                                                abs=1e-12)
    assert (proj / "hitk_by_category.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the comparisons score made are in load()'s paired table before any stats stage ran
    pairs = res.paired.set_index(["variant", "baseline", "metric"])
    assert set(pairs.index.droplevel("metric")) == {("recency", "v0.8.0"), ("overlap", "recency"),
                                                     ("bm25s", "v0.8.0")}
    assert set(res.paired["source"]) == {"memobench score"} and res.paired["p_holm"].isna().all()
    for k, mm in mine.paired["metrics"].items():
        row = pairs.loc[("overlap", "recency", k)]
        assert (row["diff"], row["ci_low"], row["ci_high"], row["p"]) == (mm["diff"], *mm["ci95"], mm["p"])
    conventions = ns["memobench"].list_conventions()
    assert set(res.official["convention"]) == {"all_categories", "categories_1_4"} <= set(conventions["convention"])


def test_api_figures_are_memobench_scores_and_the_pipelines(example):
    proj, ns, _ = example
    import memobench

    result, mine, bm25s = ns["result"], ns["mine"], ns["bm25s"]
    folder = proj / "results" / "locomo10"
    m = _json(folder / "recency" / "metrics.json")
    off = _json(folder / "recency" / "official.json")
    # each result's figures are its metrics.json's and official.json's, to the last digit
    for got, v in ((result, "recency"), (mine, "overlap"), (bm25s, "bm25s")):
        mv = _json(folder / v / "metrics.json")
        assert got.metrics == {k: x for k, x in got.metrics.items() if k in mv and mv[k] == x}, v
        assert {k: mv[k] for k in FIGURES} == {k: got.metrics[k] for k in FIGURES}, v
        # its convention named: LoCoMo's top-level figures are all_categories' (categories_1_4 under conventions)
        assert got.official == {"convention": "all_categories", **_json(folder / v / "official.json")["official"]}, v
        assert "convention all_categories" in got.text and "convention categories_1_4" in got.text, v
    assert _json(folder / "overlap" / "metrics.json")["harness"] == (
        f"your retriever: {(proj / 'my_retrievers.py').resolve()}:overlap")
    # memobench score prints the very text the API computed, for each kind of input
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    for args, got in ((["runs/recency.json", "--against", "v0.8.0"], result),
                      (["--retriever", "my_retrievers.py:overlap", "--against", "recency"], mine),
                      (["--variant", "bm25s"], bm25s)):
        proc = subprocess.run([sys.executable, "-m", "memobench.cli", "score", *args, "--dataset", "locomo10"],
                              cwd=proj, capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert proc.stdout == got.text + "\n", args
        assert "steps" not in proc.stderr  # nothing left to make: the API's results reused
    # the run and the function configured as the pipeline's own variants, beside bm25s: the same figures, and
    # the stats stage's paired tests are the ones score computed
    (proj / "mine.yaml").write_text(
        "run: [locomo10]\nvariants:\n  recency-cfg:\n    run: {file: runs/recency.json, format: json}\n"
        "  overlap-cfg:\n    retriever: {callable: my_retrievers.py:overlap}\n"
        "datasets:\n  locomo10:\n    variants: [v0.8.0, recency-cfg, overlap-cfg, bm25s]\n", encoding="utf-8")
    targets = [f"results/locomo10/{v}/{f}.json" for v in ("recency-cfg", "overlap-cfg", "bm25s")
               for f in ("metrics", "official")]
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", "mine.yaml", "--",
                           "results/locomo10/stats.json", *targets], cwd=proj, capture_output=True, text=True, env=env,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for got, v in ((result, "recency-cfg"), (mine, "overlap-cfg"), (bm25s, "bm25s")):
        pipeline = _json(folder / v / "metrics.json")
        assert {k: pipeline[k] for k in FIGURES} == {k: got.metrics[k] for k in FIGURES}, v
        assert {"convention": "all_categories", **_json(folder / v / "official.json")["official"]} == got.official, v
        assert _json(folder / v / "official.json")["grain"] == "session", v
    stats = _json(folder / "stats.json")
    (theirs,) = [c for c in stats["comparisons"] if (c["variant"], c["baseline"]) == ("bm25s", "v0.8.0")]
    for k, mm in bm25s.paired["metrics"].items():
        assert {x: y for x, y in theirs["metrics"][k].items() if x != "p_holm"} == mm, k
    # load() reads the same files: its long-form rates are metrics.json's, its per-question hits sum to its counts
    res = memobench.load(proj / "results")
    got = res.metrics[(res.metrics["variant"] == "recency") & res.metrics["question_type"].isna()]
    assert dict(zip(got["metric"], got["value"])) == {"hit@1": m["hit@1_rate"], "hit@5": m["hit@5_rate"],
                                                       "hit@10": m["hit@10_rate"], "mrr": m["mrr"]}
    rows = res.outcomes[res.outcomes["variant"] == "recency"]
    assert [int(rows[k].sum()) for k in ("hit@1", "hit@5", "hit@10")] == [m["hit@1"], m["hit@5"], m["hit@10"]]
    assert rows["mrr"].sum() == pytest.approx(m["mrr_sum"], rel=1e-12)
    official = res.official[(res.official["variant"] == "recency") & (res.official["convention"] == "all_categories")]
    assert dict(zip(official["metric"], official["value"])) == {
        k: v for k, v in off["official"].items() if "@" in k}
    c14 = res.official[(res.official["variant"] == "recency") & (res.official["convention"] == "categories_1_4")]
    assert dict(zip(c14["metric"], c14["value"])) == {
        k: v for k, v in off["official"]["categories_1_4"].items() if "@" in k}
    # stats.json's row replaces score's kept comparison of the same pair; the others stay score's
    paired = res.paired.set_index(["variant", "baseline", "metric"])
    assert paired.loc[("bm25s", "v0.8.0", "hit@1"), "source"] == "stats.json"
    assert paired.loc[("bm25s", "v0.8.0", "hit@1"), "p_holm"] == theirs["metrics"]["hit@1"]["p_holm"]
    assert paired.loc[("overlap", "recency", "hit@1"), "source"] == "memobench score"


def test_one_report_shows_everything_in_the_folder(example):
    """After the API's calls and the overlay's run above, the README's first look in the same folder: its
    report holds every variant of the folder (the first look's, the overlay's, memobench score's and the
    API's), with paired tests among them; `memobench board` writes the tables, read back by pandas."""
    import pandas as pd

    proj, _, _ = example
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    (proj / "locomo.yaml").write_text("run: [locomo10]\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", "locomo.yaml"],
                          cwd=proj, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    md = (proj / "results" / "report.md").read_text(encoding="utf-8")
    board = md[md.index("## Board"):]
    board = board[:board.index("\n## ", 3)]
    made = {"recency": "memobench score", "overlap": "memobench score", "recency-cfg": "an earlier run",
            "overlap-cfg": "an earlier run", "v0.8.0": "this run's config"}
    for v, how in made.items():
        assert any(line.split("|")[2].strip().startswith(v + " ") or line.split("|")[2].strip() == v
                   for line in board.splitlines() if line.startswith("|") and how in line), v
    paired = md[md.index("## Paired"):md.index("## Who beats whom")]
    matrix = md[md.index("## Who beats whom"):md.index("## Paired differences per question type")]
    for v in made:  # each in the paired tests and a row of the matrix of every pair
        assert any(line.split("|")[1].strip().startswith(v) for line in paired.splitlines()
                   if line.startswith("|")) or v == "v0.8.0", v
        assert any(line.split("|")[2].strip() == v for line in matrix.splitlines() if line.startswith("|")), v
    assert "Other results in this folder" not in md
    out = subprocess.run([sys.executable, "-m", "memobench.cli", "board", "--by", "mrr"], cwd=proj,
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    lb = pd.read_csv(proj / "results" / "board" / "leaderboard.csv")
    assert set(made) <= set(lb["variant"]) and list(lb["mrr"]) == sorted(lb["mrr"], reverse=True)
    m = _json(proj / "results" / "locomo10" / "recency" / "metrics.json")
    assert lb.set_index("variant").loc["recency", "mrr"] == m["mrr"]
    harness = pd.read_csv(proj / "results" / "board" / "harness.csv").set_index("variant")
    assert harness.loc["recency", "hit@1"] == m["hit@1_rate"]
    assert (proj / "results" / "board" / "recall_at_k.locomo10.png").is_file()
    # score --json: the same figures as one object, nothing left to make
    got = subprocess.run([sys.executable, "-m", "memobench.cli", "score", "runs/recency.json", "--dataset", "locomo10",
                          "--json"], cwd=proj, capture_output=True, text=True, env=env, timeout=600)
    assert got.returncode == 0, got.stderr[-3000:]
    as_json = json.loads(got.stdout)
    assert as_json["metrics"] == m and as_json["against"] == "v0.8.0" and as_json["paired"]["metrics"]["hit@1"]
    assert as_json["official"]["official"]["convention"] == "all_categories"


def test_a_bundle_round_trips_through_verify_and_a_tampered_one_is_refused(example):
    """`memobench bundle` of the first look's v0.8.0, verified in the same project: every figure holds and it
    is on the board as a verified bundle; a changed list line, a changed figure and another data file are
    refused in one line each, with exit status 1."""
    proj, _, _ = example
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}

    def memobench(*args):
        return subprocess.run([sys.executable, "-m", "memobench.cli", *args], cwd=proj, capture_output=True,
                              text=True, env=env, timeout=600)

    made = memobench("bundle", "--dataset", "locomo10", "--variant", "v0.8.0", "--out", "v08.bundle.jsonl")
    assert made.returncode == 0, made.stderr
    lines = (proj / "v08.bundle.jsonl").read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    m = _json(proj / "results" / "locomo10" / "v0.8.0" / "metrics.json")
    assert header["figures"]["harness"]["hit@1"] == m["hit@1"] and len(lines) - 1 == m["questions"]
    assert header["data_file"]["sha256"] == "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4"
    assert header["provenance"]["source"] == m["provenance"]["source"]
    ok = memobench("verify", "v08.bundle.jsonl")
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert "DIFFERS" not in ok.stdout and "verified: all 33 figures hold" in ok.stdout
    assert "all_categories recall_any@5" in ok.stdout and "categories_1_4 recall_any@5" in ok.stdout
    name = f"bundle-v0.8.0-{header['run']['sha256'][:8]}"
    assert _json(proj / "results" / "locomo10" / name / "metrics.json")["hit@1"] == m["hit@1"]
    board = memobench("board")
    assert any(name in line and "a verified bundle" in line for line in board.stdout.splitlines())

    def tampered(path, head, body):
        (proj / path).write_text("\n".join([json.dumps(head), *body]) + "\n", encoding="utf-8")
        got = memobench("verify", path)
        assert got.returncode == 1 and got.stderr.startswith("memobench: ") and len(got.stderr.splitlines()) == 1
        return got.stderr

    first = json.loads(lines[1])
    first["sessions"][:2] = first["sessions"][1::-1]
    assert "its run's lines do not match the digest" in tampered("line.jsonl", header,
                                                                 [json.dumps(first), *lines[2:]])
    figures = json.loads(json.dumps(header["figures"]))
    figures["official"]["categories_1_4"]["recall_any@5"] += 0.001
    assert "1 of its 33 figures do not hold" in tampered("figure.jsonl", {**header, "figures": figures}, lines[1:])
    other = {**header, "data_file": {**header["data_file"], "sha256": "0" * 64}}
    assert "made on another data file of locomo10" in tampered("data.jsonl", other, lines[1:])
    # the refused figure's bundle has the verified one's lists: the verified entry stays
    assert (proj / "results" / "locomo10" / name / "bundle.json").is_file()


def test_a_memory_service_scores_through_the_api(example):
    """The reference server (bm25s) measured as a memory service through the API: the in-process bm25s's
    figures (the same retriever), its search latency, and the config's mapping form reusing the results."""
    from tests.helpers import ReferenceServer

    import memobench

    proj, ns, _ = example
    server = ReferenceServer("all")
    try:
        got = memobench.score(system=server.url, dataset="locomo10", workdir=proj, cores=2)
        again = memobench.score(system={"url": server.url}, dataset="locomo10", workdir=proj)
    finally:
        server.kill()
    bm25s = ns["bm25s"]
    assert got.variant == f"service-127.0.0.1-{server.port}" and got.against == "v0.8.0"
    assert {k: got.metrics[k] for k in FIGURES} == {k: bm25s.metrics[k] for k in FIGURES}
    assert got.paired["metrics"] == bm25s.paired["metrics"]
    assert got.latency["warm"]["n"] > 0 and got.latency["failed"] == 0
    assert "search latency" in got.text
    assert again.variant == got.variant and again.metrics == got.metrics
