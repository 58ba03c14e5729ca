"""Benchmark: the pipeline against the original harnesses, another checkout
or a naive baseline, on generated files.

    python -m memobench.tools.benchmark --checkout . [--work bench_work] [--scales all,mshape,s,m,scaling,shared]
                                  [--original BENCH_DIR [--run-harness SCRIPT]] [--baseline OTHER_CHECKOUT]
                                  [--naive NAIVE_PY] [--python OTHER_ENV_PYTHON ...]

For each scale it generates a LongMemEval-format file (cached in ``--work``)
and runs the workflow on it with ``snakemake --cores 2``. CPU is the summed
user and system time of every process the benchmark waited for (Snakemake and
all its jobs, or a harness's node process): ``getrusage(RUSAGE_CHILDREN)``
before and after.

``all`` runs a file of 1,986 questions of ~28 sessions (LoCoMo vocabulary
with ``--vocab``, ~190 MB; ``--all-questions`` makes it smaller, at the same
bytes per question) with every variant of the eight original S harnesses (33)
plus analyze, end to end, cold; then a retrieval rerun of one variant after an
engine edit (in a scratch copy of the checkout, ``engine.py`` gains one
statement); then one variant cold, end to end, for ``v0.8.0`` and for
``v0.8.0-index``.

``mshape`` runs an M-shaped file (``--mshape-questions`` 120 questions of
``--mshape-sessions`` ~500 sessions, M's bytes per session or ``--mshape-mb`` in all, 5 segments) with
the M family's ``v0.8.0`` and ``v0.8.0-index``, end to end, cold; then
``v0.8.0-index`` alone.

``--original BENCH_DIR`` (the original project's ``bench/`` folder) runs the
original harnesses on the same generated files in the same session, through
its run-harness script (``--run-harness``; by default ``run-harness`` next to
the bench folder), and prints the ratios: for ``all``, the eight harnesses
run, exp6, exp, exp2, exp3, exp4, exp5 and analyze in sequence against all 33
variants plus analyze, run.cjs against ``v0.8.0`` alone and exp6.cjs against
``v0.8.0-index`` alone; for ``mshape``, run-m.cjs and exp6-m.cjs over the five
segments (``M_START``/``M_LIMIT``, the pipeline's segment bounds), both
against the pair and exp6-m.cjs against ``v0.8.0-index`` alone. Their output goes to ``--work``/original/, never compared
here (the exactness tests compare lists). With ``--baseline`` (another
checkout, e.g. ``git worktree add /tmp/base <commit>``) each ``all`` case
also runs there, in the same session, and the table gives the ratios. With
``--python`` (another environment's interpreter, repeatable) the ``all`` and
``mshape`` cases also run with that environment's Snakemake, one after the
other in the same session; the cases run beside the originals end in one
table, the originals beside the pipeline in every environment.

``s`` (500 questions x ~50 sessions, ~280 MB) and ``m`` (500 x ~500,
~2.7 GB): variants v0.8.0 and v0.8.0-index, Snakemake's per-job benchmark
files summed per stage (wall, CPU, peak RSS) and a retrieval-only rerun of
one variant; with ``--naive FILE`` (a naive reference such as a checkout's
``tests/oracles/naive.py``, loaded from that path: the file parsed whole, an FTS
table and every event's tokens rebuilt for every question and variant) also
that baseline on the same file (on M its first 100-question segment,
extrapolated). ``scaling``: S-shaped files with 100, 250 and 500 questions
(cost per question). ``shared``: on the 1,986-question file, the retrieval
of every built-in S variant of segment 1 of 2, one process per variant
against all of them in one process sharing their common work.

Every scale's section ends with the normalize job's MB/s (its Snakemake
benchmark file) against a bare ``ijson.items(f, 'item')`` pass of ijson's C
backend over the same file (one extra read of it), with both peak RSS: how
close the stage runs to the streaming parser it is built on.

``stress`` is a load test, not a timing: ``--stress-runs`` (default 20) cold
runs of the ``all`` case (its file, its 33 variants plus analyze), each with
``snakemake --cores`` ``--stress-cores`` (default 4, twice this machine's two
cores) while ``--stress-burners`` processes (default one per core) keep every
core busy beside it. Each run's results (everything under ``results/`` but
the logs and the retrieve stage's internal cache) are compared byte for byte
with the first run's; it prints each run's exit, wall time and differing
files, and a last line with the count of failures and of differing runs. A
failed run's folder is kept (``--work``/stress/failed_{i}) with its
Snakemake output, and so are run 1's and any differing run's; the others are
removed once compared.

``--checkout`` is the workflow (the directory holding the Snakefile and src/)
that is measured; it is an explicit argument, never derived from this file's
location, so a second checkout (``git worktree add /tmp/bench-base main``) can
be measured with the same script.
"""

from __future__ import annotations

import argparse
import csv
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import yaml

from ..core import layout
from .bench_common import (SCALES, VARIANTS, all_file, compile_checkout, generate, harness_variants, log,
                           normalize_vs_ijson)
from .bench_original import (BASELINE, M_HARNESSES, S_HARNESSES, Original, against_originals, environment,
                            environments, run_all_variants, run_mshape)

REPO: Path | None = None  # the measured checkout (--checkout)
# The rules with a benchmark file, in pipeline order; stage_table also lists
# any other it finds (a measured checkout's own rules).
STAGES = ["verify", "normalize", "tokens", "embeddings", "retrieve", "merge", "session_json", "retrievallog",
          "analyze"]


def snakemake(workdir: Path, cfg: Path, *args, checkout: Path | None = None) -> float:
    t = time.monotonic()
    cmd = [sys.executable, "-m", "snakemake", "-s", str((checkout or REPO) / "Snakefile"), "-d", str(workdir),
           "--configfile", str(cfg), "--cores", "2", *args, "--quiet", "all"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"snakemake failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return time.monotonic() - t


def stage_table(workdir: Path) -> dict[str, dict]:
    """Per stage (each folder of Snakemake's benchmark files): summed wall and
    CPU seconds of its jobs, the largest peak RSS."""
    out = {}
    root = workdir / layout.BENCHMARKS
    found = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    for stage in [*STAGES, *(f for f in found if f not in STAGES)]:
        wall = cpu = rss = 0.0
        jobs = 0
        for tsv in sorted((root / stage).rglob("*.tsv")):
            with open(tsv) as f:
                row = next(csv.DictReader(f, delimiter="\t"))
            jobs += 1
            wall += float(row["s"])
            cpu += float(row["cpu_time"]) if row.get("cpu_time") not in (None, "", "NA", "-") else 0.0
            if row.get("max_rss") not in (None, "", "NA", "-"):
                rss = max(rss, float(row["max_rss"]))
        out[stage] = {"jobs": jobs, "wall": wall, "cpu": cpu, "rss": rss}
    return out


SHARED_CODE = """
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from memobench.retrieval import sharing as retrievers
from memobench.core import layout
from memobench.catalog.variants import builtin
root, dataset, names = sys.argv[2], sys.argv[3], sys.argv[4].split(",")
vs = [builtin("s")[n] for n in names]
tokens = {s: layout.path(layout.TOKENS, root=root, dataset=dataset, tokenizer=s)
          for s in {v.recipe.seq for v in vs} | {"fts5"}}
outs = {v.name: {k: f"{sys.argv[5]}/{v.name}.{k}.parquet" for k in ("rankings", "outcomes", "deep")} for v in vs}
table = {t: layout.path(layout.NORMALIZED_TABLE, root=root, dataset=dataset, table=t)
         for t in ("questions", "haystacks", "events")}
retrievers.write_segments(vs, table["questions"], table["haystacks"], table["events"], 1, 2, outs,
                          log=lambda m: None, tokens=tokens)
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"cpu": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024}))
"""


def run_shared(work: Path, vocab) -> str:
    """Every built-in S variant's retrieval of segment 1: one process per
    variant (as the workflow's retrieve jobs) against one process for all."""
    from memobench.catalog.variants import builtin

    raw = all_file(work, vocab)
    name = "bench_shared"
    workdir = work / f"run_{name}"
    workdir.mkdir(parents=True, exist_ok=True)
    cfg = workdir / "bench.yaml"
    names = sorted(builtin("s"))
    ds = {"format": "longmemeval", "family": "s", "file": str(raw), "bytes": raw.stat().st_size, "segments": 2,
          "variants": ["v0.8.0", "v0.8.0-index", "exp4-A0-base"]}
    cfg.write_text(yaml.safe_dump({"data_dir": str(work / "data"), "run": [name], "datasets": {name: ds}}))
    targets = [layout.path(layout.TOKENS, dataset=name, tokenizer=s) for s in ("ascii", "cjkr", "exp6", "fts5")]
    log(f"{name}: normalize and tokens")
    t = time.monotonic()
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--configfile",
           str(cfg), "--cores", "2", "--quiet", "all", "--", *targets]
    subprocess.run(cmd, check=True, capture_output=True)
    prep = time.monotonic() - t
    out = workdir / "shared_out"
    out.mkdir(exist_ok=True)
    root = str(workdir / layout.RESULTS)

    def one(ns):
        t = time.monotonic()
        p = subprocess.run([sys.executable, "-c", SHARED_CODE, str(REPO / "src"), root, name, ",".join(ns), str(out)],
                           capture_output=True, text=True, check=True)
        return {**json.loads(p.stdout.strip().splitlines()[-1]), "wall": time.monotonic() - t}

    log(f"{name}: {len(names)} variants, one process each")
    alone = [one([n]) for n in names]
    log(f"{name}: {len(names)} variants in one process")
    together = one(names)
    a_cpu, a_wall = sum(r["cpu"] for r in alone), sum(r["wall"] for r in alone)
    rows = [f"### Shared retrieval: {raw.stat().st_size / 1e6:.0f} MB, 1,986 questions x ~28 sessions, "
            f"segment 1 of 2, all {len(names)} built-in S variants", "",
            "| | processes | CPU s | wall s | peak RSS MB |", "|---|---|---|---|---|",
            f"| one process per variant (today's retrieve jobs) | {len(names)} | {a_cpu:.1f} | {a_wall:.1f} | "
            f"{max(r['rss_mb'] for r in alone):.0f} |",
            f"| all variants in one process (write_segments) | 1 | {together['cpu']:.1f} | {together['wall']:.1f} | "
            f"{together['rss_mb']:.0f} |",
            f"| **ratio** | | **{a_cpu / together['cpu']:.1f}x** | **{a_wall / together['wall']:.1f}x** | |", "",
            f"(tables built beforehand in {prep:.0f} s; the machine is shared, so CPU seconds are the steadier figure)",
            "", normalize_vs_ijson(raw, workdir, name)]
    return "\n".join(rows) + "\n"


# --------------------------------------------------------------------------- the original harnesses


def burn() -> None:
    """A CPU burner: spins until killed."""
    while True:
        pass


def result_digests(results: Path) -> dict[str, str]:
    """sha256 of every file under ``results``, the logs and the retrieve
    stage's cache excepted (they hold times and file stamps): what must be the
    same bytes run after run."""
    import hashlib

    skip = {Path(layout.LOGS).name, "cache"}
    return {str(p.relative_to(results)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(results.rglob("*")) if p.is_file() and not skip & set(p.relative_to(results).parts)}


def differing(first: dict[str, str], other: dict[str, str]) -> list[str]:
    """The files in either digest map that the other lacks or holds other bytes for."""
    return sorted(k for k in first.keys() | other.keys() if first.get(k) != other.get(k))


def run_stress(work: Path, raw: Path, runs: int, cores: int, burners: int, checkout: Path) -> str:
    """``runs`` cold runs of the all case under ``--cores cores`` with
    ``burners`` CPU burners beside them; every run's results against the
    first's (see the module's help)."""
    import multiprocessing
    import shutil

    name = "bench_all"
    base = work / "stress"
    if base.exists():
        shutil.rmtree(base)
    base.mkdir(parents=True)
    cfg = base / "cfg.yaml"
    cfg.write_text(yaml.safe_dump({"data_dir": str(work / "data"), "run": [name], "datasets": {name: {
        "format": "longmemeval", "family": "s", "file": str(raw), "bytes": raw.stat().st_size, "segments": 2,
        "variants": harness_variants(), "analyze": True}}}))
    procs = [multiprocessing.Process(target=burn, daemon=True) for _ in range(burners)]
    for proc in procs:
        proc.start()
    rows = [f"### Stress: {runs} cold runs of the all case ({len(harness_variants())} variants + analyze, "
            f"{raw.stat().st_size / 1e6:.0f} MB), --cores {cores} with {burners} CPU burner(s) on "
            f"{multiprocessing.cpu_count()} cores", "",
            "| run | exit | wall s | files | differing from run 1 |", "|---|---|---|---|---|"]
    first: dict[str, str] | None = None
    failures = differ = 0
    try:
        for i in range(1, runs + 1):
            workdir = base / f"run_{i}"
            cmd = [sys.executable, "-m", "snakemake", "-s", str(checkout / "Snakefile"), "-d", str(workdir),
                   "--configfile", str(cfg), "--cores", str(cores), "--quiet", "all"]
            t = time.monotonic()
            proc = subprocess.run(cmd, capture_output=True, text=True)
            wall = time.monotonic() - t
            digests = result_digests(workdir / layout.RESULTS)
            diff = differing(first, digests) if first is not None else []
            if proc.returncode:
                failures += 1
                kept = base / f"failed_{i}"
                workdir.rename(kept)
                (kept / "snakemake.out").write_text(proc.stdout + proc.stderr)
                errors = [ln.strip() for ln in (proc.stdout + proc.stderr).splitlines()
                          if "memobench:" in ln or "Error in rule" in ln][:5]
                log(f"stress run {i}: exit {proc.returncode}; kept in {kept}: " + " | ".join(errors))
                note = f"failed ({'; '.join(errors) or 'see snakemake.out'})"
            else:
                if first is None:
                    first = digests
                elif diff:
                    differ += 1
                note = ", ".join(diff[:5]) + (f" and {len(diff) - 5} more" if len(diff) > 5 else "") or "none"
                if i > 1 and not diff:  # run 1 and any differing run stay, to be compared by hand
                    shutil.rmtree(workdir)
            log(f"stress run {i}/{runs}: exit {proc.returncode}, {wall:.1f} s, {len(digests)} files, "
                f"differing: {note}")
            rows.append(f"| {i} | {proc.returncode} | {wall:.1f} | {len(digests)} | {note} |")
    finally:
        for proc in procs:
            proc.kill()
            proc.join()
    rows += ["", f"stress: {runs} runs, {failures} failed, {differ} differed from run 1 "
                 f"(--cores {cores}, {burners} burner(s), {multiprocessing.cpu_count()} cores)"]
    return "\n".join(rows) + "\n"


def run_pipeline(work: Path, name: str, raw: Path, segments: int, family: str, checkout: Path | None = None) -> dict:
    workdir = work / f"run_{name}" if checkout is None else work / f"run_{name}_baseline"
    if workdir.exists():
        subprocess.run(["rm", "-rf", str(workdir)], check=True)
    workdir.mkdir(parents=True)
    cfg = workdir / "bench.yaml"
    ds = {"format": "longmemeval", "family": family, "file": str(raw), "bytes": raw.stat().st_size,
          "segments": segments, "variants": VARIANTS}
    cfg.write_text(yaml.safe_dump({"data_dir": str(work / "data"), "run": [name], "datasets": {name: ds}}))
    log(f"{name}: end-to-end run, --cores 2")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = snakemake(workdir, cfg, checkout=checkout)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    stages = stage_table(workdir)
    log(f"{name}: retrieval-only rerun of v0.8.0")
    rerun = snakemake(workdir, cfg, layout.path(layout.METRICS, dataset=name, variant="v0.8.0"), "--forcerun", "retrieve", checkout=checkout)
    metrics = {v: json.loads((workdir / layout.path(layout.METRICS, dataset=name, variant=v)).read_text())
               for v in VARIANTS}
    seg1 = {}
    for v in VARIANTS:
        with open(workdir / layout.BENCHMARKS / "retrieve" / name / v / f"{layout.segment_name(1)}.tsv") as f:
            seg1[v] = float(next(csv.DictReader(f, delimiter="\t"))["s"])
    return {"total": total, "cpu": cpu, "stages": stages, "rerun": rerun, "metrics": metrics, "seg1": seg1,
            "normalize": normalize_vs_ijson(raw, workdir, name)}


# The naive reference is a file given by path (e.g. a checkout's tests/oracles/naive.py),
# loaded as a module of its own: the package never imports its tests.
NAIVE_CODE = """
import importlib.util, json, sys, time, resource
sys.path.insert(0, sys.argv[6])  # the measured checkout's package, which the reference imports
spec = importlib.util.spec_from_file_location("memobench_naive_reference", sys.argv[5])
naive = importlib.util.module_from_spec(spec)
spec.loader.exec_module(naive)
reference_run, reference_exp6 = naive.reference_run, naive.reference_exp6
path, fts_limit, start, limit = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
start = None if start == "-" else int(start)
limit = None if limit == "-" else int(limit)
out = {}
t = time.monotonic()
r = reference_run(path, fts_limit=fts_limit, start=start, limit=limit)
out["v0.8.0"] = time.monotonic() - t
t = time.monotonic()
e = reference_exp6(path, start=start, limit=limit)
out["v0.8.0-index"] = time.monotonic() - t
out["hit@1"] = [sum(x["rank"] == 1 for x in r), sum(x["rank"] == 1 for x in e)]
out["cpu"] = resource.getrusage(resource.RUSAGE_SELF).ru_utime + resource.getrusage(resource.RUSAGE_SELF).ru_stime
out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def run_naive(raw: Path, fts_limit: int, naive: Path, start=None, limit=None) -> dict:
    log(f"naive baseline {naive} on {raw.name}" + (f" (items {start + 1}..{start + limit})" if limit else ""))
    t = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", NAIVE_CODE, str(raw), str(fts_limit),
                           "-" if start is None else str(start), "-" if limit is None else str(limit),
                           str(naive), str(REPO / "src")],
                          capture_output=True, text=True, check=True)
    out = json.loads(proc.stdout)
    out["wall"] = time.monotonic() - t
    return out


def fmt_stage_rows(result: dict) -> list[str]:
    rows = []
    for stage, s in result["stages"].items():
        if not s["jobs"]:
            continue  # a stage this checkout does not have
        rows.append(f"| {stage} ({s['jobs']} jobs) | {s['wall']:.1f} | {s['cpu']:.1f} | {s['rss']:.0f} |")
    return rows


def report_scale(name: str, result: dict, naive: dict | None, naive_scale: float) -> str:
    out = [f"### {name}", "", "| stage | wall s (sum over jobs) | CPU s | peak RSS MB (largest job) |",
           "|---|---|---|---|", *fmt_stage_rows(result),
           f"| **end to end, --cores 2** | **{result['total']:.1f}** (elapsed) | | |",
           f"| retrieval-only rerun of v0.8.0 (its retrieve and merge jobs) | {result['rerun']:.1f} (elapsed) | | |", ""]
    if naive:
        ours = sum(s["wall"] for s in result["stages"].values())
        theirs = (naive["v0.8.0"] + naive["v0.8.0-index"]) * naive_scale
        scale_note = f" (measured on the first segment, x{naive_scale:g})" if naive_scale != 1 else ""
        out += ["| baseline vs pipeline | naive | pipeline | ratio |", "|---|---|---|---|",
                f"| v0.8.0 + v0.8.0-index, seconds of work{scale_note} | {theirs:.1f} | {ours:.1f} "
                f"(all stages, summed over jobs) | {theirs / ours:.1f}x |",
                f"| wall time with 2 cores | {theirs:.1f} (one process) | {result['total']:.1f} | "
                f"{theirs / result['total']:.1f}x |",
                f"| one more variant (its retrieval only; the tokens are shared) | "
                f"{theirs / len(VARIANTS):.1f} | {result['stages']['retrieve']['wall'] / len(VARIANTS):.1f} | "
                f"{theirs / result['stages']['retrieve']['wall']:.1f}x |",
                f"| peak RSS MB | {naive['rss_mb']:.0f} | "
                f"{max(s['rss'] for s in result['stages'].values()):.0f} | |", ""]
    m = result["metrics"]
    out.append("hit@1: " + ", ".join(f"{v} {m[v]['hit@1']}/{m[v]['questions']}" for v in VARIANTS) + ".")
    out += ["", result["normalize"]]
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memobench.tools.benchmark", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", required=True,
                        help="the workflow to measure: the directory holding its Snakefile and src/")
    parser.add_argument("--work", default="bench_work", help="generated files and runs (cached)")
    parser.add_argument("--scales", default="s,m,scaling",
                        help="comma-separated: all, mshape, s, m, scaling, shared, stress")
    parser.add_argument("--vocab", default=None, help="LoCoMo file whose words the all and shared cases' file uses")
    parser.add_argument("--all-questions", type=int, default=1986,
                        help="questions of the all case's file (default 1986, ~190 MB; fewer: same bytes each)")
    parser.add_argument("--mshape-questions", type=int, default=120, help="questions of the mshape file")
    parser.add_argument("--mshape-sessions", type=int, default=500, help="sessions per question of the mshape file")
    parser.add_argument("--mshape-mb", type=float, default=None,
                        help="the mshape file's size in MB (default: M's bytes per session; 210 gives LoCoMo-sized "
                             "sessions, where a run's fixed cost weighs more)")
    parser.add_argument("--original", default=None, metavar="BENCH_DIR",
                        help="the original project's bench/ folder: run its harnesses on the same files "
                             "(all: the eight S harnesses; mshape: run-m and exp6-m per segment)")
    parser.add_argument("--run-harness", default=None, metavar="SCRIPT",
                        help="the script that runs one original harness (default: run-harness next to BENCH_DIR)")
    parser.add_argument("--naive", default=None, metavar="NAIVE_PY",
                        help="a naive reference file (e.g. a checkout's tests/oracles/naive.py), timed on the s and m "
                             "files; not run without it")
    parser.add_argument("--no-naive", action="store_true", help=argparse.SUPPRESS)  # the default now
    parser.add_argument("--baseline", default=None,
                        help="another checkout measured beside --checkout in the 'all' cases (e.g. today's main)")
    parser.add_argument("--python", action="append", default=[], metavar="PYTHON",
                        help="the interpreter of another environment (e.g. other_venv/bin/python), whose Snakemake "
                             "runs the all and mshape cases beside this one's; repeatable")
    parser.add_argument("--repeats", type=int, default=1,
                        help="all and mshape: each cold pipeline run the fastest of this many, the environments "
                             "(--python) taking turns")
    parser.add_argument("--stress-runs", type=int, default=20, help="stress: cold runs of the all case")
    parser.add_argument("--stress-cores", type=int, default=4, help="stress: snakemake --cores")
    parser.add_argument("--stress-burners", type=int, default=None,
                        help="stress: CPU burners beside each run (default: one per core)")
    args = parser.parse_args(argv)
    global REPO
    REPO = Path(args.checkout).resolve()
    if not (REPO / "Snakefile").is_file():
        raise SystemExit(f"--checkout {REPO}: no Snakefile there")
    work = Path(args.work).resolve()
    scales = args.scales.split(",")
    unknown = sorted(set(scales) - {"all", "mshape", "s", "m", "scaling", "shared", "stress"})
    if unknown:
        raise SystemExit(f"--scales: unknown {', '.join(unknown)} (all, mshape, s, m, scaling, shared, stress)")
    naive = Path(args.naive).resolve() if args.naive else None
    if naive is not None and not naive.is_file():
        raise SystemExit(f"--naive {naive}: no such file")
    original = None
    if args.original:
        needed = (S_HARNESSES if "all" in scales else []) + (M_HARNESSES if "mshape" in scales else [])
        if not needed:
            raise SystemExit("--original: the harnesses run beside the all and mshape scales; add one to --scales")
        original = Original.find(args.original, args.run_harness, work, needed)
    envs = environments(args.python)
    for checkout in [REPO, *([Path(args.baseline).resolve()] if args.baseline else [])]:
        for python in envs.values():
            compile_checkout(checkout, python)
    sections = [f"## Benchmark ({time.strftime('%Y-%m-%d')}, {sys.platform}, --cores 2)", "",
                environment(original is not None, envs), ""]
    # the measured checkout in each environment, labelled by it where there are several
    sides = {(label if len(envs) > 1 else "checkout"): (REPO, python) for label, python in envs.items()}
    summary: list = []  # the cases run beside the originals (bench_original.against_originals)
    for name in ("s", "m"):
        if name not in scales:
            continue
        p = SCALES[name]
        raw = generate(work, f"bench_{name}", p["questions"], p["sessions"], p["target"], p["seed"])
        result = run_pipeline(work, f"bench_{name}", raw, p["segments"], p.get("family", "s"))
        naive_run, naive_scale = None, 1.0
        if naive is not None:
            if name == "m":
                naive_run = run_naive(raw, 2000, naive, start=0, limit=100)
                naive_scale = p["questions"] / 100
            else:
                naive_run = run_naive(raw, 500, naive)
            ours = [result["metrics"][v]["hit@1"] for v in VARIANTS]
            if name == "s" and naive_run["hit@1"] != ours:
                raise SystemExit(f"naive and pipeline disagree: {naive_run['hit@1']} vs {ours}")
        sections.append(report_scale(f"{name.upper()} scale: {raw.stat().st_size / 1e6:.0f} MB, "
                                     f"{p['questions']} questions x ~{p['sessions']} sessions", result, naive_run,
                                     naive_scale))
        if args.baseline:
            log(f"{name}: the same run with the baseline checkout")
            base = run_pipeline(work, f"bench_{name}", raw, p["segments"], p.get("family", "s"),
                                checkout=Path(args.baseline).resolve())
            rss = max(s["rss"] for s in result["stages"].values())
            sections[-1] += "\n".join([
                "", "| against the baseline checkout | baseline | checkout | ratio |", "|---|---|---|---|",
                f"| end to end, wall s | {base['total']:.1f} | {result['total']:.1f} | "
                f"**{base['total'] / result['total']:.2f}x** |",
                f"| end to end, CPU s | {base['cpu']:.1f} | {result['cpu']:.1f} | **{base['cpu'] / result['cpu']:.2f}x** |",
                f"| largest job's peak RSS MB | {max(s['rss'] for s in base['stages'].values()):.0f} | {rss:.0f} | |",
                ""])
        print(sections[-1], flush=True)
    if "shared" in scales:
        sections.append(run_shared(work, args.vocab))
        print(sections[-1], flush=True)
    if "all" in scales:
        checkouts = {BASELINE: (Path(args.baseline).resolve(), sys.executable)} if args.baseline else {}
        raw = all_file(work, args.vocab, args.all_questions)
        sections.append(run_all_variants(work, raw, args.all_questions, {**checkouts, **sides}, original, summary,
                                         repeats=args.repeats))
        print(sections[-1], flush=True)
    if "stress" in scales:
        import os

        burners = args.stress_burners if args.stress_burners is not None else os.cpu_count() or 1
        sections.append(run_stress(work, all_file(work, args.vocab, args.all_questions), args.stress_runs,
                                   args.stress_cores, burners, REPO))
        print(sections[-1], flush=True)
    if "mshape" in scales:
        sections.append(run_mshape(work, args.mshape_questions, args.mshape_sessions, sides, original,
                                   summary=summary, target_mb=args.mshape_mb, repeats=args.repeats))
        print(sections[-1], flush=True)
    if summary:
        sections.append(against_originals(summary, list(sides)))
        print(sections[-1], flush=True)
    if "scaling" in scales:
        rows = ["### Cost against the number of questions (S-shaped files, end to end, --cores 2)", "",
                "| questions | file MB | end to end s | retrieve s (sum) | retrieve s per question |",
                "|---|---|---|---|---|"]
        for n in (100, 250, 500):
            raw = generate(work, f"bench_scaling_{n}", n, 50, 280e6 * n / 500, 7)
            r = run_pipeline(work, f"bench_scaling_{n}", raw, 2, "s")
            ret = r["stages"]["retrieve"]["wall"]
            rows.append(f"| {n} | {raw.stat().st_size / 1e6:.0f} | {r['total']:.1f} | {ret:.1f} | {ret / n:.4f} |")
        rows += ["", f"500 questions: {r['normalize']}"]
        sections.append("\n".join(rows) + "\n")
        print(sections[-1], flush=True)
    text = "\n".join(sections)
    (work / "benchmark.md").write_text(text)
    log(f"written to {work / 'benchmark.md'}")
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    log(f"benchmark CPU (children): {children.ru_utime + children.ru_stime:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
