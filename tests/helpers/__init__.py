"""What the tests share beyond fixtures: the repository, how to find the real
LoCoMo file, and how to run the real Snakemake workflow in a scratch
directory (tests/workflow/ only: a unit test that starts it fails, naming
where it belongs)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
SKIP_PREFIX = "real LoCoMo file unavailable"


def find_locomo(config: Path = REPO / "config.yaml") -> tuple[Path | None, str]:
    """The real locomo10.json where the README tells users to place it, the
    config's ``data_dir`` (relative to the config's folder: the clone's
    ``data/`` for config.yaml), when it has the published bytes and sha256;
    when it is not there, the pipeline's own download puts it there (the
    config's URLs, byte count and sha256), as a user's first run would. One
    place, inside the clone: returns (None, why, and where to place it) when
    it cannot be had."""
    from memobench.datasets.download import DownloadError, fetch, verify

    cfg = yaml.safe_load(Path(config).read_text(encoding="utf-8"))
    ds = cfg["datasets"]["locomo10"]
    placed = Path(config).resolve().parent / cfg.get("data_dir", "data") / ds["file"]
    place = f"place it at {placed} ({ds['bytes']} bytes, sha256 {ds['sha256']})"
    try:
        if placed.exists():
            verify(placed, ds["bytes"], ds["sha256"])
            return placed, f"data_dir {placed}"
        fetch(ds["urls"], placed, ds["bytes"], sha256=ds["sha256"], log=lambda msg: None)
        return placed, f"downloaded into {placed}"
    except DownloadError as e:
        return None, f"{e}; {place}"


def data_dir(root: Path, *files: Path) -> Path:
    """``root/data`` holding copies of ``files`` (a user's hand-placed raw files)."""
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    for f in files:
        shutil.copy(f, data / f.name)
    return data


def small_datasets(data: Path, variants: list[str], seed: int, spice: bool = False) -> dict:
    """Write into ``data`` a generated LoCoMo-format file of one conversation
    (19 sessions, 40 questions, the real file's key structure and messy
    evidence), ``locomo1.json``, and a generated LongMemEval file of 10
    questions x 6 sessions, ``lme.json``; return their ``datasets`` config
    (LoCoMo in one segment, LongMemEval in two), each running ``variants``."""
    from memobench.tools.generate.locomo import write_locomo
    from memobench.tools.generate.longmemeval import write_longmemeval

    data.mkdir(parents=True, exist_ok=True)
    write_locomo(data / "locomo1.json", 1, seed=seed, sessions=(19, 19), turns=(8, 20), qa_per_conversation=(40, 40),
                 spice=spice)
    write_longmemeval(data / "lme.json", n_questions=10, sessions_per_question=6, seed=seed, turns=(2, 5),
                      words_per_turn=(4, 30), spice=spice)
    return {
        "locomo1": {"format": "locomo", "file": "locomo1.json", "bytes": (data / "locomo1.json").stat().st_size,
                    "segments": 1, "variants": list(variants)},
        "lme": {"format": "longmemeval", "family": "s", "file": "lme.json",
                "bytes": (data / "lme.json").stat().st_size, "segments": 2, "variants": list(variants)},
    }


def write_config(path: Path, **config) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def snakemake_command() -> list[str]:
    """The ``snakemake`` command of the environment the tests run in (the
    venv's ``bin``, as the README calls it), as a user's shell starts it."""
    found = Path(sys.executable).parent / "snakemake"
    if not found.exists():
        found = shutil.which("snakemake")
        if found is None:
            raise AssertionError(f"no snakemake command beside {sys.executable} or on PATH: install the package "
                                 f"(pip install -e '.[test]') into the environment that runs the tests")
    return [str(found)]


def snakemake(workdir: Path, *args, configfile: Path | None = None, snakefile: Path | None = None,
              check: bool = True, timeout: float = 600, env: dict[str, str] | None = None,
              inside: bool = False) -> subprocess.CompletedProcess:
    """Run the real workflow as a user does: the environment's ``snakemake``
    command in a new process, each job started by Snakemake itself. From a
    test under tests/workflow/ only, which the ``workflow`` mark leaves out of
    the unit tests' run. ``inside``: in ``workdir`` itself, a copy of the
    project (:func:`copy_project`), as the README's commands run; else the
    repository's Snakefile (or ``snakefile``) with ``workdir`` as Snakemake's
    working directory (``-s``/``-d``). ``env``: variables set for this run
    over the test process's (its jobs inherit them)."""
    current = os.environ.get("PYTEST_CURRENT_TEST", "")
    if current and not current.startswith("tests/workflow/"):
        raise AssertionError(f"{current.split('::')[0]} starts Snakemake: its test belongs under tests/workflow/")
    where = [] if inside else ["-s", str(snakefile or REPO / "Snakefile"), "-d", str(workdir)]
    args = [*where, *(["--configfile", str(configfile)] if configfile is not None else []), *map(str, args)]
    proc = subprocess.run([*snakemake_command(), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=workdir if inside else None, env={**os.environ, **(env or {})})
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def dry_run_jobs(workdir: Path, *args, **kw) -> dict[str, int]:
    """Job counts per rule of a dry run (empty when there is nothing to do)."""
    proc = snakemake(workdir, "-n", *args, **kw)
    return job_counts(proc.stdout + proc.stderr)


def job_counts(out: str) -> dict[str, int]:
    """Job counts per rule from a dry run's output (its "Job stats" table)."""
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


def token_files(normalized: Path, seqs) -> dict[str, Path]:
    """The tokens stage's files for the tokenizers ``seqs`` and FTS5's (what
    sharing.write_segments reads), written beside a normalized folder's tables."""
    from memobench.memo.tokenize import write_tokens

    tokens = {seq: normalized / f"tokens_{seq}.arrow" for seq in {*seqs, "fts5"}}
    for seq, path in tokens.items():
        write_tokens(normalized / "events.parquet", seq, path, log=lambda *a, **k: None)
    return tokens


def copy_project(dest: Path, *more: str) -> Path:
    """A scratch copy of the project (the workflow, the package and the
    config; ``more``: other top-level names, e.g. ``tests``), for tests that
    edit code or run the README's commands where a clone would."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("Snakefile", "config.yaml", "workflow", "src", "envs", *more):
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", ".pytest_cache"))
        else:
            shutil.copy2(src, dest / name)
    return dest


def tiny_normalized(tmp_path: Path) -> Path:
    """A generated LongMemEval file (4 questions x 8 sessions, seed 5),
    normalized: the folder of its four tables (the embedding tests' input)."""
    from memobench.datasets.normalize import normalize_longmemeval
    from memobench.tools.generate.longmemeval import write_longmemeval

    raw = tmp_path / "lme.json"
    write_longmemeval(raw, 4, 8, seed=5, turns=(2, 4), words_per_turn=(4, 20))
    norm = tmp_path / "norm"
    normalize_longmemeval(raw, norm, log=lambda m: None)
    return norm


def reference_command(documents: str, mcp: str | None = None, port: int | None = None, retriever: str = "bm25s",
                      grain: str = "session") -> list[str]:
    """``memobench serve`` of ``retriever`` over ``documents`` (HTTP, or MCP over stdio or http), ranking
    sessions or turns (``grain``)."""
    return ([sys.executable, "-m", "memobench.cli", "serve", "--retriever", retriever, "--documents", documents]
            + (["--grain", grain] if grain != "session" else [])
            + (["--mcp", mcp] if mcp else []) + ([] if port is None else ["--port", str(port)]))


class ReferenceServer:
    """The reference memory service (``memobench serve``, bm25s unless said) as its own process on
    127.0.0.1, over the HTTP API or (``mcp="http"``) MCP's streamable HTTP; ``url`` is where it
    listens, ``restart`` brings it back on the same port, empty."""

    def __init__(self, documents: str = "all", port: int = 0, mcp: str | None = None, retriever: str = "bm25s",
                 grain: str = "session"):
        self.documents, self.mcp, self.retriever, self.grain = documents, mcp, retriever, grain
        self.proc = subprocess.Popen(reference_command(documents, mcp, port, retriever, grain),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, "PYTHONPATH": str(REPO / "src")})
        line = self.proc.stdout.readline()
        if not line.startswith(f"memobench: serving {retriever}"):
            raise AssertionError(f"the reference server did not start: {line}{self.proc.stderr.read()}")
        self.url = line.split(" on ")[1].strip()
        self.port = int(self.url.split(":")[2].split("/")[0])

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def restart(self) -> None:
        self.kill()
        self.proc = ReferenceServer(self.documents, self.port, self.mcp, self.retriever, self.grain).proc



def memobench_lines(text: str) -> list[str]:
    """Each ``memobench:`` message in a run's output, one per line, also
    where it landed after Snakemake's own text on a line (Snakemake writes a
    message and its newline in two writes, and a job, its own process,
    writes to the same stream between them)."""
    return [m.group(0) for m in re.finditer(r"memobench: .*", text)]
