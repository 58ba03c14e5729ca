"""The MCP client (services/mcp.py) against a real stdio server: a banner the
server prints on stdout before the handshake is said in one line, not as the
SDK's pydantic traceback, and the calls go on."""

from __future__ import annotations

import sys

import pytest

from memobench.services import mcp
from memobench.services.api import tools

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
