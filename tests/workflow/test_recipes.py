"""The recipes of docs/recipes/, each run as its page says, with the real
``snakemake`` in a copy of the project holding the real LoCoMo file: the
bm25s library used in-process gives the reference bm25s retriever's lists
exactly (so the reference service's, which tests/workflow/test_memory_service.py
holds equal to them); basic-memory (PyPI) and server-memory (npm), installed
from their registries into .servers/ (.ci/run), each run end to end with
figures that mean what docs/recipes/README.md says, writing nothing in HOME."""

from __future__ import annotations

import json
import os
import shutil

import pyarrow.parquet as pq
import pytest

from memobench.core import layout
from tests.helpers import REPO, copy_project, snakemake


@pytest.fixture(scope="module")
def project(tmp_path_factory, locomo_path):
    """A copy of the project as a clone is after the README's set-up: docs/recipes/ in it, the real LoCoMo
    file in data/, and the recipes' servers where .ci/run installs them (.servers/, a link to the clone's)."""
    proj = copy_project(tmp_path_factory.mktemp("recipes") / "memobench")
    shutil.copytree(REPO / "docs" / "recipes", proj / "docs" / "recipes")
    (proj / "data").mkdir()
    shutil.copy(locomo_path, proj / "data" / "locomo10.json")
    if (REPO / ".servers").exists():
        (proj / ".servers").symlink_to(REPO / ".servers", target_is_directory=True)
    return proj


def _table(proj, variant: str, name: str):
    return pq.read_table(proj / layout.path(getattr(layout, name), dataset="locomo10", variant=variant))


def _metrics(proj, variant: str) -> dict:
    return json.loads((proj / layout.path(layout.METRICS, dataset="locomo10", variant=variant)).read_text())


def test_the_bm25s_library_recipe_gives_the_reference_bm25s_lists(project):
    snakemake(project, "--cores", "2", "--configfile", "docs/recipes/bm25s-library.yaml", inside=True)
    for name in ("RANKINGS", "DEEP"):
        assert _table(project, "bm25s-library", name).equals(_table(project, "bm25s", name)), name
    got, want = _metrics(project, "bm25s-library"), _metrics(project, "bm25s")
    assert got["questions"] == want["questions"] == 1986 - 9  # LoCoMo's harness skips as every variant's
    assert [got[k] for k in ("hit@1", "hit@5", "hit@10")] == [want[k] for k in ("hit@1", "hit@5", "hit@10")]
    folder = (project / layout.path(layout.TIMINGS, dataset="locomo10", variant="bm25s-library", segment="x")).parent
    timings = [r for f in sorted(folder.glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    assert {"reset", "ingest", "count", "search"} <= {r["operation"] for r in timings}
    assert sum(r["operation"] == "ingest" for r in timings) == 272  # LoCoMo's sessions, each sent once
    # on the latency page as a service is, beside the in-process bm25s
    summaries = {s["variant"]: s for s in json.loads((project / layout.LATENCY_JSON).read_text())}
    assert summaries["bm25s-library"]["measures"] == "service requests" and summaries["bm25s-library"]["warm"]["n"] > 0
    assert "| bm25s-library (service) |" in (project / layout.LATENCY_MD).read_text()


# the servers' programs, where docs/recipes/README.md (and .ci/run) installs them
PROGRAMS = {"basic-memory": REPO / ".servers" / "basic-memory" / "bin" / "basic-memory",
            "server-memory": REPO / ".servers" / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist"
            / "index.js"}


# what the server recipes' configs use beyond a service's first settings: the session as text and the query
# (render, query), a server per namespace (servers)
FEATURES = ("render", "query", "servers")


def _installed(server: str) -> None:
    """Skip, saying how to install it, where the server is not installed; fail instead where .ci/run installed
    it (it names it in MEMOBENCH_REQUIRE_RECIPES). Skip, naming them, while the config keys the recipes use
    are not in this checkout's schema."""
    import yaml

    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text(encoding="utf-8"))
    known = schema["properties"]["variants"]["additionalProperties"]["properties"]["system"]["properties"]
    missing = [key for key in FEATURES if key not in known]
    if missing:
        pytest.skip(f"the recipe uses system.{', system.'.join(missing)}, which this checkout does not have yet")
    if PROGRAMS[server].exists() and (server != "server-memory" or shutil.which("node")):
        return
    why = f"{server} is not installed in .servers/ (docs/recipes/README.md: Installing the servers)"
    if server in os.environ.get("MEMOBENCH_REQUIRE_RECIPES", "").split():
        pytest.fail(why)
    pytest.skip(why)


def _run(project, recipe: str, tmp_path):
    """The recipe run as its page says, with a HOME of the test's own, where no server may write (what
    basic-memory and its fastmcp write there unless told: docs/recipes/README.md)."""
    home = tmp_path / "home"
    home.mkdir()
    snakemake(project, "--cores", "2", "--configfile", f"docs/recipes/{recipe}", inside=True, env={"HOME": str(home)})
    written = [p for p in (".basic-memory", "basic-memory", ".local/share/fastmcp", "memory.jsonl") if (home / p).exists()]
    assert not written, written


def _rows(project, variant: str) -> list[dict]:
    folder = (project / layout.path(layout.TIMINGS, dataset="locomo10", variant=variant, segment="x")).parent
    return [r for f in sorted(folder.glob("*.parquet")) for r in pq.read_table(f).to_pylist()]


def test_the_server_memory_recipe_runs_and_its_figures_mean_what_the_page_says(project, tmp_path):
    _installed("server-memory")
    _run(project, "server-memory.yaml", tmp_path)
    keywords, word = _metrics(project, "server-memory"), _metrics(project, "server-memory-word")
    assert keywords["questions"] == word["questions"] == 1977
    # a substring test of the whole query: the keywords joined by spaces are never found
    assert keywords["empty_lists"] == 1977 and keywords["hit@10"] == 0
    assert word["system"]["query"] == "longest-word"
    # docs/recipes/README.md's figures: the words' selectivity, in ingestion order
    assert [word[k] for k in ("hit@1", "hit@5", "hit@10", "empty_lists")] == [575, 1065, 1239, 374]
    # one create_entities call per haystack (LoCoMo's ten conversations)
    assert sum(r["operation"] == "ingest" for r in _rows(project, "server-memory-word")) == 10
    # the same server read as text: each observation (a turn's words) attributed to turns gives the id
    # variant's sessions, each followed by every session of its conversation holding a turn of the same words
    text = _metrics(project, "server-memory-text")
    a = text["attribution"]
    assert a["mode"] == "exact+normalized" and a["items"] > 100_000
    assert a["attributed"] == a["items"] == a["kinds"]["exact"] and a["kinds"]["unattributed"] == 0
    assert 0 < a["ambiguous"] < a["items"] // 100  # a turn said word for word in two sessions: both
    assert text["questions"] == 1977 and text["empty_lists"] == word["empty_lists"]
    assert [text[k] for k in ("hit@1", "hit@5", "hit@10")] == [575, 1050, 1238]  # docs/recipes/README.md's
    assert _lists(_table(project, "server-memory-text", "DEEP")) == _attributed_lists(project)
    assert f"{a['attributed']} of {a['items']} items attributed (100.0%" in (project / layout.REPORT_MD).read_text()


def _lists(deep) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for r in sorted(deep.to_pylist(), key=lambda r: (r["question_id"], r["rank"])):
        out.setdefault(r["question_id"], []).append(r["position"])
    return out


def _attributed_lists(project) -> dict[str, list[int]]:
    """Each question's list that server-memory-word's gives read as text (docs/protocol.md#text-attribution):
    its sessions in order, each session's turns in order, each turn at every haystack position whose
    session holds a turn of exactly its words, in haystack order; cut at the deep lists' 50."""
    norm = layout.table_paths(project / layout.path(layout.NORMALIZED, dataset="locomo10"))
    questions = {r["question_id"]: r["haystack_id"] for r in pq.read_table(norm["questions"]).to_pylist()}
    hays: dict[int, list[int]] = {}
    for r in sorted(pq.read_table(norm["haystacks"]).to_pylist(), key=lambda r: (r["haystack_id"], r["position"])):
        hays.setdefault(r["haystack_id"], []).append(r["session_key"])
    turns: dict[int, list[tuple]] = {}
    for r in pq.read_table(norm["events"]).to_pylist():
        turns.setdefault(r["session_key"], []).append((r["seq"], r["text"]))
    out = {}
    for qid, ranked in _lists(_table(project, "server-memory-word", "DEEP")).items():
        keys = hays[questions[qid]]
        listed: list[int] = []
        for p in ranked:
            for _, words in sorted(turns[keys[p]]):
                for q, key in enumerate(keys):
                    if q not in listed and any(t == words for _, t in turns[key]):
                        listed.append(q)
        out[qid] = listed[:50]
    return out


def test_the_basic_memory_recipe_runs_with_its_own_ranking(project, tmp_path):
    _installed("basic-memory")
    _run(project, "basic-memory.yaml", tmp_path)
    asked = _metrics(project, "basic-memory")
    assert asked["questions"] == 1977 and asked["system_errors"]["count"] == 0 and "query" not in asked["system"]
    # docs/recipes/README.md's figures: its FTS5 ranking at the pinned version
    assert [asked[k] for k in ("hit@1", "hit@5", "hit@10", "empty_lists")] == [1193, 1528, 1613, 236]
    rows = _rows(project, "basic-memory")
    assert sum(r["operation"] == "ingest" for r in rows) == 272  # a note a session
