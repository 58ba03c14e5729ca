"""Interrupted runs and determinism: kill a real Snakemake run (its whole
process group, like a crash) during download, normalize and retrieval; the
rerun resumes the download, never trusts a half-written output, and ends
byte-identical to an uninterrupted run. Outputs are identical across reruns and
across --cores 1 and --cores 2."""

from __future__ import annotations

import functools
import hashlib
import http.server
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import REPO, data_dir, snakemake, snakemake_command, write_config
from memobench.tools.generate.longmemeval import write_longmemeval


def digest_tree(results: Path) -> dict[str, str]:
    """sha256 of every output under results/, logs and the shared retrieval's
    internal cache (keys hold file stamps) excepted."""
    return {
        str(p.relative_to(results)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(results.rglob("*"))
        if p.is_file() and not {"logs", "cache"} & set(p.relative_to(results).parts)
    }


class Throttled(http.server.SimpleHTTPRequestHandler):
    """Serves files with Range support; slow when the server's ``slow`` flag is set."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        path = Path(self.directory) / self.path.lstrip("/")
        data = path.read_bytes()
        self.server.ranges.append(self.headers.get("Range"))
        start = 0
        rng = self.headers.get("Range")
        if rng:
            start = int(rng.split("=")[1].split("-")[0])
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(data) - start))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        step = 64 * 1024
        try:
            for i in range(start, len(data), step):
                self.wfile.write(data[i : i + step])
                if self.server.slow:
                    time.sleep(0.05)
        except (BrokenPipeError, ConnectionResetError):
            pass


def serve(directory: Path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Throttled, directory=str(directory)))
    server.ranges, server.slow = [], True
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def start_run(workdir: Path, cfg: Path, *targets) -> subprocess.Popen:
    cmd = [*snakemake_command(), "-s", str(REPO / "Snakefile"), "-d", str(workdir),
           "--configfile", str(cfg), "--cores", "2", *targets]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def rerun_after_crash(work: Path, cfg: Path) -> None:
    """What a user does after a crash (README "Failure modes"): release
    Snakemake's lock and run again, redoing the jobs the crash left marked
    incomplete. Outputs are written atomically, so nothing half-written exists."""
    snakemake(work, "--unlock", configfile=cfg)
    snakemake(work, "--cores", "2", "--rerun-incomplete", configfile=cfg)


def kill_when(proc: subprocess.Popen, condition, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return
        if proc.poll() is not None:
            pytest.fail("the run finished before it could be interrupted")
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    pytest.fail("the interruption point was never reached")


@pytest.fixture(scope="module")
def big_lme(tmp_path_factory):
    path = tmp_path_factory.mktemp("big") / "big.json"
    write_longmemeval(path, n_questions=120, sessions_per_question=40, seed=9, target_bytes=60_000_000)
    return path


def _config(root: Path, data: Path, raw_name: str, size: int, urls=()):
    ds = {"format": "longmemeval", "family": "s", "file": raw_name, "bytes": size, "urls": list(urls),
          "segments": 2, "variants": ["v0.8.0"]}
    return write_config(root / "cfg.yaml", data_dir=str(data), run=["big"], datasets={"big": ds})


@pytest.fixture(scope="module")
def reference(tmp_path_factory, big_lme):
    """An uninterrupted run: the bytes every interrupted run must end with."""
    root = tmp_path_factory.mktemp("reference")
    data = data_dir(root, big_lme)
    cfg = _config(root, data, "big.json", big_lme.stat().st_size)
    work = root / "work"
    work.mkdir()
    snakemake(work, "--cores", "2", configfile=cfg)
    return digest_tree(work / "results")


def _same_outputs(work: Path, reference: dict) -> None:
    ours = digest_tree(work / "results")
    # verified.json and summaries name the raw path, which differs per test; compare the rest
    differing = [k for k in reference if ours.get(k) != reference[k] and not k.endswith(("raw.json", "verified.json", "manifest.json", "summary.json"))]
    assert set(ours) == set(reference) and not differing, differing


def test_kill_during_download_then_resume(tmp_path, big_lme, reference):
    served = tmp_path / "served"
    served.mkdir()
    shutil.copy(big_lme, served / "big.json")
    server = serve(served)
    try:
        data = tmp_path / "data"
        cfg = _config(tmp_path, data, "big.json", big_lme.stat().st_size,
                      urls=[f"http://127.0.0.1:{server.server_address[1]}/big.json"])
        work = tmp_path / "work"
        work.mkdir()
        part = data / "big.json.part"
        proc = start_run(work, cfg)
        kill_when(proc, lambda: part.exists() and part.stat().st_size > 2_000_000)
        assert not (data / "big.json").exists()
        done = part.stat().st_size
        server.slow = False
        rerun_after_crash(work, cfg)
    finally:
        server.shutdown()
    assert (data / "big.json").read_bytes() == big_lme.read_bytes()
    resumed = [r for r in server.ranges if r]
    assert resumed and int(resumed[-1].split("=")[1].split("-")[0]) >= done
    _same_outputs(work, reference)


@pytest.mark.parametrize("stage", ["normalize", "retrieve"])
def test_kill_during_a_stage_then_rerun(tmp_path, big_lme, reference, stage):
    data = data_dir(tmp_path, big_lme)
    cfg = _config(tmp_path, data, "big.json", big_lme.stat().st_size)
    work = tmp_path / "work"
    work.mkdir()
    if stage == "normalize":
        where = work / "results" / "big" / "normalized"
        proc = start_run(work, cfg)
        kill_when(proc, lambda: where.exists() and any(p.name.endswith(".tmp") for p in where.iterdir()))
        assert not (where / "summary.json").exists()
    else:
        logs = work / "results" / "logs" / "retrieve" / "big" / "v0.8.0"
        proc = start_run(work, cfg)
        kill_when(proc, lambda: logs.exists() and any(logs.iterdir()))
        assert not (work / "results" / "big" / "v0.8.0" / "metrics.json").exists()
    rerun_after_crash(work, cfg)
    _same_outputs(work, reference)


def test_deterministic_across_cores_and_reruns(tmp_path, locomo_path):
    # a file of about 6 MB: the 60 MB one the kills need is read in one part too (inparts.PART_MIN_BYTES),
    # so its size adds time here and no path; 45 questions are 15 a segment, each its own haystack
    lme = tmp_path / "lme" / "big.json"
    lme.parent.mkdir()
    write_longmemeval(lme, n_questions=45, sessions_per_question=40, seed=9)
    data = data_dir(tmp_path, locomo_path, lme)
    ds = {"format": "longmemeval", "family": "m", "file": "big.json", "bytes": lme.stat().st_size,
          "segments": 3, "variants": ["v0.8.0", "v0.8.0-index"]}
    cfg = write_config(tmp_path / "cfg.yaml", data_dir=str(data), run=["locomo10", "big", "zh"],
                       # LoCoMo's two search paths (FTS5 and the inverted index), in three segments
                       datasets={"big": ds, "locomo10": {"segments": 3, "variants": ["v0.8.0", "v0.8.0-index"]}})
    # hash seeds: one for the first run and all its jobs, a new one for each process of the second
    # (as a user's run is), a third for the rerun
    digests = []
    for name, cores, env in (("one", "1", {"PYTHONHASHSEED": "1"}), ("two", "2", {"PYTHONHASHSEED": "random"})):
        work = tmp_path / name
        work.mkdir()
        snakemake(work, "--cores", cores, configfile=cfg, env=env)
        digests.append(digest_tree(work / "results"))
    assert digests[0] == digests[1]
    snakemake(tmp_path / "one", "--cores", "2", "--forceall", configfile=cfg, env={"PYTHONHASHSEED": "2"})
    assert digest_tree(tmp_path / "one" / "results") == digests[0]
    # --forceall reruns the download stage too, which must leave hand-placed raw files alone
    assert (data / "big.json").read_bytes() == lme.read_bytes()
