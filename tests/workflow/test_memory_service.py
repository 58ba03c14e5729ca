"""Memory services through the real workflow: the reference server
(``memobench serve``, a real process on 127.0.0.1, over the HTTP API, over
MCP's streamable HTTP, and over MCP stdio started by each job)
driven by a system variant gives the in-process reference variant's lists
and numbers exactly, on the real LoCoMo file's first conversation and on a
generated LongMemEval file with its edge cases; a rerun confirms what a
running server holds and ingests nothing; a server killed mid-run fails the job in
one line, and after a restart the next run ingests again and ends with the
same results. Timings lie with the logs; metrics.json is the same bytes run
after run."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from memobench.core import layout
from tests.helpers import (REPO, ReferenceServer, dry_run_jobs, memobench_lines, reference_command, snakemake,
                           write_config)

# the reference server's document rule for each dataset (the retrieve stage's: LongMemEval's user turns)
DOCUMENTS = {"locomo1": "all", "lme": "user"}
SERVICE = {"locomo1": "svc-all", "lme": "svc-user"}
# MCP: over stdio (a server each job starts) on LoCoMo, over streamable HTTP (a running server) on LongMemEval
MCP = {"locomo1": "mcp-stdio", "lme": "mcp-http"}
ENV = {"PYTHONPATH": str(REPO / "src")}
# a key each service is sent (a header; a stdio server's environment), read from the run's environment:
# written nowhere, in no form (the reference servers take any)
TOKEN = "t0ken/#&=+ of-mine"


@pytest.fixture(scope="module")
def run(small_data, tmp_path_factory):
    pytest.importorskip("mcp")
    servers = {ds: ReferenceServer(doc) for ds, doc in DOCUMENTS.items()}
    servers["mcp"] = ReferenceServer("user", mcp="http")
    data, datasets = small_data([], seed=5, spice=True)
    for ds in DOCUMENTS:
        datasets[ds]["variants"] = ["bm25s", SERVICE[ds], MCP[ds]]
    root = tmp_path_factory.mktemp("service")
    key = {"Authorization": "Bearer $MB_SVC_TOKEN"}
    variants = {SERVICE[ds]: {"system": {"url": servers[ds].url, "backoff_s": 0.05, "headers": key}}
                for ds in DOCUMENTS}
    # a server per namespace ({namespace} named), waited for until count agrees, with a load curve: lists unchanged
    variants["mcp-stdio"] = {"system": {"mcp": {"command": reference_command("all", "stdio"),
                                                "env": {**ENV, "MB_NAMESPACE": "{namespace}",
                                                        "MB_KEY": "${MB_SVC_TOKEN}"}},
                                        "ready": {"until": "count", "every_s": 0.05},
                                        "load": {"concurrency": [1, 4], "searches": 16, "max_s": 10}}}
    variants["mcp-http"] = {"system": {"mcp": {"url": servers["mcp"].url}, "headers": key}}
    cfg = write_config(root / "cfg.yaml", data_dir=str(data), run=list(DOCUMENTS), datasets=datasets,
                       variants=variants)
    work = root / "work"
    work.mkdir()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MB_SVC_TOKEN", TOKEN)  # this module's every run (and memobench score) is sent it
        proc = snakemake(work, "--cores", "2", configfile=cfg)
        (root / "console.txt").write_text(proc.stdout + proc.stderr, encoding="utf-8")
        yield work, cfg, servers
    for s in servers.values():
        s.kill()


def _result(work, ds, variant, name):
    return work / layout.path(getattr(layout, name), dataset=ds, variant=variant)


def _timings(work, ds, variant) -> list[dict]:
    folder = work / layout.path(layout.TIMINGS, dataset=ds, variant=variant, segment="x").rsplit("/", 1)[0]
    return [r for p in sorted(folder.glob("*.parquet")) for r in pq.read_table(p).to_pylist()]


@pytest.mark.parametrize("ds,service", [(ds, v[ds]) for ds in DOCUMENTS for v in (SERVICE, MCP)])
def test_lists_and_numbers_equal_the_in_process_reference_variant(run, ds, service):
    work, _, _ = run
    for name in ("RANKINGS", "DEEP", "OUTCOMES"):
        assert pq.read_table(_result(work, ds, service, name)).equals(pq.read_table(_result(work, ds, "bm25s", name)))
    mine = json.loads(_result(work, ds, service, "METRICS").read_text())
    ref = json.loads(_result(work, ds, "bm25s", "METRICS").read_text())
    assert mine.pop("system_errors") == {"count": 0, "max_per_job": 0, "questions": []}
    assert mine.pop("warnings") == []  # degenerate answers: none from the reference server
    # a haystack searched again in a fresh namespace (a fresh server per namespace), the warm repeats and the load
    # curve's concurrent searches (mcp-stdio): every list the same
    same = mine.pop("system_determinism")
    assert same["replicas"]["namespaces"] >= 1 and same["replicas"]["questions"] >= 1
    assert [same[kind]["differing"] for kind in ("replicas", "repeats", "concurrent")] == [[], [], []]
    for key in ("variant", "harness", "description", "kind"):
        assert mine.pop(key) != ref.pop(key)
    # what ranked each: the service by its protocol, address and grain, the reference by its recipe backend
    assert mine.pop("system")["grain"] == "session" and ref.pop("recipe")["backend"] == "bm25s"
    assert mine == ref
    assert f"| {service} (memory service) |" in (work / layout.REPORT_MD).read_text()
    searches = [r for r in _timings(work, ds, service) if r["operation"] == "search"]
    assert searches and all(r["ok"] for r in searches) and {r["phase"] for r in searches} == {"cold", "warm"}
    # the in-process retriever is timed per call: a cold call per distinct haystack, no server time
    calls = _timings(work, ds, "bm25s")
    assert calls and {r["operation"] for r in calls} == {"search"} and all(r["server_seconds"] is None for r in calls)
    assert sum(r["phase"] == "cold" for r in calls) == len({r["namespace"] for r in calls})


def test_the_latency_page_shows_each_service_with_its_plot_in_a_browser(run, tmp_path):
    from tests.helpers import browser

    work, _, servers = run
    summaries = json.loads((work / layout.LATENCY_JSON).read_text())
    assert [(s["dataset"], s["variant"]) for s in summaries] == [(ds, v) for ds in DOCUMENTS
                                                                 for v in ("bm25s", SERVICE[ds], MCP[ds])]
    for s in summaries:
        for phase in ("cold", "warm"):
            for q in ("p50", "p95", "p99") if s[phase]["n"] else ():
                assert s[phase][q]["low"] <= s[phase][q]["ms"] <= s[phase][q]["high"]
        if s["variant"] == "bm25s":  # in-process calls, no server; LongMemEval: a haystack per question, all cold
            assert s["measures"] == "in-process calls" and s["outside_server"]["n"] == 0
            assert s["cold"]["n"] > 0 and (s["warm"]["n"] > 0) == (s["dataset"] == "locomo1")
            continue
        # the reference server says what it spent: the time outside it is known, and positive
        assert s["measures"] == "service requests"
        assert s["outside_server"]["n"] == s["warm"]["n"] > 0 and s["outside_server"]["p50"]["ms"] > 0
        assert s["hit@5"] == json.loads(_result(work, s["dataset"], s["variant"], "METRICS").read_text())["hit@5_rate"]
    stdio = next(s for s in summaries if s["variant"] == "mcp-stdio")
    assert stdio["start"]["n"] == stdio["ready"]["n"] == stdio["ingest"]["namespaces"] >= 1
    assert stdio["ingest"]["per_session_ms"] > 0 and stdio["memory"]["peak_mb"] > 10
    assert [lv["searches"] for lv in stdio["load"].values()] == [16, 16]
    assert all(lv["searches_per_s"] > 0 and lv["p50"]["ms"] <= lv["p95"]["ms"] for lv in stdio["load"].values())
    assert not any(s["load"] for s in summaries if s["variant"] != "mcp-stdio")
    md = (work / layout.LATENCY_MD).read_text()
    assert "| mcp-stdio | 4 | 16, 0 |" in md and "until count: " in md
    assert f"| svc-all (service: 127.0.0.1:{servers['locomo1'].port}) |" in md and "| bm25s (in-process) |" in md
    assert "(latency.png)" in md
    assert "latency.html" in (work / layout.REPORT_MD).read_text()  # the report says where it is
    # each service's recall within the token budgets (its official.json's) beside its p50 search latency, a
    # point on a budget's front where no service has as much recall at a lower latency
    section = md.split("## Recall within a token budget against search latency")[1].split("\n## ")[0]
    for ds in DOCUMENTS:
        services = [s for s in summaries if s["dataset"] == ds and s["measures"] == "service requests"]
        rows = {r.split("|")[1].strip(): [c.strip() for c in r.split("|")[2:-1]]
                for r in section.split(f"### {ds}\n")[1].split("\n### ")[0].splitlines()[2:] if r.startswith("| ")}
        assert set(rows) == {s["variant"] for s in services}
        for s in services:
            b = json.loads(_result(work, ds, s["variant"], "OFFICIAL").read_text())["budgets"]
            lat = s["warm"]["p50"]["ms"]
            for j, t in enumerate(b["budgets"]):
                r = b[f"recall_any@{t}tok"]
                assert s["budgets"][f"recall_any@{t}tok"] == r
                beaten = any(o["warm"]["p50"]["ms"] <= lat and o["budgets"][f"recall_any@{t}tok"] >= r
                             and (o["warm"]["p50"]["ms"] < lat or o["budgets"][f"recall_any@{t}tok"] > r)
                             for o in services)
                assert rows[s["variant"]][1 + j].endswith("◆") != beaten, (ds, s["variant"], t)
    r = browser.measure(work / layout.LATENCY_HTML, tmp_path)
    assert r["scrollWidth"] <= browser.WIDTH and len(r["images"]) == 1 and r["images"][0][0] > 0
    assert r["rows"] and [x for x in r["rows"] if x[0] != x[1]] == []
    ink = browser.screenshot(work / layout.LATENCY_HTML, tmp_path / "latency.png", tmp_path, height=1400)
    assert 0.02 < ink < 0.9, ink


def test_a_key_sent_is_written_nowhere_and_each_service_says_what_served_it(run):
    from urllib.parse import quote

    from memobench import __version__

    work, _, servers = run
    console = (work.parent / "console.txt").read_text()
    assert "localrule retrieve:" in console  # the run's console, the jobs' lines included
    for text in (TOKEN, quote(TOKEN, safe=""), "t0ken"):
        assert text not in console
        for f in work.rglob("*"):
            assert not f.is_file() or text.encode() not in f.read_bytes(), f
    said = {(ds, v): json.loads(_result(work, ds, v, "METRICS").read_text())["system"]
            for ds in DOCUMENTS for v in (SERVICE[ds], MCP[ds])}
    reference = {"name": "memobench-reference", "version": __version__}
    assert said["locomo1", "mcp-stdio"]["server"] == reference
    assert said["locomo1", "mcp-stdio"]["package"] == f"memobench@{__version__}"  # python -m memobench.cli
    assert said["lme", "mcp-http"]["server"] == reference
    assert said["lme", "mcp-http"]["host"] == f"127.0.0.1:{servers['mcp'].port}"
    http = said["lme", "svc-user"]  # a plain HTTP service: its host, no serverInfo
    assert http["host"] == f"127.0.0.1:{servers['lme'].port}" and "server" not in http
    report, latency = (work / layout.REPORT_MD).read_text(), (work / layout.LATENCY_MD).read_text()
    assert f"(memory service: mcp stdio: python; served by memobench-reference {__version__} (memobench@" in report
    assert f"| mcp-http (service: memobench-reference {__version__} (127.0.0.1:" in latency


def test_a_rerun_confirms_and_ingests_nothing(run):
    work, cfg, _ = run
    running = [("locomo1", "svc-all"), ("lme", "svc-user"), ("lme", "mcp-http")]
    before = {(ds, v): _result(work, ds, v, "METRICS").read_bytes() for ds, v in running + [("locomo1", "mcp-stdio")]}
    snakemake(work, "--cores", "2", "--forcerun", "retrieve", configfile=cfg)
    for ds, v in running:
        ops = {r["operation"] for r in _timings(work, ds, v)}
        assert "count" in ops and not ops & {"ingest", "reset"}, (v, ops)
    # a stdio server is the job's own new process: count finds it empty, and it is ingested again
    assert "ingest" in {r["operation"] for r in _timings(work, "locomo1", "mcp-stdio")}
    for key, metrics in before.items():
        assert _result(work, *key, "METRICS").read_bytes() == metrics


def test_a_killed_server_fails_in_one_line_and_after_a_restart_is_ingested_again(run):
    work, cfg, servers = run
    before = _result(work, "locomo1", "svc-all", "DEEP").read_bytes()
    servers["locomo1"].kill()
    proc = snakemake(work, "--cores", "2", "--forcerun", "retrieve", configfile=cfg, check=False)
    assert proc.returncode != 0
    lines = memobench_lines(proc.stderr)
    assert lines and "variant 'svc-all': " in lines[0] and "failed at the service" in lines[0], proc.stderr[-3000:]
    assert "ConnectionRefusedError" in lines[0]
    servers["locomo1"].restart()  # an in-memory server: it comes back empty
    snakemake(work, "--cores", "2", configfile=cfg)
    assert "ingest" in {r["operation"] for r in _timings(work, "locomo1", "svc-all")}
    assert _result(work, "locomo1", "svc-all", "DEEP").read_bytes() == before


def test_memobench_score_measures_a_service_without_a_config_edit(run):
    work, cfg, servers = run

    def score(url, name, how="--system"):
        return subprocess.run([sys.executable, "-m", "memobench.cli", "score", how, url, "--dataset", "locomo1",
                               "--against", "bm25s", "--name", name, "--configfile", str(cfg), "-d", str(work)],
                              capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(REPO / "src")})

    proc = score(servers["locomo1"].url, "scored-svc")
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    ours = next(line for line in lines if line.lstrip().startswith("scored-svc "))
    theirs = next(line for line in lines if line.lstrip().startswith("bm25s "))
    assert ours.split()[1:] == theirs.split()[1:]  # the same n, hit@k and MRR
    assert "failed at the service (counted as misses): 0" in proc.stdout
    assert any(line.lstrip().startswith("hit@1  +0.0 [+0.0, +0.0]") for line in lines)
    assert "search latency (this run's measurement;" in proc.stdout and "  warm p50 " in proc.stdout
    # the name now holds this service's results: another service under it is refused in one line
    other = score("http://127.0.0.1:9", "scored-svc")
    said = memobench_lines(other.stderr)
    assert other.returncode == 1 and said and "holds the results of " + servers["locomo1"].url in said[0], other.stderr
    # an MCP server started by one quoted command, over stdio
    proc = score(shlex.join(reference_command("all", "stdio")), "scored-mcp", how="--mcp")
    assert proc.returncode == 0, proc.stderr[-3000:]
    ours = next(line for line in proc.stdout.splitlines() if line.lstrip().startswith("scored-mcp "))
    assert ours.split()[1:] == theirs.split()[1:] and "failed at the service (counted as misses): 0" in proc.stdout


def test_a_service_s_jobs_count_against_the_memory_service_resource(run):
    work, cfg, _ = run
    out = snakemake(work, "-n", "--forcerun", "retrieve", "--resources", "memory_service=1", configfile=cfg).stdout
    jobs = re.findall(r"rule retrieve:\n((?:    .*\n)+)", out)
    counted = {re.search(r"variant=([^,\s]+)", j).group(1): re.search(r"memory_service=(\d+)", j).group(1)
               for j in jobs}
    assert counted == {"bm25s": "0", "svc-all": "1", "svc-user": "1", "mcp-stdio": "1", "mcp-http": "1"}, counted


def _score(work, *args, configfile=()) -> subprocess.CompletedProcess:
    """`memobench score ... --dataset locomo1` in ``work`` over the config files ``configfile``."""
    return subprocess.run([sys.executable, "-m", "memobench.cli", "score", *args, "--dataset", "locomo1", "-d",
                           str(work), "--configfile", *map(str, configfile)], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(REPO / "src")})


def _said(proc) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("memobench:")]


def test_memobench_score_reuses_the_results_of_the_same_service_under_its_name(run, tmp_path):
    """The README's way: a service configured in an overlay and run through the pipeline, then scored
    under its name, with the overlay given or not: the same service with the same settings is that
    variant, its results reused as they are; other settings under the name are refused in one line."""
    work, cfg, servers = run
    url = servers["locomo1"].url
    # defaults written out as docs/memory-services.md writes them (30, not the 30.0 a left-out default is)
    mine = write_config(tmp_path / "mine.yaml", variants={"my-service": {"system": {"url": url, "timeout_s": 30}}},
                        datasets={"locomo1": {"variants": ["bm25s", "my-service"]}})
    targets = [f"results/locomo1/my-service/{f}" for f in ("metrics.json", "official.json")]
    snakemake(work, "--cores", "2", *targets, "--configfile", str(cfg), str(mine))
    folder = work / "results" / "locomo1" / "my-service"
    stamps = {p: p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}
    for configs in ([cfg], [cfg, mine]):
        proc = _score(work, "--system", url, "--against", "bm25s", "--name", "my-service", configfile=configs)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert any(line.lstrip().startswith("my-service ") for line in proc.stdout.splitlines()), proc.stdout
    for configs, said in (([cfg], f"results/locomo1/my-service/ holds the results of {url} with other settings; "
                                  f"give this run another name with --name"),
                          ([cfg, mine], "the variant name 'my-service' is taken (a built-in or configured variant); "
                                        "give another with --name")):
        proc = _score(work, "--system", url, "--grain", "turn", "--against", "bm25s", "--name", "my-service",
                      configfile=configs)
        assert proc.returncode == 1 and _said(proc) == [f"memobench: {url}: {said}"], proc.stderr[-3000:]
    assert {p: p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()} == stamps  # nothing made again
    # and back: the pipeline finds its own results current after memobench score's runs
    assert dry_run_jobs(work, "--cores", "2", *targets, "--configfile", str(cfg), str(mine)) == {}


def test_memobench_score_asks_a_service_for_k_results(run):
    work, cfg, servers = run
    proc = _score(work, "--system", servers["locomo1"].url, "--k", "10", "--against", "bm25s", "--name", "svc-k10",
                  configfile=[cfg])
    assert proc.returncode == 0, proc.stderr[-3000:]
    deep = pq.read_table(_result(work, "locomo1", "svc-k10", "DEEP")).to_pylist()
    assert deep and max(r["rank"] for r in deep) <= 10
    # fewer than 10 would make hit@10 and MRR those of shorter lists
    bad = _score(work, "--system", servers["locomo1"].url, "--k", "3", "--name", "svc-k3", configfile=[cfg])
    assert bad.returncode == 1 and _said(bad) == [
        "memobench: --k 3: give how many results each search asks for, 10 or more (hit@10 and MRR read 10 results)"
    ], bad.stderr


def test_memobench_score_compares_with_a_fusion_of_an_overlay(run, tmp_path):
    work, cfg, servers = run
    fused = write_config(tmp_path / "fused.yaml", variants={"bm25-svc": {"fuse": {"of": ["bm25s", "svc-all"]}}})
    proc = _score(work, "--system", servers["locomo1"].url, "--against", "bm25-svc", "--name", "svc-vs-fusion",
                  configfile=[cfg, fused])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert any(line.lstrip().startswith("bm25-svc ") for line in proc.stdout.splitlines())
    assert "paired against bm25-svc " in proc.stdout
    # a variant of one's own, its config file not given: one line saying to give it
    proc = _score(work, "--system", servers["locomo1"].url, "--against", "bm25-svc", "--name", "svc-vs-fusion",
                  configfile=[cfg])
    assert proc.returncode == 1 and _said(proc) == [
        f"memobench: --against 'bm25-svc': no such variant in config.yaml, {cfg}; a variant of your own is defined "
        f"under variants: in a config file: give that file with --configfile (the built-in variants: memobench "
        f"variants)"], proc.stderr
