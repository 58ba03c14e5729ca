"""Shared test fixtures: the repository, the real LoCoMo file, and a way to run
the real Snakemake workflow in a scratch directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
LOCOMO = Path(os.environ.get("MEMOBENCH_LOCOMO", REPO.parent / "shared" / "data" / "locomo10.json"))


@pytest.fixture(scope="session")
def locomo_path() -> Path:
    if not LOCOMO.exists():
        if os.environ.get("CI"):
            pytest.fail(f"the real LoCoMo file is missing at {LOCOMO}")
        pytest.skip(f"real LoCoMo file not found at {LOCOMO}")
    return LOCOMO


def data_dir(root: Path, *files: Path) -> Path:
    """``root/data`` holding copies of ``files`` (a user's hand-placed raw files)."""
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    for f in files:
        shutil.copy(f, data / f.name)
    return data


def write_config(path: Path, **config) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def snakemake(workdir: Path, *args, configfile: Path | None = None, snakefile: Path | None = None,
              check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run the real workflow (the repository's Snakefile unless given) in ``workdir``."""
    cmd = [sys.executable, "-m", "snakemake", "-s", str(snakefile or REPO / "Snakefile"), "-d", str(workdir)]
    if configfile is not None:
        cmd += ["--configfile", str(configfile)]
    cmd += list(args)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def dry_run_jobs(workdir: Path, *args, **kw) -> dict[str, int]:
    """Job counts per rule of a dry run (empty when there is nothing to do)."""
    proc = snakemake(workdir, "-n", *args, **kw)
    out = proc.stdout + proc.stderr
    jobs: dict[str, int] = {}
    if "Job stats:" not in out:
        return jobs
    table = out.split("Job stats:", 1)[1].splitlines()
    for line in table[3:]:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        if parts[0] != "total":
            jobs[parts[0]] = int(parts[1])
    return jobs


def copy_project(dest: Path) -> Path:
    """A scratch copy of the workflow and package, for tests that edit code."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("Snakefile", "config.yaml", "workflow", "src", "envs"):
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(src, dest / name)
    return dest
