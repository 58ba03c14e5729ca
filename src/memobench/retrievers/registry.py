"""Ranking a segment under several variants in one process, each by its
kind's retriever (the catalog's seam: ``catalog.registry.retriever_of``)."""

from __future__ import annotations

from ..catalog.registry import retriever_of
from ..catalog.row import RETRIEVERS
from ..catalog.variant import Variant


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
