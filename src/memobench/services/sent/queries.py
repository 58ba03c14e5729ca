"""The query a system variant sends (config ``system.query``,
docs/memory-services.md#the-query-an-agent-would-send): by default the
question's own text; or the text a transform makes of it, as an agent's
model would write a short query for a memory server's own matching:

- ``keywords``: the question lower-cased, cut into its words (runs of
  letters and digits, Unicode's ``\\w``), without the words of
  ``data/harness_stop.txt`` (the harness's short stop list: "what", "did",
  "the", ...) and without a word said twice, joined by single spaces, in
  the question's order. Deterministic, and the same on every machine.
- ``longest-word``: the question's longest word that is not capitalized (a
  name, such as a speaker's, is in every session of a conversation, so it
  tells none apart), lower-cased; the first of equal length; the longest
  word of all when every word is capitalized. For a server whose search is
  a substring test of the whole query (an entity store's): one word, as an
  agent would send it.
- ``path/to/file.py:function`` or ``module:function``: a user's function
  called with the question's text (a string), returning the query (a
  string); its files are in the variant's code fingerprint (as a Python
  retriever's: retrieval/python.py), so an edit to it reruns the variant.

The search template sends it as ``{query}``; the transform's name is in the
variant's definition, its ``metrics.json`` (``system.query``) and its label
in the report.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from ...core.errors import ConfigError, excerpt
from ...retrieval.returned import RetrieverError

SHIPPED = ("keywords", "longest-word")
_WORD = re.compile(r"\w+")


@lru_cache(maxsize=1)
def stop_words() -> frozenset:
    """The harness's stop words (data/harness_stop.txt), one a line."""
    path = Path(__file__).resolve().parents[2] / "data" / "harness_stop.txt"
    return frozenset(w.strip().lower() for w in path.read_text(encoding="utf-8").splitlines() if w.strip())


def keywords(question: str) -> str:
    """The ``keywords`` transform (module docstring)."""
    stop = stop_words()
    words = (w for w in _WORD.findall(question.lower()) if w not in stop)
    return " ".join(dict.fromkeys(words))


def longest_word(question: str) -> str:
    """The ``longest-word`` transform (module docstring)."""
    words = _WORD.findall(question)
    common = [w for w in words if not w[:1].isupper()]
    return max(common or words, key=len, default="").lower()


def check_query(query, where: str) -> None:
    """``system.query`` is a shipped transform or a user's ``file.py:function`` / ``module:function``."""
    from ...retrieval.python import _callable_spec

    if query in SHIPPED:
        return
    if not _callable_spec(query):
        raise ConfigError(f"{where}: query {query!r} is not {', '.join(SHIPPED)}, 'path/to/file.py:function' or "
                          f"'module:function'")


def sources(query) -> list[Path]:
    """The files of a user's query function (none for a shipped transform or none at all)."""
    from ...retrieval.callables import sources as python_sources

    if query is None or query in SHIPPED:
        return []
    try:
        return python_sources(query)
    except ConfigError:
        return []  # a file that is not there: the job says so in one line when it loads it


def transform(query: str, where: str, log=print):
    """The function that makes question ``q`` (a questions table row) into its query text; ``where``: the
    variant's name, or a message's prefix that names it (``variant 'x'``, ``check-service``)."""
    if query == "keywords":
        return lambda q: keywords(q["question"])
    if query == "longest-word":
        return lambda q: longest_word(q["question"])
    from ..definition.inprocess import _variant_named
    from ...retrieval.callables import describe, load

    variant = _variant_named(where)
    fn, scope = load(query, variant, log)
    # a prefix that names the variant already is kept as it is: never "variant \"variant 'x'\""
    where = f"{where if where.startswith('variant ') else f'variant {variant!r}'}: query {query}"

    def asked(q: dict) -> str:
        try:
            out = fn(q["question"])
        except Exception as e:  # noqa: BLE001 - the user's code: its failure in one line
            raise RetrieverError(f"{where}: question {q['question_id']!r}: raised {describe(e, scope)}") from None
        if not isinstance(out, str):
            raise RetrieverError(f"{where} returned {type(out).__name__} for question {q['question_id']!r}, not the "
                                 f"query text (a string)")
        if not out.strip():
            # sent, it would find nothing, and the miss would be the service's
            raise RetrieverError(f"{where} returned an empty query for question {q['question_id']!r} "
                                 f"({excerpt(q['question'])!r}); the function must return the text to search for")
        return out

    return asked
