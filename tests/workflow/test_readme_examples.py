"""The README's examples run as copied: every YAML block of README.md (read
from the file, so a new block is covered too) is a config overlay that runs
on a fresh clone with only the LoCoMo file placed, and every file a block
needs is made by the README's own commands (its shell lines) or files (a
Python block headed by its file name).

One real Snakemake run covers every block at once (their overlays merged, the
lists joined); then each block alone must plan no download (its `run:` names
only what is there) and no error. LoCoMo is the real file's first
conversation in place of the whole file, so the run takes seconds."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys

import pytest
import yaml

from tests.helpers import REPO, job_counts, snakemake, write_config

README = REPO / "README.md"
FENCED = re.compile(r"^```(?P<lang>\w*)\n(?P<body>.*?)^```", re.M | re.S)
EXAMPLE_SECTIONS = ("Choosing what runs", "Variants", "Your own retriever, or another system's run",
                    "Your memory service")
RUNS = re.compile(r"\bsnakemake\b|\bmemobench score\b")  # a run, which the test makes itself


def sections(text: str) -> dict[str, str]:
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def blocks(text: str, lang: str) -> list[str]:
    return [m.group("body") for m in FENCED.finditer(text) if m.group("lang") == lang]


def merged(a, b):
    """Two overlays as one: mappings key by key, lists joined (each item once)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: merged(a[k], b[k]) if k in a and k in b else b.get(k, a.get(k)) for k in {**a, **b}}
    if isinstance(a, list) and isinstance(b, list):
        return a + [x for x in b if x not in a]
    return b


def test_the_readme_blocks_are_found():
    text = README.read_text(encoding="utf-8")
    assert len(blocks(text, "yaml")) >= 4
    # each section with an example block has its YAML
    for name in EXAMPLE_SECTIONS:
        assert blocks(sections(text)[name], "yaml"), name


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory, small_data):
    text = README.read_text(encoding="utf-8")
    servers: list[subprocess.Popen] = []
    root = tmp_path_factory.mktemp("readme")
    work = root / "work"
    data = work / "data"
    # locomo10 is the real file's first conversation; everything else comes from the README
    loco = small_data([], seed=1, data=data)[1]["locomo1"]
    placed = write_config(root / "placed.yaml", datasets={"locomo10": {
        "file": loco["file"], "bytes": loco["bytes"], "urls": [],
        "sha256": hashlib.sha256((data / loco["file"]).read_bytes()).hexdigest()}})
    for name in EXAMPLE_SECTIONS:
        body = sections(text)[name]
        for code in blocks(body, "python"):
            first = code.splitlines()[0]
            m = re.match(r"# (\w+\.py)\b", first)
            if m:
                (work / m.group(1)).write_text(code, encoding="utf-8")
        for code in blocks(body, "sh"):
            for line in code.splitlines():
                if line.strip() and not line.lstrip().startswith("#") and not RUNS.search(line):
                    line = line.replace(".venv/bin/python", sys.executable).replace(
                        ".venv/bin/memobench", f"{sys.executable} -m memobench.cli")
                    if line.rstrip().endswith("&"):  # a server the blocks use, until the module's tests end
                        servers.append(subprocess.Popen(["bash", "-c", f"exec {line.rstrip()[:-1]}"], cwd=work,
                                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
                        assert servers[-1].stdout.readline().startswith("memobench: serving"), line
                        continue
                    subprocess.run(["bash", "-c", line], cwd=work, check=True, capture_output=True, text=True)
    overlays = []
    combined: dict = {}
    for i, code in enumerate(blocks(text, "yaml")):
        path = root / f"block{i}.yaml"
        path.write_text(code, encoding="utf-8")
        overlays.append((path, yaml.safe_load(code)))
        combined = merged(combined, overlays[-1][1])
    both = write_config(root / "combined.yaml", **combined)
    proc = snakemake(work, "--cores", "2", "--configfile", str(placed), str(both), check=False)
    yield work, placed, overlays, proc
    for server in servers:
        server.kill()
        server.wait()


def test_every_readme_block_runs_in_one_run(readme_run):
    work, _, overlays, proc = readme_run
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "memobench: missing" not in out
    for _, cfg in overlays:
        for ds, entry in (cfg.get("datasets") or {}).items():
            assert ds in cfg["run"], (ds, cfg)
            for v in entry["variants"]:
                assert (work / "results" / ds / v / "metrics.json").exists(), (ds, v)
    report = (work / "results" / "report.md").read_text(encoding="utf-8")
    assert "| locomo10 | memo-bm25s (fusion) |" in report and "| mine | v0.8.0-index |" in report


def test_each_readme_block_alone_plans_no_download_and_no_error(readme_run):
    work, placed, overlays, first = readme_run
    assert first.returncode == 0
    for path, cfg in overlays:
        proc = snakemake(work, "-n", "--configfile", str(placed), str(path), check=False)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0 and "memobench:" not in out, (path.read_text(), out[-3000:])
        jobs = job_counts(out)
        assert "download" not in jobs, (path.read_text(), jobs)
