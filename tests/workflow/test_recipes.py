"""The recipes of docs/recipes/, each run as its page says, with the real
``snakemake`` in a copy of the project holding the real LoCoMo file: the
bm25s library used in-process gives the reference bm25s retriever's lists
exactly (so the reference service's, which tests/workflow/test_memory_service.py
holds equal to them)."""

from __future__ import annotations

import json
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
