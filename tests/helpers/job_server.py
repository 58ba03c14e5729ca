"""Runs the workflow's jobs in forks of a process that has already imported
what a job imports from outside the package (Snakemake's script support,
numpy, pyarrow, ijson, scipy): that import is most of a small job's time,
and the suite runs about thirteen hundred jobs.

Started by :class:`tests.helpers._SnakemakeServer` next to its Snakemake
server, whose runs then name :data:`CLIENT` (written next to the socket) as
the Python that runs a rule's script: ``<client> <script.py>``. The client
sends its folder, environment and standard streams (the descriptors
themselves) over the socket; the server forks a watcher, which forks the
job: the job takes the folder, the environment and the streams, runs the
script as ``python script.py`` would (``sys.argv``, ``sys.path[0]``,
``__main__``, fresh seeds for ``random`` and numpy, the client's ignored
signals and signal mask, never the server's) and ends as the interpreter
would (:func:`_end`). The client forwards the signals Snakemake sends it
(those it does not ignore) to the watcher, which delivers them through the
job's pidfd; the watcher kills the job when the client goes away (Snakemake killed it) and
sends the exit status, which the client exits with (a signal's death too).

The package is imported here too, every module of it, when the one
importable is this checkout's: a job of this checkout's stage script
(:data:`STAGE_SCRIPT`, what every rule runs) finds it imported, as its
libraries; any other job drops it first and imports it from wherever its
script says (a scratch copy's ``src/``), as a new process does. A job runs as a
new process instead when the client is asked anything else, when the
server cannot be reached, or when a variable read as a module is imported
(``PYTHON*``, the thread counts Snakemake sets per job: :data:`STARTUP_VARS`)
differs from the server's. There is a server for each thread count in
:data:`THREADS` (the client asks the one of its job's count); a job given
another count runs fresh. Every job shares the server's hash seed; a test that
compares the bytes of two runs starts fresh processes (``fresh=True``) or
servers started with another seed (``hash_seed=``).
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
           "dateutil.parser", "scipy.stats", "matplotlib", "matplotlib.pyplot", "matplotlib.ticker")
# read by Python or by the preloaded libraries when they start or load (Snakemake sets the thread counts per job)
STARTUP_VARS = ("PYTHON", "OMP_", "OPENBLAS_", "MKL_", "GOTO_", "VECLIB_", "NUMEXPR_", "ARROW_", "NUMPY_")
THREAD_VARS = ("OMP_NUM_THREADS", "GOTO_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")  # what Snakemake sets to a job's threads


def threads_env(n: int) -> dict[str, str]:
    return {v: str(n) for v in THREAD_VARS}


SINGLE_THREAD = threads_env(1)
# the thread counts served, a server each: Snakemake gives a job min(its threads, --cores), and the suite runs
# with --cores 1 or 2 (a rule's threads: 2 included)
THREADS = (1, 2)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
STAGE_SCRIPT = os.path.join(REPO, "workflow", "scripts", "stage.py")  # what every rule of the workflow runs
IMPORTS_VAR = "JOB_SERVER_IMPORTS"  # a folder: each job records the package modules it imported (_record_imports)
CLIENT = """#!{python} -IS
# Runs a Snakemake job's script in a fork of tests/helpers/job_server.py, else as `python` would.
import json, os, signal, socket, sys

REAL, SOCKETS = {python!r}, {sockets!r}
args = sys.argv[1:]
SOCKET = SOCKETS.get(os.environ.get("OMP_NUM_THREADS"))  # the server started with this job's thread counts


def fresh():
    os.execv(REAL, [REAL, *args])


if len(args) != 1 or not args[0].endswith(".py") or "/.snakemake/scripts/" not in os.path.abspath(args[0]) \
        or SOCKET is None:
    fresh()
conn = socket.socket(socket.AF_UNIX)
try:
    conn.connect(SOCKET)
except OSError:
    fresh()
# what a process started from here would inherit: the signals ignored (Python keeps them so) and the mask
ignored = [int(s) for s in signal.valid_signals() if signal.getsignal(s) == signal.SIG_IGN]
request = json.dumps({{"script": os.path.abspath(args[0]), "argv0": args[0], "cwd": os.getcwd(),
                      "env": dict(os.environ), "ignored": ignored,
                      "mask": sorted(signal.pthread_sigmask(signal.SIG_BLOCK, []))}}).encode() + b"\\n"
socket.send_fds(conn, [b"R"], [0, 1, 2])
conn.sendall(request)
replies = conn.makefile("rb")
first = json.loads(replies.readline() or b'{{"fresh": true}}')
if first.get("fresh"):
    conn.close()
    fresh()
pid = first["pid"]


def forward(sig, frame):  # to the watcher, which signals the job while it is still its child
    try:
        conn.send(bytes([sig]))
    except OSError:
        pass


for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
    if sig not in ignored:  # an ignored one is ignored by the job too, as by a new process
        signal.signal(sig, forward)
line = replies.readline()
rc = json.loads(line)["rc"] if line else 1
if rc < 0:  # the job died of a signal: so does this
    try:
        signal.signal(-rc, signal.SIG_DFL)
    except (OSError, ValueError):
        pass
    os.kill(os.getpid(), -rc)
sys.exit(rc)
"""


def startup_env(env) -> dict:
    """The variables a process reads when it starts or loads the preloaded
    libraries: a fork serves a request only where they are the same."""
    return {k: v for k, v in env.items() if k.startswith(STARTUP_VARS)}


def _take_signals(req: dict) -> dict:
    """Sets the dispositions and the mask a new process started by the client
    would have (the ignored signals stay ignored, the others are Python's
    defaults); returns the ones replaced, for :func:`_restore_signals`."""
    ignored = set(req["ignored"])
    before = {"mask": signal.pthread_sigmask(signal.SIG_SETMASK, req["mask"])}
    for sig in signal.valid_signals():
        default = signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL
        try:
            before[sig] = signal.signal(sig, signal.SIG_IGN if sig in ignored else default)
        except (OSError, ValueError):  # SIGKILL, SIGSTOP, the C library's own
            pass
    return before


def _restore_signals(before: dict) -> None:
    signal.pthread_sigmask(signal.SIG_SETMASK, before.pop("mask"))
    for sig, handler in before.items():
        signal.signal(sig, handler)


def _become_job(req: dict, fds: list[int]) -> None:
    """In the job's process, at the top of the stack: take the job's streams,
    folder and environment, run its script as ``python script.py`` does and
    end as the interpreter would (:func:`_end`)."""
    import types

    for fd, target in zip(fds, (0, 1, 2)):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    sys.argv = [req["argv0"]]
    sys.path[0] = os.path.dirname(os.path.realpath(req["script"]))
    import random
    import tempfile

    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    tempfile.tempdir = None  # found again from this job's TMPDIR
    if os.environ.get(IMPORTS_VAR) or not _runs_own_stage(req["script"]):
        _drop_package()  # imported by the job from wherever its script says, as a new process does
    preloaded = list(sys.modules)
    main = types.ModuleType("__main__")  # argv as given, __file__ absolute, as `python script.py` has them
    main.__file__ = req["script"]
    sys.modules["__main__"] = main
    interrupted = False
    try:
        with open(req["script"], "rb") as f:
            code = compile(f.read(), req["script"], "exec")
        exec(code, main.__dict__)
        status = 0
    except SystemExit as e:  # as the interpreter reads it
        if e.code is None or isinstance(e.code, int):
            status = (e.code or 0) & 0xFF
        else:
            print(e.code, file=sys.stderr)
            status = 1
    except BaseException:
        sys.excepthook(*sys.exc_info())
        interrupted, status = isinstance(sys.exc_info()[1], KeyboardInterrupt), 1
    _end(status, interrupted, preloaded)


def _package_modules() -> list[str]:
    return [m for m in sys.modules if m == "memobench" or m.startswith("memobench.")]


def _preload_package() -> None:
    """Import every module of the package from this checkout's ``src/`` (a
    small stage job spends much of its own time importing it): what a job
    of this checkout's stage script imports, imported once (the package
    reads no variable and starts nothing when imported). None when the
    package importable here is another checkout's."""
    import importlib
    import pkgutil

    try:
        import memobench
    except ImportError:
        return
    if os.path.dirname(os.path.realpath(memobench.__file__)) != os.path.join(REPO, "src", "memobench"):
        _drop_package()
        return
    for module in pkgutil.walk_packages(memobench.__path__, "memobench."):
        if module.name.endswith(".__main__"):  # a command line, run only as one
            continue
        try:
            importlib.import_module(module.name)
        except ImportError:  # an optional extra's module, not installed here: its jobs import it themselves
            pass


def _drop_package() -> None:
    for name in _package_modules():
        del sys.modules[name]


def _runs_own_stage(script: str) -> bool:
    """Whether ``script`` is Snakemake's copy of this checkout's stage script
    (its preamble names the original file), the one job whose package is the
    one preloaded here."""
    try:
        with open(script, "rb") as f:
            head = f.read(1 << 16)
    except OSError:
        return False
    return f"__file__ = {STAGE_SCRIPT!r};".encode() in head


def _record_imports(folder: str, preloaded: set[str]) -> None:
    """``<folder>/<pid>.json``: the job's rule and the package modules it
    imported (the preloaded ones were dropped first: what the stage's code
    loaded, as in a new process), for tests/workflow/test_fingerprint.py."""
    smk = getattr(sys.modules.get("__main__"), "snakemake", None)
    if smk is None:
        return
    mods = sorted(m.split(".", 1)[1] for m in _package_modules() if m != "memobench" and m not in preloaded)
    with open(os.path.join(folder, f"{os.getpid()}.json"), "w", encoding="utf-8") as f:
        json.dump({"rule": smk.rule, "modules": mods}, f)


def _end(status: int, interrupted: bool, preloaded: list[str]) -> None:
    """What the interpreter does when a script ends, for what the job made:
    threads joined, atexit functions, the globals of the script and of the
    modules it imported released and their cycles collected (a file left open
    is flushed and closed), the standard streams flushed (120 when that
    fails); then the exit status, or death by SIGINT after an interrupt. The
    preloaded modules are left as they are: tearing them down costs more than
    the fork saves, and a fresh process that never imported them has nothing
    of theirs to tear down."""
    import atexit
    import gc
    import threading

    threading._shutdown()
    atexit._run_exitfuncs()
    kept = set(preloaded)
    if os.environ.get(IMPORTS_VAR):
        _record_imports(os.environ[IMPORTS_VAR], kept)
    for name in ["__main__", *reversed([m for m in list(sys.modules) if m not in kept])]:
        module = sys.modules.pop(name, None)
        if module is not None and name != "sys":
            module.__dict__.clear()
    gc.collect()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            status = 120
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(status)


def _watch(conn: socket.socket, req: dict, fds: list[int]):
    """In a watcher process: fork the job, tell the client its pid, pass on
    the signals the client forwards, kill the job if the client goes away,
    tell the client how the job ended. Returns the job's request in the
    job's process, None in the watcher's."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the job is waited for here
    sys.stdout.flush()
    sys.stderr.flush()
    before = _take_signals(req)  # before the fork: a signal forwarded at once finds them set
    pid = os.fork()
    if pid == 0:
        conn.close()
        return req, fds
    _restore_signals(before)
    try:
        for fd in fds:
            os.close(fd)
        ended = os.pidfd_open(pid)
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        while True:
            if ended in select.select([conn, ended], [], [])[0]:
                break
            try:
                forwarded = conn.recv(16)
            except OSError:
                forwarded = b""
            if not forwarded:  # the client was killed: so is its job, as when it is the job
                signal.pidfd_send_signal(ended, signal.SIGKILL)
                break
            for sig in forwarded:
                try:
                    signal.pidfd_send_signal(ended, sig)
                except OSError:
                    pass
        _, status = os.waitpid(pid, 0)
    except BaseException:
        os.kill(pid, signal.SIGKILL)  # never a job left running unwatched
        raise
    try:
        conn.sendall(json.dumps({"rc": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
    except OSError:
        pass
    return None


def _serve(listener: socket.socket):
    """Answers the clients until the test process that started this one
    ends; returns only in a job's process, with its request."""
    own = startup_env(os.environ)
    parent = os.getppid()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the watchers are reaped by the kernel
    listener.settimeout(2.0)
    while os.getppid() == parent:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        conn.settimeout(None)
        fds: list[int] = []
        try:
            _, fds, _, _ = socket.recv_fds(conn, 1, 3)
            req = json.loads(conn.makefile("rb").readline())
            if len(fds) != 3 or startup_env(req["env"]) != own:
                conn.sendall(b'{"fresh": true}\n')
            else:
                sys.stdout.flush()
                sys.stderr.flush()
                if os.fork() == 0:  # the watcher
                    job = None
                    try:
                        listener.close()
                        job = _watch(conn, req, fds)
                    finally:
                        if job is None:
                            os._exit(0)
                    return job
        except (OSError, ValueError, KeyError):
            pass  # this client runs its job fresh (a closed connection) or not at all; the next one is served
        for fd in fds:
            os.close(fd)
        conn.close()
    return None


def main():
    import gc
    import importlib

    folder = sys.argv[1]
    try:
        os.close(os.pidfd_open(os.getpid()))  # a watcher waits on one (Linux 5.3)
    except (AttributeError, OSError):
        print(json.dumps({"client": None}), flush=True)
        return None
    sockets, listeners = {}, {}
    for n in THREADS:
        sockets[str(n)] = os.path.join(folder, f"jobs-{n}.sock")
        listeners[n] = socket.socket(socket.AF_UNIX)
        listeners[n].bind(sockets[str(n)])
        listeners[n].listen(64)
    # this process serves the first thread count; a fork of it, before anything reads the variables, each other
    served = THREADS[0]
    for n in THREADS[1:]:
        if os.fork() == 0:
            served = n
            os.environ.update(threads_env(n))
            break
    for n, listener in listeners.items():
        if n != served:
            listener.close()
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:  # not installed here: the jobs that need it import it themselves
            pass
    _preload_package()
    # what is loaded now is out of the collector's reach in every fork: a job's collections (the one at its
    # end included) walk what the job made, as a new process's do, not the libraries' hundred thousand objects
    gc.freeze()
    if served == THREADS[0]:
        client = os.path.join(folder, "python")
        with open(client, "w", encoding="utf-8") as f:
            f.write(CLIENT.format(python=sys.executable, sockets=sockets))
        os.chmod(client, 0o755)
        print(json.dumps({"client": client}), flush=True)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)  # nobody reads the pipe after that line
    os.close(null)
    return _serve(listeners[served])


if __name__ == "__main__":
    job = main()
    if job is not None:  # this is a job's process now, out of the server's frames
        _become_job(*job)
