"""The catalogue of bad inputs (README "Failure modes"): each gives a one-line
error naming the file, the item and what is wrong, or a skip counted by reason
where the original harness skips."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from tests.helpers import REPO
from memobench.core.config import validate
from memobench.core.errors import ConfigError
from memobench.core.errors import DataError
from memobench.evaluation.metrics import compute
from memobench.datasets.normalize import normalize_cn, normalize_locomo, normalize_longmemeval
from memobench.datasets.readers.longmemeval import scan_elements
from memobench.retrieval.memo import load_segment, run_segment
from memobench.catalog.variants import resolve


def item(qid, question="Where did we go hiking last spring?", sessions=None, ids=None, dates=None, gold=None, **extra):
    sessions = sessions if sessions is not None else [[{"role": "user", "content": "we went hiking in the alps"}],
                                                      [{"role": "user", "content": "dinner plans"}]]
    ids = ids if ids is not None else [f"{qid}_s{i}" for i in range(len(sessions))]
    dates = dates if dates is not None else ["2023/05/20 (Sat) 02:21"] * len(sessions)
    return {"question_id": qid, "question_type": "single-session-user", "question": question,
            "question_date": "2023/05/30 (Tue) 23:40", "haystack_session_ids": ids, "haystack_dates": dates,
            "haystack_sessions": sessions, "answer_session_ids": gold if gold is not None else ids[:1], **extra}


def lme_bytes(items) -> bytes:
    return json.dumps(items, ensure_ascii=False).encode()


def run(norm_dir, variant="v0.8.0", family="s"):
    qs, hs, corpus = load_segment(norm_dir / "questions.parquet", norm_dir / "haystacks.parquet",
                                  norm_dir / "events.parquet", 1, 1)
    rankings, outcomes = run_segment(resolve(variant, family), qs, hs, corpus, log=lambda m: None)
    return rankings.to_pylist(), compute(outcomes.to_pylist())


def one_line(e) -> str:
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_lme_truncated_mid_item(tmp_path):
    raw = tmp_path / "t.json"
    data = lme_bytes([item("q1"), item("q2"), item("q3")])
    raw.write_bytes(data[: len(data) - 40])
    with pytest.raises(DataError) as e:
        normalize_longmemeval(raw, tmp_path / "n", log=lambda m: None)
    msg = one_line(e)
    assert msg.startswith(f"{raw}: item 2: invalid or truncated JSON at byte {len(data) - 40} (end of file)")
    assert not list((tmp_path / "n").glob("*.parquet*"))


def test_m_stream_skips_an_element_that_does_not_parse_and_counts_it(tmp_path):
    raw = tmp_path / "m.json"
    good = [lme_bytes([item(f"q{i}")])[1:-1] for i in range(4)]
    bad = b'{"question_id": "qx", "question": tru}'  # the scanner emits it, JSON.parse fails
    raw.write_bytes(b"[" + b", ".join([good[0], bad, good[1], good[2]]) + b", " + good[3][:50])
    stats = normalize_longmemeval(raw, tmp_path / "n", log=lambda m: None, lenient=True)
    assert (stats["questions"], stats["unparseable_items"], stats.get("truncated_tail")) == (3, 1, 1)
    q = pq.read_table(tmp_path / "n" / "questions.parquet").to_pylist()
    assert [r["q_index"] for r in q] == [0, 1, 2, 3] and q[1]["parse_error"]
    _, m = run(tmp_path / "n", family="m")
    assert m["skipped"] == {"unparseable": 1} and m["questions"] == 3


def test_scanner_equals_ijson_on_well_formed_files(tmp_path):
    from memobench.tools.generate.longmemeval import write_longmemeval

    raw = tmp_path / "g.json"
    write_longmemeval(raw, n_questions=12, sessions_per_question=6, seed=4, spice=True)
    with open(raw, "rb") as f:
        elements = [json.loads(e) for e in scan_elements(f, chunk_size=4096)]
    assert elements == json.loads(raw.read_text())


def test_locomo_truncated_and_bad_utf8(tmp_path, locomo_path):
    raw = tmp_path / "l.json"
    raw.write_bytes(locomo_path.read_bytes()[:100_000])
    with pytest.raises(DataError) as e:
        normalize_locomo(raw, tmp_path / "n")
    # Python's parser names the start of the token it cannot finish
    start = locomo_path.read_bytes()[:100_000].rindex(b'"')
    assert one_line(e) == f"{raw}: invalid or truncated JSON: Unterminated string starting at byte {start}"
    raw.write_bytes(b'[{"conversation": {}, "qa": [], "x": "\xff"}]')
    with pytest.raises(DataError) as e:
        normalize_locomo(raw, tmp_path / "n")
    bad = raw.read_bytes().index(b"\xff")
    assert one_line(e) == f"{raw}: invalid UTF-8 at byte {bad} (invalid start byte)"


def test_lme_invalid_utf8(tmp_path):
    raw = tmp_path / "u.json"
    raw.write_bytes(lme_bytes([item("q1")]).replace(b"alps", b"alp\xff"))
    with pytest.raises(DataError) as e:
        normalize_longmemeval(raw, tmp_path / "n", log=lambda m: None)
    assert "item 0: invalid UTF-8" in one_line(e)


def test_cn_truncated_line_and_bad_utf8(tmp_path):
    base = tmp_path / "s.json"
    base.write_bytes(lme_bytes([item("q1")]))
    normalize_longmemeval(base, tmp_path / "sn", log=lambda m: None)
    cn = tmp_path / "cn.jsonl"
    cn.write_text('{"questionId": "q1_cn", "question": "徒步 alps?"}\n{"questionId": "q9_cn", "quest', encoding="utf-8")
    with pytest.raises(DataError) as e:
        normalize_cn(cn, tmp_path / "sn", tmp_path / "cn", log=lambda m: None)
    start = cn.read_bytes().rindex(b'"')
    assert one_line(e) == f"{cn}: line 2: invalid or truncated JSON: Unterminated string starting at byte {start}"
    cn.write_bytes(b'{"questionId": "q1_cn", "question": "\xff"}\n')
    with pytest.raises(DataError) as e:
        normalize_cn(cn, tmp_path / "sn", tmp_path / "cn", log=lambda m: None)
    bad = cn.read_bytes().index(b"\xff")
    assert one_line(e) == f"{cn}: line 1: invalid UTF-8 at byte {bad} (invalid start byte)"


def test_missing_or_wrong_fields(tmp_path):
    raw = tmp_path / "f.json"
    bad = item("q1")
    del bad["question"]
    raw.write_bytes(lme_bytes([item("q0"), bad]))
    with pytest.raises(DataError) as e:
        normalize_longmemeval(raw, tmp_path / "n", log=lambda m: None)
    assert one_line(e) == f"{raw}: item 1: field 'question' must be a string, got missing"
    # Wrong-typed lists behave as the harness's coercions do and end as counted skips.
    odd = item("q2", sessions=None)
    odd["haystack_sessions"] = "not a list"
    odd["question_type"] = 7
    raw.write_bytes(lme_bytes([item("q0"), odd, item("q3", gold="not a list")]))
    normalize_longmemeval(raw, tmp_path / "n2", log=lambda m: None)
    _, m = run(tmp_path / "n2")
    # q2 keeps its gold (the raw id list) but has no sessions; q3's answers, a
    # string, are its characters, none of them an id
    assert m["questions"] == 1 and m["skipped"] == {"no_gold": 1, "no_sessions": 1}


def test_unequal_haystack_lists_and_unparseable_dates(tmp_path):
    raw = tmp_path / "d.json"
    sessions = [[{"content": "alps hiking trip"}], [{"content": "x"}], [{"content": "y"}]]
    it = item("q1", sessions=sessions, ids=["a"], dates=["2023/13/01 (Mon) 10:00", "2023/02/30 (Thu) 12:00"], gold=["a"])
    raw.write_bytes(lme_bytes([it]))
    stats = normalize_longmemeval(raw, tmp_path / "n", log=lambda m: None)
    hay = pq.read_table(tmp_path / "n" / "haystacks.parquet").to_pylist()
    assert [h["session_id"] for h in hay] == ["a", "s1", "s2"]
    # month 13 fails -> (2 - 0) days; Feb 30 rolls into March; missing -> (2 - 2) days
    assert [h["date_fallback"] for h in hay] == [True, False, True]
    assert hay[0]["base_time"] == 2 * 86_400_000 and hay[2]["base_time"] == 0
    assert hay[1]["base_time"] == 1677758400000  # 2023-03-02T12:00Z
    assert stats["date_fallbacks"] == 2


def test_gold_comes_from_the_raw_id_list_not_the_sessions(tmp_path):
    """Every harness takes the gold from String() of the raw haystack_session_ids,
    while a session's id falls back to "s<i>" past the list's end or on null: an
    answer id with no session is gold (evaluated, a miss), a fallback id is not
    (skipped as no_gold), whatever the ranking would give it."""
    hit = [{"role": "user", "content": "we went hiking in the alps last spring"}]
    other = [{"role": "user", "content": "dinner plans"}]
    items = [
        item("longer", sessions=[other, hit], ids=["a", "b", "c"], gold=["c"]),  # "c" has no session
        item("shorter", sessions=[other, hit], ids=["a"], gold=["s1"]),  # session 1 is "s1", not gold
        item("null_gold", sessions=[other, hit], ids=["a", None], gold=[None]),  # gold "null", no session
        item("null_fallback", sessions=[other, hit], ids=["a", None], gold=["s1"]),
        item("shadow", sessions=[hit, other], ids=[None, "b", "s0"], gold=["s0"]),  # raw "s0" names session 0
        item("chars", sessions=[other, hit], ids=["x", "b"], gold="ab"),  # for-of a string: "a", "b"
        item("both", sessions=[other, hit], ids=["a", "b", "c"], gold=["c", "b", "c"]),
    ]
    items[0]["dates"] = items[0]["haystack_dates"] = ["2023/05/20 (Sat) 02:21"] * 3
    raw = tmp_path / "g.json"
    raw.write_bytes(lme_bytes(items))
    normalize_longmemeval(raw, tmp_path / "n", log=lambda m: None)
    gold = {q["question_id"]: q["gold"] for q in pq.read_table(tmp_path / "n" / "questions.parquet").to_pylist()}
    assert gold == {"longer": ["c"], "shorter": [], "null_gold": ["null"], "null_fallback": [],
                    "shadow": ["s0"], "chars": ["b"], "both": ["c", "b"]}
    for variant, family in [("v0.8.0", "s"), ("v0.8.0", "m"), ("v0.8.0-index", "s"), ("exp3-V6", "s"),
                            ("exp4m-base", "m")]:
        rankings, m = run(tmp_path / "n", variant, family)
        ctx = f"{variant}/{family}"
        assert m["skipped"] == {"no_gold": 2}, ctx
        # longer and null_gold: misses; shadow, chars, both: hits at 1
        assert (m["questions"], m["hit@1"], m["hit@10"]) == (5, 3, 3), ctx
        first = {r["question_id"]: r["session_id"] for r in rankings if r["rank"] == 1}
        assert first["shadow"] == "s0" and first["chars"] == "b" and first["longer"] == "b", ctx

    from memobench.evaluation.analyze import RECIPE, analyze_question
    from memobench.memo.engine import Ranker

    qs, hs, corpus = load_segment(tmp_path / "n" / "questions.parquet", tmp_path / "n" / "haystacks.parquet",
                                  tmp_path / "n" / "events.parquet", 1, 1)
    ranker = Ranker(corpus, RECIPE)
    rows = {q["question_id"]: analyze_question(ranker, corpus, hs[q["haystack_id"]], q["haystack_id"], q)
            for q in qs}
    assert rows["shorter"] is None and rows["null_fallback"] is None
    # analyze.cjs counts a gold id with no session among the gold sessions, with no events
    assert (rows["longer"]["gold_sessions"], rows["longer"]["gold_events"], rows["longer"]["cause"]) == \
        (1, 0, "no-anchor")
    assert (rows["both"]["gold_sessions"], rows["both"]["gold_events"], rows["both"]["rank"]) == (2, 1, 1)


def test_malformed_evidence_is_a_counted_skip(tmp_path, locomo_path):
    conv = json.loads(locomo_path.read_text())[0]
    conv["qa"] = conv["qa"][:3]
    conv["qa"][0]["evidence"] = ["D8:6; D9:17"]
    conv["qa"][1]["evidence"] = []
    raw = tmp_path / "l.json"
    raw.write_text(json.dumps([conv]))
    stats = normalize_locomo(raw, tmp_path / "n")
    assert stats["evidence_unmatched"] == 1
    _, m = run(tmp_path / "n", family="locomo")
    assert m["skipped"] == {"no_gold": 2} and m["questions"] == 1


def test_duplicate_ids_and_empty_questions(tmp_path):
    raw = tmp_path / "e.json"
    raw.write_bytes(lme_bytes([item("q1"), item("q1"), item("q2", question=""), item("q3", question="???")]))
    stats = normalize_longmemeval(raw, tmp_path / "n", log=lambda m: None)
    assert stats["duplicate_question_ids"] == 1
    rankings, m = run(tmp_path / "n")
    # both q1 items are ranked, told apart by q_index; empty questions count as misses (run.cjs)
    assert {r["q_index"] for r in rankings if r["question_id"] == "q1"} == {0, 1}
    assert m["questions"] == 4 and m["counted_as_miss"] == {"empty_seq": 2}
    _, m = run(tmp_path / "n", variant="exp3-V6")
    assert m["skipped"] == {"empty_seq": 2}


def test_a_10mb_turn(tmp_path):
    raw = tmp_path / "big.json"
    huge = ("filler words here " * 600_000)[:10_000_000] + " alps hiking"
    raw.write_bytes(lme_bytes([item("q1", sessions=[[{"content": huge}], [{"content": "hiking alone"}]])]))
    normalize_longmemeval(raw, tmp_path / "n", log=lambda m: None)
    rankings, m = run(tmp_path / "n")
    assert m["questions"] == 1 and rankings[0]["session_id"] in {"q1_s0", "q1_s1"}


def test_locomo_duplicate_sample_ids(tmp_path, locomo_path):
    convs = json.loads(locomo_path.read_text())[:4]
    convs[2]["sample_id"] = convs[0]["sample_id"]
    convs[3]["sample_id"] = "conv1"
    del convs[1]["sample_id"]  # read as conv1, as locomo.cjs names it
    raw = tmp_path / "l.json"
    raw.write_text(json.dumps(convs))
    with pytest.raises(DataError) as e:
        normalize_locomo(raw, tmp_path / "n", log=lambda m: None)
    first = convs[0]["sample_id"]
    assert one_line(e) == f"{raw}: duplicate sample_id: {first!r} (conversations 0, 2); 'conv1' (conversations 1, 3)"
    assert not (tmp_path / "n").exists() or not any((tmp_path / "n").iterdir())


def test_cn_rows_pairing_with_nothing(tmp_path, locomo_path):
    """haystacks_from naming a dataset without these questions (here LoCoMo)
    used to succeed with 0 questions."""
    normalize_locomo(locomo_path, tmp_path / "loc", log=lambda m: None)
    cn = tmp_path / "cn.jsonl"
    cn.write_text('{"questionId": "q1_cn", "question": "x"}\n{"questionId": "q2_cn", "question": "y"}\n')
    with pytest.raises(DataError) as e:
        normalize_cn(cn, tmp_path / "loc", tmp_path / "cn", log=lambda m: None)
    assert one_line(e).startswith(f"{cn}: none of its 2 rows pairs with a question of {tmp_path / 'loc'}")
    assert not any((tmp_path / "cn").iterdir())


def test_errors_leave_nothing_behind(tmp_path):
    """Every reader error removes what it had begun to write."""
    raw = tmp_path / "t.json"
    raw.write_bytes(lme_bytes([item("q1"), item("q2")]) + b" x")  # two good items, then garbage
    with pytest.raises(DataError):
        normalize_longmemeval(raw, tmp_path / "n", log=lambda m: None)
    assert not any((tmp_path / "n").iterdir())
    raw.write_bytes(lme_bytes([item("q1"), {"question_id": "q2"}]))
    with pytest.raises(DataError):
        normalize_longmemeval(raw, tmp_path / "n2", log=lambda m: None, lenient=True)
    assert not any((tmp_path / "n2").iterdir())


def test_an_error_names_an_item_with_control_characters_on_one_line():
    e = DataError("lme.json", "s\x00a\nqa 0", "what")
    assert str(e) == "lme.json: 's\\x00a\\nqa 0': what" and len(str(e).splitlines()) == 1
    assert str(DataError("f.json", "question é 1", "x")) == "f.json: question é 1: x"


TINY = REPO / ".test" / "data" / "lme_tiny.json"


def _retriever_config(params: str) -> str:
    """A config (YAML text) of the committed tiny file run by a user retriever with ``params``."""
    return (f"data_dir: {TINY.parent}\nrun: [tiny]\n"
            f"datasets:\n  tiny: {{format: longmemeval, file: {TINY.name}, bytes: {TINY.stat().st_size}, "
            f"variants: [v0.8.0, mine]}}\n"
            f"variants:\n  mine:\n    retriever:\n      callable: my.py:rank\n      params: {params}\n")


@pytest.mark.parametrize("params, why", [
    ("{since: 2024-01-01}", "params.since: a YAML date, which JSON cannot hold; quote it ('2024-01-01')"),
    ("{at: 2024-01-01 10:00:00}", "params.at: a YAML timestamp, which JSON cannot hold; quote it "
                                  "('2024-01-01 10:00:00')"),
    ("{tags: !!set {a, b}}", "params.tags: a YAML set (!!set), which JSON cannot hold; give a list"),
    ("{blob: !!binary aGVsbG8=}", "params.blob: YAML binary data (!!binary), which JSON cannot hold; give a string"),
    ("{1: x}", "params: key 1 is an integer, not a string; quote it ('1')"),
    ("{w: [1, .inf]}", "params.w.1: inf is not a JSON number; give a finite number"),
])
def test_params_json_cannot_hold_are_refused_by_the_config_check(params, why):
    """The params reach the job as JSON: a value JSON has no type for fails the check, naming the variant and key."""
    import yaml

    with pytest.raises(ConfigError) as e:
        validate(yaml.safe_load(_retriever_config(params)), REPO / "workflow" / "schemas" / "config.schema.yaml")
    assert one_line(e) == f"config: variants.mine.retriever.{why}"


