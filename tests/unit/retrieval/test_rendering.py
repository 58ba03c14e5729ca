"""Sessions in a server's own shape (services/sent/rendering.py) and the query an
agent would send (services/sent/queries.py): per-copy keys, a long session split
into parts within the limit (a turn too long for one cut into pieces of its
content), results naming keys, parts or assigned ids read back as haystack
positions (a session at its best part), and the query transforms."""

from __future__ import annotations

import pytest

from memobench.core.errors import ConfigError
from memobench.services.sent.queries import check_query, keywords, transform
from memobench.services.sent.rendering import item_values, items, positions, render_spec, session_keys
from memobench.retrieval.returned import RetrieverError


def _session(sid: str, *texts: str, date: str = "2023/05/20") -> dict:
    return {"id": sid, "date": date, "turns": [{"role": ("user", "assistant")[i % 2], "content": t}
                                               for i, t in enumerate(texts)]}


def test_a_repeated_id_gets_a_key_per_copy():
    assert session_keys(["a", "b", "a", "a"], "w") == ["a", "b", "a~2", "a~3"]
    with pytest.raises(RetrieverError, match="the key 'a~2' of a repeated session is also a session id"):
        session_keys(["a", "a", "a~2"], "w")


def test_text_lines_and_messages_follow_the_templates():
    r = render_spec({"line": "[{turn.index}] {turn.role} said {turn.content}",
                     "header": "{session.key} on {session.date}",
                     "turn": {"speaker": "{turn.role}", "text": "{turn.content}", "n": "{turn.index}"}}, "w")
    (one, two) = items([_session("s", "hi", "hello"), _session("s", "bye")], r, "w")
    assert one.text == "s on 2023/05/20\n[0] user said hi\n[1] assistant said hello"
    assert two.lines == ("[0] user said bye",) and two.key == "s~2"
    assert one.messages == ({"speaker": "user", "text": "hi", "n": 0},
                            {"speaker": "assistant", "text": "hello", "n": 1})
    v = item_values("ns", two)
    assert v["session.key"] == "s~2" and v["session.id"] == "s" and v["session.lines"] == ["[0] user said bye"]


def test_a_long_session_is_split_between_lines_within_the_limit():
    long = _session("x", *(f"turn number {i} about the lake" for i in range(12)))
    r = render_spec({"header": "{session.date}", "max_chars": 100}, "w")
    parts = items([long, _session("y", "short")], r, "w")
    split = [p for p in parts if p.session_key == "x"]
    assert len(split) > 2 and [p.key for p in split] == [f"x~p{i}" for i in range(1, len(split) + 1)]
    assert all(len(p.text) <= 100 and p.text.startswith("2023/05/20\n") for p in split)
    assert [t for p in split for t in p.session["turns"]] == long["turns"]  # every turn once, in order
    assert parts[-1].key == "y" and parts[-1].session["turns"] == [{"role": "user", "content": "short"}]


def test_a_turn_longer_than_a_part_is_cut_into_pieces_of_its_content():
    text = "word " * 60
    parts = items([_session("x", text)], render_spec({"max_chars": 50}, "w"), "w")
    assert len(parts) > 1 and all(len(p.text) <= 50 for p in parts)
    assert all(p.text.startswith("user: ") for p in parts)  # each piece rendered as a turn of its own
    assert "".join(m["content"] for p in parts for m in p.messages) == text


def test_results_naming_keys_parts_or_assigned_ids_are_read_back_as_positions():
    sent = items([_session("a", "one " * 30), _session("b", "two"), _session("a", "three")],
                 render_spec({"max_chars": 60}, "w"), "w")
    keys = [i.key for i in sent]
    assert keys[:2] == ["a~p1", "a~p2"] and keys[-2:] == ["b", "a~2"]
    # a session through several parts is at its best part; scores follow the positions kept
    got = positions(["a~2", "a~p2", "b", "a~p1"], [4.0, 3.0, 2.0, 1.0], sent, None, "w")
    assert got == ([2, 0, 1], [4.0, 3.0, 2.0])
    assigned = {str(n): k for n, k in enumerate(keys, 100)}
    assert positions([str(100 + keys.index("a~2")), "100"], None, sent, assigned, "w") == ([2, 0], None)
    with pytest.raises(RetrieverError, match="returned id '7', which the service did not assign"):
        positions(["7"], None, sent, assigned, "w")
    with pytest.raises(RetrieverError, match="returned session id 'a~3', which is not in its haystack"):
        positions(["a~3"], None, sent, None, "w")
    with pytest.raises(RetrieverError, match="returned 'b' twice"):
        positions(["b", "b"], None, sent, None, "w")


def test_keywords_is_the_question_lowercased_without_stop_words():
    assert keywords("What did Caroline research, and when did she research it?") == "caroline research she"
    assert keywords("Où est le café? 東京") == "où est le café 東京"


def test_longest_word_is_the_longest_word_not_a_name():
    from memobench.services.sent.queries import longest_word, transform

    assert longest_word("What did Caroline research?") == "research"
    assert longest_word("When did Melanie paint a sunrise?") == "sunrise"
    assert longest_word("Who Is Caroline Smith?") == "caroline"  # every word capitalized: the longest of all
    assert longest_word("bake or cook") == "bake" and longest_word("") == ""  # the first of equals
    assert transform("longest-word", "v")({"question": "What did Caroline research?"}) == "research"


def test_a_user_query_function_is_checked_and_called(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "asks.py").write_text("def short(q):\n    return q.split()[-1]\n\ndef bad(q):\n    return 3\n")
    assert transform("asks.py:short", "v", lambda m: None)({"question_id": "q1", "question": "where is it"}) == "it"
    with pytest.raises(RetrieverError, match=r"variant 'v': query asks.py:bad returned int for question 'q1', not"):
        transform("asks.py:bad", "v", lambda m: None)({"question_id": "q1", "question": "x"})
    with pytest.raises(ConfigError, match="query 'asks.py' is not keywords"):
        check_query("asks.py", "w")


def test_editing_a_query_function_changes_the_variant_s_code_fingerprint(tmp_path, monkeypatch):
    from memobench.catalog.registry import code_fingerprint
    from memobench.catalog.variants import resolve

    monkeypatch.chdir(tmp_path)
    (tmp_path / "asks.py").write_text("def short(q):\n    return q\n")
    search = {"body": {"namespace": "{namespace}", "query": "{query}", "k": "{k}"}}
    v = resolve("svc", "s", {"svc": {"system": {"url": "http://x", "query": "asks.py:short",
                                                "endpoints": {"search": search}}}})
    plain = resolve("svc", "s", {"svc": {"system": {"url": "http://x"}}})
    script = tmp_path / "script.py"
    script.write_text("")
    before = code_fingerprint(v, script)
    assert code_fingerprint(plain, script) != before
    (tmp_path / "asks.py").write_text("def short(q):\n    return q.lower()\n")
    assert code_fingerprint(v, script) != before


def test_assigned_ids_are_read_from_a_path_or_a_pattern_one_or_a_batch_of_them():
    from memobench.services.operations.calls import assigned_ids

    assert assigned_ids({"data": {"id": 17}}, {"id": "data.id"}, None, "w") == ["17"]
    assert assigned_ids({"ids": ["a", 2]}, {"id": "ids"}, 2, "w") == ["a", "2"]
    assert assigned_ids("Filed 2 notes: #7, #8.", {"id_pattern": r"#(\d+)"}, 2, "w") == ["7", "8"]
    assert assigned_ids({"note": "saved as n-3"}, {"id_pattern": r"as (n-\d+)"}, None, "w") == ["n-3"]
    with pytest.raises(RetrieverError, match=r"the ids at 'ids' are \[1\], not a list of the 2 sessions"):
        assigned_ids({"ids": [1]}, {"id": "ids"}, 2, "w")
    with pytest.raises(RetrieverError, match=r"id_pattern '#\(\\\\d\+\)' found 1 id\(s\) in the answer, not 2"):
        assigned_ids("Filed: #7", {"id_pattern": r"#(\d+)"}, 2, "w")
    with pytest.raises(RetrieverError, match="the answer is text, not JSON, so nothing sits at 'data.id'"):
        assigned_ids("OK", {"id": "data.id"}, None, "w")
    with pytest.raises(RetrieverError, match="the id at .id. is true, not a string or a number"):
        assigned_ids({"id": True}, {"id": "id"}, None, "w")


def test_a_part_key_that_is_another_session_id_is_one_line():
    # "a" sent in parts is "a~p1", "a~p2", ...: a result naming "a~p1" would be read as the other session
    with pytest.raises(RetrieverError, match="sessions 'a' and 'a~p1' are both sent with the key 'a~p1'"):
        items([_session("a", "one " * 30), _session("a~p1", "two")], render_spec({"max_chars": 60}, "w"), "w")
    with pytest.raises(RetrieverError, match="sessions 'a~p1' and 'a' are both sent with the key 'a~p1'"):
        items([_session("a~p1", "two"), _session("a", "one " * 30)], render_spec({"max_chars": 60}, "w"), "w")
