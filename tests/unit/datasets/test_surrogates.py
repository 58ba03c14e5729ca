"""JSON surrogate escapes (docs/edge-cases.md, "Surrogate escapes").

JavaScript's ``JSON.parse`` keeps a lone surrogate escape (``\\ud83d`` not
followed by a low one) as one UTF-16 code unit; Python's ``json`` keeps it as
one code point. Checked here, on hand-made documents and on files from
``memobench.tools.generate`` with ``surrogates``:

* the LongMemEval reader (ijson behind ``jsonguard.LoneEscapes``) gives exactly
  ``json.loads``'s strings, at every read size, and exact error bytes;
* the tables keep every text and question losslessly (``text_exact``), and
  their UTF-8 form (U+FFFD for a lone surrogate) tokenizes under every JS
  tokenizer as the exact text does, and under FTS5 as SQLite itself
  tokenizes the exact bytes;
* the engine's per-question lists equal the independent references
  (tests/oracles/naive.py, tests/oracles/reference_experiments.py) for S, M (the element
  scanner too), LoCoMo and CN;
* the retrieval log writes the exact texts, a lone surrogate as ``\\udXXX``;
* a lone surrogate outside texts, questions and answers is a one-line error
  naming the field and its byte.
"""

from __future__ import annotations

import io
import json
import random
import re
import sqlite3

import ijson
import pyarrow.parquet as pq
import pytest

from tests.oracles.naive import reference_locomo
from tests.unit.memo.test_reference_equivalence import compare, lme_reference, run_project
from tests.oracles import reference_experiments as refx
from tests.unit.memo.test_reference_experiments import diffs_from_reference

from memobench.runs import retrieval_log
from memobench.evaluation import exports
from memobench.retrieval.documents import session_documents
from memobench.core.errors import DataError
from memobench.memo.fts5 import Unicode61
from memobench.tools.generate.cn import write_cn
from memobench.tools.generate.locomo import write_locomo
from memobench.tools.generate.longmemeval import write_longmemeval
from memobench.tools.generate.surrogates import SURROGATE_CASES
from memobench.datasets.jsonguard import GuardedReader, restore
from memobench.datasets.normalize import normalize_cn, normalize_locomo, normalize_longmemeval
from memobench.core.tables import exact_text
from memobench.memo.tokenize import SEQ, STOP_BASE, WINDOWS

QUIET = lambda *a, **k: None  # noqa: E731
LONE = re.compile("[\ud800-\udfff]")
LONE_ESCAPE = re.compile(rb"(?<!\\)(?:\\\\)*\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def utf8_form(text: str) -> str:
    return LONE.sub("\ufffd", text)


# ---------------------------------------------------------------------------
# The reader
# ---------------------------------------------------------------------------

# JSON text pieces inside a string literal: lone and paired surrogates in both
# hex cases, a high one before an escaped letter, escaped and raw backslashes
# before a u, NUL escapes, raw and escaped characters of the range the reader
# rewrites into, quotes and newlines
PIECES = [r"\ud83d", r"\udc00", r"\ud83d\u0061", r"\ud83d\ude00", "😀", r"\udc00\ud83d", r"\ud83d\ud83d\ude00",
          r"\\", r"\\ud83d", r"\\\ud83d", r"\u0000", r"\u0000\ue03d", "\ue03d", r"\ue7ff", r"\uD83D", r"\uDBFF\uDFFF",
          r"\uDbfF", "a", " ", r"\"", r"\n", "中", "\U00020000"]


def _read(data: bytes, buf_size: int) -> list:
    return [restore(x) for x in ijson.items(GuardedReader(io.BytesIO(data), escapes=True), "item", buf_size=buf_size)]


def test_reader_gives_json_loads_strings():
    """Every read size (an escape or a pair split anywhere between reads),
    keys too: the values json.loads gives."""
    rng = random.Random(5)
    for _ in range(300):
        items = []
        for _ in range(rng.randint(1, 4)):
            parts = [rng.choice(PIECES) for _ in range(rng.randint(0, 10))]
            key = rng.choice(["k", r"k\ud83d", r"\u0000"])
            items.append('{"%s": "%s", "n": [1, "%s"]}' % (key, "".join(parts), "".join(parts[::-1])))
        data = ("[" + ", ".join(items) + "]").encode("utf-8")
        want = json.loads(data)
        for size in (1, 2, 3, 5, 6, 7, 11, 12, 13, 64, 65536):
            assert _read(data, size) == want, (data, size)


def test_reader_passes_other_bytes_unchanged(tmp_path):
    """A file without lone surrogate or NUL escapes reaches the parser byte for
    byte (valid pairs, other escapes and raw astral characters included)."""
    path = tmp_path / "clean.json"
    write_longmemeval(path, 6, 5, seed=3, spice=True, ensure_ascii=True)
    data = path.read_bytes() + r'["\ud83d\ude00 \u00e9 \\ud83d 😀"]'.encode()
    f = GuardedReader(io.BytesIO(data), escapes=True)
    out = b"".join(iter(lambda: f.read(4099), b""))
    assert out == data and not f.escapes.offsets


def _same_length_without_lone(data: bytes) -> bytes:
    """``data`` with each lone surrogate escape's digits made 0041 (the same bytes otherwise)."""
    return LONE_ESCAPE.sub(lambda m: m.group()[:-4] + b"0041", data)


@pytest.mark.parametrize("lenient", [False, True])
def test_error_bytes_after_lone_escapes(tmp_path, lenient):
    """The rewrite makes the parser's stream longer; the byte of a syntax
    error after lone surrogates is still the file's own."""
    good = tmp_path / "good.json"
    write_longmemeval(good, 4, 3, seed=7, surrogates=0.5)
    raw = good.read_bytes()
    assert LONE_ESCAPE.search(raw)
    cut = raw.rindex(b', {"question_id"')
    data = raw[:cut] + b", {nope" + raw[cut:]
    messages = []
    for name, content in (("a.json", data), ("b.json", _same_length_without_lone(data))):
        (tmp_path / name).write_bytes(content)
        logged = []
        try:
            normalize_longmemeval(tmp_path / name, tmp_path / ("out" + name), log=logged.append, lenient=lenient)
            messages.append(logged[0])
        except DataError as e:
            messages.append(e.what)
    assert messages[0] == messages[1]
    assert f"at byte {cut + 4}" in messages[0]  # the o of nope: no JSON text goes on with it


# ---------------------------------------------------------------------------
# Generated files, normalized
# ---------------------------------------------------------------------------

RATE = 0.15  # of the turn texts and questions (the generator's default is 2% / 5%)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("surrogates")
    lme = root / "s.json"
    write_longmemeval(lme, 30, 15, seed=41, spice=True, surrogates=RATE)
    raw = lme.read_bytes()
    cut = raw.index(b', {"question_id"', len(raw) // 3) + 2
    m = root / "m.json"  # one element JSON.parse rejects: the M harness's element scanner
    m.write_bytes(raw[:cut] + b'{"question_id": "bad\\ud83d", "x": tru}, ' + raw[cut:])
    locomo = root / "locomo.json"
    write_locomo(locomo, 2, seed=41, qa_per_conversation=(30, 50), spice=True, surrogates=RATE)
    cn = root / "cn.jsonl"
    write_cn(cn, lme, seed=41, surrogates=0.5)
    out = {"root": root, "s": (lme, root / "norm_s"), "m": (m, root / "norm_m"),
           "locomo": (locomo, root / "norm_locomo"), "cn": (cn, root / "norm_cn")}
    normalize_longmemeval(lme, out["s"][1], log=QUIET)
    logged = []
    normalize_longmemeval(m, out["m"][1], log=logged.append, lenient=True)
    assert any("element scanner" in line for line in logged)
    normalize_locomo(locomo, out["locomo"][1], log=QUIET)
    normalize_cn(cn, out["s"][1], out["cn"][1], log=QUIET)
    return out


def _raw_texts(kind, path):
    """(turn texts, questions) as the harnesses read them, through json.loads."""
    from memobench.core.jsmath import js_string

    if kind == "cn":
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        return set(), [r["question"] for r in rows]
    if kind == "locomo":
        convs = json.loads(path.read_bytes())
        texts = {js_string(t["text"]) if "text" in t else "" for c in convs for k, s in c["conversation"].items()
                 if re.fullmatch(r"session_[0-9]+", k) and isinstance(s, list) for t in s}
        return texts, [q["question"] for c in convs for q in c["qa"]]
    items = []
    for element in re.split(rb"(?=\{\"question_id\")", path.read_bytes()[1:-1]):
        try:
            items.append(json.loads(element.rstrip(b", ")))
        except ValueError:
            pass
    texts = {js_string(t["content"]) if isinstance(t, dict) and "content" in t else ""
             for it in items for s in it["haystack_sessions"] or [] for t in s or []}
    return texts, [it["question"] for it in items]


@pytest.mark.parametrize("kind", ["s", "m", "locomo", "cn"])
def test_tables_keep_every_text_exactly(files, kind):
    """Each event text and question: its UTF-8 column is the exact string with
    U+FFFD for each lone surrogate, ``*_exact`` is set exactly where one was
    replaced, and together they give back the string json.loads reads."""
    path, norm = files[kind]
    texts, questions = _raw_texts(kind, path)
    q = pq.read_table(norm / "questions.parquet").to_pydict()
    got_q = [exact_text(t, x) for t, x, pe in zip(q["question"], q["question_exact"], q["parse_error"]) if not pe]
    if kind == "cn":  # an unpaired row's question is not read
        got_q = [g for g, h in zip(got_q, q["haystack_id"]) if h >= 0]
        questions = [r for r, h in zip(questions, q["haystack_id"]) if h >= 0]
    assert got_q == questions
    pairs = list(zip(q["question"], q["question_exact"]))
    if kind != "cn":
        e = pq.read_table(norm / "events.parquet").to_pydict()
        assert {exact_text(t, x) for t, x in zip(e["text"], e["text_exact"])} == texts
        assert e["length"] == [len(exact_text(t, x)) for t, x in zip(e["text"], e["text_exact"])]
        pairs += list(zip(e["text"], e["text_exact"]))
    replaced = 0
    for text, exact in pairs:
        full = exact_text(text, exact)
        assert text == utf8_form(full)
        assert (exact is None) == (LONE.search(full) is None)
        replaced += exact is not None
    assert replaced >= (3 if kind == "cn" else 20)


def test_answers_keep_lone_surrogates_as_escapes(tmp_path):
    item = {"question_id": "q1", "question": "which", "answer": ["x\ud83d", {"k\udc00": 1}],
            "haystack_session_ids": ["a"], "haystack_dates": ["2023/05/20 (Sat) 02:21"],
            "haystack_sessions": [[{"role": "user", "content": "which one \udfff"}]], "answer_session_ids": ["a"]}
    path = tmp_path / "a.json"
    path.write_text(json.dumps([item]), encoding="utf-8")
    normalize_longmemeval(path, tmp_path / "norm", log=QUIET)
    (answer,) = pq.read_table(tmp_path / "norm" / "questions.parquet").column("answer").to_pylist()
    assert json.loads(answer) == item["answer"] and "\\ud83d" in answer and "\\udc00" in answer


CRAFTED = ["a\ud83dapples", "\ud83d", "x\udc00y", "\udc00\ud83d", "abc\ud840中文\udc00def", "\ud840\U00020000",
           "K\u212a\udbff\U00010400", "İ\udc00stanbul", "\ud83d🙂\udfff"]


def test_js_tokenizers_read_the_stored_form_as_the_exact_one(files):
    """What the tokens stage and the engine read (the UTF-8 column) gives every
    JS tokenizer, window and length what the exact text gives: neither a lone
    surrogate nor U+FFFD is [a-z0-9], Han or in U+3400-U+9FFF, lowercasing
    leaves both alone, and each is one code point (Array.from's length)."""
    exact = list(CRAFTED)
    for kind in ("s", "locomo", "cn"):
        texts, questions = _raw_texts(kind, files[kind][0])
        exact += [t for t in [*texts, *questions] if LONE.search(t)]
    assert len(exact) > 50
    for text in exact:
        stored = utf8_form(text)
        assert len(stored) == len(text)
        for name, seq in SEQ.items():
            assert seq(stored) == seq(text), (name, text)
        for name, window in WINDOWS.items():
            assert window(stored, STOP_BASE) == window(text, STOP_BASE), (name, text)


def fts5_tokens(body) -> list[str]:
    """FTS5's own tokens of ``body``: a str, or UTF-8 bytes handed over as
    they are (a lone surrogate's three bytes too, as better-sqlite3 hands them)."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    db.execute("INSERT INTO t(rowid, body) VALUES (1, CAST(? AS TEXT))", (body,))
    return [r[0] for r in db.execute("SELECT term FROM v ORDER BY offset")]


def test_sqlite_separates_at_every_lone_surrogate():
    """The harnesses' SQLite gets a lone surrogate either as its own three
    bytes (better-sqlite3, the runner's binding on Node 20) or as U+FFFD
    (a replacing conversion); unicode61 splits at all 2048 and at U+FFFD,
    so the FTS rows are the same whichever it gets."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    units = [*range(0xD800, 0xE000), 0xFFFD]
    db.executemany("INSERT INTO t(rowid, body) VALUES (?, CAST(? AS TEXT))",
                   [(u, f"ab{chr(u)}cd".encode("utf-8", "surrogatepass")) for u in units])
    terms: dict[int, list[str]] = {}
    for term, doc in db.execute("SELECT term, doc FROM v ORDER BY doc, offset"):
        terms.setdefault(doc, []).append(term)
    assert terms == {u: ["ab", "cd"] for u in units}


def test_fts5_tokens_of_the_stored_texts_equal_sqlite(files):
    """SQLite FTS5 as the oracle: each text that holds a lone surrogate,
    handed over as better-sqlite3 hands it (the exact bytes) and as its
    stored U+FFFD form, tokenizes as the FTS path's tokenizer tokenizes the
    stored column."""
    u61 = Unicode61()
    e = pq.read_table(files["s"][1] / "events.parquet").to_pydict()
    checked = 0
    for text, exact in zip(e["text"], e["text_exact"]):
        if exact is not None:
            assert u61.tokens(text) == fts5_tokens(exact) == fts5_tokens(text)
            checked += 1
    assert checked > 20


# ---------------------------------------------------------------------------
# Lists against the references
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind,family", [("s", "s"), ("s", "m"), ("m", "m")])
@pytest.mark.parametrize("variant_name", ["v0.8.0", "v0.8.0-index"])
def test_lme_lists_equal_the_reference(files, kind, family, variant_name, tmp_path):
    raw, norm = files[kind]
    if kind == "m":  # the reference parses the whole file: give it the file without the broken element
        raw = files["s"][0]
    ref = lme_reference(raw, variant_name, family)
    rankings, outcomes = run_project(norm, variant_name, family, tmp_path)
    if kind == "m":  # the skipped element has a q_index of its own: line the others up with the reference's
        q = pq.read_table(norm / "questions.parquet").to_pydict()
        (bad,) = [i for i, pe in zip(q["q_index"], q["parse_error"]) if pe]
        outcomes = outcomes[outcomes.q_index != bad].copy()
        outcomes.loc[outcomes.q_index > bad, "q_index"] -= 1
        rankings.loc[rankings.q_index > bad, "q_index"] -= 1
    assert compare(ref, rankings, outcomes, f"{kind} {variant_name}/{family}") > 20


def test_lists_see_the_lone_surrogates(files):
    """The file is one where misreading a lone surrogate changes tokens: an
    ASCII word split by one (run.cjs's JS tokens see two words)."""
    texts, questions = _raw_texts("s", files["s"][0])
    split = [t for t in texts if re.search("[a-z0-9][\ud800-\udfff]+[a-z0-9]", t.lower())]
    assert len(split) > 10


@pytest.mark.parametrize("variant_name", ["v0.8.0", "v0.8.0-index"])
def test_locomo_lists_equal_the_reference(files, variant_name, tmp_path):
    raw, norm = files["locomo"]
    ref = reference_locomo(raw, backend="index") if variant_name == "v0.8.0-index" else reference_locomo(raw)
    rankings, outcomes = run_project(norm, variant_name, "locomo", tmp_path)
    assert compare(ref, rankings, outcomes, f"locomo {variant_name}") > 20


@pytest.mark.parametrize("harness,fn,names", [("exp3", refx.reference_exp3, ("V6", "T1")),
                                              ("exp5", refx.reference_exp5, refx.EXP5_VARIANTS)])
def test_experiment_lists_equal_the_reference(files, harness, fn, names):
    raw, norm = files["s"]
    refs = fn(raw)
    diffs = diffs_from_reference(refs, harness, names, "s", norm, norm)
    assert not diffs, diffs


def test_cn_lists_equal_the_reference(files):
    (lme, lme_dir), (cn, cn_dir) = files["s"], files["cn"]
    refs = refx.reference_cn(lme, cn)
    diffs = diffs_from_reference(refs, "cn", refx.CN_VARIANTS, "cn", cn_dir, lme_dir)
    assert not diffs, diffs


# ---------------------------------------------------------------------------
# Outputs
# ---------------------------------------------------------------------------


def test_retrieval_log_writes_the_exact_texts(files, tmp_path):
    """Each line's question and turn contents are the file's own strings; a
    lone surrogate is written as JSON.stringify writes it (lower-case
    ``\\udXXX``), so the log is UTF-8 and reads back exactly."""
    raw, norm = files["s"]
    rankings, _ = run_project(norm, "v0.8.0", "s", tmp_path / "run")
    rk = tmp_path / "rankings.parquet"
    rankings.to_parquet(rk)
    retrieval_log.write_session_json(norm / "events.parquet", tmp_path / "sessions.bin", log=QUIET)
    exports.write_retrievallog("longmemeval", norm / "questions.parquet", norm / "haystacks.parquet",
                               norm / "events.parquet", rk, tmp_path / "log.jsonl", tmp_path / "sessions.bin", log=QUIET)
    data = (tmp_path / "log.jsonl").read_bytes()
    text = data.decode("utf-8")  # strict: valid UTF-8
    escapes = re.findall(r"\\u(d[89a-f][0-9a-f]{2})", text, flags=re.I)
    assert escapes and all(e == e.lower() for e in escapes)
    items = {}
    for it in json.loads(raw.read_bytes()):
        items.setdefault((it["question_id"], it["question"]), it)
    lone = 0
    for line in text.splitlines():
        obj = json.loads(line)
        it = items[obj["question_id"], obj["question"]]
        assert obj["retrieval_results"]["query"] == it["question"]
        for logged, session in zip(obj["haystack_sessions"], it["haystack_sessions"]):
            for turn, source in zip(logged, [t for t in session or []]):
                if isinstance(source, dict) and isinstance(source.get("content"), str):
                    assert turn["content"] == source["content"]
                    lone += bool(LONE.search(source["content"]))
    assert lone > 20


def test_bm25_official_reads_the_exact_texts(files):
    """LongMemEval's BM25 reads the file with json.load: lone surrogates kept;
    the others read the stored UTF-8 texts."""
    events = files["s"][1] / "events.parquet"
    exact, stored = (session_documents(events, "longmemeval", exact=x) for x in (True, False))
    assert exact.keys() == stored.keys()
    differ = [k for k in exact if exact[k] != stored[k]]
    assert differ and all(stored[k] == utf8_form(exact[k]) for k in exact)


# ---------------------------------------------------------------------------
# Where a lone surrogate cannot go
# ---------------------------------------------------------------------------


def _lme_item(**over):
    item = {"question_id": "q1", "question_type": "t", "question": "where is the red kayak",
            "question_date": "2023/06/20 (Tue) 10:00", "haystack_session_ids": ["a", "b"],
            "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/21 (Sun) 02:21"],
            "haystack_sessions": [[{"role": "user", "content": "the red kayak \ud83d"}],
                                  [{"role": "user", "content": "b"}]], "answer_session_ids": ["a"]}
    item.update(over)
    return item


@pytest.mark.parametrize("field,value", [("question_id", "q\udc01"), ("haystack_session_ids", ["a", "b\ud83d"]),
                                         ("haystack_dates", ["x", "y\udbff"]), ("answer_session_ids", ["\udc00"]),
                                         ("question_type", "t\ud800")])
@pytest.mark.parametrize("lenient", [False, True])
def test_a_lone_surrogate_in_an_id_is_an_error_naming_its_byte(tmp_path, field, value, lenient):
    path = tmp_path / "x.json"
    items = [_lme_item(question_id="q0"), _lme_item(**{field: value})]
    text = json.dumps(items)
    if lenient:  # a broken element first: read by the element scanner
        text = text[0] + '{"question_id": tru}, ' + text[1:]
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError) as e:
        normalize_longmemeval(path, tmp_path / "norm", log=QUIET, lenient=lenient)
    unit = next(c for c in (value if isinstance(value, str) else "".join(value)) if LONE.match(c))
    m = re.fullmatch(rf"field '{field}' holds a lone surrogate \(\\u{ord(unit):04x}\) at byte (\d+); .*", e.value.what)
    assert m, e.value.what
    assert e.value.item == f"item {1 + lenient}"
    at = int(m.group(1))
    assert path.read_bytes()[at:at + 6].decode() == f"\\u{ord(unit):04x}"
    assert not (tmp_path / "norm" / "questions.parquet").exists()


def test_lone_surrogates_outside_texts_in_locomo_and_cn(tmp_path, files):
    convs = json.loads(files["locomo"][0].read_bytes())
    turn = next(t for k, s in convs[1]["conversation"].items() if k == "session_1" for t in s)
    turn["dia_id"] = "D1:\ud83d"
    path = tmp_path / "l.json"
    path.write_text(json.dumps(convs), encoding="utf-8")
    with pytest.raises(DataError, match=r"conversation 1: field 'dia_id' holds a lone surrogate \(\\ud83d\) at byte"):
        normalize_locomo(path, tmp_path / "nl", log=QUIET)
    cn = tmp_path / "c.jsonl"
    cn.write_text('{"questionId": "a_cn", "question": "x\\ud83d"}\n{"questionId": "b\\udc00_cn"}\n', encoding="utf-8")
    at = cn.read_bytes().index(b"\\udc00")
    with pytest.raises(DataError, match=rf"line 2: field 'questionId' holds a lone surrogate \(\\udc00\) at byte {at};"):
        normalize_cn(cn, files["s"][1], tmp_path / "nc", log=QUIET)


# ---------------------------------------------------------------------------
# The generator
# ---------------------------------------------------------------------------


def test_generator_writes_every_case_deterministically(tmp_path):
    a, b, plain = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "plain.json"
    info = write_longmemeval(a, 40, 20, seed=9, surrogates=True)
    write_longmemeval(b, 40, 20, seed=9, surrogates=True)
    write_longmemeval(plain, 40, 20, seed=9)
    assert a.read_bytes() == b.read_bytes() != plain.read_bytes()
    data = a.read_bytes()
    hexd = rb"[0-9a-fA-F]{2}"
    high, low = rb"\\u[dD][89abAB]" + hexd, rb"\\u[dD][c-fC-F]" + hexd
    found = {
        "lone_high": re.search(high + rb"(?!\\u[dD][c-fC-F])", data),
        "lone_low": re.search(rb"(?<![0-9a-fA-F])" + low, data),
        "high_then_ascii": re.search(high + rb"\\u00[2-7][0-9a-fA-F]", data),
        "pair_escaped": re.search(high + low, data),
        "astral_raw": re.search("[\U00010000-\U0010ffff]".encode(), data) or re.search(rb"\xf0", data),
        "low_then_high": re.search(low + high, data),
        "high_before_pair": re.search(high + high + low, data),
        "high_at_end": re.search(high + rb'"', data),
    }
    assert set(found) == set(SURROGATE_CASES) and all(found.values()), [k for k, v in found.items() if not v]
    items = json.loads(data)
    turns = [t["content"] for it in items for s in it["haystack_sessions"] for t in s]
    share = sum(bool(LONE.search(t)) or "\\u" in t for t in turns) / len(turns)
    assert 0.005 < share < 0.05 and info["surrogate_strings"] > 0
    # a filler session recurring in several haystacks carries the same text in each
    by_id: dict = {}
    for it in items:
        for sid, s in zip(it["haystack_session_ids"], it["haystack_sessions"]):
            by_id.setdefault(sid, []).append(s)
    recurring = [v for v in by_id.values() if len(v) > 1]
    assert recurring and all(all(s == v[0] for s in v) for v in recurring)


