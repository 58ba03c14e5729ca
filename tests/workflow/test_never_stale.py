"""No cached or stale result is ever served, through real Snakemake runs.

* A run killed (SIGKILL, its whole process group) after the first retrieve job
  of a segment has left its sibling's tables in the cache, and before the
  siblings' jobs copy them; the two entries are then damaged (one truncated,
  one rewritten as a valid table with every list reversed). The documented
  recovery (`--unlock`, then `--rerun-incomplete`) ends byte-identical to an
  uninterrupted run: neither entry is copied. (An entry without its seal, and
  the other damages, are tested on the function in tests/unit/retrieval/test_sharing.py.)
* Every result users rely on, deleted, is made again by the default command,
  byte-identical; so is a variant's whole folder, and the report is remade.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import REPO, data_dir, snakemake, snakemake_command, write_config
from memobench.tools.generate.longmemeval import write_longmemeval
from tests.workflow.test_interrupts import digest_tree, rerun_after_crash
from tests.unit.retrieval.test_sharing import reverse_lists

# siblings (one tokenizer): the first job of a segment ranks the other two; "mine" is an
# experiment against v0.8.0, so the falsifier runs too
VARIANTS = ["v0.8.0", "v0.5.0", "mine"]


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    path = tmp_path_factory.mktemp("raw") / "g.json"
    write_longmemeval(path, n_questions=24, sessions_per_question=12, seed=4, spice=True)
    return path


def _config(root: Path, raw: Path) -> Path:
    data = data_dir(root, raw)
    ds = {"format": "longmemeval", "family": "s", "file": raw.name, "bytes": raw.stat().st_size, "urls": [],
          "segments": 2, "analyze": True, "variants": VARIANTS}
    return write_config(root / "cfg.yaml", data_dir=str(data), run=["g"], datasets={"g": ds},
                        variants={"mine": {"base": "v0.8.0", "recipe": {"weights": "len"}}},
                        exports={"retrieval_log": ["g/v0.5.0", "g/mine"]})


def _same(ours: dict, reference: dict) -> None:
    # the receipts, verified.json, manifest and summaries name the raw file's path, which differs per test
    named = ("raw.json", "verified.json", "manifest.json", "summary.json")
    differing = sorted(k for k in reference if ours.get(k) != reference[k] and not k.endswith(named))
    assert set(ours) == set(reference) and not differing, (set(ours) ^ set(reference), differing)


@pytest.fixture(scope="module")
def built(tmp_path_factory, raw):
    """An uninterrupted run (the bytes every other run must end with). The
    deletion tests put back what they delete, so they share it."""
    root = tmp_path_factory.mktemp("built")
    cfg = _config(root, raw)
    work = root / "work"
    work.mkdir()
    snakemake(work, "--cores", "2", configfile=cfg)
    return work, cfg, digest_tree(work / "results")


# --------------------------------------------------------------------------- kill between the pass and the copies


def _stop_after_first_sibling_pass(work: Path, cfg: Path) -> Path:
    """Start the run on one core, wait for the first sibling entry, take the
    segment's lock as soon as the job that wrote it lets it go (so no sibling
    job can copy the entry), and SIGKILL the run's whole process group.
    Returns the folder of the entry's group (results/g/cache/{segment}/{group})."""
    cmd = [*snakemake_command(), "-s", str(REPO / "Snakefile"), "-d", str(work),
           "--configfile", str(cfg), "--cores", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    cache_root = work / "results" / "g" / "cache"
    deadline = time.monotonic() + 300
    try:
        while True:
            # an entry's tables are there: the job that writes them holds the segment's lock
            # until it has written them all and sealed them
            entries = sorted(cache_root.glob("seg*/*/*.deep.parquet")) if cache_root.is_dir() else []
            if entries:
                break
            if proc.poll() is not None:
                pytest.fail("the run finished before any sibling entry was written")
            if time.monotonic() > deadline:
                pytest.fail("no sibling entry was ever written")
            time.sleep(0.01)
        group = entries[0].parent
        seg = group.parent
        with contextlib.ExitStack() as locks:
            # every group's lock of the segment: after the job that wrote the entry, before any other
            for path in sorted(cache_root.glob(f"{seg.name}.*.lock")):
                fcntl.flock(locks.enter_context(open(path, "a")), fcntl.LOCK_EX)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return group


def test_kill_between_sibling_pass_and_copies_with_damaged_entries(tmp_path, raw, built):
    """Both siblings' entries damaged after the kill: one truncated, one
    rewritten as a valid table with each list reversed."""
    cfg = _config(tmp_path, raw)
    work = tmp_path / "work"
    work.mkdir()
    cache = _stop_after_first_sibling_pass(work, cfg)
    seg = cache.parent.name
    keys = sorted(p.name.split(".", 1)[0] for p in cache.glob("*.deep.parquet"))
    # the entries wait for the jobs of the variants whose segment outputs are still missing
    waiting = [v for v in VARIANTS if not (work / "results" / "g" / v / "segments" / f"{seg}.parquet").exists()]
    assert len(keys) == len(waiting) == 2, (keys, waiting)
    for key in keys:
        assert all((cache / f"{key}.{kind}.parquet").exists() for kind in ("rankings", "outcomes", "deep"))
    truncated, reversed_ = (cache / f"{k}.rankings.parquet" for k in keys)
    truncated.write_bytes(truncated.read_bytes()[:1000])
    reverse_lists(reversed_)
    rerun_after_crash(work, cfg)
    _same(digest_tree(work / "results"), built[2])
    for v in waiting:
        log = (work / "results" / "logs" / "retrieve" / "g" / v / f"{seg}.log").read_text()
        assert "is not used" in log and "ranking this variant's segment itself" in log, (v, log)
        assert "copied from" not in log, (v, log)
    assert not list(cache.glob("*.parquet")) and not list(cache.glob("*.sha256.json"))


# --------------------------------------------------------------------------- deleted results are made again

INTERNAL = {"logs", "cache", "normalized", "tokens", "context_tokens", "exports", "embeddings"}


def _group(rel: str) -> int | None:
    """Deletion groups: no file of a group is read by the job that makes
    another file of the same group, so each file deleted with its group is made
    again only because it is itself a target, not because a job reading it runs."""
    parts = rel.split("/")
    name = parts[-1]
    if name in ("report.md", "report.html", "hitk.png", "forest.png", "heatmap.png", "frontier.png",
                "retrievallog.jsonl"):
        return 3  # the report reads nearly everything; a retrieval log, the merged deep list
    if ("segments" in parts or "analyze" in parts
            or name in ("qrels.trec", "manifest.json", "falsifier.json", "falsifier.md")):
        return 1  # made from the normalized tables, verified.json, or (falsify) the merged metrics
    if name == "stats.json":
        return 4  # made from the segments and (token budgets) the merged outcomes and official.json
    if name == "datasets.json" or (len(parts) > 1 and parts[-2] in VARIANTS):
        return 2  # made from the segments (datasets.json: from the report and the receipts)
    return None


def _results(work: Path) -> list[str]:
    res = work / "results"
    return sorted(str(p.relative_to(res)) for p in res.rglob("*")
                  if p.is_file() and not INTERNAL & set(p.relative_to(res).parts)
                  and p.name not in ("raw.json", "verified.json"))


def test_each_deleted_result_is_made_again(built):
    work, cfg, _ = built
    res = work / "results"
    before = digest_tree(res)
    files = _results(work)
    groups: dict[int, list[str]] = {}
    for rel in files:
        g = _group(rel)
        assert g is not None, f"{rel}: a result this test does not know; put it in a deletion group"
        groups.setdefault(g, []).append(rel)
    # every kind of result is there (the README's list)
    for want in ("g/v0.5.0/segments/seg2.deep.parquet", "g/v0.5.0/rankings.parquet", "g/v0.5.0/run.trec",
                 "g/v0.5.0/retrievallog.jsonl", "g/v0.5.0/official.json", "g/qrels.trec", "g/stats.json",
                 "g/analyze/analyze.md", "g/falsifier.md", "report.html", "manifest.json", "datasets.json"):
        assert want in files, want
    for g in sorted(groups):
        for rel in groups[g]:
            (res / rel).unlink()
        snakemake(work, "--cores", "2", configfile=cfg)
        missing = [rel for rel in groups[g] if not (res / rel).exists()]
        assert not missing, (g, missing)
        assert digest_tree(res) == before, g
    proc = snakemake(work, "-n", configfile=cfg)
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_removed_variant_folder_and_exports_are_made_again(built):
    """The filed case: rm v0.8.0/run.trec and qrels.trec, rm -r v0.5.0."""
    import shutil

    work, cfg, _ = built
    res = work / "results"
    before = digest_tree(res)
    report_before = (res / "report.md").stat().st_mtime_ns
    (res / "g" / "v0.8.0" / "run.trec").unlink()
    (res / "g" / "qrels.trec").unlink()
    shutil.rmtree(res / "g" / "v0.5.0")
    snakemake(work, "--cores", "2", configfile=cfg)
    assert digest_tree(res) == before
    assert (res / "report.md").stat().st_mtime_ns != report_before  # remade from the rebuilt results
