"""`memobench board` over a folder of two datasets: each table as CSV (read back in pandas) and
LaTeX, the leaderboard sorted by the measure asked for with its intervals, a recall-against-k figure
per dataset with official figures; `load(dataset=)` keeps one dataset's, so a pivot by variant holds."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import memobench
from memobench.cli import main
from tests.unit.reporting.test_report import _run


@pytest.fixture
def folder(tmp_path):
    res = tmp_path / "results"
    for ds in ("locomo10", "longmemeval_s"):
        _run(res, ds, "v0.8.0", [1, 2, 0, 1, 3, 1], ["1", "2", "1", "2", "1", "2"])
        _run(res, ds, "mine", [2, 2, 2, 1, 1, 4], ["1", "2", "1", "2", "1", "2"], baseline="v0.8.0")
    official = {"recall_any@1": 0.5, "recall_any@5": 0.75, "recall_all@1": 0.25, "recall_all@5": 0.5,
                "questions": 6}
    (res / "locomo10" / "mine" / "official.json").write_text(json.dumps(
        {"dataset": "locomo10", "variant": "mine", "grain": "session",
         "official": {**official, "conventions": {"all_categories": dict(official)}}}))
    return res


def test_each_table_as_csv_and_latex_and_a_figure_per_dataset(folder, tmp_path, capsys):
    out = tmp_path / "board"
    assert main(["board", "--results", str(folder), "--by", "mrr", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    board = pd.read_csv(out / "leaderboard.csv")
    assert list(board["dataset"].unique()) == ["locomo10", "longmemeval_s"]
    for _, rows in board.groupby("dataset"):
        assert list(rows["mrr"]) == sorted(rows["mrr"], reverse=True)  # sorted by the measure asked for
        assert list(rows["rank"]) == [1, 2]
        assert (rows["mrr_low"] < rows["mrr"]).all() and (rows["hit@1_high"] > rows["hit@1"]).all()
    harness = pd.read_csv(out / "harness.csv")
    assert set(zip(harness["dataset"], harness["variant"])) == {(d, v) for d in ("locomo10", "longmemeval_s")
                                                                for v in ("v0.8.0", "mine")}
    official = pd.read_csv(out / "official.csv")
    assert official.loc[0, "convention"] == "all_categories" and official.loc[0, "recall_any@5"] == 0.75
    paired = pd.read_csv(out / "paired.csv")
    assert set(paired["dataset"]) == {"locomo10", "longmemeval_s"} and set(paired["kind"]) == {"comparison", "pair"}
    for name in ("leaderboard", "harness", "official", "paired"):
        tex = (out / f"{name}.tex").read_text()
        assert tex.startswith("\\begin{tabular}") and "\\_" not in tex.splitlines()[0]
    assert "hit@1" in (out / "harness.tex").read_text() and "v0.8.0" in (out / "harness.tex").read_text()
    assert (out / "recall_at_k.locomo10.png").read_bytes()[:4] == b"\x89PNG"
    assert not (out / "recall_at_k.longmemeval_s.png").exists()  # no official figures there
    assert "locomo10:" in printed and "mrr 0." in printed


def test_sorted_by_recall_within_a_token_budget(folder, tmp_path, capsys):
    """--by recall_any@1024tok: the leaderboard in the order of official.json's budgets, with that column; an
    entry without session-grain budgets (v0.8.0 here, counted at turn grain: another gold) last."""
    for v, r, grain in (("v0.8.0", 0.9, "turn"), ("mine", 0.4, "session")):
        path = folder / "longmemeval_s" / v / "official.json"
        budgets = {"grain": grain, "budgets": [1024], "recall_any@1024tok": r}
        path.write_text(json.dumps({"dataset": "longmemeval_s", "variant": v, "grain": "session", "official": None,
                                    **({"budgets": budgets} if budgets else {})}))
    out = tmp_path / "board"
    assert main(["board", "--results", str(folder), "--by", "recall_any@1024tok", "--out", str(out)]) == 0
    assert "recall_any@1024tok 40.0%" in capsys.readouterr().out
    board = pd.read_csv(out / "leaderboard.csv")
    rows = board[board["dataset"] == "longmemeval_s"]
    assert list(rows["variant"]) == ["mine", "v0.8.0"] and list(rows["rank"]) == [1, 2]
    assert rows["recall_any@1024tok"].iloc[0] == 0.4 and pd.isna(rows["recall_any@1024tok"].iloc[1])
    with pytest.raises(SystemExit):
        main(["board", "--results", str(folder), "--by", "recall_any@1024"])
    assert "recall_any@{T}tok" in capsys.readouterr().err


def test_a_folder_with_nothing_on_it_is_one_line(tmp_path, capsys):
    (tmp_path / "results").mkdir()
    assert main(["board", "--results", str(tmp_path / "results")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("memobench: ") and "no variant's results" in err and len(err.splitlines()) == 1


def test_load_keeps_one_dataset(folder):
    res = memobench.load(folder, dataset="locomo10")
    assert set(res.metrics["dataset"]) == {"locomo10"}
    overall = res.metrics[res.metrics["question_type"].isna()]
    table = overall.pivot(index="variant", columns="metric", values="value")  # no duplicate entries
    assert sorted(table.index) == ["mine", "v0.8.0"]
    with pytest.raises(memobench.MemobenchError, match="no results of dataset 'nope'; it holds locomo10, "
                                                       "longmemeval_s"):
        memobench.load(folder, dataset="nope")


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"memobench {memobench.__version__}"
