"""The retriever seam: every variant is ranked by one registered retriever.

A retriever is registered once, with the recipe backends it ranks::

    register(Retriever(
        name="python",                      # what the docs and errors call it
        module="retrievers.pyretriever",               # the package module that ranks: its import
                                            # closure is this retriever's code
        backends=("python",),               # recipe.backend values it ranks
        inputs=lambda v: frozenset({...}),  # the retrieve job's named inputs it reads
        rank_segment=_python,               # (variants, harness.Segment, log) -> {name: tables}
        sources=lambda v: [...],            # files outside the package that decide its
                                            # lists (a user's source), hashed into the code
        shares=False))                      # may it rank, or be ranked by, a sibling's job

``rank_segment`` gets a segment's questions and haystacks
(``harness.load_questions``) and the job's input paths, and returns each
variant's three tables, built with ``harness.SegmentRows`` under the
family's skip rule (``harness.skip_reason``): every retriever's questions,
gold and denominators are its dataset family's. A retriever that ranks
whole session documents question by question uses
``documents.rank_by_documents`` and only supplies the per-question ranking.

The registered retrievers: the Memo engine (``retrieval``: backends fts and
index), the reference retrievers (``baselines.segment``: bm25-official,
bm25s, fts5-bm25, minilm, wordllama), a user's Python callable
(``pyretriever``) and the fusion of other variants' deep lists (``fusion``,
whose inputs are those variants' segment deep tables).

A retrieve job's code fingerprint (:func:`code_fingerprint`, the rule's
``params.code``) is the stage's modules less every retriever's module and
what only those import, plus the variant's own retriever's module closure,
the stage script and the retriever's ``sources``: editing one retriever's
code reruns only the variants it ranks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import ConfigError
from ..memo.recipe import REFERENCE_BACKENDS, input_names
from ..memo.variants import FUSION_BACKEND, PYTHON_BACKEND, Variant

MEMO_BACKENDS = ("fts", "index")


def _no_sources(variant: Variant) -> tuple:
    return ()


@dataclass(frozen=True)
class Retriever:
    """One kind of retriever (the module docstring shows a registration)."""

    name: str
    module: str
    backends: tuple[str, ...]
    inputs: Callable[[Variant], frozenset]
    rank_segment: Callable
    sources: Callable[[Variant], tuple] = _no_sources
    shares: bool = True


RETRIEVERS: dict[str, Retriever] = {}


def register(r: Retriever) -> Retriever:
    for other in RETRIEVERS.values():
        taken = set(r.backends) & set(other.backends)
        if taken and other.name != r.name:
            raise ValueError(f"retriever {r.name!r}: backend(s) {sorted(taken)} already ranked by {other.name!r}")
    RETRIEVERS[r.name] = r
    return r


def retriever_of(variant: Variant) -> Retriever:
    backend = variant.recipe.backend
    for r in RETRIEVERS.values():
        if backend in r.backends:
            return r
    raise ConfigError(f"variant {variant.name!r}: no retriever ranks backend {backend!r}")


def inputs_of(variant: Variant) -> frozenset[str]:
    """The named inputs a retrieve job of this variant reads (common.smk's
    ``search_inputs`` gives their paths)."""
    return retriever_of(variant).inputs(variant)


def sources_of(variant: Variant) -> list[Path]:
    return [Path(p) for p in retriever_of(variant).sources(variant)]


def code_fingerprint(variant: Variant, script) -> str:
    """The retrieve job's code fingerprint for ``variant``: the retrieve
    stage's modules that every retriever runs, this variant's retriever's
    module closure, ``script`` (the stage script) and the retriever's sources."""
    from ..fingerprint import closure, digest, stage_modules

    own = retriever_of(variant)
    shared = stage_modules("retrieve", exclude=frozenset(r.module for r in RETRIEVERS.values()))
    return digest(shared | closure([own.module]), [script, *own.sources(variant)])


# --------------------------------------------------------------------------- the registered retrievers


def _memo(variants, segment, log):
    from .retrieval import rank_segment

    return rank_segment(variants, segment, log)


def _reference(variants, segment, log):
    from .baselines.segment import rank_segment

    return rank_segment(variants, segment, log)


def _python(variants, segment, log):
    from .pyretriever import rank_segment

    return rank_segment(variants, segment, log)


def _python_inputs(variant: Variant) -> frozenset[str]:
    names = {"questions", "haystacks", "events"}
    if (variant.retriever or {}).get("prepare"):
        names.add("prepared")
    return frozenset(names)


def _python_sources(variant: Variant) -> tuple:
    from .pyretriever import sources

    return tuple(sources(variant.retriever["callable"]))


register(Retriever("memo", "retrievers.retrieval", MEMO_BACKENDS, lambda v: input_names(v.recipe.backend), _memo))
register(Retriever("reference", "retrievers.baselines.segment", REFERENCE_BACKENDS, lambda v: input_names(v.recipe.backend),
                   _reference))
register(Retriever("python", "retrievers.pyretriever", (PYTHON_BACKEND,), _python_inputs, _python, _python_sources,
                   shares=False))


def _fusion(variants, segment, log):
    from .fusion import rank_segment

    return rank_segment(variants, segment, log)


# ``fused``: the deep tables of the variants it fuses, of the job's segment, in ``of`` order
register(Retriever("fusion", "retrievers.fusion", (FUSION_BACKEND,), lambda v: frozenset({"questions", "haystacks", "fused"}),
                   _fusion, shares=False))


# --------------------------------------------------------------------------- ranking a segment


def write_segments(variants: list[Variant], questions_path, haystacks_path, events_path, segment: int,
                   n_segments: int, outs: dict, log=print, tokens: dict | None = None,
                   metadata: dict | None = None, variant_metadata: dict[str, dict] | None = None,
                   embeddings_path=None, inputs: dict | None = None) -> None:
    """Rank one segment under several variants in one process, each by its
    retriever, and write each variant's tables: ``outs`` maps a variant name
    to its ``rankings``, ``outcomes`` and (optional) ``deep`` paths.
    ``tokens`` maps tokenizer names to the tokens stage's tables (the Memo
    engine's); ``embeddings_path`` is the embeddings stage's table of
    ``minilm``; ``inputs`` holds any other named input (``prepared``,
    ``wordllama_embeddings``, ``fused``). ``events_path`` may be None for
    variants that do not read the events (a fusion).
    ``metadata`` goes into each outcomes table's Parquet key-value metadata
    (the retrieve job's provenance), with ``variant_metadata[name]`` added for
    that variant."""
    from .harness import Segment, load_questions
    from ..tables import write_table

    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate variant names in {names}")
    paths = {"questions": questions_path, "haystacks": haystacks_path,
             **({"events": events_path} if events_path is not None else {}),
             **({"embeddings": embeddings_path} if embeddings_path is not None else {}), **(inputs or {})}
    questions, haystacks = load_questions(questions_path, haystacks_path, segment, n_segments)
    label = variants[0].name if len(variants) == 1 else f"{len(variants)} variants"
    n_sessions = len({k for h in haystacks.values() for k in h.keys})
    log(f"{label} segment {segment}/{n_segments}: {len(questions)} questions, {n_sessions} distinct sessions")
    seg = Segment(questions, haystacks, paths, dict(tokens or {}), label=f"{label} segment {segment}/{n_segments}")
    groups: dict[str, list[Variant]] = {}
    for v in variants:
        groups.setdefault(retriever_of(v).name, []).append(v)
    tables = {}
    for name, group in groups.items():
        tables.update(RETRIEVERS[name].rank_segment(group, seg, log))
    for v in variants:
        out = outs[v.name]
        rankings, outcomes, deep = tables[v.name]
        # a retriever's own metadata (a user retriever's checks) stays
        meta = {**(outcomes.schema.metadata or {}), **(metadata or {}),
                **((variant_metadata or {}).get(v.name) or {})}
        write_table(out["outcomes"], outcomes.replace_schema_metadata(meta) if meta else outcomes)
        if out.get("deep") is not None:
            write_table(out["deep"], deep)
        write_table(out["rankings"], rankings)


def write_segment(variant: Variant, questions_path, haystacks_path, events_path, segment: int,
                  n_segments: int, rankings_out, outcomes_out, log=print, tokens_path=None,
                  fts_tokens_path=None, deep_out=None, metadata: dict | None = None, embeddings_path=None,
                  inputs: dict | None = None) -> None:
    """One variant's segment (:func:`write_segments` for one variant, its
    tokenizer's tokens given as ``tokens_path``)."""
    from .harness import token_tables

    tokens = token_tables(variant.recipe.seq, tokens_path, fts_tokens_path)
    outs = {variant.name: {"rankings": rankings_out, "outcomes": outcomes_out, "deep": deep_out}}
    write_segments([variant], questions_path, haystacks_path, events_path, segment, n_segments, outs, log=log,
                   tokens=tokens, metadata=metadata, embeddings_path=embeddings_path, inputs=inputs)
