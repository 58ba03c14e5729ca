"""Runs the workflow's jobs in forks of a process that has already imported
what a job imports from outside the package (Snakemake's script support,
numpy, pyarrow, ijson, scipy): that import is most of a small job's time,
and the suite runs about thirteen hundred jobs.

Started by :class:`tests.helpers._SnakemakeServer` next to its Snakemake
server, whose runs then name :data:`CLIENT` (written next to the socket) as
the Python that runs a rule's script: ``<client> <script.py>``. The client
sends its folder, environment and standard streams (the descriptors
themselves) over the socket; the server forks a watcher, which forks the
job: the job takes the folder, the environment and the streams, and runs
the script as ``python script.py`` would (``sys.argv``, ``sys.path[0]``,
``__main__``, threads joined and atexit functions run at the end, fresh
seeds for ``random`` and numpy). The watcher sends the job's pid, forwards
nothing itself, kills the job when the client goes away (Snakemake killed
it), and sends the exit status, which the client exits with (a signal's
death too). The client forwards the signals Snakemake sends it.

Nothing of the memobench package is imported here: the script imports it
from its own ``src/`` in each job, as a new process does. A job runs as a
new process instead when the client is asked anything else, when the
server cannot be reached, or when a variable read as a module is imported
(``PYTHON*``, the thread counts Snakemake sets per job: :data:`STARTUP_VARS`)
differs from the server's: the server is started with one thread, so a rule
with more runs fresh. Every job shares the server's hash seed; a test that
compares the bytes of two runs starts fresh processes (``fresh=True``).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys

# third-party only: what the jobs import
PRELOAD = ("snakemake.script", "numpy", "pyarrow", "pyarrow.parquet", "pyarrow.compute", "pyarrow.ipc", "ijson",
           "dateutil.parser", "scipy.stats")
# read by Python or by the preloaded libraries when they start or load (Snakemake sets the thread counts per job)
STARTUP_VARS = ("PYTHON", "OMP_", "OPENBLAS_", "MKL_", "GOTO_", "VECLIB_", "NUMEXPR_", "ARROW_", "NUMPY_")
SINGLE_THREAD = {v: "1" for v in ("OMP_NUM_THREADS", "GOTO_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                  "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")}
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)

CLIENT = """#!{python} -IS
# Runs a Snakemake job's script in a fork of tests/helpers/job_server.py, else as `python` would.
import json, os, signal, socket, sys

REAL, SOCKET = {python!r}, {socket!r}
args = sys.argv[1:]


def fresh():
    os.execv(REAL, [REAL, *args])


if len(args) != 1 or not args[0].endswith(".py") or "/.snakemake/scripts/" not in os.path.abspath(args[0]):
    fresh()
conn = socket.socket(socket.AF_UNIX)
try:
    conn.connect(SOCKET)
except OSError:
    fresh()
request = json.dumps({{"script": os.path.abspath(args[0]), "argv0": args[0], "cwd": os.getcwd(),
                      "env": dict(os.environ)}}).encode() + b"\\n"
socket.send_fds(conn, [b"R"], [0, 1, 2])
conn.sendall(request)
replies = conn.makefile("rb")
first = json.loads(replies.readline() or b'{{"fresh": true}}')
if first.get("fresh"):
    conn.close()
    fresh()
pid = first["pid"]


def forward(sig, frame):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
    signal.signal(sig, forward)
line = replies.readline()
rc = json.loads(line)["rc"] if line else 1
if rc < 0:
    signal.signal(-rc, signal.SIG_DFL)
    os.kill(os.getpid(), -rc)
sys.exit(rc)
"""


def startup_env(env) -> dict:
    return {k: v for k, v in env.items() if k.startswith(STARTUP_VARS)}


def _job(req: dict, fds: list[int]) -> int:
    """In the job's process: become ``python <script>`` and run it."""
    import atexit
    import threading
    import traceback
    import types

    for fd, target in zip(fds, (0, 1, 2)):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    sys.argv = [req["argv0"]]
    sys.path[0] = os.path.dirname(req["script"])
    import random

    random.seed()
    import tempfile

    tempfile.tempdir = None  # found again from this job's TMPDIR
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    try:
        main = types.ModuleType("__main__")  # as `python script.py` runs it: argv as given, __file__ absolute
        main.__file__ = req["script"]
        sys.modules["__main__"] = main
        with open(req["script"], "rb") as f:
            source = f.read()
        exec(compile(source, req["script"], "exec"), main.__dict__)
        code = 0
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        traceback.print_exc()
        code = -signal.SIGINT
    except BaseException:
        traceback.print_exc()
        code = 1
    # what Python does when it ends: join the threads left running, then the atexit functions
    threading._shutdown()
    atexit._run_exitfuncs()
    return code


def _watch(conn: socket.socket, req: dict, fds: list[int]) -> None:
    """In a watcher process: fork the job, tell the client its pid, kill it
    if the client goes away, tell the client how it ended."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        conn.close()
        code = 1
        try:
            code = _job(req, fds)
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                if code < 0:
                    signal.signal(-code, signal.SIG_DFL)
                    os.kill(os.getpid(), -code)
                os._exit(code)
    for fd in fds:
        os.close(fd)
    conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    ended = os.pidfd_open(pid)
    while True:
        ready = select.select([conn, ended], [], [])[0]
        if ended in ready:
            break
        try:
            gone = not conn.recv(1)
        except OSError:
            gone = True
        if gone:  # the client was killed: so is its job, as when it is the job
            os.kill(pid, signal.SIGKILL)
            break
    _, status = os.waitpid(pid, 0)
    try:
        conn.sendall(json.dumps({"rc": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
    except OSError:
        pass


def _serve(listener: socket.socket) -> None:
    own = startup_env(os.environ)
    parent = os.getppid()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the watchers are reaped by the kernel
    listener.settimeout(2.0)
    while os.getppid() == parent:  # ends with the test process that started it
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        conn.settimeout(None)
        fds: list[int] = []
        try:
            _, fds, _, _ = socket.recv_fds(conn, 1, 3)
            req = json.loads(conn.makefile("rb").readline())
        except (OSError, ValueError):
            for fd in fds:
                os.close(fd)
            conn.close()
            continue
        if len(fds) != 3 or startup_env(req["env"]) != own:
            conn.sendall(b'{"fresh": true}\n')
        else:
            sys.stdout.flush()
            sys.stderr.flush()
            if os.fork() == 0:
                try:
                    listener.close()
                    _watch(conn, req, fds)
                finally:
                    os._exit(0)
        for fd in fds:
            os.close(fd)
        conn.close()


def main() -> None:
    import importlib

    folder = sys.argv[1]
    for name in PRELOAD:
        importlib.import_module(name)
    assert not any(m == "memobench" or m.startswith("memobench.") for m in sys.modules), "memobench preloaded"
    path = os.path.join(folder, "jobs.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(64)
    client = os.path.join(folder, "python")
    with open(client, "w", encoding="utf-8") as f:
        f.write(CLIENT.format(python=sys.executable, socket=path))
    os.chmod(client, 0o755)
    print(json.dumps({"client": client}), flush=True)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # nobody reads the pipe after that line
    _serve(listener)


if __name__ == "__main__":
    main()
