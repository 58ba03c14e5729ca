"""Fusion of other variants' deep lists (src/memobench/retrieval/fusion.py): the fused
order against a second implementation written here from the formulas (RRF:
Cormack, Clarke and Buettcher 2009, in exact fractions; CombSUM of min-max
normalized scores; BordaFuse), the documented tie-break, repeated sessions,
the family's skip rule with an input that has no list, and the config's
one-line errors. tests/workflow/test_fusion.py runs them through Snakemake."""

from __future__ import annotations

import random
import re
from fractions import Fraction

import pyarrow.parquet as pq
import pytest

from tests.helpers import REPO
from memobench.retrieval import fusion
from memobench.core.config import validate
from memobench.core.errors import ConfigError
from memobench.catalog.variants import resolve

SCHEMA = REPO / "workflow/schemas/config.schema.yaml"


def reference_fusion(lists, method, k=60):
    """The fused order in exact arithmetic: RRF's sum of 1 / (k + rank);
    CombSUM of (s - min) / max(max - min, 1e-9) (ranx's min-max); BordaFuse's
    C - rank + 1 points, (C - n + 1) / 2 to each session an input does not
    rank (ranx's). An input without a list gives nothing; a session counts
    once per input, at its first rank. Ties: best rank, then the first input
    holding it there."""
    ranked = []
    for lst in lists:
        if lst is None:
            ranked.append(None)
            continue
        seen, keep = set(), []
        for sid, s in lst:
            if sid not in seen:
                seen.add(sid)
                keep.append((sid, s))
        ranked.append(keep)
    pool = {sid for lst in ranked if lst for sid, _ in lst}
    score = {sid: Fraction(0) for sid in pool}
    best = {}
    for i, lst in enumerate(ranked):
        if not lst:
            continue
        hi, lo = Fraction(lst[0][1]), Fraction(lst[-1][1])
        span = max(hi - lo, Fraction(1e-9))
        here = {sid for sid, _ in lst}
        for r, (sid, s) in enumerate(lst, 1):
            best[sid] = min(best.get(sid, (r, i)), (r, i))
            score[sid] += {"rrf": Fraction(1, k + r), "combsum": (Fraction(s) - lo) / span,
                           "borda": Fraction(len(pool) - r + 1)}[method]
        if method == "borda":
            for sid in pool - here:
                score[sid] += Fraction(len(pool) - len(lst) + 1, 2)
    return sorted(pool, key=lambda sid: (-score[sid], best[sid]))


def _random_lists(rng: random.Random):
    pool = [f"s{i}" for i in range(rng.randint(1, 30))]
    lists = []
    for _ in range(rng.randint(1, 4)):
        if rng.random() < 0.15:
            lists.append(None)
            continue
        ids = rng.sample(pool, rng.randint(1, len(pool)))
        if rng.random() < 0.3:  # a haystack listing a session twice
            ids.insert(rng.randint(1, len(ids)), rng.choice(ids))
        kind = rng.random()
        if kind < 0.4:  # a harness list: 51 - rank
            scores = [51.0 - r for r in range(1, len(ids) + 1)]
        else:  # a retriever's own scores (BM25-like), strictly decreasing
            scores = sorted(rng.sample(range(1, 10_000), len(ids)), reverse=True)
            scores = [s / 997.0 for s in scores]
        lists.append(list(zip(ids, scores)))
    return lists


@pytest.mark.parametrize("method", fusion.METHODS)
def test_fused_order_equals_the_formulas(method):
    rng = random.Random(f"fusion-{method}")
    for _ in range(400):
        lists = _random_lists(rng)
        k = rng.choice([0, 1, 60]) if method == "rrf" else 60
        got = fusion.fuse(lists, method, k)
        assert [sid for sid, _ in got] == reference_fusion(lists, method, k), lists
        assert all(a[1] >= b[1] for a, b in zip(got, got[1:]))


def test_combsum_scores_are_the_exact_sums_rounded_once():
    """CombSUM's fused score is the float nearest the exact sum of min-max
    terms, on scores of very different magnitudes (tiny spans under the
    1e-9 floor, large ones, repeats that tie)."""
    rng = random.Random("combsum-exact")
    for _ in range(300):
        lists = []
        for _ in range(rng.randint(1, 4)):
            ids = rng.sample([f"s{i}" for i in range(40)], rng.randint(1, 40))
            scale = rng.choice([1.0, 1e-12, 1e7])
            scores = sorted((rng.choice([rng.random(), 0.5, 0.25]) * scale for _ in ids), reverse=True)
            lists.append(list(zip(ids, scores)))
        exact: dict[str, Fraction] = {}
        for lst in lists:
            hi, lo = Fraction(lst[0][1]), Fraction(lst[-1][1])
            span = max(hi - lo, Fraction(1e-9))
            for sid, sc in lst:
                exact[sid] = exact.get(sid, Fraction(0)) + (Fraction(sc) - lo) / span
        got = fusion.fuse(lists, "combsum")
        assert {sid: sc for sid, sc in got} == {sid: float(v) for sid, v in exact.items()}, lists
        assert [sid for sid, _ in got] == reference_fusion(lists, "combsum"), lists


def test_rrf_scores_are_the_papers_sums():
    a = [("x", 9.0), ("y", 5.0), ("z", 1.0)]
    b = [("z", 3.0), ("x", 2.0)]
    got = dict(fusion.fuse([a, b], "rrf", 60))
    exact = {"x": Fraction(1, 61) + Fraction(1, 62), "y": Fraction(1, 62), "z": Fraction(1, 63) + Fraction(1, 61)}
    assert got == {sid: float(s) for sid, s in exact.items()}


def test_ties_go_to_the_best_rank_then_the_earlier_input():
    """x and y swap places in two lists: the same RRF sum, the same Borda
    points; x is first, at rank 1 in the first input. w (ranks 2 and 2)
    ties with nothing."""
    a = [("x", 3.0), ("w", 2.0), ("y", 1.0)]
    b = [("y", 3.0), ("w", 2.0), ("x", 1.0)]
    for method in fusion.METHODS:
        assert [s for s, _ in fusion.fuse([a, b], method)][:2] == ["x", "y"], method
        assert [s for s, _ in fusion.fuse([b, a], method)][:2] == ["y", "x"], method


def test_a_session_counts_once_per_input():
    lists = [[("x", 3.0), ("y", 2.0), ("x", 1.0), ("z", 0.5)]]
    got = fusion.fuse(lists, "rrf", 60)
    assert got == [("x", float(Fraction(1, 61))), ("y", float(Fraction(1, 62))), ("z", float(Fraction(1, 63)))]


def test_combsum_min_max_as_ranx():
    """A list of one session gives it 0 (min = max; ranx's 1e-9 floor)."""
    assert dict(fusion.fuse([[("x", 7.0)], [("y", 4.0), ("x", 2.0)]], "combsum")) == {"y": 1.0, "x": 0.0}


def test_no_list_anywhere_is_an_empty_list():
    assert fusion.fuse([None, None], "rrf") == []


def test_forced_miss_and_skips_on_the_committed_tiny_file(tmp_path):
    """On the spiced tiny file (a Han-only question is v0.8.0's forced miss
    with no list; questions without gold are skipped), the fusion of v0.8.0
    and bm25s skips exactly v0.8.0's questions and fuses the forced miss
    from bm25s's list alone."""
    from memobench.datasets import normalize
    from memobench.retrieval import sharing as retrievers

    normalize.normalize_longmemeval(REPO / ".test/data/lme_tiny.json", tmp_path, log=lambda m: None)
    q, h, e = (tmp_path / f"{n}.parquet" for n in ("questions", "haystacks", "events"))
    inputs = [resolve(n, "s") for n in ("v0.8.0", "bm25s")]
    outs = {v.name: {k: tmp_path / f"{v.name}.{k}.parquet" for k in ("rankings", "outcomes", "deep")} for v in inputs}
    retrievers.write_segments(inputs, q, h, e, 1, 1, outs, log=lambda m: None)
    fused = resolve("rrf", "s", {"rrf": {"fuse": {"of": ["v0.8.0", "bm25s"]}}})
    outs["rrf"] = {k: tmp_path / f"rrf.{k}.parquet" for k in ("rankings", "outcomes", "deep")}
    retrievers.write_segments([fused], q, h, None, 1, 1, {"rrf": outs["rrf"]}, log=lambda m: None,
                              inputs={"fused": [outs["v0.8.0"]["deep"], outs["bm25s"]["deep"]]})
    memo, ours = (pq.read_table(outs[n]["outcomes"]).to_pylist() for n in ("v0.8.0", "rrf"))
    deep = {n: fusion.read_deep(outs[n]["deep"]) for n in ("v0.8.0", "bm25s", "rrf")}
    forced = 0
    assert [o["q_index"] for o in memo] == [o["q_index"] for o in ours]
    for a, b in zip(memo, ours):
        assert (a["status"] == "skipped") == (b["status"] == "skipped"), a
        if a["status"] == "skipped":
            assert a["reason"] == b["reason"] and b["q_index"] not in deep["rrf"]
        elif a["reason"] == "empty_seq":
            forced += 1
            assert a["q_index"] not in deep["v0.8.0"]
            assert [s for s, _ in deep["rrf"][a["q_index"]]] == [s for s, _ in deep["bm25s"][a["q_index"]]]
        else:
            lists = [deep[n].get(a["q_index"]) for n in ("v0.8.0", "bm25s")]
            assert [s for s, _ in deep["rrf"][a["q_index"]]] == reference_fusion(lists, "rrf")[:50]
    assert forced >= 1
    top = pq.read_table(outs["rrf"]["rankings"]).to_pylist()
    assert all(r["rank"] <= 10 for r in top) and top


def _config(data, variants, listed):
    raw = REPO / ".test/data/lme_tiny.json"
    return {"data_dir": str(raw.parent), "variants": variants,
            "datasets": {"tiny": {"format": "longmemeval", "file": raw.name, "bytes": raw.stat().st_size,
                                  "variants": listed}}}


@pytest.mark.parametrize("fuse,listed,why", [
    ({"of": ["v0.8.0", "bm25s"]}, ["v0.8.0", "rrf"], "variant 'rrf' fuses 'bm25s', which is not listed for this "
                                                     "dataset; add it to datasets.tiny.variants"),
    ({"of": ["v0.8.0"]}, ["v0.8.0", "rrf"], "should be non-empty|is too short|fewer than 2"),
    ({"of": ["v0.8.0", "bm25s"], "method": "mean"}, ["v0.8.0", "bm25s", "rrf"], "'mean' is not one of"),
    ({"of": ["v0.8.0", "bm25s"], "k": -1}, ["v0.8.0", "bm25s", "rrf"], "less than the minimum of 0"),
    ({"of": ["v0.8.0", "bm25s"], "how": "x"}, ["v0.8.0", "bm25s", "rrf"], "unknown key 'how'"),
])
def test_schema_and_config_errors(tmp_path, fuse, listed, why):
    with pytest.raises(ConfigError) as e:
        validate(_config(tmp_path, {"rrf": {"fuse": fuse}}, listed), SCHEMA)
    assert re.search(why, str(e.value)) and "\n" not in str(e.value), str(e.value)


@pytest.mark.parametrize("fuse,why", [
    ({"of": ["v0.8.0", "bm25s"], "method": "borda", "k": 5}, "k is the rrf constant; method 'borda' takes none"),
    ({"of": ["v0.8.0", "other"]}, "'other' is itself a fusion; fuse the variants it fuses instead"),
    ({"of": ["v0.8.0", "rrf"]}, "lists a variant twice or the fusion itself"),
    ({"of": ["v0.8.0", "nope"]}, "unknown variant 'nope'"),
])
def test_resolve_errors_name_the_variant(fuse, why):
    custom = {"rrf": {"fuse": fuse}, "other": {"fuse": {"of": ["v0.8.0", "bm25s"]}}}
    with pytest.raises(ConfigError, match=re.escape(why)):
        resolve("rrf", "s", custom)


@pytest.mark.parametrize("custom,cycle", [
    ({"fa": {"fuse": {"of": ["v0.8.0", "fb"]}}, "fb": {"fuse": {"of": ["bm25s", "fa"]}}}, "fa -> fb -> fa"),
    ({"fa": {"fuse": {"of": ["v0.8.0", "fb"]}}, "fb": {"fuse": {"of": ["bm25s", "fc"]}},
      "fc": {"fuse": {"of": ["fa", "bm25s"]}}}, "fa -> fb -> fc -> fa"),
])
def test_a_fusion_cycle_is_named_in_one_line(custom, cycle):
    """Fusions that fuse each other: the loop, not an 'unknown variant' that the config declares."""
    with pytest.raises(ConfigError) as e:
        resolve("fa", "s", custom)
    assert str(e.value) == (f"variant 'fa': fuse: a fusion cycle: {cycle}; a fusion fuses variants that are not "
                            f"fusions")


def test_a_fusion_takes_no_base(tmp_path):
    with pytest.raises(ConfigError, match="a fusion variant takes no base, recipe, retriever or run"):
        validate(_config(tmp_path, {"rrf": {"fuse": {"of": ["v0.8.0", "bm25s"]}, "base": "v0.8.0"}},
                         ["v0.8.0", "bm25s", "rrf"]), SCHEMA)


def test_schema_methods_are_the_packages():
    import yaml

    schema = yaml.safe_load(SCHEMA.read_text(encoding="utf-8"))
    fuse = schema["properties"]["variants"]["additionalProperties"]["properties"]["fuse"]["properties"]
    assert tuple(fuse["method"]["enum"]) == fusion.METHODS
