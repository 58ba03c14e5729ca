"""The typed recipe registry: every field that decides a question's list,
declared once with its allowed values and its meaning.

Everything else is derived from or checked against this table: ``catalog.variants.resolve``
validates user recipes with :func:`validate` (the backend's choices are the catalog's rows,
``catalog.registry.RECIPE``); the config schema's recipe block
equals :func:`json_schema` with them (tested); the workflow's ``tokenizer`` wildcard constraint
(the ``seq`` field's values, and fts5) is built from :data:`FIELDS`; the README's recipe table is checked against it
(tested); the engine's lookup tables (windows, stop lists, weights, tokenizers)
must hold exactly the listed values (tested).
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields

from ..core.errors import ConfigError
from .tokenize import STOP_LISTS, WINDOWS

def _field(default, doc: str, choices: tuple | None = None, minimum: int | None = None):
    return field(default=default, metadata={"doc": doc, "choices": choices, "minimum": minimum})


@dataclass(frozen=True)
class Recipe:
    """Everything that decides a question's list (one harness variant)."""

    # the retriever that ranks: its choices are the catalog's rows (memobench.catalog.registry), which
    # fills {references} and checks the value; a reference retriever ranks whole session documents, not
    # the Memo pipeline (only ``documents`` applies)
    backend: str = _field("fts", "discovery: SQLite FTS5 + JS-token check (run.cjs), or the in-memory "
                                 "inverted index (exp6.cjs); or a reference retriever ranking whole session "
                                 "documents (docs/baselines.md: {references})")
    seq: str = _field("ascii", "the tokenizer: the JS tokenizer of events and phrases, whose token table "
                               "the variant reads (tokens/{tokenizer}.arrow; see docs/harnesses.md#tokenizers "
                               "for S-ASCII, S-CJKR, S-ZH, exp6, the product's)", ("ascii", "cjkr", "zh", "exp6", "prod"))
    question_check: str = _field("seq", "tokens of the whole-question phrase check: the tokenizer, or "
                                        "exp.cjs's question.split(' ') bug", ("seq", "raw_split"))
    token_check: str = _field("seq", "tokens of the per-phrase check: the tokenizer, or split(' ')",
                              ("seq", "split"))
    window: str = _field("cf", "question window: plain (question order), cf (content-first), 070, cnb "
                               "(Han runs only), exp6", ("plain", "cf", "070", "cnb", "exp6"))
    stop: str = _field("base", "stop list of the window: base, or exp4's A1/A2/A3 additions",
                       ("base", "a1", "a2", "a3"))
    weights: str = _field("idf080", "token/pair weights of the merge: idf080 (0.8.0 df-proxy IDF), len, one, "
                                    "v3, v5, idfO4, idfP4, lenIdfO, lenIdfP (exp4)",
                          ("idf080", "len", "one", "v3", "v5", "idfO4", "idfP4", "lenIdfO", "lenIdfP"))
    pairs: bool = _field(True, "search adjacent token pairs as phrases too")
    fts_limit: int = _field(500, "FTS5 LIMIT of each discovery query (run.cjs 500, M and exp4/5 2000)",
                            minimum=1)
    page: int = _field(10, "items of each per-phrase list that the merge counts", minimum=1)
    v1_first_list_only: bool = _field(False, "exp.cjs V1 bug: only the first list is counted")
    final: str = _field("prepend", "final list: phrase hits prepended, dropped (exp/exp2 bug), or pooled with a "
                                   "bonus (exp4)", ("prepend", "drop_p", "bonus"))
    bonus: int = _field(0, "the bonus b of final = bonus", minimum=0)
    n_mode: str = _field("all", "N of the IDF: all haystack entries, or distinct ids (cn, zh)",
                         ("all", "distinct"))
    stems: str = _field("", "exp5 stem phrases: none, s1 (not de-duplicated), s2 (de-duplicated)",
                        ("", "s1", "s2"))
    date_words: bool = _field(False, "exp3 T1/T3: date words appended to the window")
    time_filter: str = _field("", "exp3 time filter: none, hard (T2h), dual (T2m: T2h final, then the plain "
                                  "final)", ("", "hard", "dual"))

    documents: str = _field("all", "reference retrievers' session document: all its turns, or its user turns "
                                   "only (LongMemEval's run_retrieval.py); the Memo backends search every turn",
                            ("all", "user"))

    def window_tokens(self, question: str) -> list[str]:
        return WINDOWS[self.window](question, STOP_LISTS[self.stop])


FIELDS = {f.name: f for f in fields(Recipe)}
# the recipe analyze.cjs ranks with (evaluation.analyze): here, so the workflow reads it without the engine
ANALYZE_RECIPE = Recipe(window="070", weights="len", fts_limit=2000)



def _type_name(f) -> str:
    return {"str": "string", "bool": "boolean", "int": "integer"}[f.type if isinstance(f.type, str)
                                                                   else f.type.__name__]


def _meta(f, over: dict | None) -> dict:
    """A field's metadata with ``over``'s entries for it (the catalog's backend choices and text)."""
    return {**f.metadata, **((over or {}).get(f.name) or {})}


def check_value(name: str, value, over: dict | None = None) -> str | None:
    """Why ``value`` is not allowed for field ``name`` (None when it is).
    ``over``: field name -> metadata entries that replace the declared ones
    (``catalog.registry.RECIPE`` gives the backend's choices)."""
    f = FIELDS.get(name)
    if f is None:
        return f"unknown recipe field {name!r}; known: {', '.join(FIELDS)}"
    kind = _type_name(f)
    ok_type = {"string": isinstance(value, str), "boolean": isinstance(value, bool),
               "integer": isinstance(value, int) and not isinstance(value, bool)}[kind]
    if not ok_type:
        return f"recipe field {name!r} takes a {kind}, not {value!r}"
    meta = _meta(f, over)
    choices, minimum = meta["choices"], meta["minimum"]
    if choices is not None and value not in choices:
        return f"recipe field {name!r}: {value!r} is not one of {', '.join(map(repr, choices))}"
    if minimum is not None and value < minimum:
        return f"recipe field {name!r}: {value!r} is below {minimum}"
    return None


def validate(over: dict, where: str, fields_over: dict | None = None) -> None:
    """Raise a one-line ConfigError for the first bad field of a recipe override."""
    for name, value in over.items():
        why = check_value(name, value, fields_over)
        if why:
            raise ConfigError(f"{where}: {why}")


def json_schema(over: dict | None = None) -> dict:
    """The config schema's recipe block (workflow/schemas/config.schema.yaml:
    ``catalog.registry.recipe_schema``, with the catalog's backends)."""
    props = {}
    for name, f in FIELDS.items():
        meta = _meta(f, over)
        entry: dict = {"type": _type_name(f)}
        if meta["choices"] is not None:
            entry = {"enum": list(meta["choices"])}
        if meta["minimum"] is not None:
            entry["minimum"] = meta["minimum"]
        entry["description"] = meta["doc"]
        props[name] = entry
    return {"type": "object", "additionalProperties": False, "properties": props}


def markdown_table(over: dict | None = None) -> str:
    """The docs' recipe table (``catalog.registry.recipe_table``, with the catalog's backends)."""
    rows = ["| field | default | allowed | meaning |", "|---|---|---|---|"]
    for name, f in FIELDS.items():
        meta = _meta(f, over)
        choices = meta["choices"]
        allowed = (", ".join(f"`{c}`" if c else '`""`' for c in choices) if choices is not None
                   else _type_name(f) + (f" >= {meta['minimum']}" if meta["minimum"] is not None else ""))
        default = f.default if f.default is not MISSING else ""
        rows.append(f"| `{name}` | `{default!r}` | {allowed} | {meta['doc']} |")
    return "\n".join(rows) + "\n"
