"""JSON runs: one object ``{question_id: [session_id, ...]}``, read
(:func:`read`, an imported run)."""

from __future__ import annotations

import json
import re

from .text import decode, line_of

NAME = "json"
FIX_JSON = "a JSON run is one object {question_id: [session_id, ...]}"


_WS = re.compile(r"[ \t\n\r]*")


def read(path: str, data: bytes, err) -> list[tuple[str, int | None, list[str], list[int] | None]]:
    """The object's lists in file order, by Python's JSON parser, without
    their lines (None: :func:`scan` finds them when an error needs
    one); a file of any other shape is scanned at once, and its first
    problem named."""
    text = decode(path, data)
    try:
        pairs = json.loads(text, object_pairs_hook=lambda kv: kv)
    except ValueError:
        pairs = None
    if isinstance(pairs, list) and all(type(p) is tuple and type(p[1]) is list and all(type(x) is str for x in p[1])
                                       for p in pairs):
        return [(k, None, v, None) for k, v in pairs]
    return scan(path, data, err)


def scan(path: str, data: bytes, err) -> list[tuple[str, int, list[str], list[int]]]:
    """The object's lists in file order, each key and session with its line
    (a scan of the one shape a JSON run has, so that every error names a line)."""
    text = decode(path, data)
    starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line(pos):
        return line_of(starts, pos)

    def expect(pos, chars, what):
        pos = _WS.match(text, pos).end()
        if pos >= len(text) or text[pos] not in chars:
            got = "the end of the file" if pos >= len(text) else repr(text[pos])
            raise err(line(pos), f"expected {what}, found {got}; {FIX_JSON}")
        return pos

    def string(pos, what):
        pos = expect(pos, '"', what)
        try:
            return json.decoder.scanstring(text, pos + 1)
        except json.JSONDecodeError as e:
            raise err(line(e.pos), f"{e.msg}; {FIX_JSON}") from None

    out = []
    pos = expect(0, "{", "'{' (the run's object)") + 1
    if text[expect(pos, '"}', "a question id or '}'")] == "}":
        pos = _WS.match(text, pos).end() + 1
    else:
        while True:
            at = _WS.match(text, pos).end()
            qid, pos = string(pos, "a question id (a JSON string)")
            pos = expect(pos, ":", "':'") + 1
            pos = expect(pos, "[", f"'[' (the list of question {qid!r})") + 1
            ids, lines = [], []
            if text[expect(pos, '"]', "a session id (a JSON string) or ']'")] == "]":
                pos = _WS.match(text, pos).end() + 1
            else:
                while True:
                    p = _WS.match(text, pos).end()
                    sid, pos = string(pos, f"a session id (a JSON string) in the list of question {qid!r}")
                    ids.append(sid)
                    lines.append(line(p))
                    pos = expect(pos, ",]", "',' or ']'")
                    pos += 1
                    if text[pos - 1] == "]":
                        break
            out.append((qid, line(at), ids, lines))
            pos = expect(pos, ",}", "',' or '}'") + 1
            if text[pos - 1] == "}":
                break
    rest = _WS.match(text, pos).end()
    if rest < len(text):
        raise err(line(rest), f"text after the run's object; {FIX_JSON}")
    return out
