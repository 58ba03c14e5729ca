"""The conformance check of a memory service (``memobench check-service``,
services/conformance.py): it passes against the reference servers (HTTP and MCP
stdio), and against small fake servers that each break one promise of the
API it fails, naming the check: a server that ignores the namespace, keeps
only the first sessions, skips an id it already holds (as
@modelcontextprotocol/server-memory skips an entity's name), ignores reset,
or alters or reorders the ids."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memobench.services.reference_servers.http_server import serve
from memobench.services.definition.variant import system_variant
from memobench.services import conformance as check
from tests.helpers import REPO, reference_command
from tests.helpers.services import start as _start

ENV = {"PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "src")])}


def _spec(system: dict, name: str = "svc") -> dict:
    return system_variant(name, "s", {"system": system}).retriever


def _run(system: dict) -> dict[str, check.Result]:
    return {r.check: r for r in check.run(_spec(system))}


def _failed(results: dict) -> set[str]:
    return {name for name, r in results.items() if r.status == "fail"}


def test_the_reference_http_server_passes_every_check():
    server = serve("bm25s", "user")
    try:
        results = _run({"url": _start(server)})
    finally:
        server.shutdown()
        server.server_close()
    assert {n: r.status for n, r in results.items()} == dict.fromkeys(check.CHECKS, "pass"), results
    # it cleaned up: every namespace it used is empty again, and each is the check's own
    assert server.RequestHandlerClass.store.namespaces and all(
        ns.startswith("mb-check-") and not held for ns, held in server.RequestHandlerClass.store.namespaces.items())


@pytest.mark.skipif(importlib.util.find_spec("mcp") is None, reason="the MCP Python SDK is not installed")
def test_the_reference_mcp_stdio_server_passes_every_check():
    results = _run({"mcp": {"command": reference_command("user", "stdio"), "env": ENV}})
    assert {n: r.status for n, r in results.items()} == dict.fromkeys(check.CHECKS, "pass"), results


def test_a_fake_that_answers_as_the_api_says_passes(fake):
    url, server = fake()
    results = _run({"url": url})
    assert _failed(results) == set(), results
    assert all(not held for held in server.store.values())  # reset after itself


@pytest.mark.parametrize("fault,check_name,said", [
    ("leak", "isolation", "namespace"),
    ("first:3", "sessions", "never came back"),
    ("unique", "sessions", "'session_1'"),
    ("no-reset", "reset", "'stale_before_reset'"),
    ("lower", "ids", "'sharegpt_yw7kx3p_0'"),
    ("shift", "ids", "first"),
])
def test_a_fake_that_breaks_a_promise_fails_the_check_that_names_it(fake, fault, check_name, said):
    url, _ = fake(fault)
    results = _run({"url": url})
    assert results[check_name].status == "fail", results
    assert said in results[check_name].why and "\n" not in results[check_name].why, results[check_name].why


def test_an_ingest_that_failed_on_the_way_fills_the_namespaces_again_not_the_session_twice(fake):
    url, _ = fake("503-at:3")  # the second of the sessions after the reset
    results = _run({"url": url, "backoff_s": 0.01})
    assert _failed(results) == set(), results


def test_count_disagreeing_fails_and_no_count_is_skipped_with_why(fake):
    url, _ = fake("first:3")
    assert _run({"url": url})["count"].status == "fail"
    url, _ = fake()
    results = _run({"url": url, "endpoints": {"count": None}})
    assert results["count"].status == "skipped" and "count" in results["count"].why
    assert _failed(results) == set(), results


def test_reset_isolation_skips_the_isolation_check_with_why(fake):
    url, server = fake("leak")  # one store for all: what reset isolation is for
    results = _run({"url": url, "isolation": "reset"})
    assert results["isolation"].status == "skipped" and "reset" in results["isolation"].why
    assert _failed(results) == set(), results


def test_a_service_that_cannot_be_reached_fails_the_api_check_and_skips_the_rest():
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = server.server_address[1]
    server.server_close()  # nothing listens there now
    results = _run({"url": f"http://127.0.0.1:{port}", "retries": 0})
    assert results["api"].status == "fail" and "reset" in results["api"].why
    assert {r.status for n, r in results.items() if n != "api"} == {"skipped"}


def test_namespaces_are_the_check_s_own_and_unlike_a_run_s(fake):
    url, server = fake()
    _run({"url": url, "namespace_prefix": "team-"})
    assert server.namespaces and all(ns.startswith("team-check-") for ns in server.namespaces)
    # a run's namespace is the prefix, the variant and a 20-digit digest: never this
    assert not any(re.fullmatch(r"team-.*-[0-9a-f]{20}", ns) for ns in server.namespaces)


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memobench.cli", "check-service", *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **ENV}, cwd=REPO)


def test_the_command_prints_a_table_and_exits_0_when_all_pass_and_1_naming_the_failure(fake):
    url, _ = fake()
    ok = _cli(url)
    assert ok.returncode == 0, ok.stderr
    lines = ok.stdout.splitlines()
    assert lines[0].split() == ["check", "result", "why"]
    assert [ln.split()[0] for ln in lines[1:len(check.CHECKS) + 1]] == list(check.CHECKS)
    url, _ = fake("leak")
    bad = _cli(url)
    assert bad.returncode == 1
    assert re.search(r"^isolation +fail +", bad.stdout, re.M), bad.stdout


def test_the_command_takes_a_configured_variant_s_settings(fake, tmp_path):
    url, server = fake()
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(json.dumps({"variants": {"mine": {"system": {"url": url, "namespace_prefix": "cfg-",
                                                                 "endpoints": {"count": None}}}}}))
    proc = _cli("--configfile", str(cfg), "--variant", "mine")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^count +skipped +", proc.stdout, re.M), proc.stdout
    assert all(ns.startswith("cfg-check-") for ns in server.namespaces)
    missing = _cli("--configfile", str(cfg), "--variant", "nope")
    assert missing.returncode == 1 and missing.stderr.startswith("memobench: ") and "nope" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("inside", [True, False])
def test_a_config_file_that_is_not_yaml_is_one_line_naming_it(tmp_path, monkeypatch, inside):
    """In a checkout or outside one: the file and its line, not the YAML parser's traceback."""
    from argparse import Namespace

    from memobench.check_service import variant_of
    from memobench.core.errors import ConfigError

    bad = tmp_path / "bad.yaml"
    bad.write_text("variants: [\n", encoding="utf-8")
    monkeypatch.chdir(REPO if inside else tmp_path)
    monkeypatch.delenv("MEMOBENCH_WORKFLOW", raising=False)
    args = Namespace(url=None, mcp=None, variant="x", configfile=[str(bad)], workflow=None)
    with pytest.raises(ConfigError) as e:
        variant_of(args)
    assert str(e.value) == f"{bad}: not valid YAML (line 2): expected the node content, but found '<stream end>'"


LIBRARIES = "tests.helpers.memory_libraries"


@pytest.mark.parametrize("system", [
    {"library": f"{LIBRARIES}:OkapiMemory"},  # rank_bm25's BM25Okapi: a word in 1 of 2 sessions has idf 0
    {"library": f"{REPO / 'docs' / 'recipes' / 'bm25s_memory.py'}:BM25sMemory"},
    {"library": f"{LIBRARIES}:SubstringMemory", "query": "longest-word"},  # no scores, only what holds the query
], ids=["rank_bm25-okapi", "bm25s", "substring"])
def test_every_correct_ranking_passes_every_check(system):
    results = _run(system)
    assert {n: r.status for n, r in results.items()} == dict.fromkeys(check.CHECKS, "pass"), results


@pytest.mark.parametrize("fault,said", [
    ("unpadded", "'417', an id never sent (sent as '00417')"),
    ("favourite", "first, above"),  # a session holding none of the words, strictly above the one that does
])
def test_an_altered_id_or_a_wrong_session_strictly_above_still_fails_ids(fake, fault, said):
    url, _ = fake(fault)
    results = _run({"url": url})
    assert results["ids"].status == "fail" and said in results["ids"].why, results["ids"]


def test_a_dropped_copy_fails_sessions_though_its_id_pads_every_list(fake):
    """The second copy of a repeated id overwrites the first, and every search lists every session (score 0
    where no word matches): the id comes back for the first copy's words, but only as padding."""
    url, _ = fake("overwrite,pad")
    results = _run({"url": url})
    assert results["sessions"].status == "fail", results
    assert "copy 1 of the 2" in results["sessions"].why and "lowest score" in results["sessions"].why


@pytest.mark.parametrize("score", ["NaN", "Infinity", '"high"'])
def test_a_score_that_is_not_a_finite_number_fails_api(fake, score):
    url, _ = fake(f"score:{score}")
    results = _run({"url": url})
    assert results["api"].status == "fail" and "not a finite number" in results["api"].why, results["api"]


def test_a_skipped_check_is_judged_shown_and_never_fails(fake, tmp_path):
    url, _ = fake("lower")
    results = _run({"url": url, "check": {"skip": ["sessions", "ids", "count"]}})  # lower-cased ids: both fail
    assert results["ids"].status == check.SKIPPED and "it found: fail: " in results["ids"].why
    assert results["count"].status == check.SKIPPED and "it found: pass" in results["count"].why
    assert check.first_failure(list(results.values())) is None
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(json.dumps({"variants": {"mine": {"system": {"url": url, "check": {"skip": ["sessions", "ids"]}}}}}))
    proc = _cli("--configfile", str(cfg), "--variant", "mine")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^ids +skipped \(config\) +system\.check\.skip names it; it found: fail: ", proc.stdout, re.M)


@pytest.mark.parametrize("value,said", [
    ({"skip": ["idz"]}, "check: skip: 'idz' is not a check (one of reset, sessions,"),
    ({"skip": ["api"]}, "check: skip: api cannot be skipped"),
    ({"skip": "ids"}, "must be true, false or {skip: [checks]}"),
    ({"only": ["ids"]}, "must be true, false or {skip: [checks]}"),
])
def test_a_skip_that_names_no_check_is_one_config_line(value, said):
    from memobench.core.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        _spec({"url": "http://127.0.0.1:9", "check": value})
    assert str(e.value).startswith("variant 'svc': system: ") and said in str(e.value), str(e.value)


def test_the_skip_is_part_of_the_definition_and_an_empty_one_is_the_default():
    from memobench.catalog.variants import resolve
    from memobench.services.definition.variant import definition

    def of(**over):
        return definition(resolve("svc", "s", {"svc": {"system": {"url": "http://127.0.0.1:9", **over}}}))

    assert of() == of(check=True) == of(check={"skip": []}) == of(check=False)
    assert of(check={"skip": ["ids"]}) == of(check={"skip": ["ids", "ids"]}) != of()
