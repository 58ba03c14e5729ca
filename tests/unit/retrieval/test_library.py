"""A memory library used in-process as a system variant (services/definition/inprocess.py,
services/transport/library.py): the worked example over the real bm25s library
(docs/recipes/bm25s_memory.py) gives the in-process reference bm25s lists
exactly, repeated session ids included, passes the conformance check, and is
timed as a service is; an object without count is ingested in every job; a
factory or method that fails, or returns what cannot be read, is one line
naming the variant; the factory's file is in the retrieve job's code
fingerprint."""

from __future__ import annotations

import textwrap

import pyarrow.parquet as pq
import pytest

from memobench.catalog.variants import resolve
from memobench.core import layout
from memobench.core.errors import ConfigError
from memobench.datasets.normalize import normalize_longmemeval
from memobench.retrieval.returned import RetrieverError
from memobench.services.operations.api import OPERATIONS
from memobench.tools.generate.longmemeval import write_longmemeval
from tests.helpers import REPO
from tests.helpers.services import rank_one_segment as _rank

EXAMPLE = f"{REPO / 'docs' / 'recipes' / 'bm25s_memory.py'}:BM25sMemory"


@pytest.fixture(scope="module")
def norm(tmp_path_factory):
    root = tmp_path_factory.mktemp("lib")
    raw = root / "lme.json"
    write_longmemeval(raw, 8, 8, seed=3, turns=(2, 4), words_per_turn=(4, 20), spice=True)
    normalize_longmemeval(raw, root / "norm", log=lambda m: None)
    return root / "norm"


@pytest.fixture(scope="module")
def expected(norm, tmp_path_factory):
    return _rank(norm, tmp_path_factory.mktemp("expected"), "bm25s")[0]


def _library(spec: str = EXAMPLE, **system) -> dict:
    # LongMemEval's document rule (its user turns), as the reference bm25s variant's
    return {"system": {"library": spec, "options": {"documents": "user"}, "backoff_s": 0.01, **system}}


def _timings(root, name="lib") -> list[dict]:
    return pq.read_table(layout.path(layout.TIMINGS, root=root / "results", dataset="lme", variant=name,
                                     segment="seg1")).to_pylist()


def test_the_bm25s_library_gives_the_in_process_reference_lists(norm, expected, tmp_path):
    (rk, oc, dp), lines = _rank(norm, tmp_path, "lib", _library())
    ids = pq.read_table(layout.table_paths(norm)["haystacks"]).column("session_id").to_pylist()
    assert len(ids) > len(set(ids))  # repeated session ids: each copy is its own session
    assert rk.equals(expected[0]) and dp.equals(expected[2])
    assert any("passed its conformance check" in line for line in lines), lines
    rows = _timings(tmp_path)
    assert {"reset", "ingest", "count", "search"} <= {r["operation"] for r in rows}
    assert all(r["ok"] and r["seconds"] > 0 and r["attempts"] == 1 for r in rows if r["operation"] in OPERATIONS)
    assert {r["phase"] for r in rows if r["operation"] == "search"} == {"cold", "warm"}
    meta = pq.read_metadata(layout.path(layout.TIMINGS, root=tmp_path / "results", dataset="lme", variant="lib",
                                        segment="seg1")).metadata
    assert b"library " in b"".join(meta.values())  # what it was measured against: the library


def test_reset_isolation_gives_the_same_lists(norm, expected, tmp_path):
    (rk, _, dp), _ = _rank(norm, tmp_path, "lib", _library(isolation="reset", concurrency=1))
    assert rk.equals(expected[0]) and dp.equals(expected[2])


def _write(tmp_path, body: str, name: str | None = None) -> str:
    """The file of a user's library; a name of its own: a module name is imported once per process."""
    import secrets

    path = tmp_path / (name or f"lib_{secrets.token_hex(4)}.py")
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return str(path)


def test_an_object_without_count_is_ingested_in_every_job(norm, expected, tmp_path):
    path = _write(tmp_path, f"""
        import sys
        sys.path.insert(0, {str(REPO / 'docs' / 'recipes')!r})
        from bm25s_memory import BM25sMemory

        class NoCount:
            def __init__(self, **options):
                self.inner = BM25sMemory(**options)
                self.reset, self.ingest, self.search = self.inner.reset, self.inner.ingest, self.inner.search

        def make(**options):
            print("made by the factory")
            return NoCount(**options)
    """)
    for job in (1, 2):
        (rk, _, dp), lines = _rank(norm, tmp_path / "out", "lib", _library(f"{path}:make"))
        assert rk.equals(expected[0]) and dp.equals(expected[2])
        ops = {r["operation"] for r in _timings(tmp_path / "out")}
        assert "ingest" in ops and "count" not in ops, (job, ops)
        assert "made by the factory" in lines  # the factory's output goes to the job's log


def test_a_second_job_with_count_ingests_again_since_the_object_is_new(norm, tmp_path):
    # the ledger holds the namespaces, but a new object's count says 0: they are ingested again
    _rank(norm, tmp_path, "lib", _library())
    _, lines = _rank(norm, tmp_path, "lib", _library())
    assert any("holds 0 sessions, not the" in line for line in lines), lines


@pytest.mark.parametrize("body,why", [
    ("def make(**o):\n    raise RuntimeError('no store here')\n",
     "variant 'lib': {spec} raised RuntimeError: no store here ("),
    ("def make(**o):\n    return object()\n", "variant 'lib': {spec} returned a object, which has no reset, ingest, search"),
    ("class M:\n    def reset(self, ns): pass\n    def ingest(self, ns, s): pass\n"
     "    def search(self, ns, q, k): raise KeyError('boom')\ndef make(**o):\n    return M()\n",
     "search: {spec}'s search raised KeyError: 'boom' ("),
    ("class M:\n    def reset(self, ns): pass\n    def ingest(self, ns, s): pass\n"
     "    def search(self, ns, q, k): return 'answer_1'\ndef make(**o):\n    return M()\n",
     "search: {spec}'s search returned 'answer_1', not a list of session ids"),
    ("class M:\n    def reset(self, ns): pass\n    def ingest(self, ns, s): pass\n"
     "    def search(self, ns, q, k): return [7]\ndef make(**o):\n    return M()\n",
     "the id 7 is not a string"),
])
def test_a_library_that_fails_is_one_line_naming_the_variant(norm, tmp_path, body, why):
    spec = f"{_write(tmp_path, body)}:make"
    with pytest.raises(RetrieverError) as e:
        _rank(norm, tmp_path / "out", "lib", {"system": {"library": spec, "backoff_s": 0.01}})
    text = str(e.value)
    assert "\n" not in text and text.startswith("variant 'lib'") and why.format(spec=spec) in text, text


def test_waiting_for_a_count_the_object_lacks_is_one_line_at_once(norm, tmp_path):
    spec = f"{_write(tmp_path, NO_COUNT)}:make"
    with pytest.raises(RetrieverError) as e:
        _rank(norm, tmp_path / "out", "lib", {"system": {"library": spec, "backoff_s": 0.01, "check": False,
                                                          "ready": {"until": "count", "timeout_s": 60}}})
    assert "\n" not in str(e.value) and "until: count needs a count" in str(e.value), str(e.value)


NO_COUNT = ("class M:\n    def reset(self, ns): pass\n    def ingest(self, ns, s): pass\n"
            "    def search(self, ns, q, k): return []\ndef make(**o):\n    return M()\n")


def test_a_transient_os_error_is_retried_then_a_system_error(norm, tmp_path):
    spec = _write(tmp_path, f"""
        import sys
        sys.path.insert(0, {str(REPO / 'docs' / 'recipes')!r})
        from bm25s_memory import BM25sMemory

        class Flaky(BM25sMemory):
            calls = 0

            def search(self, namespace, query, k):
                Flaky.calls += 1
                if query.startswith("What") or Flaky.calls % 2:
                    raise ConnectionError("the store is restarting")
                return super().search(namespace, query, k)

        def make(**options):
            return Flaky(**options)
    """) + ":make"
    (_, oc, _), lines = _rank(norm, tmp_path / "out", "lib", _library(spec, check=False, max_errors=100))
    rows = [r for r in _timings(tmp_path / "out") if r["operation"] == "search"]
    assert any(r["attempts"] == 2 for r in rows)  # an odd call failed, the retry passed
    failed = [line for line in lines if "system error" in line]
    assert failed and all("ConnectionError: the store is restarting" in line for line in failed), failed


@pytest.mark.parametrize("system,why", [
    ({"library": "lib.py"}, "library 'lib.py' is not 'path/to/file.py:factory' or 'module:factory'"),
    ({"library": "m:make", "options": [1]}, "options must map the factory's keyword arguments"),
    ({"url": "http://x", "options": {}}, "options are a library's factory's arguments"),
    ({"library": "m:make", "url": "http://x"}, "give url (the service's HTTP API"),
    ({"library": "m:make", "tools": {}}, "tools is a service's; a library is called in-process"),
    ({"library": "m:make", "results": {"list": "x"}}, "results is a service's"),
])
def test_config_errors_name_the_variant(system, why):
    with pytest.raises(ConfigError) as e:
        resolve("lib", "s", {"lib": {"system": system}})
    assert str(e.value).startswith("variant 'lib': system") and why in str(e.value), str(e.value)


def test_the_factory_s_files_are_in_the_code_fingerprint(tmp_path):
    from memobench.catalog.registry import code_fingerprint

    path = _write(tmp_path, "def make(**o):\n    return None\n", "fp_lib.py")
    helper = tmp_path / "fp_helper.py"
    helper.write_text("X = 1\n", encoding="utf-8")
    v = resolve("lib", "s", {"lib": {"system": {"library": f"{path}:make"}}})
    before = code_fingerprint(v, REPO / "workflow" / "scripts" / "stage.py")
    from memobench.retrieval import callables as python

    python._sources.cache_clear()
    helper.write_text("X = 2\n", encoding="utf-8")  # a neighbour in its folder: the user's code too
    after = code_fingerprint(v, REPO / "workflow" / "scripts" / "stage.py")
    assert before != after
    service = resolve("svc", "s", {"svc": {"system": {"url": "http://x"}}})
    assert code_fingerprint(service, REPO / "workflow" / "scripts" / "stage.py")  # a service has no sources


def _numpy_memory(tmp_path) -> str:
    """The bm25s example answering as numpy-based libraries do: its count a numpy.int64, its scores numpy
    floats (float32, which is no Python float)."""
    return _write(tmp_path, f"""
        import sys
        import numpy as np
        sys.path.insert(0, {str(REPO / 'docs' / 'recipes')!r})
        from bm25s_memory import BM25sMemory

        class NumpyMemory(BM25sMemory):
            def count(self, namespace):
                return np.int64(super().count(namespace))

            def search(self, namespace, query, k):
                return [{{"id": i, "score": np.float32(s)}} for i, s in super().search(namespace, query, k)]

        def make(**options):
            return NumpyMemory(**options)
    """) + ":make"


def test_numpy_counts_and_scores_are_numbers(norm, expected, tmp_path):
    (rk, _, _), lines = _rank(norm, tmp_path, "lib", _library(_numpy_memory(tmp_path)))
    assert rk.equals(expected[0]), lines  # float32 scores: the same order as the reference's
    assert any("passed its conformance check" in line for line in lines), lines
    assert "count" in {r["operation"] for r in _timings(tmp_path)}


def test_a_bool_is_no_count_and_no_score():
    from memobench.services.transport.library import _shaped

    assert _shaped("count", True, "m")["sessions"] is True  # left as it came: count_of refuses it
    assert _shaped("search", [("a", True)], "m")["results"][0]["score"] is True


def test_an_empty_query_is_the_query_function_s_not_the_service_s(norm, tmp_path):
    # a query function that returns "" for a question: the check's search for its own words would find
    # nothing, and the miss was blamed on the service
    query = _write(tmp_path, "def short(q):\n    return '' if 'e' in q else q\n")
    entry = _library(query=f"{query}:short")
    with pytest.raises(RetrieverError) as e:
        _rank(norm, tmp_path / "out", "lib", entry)
    text = str(e.value)
    assert "\n" not in text and "never came back" not in text, text
    assert f"variant 'lib': query {query}:short returned an empty query for question 'check-" in text, text
    assert "variant \"variant" not in text  # the where-string named once
    # at run time too (no check): the question it was asked for named
    with pytest.raises(RetrieverError, match=rf"variant 'lib': query .*:short returned an empty query for question "):
        _rank(norm, tmp_path / "out2", "lib", {**entry, "system": {**entry["system"], "check": False}})


def test_an_ingestion_that_keeps_failing_states_its_true_attempts(norm, tmp_path):
    spec = _write(tmp_path, """
        class Down:
            def reset(self, ns): pass
            def ingest(self, ns, s): raise ConnectionError("the store is down")
            def search(self, ns, q, k): return []
        def make(**o):
            return Down()
    """) + ":make"
    with pytest.raises(RetrieverError) as e:
        _rank(norm, tmp_path / "out", "lib", {"system": {"library": spec, "backoff_s": 0.001, "retries": 2,
                                                          "check": False}})
    text = str(e.value)
    assert "(the last of 3 tries of the whole namespace: system.retries 2 retries the whole, never an ingest " \
           "request alone)" in text and "ingest: " in text and "failed 1 time(s)" in text, text
    # the check's ingestion, sent the same way, says the same
    from memobench.services import conformance as check

    spec_v = resolve("lib", "s", {"lib": {"system": {"library": spec, "backoff_s": 0.001, "retries": 2}}}).retriever
    api = check.run(spec_v, where="variant 'lib'")[0]
    assert api.status == "fail" and "last of 3 tries of filling the check's namespaces: system.retries 2" in api.why, api
