"""Benchmark: the pipeline against a naive baseline on generated files.

    python -m memobench.benchmark --checkout . [--work bench_work] [--scales s,m,scaling,shared,all]
                                  [--baseline OTHER_CHECKOUT] [--no-naive]

For each scale it generates a LongMemEval-format file (cached in ``--work``),
runs the whole workflow with ``snakemake --cores 2`` (variants v0.8.0 and
v0.8.0-index), reads Snakemake's per-job benchmark files, then reruns the
retrieval of one variant (``--forcerun retrieve``, what a change to that
variant costs), and times the naive baseline (``tests/naive.py``: the file
parsed whole, an FTS table and every event's tokens rebuilt for every question
and variant, as the original harnesses do) on the same file. It prints one
table per scale (wall time, CPU time, peak RSS per stage) and the ratios.

Scales: ``s`` (500 questions x ~50 sessions, ~280 MB), ``m`` (500 x ~500,
~2.7 GB; the naive baseline runs on the first 100-question segment only and is
extrapolated, since the original takes about 35 minutes on 4 cores), and
``scaling`` (S-shaped files with 100, 250 and 500 questions: cost per question),
and ``shared`` (issue 12: a LongMemEval-format file of 1,986 questions of ~28
sessions, LoCoMo vocabulary, ~190 MB; after the workflow has built its tables,
the retrieval of every built-in S variant of segment 1 of 2 run as today's
workflow runs it, one process per variant, against all of them in one process
sharing their common work; CPU seconds summed, both measured in the same run).

``all`` (issue 12) runs the 1,986-question file with every variant of the
eight original S harnesses (33) plus analyze, end to end; then a retrieval
rerun of one variant after an engine edit (in a scratch copy of the checkout,
``engine.py`` gains one statement); then one variant cold, end to end, for
``v0.8.0`` and for ``v0.8.0-index``. With ``--baseline`` (another checkout,
e.g. ``git worktree add /tmp/base <commit>``) each case also runs there, in
the same session, and the table gives the ratios. CPU is the summed user and
system time of Snakemake and all its jobs.

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

REPO: Path | None = None  # the measured checkout (--checkout)
VARIANTS = ["v0.8.0", "v0.8.0-index"]
STAGES = ["verify", "normalize", "tokens", "fts_index", "retrieve", "merge", "official", "session_json",
          "retrievallog", "analyze"]
SCALES = {
    "s": {"questions": 500, "sessions": 50, "target": 280e6, "seed": 1, "segments": 2},
    "m": {"questions": 500, "sessions": 500, "target": 2.7e9, "seed": 2, "segments": 5, "family": "m"},
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def generate(work: Path, name: str, questions: int, sessions: int, target: float, seed: int, vocab=None) -> Path:
    path = work / "data" / f"{name}.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        log(f"generating {path} ({questions} questions x {sessions} sessions, ~{target / 1e6:.0f} MB)")
        extra = ["--vocab-source", str(vocab)] if vocab else []
        subprocess.run([sys.executable, "-m", "memobench.generate", "longmemeval", "--out", str(path),
                        "--questions", str(questions), "--sessions", str(sessions), "--seed", str(seed),
                        "--target-bytes", str(int(target)), "--quiet", *extra], check=True)
    return path


def snakemake(workdir: Path, cfg: Path, *args, checkout: Path | None = None) -> float:
    t = time.monotonic()
    cmd = [sys.executable, "-m", "snakemake", "-s", str((checkout or REPO) / "Snakefile"), "-d", str(workdir),
           "--configfile", str(cfg), "--cores", "2", *args, "--quiet", "all"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"snakemake failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return time.monotonic() - t


def stage_table(workdir: Path) -> dict[str, dict]:
    """Per stage: summed wall and CPU seconds of its jobs, the largest peak RSS."""
    out = {}
    root = workdir / "results" / "logs" / "benchmarks"
    for stage in STAGES:
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
from memobench import retrievers
from memobench.variants import builtin
R, names, mode = sys.argv[2], sys.argv[3].split(","), sys.argv[4]
vs = [builtin("s")[n] for n in names]
tokens = {s: f"{R}/tokens/{s}.parquet" for s in {v.recipe.seq for v in vs} | {"fts5"}}
outs = {v.name: {k: f"{sys.argv[5]}/{v.name}.{k}.parquet" for k in ("rankings", "outcomes", "deep")} for v in vs}
retrievers.write_segments(vs, f"{R}/normalized/questions.parquet", f"{R}/normalized/haystacks.parquet",
                          f"{R}/normalized/events.parquet", 1, 2, outs, log=lambda m: None, tokens=tokens)
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"cpu": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024}))
"""


def run_shared(work: Path, vocab) -> str:
    """Every built-in S variant's retrieval of segment 1: one process per
    variant (as the workflow's retrieve jobs) against one process for all."""
    from memobench.variants import builtin

    raw = generate(work, "bench_shared", 1986, 28, 193e6, 12, vocab)
    name = "bench_shared"
    workdir = work / f"run_{name}"
    workdir.mkdir(parents=True, exist_ok=True)
    cfg = workdir / "bench.yaml"
    names = sorted(builtin("s"))
    ds = {"format": "longmemeval", "family": "s", "file": str(raw), "bytes": raw.stat().st_size, "segments": 2,
          "variants": ["v0.8.0", "v0.8.0-index", "exp4-A0-base"]}
    cfg.write_text(yaml.safe_dump({"data_dir": str(work / "data"), "run": [name], "datasets": {name: ds}}))
    targets = [f"results/{name}/tokens/{s}.parquet" for s in ("ascii", "cjkr", "exp6", "fts5")]
    log(f"{name}: normalize and tokens")
    t = time.monotonic()
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--configfile",
           str(cfg), "--cores", "2", "--quiet", "all", "--", *targets]
    subprocess.run(cmd, check=True, capture_output=True)
    prep = time.monotonic() - t
    out = workdir / "shared_out"
    out.mkdir(exist_ok=True)
    res = str(workdir / "results" / name)

    def one(ns):
        t = time.monotonic()
        p = subprocess.run([sys.executable, "-c", SHARED_CODE, str(REPO / "src"), res, ",".join(ns), "x", str(out)],
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
            f"(tables built beforehand in {prep:.0f} s; the machine is shared, so CPU seconds are the steadier figure)"]
    return "\n".join(rows) + "\n"


# The variants of the eight original S harnesses (run, exp6, exp, exp2, exp3,
# exp4, exp5; analyze is the dataset's analyze stage).
def harness_variants() -> list[str]:
    from memobench.variants import builtin

    return sorted(n for n in builtin("s") if n not in ("v0.4.0", "v0.5.0") and not n.startswith(("exp4m", "exp5m")))


def timed_snakemake(checkout: Path, workdir: Path, cfg: Path, *targets) -> dict:
    """Elapsed and CPU seconds (Snakemake and every job it waited for) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    cmd = [sys.executable, "-m", "snakemake", "-s", str(checkout / "Snakefile"), "-d", str(workdir),
           "--configfile", str(cfg), "--cores", "2", "--quiet", "all", "--", *targets]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t
    if proc.returncode:
        raise SystemExit(f"snakemake failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu}


def edited_copy(checkout: Path, dest: Path) -> Path:
    """A scratch copy of the checkout whose engine.py has one more statement:
    what an engine edit costs (the fingerprint of every stage importing it changes).
    The copy keeps the files' times (``cp -a``): Snakemake reruns every job
    whose script is newer than its outputs, so a plain copy would measure a
    rerun of everything instead of the edit's."""
    if dest.exists():
        subprocess.run(["rm", "-rf", str(dest)], check=True)
    dest.mkdir(parents=True)
    for name in ("Snakefile", "config.yaml", "workflow", "src", "envs"):
        if (checkout / name).exists():
            subprocess.run(["cp", "-a", str(checkout / name), str(dest / name)], check=True)
    engine = dest / "src" / "memobench" / "engine.py"
    engine.write_text(engine.read_text() + "\n_BENCHMARK_EDIT = 1\n")
    return dest


def run_all_variants(work: Path, vocab, checkouts: dict[str, Path]) -> str:
    raw = generate(work, "bench_shared", 1986, 28, 193e6, 12, vocab)
    name = "bench_all"
    names = harness_variants()
    results: dict[str, dict[str, dict]] = {}
    for label, checkout in checkouts.items():
        r = results[label] = {}
        base = work / f"run_{name}_{label}"
        if base.exists():
            subprocess.run(["rm", "-rf", str(base)], check=True)
        base.mkdir(parents=True)

        def config(variants, analyze):
            cfg = base / f"cfg_{len(variants)}.yaml"
            ds = {"format": "longmemeval", "family": "s", "file": str(raw), "bytes": raw.stat().st_size,
                  "segments": 2, "variants": variants, "analyze": analyze}
            cfg.write_text(yaml.safe_dump({"data_dir": str(work / "data"), "run": [name], "datasets": {name: ds}}))
            return cfg

        log(f"{label}: all {len(names)} variants plus analyze, end to end")
        cfg = config(names, True)
        r["all"] = timed_snakemake(checkout, base / "all", cfg)
        log(f"{label}: rerun of v0.8.0 after an engine edit")
        edited = edited_copy(checkout, base / "edited")
        r["rerun"] = timed_snakemake(edited, base / "all", cfg, f"results/{name}/v0.8.0/metrics.json")
        for v in ("v0.8.0", "v0.8.0-index"):
            log(f"{label}: {v} alone, cold")
            r[v] = timed_snakemake(checkout, base / v, config([v], False))
    rows = [f"### All S variants: {raw.stat().st_size / 1e6:.0f} MB, 1,986 questions x ~28 sessions, 2 segments, "
            f"--cores 2", ""]
    labels = list(checkouts)
    head = "| case | " + " | ".join(f"{lab} wall s | {lab} CPU s" for lab in labels) + " |"
    if len(labels) == 2:
        head += " wall ratio | CPU ratio |"
    rows += [head, "|" + "---|" * (head.count("|") - 1)]
    cases = [("all", f"all {len(names)} variants + analyze, end to end"),
             ("rerun", "v0.8.0 after an engine edit (its retrieve, merge, exports)"),
             ("v0.8.0", "v0.8.0 alone, cold, end to end"), ("v0.8.0-index", "v0.8.0-index alone, cold, end to end")]
    for key, label in cases:
        line = f"| {label} | " + " | ".join(f"{results[lab][key]['wall']:.1f} | {results[lab][key]['cpu']:.1f}"
                                            for lab in labels) + " |"
        if len(labels) == 2:
            a, b = results[labels[0]][key], results[labels[1]][key]
            line += f" **{a['wall'] / b['wall']:.2f}x** | **{a['cpu'] / b['cpu']:.2f}x** |"
        rows.append(line)
    rows += ["", "(ratios: the first checkout's time over the second's; the machine's other load moves wall "
             "time more than CPU time)"]
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
    rerun = snakemake(workdir, cfg, f"results/{name}/v0.8.0/metrics.json", "--forcerun", "retrieve", checkout=checkout)
    metrics = {v: json.loads((workdir / "results" / name / v / "metrics.json").read_text()) for v in VARIANTS}
    seg1 = {}
    for v in VARIANTS:
        with open(workdir / "results" / "logs" / "benchmarks" / "retrieve" / name / v / "seg1.tsv") as f:
            seg1[v] = float(next(csv.DictReader(f, delimiter="\t"))["s"])
    return {"total": total, "cpu": cpu, "stages": stages, "rerun": rerun, "metrics": metrics, "seg1": seg1}


NAIVE_CODE = """
import json, sys, time, resource
sys.path.insert(0, sys.argv[5])  # the naive reference lives with the tests
from naive import reference_run, reference_exp6
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


def run_naive(raw: Path, fts_limit: int, start=None, limit=None) -> dict:
    log(f"naive baseline on {raw.name}" + (f" (items {start + 1}..{start + limit})" if limit else ""))
    t = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", NAIVE_CODE, str(raw), str(fts_limit),
                           "-" if start is None else str(start), "-" if limit is None else str(limit),
                           str(REPO / "tests")],
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
                f"| one more variant (its retrieval only; tokens and FTS index are shared) | "
                f"{theirs / len(VARIANTS):.1f} | {result['stages']['retrieve']['wall'] / len(VARIANTS):.1f} | "
                f"{theirs / result['stages']['retrieve']['wall']:.1f}x |",
                f"| peak RSS MB | {naive['rss_mb']:.0f} | "
                f"{max(s['rss'] for s in result['stages'].values()):.0f} | |", ""]
    m = result["metrics"]
    out.append("hit@1: " + ", ".join(f"{v} {m[v]['hit@1']}/{m[v]['questions']}" for v in VARIANTS) + ".")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memobench.benchmark", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", required=True,
                        help="the workflow to measure: the directory holding its Snakefile and src/")
    parser.add_argument("--work", default="bench_work", help="generated files and runs (cached)")
    parser.add_argument("--scales", default="s,m,scaling", help="comma-separated: s, m, scaling, shared")
    parser.add_argument("--vocab", default=None, help="LoCoMo file whose words the shared case's file uses")
    parser.add_argument("--no-naive", action="store_true", help="skip the naive baseline")
    parser.add_argument("--baseline", default=None,
                        help="another checkout measured beside --checkout in the 'all' cases (e.g. today's main)")
    args = parser.parse_args(argv)
    global REPO
    REPO = Path(args.checkout).resolve()
    if not (REPO / "Snakefile").is_file():
        raise SystemExit(f"--checkout {REPO}: no Snakefile there")
    work = Path(args.work).resolve()
    scales = args.scales.split(",")
    sections = [f"## Benchmark ({time.strftime('%Y-%m-%d')}, {sys.platform}, --cores 2)", ""]
    for name in ("s", "m"):
        if name not in scales:
            continue
        p = SCALES[name]
        raw = generate(work, f"bench_{name}", p["questions"], p["sessions"], p["target"], p["seed"])
        result = run_pipeline(work, f"bench_{name}", raw, p["segments"], p.get("family", "s"))
        naive, naive_scale = None, 1.0
        if not args.no_naive:
            if name == "m":
                naive = run_naive(raw, 2000, start=0, limit=100)
                naive_scale = p["questions"] / 100
            else:
                naive = run_naive(raw, 500)
            ours = [result["metrics"][v]["hit@1"] for v in VARIANTS]
            if name == "s" and naive["hit@1"] != ours:
                raise SystemExit(f"naive and pipeline disagree: {naive['hit@1']} vs {ours}")
        sections.append(report_scale(f"{name.upper()} scale: {raw.stat().st_size / 1e6:.0f} MB, "
                                     f"{p['questions']} questions x ~{p['sessions']} sessions", result, naive,
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
        checkouts = {}
        if args.baseline:
            checkouts["baseline"] = Path(args.baseline).resolve()
        checkouts["checkout"] = REPO
        sections.append(run_all_variants(work, args.vocab, checkouts))
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
