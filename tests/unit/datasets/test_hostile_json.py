"""Hostile JSON: nesting and number-literal bounds, bounded
memory, exact byte offsets of parse errors, in every reader: LongMemEval
(ijson, strict and the M-family element scanner), LoCoMo, CN jsonl.

Inputs that used to take the machine down run in a subprocess under an
address-space limit, so a regression fails the test instead."""

from __future__ import annotations

import json
import random
import resource
import subprocess
import sys
import textwrap

import pytest

from memobench.core.errors import DataError
from memobench.datasets.jsonguard import MAX_DEPTH, MAX_NUMBER, Guard, LimitExceeded, check_bytes
from memobench.datasets.normalize import normalize_cn, normalize_locomo, normalize_longmemeval

QUIET = lambda m: None  # noqa: E731
LIMIT_AS = 1 << 30  # 1 GiB: the old code needed 24 GB for the 842 KB file below


def lme_item(qid, **extra):
    return {"question_id": qid, "question_type": "single-session-user", "question": "Where did we hike?",
            "question_date": "2023/05/30 (Tue) 23:40", "haystack_session_ids": [f"{qid}_a", f"{qid}_b"],
            "haystack_dates": ["2023/05/20 (Sat) 02:21"] * 2,
            "haystack_sessions": [[{"role": "user", "content": "we hiked in the alps"}],
                                  [{"role": "user", "content": "dinner plans"}]],
            "answer_session_ids": [f"{qid}_a"], **extra}


def lme(items) -> bytes:
    return json.dumps(items).encode()


def nothing_written(out_dir) -> bool:
    return not out_dir.exists() or not any(out_dir.iterdir())


def error_of(fn, *args, **kw) -> str:
    with pytest.raises(DataError) as e:
        fn(*args, **kw)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def run_limited(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter whose address space is capped."""
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT_AS, LIMIT_AS))

    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, preexec_fn=cap)


# --- the guard itself --------------------------------------------------------


def _exact(data: bytes, depth: int, number: int):
    g = Guard(depth, number)
    cut = g._exact(data)
    return (g.error.offset, g.error.what) if cut is not None else (g.depth, g.in_string, g.escape, g.run)


def test_guard_fast_path_equals_the_byte_by_byte_definition():
    """The C-speed path (strings split off, escapes paired with replace, a
    regex fallback for backslashes outside strings) gives exactly what the
    byte loop gives, whatever the chunking, on random JSON-like bytes."""
    rnd = random.Random(9)
    alphabet = b'[]{}"\\\\\\ 1e-a,:\x00'
    for _ in range(20000):
        data = bytes(rnd.choice(alphabet) for _ in range(rnd.randint(0, 50)))
        depth, number = rnd.randint(1, 4), rnd.randint(1, 4)
        g, i, got = Guard(depth, number), 0, None
        while i < len(data):
            k = rnd.randint(0, 12)
            if g.feed(data[i : i + k]) is not None:
                got = (g.error.offset, g.error.what)
                break
            i += k
        if got is None:
            got = (g.depth, g.in_string, g.escape, g.run)
        assert got == _exact(data, depth, number), (data, depth, number)


def test_guard_bounds_and_offsets():
    ok = b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
    check_bytes(ok)
    head = b' {"a": "[[[[", "b": '  # the object is level 1, so the 64th "[" opens level 65
    with pytest.raises(LimitExceeded) as e:
        check_bytes(head + b"[" * MAX_DEPTH)
    assert (e.value.offset, e.value.what) == (len(head) + MAX_DEPTH - 1, f"nesting deeper than {MAX_DEPTH} levels")
    check_bytes(b"[" + b"9" * MAX_NUMBER + b"]")
    check_bytes(b'["' + b"9" * 10 * MAX_NUMBER + b'"]')  # digits in a string are text
    with pytest.raises(LimitExceeded) as e:
        check_bytes(b"[1, -" + b"9" * MAX_NUMBER + b"]")
    assert e.value.offset == 4 and "number literal longer than" in e.value.what
    # a literal split over chunk boundaries still counts as one
    with pytest.raises(LimitExceeded) as e:
        check_bytes(b"[" + b"1" * (MAX_NUMBER + 1) + b"]", chunk_size=7)
    assert e.value.offset == 1


# --- deep nesting ------------------------------------------------------------


def test_200000_brackets_stop_at_byte_64_in_bounded_memory(tmp_path):
    """842 KB of ``[`` used to grow normalize to 24 GB (ijson's C backend keeps
    a prefix string per level: quadratic). Now: one line, flat memory."""
    raw = tmp_path / "deep.json"
    raw.write_bytes(b"[" * 200_000)
    for lenient in (False, True):
        proc = run_limited(f"""
            from memobench.core.errors import DataError
            from memobench.datasets.normalize import normalize_longmemeval
            try:
                normalize_longmemeval({str(raw)!r}, {str(tmp_path / 'n')!r}, log=lambda m: None, lenient={lenient})
            except DataError as e:
                print(e)
            """)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.strip() == f"{raw}: item 0: nesting deeper than 64 levels at byte 64 (a bound of memobench, see the README)"
        assert nothing_written(tmp_path / "n")


def test_deep_nesting_inside_an_item_names_item_and_byte(tmp_path):
    raw = tmp_path / "d.json"
    head = lme([lme_item("q0")])[:-1] + b", " + lme([lme_item("q1")])[1:-2] + b', "extra": '
    raw.write_bytes(head + b"[" * 200 + b"]" * 200 + b"}]")
    # the array opened at len(head) is level 3 (file array, item object, this list)
    assert error_of(normalize_longmemeval, raw, tmp_path / "n", log=QUIET).endswith(
        f"item 1: nesting deeper than 64 levels at byte {len(head) + 62} (a bound of memobench, see the README)")
    assert nothing_written(tmp_path / "n")
    # 64 levels exactly are fine
    raw.write_bytes(head + b"[" * 62 + b"]" * 62 + b"}]")
    assert normalize_longmemeval(raw, tmp_path / "n2", log=QUIET)["questions"] == 2


def test_deep_nesting_in_the_m_scanner(tmp_path):
    """Lenient mode: a malformed element first sends the reader to run-m's
    scanner; a too-deep element after it is an error, not a RecursionError."""
    raw = tmp_path / "m.json"
    good = lme([lme_item("q0")])[1:-1]
    head = b"[" + good + b', {"question_id": "bad", "question": tru}, ' + good[:-1] + b', "x": '
    raw.write_bytes(head + b"[" * 5000 + b"]" * 5000 + b"}]")
    msg = error_of(normalize_longmemeval, raw, tmp_path / "n", log=QUIET, lenient=True)
    # levels 1 and 2 are the file's array and the element: the 63rd "[" opens level 65
    assert msg.endswith(f"item 2: nesting deeper than 64 levels at byte {len(head) + 62} "
                        "(a bound of memobench, see the README)")
    assert nothing_written(tmp_path / "n")


def test_deep_nesting_locomo_and_cn(tmp_path):
    raw = tmp_path / "l.json"
    head = b'[{"sample_id": "a", "conversation": {"x": '  # three levels open
    raw.write_bytes(head + b"[" * 100_000)
    assert error_of(normalize_locomo, raw, tmp_path / "n", log=QUIET) == (
        f"{raw}: nesting deeper than 64 levels at byte {len(head) + 61} (a bound of memobench, see the README)")
    assert nothing_written(tmp_path / "n")
    base = tmp_path / "s.json"
    base.write_bytes(lme([lme_item("q1")]))
    normalize_longmemeval(base, tmp_path / "sn", log=QUIET)
    cn = tmp_path / "cn.jsonl"
    line1 = b'{"questionId": "q1_cn", "question": "hike?"}\n'
    head = b'{"questionId": "q1_cn", "x": '
    cn.write_bytes(line1 + head + b"[" * 100_000 + b"\n")
    assert error_of(normalize_cn, cn, tmp_path / "sn", tmp_path / "cn", log=QUIET) == (
        f"{cn}: line 2: nesting deeper than 64 levels at byte {len(line1) + len(head) + 63} "
        "(a bound of memobench, see the README)")
    assert nothing_written(tmp_path / "cn")


# --- long number literals ----------------------------------------------------


def test_4301_digit_integer_is_an_error_not_a_crash(tmp_path):
    """It used to kill normalize with SIGSEGV (ijson's C backend) on a
    LongMemEval file; run in a subprocess so a regression cannot take pytest down."""
    raw = tmp_path / "n.json"
    head = lme([lme_item("q0")])[:-1] + b', {"question_id": "q1", "question": "x", "n": '
    raw.write_bytes(head + b"7" * 4301 + b"}]")
    for lenient in (False, True):
        proc = run_limited(f"""
            from memobench.core.errors import DataError
            from memobench.datasets.normalize import normalize_longmemeval
            try:
                normalize_longmemeval({str(raw)!r}, {str(tmp_path / 'n')!r}, log=lambda m: None, lenient={lenient})
            except DataError as e:
                print(e)
            """)
        assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
        assert proc.stdout.strip() == (f"{raw}: item 1: number literal longer than {MAX_NUMBER} characters "
                                       f"at byte {len(head)} (a bound of memobench, see the README)")
        assert nothing_written(tmp_path / "n")


def test_long_numbers_locomo_and_cn(tmp_path):
    raw = tmp_path / "l.json"
    head = b'[{"sample_id": "a", "conversation": {}, "qa": [], "n": -'
    raw.write_bytes(head + b"1" * 4301 + b"}]")
    assert error_of(normalize_locomo, raw, tmp_path / "n", log=QUIET) == (
        f"{raw}: number literal longer than {MAX_NUMBER} characters at byte {len(head) - 1} "
        "(a bound of memobench, see the README)")
    assert nothing_written(tmp_path / "n")
    base = tmp_path / "s.json"
    base.write_bytes(lme([lme_item("q1")]))
    normalize_longmemeval(base, tmp_path / "sn", log=QUIET)
    cn = tmp_path / "cn.jsonl"
    cn.write_bytes(b'{"questionId": "q1_cn", "question": "hike?", "n": ' + b"2" * 5000 + b"}\n")
    assert error_of(normalize_cn, cn, tmp_path / "sn", tmp_path / "cn", log=QUIET).startswith(
        f"{cn}: line 1: number literal longer than {MAX_NUMBER} characters at byte 50 ")
    assert nothing_written(tmp_path / "cn")


def test_numbers_up_to_the_bound_are_read_as_the_harness_reads_them(tmp_path):
    raw = tmp_path / "ok.json"
    big = "1" + "0" * (MAX_NUMBER - 1)  # a finite int that JS reads as Infinity
    raw.write_bytes(lme([lme_item("q0")])[:-2] + f', "question_id": {big}}}]'.encode())
    normalize_longmemeval(raw, tmp_path / "n", log=QUIET)
    import pyarrow.parquet as pq

    assert pq.read_table(tmp_path / "n" / "questions.parquet")["question_id"].to_pylist() == ["Infinity"]


# --- exact byte offsets of parse errors --------------------------------------


@pytest.fixture(scope="module")
def lme_file(tmp_path_factory):
    from memobench.tools.generate.longmemeval import write_longmemeval

    path = tmp_path_factory.mktemp("g") / "g.json"
    write_longmemeval(path, n_questions=30, sessions_per_question=6, seed=4)
    return path, path.read_bytes()


def _positions(data: bytes, context: bytes, at: int) -> list[int]:
    """Offsets near the start, past 64 KiB boundaries (ijson's read size) and
    near the end: byte ``at`` of the next occurrence of ``context``."""
    starts = (1, 65_536 + 5, 3 * 65_536 + 17, data.rindex(context) - 1)
    return [data.index(context, s) + at for s in starts]


def test_lme_parse_errors_name_the_exact_byte(tmp_path, lme_file):
    path, data = lme_file
    assert len(data) > 4 * 65_536
    raw = tmp_path / "x.json"
    for p in _positions(data, b'}, {"role"', 1):  # a comma between two turns
        raw.write_bytes(data[:p] + b"#" + data[p + 1 :])  # the first byte no JSON text continues with
        assert f"invalid or truncated JSON at byte {p}: lexical error" in error_of(
            normalize_longmemeval, raw, tmp_path / "n", log=QUIET)
        raw.write_bytes(data[:p])
        assert f"invalid or truncated JSON at byte {p} (end of file): parse error: premature EOF" in error_of(
            normalize_longmemeval, raw, tmp_path / "n", log=QUIET)
        assert nothing_written(tmp_path / "n")
    for p in _positions(data, b'"content": "', 12):  # the first byte of a turn's text
        raw.write_bytes(data[:p] + b"\xff" + data[p + 1 :])
        assert f"invalid UTF-8 at byte {p}: " in error_of(normalize_longmemeval, raw, tmp_path / "n", log=QUIET)
        logs = []
        normalize_longmemeval(raw, tmp_path / "m", log=logs.append, lenient=True)
        assert any(f"(at byte {p})" in line for line in logs)


def test_locomo_parse_errors_name_the_exact_byte(tmp_path, locomo_path):
    data = locomo_path.read_bytes()
    raw = tmp_path / "l.json"
    for p in _positions(data, b"},\n", 1):  # a comma between two objects
        raw.write_bytes(data[:p] + b"#" + data[p + 1 :])
        assert error_of(normalize_locomo, raw, tmp_path / "n", log=QUIET) == (
            f"{raw}: invalid or truncated JSON: Expecting ',' delimiter at byte {p}")
        raw.write_bytes(data[:p])
        assert error_of(normalize_locomo, raw, tmp_path / "n", log=QUIET) == (
            f"{raw}: invalid or truncated JSON: Expecting ',' delimiter at byte {p}")
        assert nothing_written(tmp_path / "n")
    # a byte offset, not a character offset: multi-byte text before the error
    raw.write_bytes('[{"sample_id": "é漢", "conversation": {}, "qa": [] #'.encode())
    assert error_of(normalize_locomo, raw, tmp_path / "n", log=QUIET) == (
        f"{raw}: invalid or truncated JSON: Expecting ',' delimiter at byte {raw.read_bytes().index(b'#')}")


def test_cn_parse_errors_name_line_and_file_byte(tmp_path):
    base = tmp_path / "s.json"
    base.write_bytes(lme([lme_item("q1")]))
    normalize_longmemeval(base, tmp_path / "sn", log=QUIET)
    cn = tmp_path / "cn.jsonl"
    line1 = '{"questionId": "q1_cn", "question": "徒步 alps?"}\n'.encode()
    cn.write_bytes(line1 + b'{"questionId": "q2_cn", # }\n')
    assert error_of(normalize_cn, cn, tmp_path / "sn", tmp_path / "cn", log=QUIET) == (
        f"{cn}: line 2: invalid or truncated JSON: Expecting property name enclosed in double quotes "
        f"at byte {len(line1) + 24}")
    cn.write_bytes(line1 + b'{"questionId": "q2_cn", "question": "\xff"}\n')
    assert error_of(normalize_cn, cn, tmp_path / "sn", tmp_path / "cn", log=QUIET).startswith(
        f"{cn}: line 2: invalid UTF-8 at byte {len(line1) + 37} ")
    assert nothing_written(tmp_path / "cn")
