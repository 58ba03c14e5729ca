"""normalize reads a large LongMemEval file in parts, one per core
(datasets/inparts.py): the tables must be the bytes of one pass, with every
quirk real files hold (session ids repeated inside a haystack, sessions
shared across items and parts, abstention questions, escaped non-ASCII,
surrogate pairs, lone surrogates and NULs in texts); a file whose parts do not
each read on their own (a cut inside a nested object, malformed JSON, a
bound of the guard, a lone surrogate in an id) must give exactly what one
pass gives, error message included; nothing of the workers may be left."""

from __future__ import annotations

import json
import threading

import pytest

from memobench import plan
from memobench.datasets import inparts as parts
from memobench.datasets import normalize as nz
from memobench.datasets import store
from memobench.core.errors import DataError
from memobench.stages.adapter import load_stage, run_logged
from memobench.core.tables import escape_lone

TABLES = ("questions", "haystacks", "sessions", "events")
POOL = [  # session texts; the first ones shared by many items
    "I moved to Lisbon in May and started a pottery class.",
    "caf\u00e9 au lait at the \u6771\u4eac office \u2014 na\u00efve r\u00e9sum\u00e9",
    "emoji \U0001F600 and \U0001F389 for the party on 2023/05/20",
    "a lone \ud800 surrogate and a NUL \x00 inside the text",
    "\u4f60\u597d\uff0c\u6211\u7684\u732b\u53eb\u5c0f\u767d\u3002",
    "plain words about hiking boots, the red ones, size 42",
]


def _session(j: int, turns: int = 4) -> list[dict]:
    text = POOL[j % len(POOL)]
    return [{"role": "user" if k % 2 == 0 else "assistant", "content": f"{text} (turn {k} of {j})",
             **({"has_answer": True} if j % 5 == 0 and k == 1 else {})} for k in range(turns)]


def _items(n: int = 60, per: int = 12) -> list[dict]:
    items = []
    for i in range(n):
        picks = [(i * 3 + j) % 40 for j in range(per)]
        picks.append(picks[0])  # a session id repeated inside its haystack, as real S files hold
        ids = [f"answer_{p}" if p % 5 == 0 else f"noans_{p}" if p % 7 == 0 else f"s_{p}" for p in picks]
        abstention = i % 9 == 4
        items.append({
            "question_id": f"q{i:03d}" + ("_abs" if abstention else ""),
            "question_type": ["single-session-user", "temporal-reasoning", "multi-session"][i % 3],
            "question": f"What did I say about item {i}? caf\u00e9 \U0001F600",
            "answer": "unknown" if abstention else [f"answer {i}", i],
            "question_date": "2023/05/30 (Tue) 23:40",
            "haystack_session_ids": ids,
            "haystack_dates": ["2023/05/%02d (Sat) 02:21" % (1 + p % 28) for p in picks],
            "haystack_sessions": [_session(p) for p in picks],
            "answer_session_ids": [] if abstention else [x for x in ids if x.startswith("answer_")][:2],
        })
    return items


def _write(path, items, ensure_ascii=True) -> None:
    """As JSON, its non-ASCII escaped or as UTF-8 (a lone surrogate escaped either way)."""
    path.write_text(escape_lone(json.dumps(items, ensure_ascii=ensure_ascii)), encoding="utf-8")


@pytest.fixture()
def small_parts(monkeypatch):
    """Parts of any size, and row groups of 64 rows (many of them cut across the parts)."""
    monkeypatch.setattr(parts, "PART_MIN_BYTES", 1)
    monkeypatch.setattr(store._BehindWriter.__init__, "__defaults__", (64,))
    assert threading.active_count() == 1, "a thread left running by an earlier test stops normalize from forking"


def _normalize(path, out, workers, **options):
    logged: list[str] = []
    stats = nz.normalize_longmemeval(path, out, log=logged.append, workers=workers, **options)
    return stats, {t: (out / f"{t}.parquet").read_bytes() for t in TABLES}, logged


def _read_in_parts(logged) -> bool:
    return any("parts read at once" in line for line in logged) and not any("one pass" in line for line in logged)


@pytest.mark.parametrize("workers", [2, 3, 4])
@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_parts_give_the_bytes_of_one_pass(tmp_path, small_parts, workers, ensure_ascii):
    raw = tmp_path / "lme.json"
    _write(raw, _items(), ensure_ascii)
    one = _normalize(raw, tmp_path / "one", 1)
    many = _normalize(raw, tmp_path / "many", workers)
    assert not _read_in_parts(one[2]) and _read_in_parts(many[2])
    assert sum("items appended" in line for line in many[2]) == workers - 1
    assert many[0] == one[0]
    assert one[0]["sessions"] < one[0]["questions"] * 13  # sessions shared across items (and parts) stored once
    for t in TABLES:
        assert many[1][t] == one[1][t], t
    assert not list((tmp_path / "many").glob(".normalize-parts-*"))  # the workers' files are gone


def test_a_killed_jobs_workers_files_are_removed(tmp_path, small_parts):
    raw = tmp_path / "lme.json"
    _write(raw, _items(20))
    stale = tmp_path / "out" / ".normalize-parts-killed"
    (stale / "part2").mkdir(parents=True)
    (stale / "part2" / "events.arrow").write_bytes(b"x" * 1000)
    assert _read_in_parts(_normalize(raw, tmp_path / "out", 2)[2])
    assert not stale.exists()


def test_duplicate_question_ids_are_counted_across_parts(tmp_path, small_parts):
    items = _items(40)
    for i in range(20, 40, 4):
        items[i]["question_id"] = items[i - 20]["question_id"]  # its first sight in the first part
    raw = tmp_path / "lme.json"
    _write(raw, items)
    one, many = _normalize(raw, tmp_path / "one", 1), _normalize(raw, tmp_path / "many", 2)
    assert _read_in_parts(many[2])
    assert one[0]["duplicate_question_ids"] == 5 and many[0] == one[0]
    assert many[1] == one[1]


def test_a_cut_inside_a_nested_object_reads_in_one_pass(tmp_path, small_parts):
    items = _items(20)
    # the middle item's answer nests objects that begin like an item: the cut lands in one of them
    items[10]["answer"] = [{"question_id": f"nested{k}", "note": "x" * 40} for k in range(4000)]
    raw = tmp_path / "lme.json"
    _write(raw, items)
    cut = parts.cut_points(raw, 2)[0]
    head = raw.read_bytes()[:cut]
    assert head.count(b'{"question_id": "nested') > 0  # the cut is inside the nested list
    one, many = _normalize(raw, tmp_path / "one", 1), _normalize(raw, tmp_path / "many", 2)
    assert any("reading the file in one pass instead" in line for line in many[2])
    assert many[0] == one[0] and many[1] == one[1]
    assert not list((tmp_path / "many").glob(".normalize-parts-*"))


def test_a_first_part_without_items_is_not_an_empty_array(tmp_path, small_parts):
    body = json.dumps(_items(1))[1:-1]
    raw = tmp_path / "bad.json"
    raw.write_text("[" + " " * (len(body) + 100) + "," + body + "]", encoding="utf-8")  # a comma before any item
    assert parts.cut_points(raw, 2) == [len(body) + 101]
    logged = _same_error_as_one_pass(raw, tmp_path)
    assert any("no item before the first cut" in line for line in logged)


def _same_error_as_one_pass(raw, tmp_path) -> list[str]:
    """Reading ``raw`` in two parts raises the DataError one pass raises; the parts' log."""
    with pytest.raises(DataError) as one:
        _normalize(raw, tmp_path / "one", 1)
    logged: list[str] = []
    with pytest.raises(DataError) as many:
        nz.normalize_longmemeval(raw, tmp_path / "many", log=logged.append, workers=2)
    assert str(many.value) == str(one.value)
    return logged


def _late(items, text: str) -> str:
    """The file's JSON with ``text`` put in the last item's last turn (raw)."""
    data = json.dumps(items)
    at = data.rindex('{"role": ') + 1
    return data[:at] + text + data[at:]


@pytest.mark.parametrize("case", ["truncated", "bad token", "too deep", "lone surrogate in an id", "not a string"])
def test_errors_in_a_later_part_are_those_of_one_pass(tmp_path, small_parts, case):
    items = _items(30)
    if case == "truncated":
        data = json.dumps(items)[:-500]
    elif case == "bad token":
        data = _late(items, '"x": nope, ')
    elif case == "too deep":
        data = _late(items, '"x": ' + "[" * 70 + "]" * 70 + ", ")
    elif case == "lone surrogate in an id":
        data = json.dumps(items).replace('"q028"', '"q\\udc00 28"')
    else:
        items[-2]["question"] = 7
        data = json.dumps(items)
    raw = tmp_path / "bad.json"
    raw.write_text(data, encoding="utf-8")
    logged = _same_error_as_one_pass(raw, tmp_path)
    assert any("reading the file in one pass instead" in line for line in logged)
    assert not [p.name for p in (tmp_path / "many").iterdir()]  # no table, no worker's file


def test_lenient_reading_of_a_malformed_later_element(tmp_path, small_parts):
    items = _items(30)
    data = _late(items, '"x": nope, ')  # the M harnesses skip that element and go on
    raw = tmp_path / "m.json"
    raw.write_text(data, encoding="utf-8")
    one = _normalize(raw, tmp_path / "one", 1, lenient=True)
    many = _normalize(raw, tmp_path / "many", 2, lenient=True)
    assert one[0]["unparseable_items"] == 1
    assert many[0] == one[0] and many[1] == one[1]


def test_small_files_and_one_core_read_in_one_pass(tmp_path, monkeypatch):
    raw = tmp_path / "lme.json"
    _write(raw, _items(10))
    assert parts.parts_for(raw.stat().st_size, 4) == 1  # far below PART_MIN_BYTES a part
    assert not _read_in_parts(_normalize(raw, tmp_path / "a", 4)[2])
    monkeypatch.setattr(parts, "PART_MIN_BYTES", 1)
    assert not _read_in_parts(_normalize(raw, tmp_path / "b", 1)[2])


def test_parts_for_and_the_rule_threads():
    mib = 1 << 20
    assert parts.parts_for(None, 4) == 1 and parts.parts_for(0, 4) == 1
    assert parts.parts_for(40 * mib, 4) == 1
    assert parts.parts_for(70 * mib, 4) == 2 and parts.parts_for(70 * mib, 1) == 1
    assert parts.parts_for(2745274681, 16) == parts.MAX_PARTS
    config = {"datasets": {"m": {"format": "longmemeval", "bytes": 2745274681},
                           "tiny": {"format": "longmemeval", "bytes": 216228},
                           "locomo": {"format": "locomo", "bytes": 2805274 * 100}}}
    assert plan.normalize_threads(config, "m") == parts.MAX_PARTS
    assert plan.normalize_threads(config, "tiny") == 1
    assert plan.normalize_threads(config, "locomo") == 1  # its reader reads in one pass


def test_the_stage_reads_with_the_cores_snakemake_gave_it(tmp_path, small_parts):
    raw = tmp_path / "lme.json"
    _write(raw, _items(20))
    out = tmp_path / "normalized"
    outputs = {t: str(out / f"{t}.parquet") for t in TABLES} | {"summary": str(out / "summary.json")}
    run_logged(tmp_path / "normalize.log", load_stage("normalize").func, {}, outputs,
               {"raw": str(raw), "format": "longmemeval", "lenient": False}, {"dataset": "lme"}, threads=2)
    log = (tmp_path / "normalize.log").read_text(encoding="utf-8")
    assert "2 parts read at once" in log and "one pass" not in log
    one = _normalize(raw, tmp_path / "one", 1)
    assert all((out / f"{t}.parquet").read_bytes() == one[1][t] for t in TABLES)


def test_slice_reads_prefix_body_and_suffix(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(bytes(range(200)))
    with open(path, "rb") as f:
        s = parts.Slice(f.fileno(), 10, 150, b"[", b"]")
        want = b"[" + bytes(range(10, 150)) + b"]"
        for n in (1, 7, 64, 1000, -1):
            s.seek(0)
            got = b""
            while chunk := s.read(n):
                assert n < 0 or len(chunk) <= n
                got += chunk
            assert got == want, n
        with pytest.raises(ValueError):
            s.seek(5)


def test_cut_points_are_commas_before_items(tmp_path):
    raw = tmp_path / "lme.json"
    _write(raw, _items(50))
    data = raw.read_bytes()
    cuts = parts.cut_points(raw, 4)
    assert len(cuts) == 3 and cuts == sorted(cuts)
    for k, cut in enumerate(cuts, 1):
        assert data[cut:cut + 17] == b', {"question_id":' and cut >= k * len(data) // 4
    assert parts.cut_points(raw, 1) == []
