"""The query an agent would send to a memory server whose search is a substring test of the whole query
(server-memory's search_nodes): one word of the question. The docs/recipes/server-memory.yaml variant
server-memory-word names it as ``query: docs/recipes/one_word.py:longest_word``."""

import re


def longest_word(question: str) -> str:
    """The question's longest word that is not capitalized (a name, such as a speaker's, is in every
    session's lines, so it tells none apart), lower-cased; the first of equals; else its longest word."""
    words = re.findall(r"\w+", question)
    common = [w for w in words if not w[:1].isupper()]
    return max(common or words, key=len, default="").lower()
