"""The catalog: every retriever's row, read from the modules that register
them (``row.register``), and what the rest of the package asks of it: a
backend's row and kind, the recipe's backend choices, a retrieve job's named
inputs, the retriever that ranks a variant, and its code fingerprint.

The registering modules are :data:`LOADS`, imported by name the first time a
row is asked for (they import ``catalog.row``, never this module: a job that
imports one retriever loads no other). ``fingerprint.py`` reads ``LOADS`` as
this module's imports, so whatever asks the catalog has every registering
module in its code fingerprint. Importing them is cheap: a retriever imports
its heavy libraries (models, rank_bm25, bm25s) inside the functions that use
them.

A retrieve job's code fingerprint (:func:`code_fingerprint`, the rule's
``params.code``) is the stage's modules less every retriever's modules (each
kind's seam and its rows' modules) and what only those import, plus the
variant's own kind's modules and their closure, the stage script and the
retriever's ``sources``: editing one retriever's code reruns only the
variants it ranks.
"""

from __future__ import annotations

import importlib

from ..core.errors import ConfigError
from .row import RETRIEVERS, ROWS, Retriever, Row

# the modules that register rows and retrievers (dotted, below the package); fingerprint.py reads this
# tuple as imports of this module
LOADS = ("retrieval.memo", "retrieval.reference.lexical", "retrieval.reference.dense",
         "retrieval.reference.static", "retrieval.reference.segment", "retrieval.python",
         "retrieval.fusion", "retrieval.imported", "services.job.rank")
_loaded = False


def _load() -> None:
    global _loaded
    if not _loaded:
        for m in LOADS:
            importlib.import_module(f"memobench.{m}")
        _loaded = True


def rows(kind: str | None = None) -> list[Row]:
    """Every row (of ``kind``), in :data:`LOADS` order, then in its module's
    registration order: the same order whichever module a process imported
    first (the schema's and the docs' backend lists are generated from it)."""
    _load()
    place = {m: i for i, m in enumerate(LOADS)}
    ordered = sorted(ROWS.values(), key=lambda r: place.get(r.module.removeprefix("memobench."), len(LOADS)))
    return [r for r in ordered if kind is None or r.kind == kind]


def names(kind: str | None = None) -> tuple[str, ...]:
    return tuple(r.name for r in rows(kind))


def row(backend: str) -> Row:
    """The row of a recipe backend."""
    _load()
    r = ROWS.get(backend)
    if r is None:
        raise ConfigError(f"unknown backend {backend!r}; known: {', '.join(names())}")
    return r


def kind_of(variant) -> str:
    """What kind of variant this is: ``memo`` (a recipe of the Memo engine),
    ``reference`` (a reference retriever), ``python`` (a user's Python
    retriever), ``fusion``, ``imported`` or ``system`` (a memory service). ``variant``: a Variant, or its
    spec as the rule's params hold it ({"recipe": {"backend": ...}}), or metrics.json ({"kind": ...}; one
    written before it stated its kind: {"recipe": ...})."""
    if isinstance(variant, dict):
        if variant.get("kind"):
            return variant["kind"]
        backend = (variant.get("recipe") or {}).get("backend", "fts")
    else:
        backend = variant.recipe.backend
    return row(backend).kind


def embedding_inputs() -> dict[str, str]:
    """Each embedding retriever's name -> the retrieve job's input of its session vectors."""
    return {r.name: r.embedding for r in rows() if r.embedding}


# --------------------------------------------------------------------------- the recipe's backend


def recipe_backends() -> tuple[str, ...]:
    """The recipe's backend choices: the Memo engine's and the reference retrievers' (the other kinds
    are stated by their own config keys)."""
    return names("memo") + names("reference")


def recipe_over() -> dict:
    """The recipe's backend field as the catalog makes it: its choices and its text naming the
    reference retrievers (memo.recipe's ``over``)."""
    from ..memo.recipe import FIELDS

    doc = FIELDS["backend"].metadata["doc"].format(references=", ".join(names("reference")))
    return {"backend": {"choices": recipe_backends(), "doc": doc}}


def validate(over: dict, where: str) -> None:
    """memo.recipe.validate with the catalog's backends."""
    from ..memo.recipe import validate as check

    check(over, where, recipe_over())


def check_value(name: str, value) -> str | None:
    from ..memo.recipe import check_value as check

    return check(name, value, recipe_over())


def recipe_schema() -> dict:
    """The config schema's recipe block (workflow/schemas/config.schema.yaml; tested)."""
    from ..memo.recipe import json_schema

    return json_schema(recipe_over())


def recipe_table() -> str:
    """The docs' recipe table (docs/variants.md; tested)."""
    from ..memo.recipe import markdown_table

    return markdown_table(recipe_over())


# --------------------------------------------------------------------------- the retriever seam


def retriever_of(variant) -> Retriever:
    backend = variant.recipe.backend
    r = RETRIEVERS.get(row(backend).kind)
    if r is None:
        raise ConfigError(f"variant {variant.name!r}: no retriever ranks backend {backend!r}")
    return r


def input_names(backend: str) -> frozenset[str]:
    """The named inputs a job ranking under a recipe with this backend reads
    (common.smk's ``search_inputs`` gives their paths): its kind's (the
    normalized tables), and its row's (the Memo engine's tokens, an embedding
    retriever's session vectors)."""
    r = row(backend)
    seam = RETRIEVERS.get(r.kind)
    if seam is None:
        raise ConfigError(f"no retriever ranks backend {backend!r}")
    return frozenset(seam.inputs | set(r.inputs) | ({r.embedding} if r.embedding else set()))


def inputs_of(variant) -> frozenset[str]:
    """The named inputs a retrieve job of this variant reads (common.smk's
    ``search_inputs`` gives their paths); an embedding retriever ranking turns
    embeds them in the job, and reads no session vectors."""
    names = input_names(variant.recipe.backend) | retriever_of(variant).variant_inputs(variant)
    return names - {row(variant.recipe.backend).embedding} if variant.grain == "turn" else names


def kind_modules() -> dict[str, frozenset[str]]:
    """Each kind's own modules: its seam's and its rows'."""
    _load()
    out: dict[str, set[str]] = {}
    for r in ROWS.values():
        out.setdefault(r.kind, set()).add(r.module)
    for r in RETRIEVERS.values():
        out.setdefault(r.name, set()).add(r.module)
    return {k: frozenset(v) for k, v in out.items()}


def code_fingerprint(variant, script) -> str:
    """The retrieve job's code fingerprint for ``variant``: the retrieve
    stage's modules that every retriever runs, this variant's kind's modules
    and their closure (less the other kinds' modules), ``script`` (the stage
    script) and the retriever's sources."""
    from ..core.fingerprint import closure, digest, stage_modules

    own = retriever_of(variant)
    kinds = kind_modules()
    every = frozenset().union(*kinds.values())
    mine = kinds[own.name]
    shared = stage_modules("retrieve", exclude=every)
    return digest(shared | closure(mine, exclude=every - mine), [script, *own.sources(variant)])
