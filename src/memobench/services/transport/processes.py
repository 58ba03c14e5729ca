"""What the operating system says of a server process this process started (an MCP server over
stdio): its process found among this process's children by its command line, and its peak resident
memory (``VmHWM`` of ``/proc/<pid>/status``) with its descendants'. Linux only (``/proc``); elsewhere
nothing is known (None).

And its ending: the SDK starts a server in a session of its own and ends that process group when it
stops, but a descendant that left the group (``setsid``, a "detached" child, a daemon that forked
twice) would outlive the job. :func:`descendants` lists them while the server runs, :func:`end` ends
what is left of them, and :func:`adopt_orphans` makes this process the parent of a descendant whose
own parent exited (Linux's child subreaper), so that :func:`orphans` finds it once no server runs."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

PROC = Path("/proc")


def _children() -> dict[int, list[int]]:
    """{pid: its children's pids} of every process /proc shows."""
    out: dict[int, list[int]] = {}
    for d in PROC.iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        # the command name (field 2) is in parentheses and may hold spaces: the parent pid follows its last ')'
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        out.setdefault(ppid, []).append(int(d.name))
    return out


def _argv(pid: int) -> list[str] | None:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0")[:-1]]


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.decode("utf-8", "replace").partition("=") for item in raw.split(b"\0") if item)
    return {k: v for k, _, v in pairs}


def started_by_us(command: list[str], env: dict | None = None) -> list[int]:
    """The pids of this process's children run as ``command`` (its program matched by name: a
    launcher may be given on PATH or by its full path) with ``env`` among their environment (servers
    of one command told apart by it: a server per namespace that names {namespace} in env alone)."""
    if not PROC.is_dir():
        return []
    found = []
    for pid in _children().get(os.getpid(), []):
        argv = _argv(pid)
        if argv and _runs(argv, list(command)):
            if not env or all(_environ(pid).get(k) == v for k, v in env.items()):
                found.append(pid)
    return found


def _runs(argv: list[str], command: list[str]) -> bool:
    """A process's argv is ``command``'s: the same program and arguments, or a script's interpreter
    followed by them (a script with a ``#!`` line, a console script such as ``memobench``, runs as
    ``python /path/to/memobench serve ...``)."""
    def same(run: list[str]) -> bool:
        return len(run) == len(command) and run[1:] == command[1:] and Path(run[0]).name == Path(command[0]).name

    return same(argv) or same(argv[1:])


def peak_memory(pid: int) -> int | None:
    """The peak resident memory in bytes of ``pid`` and its descendants (each one's VmHWM, summed: at
    most what they held at once, at least the largest), or None when /proc does not say."""
    if not PROC.is_dir():
        return None
    tree, todo, total, known = _children(), [pid], 0, False
    while todo:
        p = todo.pop()
        todo += tree.get(p, [])
        try:
            status = (PROC / str(p) / "status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                total += int(line.split()[1]) * 1024  # kB
                known = True
    return total if known else None


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children, theirs, ...), whatever their session or group."""
    if not PROC.is_dir():
        return []
    tree, todo, out = _children(), [pid], []
    while todo:
        kids = tree.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def _alive(pid: int) -> bool:
    """``pid`` runs (a zombie, exited and not yet waited for, does not)."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def end(pids, grace_s: float = 2.0) -> None:
    """``pids`` ended: each, and the process group it leads, sent SIGTERM, then SIGKILL after ``grace_s``;
    those that are this process's children (adopted orphans) waited for, so that none is left a zombie."""
    pids = [p for p in pids if p != os.getpid()]

    def signal_all(sig) -> None:
        for p in pids:
            try:
                if os.getpgid(p) == p:
                    os.killpg(p, sig)  # a detached child leads a group of its own: its group goes with it
                else:
                    os.kill(p, sig)
            except (ProcessLookupError, PermissionError):
                pass

    signal_all(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        _reap(pids)
        time.sleep(0.02)
    if any(_alive(p) for p in pids):
        signal_all(signal.SIGKILL)
        deadline = time.monotonic() + 1.0
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.01)
    _reap(pids)


def _reap(pids) -> None:
    for p in pids:
        try:
            os.waitpid(p, os.WNOHANG)
        except ChildProcessError:
            pass  # not this process's child: its own parent waits for it


def adopt_orphans() -> bool:
    """This process becomes the parent of any descendant whose parent exits (PR_SET_CHILD_SUBREAPER), so a
    server's detached grandchild is found (:func:`orphans`) rather than left to init; False where the
    system has no such thing."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def orphans(started: set[int]) -> list[int]:
    """Every child of this process in another session that it did not start itself (``started``: the
    servers' pids), with what is below it: descendants of servers since stopped (the SDK starts each in a
    session of its own), adopted by :func:`adopt_orphans`, for :func:`end`. A child started in this
    process's own session (a test's server, say) is not one."""
    if not PROC.is_dir():
        return []
    ours = os.getsid(0)
    found = [p for p in _children().get(os.getpid(), []) if p not in started and _session(p) not in (None, ours)]
    return [q for p in found for q in (p, *descendants(p))]


def _session(pid: int) -> int | None:
    try:
        return int((PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[3])
    except (OSError, IndexError, ValueError):
        return None


@contextlib.contextmanager
def ended_as_exit():
    """Inside, SIGTERM (Snakemake ending a job, a cluster's scheduler) is SystemExit in the main thread: the
    job unwinds, and its servers, each in a session of its own that no signal to the job reaches, are
    stopped on the way out rather than left running. Elsewhere than the main thread: nothing changes."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def exit_(signum, frame):
        raise SystemExit(128 + signum)

    before = signal.signal(signal.SIGTERM, exit_)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
