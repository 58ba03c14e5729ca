"""A user's own Python retriever as a variant (config ``variants.<name>.retriever``,
src/memobench/retrieval/python.py, docs/retrievers.md), end to end through
Snakemake: a retriever file and the helper module it imports, written into a
scratch folder, ranked on LoCoMo (the real file's first conversation) and a
generated LongMemEval file in two segments; a second retriever, named as a
module, with a cached prepare step. Its lists and metrics equal the same
functions called here on the raw files; an edit to its file, its helper or its
params reruns only its variant and what follows; a bad return is one
``memobench:`` line."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import sys
import textwrap

import pyarrow.parquet as pq
import pytest

from tests.helpers import REPO, copy_project, dry_run_jobs, job_counts, memobench_lines, snakemake, write_config

HELPER = '''\
import re


def words(text):
    return set(re.findall(r"\\w+", text.lower()))


def overlap(question, text):
    return len(words(question) & words(text))
'''

RETRIEVER = '''\
import importlib

from helper import overlap


def rank(question, haystack, date_weight=0.0):
    """Word overlap with the question, a little weight on the date's length; positions and scores."""
    assert isinstance(question.id, str) and isinstance(question.text, str) and isinstance(question.type, str)
    assert len(haystack.ids) == len(haystack.texts) == len(haystack.dates) == len(haystack)
    weight = importlib.import_module("dyn" + "_helper").WEIGHT  # a module no import statement names
    scores = [weight * overlap(question.text, t) + date_weight * len(d or "")
              for t, d in zip(haystack.texts, haystack.dates)]
    order = sorted(range(len(haystack)), key=lambda i: (-scores[i], haystack.ids[i], i))
    return order, [scores[i] for i in order]
'''

DYN_HELPER = "WEIGHT = 1\n"

INDEX = '''\
import re


def _words(text, min_len):
    return {w for w in re.findall(r"\\w+", text.lower()) if len(w) >= min_len}


def embed(texts, min_len=1):
    """The per-session work: each document's words, once per distinct document."""
    return [sorted(_words(t, min_len)) for t in texts]


def rank_prepared(question, haystack, prepared, min_len=1):
    q = _words(question.text, min_len)
    scores = [len(q & set(p)) for p in prepared]
    return [haystack.ids[i] for i in sorted(range(len(haystack)), key=lambda i: (-scores[i], i))]
'''

DATASETS = ("locomo1", "lme")
VARIANTS = ["v0.8.0", "mine", "mine-prep"]


def _variants(date_weight=0.001):
    return {
        "mine": {"retriever": {"callable": "retr/my_retrievers.py:rank", "params": {"date_weight": date_weight}}},
        "mine-prep": {"retriever": {"callable": "prep.my_index:rank_prepared", "prepare": "prep.my_index:embed",
                                    "params": {"min_len": 2}}},
    }


def _config(path, data, datasets, **variants):
    return write_config(path, data_dir=str(data), run=list(DATASETS), datasets=datasets,
                        variants=_variants(**variants), exports={"retrieval_log": ["lme/*"]})


@pytest.fixture(scope="module")
def run(tmp_path_factory, small_data):
    root = tmp_path_factory.mktemp("pyretriever")
    data, datasets = small_data(VARIANTS, seed=5)
    work = root / "work"
    retr = work / "retr"
    retr.mkdir(parents=True)
    (retr / "helper.py").write_text(HELPER, encoding="utf-8")
    (retr / "dyn_helper.py").write_text(DYN_HELPER, encoding="utf-8")
    (retr / "my_retrievers.py").write_text(RETRIEVER, encoding="utf-8")
    (work / "prep").mkdir()
    (work / "prep" / "my_index.py").write_text(INDEX, encoding="utf-8")
    cfg = _config(root / "cfg.yaml", data, datasets)
    snakemake(work, "--cores", "2", configfile=cfg)
    return work, data, cfg, datasets


def _user_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def _raw_questions(data, ds):
    """(question, haystack) per question id, from the raw file as a user reads it:
    LongMemEval's user turns, LoCoMo's turns, each joined with single spaces; and the gold."""
    from memobench.retrieval.python import Haystack, Question

    out = {}
    if ds == "lme":
        for item in json.loads((data / "lme.json").read_text(encoding="utf-8")):
            ids = [str(s) for s in item["haystack_session_ids"]]
            docs = [" ".join(t["content"] for t in s if t["role"] == "user") for s in item["haystack_sessions"]]
            q = Question(str(item["question_id"]), item["question"], item["question_date"], item["question_type"])
            gold = {str(g) for g in item["answer_session_ids"]} & set(ids)
            out[q.id] = (q, Haystack(tuple(ids), tuple(docs), tuple(item["haystack_dates"])), gold)
        return out
    (conv,) = json.loads((data / "locomo1.json").read_text(encoding="utf-8"))
    c = conv["conversation"]
    keys = sorted((k for k in c if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k[8:]))
    hay = Haystack(tuple(keys), tuple(" ".join(t["text"] for t in c[k]) for k in keys),
                   tuple(c.get(f"{k}_date_time") for k in keys))
    dia = {t["dia_id"]: k for k in keys for t in c[k]}
    for i, qa in enumerate(conv["qa"]):
        q = Question(f"{conv['sample_id']}#{i}", qa["question"], None, str(qa.get("category")))
        out[q.id] = (q, hay, {dia[e] for e in qa.get("evidence", []) if e in dia})
    return out


def _direct(work, data, ds, variant):
    """Each question's list from the user's functions called here on the raw file."""
    retr = work / "retr"
    if variant == "mine":
        rank = _user_module(retr / "my_retrievers.py", "direct_my_retrievers").rank
        sys.path.insert(0, str(retr))  # rank imports a neighbour by name
        try:
            return {qid: [hay.ids[p] for p in rank(q, hay, date_weight=0.001)[0]]
                    for qid, (q, hay, _) in _raw_questions(data, ds).items()}
        finally:
            sys.path.remove(str(retr))
    index = _user_module(work / "prep" / "my_index.py", "direct_my_index")
    return {qid: index.rank_prepared(q, hay, index.embed(list(hay.texts), min_len=2), min_len=2)
            for qid, (q, hay, _) in _raw_questions(data, ds).items()}


def _deep_lists(path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in pq.read_table(path).to_pylist():
        out.setdefault(r["question_id"], []).append(r["session_id"])
    return out


@pytest.mark.parametrize("variant", ["mine", "mine-prep"])
@pytest.mark.parametrize("ds", DATASETS)
def test_lists_and_metrics_equal_the_functions_called_directly(run, ds, variant):
    work, data, _, _ = run
    res = work / "results" / ds
    direct = _direct(work, data, ds, variant)
    got = _deep_lists(res / variant / "deep.parquet")
    outcomes = pq.read_table(res / variant / "outcomes.parquet").to_pylist()
    evaluated = [o for o in outcomes if o["status"] == "evaluated"]
    assert len(evaluated) >= 8 and set(got) == {o["question_id"] for o in evaluated}
    gold = {qid: g for qid, (_, _, g) in _raw_questions(data, ds).items()}
    counts = {"questions": 0, "hit@1": 0, "hit@5": 0, "hit@10": 0, "mrr_sum": 0.0}
    for o in evaluated:
        qid = o["question_id"]
        assert got[qid] == direct[qid][:50], qid
        rank = next((r for r, sid in enumerate(direct[qid][:10], 1) if sid in gold[qid]), 0)
        counts["questions"] += 1
        for k in (1, 5, 10):
            counts[f"hit@{k}"] += 0 < rank <= k
        counts["mrr_sum"] += 1 / rank if rank else 0.0
    m = json.loads((res / variant / "metrics.json").read_text())
    assert {k: m[k] for k in ("questions", "hit@1", "hit@5", "hit@10")} == \
        {k: counts[k] for k in ("questions", "hit@1", "hit@5", "hit@10")}
    assert m["mrr_sum"] == pytest.approx(counts["mrr_sum"], abs=1e-12)
    assert 0 < m["hit@10"]
    # the Memo variant's questions, skips and denominators
    memo = json.loads((res / "v0.8.0" / "metrics.json").read_text())
    assert (m["items"], m["questions"], m["skipped"]) == (memo["items"], memo["questions"], memo["skipped"])
    assert m["kind"] == "python" and "recipe" not in m and m["retriever"]["callable"]
    for name in ("official.json", "run.trec") + (("retrievallog.jsonl",) if ds == "lme" else ()):
        assert (res / variant / name).stat().st_size > 0


def test_prepare_runs_once_per_distinct_document(run):
    """One prepare job per dataset: every distinct document of the file once,
    each value prepare's own for that document."""
    from memobench.retrieval.python import text_hash

    work, data, _, _ = run
    index = _user_module(work / "prep" / "my_index.py", "direct_my_index2")
    for ds in DATASETS:
        docs = {t for _, hay, _ in _raw_questions(data, ds).values() for t in hay.texts}
        t = pq.read_table(work / "results" / ds / "prepared" / "mine-prep.parquet").to_pylist()
        assert len(t) == len(docs)
        by_hash = {text_hash(d): d for d in docs}
        import pickle

        for row in t:
            assert pickle.loads(row["value"]) == index.embed([by_hash[row["sha256"]]], min_len=2)[0]
        log = (work / "results" / "logs" / "prepare" / ds / "mine-prep.log").read_text()
        assert f'"distinct": {len(docs)}' in log and '"calls": 1' in log
    # the Memo jobs ranked no user retriever as a sibling
    for log in (work / "results" / "logs" / "retrieve").rglob("*.log"):
        assert "mine" not in log.read_text() or log.parent.name.startswith("mine")


def test_report_labels_your_retriever(run):
    work, _, _, _ = run
    report = (work / "results" / "report.md").read_text()
    for ds in DATASETS:
        assert f"| {ds} | mine (your retriever) |" in report
    # the paired table of each dataset (its rows: variant, kind, against, ...) names the kind
    assert report.count("| mine-prep | your retriever | v0.8.0 |") == len(DATASETS), report


def _reruns(work, cfg) -> tuple[dict, set]:
    """A dry run's job counts, and the (rule, dataset, variant) of its retrieve and prepare jobs."""
    proc = snakemake(work, "-n", configfile=cfg)
    jobs = set()
    for rule, ds, variant in re.findall(r"rule (retrieve|prepare):\n(?:    .*\n)*?    wildcards: dataset=([^,\s]+), "
                                        r"variant=([^,\s]+)", proc.stdout):
        jobs.add((rule, ds, variant))
    return job_counts(proc.stdout + proc.stderr), jobs


ONE_VARIANT = {"retrieve": 3, "merge": 2, "retrievallog": 1, "stats": 2, "report": 1, "all": 1}


@pytest.mark.parametrize("edit", ["retriever", "helper", "dynamic helper", "new module", "params", "index", "touch",
                                  "data file"])
def test_an_edit_reruns_only_its_variant(run, edit, tmp_path):
    """Every Python file of the retriever's folder is its code: a helper it
    loads by a name built at run time, or a new module, reruns it; a data
    file beside it does not (its params name such a file)."""
    work, data, cfg, datasets = run
    retr = work / "retr"
    target = {"retriever": retr / "my_retrievers.py", "helper": retr / "helper.py",
              "dynamic helper": retr / "dyn_helper.py", "index": work / "prep" / "my_index.py",
              "touch": retr / "my_retrievers.py"}.get(edit)
    original = target.read_text(encoding="utf-8") if target else None
    try:
        if edit == "params":
            cfg = _config(tmp_path / "cfg.yaml", data, datasets, date_weight=0.002)
        elif edit == "touch":
            target.write_text(original, encoding="utf-8")  # a newer file, the same source
        elif edit == "data file":
            (retr / "notes.txt").write_text("x = 1\n", encoding="utf-8")
        elif edit == "new module":
            (retr / "notes.py").write_text("x = 1\n", encoding="utf-8")
        elif edit == "dynamic helper":
            target.write_text("WEIGHT = -1  # ranks in reverse\n", encoding="utf-8")
        else:
            target.write_text(original + "\n# an edit\n", encoding="utf-8")
        counts, jobs = _reruns(work, cfg)
        if edit in ("touch", "data file"):
            assert counts == {} and jobs == set()
        elif edit == "index":
            # the prepare callable's module: its cached values, then its variant
            assert counts == {"prepare": 2, **ONE_VARIANT}
            assert jobs == {("prepare", ds, "mine-prep") for ds in DATASETS} | {
                ("retrieve", ds, "mine-prep") for ds in DATASETS}
        else:
            assert counts == ONE_VARIANT
            assert jobs == {("retrieve", ds, "mine") for ds in DATASETS}
    finally:
        if original is not None:
            target.write_text(original, encoding="utf-8")
        (retr / "notes.py").unlink(missing_ok=True)
        (retr / "notes.txt").unlink(missing_ok=True)
    # that the revert leaves nothing to run is checked by the next case's exact plan and, after the
    # last, by test_a_deleted_prepared_table_is_made_again's final dry run (a Snakemake start each saved)


def test_a_deleted_prepared_table_is_made_again(run):
    """The prepare step's table is read only by retrieve jobs that are up to
    date: the next run makes it again all the same."""
    import shutil

    work, _, cfg, _ = run
    table = work / "results" / "lme" / "prepared" / "mine-prep.parquet"
    kept = work / "kept.parquet"
    shutil.copy2(table, kept)
    table.unlink()
    try:
        _, jobs = _reruns(work, cfg)
        assert ("prepare", "lme", "mine-prep") in jobs
    finally:
        shutil.copy2(kept, table)
        kept.unlink()
    assert dry_run_jobs(work, configfile=cfg) == {}


# --------------------------------------------------------------------------- bad returns

BAD = '''\
import math


def not_in(question, haystack):
    return ["no-such-session"]


def repeated(question, haystack):
    return [haystack.ids[0]] * (haystack.ids.count(haystack.ids[0]) + 1)


def nan_score(question, haystack):
    return list(range(len(haystack))), [math.nan] * len(haystack)


def boom(question, haystack):
    raise ValueError("boom")


def nothing(question, haystack):
    return None


def outside(question, haystack):
    return [len(haystack)]


def twice(question, haystack):
    return [0, 0]


def mixed(question, haystack):
    return [0, haystack.ids[1]]


def scores_short(question, haystack):
    return [0, 1], [2.0]


def unordered(question, haystack):
    return set(haystack.ids)


def interrupted(question, haystack):
    raise KeyboardInterrupt


def pair_none(question, haystack):
    return list(range(len(haystack))), None


def huge_score(question, haystack):
    return [0], [10**400]


def ok(question, haystack):
    return list(range(len(haystack)))[::-1]
'''

BAD_RETURNS = {
    "not_in": "bad.py:not_in returned session id 'no-such-session', which is not in its haystack",
    "repeated": r"bad.py:repeated returned session id '[^']+' \d times; the haystack lists it (once|\d times)",
    "nan_score": "bad.py:nan_score returned score nan at rank 1; scores must be finite",
    "boom": r"bad.py:boom raised ValueError: boom \(\S*bad.py, line 17\)",
    "nothing": "bad.py:nothing returned None; return the haystack's positions or session ids",
    "outside": r"bad.py:outside returned position \d+, outside the haystack's 0..\d+",
    "twice": "bad.py:twice returned position 0 twice",
    "mixed": r"bad.py:mixed returned '[^']+' in its ranking; give haystack positions \(ints\) or session ids",
    "scores_short": "bad.py:scores_short returned 1 scores for 2 ranked sessions",
    "unordered": "bad.py:unordered returned a set; return",
    "interrupted": r"bad.py:interrupted raised KeyboardInterrupt \(\S*bad.py, line 45\)$",
    "pair_none": r"bad.py:pair_none returned \(ranking, None\); the second item of a pair is the scores, a list of "
                 r"numbers, one per ranked session: return the ranking alone",
    "huge_score": r"bad.py:huge_score returned score 100000\.\.\. \(401 digits\) at rank 1, an integer too large for "
                  r"a float",
}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The committed tiny LongMemEval file normalized, a file of bad retrievers,
    and the first question a retriever ranks."""
    from memobench.datasets import normalize

    root = tmp_path_factory.mktemp("bad_returns")
    normalize.normalize_longmemeval(REPO / ".test/data/lme_tiny.json", root, log=lambda m: None)
    (root / "bad.py").write_text(BAD, encoding="utf-8")
    (root / "broken.py").write_text("x = 1 / 0\n", encoding="utf-8")
    (root / "json.py").write_text("def rank(question, haystack):\n    return []\n", encoding="utf-8")
    path = list(sys.path)
    outs = _rank(root, "ok")
    first = next(o["question_id"] for o in pq.read_table(outs["outcomes"]).to_pylist() if o["status"] == "evaluated")
    yield root, first
    # the loader put the folder first on sys.path (a job keeps it): this process does not
    sys.path[:] = path
    sys.modules.pop("bad", None)


def _rank(root, func, name="bad"):
    from memobench.retrieval import sharing as retrievers
    from memobench.retrieval.python import python_variant

    v = python_variant(name, "s", {"retriever": {"callable": f"{root}/{func}"}} if ":" in func else
                       {"retriever": {"callable": f"{root}/bad.py:{func}"}})
    outs = {k: root / f"{func.replace(':', '_')}.{k}.parquet" for k in ("rankings", "outcomes", "deep")}
    retrievers.write_segments([v], root / "questions.parquet", root / "haystacks.parquet", root / "events.parquet",
                              1, 1, {name: outs}, log=lambda m: None)
    return outs


@pytest.mark.parametrize("func", sorted(BAD_RETURNS))
def test_a_bad_return_is_one_line_naming_variant_question_and_problem(tiny, func):
    from memobench.retrieval.python import RetrieverError

    root, first = tiny
    with pytest.raises(RetrieverError) as e:
        _rank(root, func)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"variant 'bad': question '{first}': {root}/"), msg
    assert re.search(BAD_RETURNS[func], msg), msg


@pytest.mark.parametrize("callable_,why", [
    ("broken.py:rank", r"importing \S*broken.py raised ZeroDivisionError: division by zero \(\S*broken.py, line 1\)"),
    ("bad.py:absent", "bad.py has no 'absent'"),
    ("missing.py:rank", r"no file \S*missing.py"),
    ("json.py:rank", r"the module name 'json' is already taken by \S+; rename json.py"),
])
def test_a_callable_that_cannot_be_loaded_is_one_line(tiny, callable_, why):
    from memobench.retrieval.python import RetrieverError

    root, _ = tiny
    with pytest.raises(RetrieverError) as e:
        _rank(root, callable_)
    assert "\n" not in str(e.value) and str(e.value).startswith("variant 'bad': ")
    assert re.search(why, str(e.value)), str(e.value)


def test_a_bad_prepare_return_is_one_line(tmp_path):
    from memobench.datasets import normalize
    from memobench.retrieval.python import RetrieverError, prepare_sessions
    from memobench.retrieval.python import python_variant

    normalize.normalize_longmemeval(REPO / ".test/data/lme_tiny.json", tmp_path, log=lambda m: None)
    (tmp_path / "prep.py").write_text("def embed(texts):\n    return texts[1:]\n", encoding="utf-8")
    v = python_variant("p", "s", {"retriever": {"callable": f"{tmp_path}/prep.py:embed",
                                                "prepare": f"{tmp_path}/prep.py:embed"}})
    with pytest.raises(RetrieverError, match=r"^variant 'p': \S*prep.py:embed returned \d+ values for \d+ "
                                             r"sessions; return one value per session, in order$"):
        prepare_sessions(v, tmp_path / "events.parquet", tmp_path / "prepared.parquet", log=lambda m: None)
    assert not (tmp_path / "prepared.parquet").exists()


@pytest.mark.parametrize("func,line,why", [("boom", 17, "ValueError: boom"),
                                           ("interrupted", 45, "KeyboardInterrupt")])
def test_the_workflow_reports_a_bad_return_in_one_memobench_line(tmp_path, func, line, why):
    """An exception, a KeyboardInterrupt included: one line, the traceback in the job's log."""
    data = tmp_path / "data"
    data.mkdir()
    raw = REPO / ".test/data/lme_tiny.json"
    (data / raw.name).write_bytes(raw.read_bytes())
    (tmp_path / "bad.py").write_text(BAD, encoding="utf-8")
    cfg = write_config(tmp_path / "cfg.yaml", data_dir=str(data), run=["tiny"],
                       datasets={"tiny": {"format": "longmemeval", "file": raw.name, "bytes": raw.stat().st_size,
                                          "variants": ["bad"]}},
                       variants={"bad": {"retriever": {"callable": f"bad.py:{func}"}}})
    proc = snakemake(tmp_path, "--cores", "1", configfile=cfg, check=False)
    assert proc.returncode != 0
    lines = memobench_lines(proc.stderr)
    assert len(lines) == 1, proc.stderr[-3000:]
    assert re.fullmatch(rf"memobench: variant 'bad': question '[^']+': bad.py:{func} raised {why} "
                        rf"\(bad.py, line {line}\)", lines[0]), lines[0]
    assert "Traceback" not in proc.stderr and "SIGINT" not in proc.stderr, proc.stderr[-3000:]
    log = (tmp_path / "results/logs/retrieve/tiny/bad/seg1.log").read_text()
    assert "Traceback" in log and BAD.splitlines()[line - 1].strip() in log


@pytest.mark.parametrize("entry,why", [
    ({"retriever": {"callable": "nocolon"}}, "is not 'module:function' or 'path/to/file.py:function'"),
    ({"retriever": {"callable": "x.py:rank"}, "base": "v0.8.0"}, "takes no base or recipe"),
    ({"description": "x"}, "give base"),
    ({"retriever": {"callable": "missing.py:rank"}}, "no file missing.py"),
    ({"retriever": {"callable": "x.py:rank", "documents": "some"}}, "'some' is not one of"),
])
def test_config_errors_name_the_variant(tmp_path, entry, why):
    raw = REPO / ".test/data/lme_tiny.json"
    cfg = write_config(tmp_path / "cfg.yaml", data_dir=str(raw.parent), run=["tiny"],
                       datasets={"tiny": {"format": "longmemeval", "file": raw.name, "bytes": raw.stat().st_size,
                                          "variants": ["mine"]}},
                       variants={"mine": entry})
    proc = snakemake(tmp_path, "-n", configfile=cfg, check=False)
    assert proc.returncode != 0
    lines = memobench_lines(proc.stderr)
    assert len(lines) == 1 and "mine" in lines[0] and why in lines[0], proc.stderr[-2000:]


def test_sources_are_the_file_and_its_local_imports(tmp_path):
    """The fingerprint's files: the callable's module and what it imports from
    its folder or package, however written; not third-party modules, not
    neighbours it does not import."""
    from memobench.retrieval.callables import sources

    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "sub" / "__init__.py").write_text("from . import deep\n", encoding="utf-8")
    (pkg / "sub" / "deep.py").write_text("import numpy\n", encoding="utf-8")
    (pkg / "util.py").write_text("", encoding="utf-8")
    (pkg / "unused.py").write_text("", encoding="utf-8")
    (pkg / "main.py").write_text(textwrap.dedent("""\
        import json
        from . import util
        def rank(question, haystack):
            from .sub import deep
            return []
        """), encoding="utf-8")
    (tmp_path / "flat.py").write_text("try:\n    import helper2\nexcept ImportError:\n    pass\n", encoding="utf-8")
    (tmp_path / "helper2.py").write_text("", encoding="utf-8")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "loose.py").write_text("", encoding="utf-8")  # not a package
    got = {p.relative_to(tmp_path).as_posix() for p in sources("pkg/main.py:rank", cwd=tmp_path)}
    # every file of the package, imported or not (a name built at run time loads one unseen)
    assert got == {"pkg/__init__.py", "pkg/main.py", "pkg/util.py", "pkg/unused.py", "pkg/sub/__init__.py",
                   "pkg/sub/deep.py"}
    assert sources("pkg.main:rank", cwd=tmp_path) == sources("pkg/main.py:rank", cwd=tmp_path)
    # a folder's modules, and the packages in it; not a plain subfolder's files
    got = {p.relative_to(tmp_path).as_posix() for p in sources("flat.py:rank", cwd=tmp_path)}
    assert got == {"flat.py", "helper2.py"} | {f"pkg/{f}" for f in ("__init__.py", "main.py", "util.py", "unused.py",
                                                                    "sub/__init__.py", "sub/deep.py")}


def test_a_module_loaded_from_outside_the_fingerprint_stops_the_job(tiny):
    """A folder without __init__.py below the retriever's, put on sys.path
    and loaded by name: not in the fingerprint, so the job stops rather
    than leave a result its next edit would not rerun."""
    from memobench.retrieval.python import RetrieverError

    root, _ = tiny
    (root / "lib").mkdir(exist_ok=True)
    (root / "lib" / "hidden_helper.py").write_text("ORDER = -1\n", encoding="utf-8")
    (root / "sneaky.py").write_text(textwrap.dedent("""\
        import importlib, os, sys
        def rank(question, haystack):
            sys.path.insert(0, os.path.join(os.path.dirname(__file__), "lib"))
            step = importlib.import_module("hidden_" + "helper").ORDER
            return list(range(len(haystack)))[::step]
        """), encoding="utf-8")
    try:
        with pytest.raises(RetrieverError) as e:
            _rank(root, "sneaky.py:rank", name="sneaky")
    finally:
        sys.modules.pop("hidden_helper", None)
        sys.modules.pop("sneaky", None)
    assert re.fullmatch(r"variant 'sneaky': \S*sneaky.py:rank loaded \S*lib/hidden_helper.py, which is not in its "
                        r"code fingerprint .*", str(e.value)), str(e.value)


def test_a_real_sigint_still_interrupts(tmp_path):
    """A KeyboardInterrupt the retriever raises is its failure (one line,
    above); a SIGINT the process gets is the user's Ctrl-C and interrupts."""
    import os
    import signal
    import time

    from memobench.retrieval.callables import Calls

    def interrupted_while_running():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)

    before = signal.getsignal(signal.SIGINT)  # default_int_handler, or SIG_IGN where started in the background
    with pytest.raises(KeyboardInterrupt):
        Calls(lambda m: None, tmp_path).call("here", interrupted_while_running)
    assert signal.getsignal(signal.SIGINT) is before


def test_a_call_s_output_cwd_and_time_are_contained(tmp_path, capfd):
    """What a call prints goes to the log; a working directory it changed is
    changed back; past its time it is stopped, even where it catches the
    exception that stops it."""
    import os
    import time

    from memobench.retrieval.callables import Calls

    logged = []
    # 0.5 s: room for noisy's shell on a busy machine, and stubborn's 3 s still cut well inside the 2 s asserted
    calls = Calls(logged.append, tmp_path, timeout_s=0.5)
    here = os.getcwd()

    def noisy():
        print("to stdout")
        os.system("echo from a child process 1>&2")
        os.chdir(tmp_path)
        return 7

    def stubborn():
        try:
            time.sleep(3)
        except BaseException:
            pass
        return 1

    assert calls.call("here", noisy) == (7, False)
    assert os.getcwd() == here
    out, err = capfd.readouterr()
    assert "to stdout" not in out + err and "child process" not in out + err
    text = "\n".join(logged)
    assert "to stdout" in text and "from a child process" in text and f"changed back to {here}" in text
    started = time.monotonic()
    assert calls.call("here", stubborn) == (None, True)
    assert time.monotonic() - started < 2


def test_too_many_timeouts_stop_the_job(tiny):
    """One more timed-out question than user_retrievers.max_timeouts: one line."""
    from memobench.retrieval import sharing as retrievers
    from memobench.retrieval.python import RetrieverError
    from memobench.retrieval.python import python_variant

    root, _ = tiny
    (root / "sleepy.py").write_text("import time\ndef rank(question, haystack):\n    time.sleep(5)\n    return []\n",
                                    encoding="utf-8")
    v = python_variant("sleepy", "s", {"retriever": {"callable": f"{root}/sleepy.py:rank"}})
    v = dataclasses.replace(v, retriever={**v.retriever, "limits": {"timeout_s": 0.1, "max_timeouts": 1}})
    outs = {k: root / f"sleepy.{k}.parquet" for k in ("rankings", "outcomes", "deep")}
    try:
        with pytest.raises(RetrieverError, match=r"^variant 'sleepy': \S*sleepy.py:rank took more than 0.1 s on 2 "
                                                 r"questions of this job \([^)]+\), more than user_retrievers."
                                                 r"max_timeouts \(1\)"):
            retrievers.write_segments([v], root / "questions.parquet", root / "haystacks.parquet",
                                      root / "events.parquet", 1, 1, {"sleepy": outs}, log=lambda m: None)
    finally:
        sys.modules.pop("sleepy", None)


# --------------------------------------------------------------------------- a hostile retriever, end to end

HOSTILE = '''\
import os
import random
import time


def moving(question, haystack, scratch):
    """Deterministic, but moves to another folder and prints a lot."""
    os.chdir(scratch)
    for i in range(40):
        print(f"NOISE line {i} of {question.id}")
    os.system("echo CHILD-NOISE 1>&2")
    return sorted(range(len(haystack)), key=lambda i: (-len(haystack.texts[i]), i))


def shuffled(question, haystack):
    order = list(range(len(haystack)))
    random.shuffle(order)
    return order


def slow(question, haystack, slow_ids):
    if question.id in slow_ids:
        time.sleep(30)
    return list(range(len(haystack)))
'''


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """lme_tiny ranked by three hostile retrievers in one Snakemake run, the
    user_retrievers timeout cut to 0.5 s. As a user runs it: in a copy of the
    project, the retrievers' file at its root beside workflow/."""
    root = tmp_path_factory.mktemp("hostile")
    data, work, scratch = root / "data", copy_project(root / "work"), root / "scratch"
    for d in (data, scratch):
        d.mkdir()
    raw = REPO / ".test/data/lme_tiny.json"
    (data / raw.name).write_bytes(raw.read_bytes())
    (work / "hostile.py").write_text(HOSTILE, encoding="utf-8")
    slow_ids = ["56a88fdf", "d75d49f9"]
    variants = {
        "moving": {"retriever": {"callable": "hostile.py:moving", "params": {"scratch": str(scratch)}}},
        "shuffled": {"retriever": {"callable": "hostile.py:shuffled"}},
        "slow": {"retriever": {"callable": "hostile.py:slow", "params": {"slow_ids": slow_ids}}},
    }
    cfg = write_config(root / "cfg.yaml", data_dir=str(data), run=["tiny"],
                       datasets={"tiny": {"format": "longmemeval", "file": raw.name, "bytes": raw.stat().st_size,
                                          "variants": ["v0.8.0", *variants]}},
                       variants=variants, user_retrievers={"timeout_s": 0.5, "max_timeouts": 3})
    proc = snakemake(work, "--cores", "2", configfile=cfg, inside=True)
    return work, scratch, cfg, proc, slow_ids


def _metrics(work, variant) -> dict:
    return json.loads((work / "results" / "tiny" / variant / "metrics.json").read_text(encoding="utf-8"))


def test_a_retriever_that_changes_folder_writes_nothing_outside_its_results(hostile):
    work, scratch, _, _, _ = hostile
    assert list(scratch.iterdir()) == []
    assert _metrics(work, "moving")["questions"] > 0
    log = (work / "results/logs/retrieve/tiny/moving/seg1.log").read_text(encoding="utf-8")
    assert f"changed the working directory to {scratch}" in log


def test_a_retriever_s_output_goes_to_its_log_not_the_console(hostile):
    work, _, _, proc, _ = hostile
    assert "NOISE line" not in proc.stdout + proc.stderr and "CHILD-NOISE" not in proc.stdout + proc.stderr
    log = (work / "results/logs/retrieve/tiny/moving/seg1.log").read_text(encoding="utf-8")
    assert "NOISE line 39 of" in log and "CHILD-NOISE" in log


def test_determinism_is_checked_and_a_random_order_is_reported(hostile):
    work, _, _, _, _ = hostile
    steady, random_ = _metrics(work, "moving")["determinism"], _metrics(work, "shuffled")["determinism"]
    assert steady == {"checked": 5, "differing": 0, "questions": []}
    assert random_["checked"] == 5 and random_["differing"] >= 1 and len(random_["questions"]) == random_["differing"]
    assert "determinism" not in _metrics(work, "v0.8.0")
    report = (work / "results" / "report.md").read_text(encoding="utf-8")
    assert re.search(r"[Nn]ondeterministic: \d+ of the 5 questions ranked twice got two different rankings", report)
    assert report.count("ondeterministic") == 1, report


def test_timed_out_questions_are_counted_misses(hostile):
    work, _, _, _, slow_ids = hostile
    m = _metrics(work, "slow")
    assert m["timeouts"] == {"limit_s": 0.5, "count": 2, "questions": slow_ids}
    outcomes = {o["question_id"]: o for o in pq.read_table(work / "results/tiny/slow/outcomes.parquet").to_pylist()}
    assert all(outcomes[q]["status"] == "evaluated" and outcomes[q]["n_ranked"] == 0 for q in slow_ids)
    assert m["empty_lists"] == 2
    report = (work / "results" / "report.md").read_text(encoding="utf-8")
    assert "2 questions took more than 0.5 s and were ranked as empty lists (misses): 56a88fdf, d75d49f9" in report


def test_a_deterministic_retriever_s_metrics_are_the_same_on_a_rerun(hostile):
    work, _, cfg, _, _ = hostile
    before = (work / "results/tiny/moving/metrics.json").read_bytes()
    snakemake(work, "--cores", "1", "--forcerun", "results/tiny/moving/segments/seg1.parquet", configfile=cfg,
              inside=True)
    assert (work / "results/tiny/moving/metrics.json").read_bytes() == before
