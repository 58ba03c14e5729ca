"""The benchmark against the original harnesses (tools/benchmark.py's ``all`` and ``mshape`` scales, and
``--original``): the original project's harnesses found and run on the same generated files, the runtimes
the timings depend on, the pipeline's runs of every variant beside them and the ratios."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from ..core import layout

from .bench_common import (INDEX_HARNESS_M, INDEX_VARIANT, SCALES, VARIANTS, _ratio, _sum, best_alternating, generate,
                           harness_variants, log, normalize_vs_ijson, timed, timed_snakemake)


# the eight S harnesses, in the order they run; the M ones run per segment
S_HARNESSES = ["run", "exp6", "exp", "exp2", "exp3", "exp4", "exp5", "analyze"]



M_HARNESSES = ["run-m", "exp6-m"]



class Original:
    """The original harnesses (``BENCH_DIR/*.cjs``), each run through the
    run-harness script (``SCRIPT BENCH_DIR HARNESS DATA_DIR [ENV=VALUE ...]``)
    on a folder holding the benchmark's file under the name the harness reads."""

    def __init__(self, bench: Path, script: Path, work: Path):
        self.bench, self.script, self.out = bench, script, work / "original"

    @classmethod
    def find(cls, bench_arg: str, script_arg: str | None, work: Path, harnesses: list[str]) -> "Original":
        bench = Path(bench_arg).resolve()
        missing = [f"{h}.cjs" for h in harnesses if not (bench / f"{h}.cjs").is_file()]
        if missing:
            raise SystemExit(f"--original {bench}: no {', '.join(missing)} there; give the original project's "
                             f"bench/ folder")
        if script_arg:
            script = Path(script_arg).resolve()
            if not script.is_file():
                raise SystemExit(f"--run-harness {script}: no such file")
        else:
            looked = [bench.parent / "run-harness", bench / "run-harness"]
            script = next((p for p in looked if p.is_file()), None)
            if script is None:
                raise SystemExit(f"--original {bench}: no run-harness script next to it (looked at "
                                 f"{', '.join(map(str, looked))}); give its path with --run-harness")
        return cls(bench, script, work)

    def data_dir(self, raw: Path, name: str) -> Path:
        """A folder holding ``raw`` as ``name`` (a symbolic link): the harnesses' BENCH_DIR."""
        folder = self.out / f"data_{raw.stem}"
        folder.mkdir(parents=True, exist_ok=True)
        link = folder / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(raw)
        return folder

    def run(self, harness: str, data: Path, label: str, **env) -> dict:
        settings = [f"{k}={v}" for k, v in env.items()]
        log(f"original {harness}.cjs on {data}{' ' + ' '.join(settings) if settings else ''}")
        cmd = ["bash", str(self.script), str(self.bench), harness, str(data), *settings]
        return timed(cmd, f"{harness}.cjs", output=self.out / f"{label}.out")



# The runtimes of one environment, printed by its own interpreter.
RUNTIMES_CODE = """
import sys
from importlib import metadata
plugins = sorted({d.metadata["Name"] for d in metadata.distributions()  # a set: a path may list one twice
                  if (d.metadata["Name"] or "").startswith("snakemake-executor-plugin-")})
print(f"Python {sys.version.split()[0]}, Snakemake {metadata.version('snakemake')}, executor plugins: "
      f"{', '.join(plugins) or 'none'}")
"""


def environments(pythons: list[str]) -> dict[str, str]:
    """{label: interpreter}: this interpreter's environment first, then each
    of ``pythons`` (``--python``), labelled by its environment's folder (a
    venv's ``bin/python``: the venv's name), numbered where two would share one."""
    out: dict[str, str] = {}
    for i, python in enumerate([sys.executable, *pythons], 1):
        path = Path(python)
        label = path.parent.parent.name if path.parent.name == "bin" else path.name
        out[label if label not in out else f"{label} ({i})"] = python
    return out


def environment(with_node: bool, envs: dict[str, str] | None = None) -> str:
    """The runtimes the timings depend on: Python and Snakemake (and its
    executor plugins: Snakemake imports every installed one at each start,
    and the Slurm plugin brings pandas, about 0.2 s), for each environment
    measured (``envs``: {label: interpreter}, by default this one), and with
    the originals the Node that runs them (Node 22+ has node:sqlite; on older
    Node the run-harness script maps it onto better-sqlite3, which changes
    their times)."""
    envs = envs or {"": sys.executable}
    lines = []
    for label, python in envs.items():
        proc = subprocess.run([python, "-c", RUNTIMES_CODE], capture_output=True, text=True)
        if proc.returncode:
            raise SystemExit(f"--python {python}: it cannot read its environment's Snakemake "
                             f"({(proc.stderr.strip().splitlines() or ['no output'])[-1]})")
        lines.append(f"{label}: {proc.stdout.strip()}" if len(envs) > 1 else proc.stdout.strip())
    line = "; ".join(lines)
    if with_node:
        try:
            node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            node = "not found"
        line += f"; the originals on Node {node}"
    return line + "."



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
    engine = next(p for p in (dest / "src" / "memobench" / "memo" / "engine.py",
                              dest.joinpath("src", "memobench", "engine.py")) if p.is_file())  # a checkout from before memo/
    engine.write_text(engine.read_text() + "\n_BENCHMARK_EDIT = 1\n")
    return dest



def run_all_variants(work: Path, raw: Path, questions: int, sides: dict[str, tuple[Path, str]],
                     original: Original | None = None, summary: list | None = None, repeats: int = 1) -> str:
    """The all case on every side ({label: (checkout, interpreter)}: the
    measured checkout in each environment, and a ``baseline`` checkout), each
    cold case the best of ``repeats`` runs with the sides alternating
    (:func:`best_alternating`); with ``original``, the S harnesses on the same
    file, their rows added to ``summary`` (:func:`against_originals`)."""
    name = "bench_all"
    names = harness_variants()
    bases = {label: work / f"run_{name}_{label}" for label in sides}
    for base in bases.values():
        if base.exists():
            subprocess.run(["rm", "-rf", str(base)], check=True)
        base.mkdir(parents=True)

    def config(label, variants, analyze):
        cfg = bases[label] / f"cfg_{len(variants)}.yaml"
        ds = {"format": "longmemeval", "family": "s", "file": str(raw), "bytes": raw.stat().st_size,
              "segments": 2, "variants": variants, "analyze": analyze}
        cfg.write_text(yaml.safe_dump({"data_dir": str(work / "data"), "run": [name], "datasets": {name: ds}}))
        return cfg

    def cold(key, variants, analyze, what):
        def run(label):
            checkout, python = sides[label]
            folder = bases[label] / key
            subprocess.run(["rm", "-rf", str(folder)], check=True)
            log(f"{label}: {what}, cold")
            return timed_snakemake(checkout, folder, config(label, variants, analyze), python=python)

        return best_alternating(list(sides), repeats, run)

    results: dict[str, dict[str, dict]] = {label: {} for label in sides}
    for label, r in cold("all", names, True, f"all {len(names)} variants plus analyze").items():
        results[label]["all"] = r
    for label, (checkout, python) in sides.items():
        log(f"{label}: rerun of v0.8.0 after an engine edit")
        edited = edited_copy(checkout, bases[label] / "edited")
        results[label]["rerun"] = timed_snakemake(edited, bases[label] / "all", config(label, names, True),
                                                  layout.path(layout.METRICS, dataset=name, variant="v0.8.0"),
                                                  python=python)
    for v in ("v0.8.0", "v0.8.0-index"):
        for label, r in cold(v, [v], False, f"{v} alone").items():
            results[label][v] = r
    rows = [f"### All S variants: {raw.stat().st_size / 1e6:.0f} MB, {questions:,} questions x ~28 sessions, "
            f"2 segments, --cores 2", ""]
    if repeats > 1:
        rows += [f"(each cold case: the fastest of {repeats} runs, the environments taking turns)", ""]
    labels = list(sides)
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
    if len(labels) == 2:
        rows += ["", "(ratios: the first side's time over the second's; the machine's other load moves wall "
                 "time more than CPU time)"]
    rows += ["", normalize_vs_ijson(raw, work / f"run_{name}_{labels[-1]}" / "all", name)]
    if original is not None:
        data = original.data_dir(raw, "longmemeval_s.json")
        harness = {h: original.run(h, data, f"{raw.stem}.{h}") for h in S_HARNESSES}
        mb = raw.stat().st_size / 1e6
        measured = [lab for lab in labels if lab != BASELINE]
        for key, label, theirs, what in (
                ("all", f"all {len(names)} S variants + analyze ({mb:.0f} MB, {questions:,} questions, 2 segments)",
                 _sum(list(harness.values())), "the eight S harnesses in sequence"),
                ("v0.8.0", "`v0.8.0` alone", harness["run"], "run.cjs"),
                ("v0.8.0-index", "`v0.8.0-index` alone", harness["exp6"], "exp6.cjs")):
            if summary is not None:
                summary.append((label, what, theirs, {lab: results[lab][key] for lab in measured}))
        rows += ["", "Each harness: " + ", ".join(f"{h}.cjs {r['wall']:.1f} s wall / {r['cpu']:.1f} s CPU"
                                                   for h, r in harness.items()) + f" (output in {original.out})."]
    return "\n".join(rows) + "\n"


BASELINE = "baseline"  # the label of the --baseline checkout's side, never set against the originals


def against_originals(summary: list, labels: list[str]) -> str:
    """One table: each case's original harnesses beside the pipeline in every
    environment measured (``labels``), with the ratios (the original's time
    over the pipeline's)."""
    head = ("| pipeline (cold, end to end, `--cores 2`) | original | original wall s | "
            + " | ".join(f"{lab} wall s | {lab} ratio wall | {lab} ratio CPU" for lab in labels) + " |")
    rows = ["### Against the original harnesses, side by side", "", head, "|" + "---|" * (head.count("|") - 1)]
    for case, what, theirs, ours in summary:
        rows.append(f"| {case} | {what} | {theirs['wall']:.1f} | " + " | ".join(
            f"{ours[lab]['wall']:.1f} | {_ratio(theirs['wall'], ours[lab]['wall'])} | "
            f"{_ratio(theirs['cpu'], ours[lab]['cpu'])}" for lab in labels) + " |")
    rows += ["", "(ratios: the original's time over the pipeline's; the pipeline also writes the official metrics, "
             "TREC runs, statistics and the report, which the harnesses do not)"]
    return "\n".join(rows) + "\n"



def run_mshape(work: Path, questions: int, sessions: int, sides: dict[str, tuple[Path, str]],
               original: Original | None = None, segments: int = 5, summary: list | None = None,
               target_mb: float | None = None, repeats: int = 1) -> str:
    """An M-shaped file through the pipeline (M family, ``segments`` segments,
    cold, end to end) on every side ({label: (checkout, interpreter)}):
    v0.8.0 and v0.8.0-index together, then v0.8.0-index alone; with
    ``original``, run-m.cjs and exp6-m.cjs over the same segments, both
    against the pair and exp6-m.cjs against v0.8.0-index alone. The file has
    M's bytes per session, or ``target_mb`` megabytes in all. Each run is the
    best of ``repeats``, the sides alternating (:func:`best_alternating`)."""
    from memobench.retrieval.memo import segment_bounds

    if questions < segments:
        raise SystemExit(f"--mshape-questions {questions}: at least one question per segment ({segments})")
    m = SCALES["m"]
    per_question = m["target"] / m["questions"] * sessions / m["sessions"]  # M's bytes per session
    target = per_question * questions if target_mb is None else target_mb * 1e6
    size = "" if target_mb is None else f"_{target_mb:g}mb"
    raw = generate(work, f"bench_mshape_{questions}x{sessions}{size}", questions, sessions, target, m["seed"])
    base = work / "run_mshape"
    if base.exists():
        subprocess.run(["rm", "-rf", str(base)], check=True)
    base.mkdir(parents=True)

    def config(variants: list[str]) -> Path:
        cfg = base / f"cfg_{len(variants)}.yaml"
        ds = {"format": "longmemeval", "family": "m", "file": str(raw), "bytes": raw.stat().st_size,
              "segments": segments, "variants": variants}
        cfg.write_text(yaml.safe_dump({"data_dir": str(work / "data"), "run": ["bench_mshape"],
                                       "datasets": {"bench_mshape": ds}}))
        return cfg

    mb = raw.stat().st_size / 1e6
    rows = [f"### M-shaped: {mb:.0f} MB, {questions} questions x ~{sessions} sessions, {segments} segments", ""]
    if repeats > 1:
        rows += [f"(each pipeline run: the fastest of {repeats}, the environments taking turns)", ""]
    rows += ["| run | wall s | CPU s |", "|---|---|---|"]
    def cold(folder, variants, what):
        def run(label):
            checkout, python = sides[label]
            subprocess.run(["rm", "-rf", str(base / f"{folder}_{label}")], check=True)
            log(f"mshape, {label}: {what}, {segments} segments, end to end")
            return timed_snakemake(checkout, base / f"{folder}_{label}", config(variants), python=python)

        return best_alternating(list(sides), repeats, run)

    pair = cold("run", VARIANTS, " + ".join(VARIANTS))
    alone = cold("index", [INDEX_VARIANT], f"{INDEX_VARIANT} alone")
    for label in sides:
        rows += [f"| pipeline ({label}): {' + '.join(VARIANTS)} (M family), cold, end to end, --cores 2 | "
                 f"{pair[label]['wall']:.1f} | {pair[label]['cpu']:.1f} |",
                 f"| pipeline ({label}): {INDEX_VARIANT} alone, cold, end to end, --cores 2 | "
                 f"{alone[label]['wall']:.1f} | {alone[label]['cpu']:.1f} |"]
    normalize = normalize_vs_ijson(raw, base / f"run_{next(iter(sides))}", "bench_mshape")
    if original is not None:
        data = original.data_dir(raw, "longmemeval_m.json")
        theirs = {}
        for h in M_HARNESSES:
            runs = []
            for i in range(1, segments + 1):
                lo, hi = segment_bounds(questions, i, segments)
                runs.append(original.run(h, data, f"{raw.stem}.{h}.{layout.segment_name(i)}", M_START=lo, M_LIMIT=hi - lo))
            theirs[h] = _sum(runs)
            rows.append(f"| original: {h}.cjs, {segments} segments (M_START/M_LIMIT) one after another | "
                        f"{theirs[h]['wall']:.1f} | {theirs[h]['cpu']:.1f} |")
        measured = [lab for lab in sides if lab != BASELINE]
        shape = f"M-shaped ({mb:.0f} MB, {questions} questions x ~{sessions} sessions, {segments} segments)"
        if summary is not None:
            summary += [(f"{shape}: {' + '.join(f'`{v}`' for v in VARIANTS)}", f"run-m.cjs and {INDEX_HARNESS_M}.cjs",
                         _sum(list(theirs.values())), {lab: pair[lab] for lab in measured}),
                        (f"{shape}: `{INDEX_VARIANT}` alone", f"{INDEX_HARNESS_M}.cjs", theirs[INDEX_HARNESS_M],
                         {lab: alone[lab] for lab in measured})]
    rows += ["", normalize]
    return "\n".join(rows) + "\n"
