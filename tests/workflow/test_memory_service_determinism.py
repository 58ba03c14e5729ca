"""Servers whose lists move between runs, and a correct ranking the
conformance check once refused, through the real workflow (one Snakemake run,
then one more with a setting changed), each server its own process
(tests/helpers/library_http_server.py) on a generated LoCoMo conversation:

- rank_bm25's BM25Okapi over HTTP passes the check (its namespace B holds
  three sessions: with two, a word in one has idf 0 and every score ties)
  and gives its own ranking's lists, those of the same class in-process;
- a server whose ties are broken by a stamp drawn at write time lists them
  otherwise in a fresh namespace: a warning in the job's log, on the
  console, in metrics.json and in the report, with how far its figures move;
  with ``on_differ: error`` the run stops in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from memobench.core import layout
from tests.helpers import REPO, memobench_lines, snakemake, write_config

LIBRARIES = REPO / "tests" / "helpers" / "memory_libraries.py"
WARNED = "memobench: warning: variant 'stamped' on locomo1: its lists move between runs: "


def _serve(ranking: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.helpers.library_http_server", ranking],
                            stdout=subprocess.PIPE, text=True, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "src")])})
    line = proc.stdout.readline()
    assert line.startswith("serving on http://"), line
    return proc, line.split(" on ")[1].strip()


@pytest.fixture(scope="module")
def run(small_data, tmp_path_factory):
    servers = {name: _serve(name) for name in ("OkapiMemory", "StampedMemory")}
    data, datasets = small_data([], seed=11)
    variants = {"okapi": {"system": {"url": servers["OkapiMemory"][1], "backoff_s": 0.05}},
                "okapi-lib": {"system": {"library": f"{LIBRARIES}:OkapiMemory"}},
                "stamped": {"system": {"url": servers["StampedMemory"][1], "backoff_s": 0.05}}}
    root = tmp_path_factory.mktemp("determinism")
    config = {"data_dir": str(data), "run": ["locomo1"],
              "datasets": {"locomo1": {**datasets["locomo1"], "variants": list(variants)}}, "variants": variants}
    work = root / "work"
    work.mkdir()
    proc = snakemake(work, "--cores", "2", configfile=write_config(root / "cfg.yaml", **config))
    yield work, root, config, proc
    for p, _ in servers.values():
        p.kill()
        p.wait()


def _metrics(work, variant) -> dict:
    return json.loads((work / layout.path(layout.METRICS, dataset="locomo1", variant=variant)).read_text())


def test_a_bm25okapi_server_passes_the_check_and_gives_its_own_ranking_s_lists(run):
    work, _, _, proc = run
    assert "okapi" not in "".join(memobench_lines(proc.stderr))
    for name in ("RANKINGS", "DEEP"):
        path = {v: work / layout.path(getattr(layout, name), dataset="locomo1", variant=v) for v in ("okapi", "okapi-lib")}
        assert pq.read_table(path["okapi"]).equals(pq.read_table(path["okapi-lib"]))
    m = _metrics(work, "okapi")
    assert m["warnings"] == [] and m["system_determinism"]["replicas"]["differing"] == []
    assert m["system_determinism"]["replicas"]["questions"] == m["questions"] > 0  # one haystack: all of them


def test_a_server_whose_ties_move_is_flagged_in_the_log_console_metrics_and_report(run):
    work, _, _, proc = run
    warned = [line for line in memobench_lines(proc.stderr) if line.startswith(WARNED)]
    assert len(warned) == 1 and "searched again in a fresh namespace holding the same sessions" in warned[0], \
        proc.stderr[-3000:]
    assert "; over those " in warned[0] and " hit@1 " in warned[0] and " MRR " in warned[0]
    m = _metrics(work, "stamped")
    assert [f"memobench: warning: {w}" for w in m["warnings"]] == warned
    assert m["system_determinism"]["replicas"]["differing"]
    logs = [p.read_text() for p in (work / layout.LOGS / "retrieve" / "locomo1" / "stamped").glob("*.log")]
    assert any("warning: variant 'stamped': its lists move between runs: " in text for text in logs), logs
    report = (work / layout.REPORT_MD).read_text()
    assert "| stamped (memory service) (warning) |" in report and "its lists move between runs" in report
    assert "| okapi (memory service) |" in report


def test_on_differ_error_stops_the_run_in_one_line(run):
    work, root, config, _ = run
    stamped = {"system": {**config["variants"]["stamped"]["system"], "determinism": {"on_differ": "error"}}}
    cfg = write_config(root / "error.yaml", **{**config, "variants": {**config["variants"], "stamped": stamped}})
    proc = snakemake(work, "--cores", "2", configfile=cfg, check=False)
    assert proc.returncode != 0
    lines = memobench_lines(proc.stderr)
    assert lines and lines[0].startswith("memobench: variant 'stamped': its lists move between runs: ") and \
        lines[0].endswith("(system.determinism.on_differ: error)"), proc.stderr[-3000:]
