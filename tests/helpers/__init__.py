"""What the tests share beyond fixtures: the repository, how to find the real
LoCoMo file, and how to run the real Snakemake workflow in a scratch
directory (tests/workflow/ only: a unit test that starts it fails, naming
where it belongs)."""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from tests.helpers.job_server import SINGLE_THREAD, startup_env

REPO = Path(__file__).resolve().parents[2]
SHARED_LOCOMO = REPO.parent / "shared" / "data" / "locomo10.json"
SKIP_PREFIX = "real LoCoMo file unavailable"


def locomo_cache() -> Path:
    """Where the tests keep their downloaded copy: $MEMOBENCH_CACHE, else the
    user's cache directory (~/.cache/memobench)."""
    if os.environ.get("MEMOBENCH_CACHE"):
        return Path(os.environ["MEMOBENCH_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "memobench"


def find_locomo(config: Path = REPO / "config.yaml", shared: Path = SHARED_LOCOMO) -> tuple[Path | None, str]:
    """The real locomo10.json the way a user gets it, and how it was found, in
    this order: MEMOBENCH_LOCOMO when set; else where the README tells users
    to place it, the config's ``data_dir`` (relative to the config's folder,
    the repository root for config.yaml), when it has the published bytes and
    sha256; else the pipeline's own download (config.yaml's URLs, byte count
    and sha256) into the cache, once; else ../shared/data. Returns (None, why)
    when none of them has it."""
    from memobench.datasets.download import DownloadError, fetch, verify

    cfg = yaml.safe_load(Path(config).read_text(encoding="utf-8"))
    ds = cfg["datasets"]["locomo10"]
    if os.environ.get("MEMOBENCH_LOCOMO"):
        p = Path(os.environ["MEMOBENCH_LOCOMO"])
        return (p, f"MEMOBENCH_LOCOMO={p}") if p.exists() else (None, f"MEMOBENCH_LOCOMO={p} does not exist")
    tried = []

    def verified(path: Path, where: str) -> bool:
        try:
            verify(path, ds["bytes"], ds["sha256"])
            return True
        except DownloadError as e:
            tried.append(f"{where}: {e}")
            return False

    placed = Path(config).resolve().parent / cfg.get("data_dir", "data") / ds["file"]
    if placed.exists() and verified(placed, "data_dir"):
        return placed, f"data_dir {placed}"
    cached = locomo_cache() / ds["file"]
    if cached.exists():
        if verified(cached, "cache"):
            return cached, f"cache {cached}"
    else:
        try:
            fetch(ds["urls"], cached, ds["bytes"], sha256=ds["sha256"], log=lambda msg: None)
            return cached, f"downloaded into {cached}"
        except DownloadError as e:
            tried.append(f"download: {e}")
    if shared.exists():
        return shared, f"{shared}"
    tried.append(f"not in data_dir ({placed}) nor at {shared}")
    return None, "; ".join(tried) + f"; place it at {placed} or set MEMOBENCH_LOCOMO=/path/to/locomo10.json"


def data_dir(root: Path, *files: Path) -> Path:
    """``root/data`` holding copies of ``files`` (a user's hand-placed raw files)."""
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    for f in files:
        shutil.copy(f, data / f.name)
    return data


def small_datasets(data: Path, locomo_path: Path, variants: list[str], seed: int, spice: bool = False) -> dict:
    """Write into ``data`` the real LoCoMo file's first conversation (19
    sessions) with its first 40 questions, ``locomo1.json``, and a generated
    LongMemEval file of 10 questions x 6 sessions, ``lme.json``; return their
    ``datasets`` config (LoCoMo in one segment, LongMemEval in two), each
    running ``variants``."""
    import json

    from memobench.tools.generate.longmemeval import write_longmemeval

    data.mkdir(parents=True, exist_ok=True)
    convs = json.loads(locomo_path.read_text(encoding="utf-8"))
    (data / "locomo1.json").write_text(json.dumps([{**convs[0], "qa": convs[0]["qa"][:40]}]), encoding="utf-8")
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


def snakemake(workdir: Path, *args, configfile: Path | None = None, snakefile: Path | None = None,
              check: bool = True, timeout: float = 600, fresh: bool = False,
              hash_seed: int | None = None) -> subprocess.CompletedProcess:
    """Run the real workflow (the repository's Snakefile unless given) in
    ``workdir``: from a test under tests/workflow/ only, which the
    ``workflow`` mark leaves out of the unit tests' run. Snakemake's command
    line runs in a fork of a process that has imported it already
    (:mod:`tests.helpers.snakemake_server`), and its jobs in forks of
    :mod:`tests.helpers.job_server`, unless ``fresh`` (new processes, each
    with its own hash seed: for a test comparing the bytes of two runs) or
    the variables read when a process starts (``PYTHON*``, thread counts:
    ``job_server.startup_env``) differ from that process's. ``hash_seed``:
    forks of a pair of servers started with that hash seed (one such pair
    at a time), so that a run and all its jobs hash strings as that seed
    says, another run's seed differing."""
    current = os.environ.get("PYTEST_CURRENT_TEST", "")
    if current and not current.startswith("tests/workflow/"):
        raise AssertionError(f"{current.split('::')[0]} starts Snakemake: its test belongs under tests/workflow/")
    args = ["-s", str(snakefile or REPO / "Snakefile"), "-d", str(workdir),
            *(["--configfile", str(configfile)] if configfile is not None else []), *map(str, args)]
    server = _SERVER if hash_seed is None else _seeded_server(hash_seed)
    if fresh or not server.serves(os.environ):
        proc = subprocess.run([sys.executable, "-m", "snakemake", *args], capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, **server.extra})
    else:
        proc = server.run(args, timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


class _SnakemakeServer:
    """The client of tests/helpers/snakemake_server.py: started at its first
    use, one per test process, ended with it (its stdin closes)."""

    def __init__(self, extra: dict[str, str] | None = None):
        self.extra = extra or {}  # variables set for this server and its runs, over the test process's
        self.proc = None
        self.env = None
        self.folder = None
        self.pending = b""
        self.jobs = None  # the job server (tests/helpers/job_server.py)
        self.job_python = None

    def serves(self, env) -> bool:
        return self.env is None or startup_env({**env, **self.extra}) == self.env

    def close(self) -> None:
        for proc in (self.proc, self.jobs):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()

    def run(self, args: list[str], timeout: float) -> subprocess.CompletedProcess:
        env = {**os.environ, **self.extra}
        if self.proc is None or self.proc.poll() is not None:
            self.env = startup_env(env)
            if self.folder is None:  # where each run's stdout and stderr go, removed when the tests end
                self.folder = Path(tempfile.mkdtemp(prefix="snakemake-server-"))
                atexit.register(shutil.rmtree, self.folder, ignore_errors=True)
            self.proc = subprocess.Popen([sys.executable, "-m", "tests.helpers.snakemake_server"], cwd=REPO,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0, env=env)
            self.pending = b""
            self.job_python = self._start_job_server()
        out, err = self.folder / "stdout", self.folder / "stderr"
        request = json.dumps({"args": args, "cwd": os.getcwd(), "env": env, "python": self.job_python,
                              "out": str(out), "err": str(err)}).encode() + b"\n"
        while request:
            request = request[os.write(self.proc.stdin.fileno(), request):]
        pid = self._reply(None)["pid"]
        reply = self._reply(time.monotonic() + timeout)
        if reply is None:  # past the timeout: killed, as subprocess.run kills its process
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._reply(None)
        stdout, stderr = (p.read_text(errors="replace") for p in (out, err))
        if reply is None:
            raise subprocess.TimeoutExpired(["snakemake", *args], timeout, stdout, stderr)
        return subprocess.CompletedProcess(["snakemake", *args], reply["rc"], stdout, stderr)

    def _start_job_server(self) -> str | None:
        """Starts tests/helpers/job_server.py (ended with this process); the
        Python its runs' jobs name, or None (they start as new processes)
        when it cannot serve (a path too long for a script's first line, no
        ``pidfd_open``, a server that did not start) or
        ``MEMOBENCH_TEST_FRESH_JOBS`` is set."""
        if self.jobs is not None and self.jobs.poll() is None:
            self.jobs.kill()
        if os.environ.get("MEMOBENCH_TEST_FRESH_JOBS"):  # every job a new process (docs/testing.md)
            return None
        folder = Path(tempfile.mkdtemp(prefix="jobs-", dir=self.folder))
        if len(sys.executable) > 100 or len(str(folder)) > 80:  # a shebang's and a socket path's limits
            return None
        self.jobs = subprocess.Popen([sys.executable, str(REPO / "tests" / "helpers" / "job_server.py"), str(folder)],
                                     cwd=REPO, env={**os.environ, **self.extra, **SINGLE_THREAD},
                                     stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE)
        atexit.register(self.jobs.kill)
        started = self.jobs.stdout.readline()
        return json.loads(started)["client"] if started else None

    def _reply(self, deadline: float | None) -> dict | None:
        """The server's next line (None at ``deadline``), read unbuffered so
        that waiting on the pipe never misses a line already read."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.pending:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([fd], [], [], wait)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError("the Snakemake server ended")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return json.loads(line)


_SERVER = _SnakemakeServer()
_SEEDED: dict[int, _SnakemakeServer] = {}


def _seeded_server(seed: int) -> _SnakemakeServer:
    """The servers started with hash seed ``seed``; another seed's are ended (each pair holds a few
    hundred MB)."""
    for other in [s for s in _SEEDED if s != seed]:
        _SEEDED.pop(other).close()
    if seed not in _SEEDED:
        _SEEDED[seed] = _SnakemakeServer({"PYTHONHASHSEED": str(seed)})
    return _SEEDED[seed]


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

