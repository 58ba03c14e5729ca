"""Fusion variants and the static-embedding retriever ``wordllama`` end to
end through Snakemake: LoCoMo (the real file's first conversation) and a
generated, spiced LongMemEval file in two segments. The fused lists are held
against a second implementation written here from the papers' formulas
(exact fractions for RRF), over the inputs' own deep lists; wordllama's
lists against the wordllama package's own API (its embed, and a cosine in
numpy) on the raw file's haystacks."""

from __future__ import annotations

import importlib.util
import json
import re

import numpy as np
import pyarrow.parquet as pq
import pytest

from tests.helpers import memobench_lines, snakemake, write_config
from tests.unit.retrieval.test_fusion import _config as tiny_config, reference_fusion

HAVE_STATIC = all(importlib.util.find_spec(m) for m in ("safetensors", "tokenizers", "wordllama"))
DENSE = ["wordllama"] if HAVE_STATIC else []
# lex: bm25s under a name of the user's, so that editing its config is possible
FUSIONS = {
    "rrf": {"fuse": {"of": ["v0.8.0", "bm25s"], "method": "rrf", "k": 60}},
    "combsum": {"fuse": {"of": ["lex", *DENSE] if DENSE else ["lex", "v0.8.0"], "method": "combsum"}},
    "borda": {"fuse": {"of": ["v0.8.0", "lex", *DENSE], "method": "borda"}},
    "rrf-k0": {"fuse": {"of": ["bm25s", "v0.8.0", "lex"], "k": 0}},
}
USER = {"lex": {"base": "bm25s"}, **FUSIONS}
VARIANTS = ["v0.8.0", "bm25s", "lex", *DENSE, *FUSIONS]


def _config(root, data, user=USER):
    datasets = {
        "locomo1": {"format": "locomo", "file": "locomo1.json", "bytes": (data / "locomo1.json").stat().st_size,
                    "segments": 1, "variants": VARIANTS},
        "lme": {"format": "longmemeval", "family": "s", "file": "lme.json",
                "bytes": (data / "lme.json").stat().st_size, "segments": 2, "variants": VARIANTS},
    }
    return write_config(root, data_dir=str(data), run=["locomo1", "lme"], datasets=datasets, variants=user)


@pytest.fixture(scope="module")
def run(tmp_path_factory, small_data):
    root = tmp_path_factory.mktemp("fusion_run")
    data, _ = small_data(VARIANTS, seed=5, spice=True)
    cfg = _config(root / "cfg.yaml", data)
    work = root / "work"
    work.mkdir()
    snakemake(work, "--cores", "2", configfile=cfg)
    return work, data, root


def _deep(path) -> dict[int, list[tuple[str, float]]]:
    out: dict[int, list[tuple[str, float]]] = {}
    for r in sorted(pq.read_table(path).to_pylist(), key=lambda r: (r["q_index"], r["rank"])):
        out.setdefault(r["q_index"], []).append((r["session_id"], r["score"]))
    return out


@pytest.mark.parametrize("ds", ["locomo1", "lme"])
def test_fused_lists_equal_the_reference(run, ds):
    work, _, _ = run
    res = work / "results" / ds
    checked = 0
    for name, entry in FUSIONS.items():
        f = entry["fuse"]
        inputs = [_deep(res / v / "deep.parquet") for v in f["of"]]
        got = _deep(res / name / "deep.parquet")
        outcomes = pq.read_table(res / name / "outcomes.parquet").to_pylist()
        for o in outcomes:
            if o["status"] != "evaluated":
                assert o["q_index"] not in got
                continue
            want = reference_fusion([d.get(o["q_index"]) for d in inputs], f.get("method", "rrf"),
                                    f.get("k", 60))[:50]
            assert [sid for sid, _ in got.get(o["q_index"], [])] == want, (name, o["question_id"])
            checked += 1
    assert checked >= len(FUSIONS) * 8


def test_a_list_missing_from_an_input_contributes_nothing(run):
    """On the spiced file v0.8.0 has no list for a Han-only question (a forced
    miss): the fusion of v0.8.0 and bm25s evaluates it with bm25s's order."""
    work, _, _ = run
    res = work / "results/lme"
    memo = pq.read_table(res / "v0.8.0/outcomes.parquet").to_pylist()
    forced = [o["q_index"] for o in memo if o["reason"] == "empty_seq"]
    assert forced
    fused, bm25s = _deep(res / "rrf/deep.parquet"), _deep(res / "bm25s/deep.parquet")
    for qi in forced:
        assert [s for s, _ in fused[qi]] == [s for s, _ in bm25s[qi]]


@pytest.mark.parametrize("ds", ["locomo1", "lme"])
def test_fusion_and_wordllama_rows_have_the_familys_denominators(run, ds):
    work, _, _ = run
    res = work / "results" / ds
    m0 = json.loads((res / "v0.8.0/metrics.json").read_text())
    memo = pq.read_table(res / "v0.8.0/outcomes.parquet").to_pylist()
    report = (work / "results/report.md").read_text()
    for v in [*DENSE, *FUSIONS]:
        m = json.loads((res / v / "metrics.json").read_text())
        assert (m["items"], m["questions"], m["skipped"]) == (m0["items"], m0["questions"], m0["skipped"]), v
        theirs = pq.read_table(res / v / "outcomes.parquet").to_pylist()
        assert [(o["q_index"], o["status"] == "skipped", o["reason"] if o["status"] == "skipped" else None)
                for o in theirs] == [(o["q_index"], o["status"] == "skipped",
                                      o["reason"] if o["status"] == "skipped" else None) for o in memo], v
        for name in ("official.json", "run.trec"):
            assert (res / v / name).stat().st_size > 0
        kind = "fusion" if v in FUSIONS else "reference retriever"
        assert f"| {ds} | {v} ({kind}) |" in report
        # its paired row against v0.8.0 (under the dataset's heading) and its row of the comparison matrix
        assert f"| {v} | {kind} | v0.8.0 |" in report
        assert re.search(rf"^\| \d+ \| {re.escape(v)} \|", report, re.M), v
        assert (m["kind"], m.get("fusion", m.get("recipe", {}).get("backend"))) == (
            ("fusion", m["fusion"]) if v in FUSIONS else ("reference", v))


@pytest.mark.skipif(not HAVE_STATIC, reason="wordllama needs the [static] extra")
@pytest.mark.parametrize("ds", ["locomo1", "lme"])
def test_wordllama_equals_the_packages_own_embed_and_a_cosine(run, ds):
    """The package's WordLlama.load (from its own folder: its load() looks for
    the tokenizer in a folder the wheel does not have, and would download it)
    embeds each haystack's session documents (the documents rule's, from the
    normalized tables) and the question; a cosine in numpy ranks them."""
    from wordllama import WordLlama

    from memobench.retrieval.documents import haystack_documents

    work, _, _ = run
    norm = work / "results" / ds / "normalized"
    folder = importlib.util.find_spec("wordllama").origin.rsplit("/", 1)[0]
    wl = WordLlama.load(cache_dir=folder, disable_download=True)
    got = _deep(work / "results" / ds / "wordllama/deep.parquet")
    hays = haystack_documents(norm / "haystacks.parquet", norm / "events.parquet",
                              "longmemeval" if ds == "lme" else "locomo")
    checked = 0
    for q in pq.read_table(norm / "questions.parquet").to_pylist()[:12]:
        if q["q_index"] not in got:
            continue
        h = hays[q["haystack_id"]]
        d = wl.embed(h.docs).astype(np.float64)
        v = wl.embed(q["question"])[0].astype(np.float64)
        norms = np.linalg.norm(d, axis=1)
        cos = (d @ v) / (np.where(norms > 0, norms, 1.0) * np.linalg.norm(v))
        order = np.argsort(-cos, kind="stable")
        assert [s for s, _ in got[q["q_index"]]] == [h.session_ids[i] for i in order][:50], q["question_id"]
        checked += 1
    assert checked >= 8


@pytest.mark.skipif(not HAVE_STATIC, reason="wordllama needs the [static] extra")
def test_wordllama_embeds_each_session_once(run):
    work, _, _ = run
    for ds in ("locomo1", "lme"):
        emb = pq.read_table(work / "results" / ds / "embeddings/wordllama.parquet")
        sessions = pq.read_table(work / "results" / ds / "normalized/sessions.parquet")
        assert sorted(emb.column("session_key").to_pylist()) == sorted(sessions.column("session_key").to_pylist())
        assert emb.schema.field("vector").type.list_size == 256
        meta = json.loads(emb.schema.metadata[b"memobench"])
        assert meta["documents"] == ("user turns" if ds == "lme" else "all turns")
        assert len(meta["sha256"]) == 2


def _retrieve_jobs(out: str) -> dict[str, int]:
    jobs: dict[str, int] = {}
    for ds, v in re.findall(r"rule retrieve:\n(?:    .*\n)*?    wildcards: dataset=([^,]+), variant=([^,\s]+)", out):
        jobs[f"{ds}/{v}"] = jobs.get(f"{ds}/{v}", 0) + 1
    return jobs


def test_editing_a_fused_inputs_config_reruns_the_fusions_of_it(run):
    """Nothing to do after the run; lex's documents changed (on lme: user ->
    all turns) reruns lex and the fusions that fuse it, not the others; a
    fusion's own k reruns that fusion only."""
    work, data, root = run
    assert _retrieve_jobs(snakemake(work, "-n", configfile=root / "cfg.yaml").stdout) == {}
    edited = {**USER, "lex": {"base": "bm25s", "recipe": {"documents": "all"}}}
    out = snakemake(work, "-n", configfile=_config(root / "edited.yaml", data, edited)).stdout
    fusing_lex = [n for n, e in FUSIONS.items() if "lex" in e["fuse"]["of"]]
    assert _retrieve_jobs(out) == {f"lme/{v}": 2 for v in ["lex", *fusing_lex]}
    edited = {**USER, "rrf": {"fuse": {**FUSIONS["rrf"]["fuse"], "k": 10}}}
    out = snakemake(work, "-n", configfile=_config(root / "edited.yaml", data, edited)).stdout
    assert _retrieve_jobs(out) == {"locomo1/rrf": 1, "lme/rrf": 2}


def test_workflow_says_it_in_one_line(tmp_path):
    cfg = write_config(tmp_path / "cfg.yaml", **tiny_config(tmp_path, {"rrf": {"fuse": {"of": ["v0.8.0", "bm25s"]}}},
                                                            ["v0.8.0", "rrf"]), run=["tiny"])
    proc = snakemake(tmp_path, "-n", configfile=cfg, check=False)
    lines = memobench_lines(proc.stderr)
    assert proc.returncode != 0 and lines == [
        "memobench: config: dataset 'tiny': variant 'rrf' fuses 'bm25s', which is not listed for this dataset; "
        "add it to datasets.tiny.variants"], proc.stderr[-2000:]
