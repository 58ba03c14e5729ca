"""A catalog row, and the registration a retriever's module makes of it.

A module that defines a retriever registers it where it is defined (as
ir_measures registers a measure in its own module)::

    register(Row("bm25s", "reference", label="bm25s 0.3.16", description="...",
                 module=__name__, rank=rank_bm25s))

and the module that ranks a whole segment for a kind of retriever (the
retriever seam: its jobs' inputs, its ``rank_segment``) registers that kind::

    register_retriever(Retriever("reference", __name__, rank_segment=rank_segment, inputs=...))

This module imports nothing of the package's retrievers: a retriever's module
imports it to register, so a job that imports one retriever loads no other.
The catalog of every row is ``registry`` (which loads every registering
module).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

KINDS = ("memo", "reference", "python", "fusion", "imported", "system")


def _module(name: str) -> str:
    """A module's dotted name below the package (``__name__`` of a registering module)."""
    return name.split(".", 1)[1] if name.startswith("memobench.") else name


@dataclass(frozen=True)
class Row:
    """One retriever: ``name`` is the recipe backend it ranks."""

    name: str
    kind: str  # one of KINDS
    label: str  # what the docs and the report call it ("reference retriever: " + label for a reference variant)
    description: str
    module: str  # the module that defines it (dotted; ``__name__`` is fine)
    rank: Callable | None = None  # a reference retriever's rank(question, docs[, vectors=, encoder=]) -> Ranking
    embedding: str = ""  # the retrieve job's input holding its cached session vectors (an embedding retriever)
    # an embedding retriever's encoders: a new one for the embeddings stage (device, batch_size) and the
    # shared one a retrieve job embeds questions with
    encoder: Callable | None = field(default=None, compare=False)
    default_encoder: Callable | None = field(default=None, compare=False)
    inputs: tuple[str, ...] = ()  # more named inputs a retrieve job of it reads (besides its kind's)
    exact: bool = False  # reads the exact turn texts and question (a lone surrogate kept)
    # on a family whose documents are the user turns, also a variant ``{name}-all`` over every turn,
    # compared with it by the paired statistics
    all_turns: bool = False
    # ranks a question's turns, one document each, for a variant that asks (``grain: turn``;
    # docs/protocol.md#turn-level)
    turns: bool = False
    # a user variant of this kind: the config key that states it (``variants.<name>.<config_key>``) and
    # the function (name, family, entry, others) -> Variant that builds it
    config_key: str = ""
    make_variant: Callable | None = field(default=None, compare=False)
    # (variant, family, others) -> None: a ConfigError where the built variant, its grain set, cannot be
    check_variant: Callable | None = field(default=None, compare=False)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"row {self.name!r}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        object.__setattr__(self, "module", _module(self.module))


def _no_sources(variant) -> tuple:
    return ()


def _no_more(variant) -> frozenset:
    return frozenset()


@dataclass(frozen=True)
class Retriever:
    """The seam of one kind of retriever in the retrieve stage.

    ``rank_segment(variants, harness.Segment, log) -> {name: (rankings, outcomes, deep)}``
    ranks a segment under variants of this kind; ``inputs`` are the named
    inputs every job of the kind reads (a row adds its own, ``Row.inputs``
    and ``Row.embedding``; ``variant_inputs`` a variant's); ``sources`` the
    files outside the package that decide a variant's lists (a user's
    source), hashed into its code; ``shares``: may it rank, or be ranked by,
    a sibling's job."""

    name: str  # the kind
    module: str
    rank_segment: Callable
    inputs: frozenset = frozenset({"questions", "haystacks", "events"})
    variant_inputs: Callable = _no_more
    sources: Callable = _no_sources
    shares: bool = True

    def __post_init__(self):
        object.__setattr__(self, "module", _module(self.module))


ROWS: dict[str, Row] = {}
RETRIEVERS: dict[str, Retriever] = {}


def register(row: Row) -> Row:
    other = ROWS.get(row.name)
    if other is not None and other.module != row.module:
        raise ValueError(f"retriever {row.name!r} registered twice: in {other.module} and {row.module}")
    ROWS[row.name] = row
    return row


def register_retriever(r: Retriever) -> Retriever:
    if r.name not in KINDS:
        raise ValueError(f"retriever kind {r.name!r} is not one of {', '.join(KINDS)}")
    RETRIEVERS[r.name] = r
    return r
