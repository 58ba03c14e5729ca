"""The guard of a user's retriever (retrieval/python.py, ``uncovered``): a
module of the user's that the code fingerprint misses is caught; the job's
own script is not the user's, even where the user's file sits at the
project's root beside workflow/ (the README's example)."""

from __future__ import annotations

import importlib
import sys
import types

from memobench.retrieval.callables import uncovered


def test_the_jobs_script_beside_the_users_file_is_not_the_users(tmp_path, monkeypatch):
    (tmp_path / "my_retrievers.py").write_text("def rank(q, h):\n    return [0]\n", encoding="utf-8")
    script = tmp_path / "workflow" / "scripts" / "stage.py"
    script.parent.mkdir(parents=True)
    script.write_text("pass\n", encoding="utf-8")
    main = types.ModuleType("__main__")
    main.__file__ = str(script)  # as the rule's command runs it
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.setitem(sys.modules, "__mp_main__", main)  # multiprocessing's alias
    assert uncovered("my_retrievers.py:rank", tmp_path, cwd=tmp_path) == []


def test_a_helper_loaded_by_a_name_built_at_run_time_is_caught(tmp_path, monkeypatch):
    (tmp_path / "my_retrievers.py").write_text("def rank(q, h):\n    return [0]\n", encoding="utf-8")
    sub = tmp_path / "helpers"  # a folder without __init__.py: not in the fingerprint's scope
    sub.mkdir()
    (sub / "dyn_helper.py").write_text("WEIGHT = 2\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(sub))
    monkeypatch.delitem(sys.modules, "dyn_helper", raising=False)
    importlib.import_module("dyn" + "_helper")
    try:
        assert uncovered("my_retrievers.py:rank", tmp_path, cwd=tmp_path) == [(sub / "dyn_helper.py").resolve()]
    finally:
        sys.modules.pop("dyn_helper", None)
