"""Retrieve jobs that rank their sibling variants in the same pass
(shared_retrieval.py): each variant's tables equal the ones it gets alone, a
sibling's job copies what the first job left, and an entry is used only under
its key (spec, segment, code, input stamps)."""

from __future__ import annotations

import itertools
import json
import os

import pyarrow.parquet as pq
import pytest

from memobench.core import layout
from memobench.datasets import normalize
from memobench.retrieval import sharing as retrievers
from memobench.catalog import variants
from memobench.tools.generate.longmemeval import write_longmemeval
from memobench.retrieval.sharing import siblings, stored_key, write_plan, write_segment_shared
from tests.helpers import token_files

QUIET = lambda *a, **k: None  # noqa: E731
KINDS = ("rankings", "outcomes", "deep")


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    d = tmp_path_factory.mktemp("shared")
    raw = d / "lme.json"
    write_longmemeval(raw, n_questions=30, sessions_per_question=20, seed=3, spice=True)
    normalize.normalize_longmemeval(raw, d, log=QUIET)
    token_files(d, ("ascii", "cjkr"))
    return d


def _config(names):
    return {"datasets": {"ds": {"format": "longmemeval", "family": "s", "variants": list(names)}}, "variants": {}}


def _inputs(d, seq="ascii", fts=True):
    out = {"questions": d / "questions.parquet", "haystacks": d / "haystacks.parquet",
           "events": d / "events.parquet", "tokens": d / f"tokens_{seq}.arrow"}
    if fts:
        out["fts_tokens"] = d / "tokens_fts5.arrow"
    return {k: str(v) for k, v in out.items()}


def _outputs(root, name, seg=1):
    s = root / "ds" / name / "segments"
    s.mkdir(parents=True, exist_ok=True)
    return {kind: str(s / f"seg{seg}{suffix}") for kind, suffix in layout.SEGMENT_SUFFIXES.items()}


def _alone(d, tmp_path, name, seg=1):
    v = variants.resolve(name, "s")
    outs = {k: tmp_path / f"alone.{name}.{k}.parquet" for k in KINDS}
    retrievers.write_segment(v, d / "questions.parquet", d / "haystacks.parquet", d / "events.parquet", seg, 2,
                             outs["rankings"], outs["outcomes"], log=QUIET,
                             tokens_path=d / f"tokens_{v.recipe.seq}.arrow",
                             fts_tokens_path=d / "tokens_fts5.arrow", deep_out=outs["deep"])
    return {k: pq.read_table(p) for k, p in outs.items()}


def _entries(root, seg=1, group="tokens-ascii"):
    """The folder a group's cached entries live in (v0.8.0's and v0.5.0's: tokens-ascii)."""
    return root / "ds" / "cache" / f"seg{seg}" / group


def _run(d, root, name, config, code="c1", seg=1):
    v = variants.resolve(name, "s")
    return write_segment_shared(v, config, "ds", seg, 2, _inputs(d, v.recipe.seq, v.recipe.backend == "fts"),
                                _outputs(root, name, seg), code, log=QUIET)


def test_siblings_share_tokenizer_and_inputs(tables):
    cfg = _config(["v0.8.0", "v0.5.0", "exp4-A0-base", "v0.8.0-index"])
    v = variants.resolve("v0.8.0", "s")
    assert [s.name for s in siblings(cfg, "ds", v, _inputs(tables))] == ["v0.5.0"]
    # an FTS-less job cannot rank an FTS variant
    assert siblings(cfg, "ds", v, _inputs(tables, fts=False)) == []


def test_groups_lock_apart(tmp_path):
    """Variants of one tokenizer share a group and a segment's lock; another
    tokenizer's jobs take another lock (they never rank each other's lists),
    so they run beside a job that is ranking its siblings instead of waiting."""
    from memobench.retrieval.sharing import lock_path, share_group

    by_name = {n: variants.resolve(n, "s") for n in ("v0.8.0", "v0.5.0", "v0.8.0-index", "exp4-A0-base")}
    seqs = {n: v.recipe.seq for n, v in by_name.items()}
    for a, b in itertools.combinations(by_name, 2):
        same = seqs[a] == seqs[b]
        assert (share_group(by_name[a]) == share_group(by_name[b])) == same
        assert (lock_path(tmp_path, 1, by_name[a]) == lock_path(tmp_path, 1, by_name[b])) == same
    assert len(set(seqs.values())) > 1  # the case is there
    assert lock_path(tmp_path, 1, by_name["v0.8.0"]) != lock_path(tmp_path, 2, by_name["v0.8.0"])


def test_each_group_leader_ranks_its_whole_group():
    """The job the workflow starts first in each group (the retrieve rule's
    priority) is one whose pass ranks every other variant of the group, an
    index variant listed first notwithstanding; one leader per group."""
    from memobench.retrieval.sharing import group_leaders, needed_inputs, share_group

    # an index variant of the ascii tokenizer listed before the FTS ones of its group
    names = ["v0.8.0-index", "ascii-index", "exp4-A0-base", "exp3-T2h", "v0.5.0", "v0.8.0", "exp-V1", "exp5-S2"]
    cfg = {**_config(names), "variants": {"ascii-index": {"base": "v0.8.0", "recipe": {"backend": "index"}}}}
    resolved = [variants.resolve(n, "s", cfg["variants"]) for n in names]
    leaders = group_leaders(resolved)
    groups = {share_group(v) for v in resolved}
    assert len(groups) > 1 and len(leaders) == len(groups)
    for lead in (v for v in resolved if v.name in leaders):
        members = {v.name for v in resolved if share_group(v) == share_group(lead)} - {lead.name}
        inputs = {n: None for n in needed_inputs(lead)}
        assert members <= {s.name for s in siblings(cfg, "ds", lead, inputs)}, lead.name
    # a group with an FTS and an index variant: the FTS one leads, whatever the order
    fts = {v.name for v in resolved if v.recipe.backend == "fts"}
    index_first = [v for v in resolved if v.recipe.backend != "fts" and
                   any(share_group(w) == share_group(v) for w in resolved if w.name in fts)]
    assert index_first and not {v.name for v in index_first} & leaders


def test_first_job_ranks_siblings_and_their_jobs_copy_them(tables, tmp_path):
    names = ["v0.8.0", "v0.5.0", "exp-V1", "exp3-T2m"]
    cfg = _config(names)
    first = _run(tables, tmp_path, "v0.8.0", cfg)
    assert first == {"reused": False, "computed": names, "rejected": None}
    for name in names[1:]:
        assert _run(tables, tmp_path, name, cfg) == {"reused": True, "computed": [], "rejected": None}
    assert not list((tmp_path / "ds" / "cache" / "seg1").rglob("*.parquet"))  # used entries are removed
    assert not list((tmp_path / "ds" / "cache" / "seg1").rglob("*.sha256.json"))  # with their seals
    for name in names:
        alone = _alone(tables, tmp_path, name)
        for k in KINDS:
            assert pq.read_table(_outputs(tmp_path, name)[k]).equals(alone[k]), (name, k)
        assert stored_key(tmp_path / "ds" / "cache" / "seg1", name)


def test_up_to_date_siblings_are_not_recomputed(tables, tmp_path):
    cfg = _config(["v0.8.0", "v0.5.0"])
    _run(tables, tmp_path, "v0.8.0", cfg)
    _run(tables, tmp_path, "v0.5.0", cfg)
    before = os.stat(_outputs(tmp_path, "v0.5.0")["outcomes"]).st_mtime_ns
    both = [("ds", "v0.8.0", 1), ("ds", "v0.5.0", 1)]
    write_plan(tmp_path, both, complete=True)
    # v0.8.0's job reruns (as after a change to it alone): v0.5.0's outputs carry their current key
    assert _run(tables, tmp_path, "v0.8.0", cfg)["computed"] == ["v0.8.0"]
    assert os.stat(_outputs(tmp_path, "v0.5.0")["outcomes"]).st_mtime_ns == before
    # a code change changes every key: the stale sibling, planned, is ranked again in the same pass
    assert _run(tables, tmp_path, "v0.8.0", cfg, code="c2")["computed"] == ["v0.8.0", "v0.5.0"]
    # not planned (a targeted run of v0.8.0 alone): only v0.8.0
    write_plan(tmp_path, both[:1], complete=True)
    assert _run(tables, tmp_path, "v0.8.0", cfg, code="c3")["computed"] == ["v0.8.0"]
    # no complete plan: existing outputs, stale or not, are left to their own jobs
    write_plan(tmp_path, both, complete=False)
    assert _run(tables, tmp_path, "v0.8.0", cfg, code="c4")["computed"] == ["v0.8.0"]


def test_a_job_names_its_siblings_from_the_runs_plan(tables, tmp_path):
    """The retrieve stage passes no config (None): the siblings come from the
    datasets and variants the run's plan records (hooks.smk writes it at the
    start), and without a plan the job ranks its own lists only."""
    cfg = _config(["v0.8.0", "v0.5.0"])
    both = [("ds", "v0.8.0", 1), ("ds", "v0.5.0", 1)]
    assert _run(tables, tmp_path, "v0.8.0", None)["computed"] == ["v0.8.0"]  # no plan
    write_plan(tmp_path, both, complete=True, config={**cfg, "data_dir": "elsewhere"})
    assert _run(tables, tmp_path, "v0.8.0", None, code="c2")["computed"] == ["v0.8.0", "v0.5.0"]
    # the plan keeps only what names siblings
    plan = json.loads(open(layout.path(layout.RETRIEVE_PLAN, root=tmp_path), encoding="utf-8").read())
    assert set(plan["config"]) == {"datasets", "variants"}


def test_an_entry_is_used_only_under_its_key(tables, tmp_path):
    cfg = _config(["v0.8.0", "v0.5.0"])
    _run(tables, tmp_path, "v0.8.0", cfg)
    cache = _entries(tmp_path)
    [entry] = {p.name.split(".")[0] for p in cache.glob("*.parquet")}
    write_plan(tmp_path, [("ds", "v0.8.0", 1), ("ds", "v0.5.0", 1)], complete=True)
    # another code fingerprint: the entry does not match, the job ranks its own lists (and
    # v0.8.0's, whose outputs carry the old fingerprint's key)
    assert _run(tables, tmp_path, "v0.5.0", cfg, code="c2") == {"reused": False, "computed": ["v0.5.0", "v0.8.0"],
                                                                  "rejected": None}
    # a replaced input (new stamp): no match either, and the stale entry is collected
    tok = tables / "tokens_ascii.arrow"
    st = os.stat(tok)
    try:
        os.utime(tok, ns=(st.st_atime_ns, st.st_mtime_ns + 100 * 10**9))  # newer than every entry
        assert _run(tables, tmp_path, "v0.5.0", cfg)["reused"] is False
        assert not any(p.name.startswith(entry) for p in cache.glob("*.parquet"))
        assert len({p.name.split(".")[0] for p in cache.glob("*.parquet")}) == 1  # only the new v0.8.0 entry
    finally:
        os.utime(tok, ns=(st.st_atime_ns, st.st_mtime_ns))


def reverse_lists(path) -> None:
    """Rewrite a rankings table as a valid one with each question's list reversed."""
    import pyarrow as pa

    t = pq.read_table(path)
    rows = t.to_pylist()
    lists: dict = {}
    for r in rows:
        lists.setdefault(r["q_index"], []).append(r["session_id"])
    for r in rows:
        r["session_id"] = lists[r["q_index"]][-r["rank"]]
    out = pa.Table.from_pylist(rows, schema=t.schema)
    assert not out.equals(t)
    pq.write_table(out, path)


def _damage(entry: dict, seal, how: str) -> None:
    if how == "truncated":
        data = entry["rankings"].read_bytes()
        entry["rankings"].write_bytes(data[: len(data) // 2])
    elif how == "reversed":
        reverse_lists(entry["rankings"])
    elif how == "unsealed":
        seal.unlink()
    elif how == "table missing":
        entry["deep"].unlink()
    elif how == "seal garbage":
        seal.write_text("{not json")
    elif how == "seal of another key":
        seal.write_text(seal.read_text().replace('"key": "', '"key": "x'))


@pytest.mark.parametrize("how", ["truncated", "reversed", "unsealed", "table missing", "seal garbage",
                                 "seal of another key"])
def test_a_damaged_entry_is_never_copied(tables, tmp_path, how, capsys):
    """A sibling's entry whose bytes are not what was sealed, or that has no
    seal, is removed and the job ranks its own lists (which equal the true ones)."""
    from memobench.retrieval.sharing import _entry, _seal_path

    cfg = _config(["v0.8.0", "v0.5.0"])
    assert _run(tables, tmp_path, "v0.8.0", cfg)["computed"] == ["v0.8.0", "v0.5.0"]
    cache = _entries(tmp_path)
    [key] = {p.name.split(".")[0] for p in cache.glob("*.parquet")}
    _damage(_entry(cache, key), _seal_path(cache, key), how)
    lines = []
    v = variants.resolve("v0.5.0", "s")
    got = write_segment_shared(v, cfg, "ds", 1, 2, _inputs(tables), _outputs(tmp_path, "v0.5.0"), "c1",
                               log=lines.append)
    assert got["reused"] is False and got["computed"] == ["v0.5.0"] and got["rejected"]
    assert any(f"cached entry {key}" in line and "ranking this variant's segment itself" in line for line in lines)
    assert f"memobench: v0.5.0 segment 1/2: the cached entry {key}" in capsys.readouterr().err
    assert not list(cache.glob(f"{key}.*"))
    alone = _alone(tables, tmp_path, "v0.5.0")
    for k in KINDS:
        assert pq.read_table(_outputs(tmp_path, "v0.5.0")[k]).equals(alone[k]), k
    # and the job after it finds nothing to copy: the lists it wrote stay
    assert _run(tables, tmp_path, "v0.5.0", cfg)["reused"] is False


def test_an_unsealed_entry_is_ranked_again_by_the_next_pass(tables, tmp_path):
    """Tables left without their seal (a kill between the two) are not taken
    as waiting for their job: the next sibling pass ranks and seals them."""
    from memobench.retrieval.sharing import _entry, _seal_path

    cfg = _config(["v0.8.0", "v0.5.0"])
    _run(tables, tmp_path, "v0.8.0", cfg)
    cache = _entries(tmp_path)
    [key] = {p.name.split(".")[0] for p in cache.glob("*.parquet")}
    _seal_path(cache, key).unlink()
    reverse_lists(_entry(cache, key)["rankings"])
    write_plan(tmp_path, [("ds", "v0.8.0", 1), ("ds", "v0.5.0", 1)], complete=True)
    assert _run(tables, tmp_path, "v0.8.0", cfg)["computed"] == ["v0.8.0", "v0.5.0"]
    assert _seal_path(cache, key).exists()
    assert _run(tables, tmp_path, "v0.5.0", cfg)["reused"] is True
    alone = _alone(tables, tmp_path, "v0.5.0")
    for k in KINDS:
        assert pq.read_table(_outputs(tmp_path, "v0.5.0")[k]).equals(alone[k]), k


# --------------------------------------------------------------------------- jobs of one segment at once


def _job(d, root, name, cfg, code="c1"):
    """A retrieve job of ``name`` in segment 1 (a variant of ``cfg``'s own ``variants`` too)."""
    v = variants.resolve(name, "s", cfg["variants"])
    return write_segment_shared(v, cfg, "ds", 1, 2, _inputs(d, v.recipe.seq, v.recipe.backend == "fts"),
                                _outputs(root, name), code, log=QUIET)


class _Threads:
    """Jobs run in threads (each its own lock handle, as separate processes
    have), their results or errors kept by name."""

    def __init__(self):
        import threading

        self.threads, self.results, self.errors, self.names = [], {}, {}, threading.local()

    def start(self, name, fn):
        import threading

        def body():
            self.names.job = name
            try:
                self.results[name] = fn()
            except BaseException as e:  # noqa: BLE001 - the test reports it
                self.errors[name] = e

        t = threading.Thread(target=body, daemon=True)
        self.threads.append(t)
        t.start()

    def current(self):
        return getattr(self.names, "job", None)

    def join(self, timeout=120):
        for t in self.threads:
            t.join(timeout)
            assert not t.is_alive(), "a job did not finish"
        assert not self.errors, self.errors


def test_cleanup_beside_another_groups_writes(tables, tmp_path, monkeypatch):
    """The race made to happen: one job cleans up while another group's job of
    the same segment has a table under its temporary name, and moves it into
    place between the clean-up's listing and what it does with the files. The
    clean-up lists only its own group's folder, so the other job's files are
    never in its listing; both jobs finish, and every entry serves its job."""
    import threading

    from memobench.core import atomic
    from memobench.retrieval import sharing as shared_retrieval

    cfg = _config(["v0.8.0", "v0.5.0", "exp4-A0-base", "exp4-A1+5"])
    jobs = _Threads()
    writing, listed, moved = threading.Event(), threading.Event(), threading.Event()
    commit, listing = atomic.commit, shared_retrieval._listing
    seen = {}

    def slow_commit(tmp, final):
        # the cjkr job's first cached table: held under its temporary name until the other job has listed
        first = jobs.current() == "cjkr" and "cache" in tmp.parts and not writing.is_set()
        if first:
            writing.set()
            assert listed.wait(60)
        commit(tmp, final)
        if first:
            moved.set()

    def paused_listing(folder):
        if jobs.current() != "ascii":
            return listing(folder)
        assert writing.wait(60)  # the other job's temporary file is there now
        seen["ascii"] = listing(folder)
        listed.set()
        assert moved.wait(60)  # and moved into place before this job goes on
        return seen["ascii"]

    monkeypatch.setattr(atomic, "commit", slow_commit)
    monkeypatch.setattr(shared_retrieval, "_listing", paused_listing)
    jobs.start("ascii", lambda: _job(tables, tmp_path, "v0.8.0", cfg))
    jobs.start("cjkr", lambda: _job(tables, tmp_path, "exp4-A0-base", cfg))
    jobs.join()
    assert moved.is_set() and seen["ascii"]
    assert all(p.parent == _entries(tmp_path) for p in seen["ascii"])
    assert jobs.results["ascii"]["computed"] == ["v0.8.0", "v0.5.0"]
    assert jobs.results["cjkr"]["computed"] == ["exp4-A0-base", "exp4-A1+5"]
    monkeypatch.undo()
    for name in ("v0.5.0", "exp4-A1+5"):
        assert _job(tables, tmp_path, name, cfg)["reused"] is True, name
        alone = _alone(tables, tmp_path, name)
        for k in KINDS:
            assert pq.read_table(_outputs(tmp_path, name)[k]).equals(alone[k]), (name, k)


def test_jobs_of_one_group_take_turns(tables, tmp_path, monkeypatch):
    """A sibling's job waits while a job of its group cleans up (it holds the
    group's lock), then copies its entry; a file that vanished between the
    listing and the clean-up's look at it is no error."""
    import sys
    import threading
    import time

    from memobench.core import atomic
    from memobench.retrieval import sharing as shared_retrieval

    cfg = _config(["v0.8.0", "v0.5.0"])
    jobs = _Threads()
    listed, release = threading.Event(), threading.Event()
    listing = shared_retrieval._listing

    def paused_listing(folder):
        files = listing(folder)
        if jobs.current() == "leader":
            stray = folder / "0123456789abcdef0123456789abcdef.rankings.parquet"
            stray.write_bytes(b"left by a killed job")
            files.append(stray)
            stray.unlink()  # gone before the clean-up looks at it
            listed.set()
            assert release.wait(60)
        return files

    monkeypatch.setattr(shared_retrieval, "_listing", paused_listing)
    jobs.start("leader", lambda: _job(tables, tmp_path, "v0.8.0", cfg))
    assert listed.wait(120)
    jobs.start("sibling", lambda: _job(tables, tmp_path, "v0.5.0", cfg))
    # waiting for the lock: seen blocked in its flock (the thread's own frame), and still there a while later
    waiting, sibling = atomic.locked.__wrapped__.__code__, jobs.threads[-1]
    blocked = lambda: getattr(sys._current_frames().get(sibling.ident), "f_code", None) is waiting  # noqa: E731
    deadline = time.monotonic() + 60
    while not blocked():
        assert "sibling" not in jobs.results and time.monotonic() < deadline
        time.sleep(0.01)
    time.sleep(0.2)
    assert "sibling" not in jobs.results and blocked()
    release.set()
    jobs.join()
    assert jobs.results["leader"]["computed"] == ["v0.8.0", "v0.5.0"]
    assert jobs.results["sibling"] == {"reused": True, "computed": [], "rejected": None}


def test_an_entry_still_needed_is_kept_however_old(tables, tmp_path):
    """Inputs rewritten with the same content (as --forceall does) are newer
    than the entries ranked before them; a job reading them cleans up, and an
    entry whose own inputs are unchanged stays for the job that copies it:
    staleness is decided by the stamps an entry was ranked from, not by age.
    An entry ranked from an input since replaced is removed."""
    from memobench.retrieval.sharing import _entry

    names = ["v0.8.0", "v0.5.0", "ascii-index", "exp4-A0-base", "exp4-A1+5"]
    cfg = {**_config(names), "variants": {"ascii-index": {"base": "v0.8.0", "recipe": {"backend": "index"}}}}
    def cached():
        return {p.name.split(".")[0] for p in (tmp_path / "ds" / "cache" / "seg1").rglob("*.parquet")}

    assert _job(tables, tmp_path, "v0.8.0", cfg)["computed"] == ["v0.8.0", "v0.5.0", "ascii-index"]
    waiting = cached()
    assert len(waiting) == 2
    newer = {}
    try:
        for seq in ("cjkr", "fts5"):  # rewritten: newer than every entry, same content
            p = tables / f"tokens_{seq}.arrow"
            st = os.stat(p)
            newer[p] = st
            os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 100 * 10**9))
        # another group's job, whose newest input is newer than the entries
        assert _job(tables, tmp_path, "exp4-A0-base", cfg)["computed"] == ["exp4-A0-base", "exp4-A1+5"]
        assert waiting < cached()
        # this group's leader again (its FTS input changed): ascii-index reads no FTS
        # input, so its entry is still the one its job needs; v0.5.0's is ranked again
        write_plan(tmp_path, [("ds", n, 1) for n in names], complete=True)
        assert _job(tables, tmp_path, "v0.8.0", cfg)["computed"] == ["v0.8.0", "v0.5.0"]
        now = {p.name.split(".")[0] for p in _entries(tmp_path).glob("*.parquet")}
        assert len(now) == 2 and len(now & waiting) == 1  # v0.5.0's old entry is gone, ascii-index's kept
        [kept] = now & waiting
        assert all(p.exists() for p in _entry(_entries(tmp_path), kept).values())
        for name in ("ascii-index", "v0.5.0", "exp4-A1+5"):
            assert _job(tables, tmp_path, name, cfg)["reused"] is True, name
    finally:
        for p, st in newer.items():
            os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert not list(_entries(tmp_path).iterdir())


def test_an_entry_gone_before_its_job_is_ranked_by_the_job(tables, tmp_path):
    """The whole entry removed (the cache folder deleted, or a clean-up) before
    the sibling's job runs: the job ranks its own lists, the true ones."""
    import shutil

    cfg = _config(["v0.8.0", "v0.5.0"])
    assert _run(tables, tmp_path, "v0.8.0", cfg)["computed"] == ["v0.8.0", "v0.5.0"]
    shutil.rmtree(_entries(tmp_path))
    assert _run(tables, tmp_path, "v0.5.0", cfg) == {"reused": False, "computed": ["v0.5.0"], "rejected": None}
    alone = _alone(tables, tmp_path, "v0.5.0")
    for k in KINDS:
        assert pq.read_table(_outputs(tmp_path, "v0.5.0")[k]).equals(alone[k]), k


def test_a_sibling_s_timings_come_with_its_lists(tables, tmp_path):
    """Reference retrievers ranked in a sibling's job are timed per call there; the sibling's own job
    copies its timings table from the sealed entry with its lists (a timings table is a sealed part)."""
    from memobench.retrieval.timings import MEASURES, read_meta

    names = ["bm25s", "bm25-official"]
    cfg = _config(names)

    def run(name):
        v = variants.resolve(name, "s")
        outs = {**_outputs(tmp_path, name), "timings": str(tmp_path / f"{name}.timings.parquet")}
        return write_segment_shared(v, cfg, "ds", 1, 2, _inputs(tables, fts=False), outs, "c1", log=QUIET)

    assert run("bm25s")["computed"] == names
    assert any(p.name.endswith(".timings.parquet") for p in (tmp_path / "ds" / "cache" / "seg1").rglob("*"))
    assert run("bm25-official") == {"reused": True, "computed": [], "rejected": None}
    for name in names:
        path = tmp_path / f"{name}.timings.parquet"
        meta = read_meta(path)
        assert meta["variant"] == name and meta["measures"] == MEASURES["reference"]
        evaluated = sum(r["status"] == "evaluated" for r in pq.read_table(_outputs(tmp_path, name)["outcomes"]).to_pylist())
        assert pq.read_table(path).num_rows == evaluated > 0
