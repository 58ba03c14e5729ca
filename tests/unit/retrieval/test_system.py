"""A memory service as a variant (services/job/rank.py), driven over real HTTP
on 127.0.0.1: the reference server (services/reference_servers/http_server.py) gives the in-process
reference retriever's lists exactly, repeated session ids included; a resumed
job confirms what is ingested and sends nothing again; and the faults a
service has (5xx bursts, timeouts, a connection dropped mid-ingest, a restart
that forgot everything, malformed JSON, unknown or repeated ids, sessions
leaking between namespaces) are retried, counted, or one line naming the
variant and the question. A third-party API shape is driven by config alone."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from memobench.catalog.variants import resolve
from memobench.core import layout
from memobench.core.errors import ConfigError
from memobench.datasets.normalize import normalize_longmemeval
from memobench.retrieval.harness import CHECKS_KEY
from memobench.retrieval.returned import RetrieverError
from memobench.services.reference_servers.http_server import reply, serve
from memobench.services.reference_servers.store import Store
from memobench.tools.generate.longmemeval import write_longmemeval
from tests.helpers.services import rank_one_segment as _rank


@pytest.fixture(scope="module")
def norm(tmp_path_factory):
    """A generated LongMemEval file with the generator's edge cases (repeated session ids among them), normalized."""
    root = tmp_path_factory.mktemp("svc")
    raw = root / "lme.json"
    write_longmemeval(raw, 8, 8, seed=3, turns=(2, 4), words_per_turn=(4, 20), spice=True)
    out = root / "norm"
    normalize_longmemeval(raw, out, log=lambda m: None)
    return out


def _start(server) -> str:
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def reference():
    """The reference server (bm25s over the user turns, LongMemEval's rule): (url, server)."""
    server = serve("bm25s", "user")
    yield _start(server), server
    server.shutdown()
    server.server_close()


class Proxy(ThreadingHTTPServer):
    """Forwards to ``upstream``; ``fault(path, body, n)`` (n: the path's request count, from 1) may answer
    instead: None (forward), a number (sleep that long, then forward), "close" (drop the connection),
    (status, bytes) (answer that); ``rewrite(path, obj)`` may change a forwarded answer."""

    daemon_threads = True

    def __init__(self, upstream: str, fault=None, rewrite=None):
        self.upstream, self.fault, self.rewrite = upstream, fault, rewrite
        self.counts: dict[str, int] = {}
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _ProxyHandler)


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _send(self, status: int, body: bytes) -> None:
        reply(self, status, body)

    def do_POST(self):
        s = self.server
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with s.lock:
            n = s.counts[self.path] = s.counts.get(self.path, 0) + 1
        action = s.fault(self.path, json.loads(body), n) if s.fault else None
        if action == "close":
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if isinstance(action, tuple):
            self._send(*action)
            return
        if isinstance(action, (int, float)):
            time.sleep(action)
        req = urllib.request.Request(s.upstream + self.path, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req) as resp:
            obj = json.loads(resp.read())
        if s.rewrite:
            obj = s.rewrite(self.path, obj)
        self._send(200, json.dumps(obj).encode())


@pytest.fixture
def proxy(reference):
    made = []

    def make(fault=None, rewrite=None) -> tuple[str, Proxy]:
        p = Proxy(reference[0], fault, rewrite)
        made.append(p)
        return _start(p), p

    yield make
    for p in made:
        p.shutdown()
        p.server_close()


@pytest.fixture(scope="module")
def expected(norm, tmp_path_factory):
    """The in-process reference variant's (rankings, outcomes, deep): what the reference server must give."""
    return _rank(norm, tmp_path_factory.mktemp("expected"), "bm25s")[0]


def _timings(root: Path, name: str):
    return pq.read_table(layout.path(layout.TIMINGS, root=root / "results", dataset="lme", variant=name,
                                     segment="seg1")).to_pylist()


def _system(url: str, **over) -> dict:
    return {"system": {"url": url, "backoff_s": 0.01, **over}}


def _unchecked(url: str, **over) -> dict:
    """A proxy's fault is the run's own to meet: the conformance check, which would meet it first, is off."""
    return _system(url, check=False, **over)


def _checks(outcomes) -> dict:
    return json.loads(outcomes.schema.metadata[CHECKS_KEY])


def test_the_reference_server_gives_the_in_process_lists(norm, reference, expected, tmp_path):
    rk, oc, dp = expected
    (srk, soc, sdp), lines = _rank(norm, tmp_path / "b", "svc", _system(reference[0]))
    ids = pq.read_table(layout.table_paths(norm)["haystacks"]).column("session_id").to_pylist()
    assert len(ids) > len(set(ids))  # the file repeats session ids (one haystack lists one id twice or more)
    assert srk.equals(rk) and sdp.equals(dp)
    assert soc.drop_columns([]).select(oc.column_names).equals(oc.select(oc.column_names))
    checks = _checks(soc)
    ranked = [r for r in oc.to_pylist() if r["status"] == "evaluated" and r["pool_size"]]
    # a haystack ingested again into a fresh namespace and searched again, each warm repeat compared: all the same
    replicas = checks["system_determinism"].pop("replicas")
    assert replicas["namespaces"] == 1 and replicas["questions"] >= 1 and replicas["differing"] == []
    assert replicas["first"] == replicas["replica"] and replicas["unanswered"] == 0
    assert checks == {"system_errors": {"count": 0, "questions": [], "max": 0},
                      "system_determinism": {"repeats": {"checked": len(ranked), "differing": []},
                                      "concurrent": {"differing": []}}}
    assert any("ingested again into mb-svc-" in line and ": 0 lists differ" in line for line in lines), lines
    rows = _timings(tmp_path / "b", "svc")
    searches = [r for r in rows if r["operation"] == "search"]
    assert sum(r["phase"] == "cold" for r in searches) >= 1
    assert len(searches) == 2 * len(ranked)  # each search once more, timed as warm
    assert all(r["ok"] and r["seconds"] > 0 for r in searches)
    assert any("ingested" in line for line in lines)


def test_reset_isolation_gives_the_same_lists(norm, reference, expected, tmp_path):
    rk, _, dp = expected
    (srk, soc, sdp), _ = _rank(norm, tmp_path / "b", "svc", _system(reference[0], isolation="reset"))
    assert srk.equals(rk) and sdp.equals(dp)
    # the replica: the one namespace emptied and filled again with one haystack, its questions only searched again
    replicas = _checks(soc)["system_determinism"]["replicas"]
    assert replicas["questions"] >= 1 and replicas["differing"] == [] and replicas["unanswered"] == 0


def test_a_second_job_confirms_by_count_and_ingests_nothing(norm, reference, tmp_path):
    first, _ = _rank(norm, tmp_path, "svc", _system(reference[0]))
    again, lines = _rank(norm, tmp_path, "svc", _system(reference[0]))
    ops = {r["operation"] for r in _timings(tmp_path, "svc")}
    assert "ingest" not in ops and "reset" not in ops and "count" in ops
    # only the determinism check's replica, a fresh namespace of its own (kept out of the timings)
    assert [line for line in lines if "ingested" in line and "-replica-" not in line] == []
    assert again[0].equals(first[0]) and again[2].equals(first[2])


def test_a_restarted_server_that_forgot_is_ingested_again(norm, reference, tmp_path):
    first, _ = _rank(norm, tmp_path, "svc", _system(reference[0]))
    store: Store = reference[1].RequestHandlerClass.store
    store.namespaces.clear()  # what a restart of an in-memory server leaves
    again, lines = _rank(norm, tmp_path, "svc", _system(reference[0]))
    assert any("holds 0 sessions, not the" in line for line in lines)
    assert "ingest" in {r["operation"] for r in _timings(tmp_path, "svc")}
    assert again[0].equals(first[0]) and again[2].equals(first[2])


def test_a_5xx_burst_is_retried(norm, reference, proxy, expected, tmp_path):
    url, p = proxy(fault=lambda path, body, n: (503, b'{"error": "busy"}') if path == "/search" and n <= 3 else None)
    rk, _, dp = expected
    (srk, soc, sdp), _ = _rank(norm, tmp_path / "b", "svc", _unchecked(url))
    assert srk.equals(rk) and sdp.equals(dp) and _checks(soc)["system_errors"]["count"] == 0
    assert max(r["attempts"] for r in _timings(tmp_path / "b", "svc") if r["operation"] == "search") == 4


def test_a_connection_dropped_mid_ingest_ingests_the_namespace_again_once(norm, reference, proxy, expected,
                                                                          tmp_path):
    url, p = proxy(fault=lambda path, body, n: "close" if path == "/ingest" and n == 3 else None)
    rk, _, dp = expected
    (srk, _, sdp), _ = _rank(norm, tmp_path / "b", "svc", _unchecked(url))
    assert srk.equals(rk) and sdp.equals(dp)  # no session twice in its namespace (count checked it too)


def test_searches_past_the_timeout_are_counted_system_errors(norm, reference, proxy, tmp_path):
    url, _ = proxy(fault=lambda path, body, n: 0.5 if path == "/search" else None)
    (_, oc, dp), lines = _rank(norm, tmp_path, "svc", _unchecked(url, timeout_s=0.1, retries=0, max_errors=100,
                                                                warm_repeats=0))
    errors = _checks(oc)["system_errors"]
    evaluated = [r["question_id"] for r in oc.to_pylist() if r["status"] == "evaluated" and r["pool_size"]]
    assert errors["count"] == len(evaluated) > 0 and errors["questions"] == evaluated
    assert dp.num_rows == 0  # every question a miss with no list
    assert any("system error (search /search failed 1 time(s), last: timed out" in line for line in lines)


def test_more_errors_than_allowed_stop_the_job_in_one_line(norm, reference, proxy, tmp_path):
    url, _ = proxy(fault=lambda path, body, n: (502, b"bad gateway") if path == "/search" else None)
    with pytest.raises(RetrieverError) as e:
        _rank(norm, tmp_path, "svc", _unchecked(url, retries=1, max_errors=1))
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("variant 'svc': 2 questions of this job failed at the service, "
                                              "more than system.max_errors (1); first: ")
    assert "HTTP 502 bad gateway" in msg


def _first_result(path, obj, change):
    if path == "/search" and obj["results"]:
        obj["results"] = change(obj["results"])
    return obj


@pytest.mark.parametrize("rewrite,why", [
    (lambda r: [{"id": "no-such-session", "score": 1.0}] + r[1:], "returned session id 'no-such-session', which is "
                                                                    "not in its haystack"),
    (lambda r: [r[0]] + r, "times; the haystack lists it"),
    (lambda r: [{"session": r[0]["id"]}] + r[1:], "result 1: no 'id' in the response (system.results.id is 'id')"),
    (lambda r: [{"id": 7}] + r[1:], "result 1: the id 7 is not a string"),
])
def test_a_bad_result_is_one_line_naming_variant_and_question(norm, reference, proxy, tmp_path, rewrite, why):
    url, _ = proxy(rewrite=lambda path, obj: _first_result(path, obj, rewrite))
    with pytest.raises(RetrieverError) as e:
        _rank(norm, tmp_path, "svc", _unchecked(url))
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("variant 'svc': question ") and why in msg, msg


def test_a_turn_variant_of_a_session_server_says_the_server_ranks_sessions(norm, reference, tmp_path):
    with pytest.raises(RetrieverError) as e:
        _rank(norm, tmp_path, "svc", {**_system(reference[0]), "grain": "turn"})
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("variant 'svc': question ") and "which is not in its haystack" in msg
    assert msg.endswith("; it is a session id of the haystack: the service ranks sessions (start the reference "
                        "server with --grain turn, or give this variant grain: session)"), msg


def test_malformed_json_is_one_line(norm, reference, proxy, tmp_path):
    url, _ = proxy(fault=lambda path, body, n: (200, b"{not json") if path == "/search" else None)
    with pytest.raises(RetrieverError) as e:
        _rank(norm, tmp_path, "svc", _unchecked(url))
    assert "\n" not in str(e.value) and "answered a body that is not JSON: '{not json'" in str(e.value)


def test_a_service_that_mixes_namespaces_is_detected(norm, reference, proxy, tmp_path):
    url, _ = proxy(rewrite=lambda path, obj: {"sessions": obj["sessions"] + 1} if path == "/count" else obj)
    with pytest.raises(RetrieverError) as e:
        _rank(norm, tmp_path, "svc", _unchecked(url))
    assert "sessions after" in str(e.value) and "the service mixes namespaces" in str(e.value)


class _OtherApi(BaseHTTPRequestHandler):
    """A service with its own API shape: /v1/{collection}/clear, /v1/{collection}/add {"doc": {...}},
    /v1/{collection}/query {"text", "limit"} -> {"data": {"hits": [{"doc": {"sid"}, "relevance"}]}}, no count."""

    protocol_version = "HTTP/1.1"
    store = Store("bm25s", "user")

    def log_message(self, *args):
        pass

    def do_POST(self):
        _, _, collection, op = self.path.split("/")
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        if op == "clear":
            out = self.store.reset(collection)
        elif op == "add":
            out = self.store.ingest(collection, {"id": body["doc"]["sid"], "turns": body["doc"]["messages"]})
        else:
            hits = self.store.search(collection, body["text"], body["limit"])["results"]
            out = {"data": {"hits": [{"doc": {"sid": h["id"]}, "relevance": h["score"]} for h in hits]}}
        reply(self, 200, json.dumps(out).encode())


def test_a_service_of_another_shape_is_driven_by_config_alone(norm, expected, tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OtherApi)
    url = _start(server)
    try:
        rk, _, dp = expected
        entry = _system(url, endpoints={
            "reset": {"path": "/v1/{namespace}/clear", "body": {}},
            "ingest": {"path": "/v1/{namespace}/add",
                       "body": {"doc": {"sid": "{session.id}", "messages": "{session.turns}"}}},
            "search": {"path": "/v1/{namespace}/query", "body": {"text": "{question.text}", "limit": "{k}"}},
            "count": None}, results={"list": "data.hits", "id": "doc.sid", "score": "relevance"})
        (srk, _, sdp), _ = _rank(norm, tmp_path / "b", "svc", entry)
        assert srk.equals(rk) and sdp.equals(dp)
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("entry,why", [
    ({"system": {}}, "give url (the service's HTTP API, http://host:port) or mcp"),
    ({"system": {"url": "http://x", "mcp": {"url": "http://x/mcp"}}}, "or mcp"),
    ({"system": {"mcp": {}}}, "mcp: give command (the server to start, over stdio) or url"),
    ({"system": {"mcp": {"command": []}}}, "mcp: command must be a list of strings"),
    ({"system": {"mcp": {"url": "x"}}}, "mcp: url 'x' is not an http:// or https:// URL"),
    ({"system": {"mcp": {"url": "http://x/mcp", "env": {"A": "1"}}}}, "env is for a server started by command"),
    ({"system": {"mcp": {"command": "srv", "port": 1}}}, "mcp: unknown key(s) port"),
    ({"system": {"mcp": {"command": "srv"}, "endpoints": {}}}, "endpoints are an HTTP service's"),
    ({"system": {"url": "http://x", "tools": {}}}, "tools are an MCP server's"),
    ({"system": {"mcp": {"command": "srv"}, "tools": {"search": {"tool": ""}}}}, "tools: search: tool must be"),
    ({"system": {"mcp": {"command": "srv"}, "tools": {"ingest": {"arguments": {"q": "{question.text}"}}}}},
     "tools: ingest: the arguments name question.text, which ingest does not have"),
    ({"system": {"url": "ftp://x"}}, "is not an http:// or https:// URL"),
    # sent as written, a placeholder would be the same literal text for every namespace
    ({"system": {"mcp": {"url": "http://x/mcp/{namespace}"}}}, "url: '{namespace}' is not filled in a service's URL"),
    ({"system": {"url": "http://x/{namespace}"}}, "url: '{namespace}' is not filled in a service's URL"),
    ({"system": {"url": "http://x/${NAME}/{k}"}}, "url: '{k}' is not filled in a service's URL"),
    # fewer results would make hit@10 and MRR those of shorter lists, with no note
    ({"system": {"url": "http://x", "k": 5}}, "k 5 asks each search for fewer than 10 results; hit@10 and MRR read 10"),
    ({"system": {"url": "http://x", "degenerate": "ignore"}}, "degenerate 'ignore' is not one of warn, error"),
    ({"system": {"url": "http://x", "isolation": "none"}}, "isolation 'none' is not one of namespace, reset"),
    ({"system": {"url": "http://x", "endpoints": {"search": {"body": {"q": "{session.id}"}}}}},
     "endpoints: search: the body names session.id, which search does not have"),
    ({"system": {"url": "http://x", "endpoints": {"ingest": None}}}, "endpoints: ingest is required"),
    ({"system": {"url": "http://x", "endpoints": {"delete": {}}}}, "unknown operation 'delete'"),
    ({"system": {"url": "http://x", "results": {"hits": "x"}}}, "results: unknown key(s) hits"),
    *[({"system": {"url": "http://x", "namespace_prefix": bad}}, f"namespace_prefix {bad!r} may not hold")
      for bad in ("../../../../outside/x-", "a/b-", "a\\b", "mb\x00-", "mb\n-", "..")],
    # a secret written out would be in the rule's params (Snakemake's metadata)
    ({"system": {"url": "http://alice:PW@x/api"}}, "url: 'http://***@x/api' holds a secret written out"),
    ({"system": {"url": "http://TOKEN@x"}}, "url: 'http://***@x' holds a secret written out"),
    ({"system": {"url": "http://x/?v=$V&api_key=S"}}, "url: 'http://x/?v=***&api_key=***' holds a secret"),
    ({"system": {"mcp": {"url": "http://x/mcp?key=S"}}}, "mcp: url: 'http://x/mcp?key=***' holds a secret"),
    # brace forms that are no placeholder would be the same literal text in every request
    *[({"system": {"url": "http://x", "endpoints": {"search": {"body": {"query": q}}}}},
       f"endpoints: search: body: {b!r} is not a placeholder (known: k, namespace, query, question.date")
      for q, b in [("{question_text}", "{question_text}"), ("{Question.Text}", "{Question.Text}"),
                   ("{ question.text }", "{ question.text }"), ("about {question.text", "{question.text"),
                   ("{question.texts}", "{question.texts}"), ("a}", "}")]],
    ({"system": {"url": "http://x", "endpoints": {"search": {"path": "/q/{name_space}"}}}},
     "endpoints: search: path: '{name_space}' is not a placeholder"),
    ({"system": {"url": "http://x", "endpoints": {"ingest": {"body": {"{namespace}": "{session}"}}}}},
     "endpoints: ingest: body: '{namespace}' is not a placeholder"),
    ({"system": {"mcp": {"command": "srv"}, "tools": {"search": {"arguments": {"q": ["{question}"]}}}}},
     "tools: search: arguments: '{question}' is not a placeholder"),
])
def test_config_errors_name_the_variant(entry, why):
    with pytest.raises(ConfigError) as e:
        resolve("svc", "s", {"svc": entry})
    assert str(e.value).startswith("variant 'svc': system") and why in str(e.value), str(e.value)


def test_results_without_scores_keep_their_order(norm, reference, proxy, expected, tmp_path):
    def drop_second_score(path, obj):
        if path == "/search" and len(obj["results"]) > 1:
            del obj["results"][1]["score"]
        return obj

    url, _ = proxy(rewrite=drop_second_score)
    (srk, _, sdp), _ = _rank(norm, tmp_path, "svc", _system(url))
    rk, _, dp = expected
    assert srk.equals(rk)  # the same lists; the deep scores are then 51 - rank
    assert sdp.column("session_id").equals(dp.column("session_id"))
    assert sdp.column("score").to_pylist() == [51.0 - r for r in sdp.column("rank").to_pylist()]


def test_a_refused_ingestion_is_one_line(norm, reference, proxy, tmp_path):
    url, _ = proxy(fault=lambda path, body, n: (413, b'{"error": "session too large"}') if path == "/ingest" else None)
    with pytest.raises(RetrieverError) as e:
        _rank(norm, tmp_path, "svc", _unchecked(url))
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("variant 'svc': namespace 'mb-svc-")
    assert "ingest /ingest answered HTTP 413: {\"error\": \"session too large\"}" in msg


@pytest.mark.parametrize("header,seconds", [(None, None), ("", None), ("app;dur=0.5", 0.0005),
                                            ("app;dur=1.5, db;desc=\"x\";dur=2", 0.0035), ("cache;desc=hit", None),
                                            ('app;dur="12"', 0.012)])
def test_server_timing_is_read_as_the_w3c_header_says(header, seconds):
    from memobench.services.transport.client import server_seconds

    got = server_seconds(header)
    assert got == seconds if seconds is None else abs(got - seconds) < 1e-12


def test_the_server_s_own_time_is_recorded_beside_the_client_s(norm, reference, tmp_path):
    _rank(norm, tmp_path, "svc", _system(reference[0]))
    searches = [r for r in _timings(tmp_path, "svc") if r["operation"] == "search"]
    assert searches and all(0 <= r["server_seconds"] < r["seconds"] for r in searches)


def test_an_unset_environment_name_in_mcp_env_is_one_line_before_the_server_starts(norm, tmp_path, monkeypatch):
    import sys

    pytest.importorskip("mcp")
    monkeypatch.delenv("MB_UNSET_KEY", raising=False)
    started = tmp_path / "started"
    command = [sys.executable, "-c", f"open({str(started)!r}, 'w')"]
    entry = {"system": {"mcp": {"command": command, "env": {"API_KEY": "key-${MB_UNSET_KEY}"}}}}
    with pytest.raises(ConfigError) as e:
        _rank(norm, tmp_path, "svc", entry)
    assert str(e.value) == "variant 'svc': system: mcp: env: API_KEY: $MB_UNSET_KEY is not set in the environment"
    assert not started.exists()
    monkeypatch.setenv("MB_UNSET_KEY", "s3cret")  # set, it is read when the job starts
    from memobench.services.transport.connect import client_of

    client = client_of(resolve("svc", "s", {"svc": entry}).retriever)
    try:
        assert client.env == {"API_KEY": "key-s3cret"}
    finally:
        client.close()


class _Gate(_ProxyHandler):
    """The proxy behind Basic auth and an API key in the query, as a hosted service is: it records
    what came, and forwards what it lets through without the query."""

    def do_POST(self):
        path, _, query = self.path.partition("?")
        with self.server.lock:
            self.server.seen.append((self.path, self.headers.get("Authorization")))
        if self.headers.get("Authorization") != "Basic YWxpY2U6cCBAc3M=" or query != "api_key=k3y":  # alice:p @ss
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._send(401, b'{"error": "who are you"}')
            return
        self.path = path
        super().do_POST()


def test_a_url_s_user_and_query_are_sent_with_every_request_and_written_nowhere(norm, reference, expected,
                                                                               tmp_path, monkeypatch):
    p = Proxy(reference[0])
    p.RequestHandlerClass, p.seen = _Gate, []
    port = _start(p).rsplit(":", 1)[1]
    monkeypatch.setenv("MB_PW", "p @ss")  # percent-encoded where it lands in the URL, sent as it is
    monkeypatch.setenv("MB_KEY", "k3y")
    try:
        v = resolve("gated", "s", {"gated": _system(f"http://alice:$MB_PW@127.0.0.1:{port}?api_key=${{MB_KEY}}")})
        assert "MB_PW" not in v.harness and v.harness.endswith(f"http://127.0.0.1:{port}")  # shown without user or query
        (rankings, _, _), _ = _rank(norm, tmp_path, "gated", _system(
            f"http://alice:$MB_PW@127.0.0.1:{port}?api_key=${{MB_KEY}}"))
    finally:
        p.shutdown()
        p.server_close()
    assert rankings.equals(expected[0])
    assert p.seen and all(q.endswith("?api_key=k3y") and a == "Basic YWxpY2U6cCBAc3M=" for q, a in p.seen)
    written = [f for f in tmp_path.rglob("*") if f.is_file()]
    assert any(f.suffix == ".jsonl" for f in written)  # the ingestion ledger
    for f in written:
        data = f.read_bytes()
        assert b"k3y" not in data and b"p @ss" not in data and b"p%20%40ss" not in data, f
    meta = _timings_meta(tmp_path, "gated")
    assert meta["url"] == f"http://***@127.0.0.1:{port}?api_key=***"


def _timings_meta(root: Path, name: str) -> dict:
    from memobench.retrieval.timings import read_meta

    return read_meta(layout.path(layout.TIMINGS, root=root / "results", dataset="lme", variant=name, segment="seg1"))


def test_namespace_locks_are_named_by_a_digest(norm, reference, expected, tmp_path):
    import re

    (rankings, _, _), _ = _rank(norm, tmp_path, "svc", _system(reference[0], namespace_prefix="mb:x y-"))
    assert rankings.equals(expected[0])
    locks = list((tmp_path / "results").rglob("*.locks/*"))
    assert locks and all(re.fullmatch(r"[0-9a-f]{32}\.lock", p.name) for p in locks), locks


class _Terse(_ProxyHandler):
    """The proxy whose reset answers ``OK`` as text and whose ingest answers an empty 204."""

    def _send(self, status: int, body: bytes) -> None:
        if status != 200 or self.path not in ("/reset", "/ingest"):
            return super()._send(status, body)
        if self.path == "/reset":
            reply(self, 200, b"OK", content_type="text/plain")
            return
        self.send_response(204)
        self.end_headers()


def test_an_ingest_or_reset_answer_need_not_be_json(norm, reference, expected, tmp_path):
    p = Proxy(reference[0])
    p.RequestHandlerClass = _Terse
    try:
        (rankings, _, _), _ = _rank(norm, tmp_path, "svc", _system(_start(p)))
    finally:
        p.shutdown()
        p.server_close()
    assert rankings.equals(expected[0])


def test_a_fixed_ingest_body_sends_the_sessions_again(norm, reference, expected, tmp_path):
    # a mistaken body: each session's text only its date; the same namespaces (named by the sessions),
    # whose count agrees after the body is fixed: only the ledger's record of how they were sent differs
    dated = {"namespace": "{namespace}", "session": {"id": "{session.id}", "date": "{session.date}",
                                                     "turns": [{"role": "user", "content": "{session.date}"}]}}
    # (the conformance check would stop this body before any ingestion: off, as a user may set it)
    wrong, _ = _rank(norm, tmp_path, "svc", _system(reference[0], endpoints={"ingest": {"body": dated}}, check=False))
    rk, _, dp = expected
    assert not wrong[2].equals(dp)
    (srk, _, sdp), lines = _rank(norm, tmp_path, "svc", _system(reference[0]))
    assert "ingest" in {r["operation"] for r in _timings(tmp_path, "svc")}
    assert srk.equals(rk) and sdp.equals(dp)
    # unchanged, it is confirmed again and nothing is sent
    _rank(norm, tmp_path, "svc", _system(reference[0]))
    assert not {"ingest", "reset"} & {r["operation"] for r in _timings(tmp_path, "svc")}


def test_a_service_without_count_that_forgot_and_answers_empty_is_ingested_again(norm, reference, proxy, expected,
                                                                                 tmp_path):
    # a service that keeps nothing across a restart, has no count, and answers [] for a namespace it does not
    # know: the ledger alone would trust every namespace, and every list would be an empty miss
    store: Store = reference[1].RequestHandlerClass.store

    def unknown_is_empty(path, body, n):
        return (200, b'{"results": []}') if path == "/search" and body["namespace"] not in store.namespaces else None

    url, _ = proxy(fault=unknown_is_empty)
    entry = _system(url, endpoints={"count": None})
    rk, _, dp = expected
    (srk, _, sdp), _ = _rank(norm, tmp_path, "svc", entry)
    assert srk.equals(rk) and sdp.equals(dp)
    store.namespaces.clear()  # what a restart of an in-memory server leaves
    (srk, soc, sdp), lines = _rank(norm, tmp_path, "svc", entry)
    assert any("answered an empty list, and without count nothing confirms" in line for line in lines), lines
    assert srk.equals(rk) and sdp.equals(dp)
    assert _checks(soc)["system_errors"]["count"] == 0
    # a third job with the service holding them: trusted, searched once each, nothing sent
    _rank(norm, tmp_path, "svc", entry)
    assert not {"ingest", "reset"} & {r["operation"] for r in _timings(tmp_path, "svc")}


def _merged(norm, root: Path, name: str, entry: dict, warned: list | None = None) -> dict:
    """``name``'s segment (ranked by _rank under ``root``) merged as the merge job merges it: metrics.json."""
    from memobench.evaluation.metrics import merge_segments
    from memobench.plan import merge_spec
    from memobench.catalog.variant import to_spec

    seg = {kind: Path(layout.path(layout.SEGMENT_TABLE, root=root / "results", dataset="lme", variant=name,
                                  segment="seg1", suffix=suffix)) for kind, suffix in layout.SEGMENT_SUFFIXES.items()}
    (root / "summary.json").write_text("{}")
    spec = merge_spec(to_spec(resolve(name, "s", {name: entry})))
    merge_segments("lme", spec, [seg["rankings"]], [seg["outcomes"]], root / "summary.json", root / "r.parquet",
                   root / "o.parquet", root / "m.json", log=lambda m: None, deep_in=[seg["deep"]],
                   warn=(warned if warned is not None else []).append)
    return json.loads((root / "m.json").read_text())


@pytest.mark.parametrize("answer,why", [
    ("empty", "every list is empty (7 questions evaluated)"),
    ("in_order", "every list is its haystack in ingestion order (7 lists)"),
    ("reversed", "recall at or below a random ranking's (hit@1 0.0% <= "),
])
def test_degenerate_answers_are_warnings_in_the_log_metrics_and_report(norm, reference, proxy, tmp_path, answer,
                                                                       why):
    haystacks = {}

    def rewrite(path, obj):
        if path != "/search":
            return obj
        ids = [h["id"] for h in obj["results"]]
        if answer == "empty":
            return {"results": []}
        if answer == "reversed":  # the service's own ranking, worst first: the gold last
            return {"results": [{"id": i, "score": 1.0} for i in reversed(ids)]}
        return obj

    def fault(path, body, n):
        if path == "/ingest":
            haystacks.setdefault(body["namespace"], []).append(body["session"]["id"])
        if path == "/search" and answer == "in_order":  # the whole haystack as ingested, equal scores
            hits = [{"id": i, "score": 0.5} for i in haystacks[body["namespace"]]]
            return 200, json.dumps({"results": hits}).encode()
        return None

    url, _ = proxy(fault=fault, rewrite=rewrite)
    # the conformance check stops each of these before ingestion: off, to test what the merge finds
    entry = _system(url, check=False)
    _rank(norm, tmp_path, "svc", entry)
    warned = []
    m = _merged(norm, tmp_path, "svc", entry, warned)
    assert len(m["warnings"]) == 1 and m["warnings"][0].startswith("variant 'svc' on lme: ") and why in m["warnings"][0]
    assert warned == [f"memobench: warning: {m['warnings'][0]}"]
    from memobench.reporting.html import html_main_tables
    from memobench.reporting.markdown import md_main
    from memobench.core.doc import to_markdown

    md = to_markdown(md_main([m]))
    assert "| svc (memory service) (warning) |" in md and why in md
    html = "".join(html_main_tables([m]))
    assert "<td class='l'>svc (memory service) (warning)</td>" in html
    assert html.replace("&lt;", "<").replace("&#x27;", "'").count(why) == 1
    # system.degenerate: error makes it one line and no metrics.json
    (tmp_path / "m.json").unlink()
    with pytest.raises(RetrieverError) as e:
        _merged(norm, tmp_path, "svc", _system(url, degenerate="error"))
    assert str(e.value) == f"{m['warnings'][0]} (system.degenerate: error)"
    assert not (tmp_path / "m.json").exists()


def test_the_reference_service_has_no_warnings(norm, reference, tmp_path):
    _rank(norm, tmp_path, "svc", _system(reference[0]))
    assert _merged(norm, tmp_path, "svc", _system(reference[0]))["warnings"] == []


# ---- the conformance check before the first ingestion (services/conformance.py)


def _checked(server) -> set[str]:
    return {ns for ns in server.namespaces if ns.startswith("mb-check-")}


@pytest.mark.parametrize("fault,check", [("first:2", "sessions"), ("leak", "isolation"), ("no-reset", "reset")])
def test_a_service_that_fails_its_conformance_check_stops_the_job_in_one_line_before_any_ingestion(
        norm, fake, tmp_path, fault, check):
    url, server = fake(fault)
    with pytest.raises(RetrieverError) as e:
        _rank(norm, tmp_path, "svc", _system(url))
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"variant 'svc': the service failed its conformance check: {check}: ")
    assert msg.endswith("; run memobench check-service --variant svc (with your --configfile) for the table"), msg
    assert server.namespaces == _checked(server)  # nothing of the run was sent


def test_the_check_runs_once_per_service_and_settings_not_per_job(norm, fake, tmp_path):
    url, server = fake()
    _, lines = _rank(norm, tmp_path, "svc", _system(url))
    assert _checked(server) and any("passed its conformance check" in line for line in lines)
    marks = list((tmp_path / "results" / "cache" / "system").glob("svc.checked/*.json"))
    assert len(marks) == 1 and json.loads(marks[0].read_text())["identity"] == url
    server.namespaces.clear()
    _rank(norm, tmp_path, "svc", _system(url))  # another job of the same variant: no check
    assert not _checked(server)
    _rank(norm, tmp_path, "svc", _system(url, k=20))  # other settings: checked again
    assert _checked(server)


def test_system_check_false_turns_the_check_off_and_leaves_the_definition_as_it_was(norm, fake, tmp_path):
    from memobench.services.definition.variant import definition

    url, server = fake()
    _rank(norm, tmp_path, "svc", _system(url, check=False))
    assert server.namespaces and not _checked(server)
    on, off = (resolve("svc", "s", {"svc": _system(url, **over)}) for over in ({}, {"check": False}))
    assert definition(on) == definition(off)


def test_a_setting_written_at_its_default_is_the_same_definition():
    """`max_response_mb: 64` or `degenerate: warn` written out is the definition that leaves them out
    (memobench score reuses its results); another value is another definition."""
    from memobench.services.definition.variant import definition

    url = "http://127.0.0.1:9"
    base = definition(resolve("svc", "s", {"svc": _system(url)}))
    for over in ({"max_response_mb": 64}, {"max_response_mb": 64.0}, {"degenerate": "warn"}, {"k": 50}):
        assert definition(resolve("svc", "s", {"svc": _system(url, **over)})) == base, over
    for over in ({"max_response_mb": 8}, {"degenerate": "error"}, {"k": 20}):
        assert definition(resolve("svc", "s", {"svc": _system(url, **over)})) != base, over


def test_a_setting_written_at_its_default_leaves_the_variants_params_as_they_were():
    """The retrieve and merge params (Snakemake reruns a job when they change) of a variant that writes
    check, degenerate or max_response_mb at its default are those of one that leaves them out."""
    from memobench import plan
    from memobench.catalog.variant import to_spec

    url = "http://127.0.0.1:9"
    config = {"variants": {}}

    def params(**over):
        spec = to_spec(resolve("svc", "s", {"svc": _system(url, **over)}))
        return plan.retrieve_spec(config, spec), plan.merge_spec(spec)

    base = params()
    assert params(check=True, degenerate="warn", max_response_mb=64) == base
    assert params(max_response_mb=64.0) == base
    for over in ({"check": False}, {"degenerate": "error"}, {"max_response_mb": 8}):
        assert params(**over) != base, over


class _Assigning(BaseHTTPRequestHandler):
    """The reference store behind an API of another shape: it names each session by a number it assigns
    (answered at ``data.id``; the session's own key is kept out of sight), searches answer those numbers,
    and every request without ``X-Api-Key: <key>`` is HTTP 401."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        s = self.server
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        if self.headers.get("X-Api-Key") != s.key:
            reply(self, 401, b'{"error": "no key"}')
            return
        with s.lock:
            if self.path == "/wipe":
                out = s.store.reset(body["space"])
            elif self.path == "/add":
                s.next_id += 1
                s.keys[str(s.next_id)] = body["key"]
                s.store.ingest(body["space"], {"id": str(s.next_id), "turns": body["turns"]})
                out = {"data": {"id": s.next_id}}
            else:
                out = {"hits": [h["id"] for h in s.store.search(body["space"], body["q"], body["n"])["results"]]}
        reply(self, 200, json.dumps(out).encode())


def test_ids_a_service_assigns_and_a_key_header_give_the_in_process_lists(norm, expected, tmp_path, monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Assigning)
    server.store, server.key, server.keys, server.next_id, server.lock = Store("bm25s", "user"), "k-42", {}, 0, \
        threading.Lock()
    monkeypatch.setenv("MB_SVC_KEY", "k-42")
    entry = _system(_start(server), headers={"X-Api-Key": "$MB_SVC_KEY"}, endpoints={
        "reset": {"path": "/wipe", "body": {"space": "{namespace}"}},
        "ingest": {"path": "/add", "body": {"space": "{namespace}", "key": "{session.key}", "turns": "{session.turns}"},
                   "id": "data.id"},
        "search": {"path": "/find", "body": {"space": "{namespace}", "q": "{question.text}", "n": "{k}"}},
        "count": None}, results={"list": "hits", "id": "", "score": None})
    try:
        (srk, _, sdp), _ = _rank(norm, tmp_path, "svc", entry)
    finally:
        server.shutdown()
        server.server_close()
    rk, _, dp = expected
    assert srk.equals(rk)  # repeated session ids included: each copy its own assigned id
    assert sdp.column("position").equals(dp.column("position"))
    assert any(k.endswith("~2") for k in server.keys.values())  # a repeated id's second copy, by its key
    for f in tmp_path.rglob("*"):
        assert not f.is_file() or b"k-42" not in f.read_bytes(), f


@pytest.mark.parametrize("system,why", [
    ({"headers": {"Authorization": "Bearer abc123"}}, "headers: Authorization: its value is written out"),
    ({"headers": {"X-Api-Key": "abc"}}, "headers: X-Api-Key: its value is written out"),
    ({"headers": {"X-Trace": 3}}, "headers must map header names to strings"),
    ({"query": "keywords"}, "query: 'keywords' makes the query text, and the search template does not name {query}"),
    ({"query": "nope"}, "query 'nope' is not keywords, longest-word, 'path/to/file.py:function' or 'module:function'"),
    ({"render": {"max_chars": 400}}, "render: max_chars sends a long session in parts"),
    ({"render": {"lines": "x"}}, "render: unknown key(s) lines (known: line, header, turn, max_chars, copy_key, part_key)"),
    ({"render": {"line": "{turn.text}"}}, "render: line: '{turn.text}' is not a placeholder"),
    ({"render": {"max_chars": 3}}, "render: max_chars must be a whole number of characters, at least 16"),
    ({"endpoints": {"reset": None}, "isolation": "reset"}, "isolation: reset empties one namespace"),
    ({"endpoints": {"reset": {"may_fail": True}, "count": None}, "isolation": "reset"},
     "isolation: reset with reset.may_fail needs the service's count operation"),
    ({"endpoints": {"ingest": {"body": {"all": "{sessions}"}}}}, "{sessions} needs session, the template of each"),
    ({"endpoints": {"ingest": {"body": {"all": "{sessions}", "one": "{session.id}"}, "session": {}}}},
     "the body name {sessions} (one call per haystack) and session.id, one session's"),
    ({"endpoints": {"ingest": {"session": {"id": "{session.key}"}}}}, "session (the item template of a batch ingest)"),
    ({"endpoints": {"ingest": {"body": {"all": "{sessions}"}, "session": {"q": "{query}"}}}},
     "ingest: session: '{query}' is not a placeholder"),
    ({"endpoints": {"search": {"length": True}}}, "endpoints: search: unknown key 'length' (known: path, body)"),
    ({"endpoints": {"count": {"length": "yes"}}}, "endpoints: count: length must be true or false"),
    ({"endpoints": {"ingest": {"id": "a", "id_pattern": "(x)"}}}, "give id (a path in a JSON answer) or id_pattern"),
    ({"endpoints": {"ingest": {"id_pattern": "id: \\S+"}}}, "id_pattern: 'id: \\\\S+' has no group"),
    ({"results": {"pattern": "("}}, "results: pattern: '(' is not a regex"),
])
def test_shape_config_errors_name_the_variant(system, why):
    with pytest.raises(ConfigError) as e:
        resolve("svc", "s", {"svc": {"system": {"url": "http://x", **system}}})
    assert str(e.value).startswith("variant 'svc': system") and why in str(e.value) and "\n" not in str(e.value), \
        str(e.value)


def test_headers_are_not_for_a_server_started_by_command():
    with pytest.raises(ConfigError, match="headers are sent over HTTP; a server started by command takes env"):
        resolve("svc", "s", {"svc": {"system": {"mcp": {"command": "srv"}, "headers": {"A": "b"}}}})


def test_variants_written_before_shapes_keep_their_definition_and_ledger_shape():
    from memobench.services.definition.variant import definition
    from memobench.services.sent.sessions import sent_shape

    got = []
    for e in [{"system": {"url": "http://x"}}, {"system": {"mcp": {"command": "srv"}, "answer": "text"}},
              {"system": {"url": "http://x", "endpoints": {"count": None}, "results": {"score": None}}}]:
        v = resolve("svc", "s", {"svc": e})
        got.append((definition(v), sent_shape(v.retriever, "session", "all")))
    assert got == [("06a16f05b50b6ee24d9b", "6f5fd03a2e7cb606b8a4"), ("fd4b482095497a21dcc0", "111bb5c160add79a9d08"),
                   ("484b4d33b4b66e057675", "6f5fd03a2e7cb606b8a4")]


@pytest.mark.parametrize("written, left", [
    ({"url": "http://x:1", "timeout_s": 30, "backoff_s": 0.1, "concurrency": 4.0, "k": 50}, {"url": "http://x:1"}),
    ({"url": "http://x:1", "max_response_mb": 128.0}, {"url": "http://x:1", "max_response_mb": 128}),
])
def test_a_setting_written_either_way_gives_the_retrieve_rule_the_same_params(written, left):
    """The rule's params are compared as their text (Snakemake's params trigger): 30 and 30.0 are one setting,
    so the pipeline and memobench score never rerun each other."""
    from memobench.catalog.variant import to_spec
    from memobench.plan import retrieve_spec
    from memobench.services.definition.variant import definition

    a, b = (resolve("svc", "s", {"svc": {"system": system}}) for system in (written, left))
    assert repr(retrieve_spec({}, to_spec(a))) == repr(retrieve_spec({}, to_spec(b)))
    assert definition(a) == definition(b)


def test_headers_decide_no_list_and_a_query_transform_is_in_the_definition_and_label():
    from memobench.services.definition.variant import definition, public

    plain = resolve("svc", "s", {"svc": {"system": {"url": "http://x"}}})
    keyed = resolve("svc", "s", {"svc": {"system": {"url": "http://x", "headers": {"Authorization": "Bearer $K"}}}})
    asked = resolve("svc", "s", {"svc": {"system": {"url": "http://x", "query": "keywords", "endpoints": {
        "search": {"body": {"namespace": "{namespace}", "query": "{query}", "k": "{k}"}}}}}})
    assert definition(keyed) == definition(plain) != definition(asked)
    assert asked.harness == "memory service: http://x, query: keywords" and plain.harness == "memory service: http://x"
    assert public(asked.retriever, "session")["query"] == "keywords"
    assert "query" not in public(plain.retriever, "session")


class _Words(_ProxyHandler):
    """The proxy whose searches answer in words, a line per result: ``- [[<id>]] (score 1.5)``."""

    def _send(self, status: int, body: bytes) -> None:
        if status != 200 or self.path != "/search":
            return super()._send(status, body)
        lines = [f"- [[{r['id']}]] (score {r['score']})" for r in json.loads(body)["results"]]
        super()._send(200, ("Found:\n" + "\n".join(lines)).encode("utf-8"))


def test_a_plain_text_answer_is_read_by_the_results_pattern_over_http(norm, reference, expected, tmp_path):
    p = Proxy(reference[0])
    p.RequestHandlerClass = _Words
    try:
        entry = _system(_start(p), answer="plain",  # count: its JSON, read from the text
                        results={"list": "", "pattern": r"\[\[(.+?)\]\]"})
        (rankings, _, deep), _ = _rank(norm, tmp_path, "svc", entry)
    finally:
        p.shutdown()
        p.server_close()
    assert rankings.equals(expected[0])
    assert deep.column("position").equals(expected[2].column("position"))


def test_render_written_at_its_defaults_is_the_definition_of_leaving_it_out():
    from memobench.services.definition.variant import definition

    plain = resolve("svc", "s", {"svc": {"system": {"url": "http://x"}}})
    line = {"line": "{turn.role}: {turn.content}"}
    same = resolve("svc", "s", {"svc": {"system": {"url": "http://x", "render": line}}})
    other = resolve("svc", "s", {"svc": {"system": {"url": "http://x", "render": {"header": "{session.date}"}}}})
    assert definition(same) == definition(plain) != definition(other)


def test_a_render_naming_turn_ids_sends_them_and_keeps_the_lists(norm, reference, proxy, expected, tmp_path):
    sent = []

    def record(path, body, n):
        if path == "/ingest":
            sent.append(body)
        return None

    url, _ = proxy(fault=record)
    entry = _system(url, render={"line": "{turn.id} {turn.content}"}, endpoints={"ingest": {"body": {
        "namespace": "{namespace}", "session": {"id": "{session.id}", "date": "{session.date}",
                                                "turns": "{session.turns}"}, "lines": "{session.lines}"}}})
    (rankings, _, _), _ = _rank(norm, tmp_path, "svc", entry)
    assert rankings.equals(expected[0])
    run = [b for b in sent if b["namespace"].startswith("mb-svc-")]  # not the conformance check's
    assert run and all(line.startswith(f"{b['session']['id']}_{i} ")
                       for b in run for i, line in enumerate(b["lines"], 1))


def test_ids_a_service_assigns_as_numbers_are_read_back_from_its_results():
    from memobench.services.operations.calls import assigned_ids, result_ids

    spec = resolve("svc", "s", {"svc": {"system": {"url": "http://x", "endpoints": {
        "ingest": {"body": {"namespace": "{namespace}", "key": "{session.key}"}, "id": "data.id"}},
        "results": {"list": "hits", "id": "", "score": None}}}}).retriever
    given = assigned_ids({"data": {"id": 7}}, spec["operations"]["ingest"], None, "w")
    assert given == ["7"] and result_ids({"hits": [7, 12]}, spec, "w") == (["7", "12"], None)
    with pytest.raises(RetrieverError, match="the id True is not a string"):
        result_ids({"hits": [True]}, spec, "w")
    plain = resolve("svc", "s", {"svc": {"system": {"url": "http://x", "results": {"id": ""}}}}).retriever
    with pytest.raises(RetrieverError, match="the id 7 is not a string"):  # session ids are strings
        result_ids({"results": [7]}, plain, "w")


STAMPED = {"library": "tests.helpers.memory_libraries:StampedMemory", "backoff_s": 0.01}


def test_lists_that_move_between_fresh_namespaces_are_a_warning_with_how_far_the_figures_move(norm, tmp_path):
    """Ties broken by a stamp drawn at write time: the same sessions in a fresh namespace list them otherwise."""
    entry = {"system": STAMPED}
    (_, oc, _), lines = _rank(norm, tmp_path, "lib", entry)
    said = [line for line in lines if line.startswith("warning: variant 'lib': its lists move between runs: ")]
    assert len(said) == 1 and "1 of 1 questions searched again in a fresh namespace" in said[0], lines
    warned = []
    m = _merged(norm, tmp_path, "lib", entry, warned)
    replicas = m["system_determinism"]["replicas"]
    assert replicas["namespaces"] == 1 and replicas["questions"] == 1 and len(replicas["differing"]) == 1
    assert set(replicas["first"]) == {"hit@1", "hit@5", "mrr_sum"} and replicas["differing"][0] in oc.column(
        "question_id").to_pylist()
    assert m["system_determinism"]["repeats"] == {"checked": 7, "differing": []}  # a repeat in a row: the same stamps
    assert len(m["warnings"]) == 1 and m["warnings"][0].startswith(
        "variant 'lib' on lme: its lists move between runs: 1 of 1 questions searched again in a fresh namespace "
        "holding the same sessions (1 haystack, system.determinism) gave another list; over those 1 questions "
        "hit@1 ")
    assert warned == [f"memobench: warning: {m['warnings'][0]}"]
    from memobench.core.doc import to_markdown
    from memobench.reporting.markdown import md_main

    md = to_markdown(md_main([m]))
    assert "| lib (memory service) (warning) |" in md and "its lists move between runs" in md


def test_on_differ_error_stops_the_job_in_one_line(norm, tmp_path):
    with pytest.raises(RetrieverError) as e:
        _rank(norm, tmp_path, "lib", {"system": {**STAMPED, "determinism": {"on_differ": "error"}}})
    said = str(e.value)
    assert said.startswith("variant 'lib': its lists move between runs: 1 of 1 questions searched again in a fresh "
                           "namespace") and said.endswith("(system.determinism.on_differ: error)") and "\n" not in said


def test_without_replicas_nothing_is_ingested_again_and_a_skipped_check_is_stated(norm, reference, tmp_path):
    entry = _system(reference[0], determinism=False, check={"skip": ["ids", "latency"]})
    _, lines = _rank(norm, tmp_path, "svc", entry)
    assert not any("-replica-" in line for line in lines) and any("passed its conformance check (ids, latency "
                                                                   "skipped" in line for line in lines), lines
    m = _merged(norm, tmp_path, "svc", entry)
    assert m["system"]["check"] == {"skip": ["ids", "latency"]}
    assert m["system_determinism"]["replicas"]["namespaces"] == 0
    assert m["warnings"] == ["variant 'svc' on lme: its conformance check skipped ids, latency (system.check.skip): "
                             "what those checks confirm was not confirmed"]


@pytest.mark.parametrize("value,said", [
    ({"replicas": -1}, "determinism: replicas -1 must be a whole number from 0 to 100"),
    ({"replicas": True}, "determinism: replicas True must be"),
    ({"on_differ": "fail"}, "determinism: on_differ 'fail' is not one of warn, error"),
    ({"every": 2}, "determinism must be true, false or a mapping of replicas, on_differ"),
])
def test_a_determinism_setting_that_cannot_be_is_one_config_line(value, said):
    with pytest.raises(ConfigError) as e:
        resolve("svc", "s", {"svc": _system("http://127.0.0.1:9", determinism=value)})
    assert str(e.value).startswith("variant 'svc': system: ") and said in str(e.value), str(e.value)


def test_determinism_at_its_defaults_is_the_definition_of_leaving_it_out():
    from memobench.services.definition.variant import definition

    def of(**over):
        return definition(resolve("svc", "s", {"svc": _system("http://127.0.0.1:9", **over)}))

    assert of() == of(determinism=True) == of(determinism={"replicas": 1, "on_differ": "warn"})
    assert of(determinism={"replicas": 2}) != of() != of(determinism=False)


def test_lists_that_move_under_concurrent_searches_are_a_warning(norm, tmp_path):
    """Ties in reverse while another search is in flight: the load curve's concurrent lists differ from the
    sequential ones (and the replica's, searched concurrency at a time)."""
    entry = {"system": {"library": "tests.helpers.memory_libraries:RacyMemory", "backoff_s": 0.01,
                        "load": {"concurrency": [1, 4], "searches": 8, "max_s": 10}}}
    _rank(norm, tmp_path, "lib", entry)
    m = _merged(norm, tmp_path, "lib", entry)
    assert m["system_determinism"]["concurrent"]["differing"] and m["system_determinism"]["repeats"]["differing"] == []
    assert any(w.startswith("variant 'lib' on lme: its lists move under load: ") and "(system.load)" in w
               for w in m["warnings"]), m["warnings"]
