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


def test_a_helper_loaded_through_a_link_is_caught_at_its_real_path(tmp_path, monkeypatch):
    # a folder linked from outside the project, a file linked from outside, and a path through a link and
    # ".." (resolved as the system does: the link first): each module is the user's file it really is
    proj, outside = tmp_path / "proj", tmp_path / "outside"
    real = {"via_folder": proj / "a", "via_file": proj / "b", "via_dots": proj / "c"}
    for name, folder in real.items():
        folder.mkdir(parents=True)
        (folder / f"{name}.py").write_text("WEIGHT = 2\n", encoding="utf-8")
    (proj / "c" / "deep").mkdir()
    (proj / "my_retrievers.py").write_text("def rank(q, h):\n    return [0]\n", encoding="utf-8")
    (outside / "files").mkdir(parents=True)
    (outside / "folder").symlink_to(proj / "a", target_is_directory=True)
    (outside / "files" / "via_file.py").symlink_to(proj / "b" / "via_file.py")
    (outside / "deep").symlink_to(proj / "c" / "deep", target_is_directory=True)
    for entry in (outside / "folder", outside / "files", f"{outside / 'deep'}/.."):
        monkeypatch.syspath_prepend(str(entry))
    for name in real:
        monkeypatch.delitem(sys.modules, name, raising=False)
        importlib.import_module(name)
    try:
        assert uncovered("my_retrievers.py:rank", proj, cwd=proj) == sorted(
            (folder / f"{name}.py").resolve() for name, folder in real.items())
    finally:
        for name in real:
            sys.modules.pop(name, None)
