"""Imported runs through the real workflow: a variant's own exports (run.trec,
retrievallog.jsonl, a JSON of its lists) imported back give the same counts,
official figures and statistics; `memobench score` end to end on LoCoMo;
replacing a run file reruns only its scoring."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO, data_dir, dry_run_jobs, memobench_lines, snakemake, snakemake_command, write_config
from memobench.evaluation import exports
from memobench.retrieval.imported import ABSENT
from memobench.runs.trec import read_id as decode_trec_id
from memobench.reporting.markdown import markdown_report
from memobench.reporting.numbers import percent
from memobench.evaluation.stats import compare, per_question
from memobench.core.tables import read_table

COUNTS = ("items", "questions", "hit@1", "hit@5", "hit@10", "mrr_sum", "skipped", "by_type", "unrecorded",
          "random", "mean_pool_size", "pool_at_most")


def json_run(variant_dir: Path, out: Path) -> Path:
    """A JSON run of a variant's deep lists, an empty list for each evaluated
    question it gave none; a repeated question id is a repeated key (its n-th
    key is its n-th question)."""
    outcomes = read_table(variant_dir / "outcomes.parquet").sort_by("q_index").to_pylist()
    lists: dict[int, list[str]] = {}
    for r in read_table(variant_dir / "deep.parquet").sort_by([("q_index", "ascending"),
                                                               ("rank", "ascending")]).to_pylist():
        lists.setdefault(r["q_index"], []).append(r["session_id"])
    pairs = [(q["question_id"], lists.get(q["q_index"], [])) for q in outcomes if q["status"] == "evaluated"]
    out.write_text("{\n" + ",\n".join(f" {json.dumps(q)}: {json.dumps(s)}" for q, s in pairs) + "\n}\n",
                   encoding="utf-8")
    return out


def results(work: Path, ds: str, v: str, name: str = "metrics.json") -> dict:
    return json.loads((work / "results" / ds / v / name).read_text(encoding="utf-8"))


def outcomes(work: Path, ds: str, v: str) -> list[dict]:
    return read_table(work / "results" / ds / v / "outcomes.parquet").sort_by("q_index").to_pylist()


def segment_outcomes(work: Path, ds: str, v: str) -> list[Path]:
    return sorted((work / "results" / ds / v / "segments").glob("seg*.outcomes.parquet"))


def assert_same_numbers(work, ds, source, imported, absent=0):
    """metrics.json counts, official.json and the paired statistics of an
    imported run equal its source's (``absent``: evaluated questions the file
    could not hold, counted as misses instead of empty lists)."""
    a, b = results(work, ds, source), results(work, ds, imported)
    assert {k: a[k] for k in COUNTS} == {k: b[k] for k in COUNTS}, imported
    assert a["segments"] == b["segments"]
    assert b["counted_as_miss"] == ({**a["counted_as_miss"], ABSENT: absent} if absent else a["counted_as_miss"])
    assert b["run"]["absent"] == absent and b["empty_lists"] == a["empty_lists"]
    assert results(work, ds, source, "official.json")["official"] == results(work, ds, imported,
                                                                             "official.json")["official"]
    stats = json.loads((work / "results" / ds / "stats.json").read_text(encoding="utf-8"))
    rows = {(c["variant"], c["baseline"]): c for c in stats["comparisons"]}
    theirs = rows[(source, "v0.8.0")]
    ours = rows[(imported, "v0.8.0")]
    for k in ("n", "only_variant", "only_baseline"):
        assert ours[k] == theirs[k]
    for m, mm in theirs["metrics"].items():
        assert {k: ours["metrics"][m][k] for k in ("n", "variant", "baseline", "diff", "saturated")} == \
               {k: mm[k] for k in ("n", "variant", "baseline", "diff", "saturated")}
    # the same per-question values: under the source's name, the very same test
    again = compare(source, "v0.8.0", per_question(segment_outcomes(work, ds, imported)),
                    per_question(segment_outcomes(work, ds, "v0.8.0")), ds)
    # the stats stage adds what needs the dataset's other comparisons (the Holm-adjusted
    # p over its family, the per-type differences): compared is what compare() computes
    def own(c):
        return {**{k: v for k, v in c.items() if k not in ("against", "by_type")},
                "metrics": {m: {x: y for x, y in mm.items() if x != "p_holm"} for m, mm in c["metrics"].items()}}

    assert own(again) == own(theirs)


def first_run(root: Path, data: Path, ds: str, entry: dict, variants: list[str]):
    """The source variants' results in a fresh working directory: (config, work, folder for run files)."""
    cfg = write_config(root / "cfg.yaml", data_dir=str(data), run=[ds], datasets={ds: {**entry, "variants": variants}})
    work, runs = root / "work", root / "runs"
    work.mkdir()
    runs.mkdir()
    # a LongMemEval variant's retrieval log is made where asked: asked for here by its path
    logs = [f"results/{ds}/{v}/retrievallog.jsonl" for v in variants] if entry.get("format") == "longmemeval" else []
    snakemake(work, "--cores", "2", *[f"results/{ds}/{v}/metrics.json" for v in variants], *logs, configfile=cfg)
    return cfg, work, runs


# --------------------------------------------------------------------------- LoCoMo


@pytest.fixture(scope="module")
def locomo(tmp_path_factory, locomo_path):
    """v0.8.0 and v0.5.0 on the real file, then v0.5.0's own run.trec and a
    JSON of its lists imported back (and a third copy for the rerun test)."""
    root = tmp_path_factory.mktemp("imported_locomo")
    data = data_dir(root, locomo_path)
    cfg, work, runs = first_run(root, data, "locomo10", {}, ["v0.8.0", "v0.5.0"])
    src = work / "results" / "locomo10" / "v0.5.0"
    shutil.copy(src / "run.trec", runs / "v05.trec")
    json_run(src, runs / "v05.json")
    shutil.copy(runs / "v05.json", runs / "again.json")
    cfg2 = write_config(root / "cfg2.yaml", data_dir=str(data), run=["locomo10"],
                        datasets={"locomo10": {"variants": ["v0.8.0", "v0.5.0", "imp-trec", "imp-json", "again"]}},
                        variants={"imp-trec": {"run": {"file": str(runs / "v05.trec"), "format": "trec"},
                                               "against": "v0.5.0"},
                                  "imp-json": {"run": {"file": str(runs / "v05.json"), "format": "json"}},
                                  "again": {"run": {"file": str(runs / "again.json"), "format": "json"}}})
    targets = [f"results/locomo10/{v}/metrics.json" for v in ("v0.8.0", "v0.5.0", "imp-trec", "imp-json", "again")]
    targets.append("results/locomo10/stats.json")
    proc = snakemake(work, "--cores", "2", *targets, configfile=cfg2)
    return {"root": root, "work": work, "cfg": cfg, "cfg2": cfg2, "runs": runs, "targets": targets, "log": proc}


def test_locomo_exports_imported_back_give_the_same_numbers(locomo):
    work = locomo["work"]
    assert "rule retrieve" not in locomo["log"].stdout + locomo["log"].stderr  # read, never ranked
    source = results(work, "locomo10", "v0.5.0")
    assert_same_numbers(work, "locomo10", "v0.5.0", "imp-json")
    # TREC holds no empty list: an evaluated question with none is absent from run.trec
    assert_same_numbers(work, "locomo10", "v0.5.0", "imp-trec", absent=source["empty_lists"])
    stats = json.loads((work / "results" / "locomo10" / "stats.json").read_text())
    against = next(c for c in stats["comparisons"] if (c["variant"], c["baseline"]) == ("imp-trec", "v0.5.0"))
    assert against["against"] == "harness baseline" and against["n"] == source["questions"]
    assert all(m["diff"] == 0 for m in against["metrics"].values())
    m = results(work, "locomo10", "imp-trec")
    assert (m["run"]["format"], m["run"]["file"], m["harness"]) == ("trec", str(locomo["runs"] / "v05.trec"),
                                                                   "imported trec run")
    report = markdown_report([results(work, "locomo10", v) for v in ("v0.5.0", "imp-trec")], [], [])
    assert "| locomo10 | imp-trec (imported run) |" in report
    assert f"absent from the run (counted as misses): {source['empty_lists']}" in report


def test_memobench_score_end_to_end(locomo):
    work, runs = locomo["work"], locomo["runs"]
    before = (work / "results" / "locomo10" / "v0.5.0" / "metrics.json").stat().st_mtime_ns
    def cmd(run, name):
        return [sys.executable, "-m", "memobench.cli", "score", str(run), "--dataset", "locomo10", "--against",
                "v0.5.0", "--name", name, "--configfile", str(locomo["cfg"]), "-d", str(work), "--cores", "2"]

    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run(cmd(runs / "v05.json", "scored"), capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = results(work, "locomo10", "scored")
    assert {k: m[k] for k in COUNTS} == {k: results(work, "locomo10", "imp-json")[k] for k in COUNTS}
    lines = proc.stdout.splitlines()
    ours = next(line for line in lines if line.lstrip().startswith("scored "))
    assert f"n  {m['questions']}" in ours and f"hit@1 {100 * m['hit@1'] / m['questions']:.1f}%" in ours
    assert f"mrr {m['mrr']:.4f}" in ours
    assert any(line.lstrip().startswith("v0.5.0 ") and "(published: hit@1 53.2" in line for line in lines)
    assert "absent from the run (counted as misses): 0" in proc.stdout
    assert "data file: locomo10.json, 2,805,274 bytes: LoCoMo10 (snap-research/LoCoMo locomo10.json), by its" \
        in proc.stdout  # the real file, whichever way the config let it be identified
    off = results(work, "locomo10", "scored", "official.json")["official"]
    assert f"recall_any@5 {percent(off['recall_any@5'])}" in proc.stdout  # in percent, as the report prints it
    assert any(line.lstrip().startswith("hit@1  +0.0 [+0.0, +0.0]  p: randomization 1.0000; McNemar 1.0000")
               for line in lines)
    assert (work / "results" / ".score" / "locomo10" / "scored.yaml").exists()
    # the compared variant's cached results were reused, and a second call does nothing
    assert (work / "results" / "locomo10" / "v0.5.0" / "metrics.json").stat().st_mtime_ns == before
    mtime = (work / "results" / "locomo10" / "scored" / "metrics.json").stat().st_mtime_ns
    again = subprocess.run(cmd(runs / "v05.json", "scored"), capture_output=True, text=True, env=env, timeout=600)
    assert again.returncode == 0 and again.stdout == proc.stdout
    assert (work / "results" / "locomo10" / "scored" / "metrics.json").stat().st_mtime_ns == mtime
    # a bad file is one line
    bad = runs / "bad.json"
    bad.write_text('{"conv-26#0": ["session_1", "no-such-session"]}', encoding="utf-8")
    proc = subprocess.run(cmd(bad, "bad"), capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 1
    said = memobench_lines(proc.stderr)
    assert said[0] == (f"memobench: {bad}: line 1: session 'no-such-session' is not in the haystack of question "
                       f"'conv-26#0'; rank only the question's own haystack sessions (its haystack_session_ids), "
                       f"by their ids")


def test_memobench_score_never_writes_over_another_variants_results(locomo):
    """A file named after a variant the user's overlay configures (an imported
    run of its own) is refused, as is a second file of the same name;
    re-scoring the same file under its name runs nothing."""
    work, runs = locomo["work"], locomo["runs"]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}

    def score(run, *args, configfile=locomo["cfg"]):
        return subprocess.run([sys.executable, "-m", "memobench.cli", "score", str(run), "--dataset", "locomo10",
                               "--against", "v0.5.0", "--configfile", str(configfile), "-d", str(work), *args],
                              capture_output=True, text=True, env=env, timeout=600)

    def ours(proc):
        return memobench_lines(proc.stderr)

    other = runs / "other"
    other.mkdir()
    theirs = shutil.copy(runs / "v05.json", other / "imp-trec.json")
    configured = work / "results" / "locomo10" / "imp-trec"
    before = {p.name: p.stat().st_mtime_ns for p in configured.rglob("*") if p.is_file()}
    proc = score(theirs, configfile=locomo["cfg2"])
    assert proc.returncode == 1 and ours(proc) == [
        f"memobench: {theirs}: the variant name 'imp-trec' is taken (a built-in or configured variant); give "
        f"another with --name"], proc.stderr[-3000:]
    assert {p.name: p.stat().st_mtime_ns for p in configured.rglob("*") if p.is_file()} == before
    # x.json, then x.trec: the second would replace the first's results
    first, second = shutil.copy(runs / "v05.json", runs / "x.json"), shutil.copy(runs / "v05.trec", runs / "x.trec")
    assert score(first).returncode == 0
    made = (work / "results" / "locomo10" / "x" / "metrics.json").stat().st_mtime_ns
    proc = score(second)
    assert proc.returncode == 1 and ours(proc) == [
        f"memobench: {second}: results/locomo10/x/ holds the results of {first}; give this run another name with "
        f"--name"], proc.stderr[-3000:]
    assert results(work, "locomo10", "x")["run"]["file"] == str(first)
    again = score(first)
    assert again.returncode == 0 and "rule import_run" not in again.stdout + again.stderr
    assert (work / "results" / "locomo10" / "x" / "metrics.json").stat().st_mtime_ns == made
    assert score(second, "--name", "x-trec").returncode == 0
    assert results(work, "locomo10", "x-trec")["run"]["file"] == str(second)


def test_replacing_a_run_file_reruns_only_its_scoring(locomo):
    work, cfg2, runs = locomo["work"], locomo["cfg2"], locomo["runs"]
    assert dry_run_jobs(work, *locomo["targets"], configfile=cfg2) == {}
    # the same bytes written again (a new mtime, a new inode): nothing to redo
    same = runs / "again.json.same"
    same.write_bytes((runs / "again.json").read_bytes())
    os.replace(same, runs / "again.json")
    assert dry_run_jobs(work, *locomo["targets"], configfile=cfg2) == {}
    lists = json.loads((runs / "again.json").read_text())
    dropped = next(iter(lists))
    del lists[dropped]
    new = runs / "again.json.new"
    new.write_text(json.dumps(lists), encoding="utf-8")
    old = (runs / "again.json").stat()
    os.utime(new, ns=(old.st_atime_ns, old.st_mtime_ns - 10**9))  # older than the outputs: the stamp still sees it
    os.replace(new, runs / "again.json")
    assert dry_run_jobs(work, *locomo["targets"], configfile=cfg2) == {"record_run": 1, "import_run": 1, "merge": 1,
                                                                     "stats": 1}
    snakemake(work, "--cores", "2", *locomo["targets"], configfile=cfg2)
    m = results(work, "locomo10", "again")
    assert m["counted_as_miss"] == {ABSENT: 1} and m["run"]["absent"] == 1
    assert m["questions"] == results(work, "locomo10", "v0.5.0")["questions"]  # the denominator keeps it


def test_a_missing_run_file_is_one_line_before_any_job(locomo):
    root, work = locomo["root"], locomo["work"]
    cfg = write_config(root / "missing.yaml", datasets={"locomo10": {"variants": ["v0.8.0", "gone"]}},
                       variants={"gone": {"run": {"file": "no/such.trec", "format": "trec"}}})
    proc = subprocess.run([*snakemake_command(), "results/locomo10/gone/metrics.json", "-n", "-s",
                           str(REPO / "Snakefile"), "-d", str(work), "--configfile", str(locomo["cfg"]), str(cfg)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1
    said = memobench_lines((proc.stdout + proc.stderr))
    assert said == [f"memobench: config: variants.gone.run.file: no/such.trec: no such file (relative paths start "
                    f"from the working directory, {work}); give the run file's path"]


# --------------------------------------------------------------------------- a generated LongMemEval file


@pytest.fixture(scope="module")
def lme(tmp_path_factory):
    """v0.8.0 and v0.8.0-index on a generated file with the generator's edge
    cases (a repeated question id, renamed noans sessions) in 2 segments, then
    v0.8.0-index's run.trec, retrieval log and a JSON of its lists imported back."""
    root = tmp_path_factory.mktemp("imported_lme")
    data = root / "data"
    data.mkdir()
    raw = data / "lme.json"
    subprocess.run([sys.executable, "-m", "memobench.tools.generate", "longmemeval", "--out", str(raw), "--questions",
                    "30", "--sessions", "8", "--seed", "7", "--spice", "--words", "4", "20", "--turns", "2", "6",
                    "--quiet"], check=True, capture_output=True)
    ds = {"format": "longmemeval", "family": "s", "file": "lme.json", "bytes": raw.stat().st_size, "segments": 2}
    _, work, runs = first_run(root, data, "lme", ds, ["v0.8.0", "v0.8.0-index"])
    src = work / "results" / "lme" / "v0.8.0-index"
    shutil.copy(src / "run.trec", runs / "idx.trec")
    shutil.copy(src / "retrievallog.jsonl", runs / "idx.jsonl")
    json_run(src, runs / "idx.json")
    names = ["v0.8.0", "v0.8.0-index", "imp-trec", "imp-log", "imp-json"]
    cfg2 = write_config(root / "cfg2.yaml", data_dir=str(data), run=["lme"],
                        datasets={"lme": {**ds, "variants": names}},
                        variants={"imp-trec": {"run": {"file": str(runs / "idx.trec"), "format": "trec"}},
                                  "imp-log": {"run": {"file": str(runs / "idx.jsonl"), "format": "retrievallog"}},
                                  "imp-json": {"run": {"file": str(runs / "idx.json"), "format": "json"}}})
    snakemake(work, "--cores", "2", *[f"results/lme/{v}/metrics.json" for v in names], "results/lme/stats.json",
              "results/lme/imp-log/retrievallog.jsonl", configfile=cfg2)
    return {"work": work, "runs": runs, "root": root, "data": data, "ds": ds}


def test_lme_retrieval_log_and_json_imported_back_give_the_same_numbers(lme):
    work = lme["work"]
    assert "noans" in (lme["runs"] / "idx.jsonl").read_text(encoding="utf-8")  # scoring ids mapped back
    assert_same_numbers(work, "lme", "v0.8.0-index", "imp-log")
    assert_same_numbers(work, "lme", "v0.8.0-index", "imp-json")
    assert (work / "results" / "lme" / "imp-log" / "retrievallog.jsonl").read_bytes() == \
           (work / "results" / "lme" / "v0.8.0-index" / "retrievallog.jsonl").read_bytes()


def test_lme_trec_imported_back(lme):
    """Every question run.trec holds scores as its source did; the others (an
    empty list, and a repeated question id where the exports write it once)
    are absent: counted misses."""
    work = lme["work"]
    held = {decode_trec_id(line.split()[0]) for line in (lme["runs"] / "idx.trec").read_text().splitlines()}
    seen: dict[str, int] = {}
    source, ours = outcomes(work, "lme", "v0.8.0-index"), outcomes(work, "lme", "imp-trec")
    absent = 0
    for a, b in zip(source, ours):
        n = seen[a["question_id"]] = seen.get(a["question_id"], 0) + 1
        if a["status"] != "evaluated":
            assert (b["status"], b["reason"]) == (a["status"], a["reason"])
        elif (a["question_id"], n) in held:
            assert (b["status"], b["reason"], b["gold_rank"]) == ("evaluated", None, a["gold_rank"])
        else:
            assert (b["status"], b["reason"], b["gold_rank"]) == ("evaluated", ABSENT, 0)
            absent += 1
    empty = results(work, "lme", "v0.8.0-index")["empty_lists"]
    assert absent == empty  # runs.trec writes a repeated id's n-th question as qid%#n
    if absent == empty:
        assert_same_numbers(work, "lme", "v0.8.0-index", "imp-trec", absent=absent)


def test_a_run_file_replaced_between_two_segments_is_one_line_never_a_mixed_result(lme):
    """Segment 1 read the file, then it was replaced in place (same size,
    mtime and inode: what a segment job that starts after the replacement
    sees, as in one run) before segment 2 read it: segment 2 fails in one
    line, nothing is merged; once the file is recorded again, every segment
    reads the new file and the numbers are a fresh import's of it."""
    work, runs = lme["work"], lme["runs"]
    pairs = json.loads((runs / "idx.json").read_text(encoding="utf-8"), object_pairs_hook=list)  # ids repeat

    def text(lists):
        return "{" + ", ".join(f"{json.dumps(q)}: {json.dumps(ids)}" for q, ids in lists) + "}"

    old_text = text(pairs)
    swap = runs / "swap.json"
    swap.write_text(old_text, encoding="utf-8")
    # the same bytes in another order: each list reversed (another run, same size)
    new_text = text([(q, ids[::-1]) for q, ids in pairs])
    assert len(new_text) == swap.stat().st_size and new_text != swap.read_text(encoding="utf-8")
    fresh = runs / "fresh.json"
    fresh.write_text(new_text, encoding="utf-8")
    names = ["v0.8.0", "swap", "fresh"]
    cfg = write_config(lme["root"] / "swap.yaml", data_dir=str(lme["data"]), run=["lme"],
                       datasets={"lme": {**lme["ds"], "variants": names}},
                       variants={"swap": {"run": {"file": str(swap), "format": "json"}},
                                 "fresh": {"run": {"file": str(fresh), "format": "json"}}})
    snakemake(work, "--cores", "1", "results/lme/swap/segments/seg1.outcomes.parquet", configfile=cfg)
    st = swap.stat()
    with open(swap, "r+b") as f:  # in place: the inode stays
        f.write(new_text.encode())
    os.utime(swap, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (swap.stat().st_size, swap.stat().st_ino) == (st.st_size, st.st_ino)
    # a run whose plan was made before the replacement: its record's param (the file's sha256 when the DAG was
    # built) is not compared again (--rerun-triggers without params), as in one run whose segment 2 starts later
    proc = snakemake(work, "--cores", "1", "--rerun-triggers=mtime", "results/lme/swap/metrics.json",
                     configfile=cfg, check=False)
    ours = memobench_lines(proc.stderr)
    new_sha = hashlib.sha256(new_text.encode()).hexdigest()
    old_sha = hashlib.sha256(old_text.encode()).hexdigest()
    assert proc.returncode == 1 and ours == [
        f"memobench: {swap}: its sha256 is {new_sha}, not the {old_sha} recorded in "
        f"results/lme/swap/segments/run-file.json before the run's segments read it: the file changed while it was "
        f"scored; rerun to score it as it is now"], proc.stderr[-3000:]
    assert not (work / "results" / "lme" / "swap" / "metrics.json").exists()
    os.utime(swap)  # a replacement by any ordinary means gives the file a new mtime: it is recorded again
    snakemake(work, "--cores", "1", "results/lme/swap/metrics.json", "results/lme/fresh/metrics.json",
              configfile=cfg)
    m = results(work, "lme", "swap")
    assert m["run"]["sha256"] == new_sha
    assert {k: m[k] for k in COUNTS} == {k: results(work, "lme", "fresh")[k] for k in COUNTS}
    assert results(work, "lme", "swap", "official.json")["official"] == \
        results(work, "lme", "fresh", "official.json")["official"]
