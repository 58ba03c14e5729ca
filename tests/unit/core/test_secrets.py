"""Secrets read from the environment (core/secrets.py, services/operations/api.py): starred in every form they take,
percent-encoded where they land in a URL, a header value with a line break refused without showing it,
a 401/403 answer one line that does not quote it, and a job's log and console starred at the one place
they are written (stages/adapter.py run_logged), against a real HTTP server on 127.0.0.1 that echoes."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from memobench.catalog.variants import resolve
from memobench.core import secrets
from memobench.core.errors import ConfigError
from memobench.services.reference_servers.http_server import reply
from memobench.services.transport.connect import client_of
from memobench.services.operations.api import url_from_environment
from memobench.services.transport.client import ServiceError

SECRET = "s3cret/#&=+ x"


@pytest.fixture(autouse=True)
def fresh():
    secrets.forget()
    yield
    secrets.forget()


class _Echo(BaseHTTPRequestHandler):
    """Answers each request with what came (its Authorization header and path), at the status its path names
    (``/search`` 200, ``/r401`` 401, ``/r400`` 400), as a careless server quoting the request does."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with self.server.lock:
            self.server.seen.append((self.path, dict(self.headers)))
        status = int(self.path.split("?")[0][2:]) if self.path.startswith("/r") else 200
        said = {"you sent": self.headers.get("Authorization"), "to": self.path, "results": []}
        reply(self, status, json.dumps(said).encode())


@pytest.fixture
def echo():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads, server.lock, server.seen = True, threading.Lock(), []
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def _client(url: str, path: str = "/search", **system):
    v = resolve("svc", "s", {"svc": {"system": {"url": url, "retries": 2, "backoff_s": 0.01, "check": False,
                                                "endpoints": {"search": {"path": path}}, **system}}})
    return client_of(v.retriever, "variant 'svc'")


def test_a_secret_is_starred_in_every_form_it_takes():
    secrets.register("Bearer-t0k3n/#\r")
    said = ("ValueError: Invalid header value b'Bearer Bearer-t0k3n/#\\r' sent as Bearer-t0k3n%2F%23%0D, "
            "in JSON \"Bearer-t0k3n/#\\r\"")
    assert secrets.mask(said) == "ValueError: Invalid header value b'Bearer ***' sent as ***, in JSON \"***\""
    secrets.register("abc")  # too short to star: every "abc" in a figure or a message would go
    assert secrets.mask("abc 1") == "abc 1"
    secrets.register_basic("alice", "pw!")
    assert secrets.mask(base64.b64encode(b"alice:pw!").decode()) == "***"


def test_values_are_percent_encoded_where_they_land_in_a_url():
    env = {"PW": "p/ss#word", "KEY": "a#b&c=d", "USER": "al ice"}
    url = url_from_environment("http://$USER:${PW}@127.0.0.1:8765/api?api_key=$KEY&x=1", "w", env)
    parts = urlsplit(url)
    assert parts.port == 8765 and parts.hostname == "127.0.0.1" and parts.path == "/api" and not parts.fragment
    assert parse_qs(parts.query) == {"api_key": ["a#b&c=d"], "x": ["1"]}  # the query string whole
    assert (parts.username, parts.password) == ("al%20ice", "p%2Fss%23word")


def test_a_url_s_password_and_key_reach_the_server_as_they_are(echo, monkeypatch):
    monkeypatch.setenv("MB_PW", "pa/ss#1")
    monkeypatch.setenv("MB_KEY", "k#e&y=1")
    client = _client(f"http://alice:$MB_PW@127.0.0.1:{echo.server_address[1]}?api_key=$MB_KEY")
    try:
        client.once("search", {"namespace": "n", "question.text": "q", "question.date": "", "k": 10,
                               "question.id": "q", "question.type": ""})
    finally:
        client.close()
    path, headers = echo.seen[0]
    assert parse_qs(urlsplit(path).query) == {"api_key": ["k#e&y=1"]}
    assert base64.b64decode(headers["Authorization"].split()[1]).decode() == "alice:pa/ss#1"


@pytest.mark.parametrize("value", [SECRET + "\r", SECRET + "\n", "a\x1bb-long"])
def test_a_header_value_with_a_line_break_is_one_line_without_it(value, monkeypatch):
    monkeypatch.setenv("MB_TOKEN", value)
    with pytest.raises(ConfigError) as e:
        _client("http://127.0.0.1:9", headers={"Authorization": "Bearer $MB_TOKEN"})
    said = str(e.value)
    assert said.startswith("variant 'svc': system: headers: Authorization: its value (from $MB_TOKEN) holds ")
    assert "\n" not in said and "s3cret" not in said and "a\x1bb" not in said, said


def test_a_refusal_is_one_line_not_retried_and_its_body_unshown(echo, monkeypatch):
    monkeypatch.setenv("MB_TOKEN", SECRET)
    client = _client(f"http://127.0.0.1:{echo.server_address[1]}", "/r401",
                     headers={"Authorization": "Bearer $MB_TOKEN"})
    try:
        with pytest.raises(ServiceError) as e:
            client.once("search", {"namespace": "n", "question.text": "q", "question.date": "", "k": 10,
                                   "question.id": "q", "question.type": ""})
    finally:
        client.close()
    assert str(e.value) == ("search /r401 answered HTTP 401 Unauthorized: the service refused the credentials "
                            "(system.headers, or the url's user or key)")
    assert len(echo.seen) == 1  # never retried


def test_a_job_s_log_and_console_star_what_a_server_echoes(echo, monkeypatch, tmp_path, capfd):
    """The job's one place of writing (run_logged): a server's 400 quoting the header, a stage's own
    print, and an internal error's message and traceback, all starred."""
    from memobench.stages.adapter import run_logged

    monkeypatch.setenv("MB_TOKEN", SECRET)
    url = f"http://127.0.0.1:{echo.server_address[1]}"

    def stage(job):
        client = _client(url, "/r400", headers={"Authorization": "Bearer $MB_TOKEN"})
        try:
            client.once("search", {"namespace": "n", "question.text": "q", "question.date": "", "k": 10,
                                   "question.id": "q", "question.type": ""})
        except ServiceError as e:
            job.log(f"the service said: {e}")
            print(f"printed: {e}")
        finally:
            client.close()
        raise ValueError(f"Invalid header value b'Bearer {SECRET}\\n'")

    log = tmp_path / "job.log"
    with pytest.raises(SystemExit):
        run_logged(log, stage, {}, {}, {}, {}, console="retrieve x")
    out = capfd.readouterr()
    written = log.read_text() + out.out + out.err
    assert "Bearer ***" in log.read_text() and "printed: " in out.out
    assert "internal error ValueError: Invalid header value b'Bearer ***\\n'" in out.err
    assert "s3cret" not in written and "s3cret" not in json.dumps(written), written


def test_the_check_service_table_stars_what_a_server_echoes(echo, monkeypatch, tmp_path, capsys):
    from memobench.cli import main

    monkeypatch.setenv("MB_TOKEN", SECRET)
    cfg = tmp_path / "my.yaml"
    cfg.write_text(json.dumps({"variants": {"svc": {"system": {
        "url": f"http://127.0.0.1:{echo.server_address[1]}", "headers": {"Authorization": "Bearer $MB_TOKEN"},
        "endpoints": {"reset": {"path": "/r400"}}}}}}), encoding="utf-8")
    assert main(["check-service", "--variant", "svc", "--configfile", str(cfg)]) == 1
    out = capsys.readouterr()
    assert "answered HTTP 400" in out.out and "Bearer ***" in out.out, out.out
    assert "s3cret" not in out.out + out.err


def test_an_excerpt_stars_a_secret_before_it_cuts_or_joins_spaces():
    from memobench.core.errors import excerpt

    secrets.register("a  key\twith-spaces")
    said = "x" * 150 + " a  key\twith-spaces"
    # joined and cut first, it would be "a key wi..." (its spaces joined, its end cut), which no starring finds
    assert excerpt(said) == "x" * 150 + " ***"
