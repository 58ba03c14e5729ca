"""The benchmark's measuring tools (tools/benchmark.py): the generated files, a command timed with its
children's CPU, the normalize stage against a bare ijson pass, the figures' format."""

from __future__ import annotations

import csv
import json
import resource
import subprocess
import sys
import time
from pathlib import Path


from ..core import layout


INDEX_VARIANT, INDEX_HARNESS_M = "v0.8.0-index", "exp6-m"  # the index variant, and the M harness it reproduces
VARIANTS = ["v0.8.0", "v0.8.0-index"]



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
        subprocess.run([sys.executable, "-m", "memobench.tools.generate", "longmemeval", "--out", str(path),
                        "--questions", str(questions), "--sessions", str(sessions), "--seed", str(seed),
                        "--target-bytes", str(int(target)), "--quiet", *extra], check=True)
    return path



# A bare pass of ijson's C backend over a file, each item built and dropped:
# the speed of the streaming parser the normalize stage is built on.
BARE_IJSON_CODE = """
import json, resource, sys, time
import ijson
t = time.monotonic()
items = 0
with open(sys.argv[1], "rb") as f:
    for _ in ijson.items(f, "item"):
        items += 1
ru = resource.getrusage(resource.RUSAGE_SELF)
rss = ru.ru_maxrss / 1024
try:  # this image's own peak (ru_maxrss may keep the forking parent's)
    rss = next(int(line.split()[1]) / 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:"))
except (OSError, StopIteration):
    pass
print(json.dumps({"wall": time.monotonic() - t, "cpu": ru.ru_utime + ru.ru_stime, "rss_mb": rss,
                  "backend": ijson.backend, "items": items}))
"""



def bare_ijson(raw: Path) -> dict:
    """Wall and CPU seconds and peak RSS of :data:`BARE_IJSON_CODE` on ``raw``."""
    proc = subprocess.run([sys.executable, "-c", BARE_IJSON_CODE, str(raw)], capture_output=True, text=True,
                          check=True)
    return json.loads(proc.stdout)



def normalize_vs_ijson(raw: Path, workdir: Path, dataset: str) -> str:
    """One line: the normalize job's MB/s over ``raw`` (its Snakemake
    benchmark file under ``workdir``: the whole job, start-up included)
    against a bare ijson pass over the same file, run here once (a second
    or so per 200 MB), with both peak RSS."""
    tsv = workdir / layout.BENCHMARKS / "normalize" / f"{dataset}.tsv"
    if not tsv.is_file():
        return f"normalize vs bare ijson: no benchmark file {tsv} (the run made no normalize job)"
    with open(tsv) as f:
        row = next(csv.DictReader(f, delimiter="\t"))
    mb, wall = raw.stat().st_size / 1e6, float(row["s"])
    cpu = row.get("cpu_time") if row.get("cpu_time") not in (None, "", "NA", "-") else None
    rss = row.get("max_rss") if row.get("max_rss") not in (None, "", "NA", "-") else None
    bare = bare_ijson(raw)
    job = (f"{_figure(mb / wall)} MB/s ({wall:.1f} s wall" + (f", {float(cpu):.1f} s CPU" if cpu else "")
           + (f", peak RSS {float(rss):.0f} MB" if rss else "") + ")")
    return (f"normalize vs bare ijson ({bare['backend']}) on the same {_figure(mb)} MB file: the normalize job "
            f"{job}; a bare `ijson.items(f, 'item')` pass {_figure(mb / max(bare['wall'], 1e-6))} MB/s "
            f"({bare['wall']:.1f} s wall, {bare['cpu']:.1f} s CPU, peak RSS {bare['rss_mb']:.0f} MB): normalize at "
            f"**{_figure(bare['wall'] / wall, 2)}x** the bare parser's speed.")



def _figure(x: float, decimals: int = 0) -> str:
    """``x`` with ``decimals`` decimals, or 2 significant digits where that shows 0."""
    return f"{x:.{decimals}f}" if round(x, decimals) else f"{x:.2g}"



# The variants of the eight original S harnesses (run, exp6, exp, exp2, exp3,
# exp4, exp5; analyze is the dataset's analyze stage).
def harness_variants() -> list[str]:
    from memobench.catalog.variants import builtin

    return sorted(n for n in builtin("s") if n not in ("v0.4.0", "v0.5.0") and not n.startswith(("exp4m", "exp5m")))



def timed(cmd: list[str], what: str, output: Path | None = None) -> dict:
    """Elapsed and CPU seconds of one command: its process and every process
    it waited for (``RUSAGE_CHILDREN`` before and after; the benchmark runs one
    command at a time). ``output``: where its stdout and stderr are kept."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(proc.stdout + proc.stderr)
    if proc.returncode:
        raise SystemExit(f"{what} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return {"wall": wall, "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)}



def compile_checkout(checkout: Path, python: str | None = None) -> None:
    """Byte-compile the checkout's package and workflow scripts with ``python``
    (by default this interpreter), as a first run writes them: with
    ``PYTHONDONTWRITEBYTECODE`` set, or a module edited since its cache,
    every job would compile it again, and the timings would measure that."""
    subprocess.run([python or sys.executable, "-m", "compileall", "-q", str(checkout / "src"),
                    str(checkout / "workflow" / "scripts")], check=True, stdout=subprocess.DEVNULL)


def timed_snakemake(checkout: Path, workdir: Path, cfg: Path, *targets, python: str | None = None) -> dict:
    """Elapsed and CPU seconds (Snakemake and every job it waited for) of one
    run, Snakemake started by ``python`` (by default this interpreter): its
    environment's Snakemake, plugins and packages, which the jobs inherit."""
    cmd = [python or sys.executable, "-m", "snakemake", "-s", str(checkout / "Snakefile"), "-d", str(workdir),
           "--configfile", str(cfg), "--cores", "2", "--quiet", "all", "--", *targets]
    return timed(cmd, "snakemake")



def best_alternating(labels: list[str], repeats: int, run) -> dict[str, dict]:
    """{label: the fastest (by wall time) of ``repeats`` runs of ``run(label)``},
    the environments taking turns and the first of each round alternating
    (a, b, b, a, ...): no environment always runs first or last, so a slow
    spell of the machine does not land on one of them every time."""
    best: dict[str, dict] = {}
    for r in range(repeats):
        for label in (labels if r % 2 == 0 else labels[::-1]):
            result = run(label)
            if label not in best or result["wall"] < best[label]["wall"]:
                best[label] = result
    return best


def _ratio(a: float, b: float) -> str:
    return f"**{a / b:.1f}x**" if b > 0 else "-"



def _sum(runs: list[dict]) -> dict:
    return {"wall": sum(r["wall"] for r in runs), "cpu": sum(r["cpu"] for r in runs)}



def all_file(work: Path, vocab, questions: int = 1986) -> Path:
    """The ``all`` case's file: 1,986 questions of ~28 sessions (~190 MB), or
    fewer questions at the same bytes per question."""
    name = "bench_shared" if questions == 1986 else f"bench_shared_{questions}"
    return generate(work, name, questions, 28, 193e6 * questions / 1986, 12, vocab)
