"""system.servers, system.ready and system.load (services/job/per_namespace.py,
readiness.py, load.py) against the reference HTTP service on loopback: their
config lines, the definition and params they leave as they were, a service
that counts what it holds late waited for, the load curve beside unchanged
lists, and what the latency files make of their timings rows; a child
process's peak memory read from /proc (services/transport/processes.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from memobench.catalog.variants import resolve
from memobench.core import layout
from memobench.core.errors import ConfigError
from memobench.datasets.normalize import normalize_longmemeval
from memobench.services.reference_servers.http_server import serve
from memobench.tools.generate.longmemeval import write_longmemeval
from tests.helpers.services import rank_one_segment as _rank
from tests.unit.retrieval.test_system import Proxy, _start

URL = "http://127.0.0.1:9"


@pytest.fixture(scope="module")
def norm(tmp_path_factory):
    root = tmp_path_factory.mktemp("serving")
    write_longmemeval(root / "lme.json", 6, 6, seed=3, turns=(2, 4), words_per_turn=(4, 20), spice=True)
    normalize_longmemeval(root / "lme.json", root / "norm", log=lambda m: None)
    return root / "norm"


@pytest.fixture(scope="module")
def expected(norm, tmp_path_factory):
    return _rank(norm, tmp_path_factory.mktemp("expected"), "bm25s")[0]


@pytest.fixture(scope="module")
def few(tmp_path_factory):
    """A 3-question file and the in-process bm25s's lists of it, for a server started per namespace (each a
    Python process: a question's haystack is a namespace): under servers: 2, a third waits for one to end."""
    root = tmp_path_factory.mktemp("few")
    write_longmemeval(root / "lme.json", 3, 6, seed=3, turns=(2, 4), words_per_turn=(4, 20), spice=True)
    normalize_longmemeval(root / "lme.json", root / "norm", log=lambda m: None)
    return root / "norm", _rank(root / "norm", root / "expected", "bm25s")[0]


@pytest.fixture
def reference():
    server = serve("bm25s", "user")
    yield _start(server)
    server.shutdown()
    server.server_close()


def _system(url: str, **over) -> dict:
    return {"system": {"url": url, "backoff_s": 0.01, "check": False, **over}}


def _timings(root: Path) -> list[dict]:
    return pq.read_table(layout.path(layout.TIMINGS, root=root / "results", dataset="lme", variant="svc",
                                     segment="seg1")).to_pylist()


def _same(got, expected) -> bool:
    return all(a.equals(b) for a, b in zip(got, expected))


def test_servers_and_load_leave_the_definition_and_params_as_they_were_and_ready_is_part_of_it():
    from memobench import plan
    from memobench.catalog.variant import to_spec
    from memobench.services.definition.variant import definition

    stdio = {"mcp": {"command": ["srv", "--store", "{workdir}/db"]}}

    def variant(system):
        return resolve("svc", "s", {"svc": {"system": system}})

    base = variant({"url": URL})
    assert definition(variant({"url": URL, "load": True})) == definition(base)
    assert definition(variant({"url": URL, "load": False})) == definition(base)
    assert plan.retrieve_spec({"variants": {}}, to_spec(variant({"url": URL, "load": False}))) == \
        plan.retrieve_spec({"variants": {}}, to_spec(base))
    each = variant(stdio)
    assert each.retriever.get("per_namespace") and definition(variant({**stdio, "servers": 1})) == definition(each)
    # a list searched before an asynchronous service indexed everything may differ: ready is in the definition
    assert definition(variant({"url": URL, "ready": {"until": "search"}})) != definition(base)
    assert variant({"url": URL, "load": True}).retriever["load"] == {"concurrency": [1, 4, 16], "searches": 64,
                                                                    "max_s": 20.0}


@pytest.mark.parametrize("system, said", [
    ({"url": URL, "servers": 2}, "servers bounds the servers started per namespace"),
    ({"mcp": {"command": ["srv", "{namespace}"]}, "isolation": "reset"}, "needs isolation: namespace"),
    ({"mcp": {"command": ["srv", "{namespace}"]}, "servers": 0}, "servers 0 must be a whole number"),
    ({"url": URL, "ready": {"until": "soon"}}, "ready must be a mapping with until: one of count, search, settle"),
    ({"url": URL, "ready": {"until": "count", "every": 1}}, "ready: unknown key"),
    ({"url": URL, "ready": {"until": "count", "timeout_s": 0}}, "ready: timeout_s 0 is not a number of seconds"),
    ({"url": URL, "ready": {"until": "count"}, "endpoints": {"count": None}}, "until: count needs the service's count"),
    ({"url": URL, "load": {"concurrency": [0]}}, r"load: concurrency \[0\] must be a list of whole numbers"),
    ({"url": URL, "load": {"searches": 0}}, "load: searches 0"),
    ({"url": URL, "load": {"rate": 3}}, "load must be true or a mapping"),
])
def test_bad_serving_settings_are_one_line(system, said):
    with pytest.raises(ConfigError, match=said) as e:
        resolve("svc", "s", {"svc": {"system": system}})
    assert "variant 'svc'" in str(e.value) and "\n" not in str(e.value)


def test_a_service_that_counts_late_is_waited_for_and_the_load_curve_changes_no_list(norm, expected, reference,
                                                                                   tmp_path):
    asked: dict[str, int] = {}

    def late(path, obj):  # each namespace's first two counts say it holds nothing yet (an index still building)
        if path == "/count":
            ns = late.namespace
            asked[ns] = asked.get(ns, 0) + 1
            if asked[ns] <= 2:
                return {"sessions": 0}
        return obj

    def fault(path, body, n):
        late.namespace = body.get("namespace")

    proxy = Proxy(reference, fault, late)
    url = _start(proxy)
    try:
        from memobench.retrieval.returned import RetrieverError

        with pytest.raises(RetrieverError, match="holds 0 sessions after"):
            _rank(norm, tmp_path / "none", "svc", _system(url, concurrency=1))
        asked.clear()
        ready = {"until": "count", "every_s": 0.01}
        load = {"concurrency": [1, 3], "searches": 9, "max_s": 10}
        got, lines = _rank(norm, tmp_path / "ready", "svc", _system(url, concurrency=1, ready=ready, load=load))
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert _same(got, expected)
    rows = _timings(tmp_path / "ready")
    waits = [r for r in rows if r["operation"] == "ready"]
    assert waits and all(r["ok"] and r["phase"] == "count" and r["attempts"] == 3 for r in waits)
    windows = {r["phase"]: r for r in rows if r["operation"] == "load_window"}
    assert set(windows) == {"1", "3"} and all(w["value"] == 9 for w in windows.values())
    assert sum(r["operation"] == "load" and r["ok"] for r in rows) == 18
    ingestion = [r for r in rows if r["operation"] == "ingestion"]
    assert len(ingestion) == len(waits) and all(r["value"] >= 1 for r in ingestion)
    # over HTTP there is no server process of ours: no start, no memory
    assert not {r["operation"] for r in rows} & {"start", "memory"}
    assert any("load on namespace" in line for line in lines)


def test_the_latency_files_show_starts_readiness_memory_and_the_load_curve(tmp_path):
    from memobench.reporting.latency import build
    from memobench.retrieval.timings import write_timings

    rows = [("search", "cold", "a", "q1", 0.010, 1, True, None), ("search", "warm", "a", "q1", 0.004, 1, True, None),
            ("start", "", "a", None, 0.8, 1, True, None), ("start", "", "b", None, 1.2, 1, True, None),
            ("ingest", "", "a", None, 0.02, 1, True, None), ("ingestion", "", "a", None, 0.5, 1, True, None, 10),
            ("ready", "count", "a", None, 0.25, 3, True, None), ("memory", "", "a", None, None, None, True, None,
                                                                 80 * 2**20)]
    for level, ms, wall in (("1", 0.004, 0.4), ("4", 0.010, 0.25)):
        rows += [("load", level, "a", f"q{i}", ms, 1, True, None) for i in range(40)]
        rows.append(("load_window", level, "a", None, wall, None, True, None, 40))
    table = tmp_path / "t.parquet"
    write_timings(table, rows, {"dataset": "lme", "variant": "svc", "timed": True, "measures": "service requests"})
    out = {k: tmp_path / f"latency.{k}" for k in ("md", "json", "png", "html")}
    build({("lme", "svc"): [table]}, {("lme", "svc"): {"hit@5_rate": 0.5}}, out["md"], out["json"], out["png"],
          out["html"], log=lambda m: None)
    s = json.loads(out["json"].read_text())[0]
    assert s["start"] == {"n": 2, "p50_ms": pytest.approx(1000.0), "max_ms": pytest.approx(1200.0)}
    assert s["ready"]["until"] == "count" and s["ready"]["n"] == 1 and s["ready"]["timed_out"] == 0
    assert s["ingest"]["per_session_ms"] == pytest.approx(50.0) and s["memory"]["peak_mb"] == pytest.approx(80.0)
    assert s["load"]["1"]["searches_per_s"] == pytest.approx(100.0) and s["load"]["4"]["searches_per_s"] == 160.0
    assert s["load"]["4"]["p50"]["ms"] == pytest.approx(10.0) and s["warm"]["n"] == 1  # load rows are not warm ones
    md = out["md"].read_text()
    assert "until count: 1: 250 / 250, 0 timed out" in md and "| svc | 4 | 40, 0 | 160.0 |" in md
    assert out["png"].stat().st_size > 0


def test_a_child_process_peak_memory_is_read_from_proc():
    from memobench.services.transport.processes import peak_memory, started_by_us

    if not os.path.isdir("/proc"):
        pytest.skip("no /proc")
    code = ("import sys, time; b = bytearray(64 * 2**20); b[::4096] = b'x' * len(b[::4096]); del b; "
            "print('freed', flush=True); time.sleep(30)")
    child = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "MB_TAG": "peak"},
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "freed\n"  # the memory held and given back
        pids = started_by_us([sys.executable, "-c", code], {"MB_TAG": "peak"})
        assert pids == [child.pid] and not started_by_us([sys.executable, "-c", code], {"MB_TAG": "other"})
        assert peak_memory(child.pid) >= 64 * 2**20  # the peak stays after the memory is freed
    finally:
        child.kill()
        child.wait()


def test_a_script_server_is_found_though_its_interpreter_runs_it(tmp_path):
    """A server given as a script (a console script such as memobench, any #! file) runs as its
    interpreter with the script's path first: still the command's process."""
    from memobench.services.transport.processes import peak_memory, started_by_us

    if not os.path.isdir("/proc"):
        pytest.skip("no /proc")
    script = tmp_path / "my-server"
    script.write_text(f"#!{sys.executable}\nimport time\nprint('up', flush=True)\ntime.sleep(30)\n")
    script.chmod(0o755)
    child = subprocess.Popen([str(script), "serve", "--stdio"], env={**os.environ, "MB_TAG": "script"},
                             stdout=subprocess.PIPE, text=True)
    try:
        # the script's own line runs once its interpreter has started: the process is then the script's
        assert child.stdout.readline() == "up\n"
        assert started_by_us([str(script), "serve", "--stdio"], {"MB_TAG": "script"}) == [child.pid]
        assert not started_by_us([str(script), "serve"], {"MB_TAG": "script"})
        assert peak_memory(child.pid) > 0
    finally:
        child.kill()
        child.wait()


def test_a_search_readiness_wait_asks_for_the_last_session_sent():
    """An index that takes what it was sent in order finds the first session long before the last: the
    readiness search asks for the last one's text, so that it passes once the whole namespace is in."""
    from memobench.services.job.readiness import wait

    sessions = [{"id": f"s{i}", "date": None, "turns": [{"role": "user", "content": f"word{i} about the lake"},
                                                        {"role": "assistant", "content": ""}]} for i in range(5)]
    indexed: list[dict] = []

    def search(text: str) -> list[str]:  # one more session indexed at each poll, in the order sent
        if len(indexed) < len(sessions):
            indexed.append(sessions[len(indexed)])
        return [s["id"] for s in indexed if any(text in t["content"] for t in s["turns"] if t["content"])]

    ready = {"until": "search", "every_s": 0.001, "timeout_s": 5.0, "settle_s": 0.0}
    _, polls = wait(ready, "ns", sessions, None, search)
    assert polls == len(sessions) and len(indexed) == len(sessions)


def _per_namespace(**over) -> dict:
    """The reference MCP server over stdio, one process per namespace ({namespace} in its env)."""
    from tests.helpers import REPO, reference_command

    return {"system": {"mcp": {"command": reference_command("user", "stdio"),
                               "env": {"PYTHONPATH": str(REPO / "src"), "MB_NAMESPACE": "{namespace}"}},
                       "backoff_s": 0.01, "check": False, "servers": 2, **over}}


def test_a_server_per_namespace_job_logs_its_searches_as_they_happen(few, tmp_path):
    pytest.importorskip("mcp")
    norm, expected = few
    started = time.monotonic()
    got, lines = _rank(norm, tmp_path, "svc", _per_namespace())
    took = time.monotonic() - started
    assert _same(got, expected)
    done = [line for line in lines if "questions (" in line and "done in" in line]
    # one closing line, the searches' own: their time is the job's (servers started, namespaces ingested),
    # not the moment the ranking step takes to read their answers afterwards
    assert len(done) == 1, lines
    seconds = float(re.search(r"done in ([\d.]+) s", done[0]).group(1))
    assert re.search(r": (\d+) / \1 questions \(100%, ", done[0]), done
    # the reading step alone takes hundredths of a second; under load the process's own start and imports, outside
    # the searches, can be half of ``took``: a quarter tells the two apart on a busy machine
    assert 0.25 * took < seconds <= took + 0.05, (done, took)  # printed to 0.1 s


def test_the_servers_bound_holds_across_processes(tmp_path):
    """Three processes (a variant's parallel jobs) each wanting a server, under servers: 2: two at once, the
    third once one has ended."""
    # each asks for a slot once all three have started (told so on stdin): their starts, not their holds,
    # are what a slow machine spreads out
    code = ("import sys, time\nfrom pathlib import Path\nfrom memobench.services.job.per_namespace import slot\n"
            "print('ready', flush=True); sys.stdin.readline()\n"
            "with slot(Path(sys.argv[1]), 2):\n"
            "    print(time.monotonic(), flush=True); time.sleep(0.4); print(time.monotonic(), flush=True)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "slots")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env) for _ in range(3)]
    assert [p.stdout.readline() for p in procs] == ["ready\n"] * 3
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    spans = [tuple(float(x) for x in p.communicate(timeout=60)[0].split()) for p in procs]
    alive = lambda t: sum(a <= t < b for a, b in spans)  # noqa: E731
    assert max(alive(a) for a, _ in spans) == 2, spans  # two at once, never three
    assert sorted(spans)[2][0] >= min(b for _, b in spans), spans  # the third waited for one to end
