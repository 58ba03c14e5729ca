"""Every pair of a dataset's variants, Holm's correction, per-type intervals
and minimum detectable differences (stats.py), on synthetic outcomes. The
corrections are held against statsmodels, the exact tests against a full
enumeration of the sign flips and scipy, the MDE against simulated tests."""

from __future__ import annotations

import gc
import itertools
import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memobench.evaluation import correction, paired, resampling, stats
from memobench.evaluation.measures import PAIRED
from memobench.retrieval.memo import OUTCOMES

TYPES = ("knowledge-update", "multi-session", "temporal-reasoning")


def _write(path, ranks, skip=(), types=None):
    n = len(ranks)
    types = types or [TYPES[i % 3] for i in range(n)]
    pq.write_table(pa.table({
        "q_index": list(range(n)), "question_id": [f"q{i}" for i in range(n)], "question_type": types,
        "status": ["skipped" if i in skip else "evaluated" for i in range(n)],
        "reason": [None] * n, "in_types": [True] * n, "gold_rank": [int(r) for r in ranks],
        "pool_size": [20] * n, "gold_in_pool": [1] * n}, schema=OUTCOMES), path)
    return [path]


def _ranks(rng, n, skill):
    """Ranks 1..10 or 0 (a miss): rank 1 with probability ``skill``."""
    return np.where(rng.random(n) < skill, 1, rng.integers(0, 11, n))


@pytest.fixture(scope="module")
def five(tmp_path_factory):
    """Five variants over 90 questions, one of them skipping 13 questions."""
    tmp = tmp_path_factory.mktemp("five")
    rng = np.random.default_rng(4)
    files = {
        "v0.8.0": _write(tmp / "a.parquet", _ranks(rng, 90, 0.35)),
        "b": _write(tmp / "b.parquet", _ranks(rng, 90, 0.40)),
        "c": _write(tmp / "c.parquet", _ranks(rng, 90, 0.75)),
        "d": _write(tmp / "d.parquet", _ranks(rng, 90, 0.45), skip=set(range(0, 90, 7))),
        "e": _write(tmp / "e.parquet", _ranks(rng, 90, 0.80)),
    }
    variants = {"v0.8.0": "", "b": "v0.8.0", "c": "b", "d": "c", "e": ""}
    return stats.dataset_stats("five", variants, files, log=lambda m: None), variants, files


def test_every_pair_once_later_minus_earlier(five):
    s, _, _ = five
    names = ["v0.8.0", "b", "c", "d", "e"]
    assert s["compared"] == names
    assert [(p["variant"], p["baseline"]) for p in s["pairs"]] == [
        (names[j], names[i]) for j in range(5) for i in range(j)]
    for p in s["pairs"]:
        assert p["n"] == (77 if "d" in (p["variant"], p["baseline"]) else 90)
    assert s["resampled_questions"] == 90


# scipy.stats and statsmodels (1 s to import) are imported by the tests that use
# them: each test process collects this file, and only one runs those tests.


def multipletests(*args, **kwargs):
    """statsmodels' multipletests, whose Holm branch calls gc.collect(): that walks every object the test
    process holds (0.4 s a call late in a run), so the objects alive before the call are frozen for it."""
    from statsmodels.stats.multitest import multipletests

    gc.freeze()
    try:
        return multipletests(*args, **kwargs)
    finally:
        gc.unfreeze()


def test_holm_matches_statsmodels(five):
    """Per metric, over the distinct pairs of pairs and comparisons together."""
    s, _, _ = five
    rows = s["pairs"] + s["comparisons"]
    for m in PAIRED:
        family = {}
        for r in rows:
            family.setdefault(frozenset((r["variant"], r["baseline"])), r["metrics"][m])
        assert len(family) == 10 == s["holm"]["pairs"][m]
        keys = list(family)
        reject, adjusted, _, _ = multipletests([family[k]["p_analytic"] for k in keys], alpha=0.05, method="holm")
        for k, adj, rej in zip(keys, adjusted, reject):
            assert family[k]["p_holm"] == pytest.approx(adj, rel=1e-12, abs=1e-300)
            assert (family[k]["p_holm"] <= 0.05) == rej
        for r in rows:  # a pair compared twice has one corrected p
            assert r["metrics"][m]["p_holm"] == family[frozenset((r["variant"], r["baseline"]))]["p_holm"]
    # the strong variants beat the weak ones after the correction, on hit@1 and MRR
    strong = {(p["variant"], p["baseline"]): p for p in s["pairs"]}[("c", "v0.8.0")]
    assert strong["metrics"]["hit@1"]["p_holm"] < 0.001 and strong["metrics"]["mrr"]["p_holm"] < 0.001


def test_holm_on_ties_bounds_and_order():
    rng = np.random.default_rng(9)
    for size in (1, 2, 5, 8, 12):  # tied p-values among them
        p = list(rng.choice([0.001, 0.01, 0.02, 0.04, 0.3, 1.0], size=size) * rng.random())
        assert correction.holm(p) == pytest.approx(list(multipletests(p, method="holm")[1]), rel=1e-12)
    assert correction.holm([]) == []
    assert correction.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def test_family_covers_comparisons_outside_the_compared_set(tmp_path):
    rng = np.random.default_rng(2)
    files = {v: _write(tmp_path / f"{v}.parquet", _ranks(rng, 40, 0.3 + 0.1 * i))
             for i, v in enumerate(["v0.8.0", "a", "b", "c"])}
    variants = {"v0.8.0": "", "a": "v0.8.0", "b": "a", "c": "b"}
    s = stats.dataset_stats("f", variants, files, log=lambda m: None, compare_set=["c", "a"])
    assert s["compared"] == ["a", "c"]  # the dataset's order
    assert [(p["variant"], p["baseline"]) for p in s["pairs"]] == [("c", "a")]
    # the pair plus the comparisons a-v0.8.0, b-a, b-v0.8.0, c-b, c-v0.8.0
    assert s["holm"]["pairs"] == {m: 6 for m in PAIRED}
    none = stats.dataset_stats("f", variants, files, log=lambda m: None, compare_set=[])
    assert none["pairs"] == [] and none["holm"]["pairs"]["mrr"] == 5


def test_mcnemar_is_the_exact_sign_flip_test():
    """For differences of 0 and +-1, McNemar's exact p is the share of all 2^k
    sign patterns of the k nonzero differences at least as extreme; the
    randomization p estimates it."""
    rng = np.random.default_rng(5)
    for wins, losses in ((9, 3), (7, 7), (11, 1), (0, 5), (4, 0)):
        d = np.array([1.0] * wins + [-1.0] * losses + [0.0] * 6)
        rng.shuffle(d)
        k = wins + losses
        obs = abs(d.sum())
        extreme = sum(abs(sum(s)) >= obs for s in itertools.product((1, -1), repeat=k))
        assert paired.p_analytic("hit@1", d) == pytest.approx(extreme / 2 ** k, rel=1e-12)
        (mc,) = resampling.paired(d[:, None], np.zeros((len(d), 1)), resampling.seeded("x"), n_boot=10, n_perm=20_000)
        exact = extreme / 2 ** k
        assert abs(mc["p"] - exact) < 4 * math.sqrt(exact * (1 - exact) / 20_000) + 1 / 20_000
    assert paired.p_analytic("hit@5", np.zeros(4)) == 1.0 and paired.p_analytic("hit@1", np.array([])) is None


def test_mcnemar_equals_scipy_binomtest_at_one_half():
    """The p-value summed in integers is scipy.stats.binomtest's two-sided one
    at 1/2, over small and dataset-sized counts of discordant questions."""
    from scipy.stats import binomtest

    rng = np.random.default_rng(11)
    for n in [*range(1, 120), 499, 1977, 5000]:
        for wins in {0, n, n // 2, (n + 1) // 2, *map(int, rng.integers(0, n + 1, 8))}:
            d = np.array([1.0] * wins + [-1.0] * (n - wins) + [0.0] * 3)
            assert paired.p_analytic("hit@1", d) == pytest.approx(binomtest(wins, n, 0.5).pvalue, rel=1e-8), (wins, n)


def test_mrr_p_is_the_paired_t_test():
    from scipy import stats as sps

    rng = np.random.default_rng(8)
    a = 1 / rng.integers(1, 11, 60)
    b = np.where(rng.random(60) < 0.3, 0.0, 1 / rng.integers(1, 11, 60))
    assert paired.p_analytic("mrr", a - b) == pytest.approx(sps.ttest_rel(a, b).pvalue, rel=1e-9)
    assert paired.p_analytic("mrr", np.full(5, 0.5)) == 0.0 and paired.p_analytic("mrr", np.zeros(5)) == 1.0
    # scipy.special's functions, to the bit what scipy.stats gives (stats.json keeps its bytes)
    for n in (2, 7, 60, 1986):
        d = rng.normal(0.01, 0.3, n)
        t = d.mean() / (d.std(ddof=1) / math.sqrt(n))
        assert paired.p_analytic("mrr", d) == float(min(1.0, 2 * sps.t.sf(abs(t), n - 1)))
    for q in (0.975, 0.8, 1 - 0.05 / 2 / 528, *correction._QUANTILES):
        assert correction.z(q) == float(sps.norm.ppf(q))


def test_mde_is_detected_with_the_stated_power():
    """At a true difference equal to the MDE, a two-sided 5% test rejects about 80% of the time."""
    rng = np.random.default_rng(12)
    n, sims = 300, 1500
    # a continuous difference (MRR-like) under the t-test
    sd = 0.4
    delta = (correction.z(0.975) + correction.z(0.8)) * sd / math.sqrt(n)
    rate = np.mean([paired.p_analytic("mrr", rng.normal(delta, sd, n)) <= 0.05 for _ in range(sims)])
    assert 0.76 < rate < 0.84, rate
    # paired hits under McNemar: 30% discordant, the MDE from the spread of such differences
    disc = 0.3
    d0 = np.array([1.0] * 45 + [-1.0] * 45 + [0.0] * 210)
    delta = correction.mde(d0)  # sd of a 0/+-1 difference with 30% discordance, at n = 300
    p_win = (disc + delta) / 2
    rejects = 0
    for _ in range(sims):
        u = rng.random(n)
        d = np.where(u < p_win, 1.0, np.where(u < disc, -1.0, 0.0))
        rejects += paired.p_analytic("hit@1", d) <= 0.05
    assert 0.72 < rejects / sims < 0.86, rejects / sims
    assert correction.mde(np.array([1.0])) is None


def test_power_section(five):
    s, _, _ = five
    pw = s["power"]
    assert (pw["alpha"], pw["power"]) == (0.05, 0.8)
    assert pw["z_alpha"] == pytest.approx(1.959964, abs=1e-6) and pw["z_power"] == pytest.approx(0.841621, abs=1e-6)
    for m in PAIRED:
        pm = pw["metrics"][m]
        mdes = []
        for r in s["pairs"]:
            mm = r["metrics"][m]
            assert mm["mde"] == pytest.approx((pw["z_alpha"] + pw["z_power"]) * mm["sd"] / math.sqrt(r["n"]))
            mdes.append(mm["mde"])
        assert pm["pairs"] == 10 and (pm["n_min"], pm["n_max"]) == (77, 90)
        assert pm["mde_min"] == min(mdes) and pm["mde_max"] == max(mdes)
        assert pm["mde_median"] == pytest.approx(float(np.median(mdes)))
        assert pm["mde_first_holm_step"] > pm["mde_median"]  # alpha / 10 needs a larger difference


def test_comparisons_over_every_question_keep_the_draws_of_paired(five):
    """Byte-stable: a comparison over the whole index space is paired() on the
    aligned outcomes with the dataset's stream, as before pairs existed."""
    s, _, files = five
    per = {v: stats.per_question(f) for v, f in files.items()}
    row = next(c for c in s["comparisons"] if (c["variant"], c["baseline"]) == ("b", "v0.8.0"))
    common = sorted(per["b"])
    A = np.array([[per["b"][q][m] for m in PAIRED] for q in common])
    B = np.array([[per["v0.8.0"][q][m] for m in PAIRED] for q in common])
    old = resampling.paired(A, B, resampling.seeded("five"))
    for m, o in zip(PAIRED, old):
        assert {k: row["metrics"][m][k] for k in ("diff", "ci95", "p")} == o
    # and the same pair in pairs, from the counts: equal to rounding
    pair = next(p for p in s["pairs"] if (p["variant"], p["baseline"]) == ("b", "v0.8.0"))
    for m in PAIRED:
        assert pair["metrics"][m]["diff"] == row["metrics"][m]["diff"]
        assert pair["metrics"][m]["p"] == row["metrics"][m]["p"]
        assert pair["metrics"][m]["ci95"] == pytest.approx(row["metrics"][m]["ci95"], abs=1e-12)


def test_fewer_questions_read_the_same_draws_restricted(tmp_path):
    """A pair over a subset C of the N questions: its resamples are the
    dataset's resamples with the questions outside C dropped, its sign flips
    the signs those questions got. Checked against the stream drawn here, and
    against a pair over all N whose differences are 0 outside C (the same
    sign sums, so the same p)."""
    rng = np.random.default_rng(21)
    n = 60
    skip = set(range(0, n, 5))
    base = _ranks(rng, n, 0.35)
    better = _ranks(rng, n, 0.55)
    full = better.copy()
    full[list(skip)] = base[list(skip)]  # equal to base where the subset variant skipped
    files = {"v0.8.0": _write(tmp_path / "a.parquet", base), "sub": _write(tmp_path / "s.parquet", better, skip=skip),
             "full": _write(tmp_path / "f.parquet", full)}
    s = stats.dataset_stats("r", {"v0.8.0": "", "sub": "", "full": ""}, files, log=lambda m: None)
    sub = next(c for c in s["comparisons"] if c["variant"] == "sub")
    whole = next(c for c in s["comparisons"] if c["variant"] == "full")
    assert (sub["n"], whole["n"]) == (48, 60)
    for m in PAIRED:
        assert sub["metrics"][m]["diff"] == pytest.approx(whole["metrics"][m]["diff"] * 60 / 48)
        assert 0.001 < sub["metrics"][m]["p"] < 0.9 and sub["metrics"][m]["p"] == whole["metrics"][m]["p"]
    # the bootstrap from the stream itself: draws over the 60 questions, means over the drawn copies of C
    r = resampling.seeded("r")
    idx = np.concatenate([r.integers(0, n, size=(500, n)) for _ in range(resampling.BOOTSTRAP // 500)])
    keep = np.array([q not in skip for q in range(n)])
    d = np.array([float(b == 1) - float(a == 1) for a, b in zip(base, better)])
    drawn = keep[idx]
    means = (d[idx] * drawn).sum(axis=1) / drawn.sum(axis=1)
    assert sub["metrics"]["hit@1"]["ci95"] == pytest.approx(list(np.percentile(means, [2.5, 97.5])), abs=1e-12)


def test_per_type_intervals(five):
    s, _, files = five
    per = {v: stats.per_question(f) for v, f in files.items()}
    for c in s["comparisons"]:
        common = sorted(set(per[c["variant"]]) & set(per[c["baseline"]]))
        assert sum(b["n"] for b in c["by_type"].values()) == c["n"]
        counts = [b["n"] for b in c["by_type"].values()]
        assert counts == sorted(counts, reverse=True) and set(c["by_type"]) == set(TYPES)
        for i, t in enumerate(TYPES):
            qs = [q for q in common if q % 3 == i]
            b = c["by_type"][t]
            assert b["n"] == len(qs)
            for m in PAIRED:
                mm = b["metrics"][m]
                want = np.mean([per[c["variant"]][q][m] - per[c["baseline"]][q][m] for q in qs])
                assert mm["diff"] == pytest.approx(want)
                assert mm["ci95"][0] <= mm["diff"] + 1e-12 and mm["diff"] <= mm["ci95"][1] + 1e-12
                assert 0 < mm["p"] <= 1 and mm["mde"] > 0
    # one type's interval is wider than the whole comparison's: a third of the questions
    c = s["comparisons"][0]
    lo, hi = c["metrics"]["mrr"]["ci95"]
    tlo, thi = c["by_type"][TYPES[0]]["metrics"]["mrr"]["ci95"]
    assert thi - tlo > hi - lo


def test_stats_rerun_is_byte_identical(five):
    s, variants, files = five
    assert json.dumps(stats.dataset_stats("five", variants, files, log=lambda m: None)) == json.dumps(s)


def test_a_variant_that_evaluated_nothing(tmp_path):
    """Its pairs have n = 0 and no figures; they stay out of the Holm family and the MDEs."""
    rng = np.random.default_rng(3)
    files = {"v0.8.0": _write(tmp_path / "a.parquet", _ranks(rng, 30, 0.4)),
             "b": _write(tmp_path / "b.parquet", _ranks(rng, 30, 0.6)),
             "none": _write(tmp_path / "n.parquet", _ranks(rng, 30, 0.6), skip=set(range(30)))}
    s = stats.dataset_stats("z", {"v0.8.0": "", "b": "", "none": "b"}, files, log=lambda m: None)
    empty = [p for p in s["pairs"] + s["comparisons"] if "none" in (p["variant"], p["baseline"])]
    assert len(empty) == 4 and all(p["n"] == 0 for p in empty)
    for p in empty:
        assert p.get("by_type", {}) == {}
        for mm in p["metrics"].values():
            assert (mm["diff"], mm["ci95"], mm["p"], mm["p_analytic"], mm["p_holm"], mm["mde"]) == (None,) * 6
    assert s["holm"]["pairs"] == {m: 1 for m in PAIRED} and s["power"]["metrics"]["mrr"]["pairs"] == 1


def _differences(rng, n, on_grid=True):
    """Per-question hit@1, hit@5 and reciprocal-rank differences of two random
    variants (ranks 1..10 or 0); off the grid, the last column is any float."""
    ranks = rng.integers(0, 11, size=(n, 2))
    rr = np.where(ranks > 0, 1.0 / np.maximum(ranks, 1), 0.0)
    h1, h5 = (ranks == 1).astype(float), ((ranks >= 1) & (ranks <= 5)).astype(float)
    last = rr[:, 0] - rr[:, 1] if on_grid else rng.random(n) - 0.5
    return np.stack([h1[:, 0] - h1[:, 1], h5[:, 0] - h5[:, 1], last], axis=1)


@pytest.mark.parametrize("n", [1, 2, 17, 301])
def test_comparisons_at_once_equal_paired_bit_for_bit(n):
    """Draws.full_paired, the comparisons over the whole index space computed
    together, gives what paired() gives for each, to the last bit: any number
    of comparisons (one goes the in-order sum's single-column way), and a
    comparison whose differences are not on the reciprocal-rank grid (paired
    itself)."""
    rng = np.random.default_rng(n)
    draws = resampling.Draws(f"d{n}", list(range(n)), n_boot=700, n_perm=600)
    for k in (1, 2, 5):
        ds = [_differences(rng, n, on_grid=(i != 3)) for i in range(k)]
        ds.append(ds[0].copy())  # two variants with the same lists: their columns are summed once
        for d, got in zip(ds, draws.full_paired(ds)):
            assert got == resampling.paired(d, np.zeros_like(d), resampling.seeded(f"d{n}"), n_boot=700, n_perm=600)


def test_column_differences_equal_evaluate():
    """Draws.evaluate_diffs, each pair's sums as its two variants' sums
    subtracted, gives what evaluate() gives on the differences themselves:
    over every question, over subsets, for columns at different scales, and
    for columns off the grid (evaluate itself)."""
    rng = np.random.default_rng(8)
    n = 83
    draws = resampling.Draws("cols", list(range(n)), n_boot=900, n_perm=800)
    variants = {v: _differences(rng, n) + 1.0 for v in "abcd"}  # columns of values >= 0, as outcomes are
    variants["e"] = rng.random((n, 3))  # not on any grid
    variants["f"] = variants["a"].copy()  # the same outcomes as a: equal columns, so equal jobs, computed once
    subsets = [list(range(n)), sorted(rng.choice(n, 40, replace=False).tolist()), [5], []]
    jobs, plain = [], []
    for (va, vb), qs, j in itertools.product(itertools.combinations("abcdef", 2), subsets, range(3)):
        a, b = variants[va][qs, j], variants[vb][qs, j]
        jobs.append((qs, ((va, j), a), ((vb, j), b)))
        plain.append((qs, a - b))
    want = draws.evaluate(plain)
    assert draws.evaluate_diffs(jobs) == want
    assert draws.evaluate_diffs(jobs, block=4) == want  # the distinct jobs in blocks of four


def _stats_job(tmp_path, threads, n_variants=11, n=60):
    """The stats stage run as a job (run_logged) over ``n_variants`` variants with
    segment outcomes and merged outcomes with budget columns: (stats.json's
    bytes, its log)."""
    from memobench.stages import stats as stage
    from memobench.stages.adapter import run_logged

    rng = np.random.default_rng(11)
    names = ["v0.8.0"] + [f"x{i}" for i in range(1, n_variants)]
    outcomes, merged, official = [], [], []
    for v in names:
        folder = tmp_path / "results" / "d" / v
        (folder / "segments").mkdir(parents=True, exist_ok=True)
        outcomes += _write(folder / "segments" / "seg1.outcomes.parquet", _ranks(rng, n, rng.random()))
        first = [int(x) if x < 900 else None for x in rng.integers(50, 1000, n)]
        pq.write_table(pa.table({"q_index": pa.array(range(n), pa.int32()),
                                 "in_budgets": pa.array([q % 9 != 0 for q in range(n)], pa.bool_()),
                                 "first_gold_tokens": pa.array(first, pa.int32()),
                                 "all_gold_tokens": pa.array([None if f is None else f + 50 for f in first],
                                                             pa.int32())}), folder / "outcomes.parquet")
        (folder / "official.json").write_text(json.dumps({"budgets": {
            "grain": "session", "tokenizer": {"name": "cl100k_base", "sha256": "ab" * 32}, "budgets": [512, 1024]}}))
        merged.append(str(folder / "outcomes.parquet"))
        official.append(str(folder / "official.json"))
    out = tmp_path / f"stats{threads}.json"
    log = tmp_path / f"stats{threads}.log"
    run_logged(log, stage.stats, {"outcomes": [str(p) for p in outcomes], "merged": merged, "official": official},
               {"stats": str(out)}, {"baselines": {v: "" for v in names}, "compare": names}, {"dataset": "d"},
               threads=threads)
    return out.read_bytes(), log.read_text()


def test_the_stats_job_forks_its_budgets_and_writes_the_same_bytes(tmp_path, monkeypatch):
    """With two threads and many variants, the token budgets' tests run in a
    forked process beside the paired tests of the lists; stats.json and the
    log are those of one thread."""
    import os

    from memobench.stages import stats as stage

    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(name, "2")  # as Snakemake sets them; the job sets one per process
    one = _stats_job(tmp_path / "one", 1)
    pids = tmp_path / "pids"
    original = stage.budget_figures

    def recorded(*args):
        with open(pids, "a") as f:
            f.write(f"{os.getpid()}\n")
        return original(*args)

    recorded.__module__, recorded.__qualname__ = original.__module__, original.__qualname__  # pickled by name
    monkeypatch.setattr(stage, "budget_figures", recorded)
    two = _stats_job(tmp_path / "two", 2)
    assert pids.read_text().split() != [str(os.getpid())]  # another process tested the budgets
    assert two == one
    s = json.loads(one[0])
    assert len(s["pairs"]) == 55 and len(s["budgets"]["pairs"]) == 55
    assert one[1].rstrip().endswith("token budgets, 55 pairs of 11 variants")


def test_a_users_error_in_the_forked_budgets_is_the_jobs_one_line(tmp_path, monkeypatch, capsys):
    from memobench.core.errors import DataError
    from memobench.evaluation import budget_stats

    def broken(outcomes_path, official_path):
        raise DataError(official_path, None, "no budgets block")

    monkeypatch.setattr(budget_stats, "read_variant", broken)  # the forked process inherits it
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(name, "2")
    with pytest.raises(SystemExit) as e:
        _stats_job(tmp_path, 2)
    err = capsys.readouterr().err
    assert e.value.code == 1 and err.count("\n") == 1 and "official.json: no budgets block" in err


def test_the_stats_job_fails_when_its_budgets_process_dies(tmp_path, monkeypatch, capsys):
    """A forked budgets process that dies (killed, out of memory) fails the job
    at once, never leaves it waiting for an answer."""
    import os

    from memobench.stages import stats as stage

    def dies(*args):
        os._exit(3)

    dies.__module__, dies.__qualname__ = stage.budget_figures.__module__, stage.budget_figures.__qualname__
    monkeypatch.setattr(stage, "budget_figures", dies)
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(name, "2")
    with pytest.raises(SystemExit) as e:
        _stats_job(tmp_path, 2)
    assert e.value.code == 1 and "internal error BrokenProcessPool" in capsys.readouterr().err
