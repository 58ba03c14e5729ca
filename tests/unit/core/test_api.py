"""The Python API's surface (docs/python-api.md) without running the pipeline:
`import memobench` stays light, `help(memobench)` lists the calls, errors are
the command line's one `memobench:` line raised as MemobenchError, and
nothing is printed on success."""

from __future__ import annotations

import pydoc
import subprocess
import sys

import pytest

import memobench
from tests.helpers import REPO


def test_import_memobench_imports_neither_pandas_nor_snakemake():
    code = ("import sys, memobench; memobench.__version__; "
            "print(sorted(m for m in ('pandas', 'snakemake', 'memobench.api') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_help_lists_the_calls_with_their_docstrings():
    text = pydoc.render_doc(memobench, renderer=pydoc.plaintext)
    for call in ("score(run_file", "load(results", "list_datasets(workdir", "list_variants(family", "class MemobenchError"):
        assert call in text, call
    for f in (memobench.score, memobench.load, memobench.list_datasets, memobench.list_variants):
        assert f.__doc__ and f.__annotations__


def test_errors_are_the_commands_line_and_nothing_is_printed(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    with pytest.raises(memobench.MemobenchError) as e:
        memobench.score(tmp_path / "absent.trec", dataset="locomo10")
    assert str(e.value) == f"memobench: {tmp_path / 'absent.trec'}: no such file; give the run file's path"
    run = tmp_path / "r.trec"
    run.write_text("conv-26#0 Q0 session_1 1 9.5 x\n", encoding="utf-8")
    with pytest.raises(memobench.MemobenchError, match=r"^memobench: --dataset 'nope' is not configured"):
        memobench.score(run, dataset="nope", workdir=tmp_path, workflow=REPO)
    with pytest.raises(memobench.MemobenchError, match=r"^memobench: .*no such results folder"):
        memobench.load(tmp_path / "none")
    with pytest.raises(memobench.MemobenchError, match=r"^memobench: family 'x'"):
        memobench.list_variants("x")
    assert issubclass(memobench.MemobenchError, Exception)
    assert capsys.readouterr() == ("", "")


def test_datasets_and_variants_list_the_config_and_the_catalog(capsys, monkeypatch):
    from memobench.cli import variant_rows
    from memobench.catalog.variant import FAMILIES

    monkeypatch.chdir(REPO)
    ds = memobench.list_datasets()
    assert "locomo10" in set(ds["dataset"]) and ds.set_index("dataset").loc["locomo10", "family"] == "locomo"
    v = memobench.list_variants()
    assert [tuple(r) for r in v.itertuples(index=False)] == variant_rows(FAMILIES)
    assert set(memobench.list_variants("locomo")["variant"]) >= {"v0.8.0", "v0.5.0"}
    assert capsys.readouterr() == ("", "")


def test_load_of_an_empty_results_folder_is_empty_frames(tmp_path):
    res = memobench.load(tmp_path)
    assert all(len(getattr(res, k)) == 0 for k in ("outcomes", "metrics", "official", "paired", "latency"))
    assert "dataset" in res.outcomes.columns and "metric" in res.metrics.columns
