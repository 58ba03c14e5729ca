"""A server that refuses sessions in words, through the real workflow
(docs/memory-services.md#failures): the keyed server of
tests/helpers/keyed_mcp_server.py (a real process each retrieve job starts
over MCP stdio) answers a key holding ``~`` with ``Failed to save context
item: Key contains special characters``, a normal result, and has no count.
On a generated LongMemEval file whose every haystack repeats a session id,
its sessions longer than ``max_chars`` sent in parts, one Snakemake run of
three variants: without ``refused`` (and without the conformance check)
the sessions it dropped never come back in a search for their own words,
and the run stops in one line, no figures; with ``refused`` the first
refusal is one line naming the variant, the namespace, the key and the
server's words; with ``.``-based key forms it keeps everything, passes its
check, and its lists are its own ranking, computed here from the file."""

from __future__ import annotations

import importlib.util
import json
import os
import sys

import pyarrow.parquet as pq
import pytest

from memobench.core import layout
from memobench.tools.generate.longmemeval import write_longmemeval
from tests.helpers import REPO, memobench_lines, snakemake, write_config
from tests.helpers.keyed_mcp_server import REFUSAL, ranking

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mcp") is None, reason="the MCP Python SDK is not installed")

LIMIT = 300  # render.max_chars: most sessions of the file are longer


def _system(**over) -> dict:
    tools = {"reset": {"tool": "clear_context", "arguments": {"namespace": "{namespace}"}},
             "ingest": {"tool": "save_context", "arguments": {"namespace": "{namespace}", "key": "{session.key}",
                                                              "value": "{session.text}"}},
             "search": {"tool": "search_context", "arguments": {"namespace": "{namespace}",
                                                                "query": "{question.text}", "limit": "{k}"}},
             "count": None}
    refused = over.pop("refused", None)
    if refused:
        tools["ingest"]["refused"] = refused
    return {"system": {"mcp": {"command": [sys.executable, "-m", "tests.helpers.keyed_mcp_server"],
                               "env": {"PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "src")])}},
                       "tools": tools, "results": {"list": "results", "id": "key", "score": "score"},
                       "retries": 1, "backoff_s": 0.05, "render": {"max_chars": LIMIT, **over.pop("render", {})},
                       **over}}


VARIANTS = {
    # the default key forms and nothing that reads the refusal: the check off, as a user whose server's ranking
    # failed it would set it; only the confirmation searches can tell
    "keys-unread": _system(check=False),
    "keys-refused": _system(check=False, refused="Failed to save"),
    "keys-dotted": _system(refused="Failed to save",
                           render={"copy_key": "{session.id}.{copy}", "part_key": "{session.key}.p{part}"}),
}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("refusals")
    data = root / "data"
    data.mkdir()
    write_longmemeval(data / "lme.json", 6, 6, seed=7, turns=(2, 6), words_per_turn=(4, 30), repeat_ids=1.0)
    datasets = {"lme": {"format": "longmemeval", "family": "s", "file": "lme.json",
                        "bytes": (data / "lme.json").stat().st_size, "segments": 1, "variants": list(VARIANTS)}}
    cfg = write_config(root / "cfg.yaml", data_dir=str(data), run=["lme"], datasets=datasets, variants=VARIANTS)
    work = root / "work"
    work.mkdir()
    targets = [layout.path(layout.METRICS, dataset="lme", variant=v) for v in VARIANTS]
    proc = snakemake(work, "--cores", "2", "--keep-going", *targets, configfile=cfg, check=False)
    return work, proc, json.loads((data / "lme.json").read_text(encoding="utf-8"))


def _parts(turns: list[dict]) -> list[str]:
    """A session's items: its ``role: content`` lines packed greedily into texts of at most LIMIT characters."""
    parts: list[list[str]] = [[]]
    for line in (f"{t['role']}: {t['content']}" for t in turns):
        assert len(line) <= LIMIT  # this file's turns each fit in one
        if parts[-1] and len("\n".join(parts[-1] + [line])) > LIMIT:
            parts.append([])
        parts[-1].append(line)
    return ["\n".join(p) for p in parts]


def _expected(raw: list[dict]) -> dict[str, list[int]]:
    """question id -> the haystack positions of the server's ranking of the items, each session at its best."""
    out = {}
    for q in raw:
        items = [(pos, text) for pos, turns in enumerate(q["haystack_sessions"]) for text in _parts(turns)]
        ranked = []
        for i, _ in ranking(q["question"], [text for _, text in items])[:50]:
            if items[i][0] not in ranked:
                ranked.append(items[i][0])
        out[q["question_id"]] = ranked
    return out


def _log(work, variant: str) -> str:
    return (work / layout.LOGS / "retrieve" / "lme" / variant / "seg1.log").read_text(encoding="utf-8")


def test_the_file_repeats_ids_and_splits_sessions(run):
    _, _, raw = run
    assert all(len(set(q["haystack_session_ids"])) < len(q["haystack_session_ids"]) for q in raw)
    assert any(len(_parts(turns)) > 1 for q in raw for turns in q["haystack_sessions"])


def test_a_refusal_nothing_reads_is_caught_by_the_confirmation_searches(run):
    work, proc, _ = run
    assert proc.returncode != 0
    assert not (work / layout.path(layout.METRICS, dataset="lme", variant="keys-unread")).exists()
    said = [line for line in memobench_lines(proc.stderr) if "'keys-unread'" in line]
    assert len(said) == 1, proc.stderr[-4000:]
    assert "failed at the service, more than system.max_errors (0)" in said[0]
    assert "never came back in a search for its own words" in said[0] and "system.confirm: search" in said[0]
    assert "~" in said[0].split("ingestion failed: session ")[1].split(" sent to namespace")[0]  # a key it refused
    assert "ranked as an empty list (a miss)" in _log(work, "keys-unread")  # a system error, then the stop


def test_a_refusal_config_reads_is_one_line_with_the_key_and_the_server_s_words(run):
    work, proc, _ = run
    assert not (work / layout.path(layout.METRICS, dataset="lme", variant="keys-refused")).exists()
    said = [line for line in memobench_lines(proc.stderr) if "'keys-refused'" in line]
    assert len(said) == 1, proc.stderr[-4000:]
    line = said[0]
    assert line.startswith("memobench: variant 'keys-refused': ") and "ingestion failed: ingest of session '" in line
    assert "~" in line.split("ingest of session '")[1].split("'")[0]  # the key it refused
    assert "into namespace 'mb-keys-refused-" in line and REFUSAL in line and "tools.ingest.refused matches" in line


def test_key_forms_the_server_accepts_give_its_own_ranking(run):
    work, _, raw = run
    metrics = json.loads((work / layout.path(layout.METRICS, dataset="lme", variant="keys-dotted")).read_text())
    assert metrics["system_errors"]["count"] == 0 and metrics["warnings"] == []
    deep = pq.read_table(work / layout.path(layout.DEEP, dataset="lme", variant="keys-dotted")).to_pylist()
    got: dict[str, list[int]] = {}
    for r in sorted(deep, key=lambda r: (r["question_id"], r["rank"])):
        got.setdefault(r["question_id"], []).append(r["position"])
    expected = _expected(raw)
    assert got == expected
    assert "passed its conformance check" in _log(work, "keys-dotted")
    # every item sent (each copy, each part) was searched back once, timed apart from the questions' searches
    rows = pq.read_table(work / layout.path(layout.TIMINGS, dataset="lme", variant="keys-dotted",
                                            segment="seg1")).to_pylist()
    confirms = [r for r in rows if r["operation"] == "confirm"]
    assert confirms and len(confirms) == sum(r["operation"] == "ingest" for r in rows) and all(r["ok"] for r in confirms)
