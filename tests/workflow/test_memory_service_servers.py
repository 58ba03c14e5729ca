"""A server per namespace, readiness and the load curve (services/job/per_namespace.py,
readiness.py, load.py), with real MCP SDK servers over stdio: the reference
server started per namespace gives the lists it gives shared (and the
in-process retriever's); a server with one global store, wrong when shared,
gives them per namespace, at most ``servers`` alive at once, each in a
working folder memobench makes and removes; an asynchronously indexing server
is waited for (count, search, settle) or its questions are system errors;
the load curve and a stdio server's peak memory land in the timings."""

from __future__ import annotations

import importlib.util
import json
import os
import sys

import pyarrow.parquet as pq
import pytest

from memobench.core import layout
from memobench.datasets.normalize import normalize_longmemeval
from memobench.retrieval.returned import RetrieverError
from memobench.tools.generate.longmemeval import write_longmemeval
from tests.helpers import REPO, reference_command
from tests.helpers.services import rank_one_segment

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mcp") is None, reason="the MCP Python SDK is not installed")

ENV = {"PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "src")])}
GLOBAL = [sys.executable, "-m", "tests.helpers.mcp_global_server"]


@pytest.fixture(scope="module")
def norm(tmp_path_factory):
    root = tmp_path_factory.mktemp("servers")
    raw = root / "lme.json"
    write_longmemeval(raw, 6, 6, seed=3, turns=(2, 4), words_per_turn=(4, 20), spice=True)
    normalize_longmemeval(raw, root / "norm", log=lambda m: None)
    return root / "norm"


@pytest.fixture(scope="module")
def expected(norm, tmp_path_factory):
    return rank_one_segment(norm, tmp_path_factory.mktemp("expected"), "bm25s")[0]


def _timings(root, name="svc") -> list[dict]:
    return pq.read_table(layout.path(layout.TIMINGS, root=root / "results", dataset="lme", variant=name,
                                     segment="seg1")).to_pylist()


def _same(got, expected) -> bool:
    return all(a.equals(b) for a, b in zip(got, expected))


def _global(tmp_path, lag: float = 0.0, **system) -> dict:
    env = {**ENV, "MB_LAG": str(lag), "MB_SEEN": str(tmp_path / "seen.log")}
    return {"system": {"mcp": {"command": [*GLOBAL, "{workdir}"], "env": env}, "backoff_s": 0.05, **system}}


def _ops(rows, op) -> list[dict]:
    return [r for r in rows if r["operation"] == op]


def test_the_reference_server_per_namespace_gives_the_shared_servers_lists(norm, expected, tmp_path):
    shared = {"system": {"mcp": {"command": reference_command("user", "stdio"), "env": ENV}}}
    got, _ = rank_one_segment(norm, tmp_path / "shared", "svc", shared)
    assert _same(got, expected)
    # {namespace} named in env: a server per namespace, each a process of its own
    each = {"system": {"mcp": {"command": reference_command("user", "stdio"), "env": {**ENV, "MB_NS": "{namespace}"}},
                       "servers": 2}}
    got, _ = rank_one_segment(norm, tmp_path / "each", "svc", each)
    assert _same(got, expected)
    rows = _timings(tmp_path / "each")
    namespaces = {r["namespace"] for r in _ops(rows, "ingest")}
    # one start per namespace (the conformance check's two servers are not the job's), timed apart from searches
    assert len(namespaces) == 5 and {r["namespace"] for r in _ops(rows, "start")} == namespaces
    assert all(r["seconds"] > 0 for r in _ops(rows, "start"))
    assert {r["namespace"]: r["value"] for r in _ops(rows, "ingestion")} == {
        ns: sum(1 for r in _ops(rows, "ingest") if r["namespace"] == ns) for ns in namespaces}
    memory = _ops(rows, "memory")
    if os.path.isdir("/proc"):
        assert {r["namespace"] for r in memory} == namespaces and all(r["value"] > 10 * 2**20 for r in memory)
    shared_rows = _timings(tmp_path / "shared")
    assert len(_ops(shared_rows, "start")) == 1 and len(_ops(shared_rows, "memory")) == (1 if os.path.isdir("/proc")
                                                                                          else 0)


def test_a_global_store_is_wrong_shared_and_right_per_namespace(norm, expected, tmp_path):
    # shared: every namespace's sessions in one store, which count says at once
    shared = {"system": {"mcp": {"command": GLOBAL, "env": ENV}, "check": False}}
    with pytest.raises(RetrieverError, match=r"holds \d+ sessions after 6 were ingested \(the service mixes namespaces"):
        rank_one_segment(norm, tmp_path / "shared", "svc", shared)
    got, lines = rank_one_segment(norm, tmp_path / "each", "svc", _global(tmp_path, servers=2))
    assert _same(got, expected), lines
    seen = [json.loads(line) for line in (tmp_path / "seen.log").read_text().splitlines()]
    # the check's two servers, then one per namespace (5: two questions share a haystack), and a fresh one for the
    # determinism replica's namespace, each in a folder of its own, never more than 2 at once
    assert len(seen) == 8 and len({s["folder"] for s in seen}) == 8 and max(s["alive"] for s in seen) <= 2
    assert any(": determinism: namespace " in line and "-replica-" in line and ": 0 lists differ" in line
               for line in lines), lines
    servers = tmp_path / "each" / "results" / "cache" / "system" / "svc.servers"
    assert servers.is_dir() and not any(servers.iterdir())  # every folder removed when its namespace was done


def test_a_server_that_indexes_later_is_waited_for(norm, expected, tmp_path):
    # without a wait, count says fewer sessions than were sent: one line
    with pytest.raises(RetrieverError, match="holds 0 sessions after"):
        rank_one_segment(norm, tmp_path / "none", "svc", _global(tmp_path, lag=0.4, check=False))
    for until in ("count", "search", "settle"):
        ready = {"until": until, "every_s": 0.05, "settle_s": 0.5}
        got, _ = rank_one_segment(norm, tmp_path / until, "svc", _global(tmp_path, lag=0.4, check=False, ready=ready))
        assert _same(got, expected), until
        waits = _ops(_timings(tmp_path / until), "ready")
        assert len(waits) == 5 and all(r["ok"] and r["phase"] == until and r["seconds"] >= 0.3 for r in waits)


def test_a_server_never_ready_makes_system_errors(norm, tmp_path):
    ready = {"until": "count", "every_s": 0.05, "timeout_s": 0.3}
    with pytest.raises(RetrieverError, match=r"failed at the service.*not searchable 0\.3 s after its ingestion "
                                             r"\(ready\.until count"):
        rank_one_segment(norm, tmp_path, "svc", _global(tmp_path, lag=30, check=False, ready=ready))
    rank_one_segment(norm, tmp_path / "counted", "svc", _global(tmp_path, lag=30, check=False, ready=ready,
                                                                max_errors=6))
    assert len([r for r in _ops(_timings(tmp_path / "counted"), "ready") if not r["ok"]]) == 5


@pytest.mark.parametrize("each", [False, True])
def test_the_load_curve_changes_no_list(norm, expected, tmp_path, each):
    env = {**ENV, "MB_NS": "{namespace}"} if each else ENV
    load = {"concurrency": [1, 4], "searches": 12, "max_s": 10}
    system = {"system": {"mcp": {"command": reference_command("user", "stdio"), "env": env}, "load": load}}
    got, lines = rank_one_segment(norm, tmp_path, "svc", system)
    assert _same(got, expected)
    rows = _timings(tmp_path)
    windows = {r["phase"]: r for r in _ops(rows, "load_window")}
    assert set(windows) == {"1", "4"} and all(w["value"] == 12 and w["seconds"] > 0 for w in windows.values())
    searches = _ops(rows, "load")
    assert len(searches) == 24 and all(r["ok"] for r in searches) and len({r["namespace"] for r in searches}) == 1
    assert any("load on namespace" in line for line in lines)
