"""The benchmark's own parts, with stand-ins for what it measures: the
original harnesses run through a run-harness script found next to the bench
folder (or given), on a folder holding the generated file under the name the
harness reads, their CPU counted from the waited-for children; the naive
reference loaded from a path, never imported from the tests."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import REPO
from memobench.tools import bench_common, benchmark

# A stand-in run-harness: records its arguments and what it finds in DATA_DIR,
# then burns CPU in a child process (counted only if the benchmark waits for it).
FAKE_HARNESS = """#!/usr/bin/env bash
set -eu
bench=$1; h=$2; data=$3; shift 3
echo "bench=$bench harness=$h env=$*"
ls "$data"
test -f "$bench/$h.cjs"
python3 -c 'sum(i * i for i in range(3_000_000))'
"""


@pytest.fixture
def bench(tmp_path):
    folder = tmp_path / "orig" / "bench"
    folder.mkdir(parents=True)
    for h in benchmark.S_HARNESSES + benchmark.M_HARNESSES:
        (folder / f"{h}.cjs").write_text("// stand-in\n")
    return folder


def test_the_run_harness_script_is_found_next_to_the_bench_folder_or_required(bench, tmp_path):
    with pytest.raises(SystemExit, match="no run-harness script next to it .*give its path with --run-harness"):
        benchmark.Original.find(str(bench), None, tmp_path, benchmark.S_HARNESSES)
    with pytest.raises(SystemExit, match="--run-harness .*: no such file"):
        benchmark.Original.find(str(bench), str(tmp_path / "nope"), tmp_path, benchmark.S_HARNESSES)
    (bench.parent / "run-harness").write_text(FAKE_HARNESS)
    assert benchmark.Original.find(str(bench), None, tmp_path, ["run"]).script == bench.parent / "run-harness"
    (bench / "exp5.cjs").unlink()
    with pytest.raises(SystemExit, match=r"no exp5\.cjs there"):
        benchmark.Original.find(str(bench), None, tmp_path, benchmark.S_HARNESSES)
    assert benchmark.Original.find(str(bench), None, tmp_path, benchmark.M_HARNESSES)  # exp5 not needed


def test_a_harness_runs_on_the_file_under_its_name_and_its_cpu_is_counted(bench, tmp_path):
    script = tmp_path / "elsewhere" / "run-harness"
    script.parent.mkdir()
    script.write_text(FAKE_HARNESS)
    original = benchmark.Original.find(str(bench), str(script), tmp_path / "work", ["run-m"])
    raw = tmp_path / "gen.json"
    raw.write_text("[]")
    data = original.data_dir(raw, "longmemeval_m.json")
    assert (data / "longmemeval_m.json").resolve() == raw
    assert original.data_dir(raw, "longmemeval_m.json") == data  # a second run replaces the link
    r = original.run("run-m", data, "gen.run-m.seg2", M_START=4, M_LIMIT=4)
    out = (tmp_path / "work" / "original" / "gen.run-m.seg2.out").read_text()
    assert f"bench={bench} harness=run-m env=M_START=4 M_LIMIT=4" in out and "longmemeval_m.json" in out
    assert r["cpu"] > 0.05 and r["wall"] >= r["cpu"] * 0.5
    (bench / "exp6-m.cjs").unlink()
    with pytest.raises(SystemExit, match=r"exp6-m\.cjs failed"):
        original.run("exp6-m", data, "gen.exp6-m")


def test_the_naive_reference_is_loaded_from_its_path(tmp_path):
    ref = tmp_path / "my_reference.py"
    ref.write_text(
        "def reference_run(path, fts_limit=500, start=None, limit=None):\n"
        "    return [{'rank': 1}, {'rank': 2}] if fts_limit == 500 else []\n"
        "def reference_exp6(path, start=None, limit=None):\n"
        "    return [{'rank': 1}] * (limit or 3)\n")
    proc = subprocess.run([sys.executable, "-c", benchmark.NAIVE_CODE, str(tmp_path / "x.json"), "500", "-", "2",
                           str(ref), str(REPO / "src")], capture_output=True, text=True, check=True)
    assert json.loads(proc.stdout)["hit@1"] == [1, 2]


def test_the_package_does_not_import_its_tests():
    text = (REPO / "src" / "memobench" / "tools" / "benchmark.py").read_text(encoding="utf-8")
    assert "from naive" not in text and "import naive" not in text and '"tests"' not in text


def test_the_stage_table_reads_every_rule_with_benchmark_files(tmp_path):
    root = tmp_path / "results" / "logs" / "benchmarks"
    for stage, job in (("merge", "d/v.tsv"), ("retrievallog", "d/v.tsv"), ("some_rule", "d.tsv")):
        (root / stage / job).parent.mkdir(parents=True, exist_ok=True)
        (root / stage / job).write_text("s\th:m:s\tmax_rss\tcpu_time\n1.5\t0:00:01\t100\t1.25\n")
    table = benchmark.stage_table(tmp_path)
    assert table["merge"] == table["retrievallog"] == table["some_rule"] == {"jobs": 1, "wall": 1.5, "cpu": 1.25,
                                                                              "rss": 100.0}
    assert table["retrieve"]["jobs"] == 0
    assert not {"fts_index", "official"} & set(benchmark.STAGES)


def test_normalize_is_stated_against_a_bare_ijson_pass(tmp_path):
    """Every scale's section says the normalize job's MB/s (its Snakemake
    benchmark file) against a bare ijson pass over the same file."""
    raw = tmp_path / "gen.json"
    raw.write_bytes(b"[" + b",".join([b'{"question_id": "q", "haystack_sessions": [[{"content": "x"}]]}'] * 2000)
                    + b"]")
    workdir = tmp_path / "run"
    tsv = workdir / "results" / "logs" / "benchmarks" / "normalize" / "bench_s.tsv"
    tsv.parent.mkdir(parents=True)
    tsv.write_text("s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
                   "0.0500\t0:00:00\t61.5\t0\t0\t0\t0\t0\t0\t0.04\n")
    mb = raw.stat().st_size / 1e6
    line = bench_common.normalize_vs_ijson(raw, workdir, "bench_s")
    assert line.startswith(f"normalize vs bare ijson (yajl2_c) on the same {mb:.2g} MB file: the normalize job "
                           f"{bench_common._figure(mb / 0.05)} MB/s (0.1 s wall, 0.0 s CPU, peak RSS 62 MB); a bare "), line
    assert "x** the bare parser's speed." in line
    assert bench_common._figure(123.4) == "123" and bench_common._figure(0.0123) == "0.012"
    assert bench_common._figure(0.3456, 2) == "0.35" and bench_common._figure(0.0023, 2) == "0.0023"
    assert "no benchmark file" in bench_common.normalize_vs_ijson(raw, tmp_path / "none", "bench_s")


def test_the_environment_line_names_the_runtimes_the_timings_depend_on(tmp_path, monkeypatch):
    from importlib import metadata

    line = benchmark.environment(with_node=False)
    assert f"Python {sys.version.split()[0]}, Snakemake {metadata.version('snakemake')}" in line
    installed = [d.metadata["Name"] for d in metadata.distributions()
                 if (d.metadata["Name"] or "").startswith("snakemake-executor-plugin-")]
    assert all(p in line for p in installed) and ("none" in line) == (not installed)
    # held against the import system too, not only the metadata the line reads
    # (the test extra installs the Slurm plugin)
    import importlib.util

    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is not None:
        assert "snakemake-executor-plugin-slurm" in line
    assert "Node" not in line
    # the node the run-harness script would find on PATH, and none at all
    node = tmp_path / "bin" / "node"
    node.parent.mkdir()
    node.write_text("#!/bin/sh\necho v22.99.0\n")
    node.chmod(0o755)
    monkeypatch.setenv("PATH", str(node.parent))
    assert benchmark.environment(with_node=True).endswith("the originals on Node v22.99.0.")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert benchmark.environment(with_node=True).endswith("the originals on Node not found.")


def test_result_digests_leave_out_logs_and_cache_only(tmp_path):
    for rel in ("d/v/metrics.json", "logs/retrieve/x.log", "d/cache/seg1/k", "report.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel)
    first = benchmark.result_digests(tmp_path)
    assert sorted(first) == ["d/v/metrics.json", "report.md"]
    (tmp_path / "report.md").write_text("changed")
    (tmp_path / "d" / "new.trec").write_text("x")
    assert benchmark.differing(first, benchmark.result_digests(tmp_path)) == ["d/new.trec", "report.md"]


def test_each_environment_is_named_by_its_folder_and_read_by_its_own_interpreter(tmp_path):
    """--python: every environment's runtimes come from its own interpreter
    (a stand-in whose Snakemake and plugins differ from this one's)."""
    other = tmp_path / "venv-other" / "bin" / "python"
    other.parent.mkdir(parents=True)
    other.write_text('#!/bin/sh\necho "Python 3.99.0, Snakemake 99.1, executor plugins: snakemake-executor-plugin-x"\n')
    other.chmod(0o755)
    envs = benchmark.environments([str(other), str(other)])
    here = benchmark.environment(with_node=False)
    assert list(envs.values()) == [sys.executable, str(other), str(other)]
    first, second, third = envs
    assert second == "venv-other" and third == "venv-other (3)" and first != second
    line = benchmark.environment(with_node=False, envs=envs)
    assert line == (f"{first}: {here[:-1]}; venv-other: Python 3.99.0, Snakemake 99.1, executor plugins: "
                    f"snakemake-executor-plugin-x; venv-other (3): Python 3.99.0, Snakemake 99.1, executor plugins: "
                    f"snakemake-executor-plugin-x.")
    broken = tmp_path / "broken"
    broken.write_text("#!/bin/sh\necho 'no snakemake here' >&2\nexit 1\n")
    broken.chmod(0o755)
    with pytest.raises(SystemExit, match="--python .*broken: it cannot read its environment's Snakemake "
                                         r"\(no snakemake here\)"):
        benchmark.environment(with_node=False, envs=benchmark.environments([str(broken)]))


def test_the_originals_and_every_environment_make_one_table():
    theirs = {"wall": 30.0, "cpu": 24.0}
    summary = [("`v0.8.0` alone", "run.cjs", theirs, {"plain": {"wall": 10.0, "cpu": 8.0},
                                                        "test": {"wall": 12.0, "cpu": 6.0}})]
    text = benchmark.against_originals(summary, ["plain", "test"])
    header, rule, row = [line for line in text.splitlines() if line.startswith("|")]
    assert header.count("|") == rule.count("|") == row.count("|") == 10
    assert row == "| `v0.8.0` alone | run.cjs | 30.0 | 10.0 | **3.0x** | **3.0x** | 12.0 | **2.5x** | **4.0x** |"
    assert "plain ratio wall" in header and "test ratio CPU" in header


def test_repeats_alternate_the_environments_and_keep_each_ones_fastest():
    order, walls = [], iter([5.0, 4.0, 3.0, 6.0, 2.0, 7.0])
    best = bench_common.best_alternating(["plain", "test"], 3, lambda label: order.append(label) or {"wall": next(walls)})
    # no environment always first: a slow spell of the machine falls on both
    assert order == ["plain", "test", "test", "plain", "plain", "test"]
    assert best == {"plain": {"wall": 2.0}, "test": {"wall": 3.0}}
    assert bench_common.best_alternating(["a"], 1, lambda label: {"wall": 1.5}) == {"a": {"wall": 1.5}}


def test_the_checkout_is_compiled_before_it_is_timed_whatever_pythondontwritebytecode_says(tmp_path, monkeypatch):
    # a job importing a module with no current cache compiles it again in every process
    checkout = tmp_path / "checkout"
    for rel in ("src/pkg/mod.py", "workflow/scripts/stage.py"):
        (checkout / rel).parent.mkdir(parents=True, exist_ok=True)
        (checkout / rel).write_text("X = 1\n")
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    bench_common.compile_checkout(checkout)
    tag = sys.implementation.cache_tag
    assert (checkout / f"src/pkg/__pycache__/mod.{tag}.pyc").is_file()
    assert (checkout / f"workflow/scripts/__pycache__/stage.{tag}.pyc").is_file()
