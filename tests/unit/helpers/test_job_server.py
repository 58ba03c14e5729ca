"""The workflow tests' job server (tests/helpers/job_server.py) runs a job's
script the way ``python script.py`` does, checked against the real thing:
the folder, environment, streams, ``sys.argv`` and ``sys.path[0]``, the exit
status (odd codes, an exception, an interrupt), threads joined, atexit
functions, files flushed when the interpreter ends, its own random seeds; a
signal to the client reaches the job and the client dies of it; a killed
client takes its job with it; anything it cannot serve runs as a new process;
the package it preloads is seen by the workflow's stage script only."""

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
from tests.helpers.job_server import IMPORTS_VAR, SINGLE_THREAD, THREADS, threads_env

SCRIPT = """
import atexit, json, os, random, signal, sys, threading, time
atexit.register(lambda: print("atexit ran", flush=True))
print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "cwd": os.getcwd(), "var": os.environ.get("JOB_VAR"),
                  "file": __file__, "name": __name__,
                  "signals": {s.name: str(signal.getsignal(s)) for s in signal.Signals if s not in (9, 19)},
                  "mask": sorted(signal.pthread_sigmask(signal.SIG_BLOCK, []))}), flush=True)
print("to stderr", file=sys.stderr, flush=True)
if os.environ.get("JOB_OPEN"):  # never closed: written when the interpreter ends
    kept = open(os.environ["JOB_OPEN"], "w")
    kept.write("data")
if os.environ.get("JOB_THREAD"):  # joined before the interpreter ends
    threading.Thread(target=lambda: (time.sleep(0.3), open(os.environ["JOB_THREAD"], "w").write("t"))).start()
if os.environ.get("JOB_SLEEP"):
    open(os.environ["JOB_SLEEP"], "w").write(str(os.getpid()))
    time.sleep(60)
if os.environ.get("JOB_RAISE"):
    raise {"interrupt": KeyboardInterrupt, "error": ValueError}[os.environ["JOB_RAISE"]]("the job failed")
if os.environ.get("JOB_EXIT"):
    sys.exit(json.loads(os.environ["JOB_EXIT"]))
"""
NOT_COMPARED = ("numpy", "random")  # what a fork differs in by design, reported on a line of its own
FACTS = 'import json, random, sys; print(json.dumps({"numpy": "numpy" in sys.modules, "random": random.random()}))\n'


def _ignoring(*signals, blocking=()):
    """For preexec_fn: a process started with these signals ignored and those blocked."""
    def setup():
        for sig in signals:
            signal.signal(sig, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, blocking)
    return setup


def _defaults(*signals):
    """For preexec_fn: these signals at their defaults, whatever the test process inherited (a suite started
    in the background ignores SIGINT)."""
    def setup():
        for sig in signals:
            signal.signal(sig, signal.SIG_DFL)
    return setup


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    """The server ignores SIGINT and SIGTERM and blocks SIGUSR2: a job has the client's signals, never these."""
    folder = tmp_path_factory.mktemp("jobs")
    proc = subprocess.Popen([sys.executable, str(REPO / "tests" / "helpers" / "job_server.py"), str(folder)],
                            env={**os.environ, **SINGLE_THREAD}, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            preexec_fn=_ignoring(signal.SIGINT, signal.SIGTERM, blocking=[signal.SIGUSR2]))
    path = json.loads(proc.stdout.readline())["client"]
    if path is None:
        proc.wait()
        pytest.skip("no pidfd_open here: the job server serves nothing and every job starts fresh")
    yield path
    proc.kill()
    proc.wait()


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "work" / ".snakemake" / "scripts" / "tmpjob.stage.py"
    path.parent.mkdir(parents=True)
    path.write_text(FACTS + SCRIPT, encoding="utf-8")
    return path


def _run(python, script, preexec=None, **env):
    return subprocess.run([python, str(script.relative_to(script.parents[2]))], cwd=script.parents[2],
                          env={**os.environ, **SINGLE_THREAD, **env}, capture_output=True, text=True, timeout=60,
                          preexec_fn=preexec or _defaults(signal.SIGINT, signal.SIGTERM))


def _facts(proc) -> dict:
    return json.loads(proc.stdout.splitlines()[0])


@pytest.mark.parametrize("env", [{"JOB_VAR": "x"}, {"JOB_EXIT": "3"}, {"JOB_EXIT": "-100"}, {"JOB_EXIT": "-1"},
                                 {"JOB_EXIT": "256"}, {"JOB_EXIT": '"a message"'}, {"JOB_EXIT": "null"},
                                 {"JOB_RAISE": "error"}, {"JOB_RAISE": "interrupt"}, {"JOB_OPEN": "open.txt"},
                                 {"JOB_THREAD": "thread.txt"}], ids=lambda e: "-".join(f"{k}={v}" for k, v in e.items()))
def test_a_job_ends_as_python_would_end_it(client, script, env):
    work = script.parents[2]
    served = _run(client, script, **env)
    files = {p.name: p.read_text() for p in work.glob("*.txt")}
    for p in work.glob("*.txt"):
        p.unlink()
    fresh = _run(sys.executable, script, **env)
    assert _facts(served)["numpy"] and not _facts(fresh)["numpy"], "served by a fork (numpy is preloaded there only)"
    assert served.returncode == fresh.returncode
    assert served.stdout.splitlines()[1:] == fresh.stdout.splitlines()[1:]
    # a traceback names the server's frames above the script's: compared from the script's on
    assert served.stderr.split(f'"{script}"')[-1] == fresh.stderr.split(f'"{script}"')[-1]
    assert files == {p.name: p.read_text() for p in work.glob("*.txt")}


@pytest.mark.parametrize("preexec", [_ignoring(signal.SIGINT, signal.SIGHUP, signal.SIGCHLD),
                                     _ignoring(signal.SIGTERM, blocking=[signal.SIGUSR1, signal.SIGINT])],
                         ids=["ignoring", "blocking"])
def test_a_job_has_the_signals_of_a_new_process_from_its_client(client, script, preexec):
    served, fresh = _run(client, script, preexec), _run(sys.executable, script, preexec)
    assert _facts(served)["numpy"] and not _facts(fresh)["numpy"], "served by a fork (numpy is preloaded there only)"
    assert json.loads(served.stdout.splitlines()[1]) == json.loads(fresh.stdout.splitlines()[1])


def test_each_job_has_its_own_random_seed(client, script):
    assert _facts(_run(client, script))["random"] != _facts(_run(client, script))["random"]


def _started(client, script, tmp_path, preexec=None):
    marker = tmp_path / "job.pid"
    proc = subprocess.Popen([client, str(script)], cwd=tmp_path, env={**os.environ, **SINGLE_THREAD,
                                                                       "JOB_SLEEP": str(marker)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=preexec or _defaults(signal.SIGINT, signal.SIGTERM))
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
        except (FileNotFoundError, ProcessLookupError, IndexError):  # reaped, between the open and the read too
            return True
        if state == "Z":
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_client_reaches_the_job_and_the_client_dies_of_it(client, script, tmp_path, sig):
    proc, job = _started(client, script, tmp_path)
    assert job != proc.pid
    proc.send_signal(sig)
    assert proc.wait(timeout=30) == -sig
    assert _gone(job)


@pytest.mark.parametrize("python", ["served", "fresh"])
def test_a_signal_the_client_ignores_is_ignored_by_the_job(client, script, tmp_path, python):
    proc, job = _started(client if python == "served" else sys.executable, script, tmp_path,
                         _ignoring(signal.SIGINT))
    proc.send_signal(signal.SIGINT)
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=1)
    proc.terminate()
    assert proc.wait(timeout=30) == -signal.SIGTERM
    assert _gone(job)


def test_a_killed_client_takes_its_job_with_it(client, script, tmp_path):
    proc, job = _started(client, script, tmp_path)
    proc.kill()
    proc.wait(timeout=30)
    assert _gone(job)


def test_a_job_given_two_threads_is_served_by_the_two_thread_server(client, script):
    served, fresh = _run(client, script, **threads_env(2)), _run(sys.executable, script, **threads_env(2))
    assert _facts(served)["numpy"] and served.returncode == fresh.returncode == 0
    assert served.stdout.splitlines()[1:] == fresh.stdout.splitlines()[1:]


def test_what_it_cannot_serve_runs_as_a_new_process(client, script, tmp_path):
    for env in (threads_env(3), {"OMP_NUM_THREADS": "2"}):  # no server has these thread counts
        threads = _run(client, script, **env)  # variables read when numpy loads
        assert threads.returncode == 0 and not _facts(threads)["numpy"]
    code = subprocess.run([client, "-c", "import sys; print(sys.argv)"], capture_output=True, text=True, timeout=60)
    assert code.returncode == 0 and code.stdout == "['-c']\n"
    # a client whose servers are gone
    orphan = tmp_path / "python"
    text = Path(client).read_text()
    for n in THREADS:
        text = text.replace(str(Path(client).parent / f"jobs-{n}.sock"), str(tmp_path / "none"))
    orphan.write_text(text)
    orphan.chmod(0o755)
    gone = _run(str(orphan), script)
    assert gone.returncode == 0 and not _facts(gone)["numpy"]


def test_a_job_sees_its_folder_arguments_and_environment(client, script):
    served, fresh = _run(client, script, JOB_VAR="x"), _run(sys.executable, script, JOB_VAR="x")
    facts = _facts(served)
    assert facts["numpy"]
    first = json.loads(served.stdout.splitlines()[1])
    assert first == json.loads(fresh.stdout.splitlines()[1])
    assert first["argv"] == [".snakemake/scripts/tmpjob.stage.py"] and first["name"] == "__main__"
    assert first["path0"] == str(script.parent) and first["file"] == str(script) and first["var"] == "x"
    assert served.stderr == "to stderr\n"


PACKAGE = ('import json, sys\nprint(json.dumps(sorted(m for m in sys.modules if m == "memobench" '
           'or m.startswith("memobench."))))\n')


def test_only_a_job_of_the_checkouts_stage_script_finds_the_package_imported(client, tmp_path):
    """The package is preloaded for Snakemake's copies of workflow/scripts/stage.py (their preamble names
    it); any other script, or a job recording its imports, starts without it, as a new process does."""
    scripts = tmp_path / ".snakemake" / "scripts"  # where Snakemake writes a job's script: what is served
    scripts.mkdir(parents=True)
    other = scripts / "tmpother.py"
    other.write_text(PACKAGE, encoding="utf-8")
    stage = scripts / "tmpjob.stage.py"
    stage.write_text(f"__file__ = {str(REPO / 'workflow' / 'scripts' / 'stage.py')!r};\n" + PACKAGE,
                     encoding="utf-8")
    run = {name: subprocess.run([client, str(path)], cwd=tmp_path, env={**os.environ, **SINGLE_THREAD, **env},
                                capture_output=True, text=True, timeout=60, preexec_fn=_defaults(signal.SIGINT))
           for name, path, env in (("other", other, {}), ("stage", stage, {}),
                                   ("recording", stage, {IMPORTS_VAR: str(tmp_path)}))}
    fresh = subprocess.run([sys.executable, str(stage)], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert json.loads(fresh.stdout) == json.loads(run["other"].stdout) == json.loads(run["recording"].stdout) == []
    assert "memobench.stages.adapter" in json.loads(run["stage"].stdout)
