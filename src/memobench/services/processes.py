"""What the operating system says of a server process this process started (an MCP server over
stdio): its process found among this process's children by its command line, and its peak resident
memory (``VmHWM`` of ``/proc/<pid>/status``) with its descendants'. Linux only (``/proc``); elsewhere
nothing is known (None)."""

from __future__ import annotations

import os
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
        if argv and argv[1:] == list(command[1:]) and Path(argv[0]).name == Path(command[0]).name:
            if not env or all(_environ(pid).get(k) == v for k, v in env.items()):
                found.append(pid)
    return found


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
