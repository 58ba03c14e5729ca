"""Imported runs read and checked without the workflow (src/memobench/retrieval/imported.py):
each bad run file is one line naming the file, the line and the fix; questions
absent from a run are counted misses; the skip rule and gold are the dataset's.
The data: a small generated LongMemEval file (the generator's edge cases, a
repeated question id, and one haystack that holds a session twice)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from memobench.evaluation import metrics
from memobench.core.errors import ConfigError, DataError
from memobench.retrieval.imported import ABSENT, import_segment
from memobench.runs.trec import _read_trec_columns, _read_trec_lines, read_id as decode_trec_id, trec_id
from memobench.datasets.normalize import normalize_longmemeval
from memobench.evaluation.official import scoring_id, user_target_sessions
from memobench.core.tables import read_table
from memobench.catalog.variants import resolve


@pytest.fixture(scope="module")
def lme(tmp_path_factory):
    """Normalized tables of a generated file; haystack 0 holds its first session twice."""
    root = tmp_path_factory.mktemp("imported_lme")
    raw = root / "lme.json"
    subprocess.run([sys.executable, "-m", "memobench.tools.generate", "longmemeval", "--out", str(raw), "--questions",
                    "24", "--sessions", "6", "--seed", "7", "--spice", "--words", "4", "20", "--quiet"], check=True)
    items = json.loads(raw.read_text(encoding="utf-8"))
    first = next(i for i, x in enumerate(items) if isinstance(x, dict) and x.get("haystack_session_ids")
                 and isinstance(x["haystack_session_ids"][0], str) and x.get("answer_session_ids"))
    for key in ("haystack_session_ids", "haystack_dates", "haystack_sessions"):
        items[first][key].append(items[first][key][0])
    raw.write_text(json.dumps(items), encoding="utf-8")
    out = root / "normalized"
    normalize_longmemeval(raw, out, log=lambda m: None)
    qs = read_table(out / "questions.parquet").sort_by("q_index").to_pylist()
    hay = read_table(out / "haystacks.parquet").sort_by([("haystack_id", "ascending"),
                                                         ("position", "ascending")]).to_pylist()
    ids: dict[int, list[str]] = {}
    for r in hay:
        ids.setdefault(r["haystack_id"], []).append(r["session_id"])
    return {"dir": out, "root": root, "questions": qs, "ids": ids, "dup": items[first]["question_id"]}


def variant(path, fmt):
    return resolve("theirs", "s", {"theirs": {"run": {"file": str(path), "format": fmt}}})


def imported(lme, path, fmt, segment=1, n_segments=1):
    d = lme["dir"]
    return import_segment(variant(path, fmt), path, d / "questions.parquet", d / "haystacks.parquet",
                          d / "events.parquet", "lme", segment, n_segments, log=lambda m: None)


def evaluated(lme, once=True):
    """Questions the s family's rule evaluates (gold, a haystack); ``once``:
    the first question of each id only."""
    seen, out = set(), []
    for q in lme["questions"]:
        if q["gold"] and q["haystack_id"] in lme["ids"] and not q["parse_error"]:
            if not (once and q["question_id"] in seen):
                out.append(q)
            seen.add(q["question_id"])
    return out


def trec(path: Path, rows) -> Path:
    path.write_text("".join(f"{q} Q0 {s} {r} {51 - r} theirs\n" for q, s, r in rows), encoding="utf-8")
    return path


def error(lme, path, fmt) -> str:
    with pytest.raises(DataError) as e:
        imported(lme, path, fmt)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{path}: ")
    return msg


def test_lists_counts_and_absent_questions_are_misses_in_the_denominator(lme, tmp_path):
    qs = evaluated(lme)
    listed, absent = qs[:-3], qs[-3:]
    # gold first for every listed question: hit@1 exactly the listed ones
    run = {q["question_id"]: [q["gold"][0]] + [s for s in lme["ids"][q["haystack_id"]] if s != q["gold"][0]][:3]
           for q in listed}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run), encoding="utf-8")
    (rankings, outcomes, deep, _), summary = imported(lme, path, "json")
    rows = {r["q_index"]: r for r in outcomes.to_pylist()}
    # the absent ones, and a repeated id's second question (the JSON names its first)
    missing = [q for q in evaluated(lme, once=False) if q["question_id"] not in run or q not in listed]
    assert len(missing) == len(absent) + 1
    for q in missing:
        r = rows[q["q_index"]]
        assert (r["status"], r["reason"], r["gold_rank"]) == ("evaluated", ABSENT, 0)
    m = metrics.compute(outcomes.to_pylist())
    assert m["counted_as_miss"] == {ABSENT: len(missing)}
    assert m["questions"] == len(listed) + len(missing) and m["hit@1"] == len(listed)
    # an empty list of its type, as a variant's empty list
    assert sum(b["questions"] for b in m["by_type"].values()) == m["questions"]
    assert summary["absent"] == len(missing) and summary["listed"] == len(listed)
    # the top 10 is the first 10 of the deep list, ranks from 1
    assert deep.num_rows == sum(len(v) for v in run.values()) == rankings.num_rows
    assert set(deep.column("rank").to_pylist()) == {1, 2, 3, 4}


def test_skipped_questions_are_the_family_rules_and_their_lists_are_ignored(lme, tmp_path):
    reference = resolve("v0.8.0", "s")
    from memobench.retrieval.harness import skip_reason

    skipped = [q for q in lme["questions"] if q["haystack_id"] in lme["ids"] and not q["gold"]]
    assert skipped, "the generated file has a question with no gold"
    q = skipped[0]
    path = tmp_path / "run.json"
    path.write_text(json.dumps({q["question_id"]: lme["ids"][q["haystack_id"]][:2]}), encoding="utf-8")
    (_, outcomes, deep, _), summary = imported(lme, path, "json")
    for row, qq in zip(outcomes.to_pylist(), lme["questions"]):
        hay = lme["ids"].get(qq["haystack_id"])
        want, _ = skip_reason("run", qq, type("H", (), {"ids": hay})() if hay else None, reference)
        assert (row["status"] == "skipped") == (want is not None) and (row["reason"] == want or want is None)
    assert summary["ignored"] == {"no_gold": 1} and deep.num_rows == 0


def test_a_session_listed_as_often_as_its_haystack_holds_it(lme, tmp_path):
    q = next(q for q in lme["questions"] if q["question_id"] == lme["dup"])
    ids = lme["ids"][q["haystack_id"]]
    twice = ids[0]
    assert ids.count(twice) == 2
    path = tmp_path / "run.json"
    path.write_text(json.dumps({q["question_id"]: [twice, twice]}), encoding="utf-8")
    (_, _, deep, _), _ = imported(lme, path, "json")
    assert deep.column("session_id").to_pylist() == [twice, twice]
    path.write_text(json.dumps({q["question_id"]: [twice, twice, twice]}), encoding="utf-8")
    msg = error(lme, path, "json")
    assert msg == (f"{path}: line 1: session {twice!r} is listed again for question {q['question_id']!r} (first at "
                   f"line 1) (its haystack holds it 2 times); list each session of the haystack once")


def test_a_repeated_question_id_takes_one_list_per_question(lme, tmp_path):
    rep = [q for q in lme["questions"] if [x["question_id"] for x in lme["questions"]].count(q["question_id"]) > 1]
    assert len(rep) >= 2, "the generated file repeats a question id"
    a, b = rep[0], rep[1]
    sa, sb = lme["ids"][a["haystack_id"]][0], lme["ids"][b["haystack_id"]][-1]
    path = tmp_path / "run.json"
    key = json.dumps(a["question_id"])
    path.write_text(f'{{{key}: ["{sa}"],\n {key}: ["{sb}"]}}', encoding="utf-8")
    (_, _, deep, _), _ = imported(lme, path, "json")
    got = {(r["q_index"], r["session_id"]) for r in deep.to_pylist()}
    assert got == {(a["q_index"], sa), (b["q_index"], sb)}
    path.write_text(f'{{{key}: ["{sa}"],\n {key}: ["{sb}"],\n {key}: []}}', encoding="utf-8")
    assert error(lme, path, "json") == (f"{path}: line 3: question {a['question_id']!r} is listed again (first at "
                                        f"line 1); give each question one list")


# --------------------------------------------------------------------------- bad files, one line each


def test_unknown_question_id(lme, tmp_path):
    q = evaluated(lme)[0]
    s = lme["ids"][q["haystack_id"]][0]
    path = trec(tmp_path / "run.trec", [(q["question_id"], s, 1), ("no-such-question", s, 1)])
    assert error(lme, path, "trec") == (f"{path}: line 2: question 'no-such-question' is not a question of dataset "
                                        f"'lme'; list only its questions (their question_id)")


def test_session_outside_the_questions_haystack(lme, tmp_path):
    q, other = evaluated(lme)[:2]
    mine, theirs = lme["ids"][q["haystack_id"]], lme["ids"][other["haystack_id"]]
    outside = next(s for s in theirs if s not in mine)
    path = trec(tmp_path / "run.trec", [(q["question_id"], mine[0], 1), (q["question_id"], outside, 2)])
    assert error(lme, path, "trec") == (
        f"{path}: line 2: session {outside!r} is not in the haystack of question {q['question_id']!r}; rank only "
        f"the question's own haystack sessions (its haystack_session_ids), by their ids")


def test_repeated_question_session_pair(lme, tmp_path):
    q = evaluated(lme)[0]
    ids = lme["ids"][q["haystack_id"]]
    once = next(s for s in ids if ids.count(s) == 1)
    path = trec(tmp_path / "run.trec", [(q["question_id"], once, 1), (q["question_id"], ids[-1], 2),
                                        (q["question_id"], once, 3)])
    assert error(lme, path, "trec") == (f"{path}: line 3: docno {once!r} is given twice for query "
                                        f"{q['question_id']!r} (lines 1 and 3); list each session once")
    path = tmp_path / "run.json"
    path.write_text(json.dumps({q["question_id"]: [once, once]}, indent=1), encoding="utf-8")
    assert error(lme, path, "json") == (f"{path}: line 4: session {once!r} is listed again for question "
                                        f"{q['question_id']!r} (first at line 3); list each session of the haystack "
                                        f"once")


@pytest.mark.parametrize("line, why", [
    ("q Q0 s 1 50", "has 5 fields, not 6; a TREC run line is 'qid Q0 docno rank score tag' (6 fields, "
                    "whitespace-separated)"),
    ("q Q0 s first 50 theirs", "rank 'first' is not an integer; a TREC run line is 'qid Q0 docno rank score tag' "
                               "(6 fields, whitespace-separated)"),
    ("q Q0 s 2 nan theirs", "score 'nan' is not a finite number; a TREC run line is 'qid Q0 docno rank score tag' "
                            "(6 fields, whitespace-separated)"),
    ("q Q0 s 2 49 other", "run tag 'other' differs from line 1's 'theirs'; give one run per file"),
    ("q Q0 s 1 49 theirs", "rank 1 is given twice for query 'q' (lines 1 and 2); give each line of a query its own "
                           "rank"),
    ("q Q0 s 2 60 theirs", "score 60 at rank 2 is above rank 1's 50 (line 1) for query 'q'; trec_eval orders by "
                           "score: give scores that fall as the rank grows"),
])
def test_malformed_trec_line(lme, tmp_path, line, why):
    q = evaluated(lme)[0]
    first = f"{q['question_id']} Q0 {lme['ids'][q['haystack_id']][0]} 1 50 theirs\n"
    path = tmp_path / "run.trec"
    qid = q["question_id"]
    path.write_text(first + line.replace("q ", f"{qid} ", 1).replace(" s ", " other-session ") + "\n",
                    encoding="utf-8")
    assert error(lme, path, "trec") == f"{path}: line 2: " + why.replace("'q'", repr(qid))


@pytest.mark.parametrize("text, line, why", [
    ('{"a": ["x"],\n "b": ["y"\n}', 3, "expected ',' or ']', found '}'"),
    ('{"a": "x"}', 1, "expected '[' (the list of question 'a'), found '\"'"),
    ('{"a": [1]}', 1, "expected a session id (a JSON string) or ']', found '1'"),
    ('{"a": ["x", 2]}', 1, "expected a session id (a JSON string) in the list of question 'a', found '2'"),
    ('["a"]', 1, "expected '{' (the run's object), found '['"),
    ('{"a": []}\n{}', 2, "text after the run's object"),
])
def test_malformed_json(lme, tmp_path, text, line, why):
    path = tmp_path / "run.json"
    path.write_text(text, encoding="utf-8")
    assert error(lme, path, "json") == (f"{path}: line {line}: {why}; a JSON run is one object "
                                        f"{{question_id: [session_id, ...]}}")


def test_malformed_retrieval_log_lines(lme, tmp_path):
    q = evaluated(lme)[0]
    good = json.dumps({"question_id": q["question_id"], "retrieval_results": {
        "query": "?", "ranked_items": [{"corpus_id": lme["ids"][q["haystack_id"]][0]}]}})
    fix = ("a retrieval-log line is one JSON object with question_id and retrieval_results.ranked_items, each item "
           "with its corpus_id")
    path = tmp_path / "run.jsonl"
    cut = '{"question_id": "x", '
    for bad, why in ((cut, f"is not one JSON object (Expecting property name enclosed in double quotes at "
                           f"character {len(cut) + 1})"),
                     (json.dumps({"question_id": "x"}), "has no retrieval_results.ranked_items list"),
                     (json.dumps({"retrieval_results": {"ranked_items": []}}), "has no question_id string"),
                     (json.dumps({"question_id": q["question_id"], "retrieval_results": {"ranked_items": [{}]}}),
                      f"ranked item 1 of question {q['question_id']!r} has no corpus_id string")):
        path.write_text(good + "\n\n" + bad + "\n", encoding="utf-8")
        assert error(lme, path, "retrievallog") == f"{path}: line 3: {why}; {fix}"


def test_a_file_that_matches_none_of_the_datasets_questions(lme, tmp_path):
    path = trec(tmp_path / "run.trec", [("conv-26#0", "session_1", 1), ("conv-26#0", "session_2", 2)])
    assert error(lme, path, "trec") == (f"{path}: line 1: names none of dataset 'lme''s questions (this line names "
                                        f"'conv-26#0'); is it a run of another dataset? score it against that "
                                        f"dataset")
    path.write_text("\n", encoding="utf-8")
    assert error(lme, path, "trec") == f"{path}: holds no ranked lists; give the run of dataset 'lme' in format trec"


def test_a_retrieval_log_gives_scoring_ids_and_a_turn_id_is_named(lme, tmp_path):
    targets = user_target_sessions(lme["dir"] / "events.parquet")
    hay = read_table(lme["dir"] / "haystacks.parquet").to_pylist()
    renamed = next(r for r in hay if "answer" in r["session_id"] and r["session_key"] not in targets)
    q = next(q for q in evaluated(lme) if q["haystack_id"] == renamed["haystack_id"])
    cid = scoring_id(renamed["session_id"], False)
    assert "noans" in cid

    def log(ids):
        return json.dumps({"question_id": q["question_id"], "question": "?",
                           "retrieval_results": {"query": "?", "ranked_items": [{"corpus_id": c} for c in ids]}})

    path = tmp_path / "run.jsonl"
    path.write_text(log([cid]) + "\n", encoding="utf-8")
    (_, _, deep, _), _ = imported(lme, path, "retrievallog")
    assert deep.column("session_id").to_pylist() == [renamed["session_id"]]
    path.write_text(log([f"{renamed['session_id']}_3"]) + "\n", encoding="utf-8")
    assert "(a turn id: give the session-level ranking)" in error(lme, path, "retrievallog")


def test_segments_split_the_questions_and_check_the_whole_file(lme, tmp_path):
    qs = evaluated(lme)
    path = tmp_path / "run.json"
    path.write_text(json.dumps({q["question_id"]: lme["ids"][q["haystack_id"]][:1] for q in qs}), encoding="utf-8")
    parts = [imported(lme, path, "json", s, 2) for s in (1, 2)]
    assert sum(p[0][1].num_rows for p in parts) == len(lme["questions"])
    assert sum(p[1]["listed"] for p in parts) == len(qs)


def test_trec_by_columns_reads_what_the_line_reader_reads(lme):
    """The columnar TREC reader (single spaces, no blank line) gives the line
    reader's lists, queries interleaved and out of rank order; any other
    spacing, or a line the rules refuse, goes to the line reader."""
    rows = []
    for q in evaluated(lme)[:6]:
        for r, s in enumerate(dict.fromkeys(lme["ids"][q["haystack_id"]]), 1):
            rows.append(f"{q['question_id']} Q0 {s} {r} {10.5 - r} run-1")
    rows = rows[1::2] + rows[::2]
    text = "\n".join(rows) + "\n"

    def no_error(line, what):
        raise AssertionError(f"line {line}: {what}")

    by_lines = _read_trec_lines(text, no_error)
    assert _read_trec_columns(text.encode(), text) == by_lines
    assert [len(e[2]) for e in by_lines] == [len(set(lme["ids"][q["haystack_id"]])) for q in evaluated(lme)[:6]]
    for other in (text.replace(" Q0 ", "\tQ0 "), text.replace(" Q0 ", "  Q0 "), text + "\n", "\n" + text,
                  text.replace(" 3 7.5 ", " 3 nan "), rows[0] + "\n" + rows[0] + "\n"):
        assert _read_trec_columns(other.encode(), other) is None
    assert _read_trec_lines(text.replace(" Q0 ", "\tQ0 "), no_error) == by_lines


def test_the_trec_decode_hook(tmp_path):
    """A token without "%" is never decoded; an encoded id (as runs.trec
    writes it) reads back."""
    assert decode_trec_id("session_1") == ("session_1", 1)
    assert decode_trec_id("50%off") == ("50%off", 1)  # not an encoding: the id itself
    assert decode_trec_id(trec_id("a b", 2)) == ("a b", 2)


def test_config_errors_are_one_line():
    with pytest.raises(ConfigError, match="a retrieval log is LongMemEval's format; a dataset of family 'locomo'"):
        resolve("x", "locomo", {"x": {"run": {"file": "f", "format": "retrievallog"}}})
    with pytest.raises(ConfigError, match="an imported run takes no base"):
        resolve("x", "s", {"x": {"run": {"file": "f", "format": "trec"}, "base": "v0.8.0"}})
    with pytest.raises(ConfigError, match="give base .*, run .* or fuse"):
        resolve("x", "s", {"x": {"description": "?"}})
    v = resolve("x", "s", {"x": {"run": {"file": "f", "format": "trec"}, "against": "v0.5.0"}})
    assert (v.baseline, v.skip, v.run) == ("v0.5.0", "run", {"file": "f", "format": "trec"})


def test_the_score_command_reads_the_format_from_the_file(tmp_path):
    from memobench.score_engine import sniff

    cases = {"run.txt": "q Q0 s 1 1 t\n", "run.json": '\n{\n "q": ["s"]\n}\n', "flat.json": '{"q": ["s"]}',
             "log.jsonl": json.dumps({"question_id": "q", "retrieval_results": {"ranked_items": []}}) + "\n{}\n"}
    for name, text in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    assert {n: sniff(tmp_path / n) for n in cases} == {"run.txt": "trec", "run.json": "json", "flat.json": "json",
                                                       "log.jsonl": "retrievallog"}


def test_a_byte_order_mark_is_no_part_of_the_text_and_an_array_is_json(lme, tmp_path):
    """A UTF-8 BOM (which RFC 8259 lets a JSON reader ignore) before a JSON
    run, a retrieval log or a TREC run: read as the file without it, under
    the sha256 of the file's own bytes; a JSON array is read as JSON and
    refused as such, in one line."""
    from memobench.score_engine import sniff

    qs = evaluated(lme)[:3]
    lists = {q["question_id"]: lme["ids"][q["haystack_id"]][:2] for q in qs}
    log = "".join(json.dumps({"question_id": q, "retrieval_results": {"ranked_items": [{"corpus_id": c} for c in ids]}})
                  + "\n" for q, ids in lists.items())
    texts = {"json": json.dumps(lists), "retrievallog": log,
             "trec": "".join(f"{q} Q0 {sid} {r} {9 - r} t\n" for q, ids in lists.items() for r, sid in enumerate(ids, 1))}
    for fmt, text in texts.items():
        plain, marked = tmp_path / f"plain.{fmt}", tmp_path / f"bom.{fmt}"
        plain.write_text(text, encoding="utf-8")
        marked.write_bytes(b"\xef\xbb\xbf" + text.encode())
        assert sniff(marked) == fmt
        (a, _, deep_a, _), _ = imported(lme, plain, fmt)
        (b, _, deep_b, _), summary = imported(lme, marked, fmt)
        assert deep_a.to_pylist() == deep_b.to_pylist() and deep_b.num_rows == 6
        assert (summary["bytes"], summary["sha256"]) == (3 + len(text.encode()),
                                                         hashlib.sha256(marked.read_bytes()).hexdigest())
    array = tmp_path / "array.json"
    array.write_bytes(b"\xef\xbb\xbf" + json.dumps([lists]).encode())
    assert sniff(array) == "json"
    assert error(lme, array, "json") == (f"{array}: line 1: expected '{{' (the run's object), found '['; a JSON run "
                                         f"is one object {{question_id: [session_id, ...]}}")


def test_segments_check_the_bytes_they_read_against_the_runs_record(lme, tmp_path):
    """A segment reads the file the run recorded (record_run's sha256) or
    fails in one line; merge never joins segments that read different files."""
    import pyarrow as pa

    q = evaluated(lme)[0]
    path = tmp_path / "run.json"
    path.write_text(json.dumps({q["question_id"]: lme["ids"][q["haystack_id"]][:1]}), encoding="utf-8")
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    record = tmp_path / "run-file.json"
    record.write_text(json.dumps({"file": str(path), "bytes": path.stat().st_size, "sha256": sha}), encoding="utf-8")
    d = lme["dir"]

    def segment():
        return import_segment(variant(path, "json"), path, d / "questions.parquet", d / "haystacks.parquet",
                              d / "events.parquet", "lme", 1, 1, log=lambda m: None, record=record)

    assert segment()[1]["sha256"] == sha
    path.write_text(json.dumps({q["question_id"]: []}), encoding="utf-8")
    now = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(DataError) as e:
        segment()
    assert str(e.value) == (f"{path}: its sha256 is {now}, not the {sha} recorded in {record} before the run's "
                            f"segments read it: the file changed while it was scored; rerun to score it as it is now")
    tables = [pa.table({"q_index": [i]}).replace_schema_metadata(
        {metrics.IMPORTED_KEY: json.dumps({"sha256": s, "listed": 1, "absent": 0, "truncated": 0, "ignored": {}})})
        for i, s in enumerate((sha, now))]
    with pytest.raises(DataError, match=rf"^run.json: its segments read different files \(sha256 {sha[:12]}, "
                                        rf"{now[:12]}\); rerun to score the file as it is now$"):
        metrics.imported_summary(tables, "run.json")
    assert metrics.imported_summary(tables[:1] * 2, "run.json")["listed"] == 2


def test_a_turn_run_maps_turn_ids_and_names_a_foreign_turn_in_one_line(lme, tmp_path):
    """A turn run (grain: turn) names turns: {session_id}_{index + 1}; a repeated session's turn id twice is
    its two copies; an id that is no turn of the haystack is one line naming the file, line and question."""
    from memobench.retrieval.turns import TURNS

    d = lme["dir"]
    q = next(q for q in lme["questions"] if q["question_id"] == lme["dup"])
    sid = lme["ids"][q["haystack_id"]][0]  # held twice by this haystack
    events = read_table(d / "events.parquet").to_pylist()
    key = next(r["session_key"] for r in read_table(d / "haystacks.parquet").to_pylist()
               if r["haystack_id"] == q["haystack_id"] and r["position"] == 0)
    user = [e["seq"] for e in events if e["session_key"] == key and e["role"] == "user"]
    tid = f"{sid}_{user[0] + 1}"
    v = resolve("theirs", "s", {"theirs": {"run": {"file": "x", "format": "json"}, "grain": "turn"}})
    path = tmp_path / "turns.json"
    path.write_text(json.dumps({q["question_id"]: [tid, tid]}), encoding="utf-8")
    (_, _, deep, turns), _ = import_segment(v, path, d / "questions.parquet", d / "haystacks.parquet",
                                            d / "events.parquet", "lme", 1, 1, log=lambda m: None, fmt="longmemeval")
    assert turns.schema == TURNS
    mine = [r for r in turns.to_pylist() if r["question_id"] == q["question_id"]]
    assert [(r["turn_id"], r["rank"]) for r in mine] == [(tid, 1), (tid, 2)]
    assert mine[0]["position"] != mine[1]["position"]  # the two copies, each once
    path.write_text(json.dumps({q["question_id"]: [tid, f"{sid}_999"]}), encoding="utf-8")
    with pytest.raises(DataError) as e:
        import_segment(v, path, d / "questions.parquet", d / "haystacks.parquet", d / "events.parquet", "lme", 1, 1,
                       log=lambda m: None, fmt="longmemeval")
    assert str(e.value).startswith(f"{path}: line 1: turn '{sid}_999' is not a turn of the haystack of question "
                                   f"'{q['question_id']}'; a turn run names turns by their ids")
