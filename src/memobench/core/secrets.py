"""The secret values this process read from the environment (a system variant's ``$NAME``s: in its url,
headers, MCP url or env; services/operations/api.py ``from_environment`` registers each), and every text it writes
or prints with them starred (:func:`mask`).

Masking is done where text leaves the process, once: a job's log and console lines and its stdout and
stderr (stages/adapter.py), the command line's output (cli.py), a file holding what a server said
(the conformance check's marker, the service's identity). A message built anywhere, a server's echo of
a header or an exception's repr quoting a value, is then starred without its author thinking of it.
A value is starred in the forms it takes on its way: as read, without surrounding whitespace (a CRLF
``.env`` file's ``\\r``), percent-encoded (in a URL), as ``repr`` and JSON write it (escaped), and a URL's
user and password as HTTP Basic auth sends them (:func:`register_basic`)."""

from __future__ import annotations

import base64
import json
import re
import threading
from urllib.parse import quote, quote_plus

MASK = "***"
# a shorter value is not starred: starring every "1" or "on" would garble figures and messages, and hides
# next to nothing (such a value is no key)
MIN_CHARS = 4

_lock = threading.Lock()
_forms: set[str] = set()
_pattern: re.Pattern | None = None


def register(value: str) -> None:
    """Star ``value`` (and its forms: module docstring) in every text :func:`mask` is given from now on."""
    if not isinstance(value, str) or len(value.strip()) < MIN_CHARS:
        return
    forms = set()
    for v in {value, value.strip()}:
        forms |= {v, quote(v, safe=""), quote_plus(v), repr(v)[1:-1], json.dumps(v)[1:-1],
                  json.dumps(v, ensure_ascii=False)[1:-1]}
    _add(forms)


def register_basic(user: str, password: str) -> None:
    """Star the HTTP Basic auth credentials of ``user`` and ``password`` (a server may echo the header)."""
    _add({base64.b64encode(f"{user}:{password}".encode("utf-8")).decode("ascii")})


def _add(forms: set[str]) -> None:
    global _pattern
    forms = {f for f in forms if len(f) >= MIN_CHARS}
    with _lock:
        if forms <= _forms:
            return
        _forms.update(forms)
        # the longest first: a form that holds another is starred whole
        _pattern = re.compile("|".join(re.escape(f) for f in sorted(_forms, key=lambda f: (-len(f), f))))


def mask(text):
    """``text`` with every registered secret starred (anything but a string is returned as it is)."""
    pattern = _pattern
    if pattern is None or not isinstance(text, str):
        return text
    return pattern.sub(MASK, text)


def any_registered() -> bool:
    return _pattern is not None


def forget() -> None:
    """Forget every registered value (tests)."""
    global _pattern
    with _lock:
        _forms.clear()
        _pattern = None


class MaskedStream:
    """A text stream whose writes are masked (:func:`mask`), everything else its underlying stream's: the
    job's and the command line's ``sys.stdout`` and ``sys.stderr``, so that whatever prints through them
    (a library's print, a warning, the MCP SDK's log lines) is starred."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        return self._stream.write(mask(text))

    def writelines(self, lines):
        self._stream.writelines(mask(line) for line in lines)

    def __getattr__(self, name):
        return getattr(self._stream, name)


class masked_output:
    """A context that masks what is written to ``sys.stdout`` and ``sys.stderr`` inside it."""

    def __enter__(self):
        import sys

        self._saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = (s if isinstance(s, MaskedStream) else MaskedStream(s) for s in self._saved)
        return self

    def __exit__(self, *exc):
        import sys

        sys.stdout, sys.stderr = self._saved
        return False
