"""``memobench serve``: a port that cannot be listened on is one line, not a traceback."""

from __future__ import annotations

import socket
import subprocess
import sys


def test_a_taken_port_is_one_line_naming_it():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "memobench.cli", "serve", "--retriever", "bm25s", "--port",
                               str(port)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f"memobench: serve: cannot listen on 127.0.0.1:{port}: Address already in use; stop what listens there "
        f"or choose another --port (0 for a free one)"]
