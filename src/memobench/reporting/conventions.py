"""The official metrics by averaging convention beside the published
official-metric figures, each with the protocol it was published under."""

from __future__ import annotations

from ..core.doc import Code, Heading, Para, Strong, Table
from ..evaluation.measures import HITS, MEASURES, OFFICIAL_MEASURES
from ..evaluation.official import LOCOMO_CATEGORIES
from ..evaluation.published import DATA_FILES, HARNESS_PROTOCOL, PUBLISHED_OFFICIAL, REFERENCE, published
from .labels import is_locomo, is_imported, label
from .numbers import percent


def comparable_to(m: dict, dataset: str, convention: str, n) -> str:
    """The published figure a run's convention row can be compared with, or
    why a figure of the same system is not ("" when none is near)."""
    recipe = m.get("recipe") or {}
    for pub in PUBLISHED_OFFICIAL:
        if (pub["dataset"] != dataset or pub["convention"] != convention or is_imported(m)
                or any(recipe.get(k) != v for k, v in pub["match"].items())):
            continue
        mine = (m.get("data_file") or {}).get("known")
        if mine != pub["file"]:
            their_file = DATA_FILES[pub["file"]]["label"]
            ours = (m.get("data_file") or {}).get("label") or "not recorded (no results/manifest.json)"
            return f"not comparable: {pub['source']} used {their_file}; this run's file: {ours}"
        grain, theirs = m.get("grain", "session"), pub.get("grain", "session")
        if grain != theirs:
            return (f"not comparable: {pub['source']} ranked {theirs}s; this run ranked {grain}s (its sessions read "
                    f"at their best turn)" if grain == "turn" else
                    f"not comparable: {pub['source']} ranked {theirs}s; this run ranked {grain}s")
        if n != pub["questions"]:
            return f"not comparable: same protocol as {pub['source']}, but n {n} (it: {pub['questions']})"
        return f"comparable: {pub['source']}"
    return ""


def convention_rows(runs: list[dict]) -> list[list]:
    rows = []
    for m in runs:
        convs = (m.get("official") or {}).get("conventions") or {}
        for name, c in convs.items():
            exc = ", ".join(f"{k} {v}" for k, v in c.get("excluded", {}).items()) or "-"
            mark = comparable_to(m, m["dataset"], name, c["questions"])
            rows.append([m["dataset"], label(m), Code(name), c["questions"], exc,
                         *(percent(c.get(k)) if k in c else "-" for k in OFFICIAL_MEASURES),
                         Strong(mark) if mark.startswith("comparable") else mark or "-"])
    return rows


def published_rows(runs: list[dict]) -> list[list]:
    """The published figures of the datasets in ``runs`` (another dataset's figure has no run to be read beside)."""
    rows = []
    present = {m["dataset"] for m in runs}
    for pub in PUBLISHED_OFFICIAL:
        if pub["dataset"] not in present:
            continue
        values = "; ".join(f"{k} {percent(v)}" for k, v in pub["values"].items())
        ours = [label(m) for m in runs if m["dataset"] == pub["dataset"]
                and comparable_to(m, pub["dataset"], pub["convention"],
                                  (((m.get("official") or {}).get("conventions") or {}).get(pub["convention"])
                                   or {}).get("questions", -1)).startswith("comparable")]
        rows.append([pub["source"], pub["system"], pub["dataset"], pub["protocol"],
                     Code(pub["convention"]), pub["questions"], values,
                     Strong("comparable: " + ", ".join(ours)) if ours else "no run here under its protocol"])
    for ds in sorted({m["dataset"] for m in runs}):
        pub = published(ds, REFERENCE)
        hits = "; ".join(f"{k} {pub[k]}%" for k in HITS if k in pub)
        if hits:
            if "mrr" in pub:
                hits += f"; MRR {pub['mrr']}"
            ref = next((m for m in runs if m["dataset"] == ds and m["variant"] == REFERENCE), None)
            rows.append([f"Memo {REFERENCE} (benchmark guide)", "Memo", ds, harness_protocol(runs, ds), "-",
                         ref["questions"] if ref else "-", hits,
                         "not an official convention: compare in the Harness metrics table"])
    return rows


def harness_protocol(runs: list[dict], ds: str) -> str:
    """What the Memo harness's published figures of ``ds`` count: the gold a hit is of, per format
    (LoCoMo's is the sessions of the question's evidence, LongMemEval's its answer_session_ids)."""
    if any(m["dataset"] == ds and is_locomo(m) for m in runs):
        return ("Memo harness (locomo.cjs): hit@k, a gold session (a session holding one of the question's "
                "evidence turns) in the top k, and MRR of the first one in the top 10, over the questions the "
                "harness evaluates (those with evidence)")
    return HARNESS_PROTOCOL + ", and MRR of the first one in the top 10"


def data_file_blocks(runs: list[dict]) -> list:
    """Each dataset's raw file (results/manifest.json) and which published release it is."""
    rows, seen = [], set()
    for m in runs:
        f = m.get("data_file")
        if not f or m["dataset"] in seen:
            continue
        seen.add(m["dataset"])
        how = {"sha256": "by its sha256", "bytes": "by its byte count"}.get(f["matched_by"], "")
        rows.append([m["dataset"], Code(f["file"]), f"{f['bytes']:,}", Code((f["sha256"] or "-")[:16]),
                     f"{f['label']} ({how})" if how else f["label"]])
    if not rows:
        return []
    return [Heading(3, "Data files"),
            Para("The same retriever scores differently on another release of a dataset (LongMemEval's authors "
                 "later released cleaned files): a figure is comparable only with runs on its own file."),
            Table(["dataset", "file", "bytes", "sha256 (first 16)", "what it is"], rows, left=(0, 1, 3, 4))]


def convention_blocks(runs: list[dict]) -> list:
    """Each run's official metrics under every averaging convention (official.json's
    ``conventions``), beside the published official-metric figures and the
    protocol each was published under; a figure is marked comparable only to
    a run of the same system, convention and question count."""
    rows = convention_rows(runs)
    if not rows:
        return []
    names14 = ", ".join(f"{c} {LOCOMO_CATEGORIES[c]}" for c in ("1", "2", "3", "4"))
    return [Heading(2, "Official metrics by convention", anchor="conventions"),
            Para(["The same per-question official metrics averaged over the question sets the field quotes: ",
                  Code("run_retrieval"), " (LongMemEval's run_retrieval.py: abstention and no-user-target "
                  "questions left out; the Official metrics table), ", Code("print_retrieval_metrics"),
                  " (its print_retrieval_metrics.py, which printed the paper's tables: abstentions only, a "
                  "no-user-target question counting with recall_any 0, recall_all 1, ndcg_any 0), LoCoMo's ",
                  Code("all_categories"), " and ", Code("categories_1_4"), f" ({names14}: the memory-system "
                  "convention of mem0's evaluation, adversarial 5 left out). recall_any@k is not recall_all@k: "
                  "quote each under its own name and convention."]),
            Table(["dataset", "variant", "convention", "n", "excluded",
                   *(MEASURES[k].label for k in OFFICIAL_MEASURES), "published figure"],
                  rows, left=(0, 1, 2, 4, 11)),
            *data_file_blocks(runs), *published_blocks(runs)]


def published_blocks(runs: list[dict]) -> list:
    """The published figures of the report's datasets, each with its protocol (none: no section)."""
    rows = published_rows(runs)
    if not rows:
        return []
    return [Heading(3, "Published figures"),
            Para("The published figures of this report's datasets, each with the protocol it was published under. "
                 "A figure is comparable only to a run of the same system, ranking the same grain, on the same "
                 "data file, under the same convention over the same number of questions; memory-system LoCoMo "
                 "evaluations report over categories 1-4, so compare them with categories_1_4."),
            Table(["source", "system", "dataset", "protocol", "convention", "n", "figures", "comparable"],
                  rows, left=(0, 1, 2, 3, 4, 6, 7))]


# LongMemEval's printed figures (print_retrieval_metrics.py), at each grain of a turn variant
TURN_FIGURES = ("recall_all@5", "ndcg_any@5", "recall_all@10", "ndcg_any@10")
LOCOMO_TURN_FIGURES = ("recall@5", "recall@10", "recall_all@5", "recall_all@10")


def turn_blocks(runs: list[dict]) -> list:
    """The turn variants' figures at both grains (official.json's ``turn``):
    LongMemEval's scoring of a turn ranking, each figure under its grain;
    nothing when no run ranked turns (the report is then as before)."""
    rows, locomo = [], []
    for m in runs:
        t = m.get("turn")
        if not t:
            continue
        over = t["harness_over_turns"]
        if "turn2session" not in t:  # LoCoMo: evidence turns
            c14 = t["conventions"]["categories_1_4"]
            locomo.append([m["dataset"], label(m), t["questions"], f"{t['turns_per_question']:.1f}",
                           *(percent(t.get(k)) for k in LOCOMO_TURN_FIGURES), percent(c14.get("recall@10")),
                           c14["questions"], percent(over.get("hit@5"))])
            continue
        exc = ", ".join(f"{k} {v}" for k, v in t["excluded"].items()) or "-"
        rows.append([m["dataset"], label(m), t["questions"], exc, f"{t['turns_per_question']:.1f}",
                     *(percent(t.get(k)) for k in TURN_FIGURES),
                     *(percent(t["turn2session"].get(k)) for k in TURN_FIGURES),
                     percent(over.get("hit@5")), over["questions"]])
    if not rows and not locomo:
        return []
    out = [Heading(2, "Turn level", anchor="turn-level")]
    if locomo:
        out += [Para(["LoCoMo variants that rank turns: gold is each question's evidence turns (its ",
                      Code("evidence"), " dia_ids); evidence-turn recall@k is the share of them among the first k "
                      "turns, recall_all@k 1 when all are; turn hit@5 the first one in the top 5 turns. The other "
                      "tables score these variants' sessions at their best turn (docs/protocol.md#turn-level)."]),
                Table(["dataset", "variant", "n", "turns per question",
                       *(f"turn {k}" for k in LOCOMO_TURN_FIGURES), "turn recall@10, categories 1-4", "n 1-4",
                       "turn hit@5"], locomo, left=(0, 1))]
    if not rows:
        return out
    return out + [
        Para(["Variants that rank turns (", Code("grain: turn"), "), scored as LongMemEval's run_retrieval.py "
              "scores a turn ranking (", Code("run_retrieval"), " convention). ", Strong("turn"),
              ": over the question's turn documents, gold its evidence turns (a user turn with has_answer in "
              "an answer session); ", Strong("turn2session"), ": LongMemEval's session figures from the turn "
              "ranking (k grown until k distinct sessions); turn hit@5: the first evidence turn in the top 5 "
              "turns, over the questions with one. The other tables score these variants' sessions at their "
              "best turn. A turn figure is not a session figure: quote each with its grain "
              "(docs/protocol.md#turn-level)."]),
        Table(["dataset", "variant", "n", "excluded", "turns per question",
               *(f"turn {k}" for k in TURN_FIGURES), *(f"turn2session {k}" for k in TURN_FIGURES),
               "turn hit@5", "n with turn gold"], rows, left=(0, 1, 3))]

