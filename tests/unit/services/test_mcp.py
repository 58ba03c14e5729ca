"""The MCP client (services/transport/mcp.py) against a real stdio server: a banner the
server prints on stdout before the handshake is said in one line, not as the
SDK's pydantic traceback, and the calls go on; what a server leaves outside
its process group ends with it; a server that exits is said to have exited,
with its status and its last stderr line."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from memobench.services.transport import mcp
from memobench.services.operations.api import tools

BANNER_SERVER = """import os, sys
print("Welcome to my memory server v1.0", flush=True)
os.execv(sys.executable, [sys.executable, "-m", "memobench.cli", "serve", "--mcp", "stdio", "--retriever", "bm25s"])
"""


@pytest.mark.slow  # a server process and the SDK's start: seconds
def test_a_banner_before_the_handshake_is_one_line_not_a_traceback(tmp_path, capfd):
    server = tmp_path / "banner_server.py"
    server.write_text(BANNER_SERVER, encoding="utf-8")
    client = mcp.McpClient(tools(None, "test"), command=[sys.executable, str(server)], timeout_s=30, retries=0)
    try:
        answer, call = client.once("reset", {"namespace": "a"})
    finally:
        client.close()
    assert call.attempts == 1
    err = capfd.readouterr().err  # the SDK hands the server this process's stderr: a real file
    assert "Traceback" not in err and "pydantic" not in err
    assert [line for line in err.splitlines() if line.startswith("memobench:")] == [
        "memobench: the MCP SDK says: Failed to parse JSONRPC message from server: Welcome to my memory server "
        "v1.0 (ignored)"]


FAULT_SERVER = [sys.executable, "-m", "tests.helpers.mcp_fault_server"]


def _env(fault: str, state) -> dict:
    from tests.helpers import REPO

    return {"PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "src")]), "MB_FAULT": fault,
            "MB_FAULT_STATE": str(state)}


def _alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow  # server processes and the SDK's start: seconds
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="Linux's /proc")
def test_what_a_server_left_outside_its_process_group_ends_with_it(tmp_path):
    client = mcp.McpClient(tools(None, "test"), command=FAULT_SERVER, env=_env("detach", tmp_path), timeout_s=30,
                           retries=0)
    try:
        client.once("reset", {"namespace": "a"})
        pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
        assert all(_alive(p) for p in pids)  # a detached child and a daemon whose parent exited
    finally:
        client.close()
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids), pids


@pytest.mark.slow
def test_a_server_per_namespace_that_exits_mid_check_is_said_so(tmp_path):
    """The check's server of one namespace exits at a search: the server started again holds nothing, and
    its error for the search is not the cause, the exit is (its status and its last stderr line)."""
    from memobench.services import conformance as check
    from memobench.services.definition.variant import system_variant

    env = {**_env("die-search:3", tmp_path), "MB_NAMESPACE": "{namespace}"}
    spec = system_variant("svc", "s", {"system": {"mcp": {"command": FAULT_SERVER, "env": env},
                                                  "backoff_s": 0.01}}).retriever
    api = check.run(spec, where="variant 'svc'")[0]
    assert api.status == "fail", api
    assert "the server process exited with status 1 (its stderr ended: " in api.why, api.why
    assert "fault server: out of memory at search 3" in api.why, api.why
    assert "a new server process was started and answered this" in api.why, api.why


ENDED_JOB = """import sys, time
from memobench.services.transport import mcp, processes
from memobench.services.operations.api import tools
command, env = {command!r}, {env!r}
with processes.ended_as_exit():
    client = mcp.McpClient(tools(None, "t"), command=command, env=env, timeout_s=30, retries=0)
    try:
        client.once("reset", {{"namespace": "a"}})
        print(*processes.started_by_us(command, env), flush=True)
        time.sleep(60)
    finally:
        client.close()
"""


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="Linux's /proc")
def test_a_job_ended_by_sigterm_stops_its_server_and_what_it_left(tmp_path):
    import signal
    import subprocess

    from tests.helpers import REPO

    env = _env("detach", tmp_path)
    job = subprocess.Popen([sys.executable, "-c", ENDED_JOB.format(command=FAULT_SERVER, env=env)],
                           stdout=subprocess.PIPE, text=True, env={**os.environ, **env}, cwd=REPO)
    server = [int(p) for p in job.stdout.readline().split()]
    pids = server + [int(p) for p in (tmp_path / "pids").read_text().split()]
    assert len(pids) == 3 and all(_alive(p) for p in pids), pids
    job.send_signal(signal.SIGTERM)
    assert job.wait(timeout=30) == 128 + signal.SIGTERM  # it unwound, closing its client on the way
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids), pids
