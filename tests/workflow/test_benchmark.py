"""The benchmark's stress mode on a stand-in workflow: three real Snakemake
runs, one failing and one differing, counted; its burner processes stopped.
The benchmark's other parts: tests/unit/tools/test_benchmark.py."""

from __future__ import annotations

from tests.unit.tools.test_benchmark import benchmark  # the module, as that file imports it

# A stand-in workflow for the stress mode: its first run (in the working
# folder run_1) writes one result, the second another (a difference), the
# third fails; logs and the retrieve cache differ every run and are not compared.
STRESS_SNAKEFILE = '''
import time
from pathlib import Path

n = int(Path.cwd().name.split("_")[1]) - 1

rule all:
    output: "results/d/v/metrics.json", "results/logs/retrieve/d.log", "results/d/cache/seg1/keys/v"
    run:
        if n == 2:
            raise ValueError("memobench: stand-in failure")
        Path(output[0]).write_text("first" if n == 0 else "second")
        for p in output[1:]:
            Path(p).write_text(str(time.time_ns()))
'''


def test_stress_counts_failures_and_differences_and_stops_its_burners(tmp_path):
    import multiprocessing

    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "Snakefile").write_text(STRESS_SNAKEFILE)
    raw = tmp_path / "data" / "bench_shared.json"
    raw.parent.mkdir()
    raw.write_text("[]")
    text = benchmark.run_stress(tmp_path / "work", raw, runs=3, cores=2, burners=1, checkout=checkout)
    assert "stress: 3 runs, 1 failed, 1 differed from run 1" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [r.split(" | ")[1] for r in rows] == ["0", "0", "1"]
    assert "d/v/metrics.json" in rows[1] and "stand-in failure" in rows[2]
    assert rows[0].endswith("| none |")
    stress = tmp_path / "work" / "stress"
    assert (stress / "failed_3" / "snakemake.out").is_file()
    assert (stress / "run_1").is_dir() and (stress / "run_2").is_dir()  # run 1, and a run that differed
    assert not multiprocessing.active_children()
