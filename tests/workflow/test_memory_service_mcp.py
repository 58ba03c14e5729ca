"""A memory service over MCP (services/transport/mcp.py, through the official SDK with
its handshake): the reference MCP server (``memobench serve --mcp``), started
by the job over stdio or reached over streamable HTTP as its own process,
gives the in-process reference retriever's lists exactly on a generated
LongMemEval file with repeated session ids; and a server that dies mid-ingest
or mid-search (started again by the client, empty), answers slower than the
timeout, answers text that is not JSON, unknown or repeated ids, or leaks
sessions across namespaces is retried, re-ingested, or one line naming the
variant and the question. Each test starts real server processes."""

from __future__ import annotations

import importlib.util
import os
import shlex
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from memobench.core import layout
from memobench.datasets.normalize import normalize_longmemeval
from memobench.retrieval.returned import RetrieverError
from memobench.tools.generate.longmemeval import write_longmemeval
from tests.helpers import REPO, ReferenceServer, reference_command
from tests.helpers.services import rank_one_segment

# find_spec, not importorskip: importing the SDK (about a second) at collection would cost every run
# that collects this file, the unit tests' too
pytestmark = pytest.mark.skipif(importlib.util.find_spec("mcp") is None, reason="the MCP Python SDK is not installed")

ENV = {"PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "src")])}


@pytest.fixture(scope="module")
def norm(tmp_path_factory):
    root = tmp_path_factory.mktemp("mcp")
    raw = root / "lme.json"
    write_longmemeval(raw, 6, 6, seed=3, turns=(2, 4), words_per_turn=(4, 20), spice=True)
    normalize_longmemeval(raw, root / "norm", log=lambda m: None)
    return root / "norm"


@pytest.fixture(scope="module")
def expected(norm, tmp_path_factory):
    return rank_one_segment(norm, tmp_path_factory.mktemp("expected"), "bm25s")[0]


def _stdio(**system) -> dict:
    return {"system": {"mcp": {"command": reference_command("user", "stdio"), "env": ENV}, "backoff_s": 0.05,
                       **system}}


def _faulty(fault: str, state, **system) -> dict:
    # the fault is the run's own to meet: the conformance check, which would meet some first, is off
    return {"system": {"mcp": {"command": [sys.executable, "-m", "tests.helpers.mcp_fault_server"],
                               "env": {**ENV, "MB_FAULT": fault, "MB_FAULT_STATE": str(state)}},
                       "backoff_s": 0.05, "check": False, **system}}


def _timings(root, name="svc") -> list[dict]:
    return pq.read_table(layout.path(layout.TIMINGS, root=root / "results", dataset="lme", variant=name,
                                     segment="seg1")).to_pylist()


def _same(got, expected) -> bool:
    return all(a.equals(b) for a, b in zip(got, expected))


def test_stdio_and_streamable_http_give_the_in_process_lists(norm, expected, tmp_path):
    got, _ = rank_one_segment(norm, tmp_path / "stdio", "svc", _stdio())
    assert _same(got, expected)
    searches = [r for r in _timings(tmp_path / "stdio") if r["operation"] == "search"]
    # the server's own time comes back in the result's _meta: what the client adds is known
    assert searches and all(r["ok"] and r["server_seconds"] is not None and r["seconds"] > r["server_seconds"]
                            for r in searches)
    server = ReferenceServer("user", mcp="http")
    try:
        got, _ = rank_one_segment(norm, tmp_path / "http", "svc", {"system": {"mcp": {"url": server.url}}})
        assert _same(got, expected)
        # a rerun confirms every namespace by count and ingests nothing
        got, _ = rank_one_segment(norm, tmp_path / "http", "svc", {"system": {"mcp": {"url": server.url}}})
        assert _same(got, expected)
        assert not {r["operation"] for r in _timings(tmp_path / "http")} & {"ingest", "reset"}
    finally:
        server.kill()


def test_a_stdio_server_is_ingested_again_in_each_job_when_it_cannot_count(norm, expected, tmp_path):
    rank_one_segment(norm, tmp_path, "svc", _stdio(tools={"count": None}))
    got, _ = rank_one_segment(norm, tmp_path, "svc", _stdio(tools={"count": None}))
    assert _same(got, expected) and "ingest" in {r["operation"] for r in _timings(tmp_path)}


@pytest.mark.parametrize("fault", ["die-ingest:3", "die-search:3"])
def test_a_server_that_dies_is_started_again_and_re_ingested(norm, expected, tmp_path, fault):
    got, lines = rank_one_segment(norm, tmp_path, "svc", _faulty(fault, tmp_path / "state"))
    assert (tmp_path / "state" / "died").exists()  # it did die (search 3: the second question's, past a warm repeat)
    assert _same(got, expected), lines
    if fault.startswith("die-search"):
        assert any("connection to the service was lost during the search" in line for line in lines), lines


def test_a_search_slower_than_the_timeout_is_retried(norm, expected, tmp_path, monkeypatch):
    # $NAME in env: read from the environment the job runs in
    monkeypatch.setenv("MB_TEST_STATE", str(tmp_path / "state"))
    # the retry, on a warm server, has the whole timeout (2 s) while the first try still sleeps
    got, _ = rank_one_segment(norm, tmp_path, "svc", _faulty("slow-search:5", "$MB_TEST_STATE", timeout_s=2))
    assert _same(got, expected) and (tmp_path / "state" / "slept").exists()
    assert max(r["attempts"] for r in _timings(tmp_path) if r["operation"] == "search") == 2


def test_a_server_slower_to_start_than_the_timeout_is_waited_for(norm, expected, tmp_path):
    # timeout_s limits a request; a start (the process and the handshake) has START_TIMEOUT_S
    got, _ = rank_one_segment(norm, tmp_path, "svc", _faulty("slow-start:2", tmp_path / "state", timeout_s=0.5))
    assert _same(got, expected)


def test_a_server_that_does_not_start_in_time_is_stopped(tmp_path, monkeypatch):
    from memobench.services.transport import mcp
    from memobench.services.transport.client import Unavailable

    monkeypatch.setattr(mcp, "START_TIMEOUT_S", 1.0)
    env = {**ENV, "MB_FAULT": "slow-start:60", "MB_FAULT_STATE": str(tmp_path)}
    client = mcp.McpClient({"reset": {"tool": "reset"}}, command=[sys.executable, "-m", "tests.helpers.mcp_fault_server"],
                           env=env, timeout_s=0.5, retries=0)
    try:
        with pytest.raises(Unavailable, match="TimeoutError"):
            client.once("reset", {})
    finally:
        client.close()
    stat = Path(f"/proc/{(tmp_path / 'pid').read_text()}/stat")
    # stopped, not left starting (a zombie, or gone)
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"


@pytest.mark.parametrize("how", ["not-found", "exits"])
def test_a_server_that_cannot_start_is_one_line_naming_its_command_at_once(norm, tmp_path, how):
    starts = tmp_path / "starts"
    command = (["no-such-memory-server", "--stdio"] if how == "not-found" else
               [sys.executable, "-c", f"open({str(starts)!r}, 'a').write('x'); raise SystemExit(3)"])
    with pytest.raises(RetrieverError) as e:
        rank_one_segment(norm, tmp_path, "svc", {"system": {"mcp": {"command": command}, "backoff_s": 0.01}})
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"variant 'svc': the MCP server could not start: {shlex.join(command)}: "), msg
    said = "FileNotFoundError" if how == "not-found" else "it exited before the MCP handshake"
    assert said in msg and "failed at the service" not in msg, msg
    if how == "exits":  # started once: a start failure is not retried
        assert starts.read_text() == "x"


@pytest.mark.parametrize("fault,system,said", [
    # a tool returning a string: the SDK's server wraps it as structured content {"result": text}
    ("text", {}, """search: no 'results' in the response (system.results.list is 'results'): {"result": "results: []"}"""),
    ("text", {"answer": "text"}, "search tool 'search' answered text that is not JSON: 'results: []'"),
    ("unknown-id", {}, "'no-such-session'"),
    ("repeat-id", {}, "2 times; the haystack lists it once"),
    ("leak", {}, "sessions after 6 were ingested (the service mixes namespaces"),
])
def test_bad_answers_are_one_line_naming_the_variant(norm, tmp_path, fault, system, said):
    with pytest.raises(RetrieverError) as e:
        rank_one_segment(norm, tmp_path, "svc", _faulty(fault, tmp_path / "state", **system))
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("variant 'svc'"), msg
    assert said in msg, msg
