"""The workflow tests' job server (tests/helpers/job_server.py) runs a job's
script the way ``python script.py`` would: the folder, environment, streams,
``sys.argv`` and ``sys.path[0]``, the exit status, a signal's death, atexit
functions and its own random seeds; a killed client takes its job with it;
anything it cannot serve runs as a new process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import REPO
from tests.helpers.job_server import SINGLE_THREAD

SCRIPT = """
import atexit, json, os, random, sys, time
atexit.register(lambda: print("atexit ran", flush=True))
print(json.dumps({"pid": os.getpid(), "argv": sys.argv, "path0": sys.path[0], "cwd": os.getcwd(),
                  "var": os.environ.get("JOB_VAR"), "numpy": "numpy" in sys.modules,
                  "random": random.random(), "file": __file__, "name": __name__}), flush=True)
print("to stderr", file=sys.stderr, flush=True)
if os.environ.get("JOB_SLEEP"):
    open(os.environ["JOB_SLEEP"], "w").write(str(os.getpid()))
    time.sleep(60)
if os.environ.get("JOB_RAISE"):
    raise ValueError("the job failed")
sys.exit(int(os.environ.get("JOB_RC", "0")))
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("jobs")
    proc = subprocess.Popen([sys.executable, str(REPO / "tests" / "helpers" / "job_server.py"), str(folder)],
                            env={**os.environ, **SINGLE_THREAD}, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    client = json.loads(proc.stdout.readline())["client"]
    yield client
    proc.kill()
    proc.wait()


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "work" / ".snakemake" / "scripts" / "tmpjob.stage.py"
    path.parent.mkdir(parents=True)
    path.write_text(SCRIPT, encoding="utf-8")
    return path


def _run(client, script, **env):
    return subprocess.run([client, str(script.relative_to(script.parents[2]))], cwd=script.parents[2],
                          env={**os.environ, **SINGLE_THREAD, **env}, capture_output=True, text=True, timeout=60)


def _facts(proc):
    return json.loads(proc.stdout.splitlines()[0])


def test_a_job_runs_forked_as_python_would_run_it(server, script):
    one, two = _run(server, script, JOB_VAR="x"), _run(server, script, JOB_RC="3")
    assert one.returncode == 0 and two.returncode == 3
    facts = _facts(one)
    assert facts["numpy"], "not a fork of the server (numpy is preloaded there only)"
    assert facts["argv"] == [".snakemake/scripts/tmpjob.stage.py"] and facts["name"] == "__main__"
    assert facts["path0"] == str(script.parent) and facts["file"] == str(script)
    assert facts["cwd"] == str(script.parents[2]) and facts["var"] == "x" and _facts(two)["var"] is None
    assert facts["random"] != _facts(two)["random"]  # each job seeds its own
    assert one.stdout.splitlines()[-1] == "atexit ran" and one.stderr == "to stderr\n"


def test_an_exception_fails_with_its_traceback(server, script):
    proc = _run(server, script, JOB_RAISE="1")
    assert proc.returncode == 1 and "ValueError: the job failed" in proc.stderr
    assert proc.stdout.splitlines()[-1] == "atexit ran"


def _started(client, script, tmp_path):
    marker = tmp_path / "job.pid"
    proc = subprocess.Popen([client, str(script)], cwd=tmp_path, env={**os.environ, **SINGLE_THREAD,
                                                                       "JOB_SLEEP": str(marker)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not (marker.exists() and marker.read_text()):
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.02)
    return proc, int(marker.read_text())


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0]
        except (FileNotFoundError, IndexError):
            return True
        if state == "Z":
            return True
        time.sleep(0.02)
    return False


def test_a_signal_to_the_client_ends_the_job_and_the_client_dies_of_it(server, script, tmp_path):
    proc, job = _started(server, script, tmp_path)
    assert job != proc.pid
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM
    assert _gone(job)


def test_a_killed_client_takes_its_job_with_it(server, script, tmp_path):
    proc, job = _started(server, script, tmp_path)
    proc.kill()
    proc.wait(timeout=30)
    assert _gone(job)


def test_what_it_cannot_serve_runs_as_a_new_process(server, script):
    threads = _run(server, script, OMP_NUM_THREADS="2")  # a variable read when numpy loads differs
    assert threads.returncode == 0 and not _facts(threads)["numpy"]
    code = subprocess.run([server, "-c", "import sys; print(sys.argv)"], capture_output=True, text=True, timeout=60)
    assert code.returncode == 0 and code.stdout == "['-c']\n"
