"""What served a memory service's figures (services/identity.py): a node script's package.json, a
console script's or a module's distribution, an npx package as given, the program otherwise; an MCP
server's serverInfo from its real handshake; how the report says it; and segments that differ."""

from __future__ import annotations

import importlib.metadata
import json
import os
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from memobench.core import secrets
from memobench.services.identity import SERVICE_KEY, merged, package_of, served_text


def _npm(root: Path) -> Path:
    pkg = root / "lib" / "node_modules" / "@scope" / "memory-server"
    (pkg / "dist").mkdir(parents=True)
    (pkg / "package.json").write_text(json.dumps({"name": "@scope/memory-server", "version": "0.6.3"}))
    script = pkg / "dist" / "index.js"
    script.write_text("#!/usr/bin/env node\n")
    script.chmod(0o755)
    return script


def test_a_node_script_is_named_by_its_package_json(tmp_path):
    script = _npm(tmp_path)
    assert package_of(["node", str(script), "--stdio"]) == "@scope/memory-server@0.6.3"
    # an npm bin: a link on PATH to the package's script
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "memory-server").symlink_to(script)
    assert package_of([str(tmp_path / "bin" / "memory-server")]) == "@scope/memory-server@0.6.3"
    assert package_of(["node", str(tmp_path / "elsewhere.js")]) == "node"


def test_a_console_script_or_module_is_named_by_its_distribution():
    here = Path(sys.executable).parent
    ours = f"memobench@{importlib.metadata.version('memobench')}"
    assert package_of([str(here / "memobench"), "serve", "--mcp", "stdio"]) == ours
    assert package_of([str(here / "python"), "-m", "bm25s"]) == f"bm25s@{importlib.metadata.version('bm25s')}"
    assert package_of([sys.executable, "-m", "tests.helpers.shaped_mcp_server"]) == "tests.helpers.shaped_mcp_server"
    assert package_of(["npx", "-y", "@scope/memory-server@0.6"]) == "@scope/memory-server@0.6"
    assert package_of(["no-such-program-here", "--x"]) == "no-such-program-here"


def test_the_report_says_what_served_and_segments_that_differ_are_each_listed():
    one = {"server": {"name": "memory-server", "version": "0.6.3"}, "package": "@scope/memory-server@0.6.3"}
    assert served_text(one) == "memory-server 0.6.3 (@scope/memory-server@0.6.3)"
    assert served_text({"host": "127.0.0.1:8765", "transport": "http"}) == "127.0.0.1:8765"
    table = pa.table({"q": [1]})
    up = {**one, "server": {"name": "memory-server", "version": "0.7.0"}}
    segs = [table.replace_schema_metadata({SERVICE_KEY: json.dumps(x)}) for x in (one, one, up)]
    assert merged(segs[:2]) == one
    assert merged(segs) == {"served_by": [one, up]}
    assert served_text(merged(segs)) == "memory-server 0.6.3 (@scope/memory-server@0.6.3) / memory-server 0.7.0 (" \
                                        "@scope/memory-server@0.6.3)"
    assert merged([table]) == {}


ECHO_SERVER = """import os, sys
print("my memory server: using key " + os.environ["MB_SERVER_KEY"], file=sys.stderr, flush=True)
os.execv(sys.executable, [sys.executable, "-m", "memobench.cli", "serve", "--mcp", "stdio", "--retriever", "bm25s"])
"""


@pytest.mark.slow  # a server process and the SDK's start: seconds
def test_a_stdio_server_says_what_it_is_and_its_stderr_is_starred(tmp_path, monkeypatch, capfd):
    from memobench.catalog.variants import resolve
    from memobench.services.transport.connect import client_of, served_by

    secrets.forget()
    server = tmp_path / "echo_server.py"
    server.write_text(ECHO_SERVER, encoding="utf-8")
    monkeypatch.setenv("MB_TEST_KEY", "k3y-0f-mine")
    v = resolve("svc", "s", {"svc": {"system": {"mcp": {"command": [sys.executable, str(server)],
                                                        "env": {"MB_SERVER_KEY": "$MB_TEST_KEY"}}}}})
    client = client_of(v.retriever, "variant 'svc'")
    try:
        client.once("reset", {"namespace": "a"})
    finally:
        client.close()
        secrets.forget()
    err = capfd.readouterr().err
    assert "my memory server: using key ***" in err and "k3y-0f-mine" not in err, err
    said = served_by(v.retriever, client)
    assert said["server"]["name"] and said["server"]["version"] and said["package"] == "python"
    assert "MB_TEST_KEY" not in json.dumps(said) and "k3y" not in json.dumps(said)


@pytest.mark.slow
def test_a_streamable_http_refusal_is_one_line_never_retried(monkeypatch):
    import subprocess

    from memobench.services.operations.api import tools
    from memobench.services.transport.client import ServiceError
    from memobench.services.transport import mcp as mcp_transport
    from memobench.services.transport.mcp import McpClient

    proc = subprocess.Popen([sys.executable, "-m", "tests.helpers.shaped_mcp_server", "--http", "0"],
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "NOTEBOOK_KEY": "the-right-key"})
    try:
        url = proc.stdout.readline().split(" on ")[1].strip()
        client = McpClient(tools(None, "test"), url=url, headers={"Authorization": "Bearer a-wrong-key"}, retries=3,
                           backoff_s=5.0)
        tried = []  # the attempts the call made (a retry would be a second, after waiting its backoff)

        def counted(tries, backoff_s, at_least=None):
            for attempt in range(1, tries + 1):
                tried.append(attempt)
                yield attempt

        monkeypatch.setattr(mcp_transport, "attempts", counted)
        try:
            with pytest.raises(ServiceError) as e:
                client.once("count", {"namespace": "a"})
        finally:
            client.close()
        assert tried == [1]  # never retried
        assert str(e.value) == (f"count tool 'count': the server at {url} answered HTTP 401 Unauthorized: it refused "
                                f"the credentials (system.headers, or the url's user or key)")
    finally:
        proc.terminate()
        proc.wait(10)
