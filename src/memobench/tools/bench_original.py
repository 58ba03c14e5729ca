"""The benchmark against the original harnesses (tools/benchmark.py's ``all`` and ``mshape`` scales, and
``--original``): the original project's harnesses found and run on the same generated files, the runtimes
the timings depend on, the pipeline's runs of every variant beside them and the ratios."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from ..core import layout

from .bench_common import (INDEX_HARNESS_M, INDEX_VARIANT, SCALES, VARIANTS, _ratio, _sum, generate, harness_variants, log,
                           normalize_vs_ijson, timed, timed_snakemake)


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



def environment(with_node: bool) -> str:
    """The runtimes the timings depend on: Python and Snakemake (and its
    executor plugins: Snakemake imports every installed one at each start,
    and the Slurm plugin brings pandas, about 0.2 s), and with the originals
    the Node that runs them (Node 22+ has node:sqlite; on older Node the
    run-harness script maps it onto better-sqlite3, which changes their times)."""
    from importlib import metadata

    plugins = sorted({d.metadata["Name"] for d in metadata.distributions()  # a set: a path may list one twice
                      if (d.metadata["Name"] or "").startswith("snakemake-executor-plugin-")})
    line = (f"Python {sys.version.split()[0]}, Snakemake {metadata.version('snakemake')}, executor plugins: "
            f"{', '.join(plugins) or 'none'}")
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



def run_all_variants(work: Path, raw: Path, questions: int, checkouts: dict[str, Path],
                     original: Original | None = None) -> str:
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
        r["rerun"] = timed_snakemake(edited, base / "all", cfg, layout.path(layout.METRICS, dataset=name, variant="v0.8.0"))
        for v in ("v0.8.0", "v0.8.0-index"):
            log(f"{label}: {v} alone, cold")
            r[v] = timed_snakemake(checkout, base / v, config([v], False))
    rows = [f"### All S variants: {raw.stat().st_size / 1e6:.0f} MB, {questions:,} questions x ~28 sessions, "
            f"2 segments, --cores 2", ""]
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
    if len(labels) == 2:
        rows += ["", "(ratios: the first checkout's time over the second's; the machine's other load moves wall "
                 "time more than CPU time)"]
    rows += ["", normalize_vs_ijson(raw, work / f"run_{name}_{labels[-1]}" / "all", name)]
    if original is not None:
        data = original.data_dir(raw, "longmemeval_s.json")
        harness = {h: original.run(h, data, f"{raw.stem}.{h}") for h in S_HARNESSES}
        ours = results[labels[-1]]
        rows += ["", f"### Against the original harnesses, same file ({raw.stat().st_size / 1e6:.0f} MB, "
                 f"{questions:,} questions): harnesses one after another, the pipeline with --cores 2", "",
                 "| pipeline (cold, end to end) | original | original wall s | original CPU s | pipeline wall s | "
                 "pipeline CPU s | wall ratio | CPU ratio |", "|---|---|---|---|---|---|---|---|"]
        for key, label, theirs, what in (
                ("all", f"all {len(names)} variants + analyze", _sum(list(harness.values())),
                 ", ".join(f"{h}.cjs" for h in S_HARNESSES) + " in sequence"),
                ("v0.8.0", "v0.8.0 alone", harness["run"], "run.cjs"),
                ("v0.8.0-index", "v0.8.0-index alone", harness["exp6"], "exp6.cjs")):
            mine = ours[key]
            rows.append(f"| {label} | {what} | {theirs['wall']:.1f} | {theirs['cpu']:.1f} | {mine['wall']:.1f} | "
                        f"{mine['cpu']:.1f} | {_ratio(theirs['wall'], mine['wall'])} | "
                        f"{_ratio(theirs['cpu'], mine['cpu'])} |")
        rows += ["", "Each harness: " + ", ".join(f"{h}.cjs {r['wall']:.1f} s wall / {r['cpu']:.1f} s CPU"
                                                   for h, r in harness.items()) + ".",
                 "(ratios: the original's time over the pipeline's; the pipeline also writes the official "
                 "metrics, TREC runs, statistics and the report, which the harnesses do not; harness output is "
                 f"in {original.out})"]
    return "\n".join(rows) + "\n"



def run_mshape(work: Path, questions: int, sessions: int, checkout: Path, original: Original | None = None,
               segments: int = 5) -> str:
    """An M-shaped file through the pipeline (M family, ``segments`` segments,
    cold, end to end): v0.8.0 and v0.8.0-index together, then v0.8.0-index
    alone; with ``original``, run-m.cjs and exp6-m.cjs over the same segments,
    both against the pair and exp6-m.cjs against v0.8.0-index alone."""
    from memobench.retrieval.memo import segment_bounds

    if questions < segments:
        raise SystemExit(f"--mshape-questions {questions}: at least one question per segment ({segments})")
    m = SCALES["m"]
    per_question = m["target"] / m["questions"] * sessions / m["sessions"]  # M's bytes per session
    raw = generate(work, f"bench_mshape_{questions}x{sessions}", questions, sessions, per_question * questions,
                   m["seed"])
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

    log(f"mshape: {' + '.join(VARIANTS)}, {segments} segments, end to end")
    ours = timed_snakemake(checkout, base / "run", config(VARIANTS))
    log(f"mshape: {INDEX_VARIANT} alone, {segments} segments, end to end")
    alone = timed_snakemake(checkout, base / "index", config([INDEX_VARIANT]))
    mb = raw.stat().st_size / 1e6
    rows = [f"### M-shaped: {mb:.0f} MB, {questions} questions x ~{sessions} sessions, {segments} segments", "",
            "| run | wall s | CPU s |", "|---|---|---|",
            f"| pipeline: {' + '.join(VARIANTS)} (M family), cold, end to end, --cores 2 | {ours['wall']:.1f} | "
            f"{ours['cpu']:.1f} |",
            f"| pipeline: {INDEX_VARIANT} alone, cold, end to end, --cores 2 | {alone['wall']:.1f} | "
            f"{alone['cpu']:.1f} |"]
    normalize = normalize_vs_ijson(raw, base / "run", "bench_mshape")
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
        both = _sum(list(theirs.values()))
        index = theirs[INDEX_HARNESS_M]
        rows += [f"| original: both | {both['wall']:.1f} | {both['cpu']:.1f} |",
                 f"| **ratio: both harnesses / the pair** | {_ratio(both['wall'], ours['wall'])} | "
                 f"{_ratio(both['cpu'], ours['cpu'])} |",
                 f"| **ratio: {INDEX_HARNESS_M}.cjs / {INDEX_VARIANT} alone** | {_ratio(index['wall'], alone['wall'])} | "
                 f"{_ratio(index['cpu'], alone['cpu'])} |"]
    rows += ["", normalize]
    return "\n".join(rows) + "\n"
