"""The Python API's surface (docs/python-api.md) without running the pipeline:
`import memobench` stays light, `help(memobench)` lists the calls, errors are
the command line's one `memobench:` line raised as MemobenchError, and
nothing is printed on success."""

from __future__ import annotations

import json
import pydoc
import subprocess
import sys
from pathlib import Path

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
    for call in ("score(run_file", "load(results", "list_datasets(workdir", "list_variants(family",
                 "list_conventions()", "class MemobenchError", "class ScoreResult", "class Results"):
        assert call in text, call
    for f in (memobench.score, memobench.load, memobench.list_datasets, memobench.list_variants,
              memobench.list_conventions):
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


def _defined_here(question, haystack):
    return list(range(len(haystack)))


def _closure():
    def rank(question, haystack):
        return []
    return rank


class _Ranker:
    def rank(self, question, haystack):
        return []


@pytest.mark.parametrize("fn, why", [
    (lambda q, h: [], "it is a lambda"),
    (_closure(), "it is defined inside a function"),
    (_Ranker().rank, "it is a method bound to an object"),
    (len, "its module builtins has no .py file"),
    (3, None),
])
def test_a_function_the_jobs_cannot_import_is_refused_in_one_line(fn, why, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    with pytest.raises(memobench.MemobenchError) as e:
        memobench.score(retriever=fn, dataset="locomo10")
    text = str(e.value)
    assert text.startswith("memobench: ") and "\n" not in text
    if why is None:
        assert text == "memobench: retriever=3: give a function, or 'path/to/file.py:function'"
    else:
        assert why in text and "put it at the top level of a .py file" in text
    assert capsys.readouterr() == ("", "")


def test_a_function_of_a_module_is_named_by_its_file():
    from memobench.api import _callable_spec

    assert _callable_spec(_defined_here) == f"{Path(__file__).resolve()}:_defined_here"
    assert _callable_spec("my_retrievers.py:rank") == "my_retrievers.py:rank"


def test_a_notebooks_function_is_refused(tmp_path):
    code = ("import memobench\ndef rank(q, h):\n    return []\n"
            "try:\n    memobench.score(retriever=rank, dataset='locomo10')\n"
            "except memobench.MemobenchError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.startswith("memobench: retriever rank: it is defined in the notebook or script itself;")


@pytest.mark.parametrize("kwargs, line", [
    ({"params": {"k1": 1.2}}, "memobench: params=, documents= and prepare= are a retriever's; give retriever= too"),
    ({"variant": "bm25s", "run_file": "x.trec"}, "memobench: give a run file, --system URL for a memory service, "
     "--mcp COMMAND|URL for an MCP one, --retriever CALLABLE for your Python retriever or --variant NAME for a "
     "configured variant (one of them)"),
    ({"variant": "nope"}, "memobench: --variant 'nope': no such variant in config.yaml (the built-in variants: "
     "memobench variants; a variant of your own is defined under variants: in a config file: give that file "
     "with --configfile)"),
    ({"variant": "bm25s", "name": "b"}, "memobench: --name names a run, service or retriever scored here; "
     "--variant bm25s keeps its own name"),
    ({"variant": "bm25s", "against": "recency"}, "memobench: --against 'recency': no such variant in config.yaml; "
     "a variant of your own is defined under variants: in a config file: give that file with --configfile (the "
     "built-in variants: memobench variants)"),
    ({"retriever": "absent.py:rank"}, None),
    ({}, "memobench: give a run file, --system URL for a memory service, --mcp COMMAND|URL for an MCP one, "
     "--retriever CALLABLE for your Python retriever or --variant NAME for a configured variant (one of them)"),
])
def test_bad_arguments_fail_before_anything_runs(kwargs, line, tmp_path, capsys):
    with pytest.raises(memobench.MemobenchError) as e:
        memobench.score(**{"dataset": "locomo10", **kwargs}, workdir=tmp_path, workflow=REPO)
    if line is None:
        assert str(e.value).startswith("memobench: --retriever absent.py:rank: no file absent.py")
    else:
        assert str(e.value) == line
    assert not (tmp_path / "results").exists()  # refused before an overlay is written
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("call, kwargs, line", [
    ("score", {"variant": 123, "dataset": ["x"]},
     "memobench: score(): dataset is a configured dataset's name; got list ['x']"),
    ("score", {"variant": 123, "dataset": "x"}, "memobench: score(): variant is a variant's name; got int 123"),
    ("score", {"variant": "bm25s", "dataset": "x", "k": True},
     "memobench: score(): k is a whole number; got bool True"),
    ("score", {"variant": "bm25s", "dataset": "x", "configfile": [1]},
     "memobench: score(): configfile is a config file's path, or a list of them; got list [1]"),
    ("load", {"results": 123}, "memobench: load(): results is the results folder's path; got int 123"),
])
def test_arguments_of_the_wrong_type_are_one_line(call, kwargs, line, tmp_path, capsys):
    with pytest.raises(memobench.MemobenchError) as e:
        getattr(memobench, call)(**kwargs)
    assert str(e.value) == line
    assert capsys.readouterr() == ("", "")


def test_a_configfile_given_as_a_string_is_one_file(tmp_path):
    overlay = tmp_path / "ds.yaml"
    overlay.write_text("datasets:\n  locomo10: {variants: [bm25s]}\n", encoding="utf-8")
    for given in (str(overlay), overlay, [str(overlay)]):
        listed = memobench.list_datasets(workdir=tmp_path, configfile=given, workflow=REPO).set_index("dataset")
        assert listed.loc["locomo10", "variants"] == ["bm25s"], given


def test_conventions_are_the_harness_and_officials():
    from memobench.evaluation.measures import HARNESS_MEASURES
    from memobench.evaluation.official import CONVENTIONS

    c = memobench.list_conventions().set_index("convention")
    assert list(c.index) == ["harness", *CONVENTIONS]
    assert c.loc["harness", "measures"] == list(HARNESS_MEASURES) and c.loc["harness", "file"] == "metrics.json"
    assert c.loc["categories_1_4", "formats"] == ["locomo"]
    assert c.loc["run_retrieval", "formats"] == ["longmemeval", "longmemeval_cn"]
    assert "ndcg_any@10" in c.loc["run_retrieval", "measures"] and "ndcg_any@10" not in c.loc["all_categories",
                                                                                                "measures"]
    assert c.loc["categories_1_4", "description"] == CONVENTIONS["categories_1_4"]


def test_a_retrievers_name_holding_another_functions_results_is_refused(tmp_path, capsys):
    code = tmp_path / "mine.py"
    code.write_text("def overlap(q, h):\n    return []\n\n\ndef words(q, h):\n    return []\n", encoding="utf-8")
    overlay = tmp_path / "results" / ".score" / "locomo10" / "overlap.yaml"
    overlay.parent.mkdir(parents=True)
    overlay.write_text(json.dumps({"variants": {"overlap": {"retriever": {"callable": f"{code}:overlap"}}}}),
                       encoding="utf-8")
    (tmp_path / "results" / "locomo10" / "overlap").mkdir(parents=True)
    (tmp_path / "results" / "locomo10" / "overlap" / "metrics.json").write_text("{}", encoding="utf-8")
    with pytest.raises(memobench.MemobenchError) as e:
        memobench.score(retriever=f"{code}:words", name="overlap", dataset="locomo10", workdir=tmp_path,
                        workflow=REPO)
    assert str(e.value) == (f"memobench: {code}:words: results/locomo10/overlap/ holds the results of {code}:overlap; "
                            f"give this run another name with --name")
    with pytest.raises(memobench.MemobenchError, match=r"the variant name 'bm25s' is taken"):
        memobench.score(retriever=f"{code}:words", name="bm25s", dataset="locomo10", workdir=tmp_path, workflow=REPO)
    assert capsys.readouterr() == ("", "")
