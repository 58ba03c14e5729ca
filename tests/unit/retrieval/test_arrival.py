"""Whether what a system variant sent arrived (services/operations/arrival.py): answers
in words that refuse an ingest, a reset or a count (config ``refused`` and
``accepted``), a count read from words (``pattern``), the confirmation
searches of a service without count, and the copy and part key forms
(services/sent/rendering.py) a server whose keys allow fewer characters needs."""

from __future__ import annotations

import json

import pytest

from memobench.catalog.variants import resolve
from memobench.core.errors import ConfigError
from memobench.services.operations.arrival import Refused, came_back, check_answer, confirm_queries, count_in_words
from memobench.services.sent.rendering import items, positions, render_spec
from memobench.retrieval.returned import RetrieverError
from memobench.services.operations.calls import count_of, ingest_namespace, reset_namespace
from memobench.services.definition.variant import definition, public
from memobench.services.transport.client import Call, ServiceError

REFUSAL = "Failed to save context item: Key contains special characters"


def _session(sid: str, *texts: str, roles=("user", "assistant")) -> dict:
    return {"id": sid, "date": "2023/05/20", "turns": [{"role": roles[i % len(roles)], "content": t}
                                                       for i, t in enumerate(texts)]}


def _spec(tools: dict, **system) -> dict:
    return resolve("svc", "s", {"svc": {"system": {"mcp": {"command": "srv"}, "tools": tools, **system}}}).retriever


class _Client:
    """Answers each operation with what ``answers`` gives it (a function of the values, or a value)."""

    def __init__(self, **answers):
        self.answers, self.asked = answers, []

    def once(self, op, values, retries=None):
        self.asked.append((op, values))
        answer = self.answers[op]
        answer = answer(values) if callable(answer) else answer
        if isinstance(answer, Exception):
            raise answer
        return answer, Call(0.001, 1)


# ---- refusals in words


def test_a_refusal_in_words_is_refused_and_names_the_request_the_words_and_the_setting():
    op = {"refused": "^Failed"}
    check_answer("Saved context item a", op, "tools.ingest", "ingest of session 'a'")
    with pytest.raises(Refused) as e:
        check_answer(REFUSAL, op, "tools.ingest", "ingest of session 'a~2' into namespace 'ns'")
    assert str(e.value) == (f"ingest of session 'a~2' into namespace 'ns' was refused: the service answered "
                            f"{REFUSAL!r} (tools.ingest.refused matches)")
    # a JSON answer is read as its JSON text (a string result the SDK wraps as {"result": ...})
    with pytest.raises(Refused, match="was refused"):
        check_answer({"result": REFUSAL}, {"refused": "Failed to save"}, "tools.ingest", "ingest")
    check_answer({"result": REFUSAL}, {}, "tools.ingest", "ingest")  # nothing configured: nothing read


def test_an_answer_that_accepted_does_not_match_is_refused():
    op = {"accepted": r"^Saved\b"}
    check_answer("Saved context item a", op, "endpoints.reset", "reset")
    with pytest.raises(Refused, match=r"reset of namespace 'ns' was not accepted: the service answered 'Quota "
                                      r"exceeded', which endpoints.reset.accepted \('\^Saved\\\\b'\) does not match"):
        check_answer("Quota exceeded", op, "endpoints.reset", "reset of namespace 'ns'")
    with pytest.raises(Refused):
        check_answer(None, op, "endpoints.reset", "reset")  # an empty answer is no acceptance


def test_an_ingest_refused_in_words_names_the_key_and_stops_there():
    spec = _spec({"ingest": {"tool": "save", "arguments": {"key": "{session.key}", "value": "{session.text}"},
                             "refused": "^Failed"}})
    client = _Client(ingest=lambda v: REFUSAL if "~" in v["session.key"] else "Saved")
    sessions = [_session("a", "one"), _session("b", "two"), _session("a", "three"), _session("c", "four")]
    with pytest.raises(Refused) as e:
        ingest_namespace(client, spec, "ns", sessions, "variant 'svc'")
    assert "ingest of session 'a~2' into namespace 'ns' was refused" in str(e.value)
    assert [v["session.key"] for _, v in client.asked] == ["a", "b", "a~2"]  # nothing sent after the refusal


def test_a_reset_refused_in_words_fails_unless_it_may():
    tools = {"reset": {"tool": "wipe", "arguments": {"ns": "{namespace}"}, "refused": "no such"}}
    client = _Client(reset="Error: no such folder")
    with pytest.raises(Refused, match="reset of namespace 'ns' was refused"):
        reset_namespace(client, _spec(tools), "ns")
    assert reset_namespace(client, _spec({"reset": {**tools["reset"], "may_fail": True}}), "ns") is None
    assert reset_namespace(_Client(reset="Wiped"), _spec(tools), "ns") is not None


# ---- a count in words


def test_a_count_is_read_from_words():
    assert count_in_words("Context Items: 4", {"pattern": r"Context Items: (\d+)"}, "w") == 4
    assert count_in_words({"text": "holds 1,204 items"}, {"pattern": r"holds ([\d,]+) items"}, "w") == 1204
    # with length: how many times it matches (a listing in words)
    assert count_in_words("- #1 a\n- #2 b\n- #3 c\n", {"pattern": r"#(\d+)", "length": True}, "w") == 3
    with pytest.raises(RetrieverError, match=r"w: count.pattern 'Items: \(\\\\d\+\)' does not match the answer "
                                             r"'No items'"):
        count_in_words("No items", {"pattern": r"Items: (\d+)"}, "w")
    with pytest.raises(RetrieverError, match="read 'four' in the answer 'Items: four', not a whole number"):
        count_in_words("Items: four", {"pattern": r"Items: (\w+)"}, "w")


def test_count_of_reads_a_pattern_and_a_refusal():
    spec = _spec({"count": {"tool": "stats", "arguments": {"ns": "{namespace}"}, "pattern": r"Context Items: (\d+)",
                            "refused": "^Error"}}, answer="plain")
    assert count_of(_Client(count="Namespace ns\nContext Items: 4"), spec, "ns", "w")[0] == 4
    with pytest.raises(Refused, match="count of namespace 'ns' was refused"):
        count_of(_Client(count="Error: database locked"), spec, "ns", "w")


# ---- the settings, checked


@pytest.mark.parametrize("tools,why", [
    ({"ingest": {"refused": "("}}, "tools: ingest: refused: '(' is not a regex"),
    ({"ingest": {"refused": ""}}, "tools: ingest: refused: '' is not a regex (a non-empty string)"),
    ({"reset": {"accepted": 3}}, "tools: reset: accepted: 3 is not a regex"),
    ({"search": {"refused": "x"}}, "tools: search: unknown key 'refused' (known: tool, arguments)"),
    ({"count": {"pattern": r"Items: \d+"}}, "tools: count: pattern: 'Items: \\\\d+' has no group: the count is its "
                                            "group 1"),
    ({"count": {"pattern": r"(\d+)", "sessions": "n"}}, "tools: count: give sessions (a path in a JSON answer) or "
                                                        "pattern"),
])
def test_reading_settings_are_checked_in_one_line(tools, why):
    with pytest.raises(ConfigError) as e:
        _spec(tools)
    assert str(e.value).startswith("variant 'svc': system") and why in str(e.value) and "\n" not in str(e.value), \
        str(e.value)


def test_reading_settings_are_part_of_the_definition():
    plain = resolve("svc", "s", {"svc": {"system": {"url": "http://x"}}})
    refused = resolve("svc", "s", {"svc": {"system": {"url": "http://x", "endpoints": {"ingest": {"refused": "^E"}}}}})
    assert definition(plain) != definition(refused)


# ---- confirmation, for a service without count


def test_confirm_is_search_without_count_none_is_stated_and_count_confirms_itself():
    def variant(**system):
        return resolve("svc", "s", {"svc": {"system": {"url": "http://x", **system}}})

    default = variant(endpoints={"count": None})
    assert definition(variant(endpoints={"count": None}, confirm="search")) == definition(default)
    none = variant(endpoints={"count": None}, confirm="none")
    assert definition(none) != definition(default)
    assert public(none.retriever, "session")["confirm"] == "none" and "confirm" not in public(default.retriever,
                                                                                              "session")
    assert "arrival not confirmed (confirm: none)" in none.harness and "confirm" not in default.harness
    with pytest.raises(ConfigError, match="confirm 'maybe' is not one of search, none"):
        variant(endpoints={"count": None}, confirm="maybe")
    with pytest.raises(ConfigError, match="confirm is for a service without count; this one's count confirms"):
        variant(confirm="none")


def test_each_item_s_query_is_its_rarest_words_user_turns_first():
    sessions = [_session("a", "the lake trip was lovely", "kayak paddles are carbon"),
                _session("b", "the lake was cold", "trout swim there"),
                _session("c"),
                _session("d", "what did the", "is it")]
    a, b, c, d = confirm_queries(sessions)
    assert a == "trip kayak" and b == "cold trout"  # one word a turn, each held by no other session
    assert c is None and d is None  # no turns, or only stop words: nothing to search for
    words = confirm_queries([_session("x", *[f"turn{i} shared" for i in range(6)])])[0].split()
    assert words == ["turn0", "turn1", "turn2", "turn4"]  # at most four turns': the user's (0, 2, 4) first
    # a user turn's word is asked even when other turns have rarer ones: a server may index the user's alone
    y = _session("y", "alpha", "bravo", "charlie", "delta", "echo", "common",
                 roles=("assistant",) * 5 + ("user",))
    assert confirm_queries([y, _session("z", "common words")])[0] == "alpha bravo charlie common"


def test_an_item_came_back_when_a_result_names_it():
    sent = items([_session("a", "x"), _session("a", "y")], None, "w")
    assert came_back(sent[1], ["a~2"], True, None) and not came_back(sent[1], ["a"], True, None)
    assert came_back(sent[0], ["17"], True, {"17": "a"}) and not came_back(sent[0], ["18"], True, {"17": "a"})
    assert came_back(_session("a", "x"), ["b", "a"], False, None)
    turns = {"id": "s", "date": "d", "turns": [{"id": "s_1", "role": "user", "content": "x"}]}
    assert came_back(turns, ["s_1"], False, None) and not came_back(turns, ["t_1"], False, None)


# ---- key forms


def test_key_forms_a_server_accepts_name_each_copy_and_part_and_are_read_back():
    r = render_spec({"max_chars": 40, "copy_key": "{session.id}.{copy}", "part_key": "{session.key}.p{part}"}, "w")
    long = _session("a", "one two three", "four five six")  # 19 + 1 + 24 characters: two parts
    sent = items([long, _session("b", "x"), long], r, "w")
    assert [i.key for i in sent] == ["a.p1", "a.p2", "b", "a.2.p1", "a.2.p2"]
    assert positions(["a.2.p2", "b", "a.p1", "a.2.p1"], None, sent, None, "w") == ([2, 1, 0], None)
    with pytest.raises(RetrieverError, match="returned session id 'a~2', which is not in its haystack"):
        positions(["a~2"], None, sent, None, "w")


def test_key_forms_at_their_defaults_keep_the_render_and_the_definition():
    assert render_spec({"copy_key": "{session.id}~{copy}", "part_key": "{session.key}~p{part}"}, "w") == \
        render_spec({}, "w")

    def variant(render):
        return resolve("svc", "s", {"svc": {"system": {"url": "http://x", "render": render, "endpoints": {
            "ingest": {"body": {"k": "{session.key}", "t": "{session.text}"}}}}}})

    assert definition(variant({"max_chars": 99, "copy_key": "{session.id}~{copy}"})) == \
        definition(variant({"max_chars": 99}))
    assert definition(variant({"max_chars": 99, "copy_key": "{session.id}.{copy}"})) != \
        definition(variant({"max_chars": 99}))


@pytest.mark.parametrize("render,why", [
    ({"copy_key": "{session.id}"}, "render: copy_key '{session.id}' must name {session.id} and {copy}"),
    ({"part_key": "{session.key}.{copy}"}, "render: part_key '{session.key}.{copy}' must name {session.key} and "
                                           "{part} and no other placeholder"),
    ({"copy_key": 3}, "render: copy_key must be a template string"),
])
def test_key_forms_name_their_placeholders(render, why):
    with pytest.raises(ConfigError) as e:
        render_spec(render, "w")
    assert why in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_key_form_that_makes_two_items_one_key_is_one_line():
    # a copy key that is another session's id
    with pytest.raises(RetrieverError, match=r"the key 'a\.2' of a repeated session is also a session id of the "
                                             r"haystack \(render.copy_key '\{session.id\}.\{copy\}'\)"):
        items([_session("a", "x"), _session("a.2", "y"), _session("a", "z")],
              render_spec({"copy_key": "{session.id}.{copy}"}, "w"), "w")
    # a part's key that is another session's id, that session itself sent in parts (so no key of its own is it)
    long = ("one two three", "four five six")
    r = render_spec({"max_chars": 40, "part_key": "{session.key}.p{part}"}, "w")
    with pytest.raises(RetrieverError, match=r"sessions 'a' and 'a.p1' are both sent with the key 'a.p1' \(a part's "
                                             r"key, render.part_key '\{session.key\}.p\{part\}', is also another "
                                             r"session's id or key\)"):
        items([_session("a", *long), _session("a.p1", *long)], r, "w")
    # forms whose keys run together: the first copy's 21st part and the second copy's ("a2") first are "a21"
    r = render_spec({"max_chars": 16, "copy_key": "{session.id}{copy}", "part_key": "{session.key}{part}"}, "w")
    many = tuple(f"w{i}" for i in range(22))  # a part a turn
    with pytest.raises(RetrieverError, match="sessions 'a' and 'a2' are both sent with the key 'a21'"):
        items([_session("a", *many), _session("a", "x", "y")], r, "w")


def test_a_service_error_is_still_a_failure_with_refused_configured():
    spec = _spec({"ingest": {"tool": "save", "arguments": {"key": "{session.key}"}, "refused": "^Failed"}})
    with pytest.raises(ServiceError):
        ingest_namespace(_Client(ingest=ServiceError("ingest tool 'save' answered an error: boom")), spec, "ns",
                         [_session("a", "x")], "w")


# ---- in a retrieve job: a service without count that drops sessions


@pytest.fixture(scope="module")
def norm(tmp_path_factory):
    from memobench.datasets.normalize import normalize_longmemeval
    from memobench.tools.generate.longmemeval import write_longmemeval

    root = tmp_path_factory.mktemp("arrival")
    write_longmemeval(root / "lme.json", 4, 6, seed=3, turns=(2, 4), words_per_turn=(4, 20))
    normalize_longmemeval(root / "lme.json", root / "norm", log=lambda m: None)
    return root / "norm"


def test_a_service_without_count_that_drops_sessions_is_caught_by_its_confirmation_searches(norm, fake, tmp_path):
    from tests.helpers.services import rank_one_segment

    url, server = fake("first:3")  # keeps a namespace's first 3 sessions, answering every ingest alike
    entry = {"system": {"url": url, "backoff_s": 0.01, "retries": 1, "check": False, "endpoints": {"count": None}}}
    with pytest.raises(RetrieverError) as e:
        rank_one_segment(norm, tmp_path / "search", "svc", entry)
    said = str(e.value)
    assert "\n" not in said and said.startswith("variant 'svc': ") and "failed at the service" in said
    assert "never came back in a search for its own words" in said and "(system.confirm: search;" in said
    # confirm: none takes the lists as they come: figures, with the setting stated (metrics.json, the label)
    entry["system"]["confirm"] = "none"
    (rankings, outcomes, _), _ = rank_one_segment(norm, tmp_path / "none", "svc", entry)
    assert rankings.num_rows > 0


def test_a_service_that_keeps_everything_is_confirmed_and_its_lists_are_unchanged(norm, fake, tmp_path):
    import pyarrow.parquet as pq

    from memobench.core import layout
    from tests.helpers.services import rank_one_segment

    url, _ = fake()
    entry = {"system": {"url": url, "backoff_s": 0.01, "check": False, "endpoints": {"count": None}}}
    searched = rank_one_segment(norm, tmp_path / "search", "svc", entry)[0]
    entry["system"]["confirm"] = "none"
    unconfirmed = rank_one_segment(norm, tmp_path / "none", "svc", entry)[0]
    assert all(a.equals(b) for a, b in zip(searched, unconfirmed))

    def ops(root):
        rows = pq.read_table(layout.path(layout.TIMINGS, root=root / "results", dataset="lme", variant="svc",
                                         segment="seg1")).to_pylist()
        return [r["operation"] for r in rows]

    assert ops(tmp_path / "search").count("confirm") == ops(tmp_path / "search").count("ingest") > 0
    assert "confirm" not in ops(tmp_path / "none")


class _WordsApi:
    """An HTTP service of the project's API that answers in words, as many do: ``Saved`` or ``Failed to save:
    ...`` for an ingest (refusing session ids that hold ``refuse``, keeping nothing of them), ``Context Items: N``
    for a count; its search answers JSON (the Fake's ranking: sessions holding any query word)."""

    def __init__(self, refuse: str | None):
        import re
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from memobench.services.reference_servers.http_server import reply

        held: dict[str, list[dict]] = {}
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                req = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                ns = req["namespace"]
                with lock:
                    mine = held.setdefault(ns, [])
                    if self.path == "/reset":
                        mine.clear()
                        out = "Cleared"
                    elif self.path == "/ingest":
                        sid = req["session"]["id"]
                        out = "Failed to save: refused " + sid if refuse and refuse in sid else "Saved"
                        if out == "Saved":
                            mine.append(req["session"])
                    elif self.path == "/count":
                        out = f"Namespace {ns}\nContext Items: {len(mine)}"
                    else:
                        asked = set(re.findall(r"\w+", req["query"].lower()))
                        scored = [(len(asked & set(re.findall(r"\w+", " ".join(str(t["content"]) for t in s["turns"])
                                                                .lower()))), i, s["id"]) for i, s in enumerate(mine)]
                        ranked = sorted((x for x in scored if x[0] > 0), key=lambda x: (-x[0], x[1]))[: int(req["k"])]
                        out = json.dumps({"results": [{"id": sid, "score": float(sc)} for sc, _, sid in ranked]})
                reply(self, 200, out.encode(), content_type="text/plain")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _words_entry(url: str) -> dict:
    return {"system": {"url": url, "backoff_s": 0.01, "retries": 1, "check": False,
                       "endpoints": {"ingest": {"refused": "^Failed"}, "count": {"pattern": r"Context Items: (\d+)"}}}}


def test_an_http_service_answering_in_words_is_read_a_refusal_one_line(norm, tmp_path):
    from tests.helpers.services import rank_one_segment

    service = _WordsApi(refuse="answer")  # every haystack holds an answer session
    try:
        with pytest.raises(RetrieverError) as e:
            rank_one_segment(norm, tmp_path, "svc", _words_entry(service.url))
    finally:
        service.close()
    said = str(e.value)
    assert "\n" not in said and said.startswith("variant 'svc': ") and "failed at the service" in said
    assert "ingestion failed: ingest of session 'answer_" in said and "into namespace 'mb-svc-" in said
    assert "the service answered 'Failed to save: refused answer_" in said and "endpoints.ingest.refused" in said


def test_an_http_service_s_count_in_words_confirms_a_namespace_in_a_later_job(norm, tmp_path):
    import pyarrow.parquet as pq

    from memobench.core import layout
    from tests.helpers.services import rank_one_segment

    service = _WordsApi(refuse=None)
    try:
        first, _ = rank_one_segment(norm, tmp_path, "svc", _words_entry(service.url))
        again, _ = rank_one_segment(norm, tmp_path, "svc", _words_entry(service.url))
    finally:
        service.close()
    assert all(a.equals(b) for a, b in zip(first, again)) and first[0].num_rows > 0
    ops = {r["operation"] for r in pq.read_table(layout.path(layout.TIMINGS, root=tmp_path / "results", dataset="lme",
                                                             variant="svc", segment="seg1")).to_pylist()}
    assert "count" in ops and not ops & {"ingest", "reset", "confirm"}  # confirmed by its count, read from words
