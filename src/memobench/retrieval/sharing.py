"""Retrieve jobs that share their work with the dataset's other variants.

The workflow keeps one retrieve job per dataset, variant and segment: that is
what makes a change to one variant rerun only that variant, and a targeted
segment run only what it needs. But most of a job's work (loading the segment,
tokenized sessions, representative events, FTS5 rows) is the same for every
variant that reads the same inputs, so the first job of a segment computes its
*siblings* too, in one process (``retrieval.sharing.write_segments``: each list
identical to the one the variant gets alone, tested), and leaves their tables
in ``results/{dataset}/cache/{segment}/{group}/`` (:func:`share_group`). A
sibling's own job, when Snakemake runs it, finds its tables there and copies
them into its outputs.

An entry is used only under its key: the variant's list-deciding spec, the
segment, the retrieve stage's code fingerprint and the stamp (size, mtime,
inode) of every input the variant reads. Anything that could change the
variant's lists changes the key, so a stale entry is never used; the key is
also written into the outcomes table, and a sibling whose existing outputs
carry its current key is not recomputed. Entries are removed when used; the
folder can be deleted at any time (the jobs then compute their own lists).

An entry is also sealed: once its tables are written, the sha256 of each is
recorded with its key (``{key}.sha256.json``, written atomically). A job
copies an entry only when every table's bytes hash to what the seal records,
and copies exactly the bytes it hashed. An entry that is damaged (truncated,
rewritten, even as a valid table), incomplete or unsealed (a kill between the
tables and the seal) is never copied: the job logs why, removes it and ranks
its own lists, as with no entry at all.

Siblings are the dataset's configured variants whose inputs are a subset of
this job's (same tokenizer; FTS variants only in a job that has the index),
and whose own jobs are going to run: the workflow writes the retrieve jobs of
each invocation to a plan (``results/cache/retrieve_plan.json``, from
Snakemake's DAG when it starts), so a targeted run of one variant ranks only
that variant; the plan also holds the run's datasets and variants, from
which a job names its siblings (no plan: no sibling). Where the plan cannot
be complete (a download checkpoint still to run) a sibling is ranked only if
its outputs are missing. Siblings also share a group (:func:`share_group`: the tokenizer they
read), and the jobs of one segment and group take a lock, so a sibling's job
waits for the job that is computing its tables instead of computing them a
second time, while a job of another group (which never ranks this one's
lists) runs beside them.

Each group's entry folder is written, sealed, copied and cleaned only under
that group's lock, so no job ever lists, hashes or removes a file that another
job is writing; jobs of other groups, running beside it, keep to their own
folders. The clean-up decides by key, never by time: an entry is removed when
no job can use it any more, that is when an input it was ranked from has
another stamp now (replaced: no key can match it again), when it is of a
variant whose current key this job knows and is another, or when it is an
unsealed or temporary leftover of a killed job. An entry ranked from the
current inputs is kept, however old, for the job that will copy it. On a
filesystem without locks nothing is cleaned (entries are still verified
before any copy).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from ..core import layout
from ..core.atomic import atomic_path, locked
from ..core.config import dataset_family
from ..core.provenance import file_stamp
from ..catalog.registry import inputs_of, retriever_of
from ..catalog.row import RETRIEVERS
from ..catalog.variant import LIST_FIELDS, Variant, grain_spec
from ..catalog.variants import resolve

# pyarrow and the engine are imported where lists are ranked: a job whose
# lists a sibling's job left only copies files, and starts without them.

KINDS = ("rankings", "outcomes", "deep", "timings", "turns")


def needed_inputs(variant: Variant) -> frozenset[str]:
    """The named inputs a retrieve job of this variant reads (the workflow's
    input function reads the same registry)."""
    return inputs_of(variant)


def share_group(variant: Variant) -> str:
    """The group a variant's lists are ranked in with its siblings': its
    tokenizer when it reads tokens, else the inputs it reads. A file-name part."""
    need = needed_inputs(variant)
    return f"tokens-{variant.recipe.seq}" if "tokens" in need else "+".join(sorted(need))


def lock_path(cache: Path, segment: int, variant: Variant) -> Path:
    """The lock the jobs of this segment and the variant's group take."""
    return cache.parent / f"{layout.segment_name(segment)}.{share_group(variant)}.lock"


def entry_folder(cache: Path, variant: Variant) -> Path:
    """Where the entries of the variant's group (in this segment's ``cache``
    folder) live: only jobs holding the group's lock touch it."""
    return cache / share_group(variant)


def list_spec(variant: Variant) -> dict:
    from dataclasses import asdict

    spec = {"name": variant.name, "recipe": asdict(variant.recipe), "skip": variant.skip}
    if variant.retriever is not None:
        spec["retriever"] = variant.retriever
    spec.update(grain_spec(variant))
    return spec


def input_stamps(inputs: dict) -> dict:
    """The stamp of each input a key covers (a name may stand for several files: a fusion's ``fused``)."""
    return {n: [file_stamp(x) for x in p] if isinstance(p, list) else file_stamp(p) for n, p in sorted(inputs.items())}


def retrieval_key(spec: dict, segment: int, n_segments: int, code: str, inputs: dict) -> str:
    """Everything a variant's segment lists depend on, hashed."""
    blob = json.dumps({"spec": {k: spec[k] for k in LIST_FIELDS if k in spec}, "segment": segment,
                       "n_segments": n_segments, "code": code, "inputs": input_stamps(inputs)},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _key_file(cache: Path, name: str) -> Path:
    return cache / "keys" / name


def stored_key(cache: Path, name: str) -> str | None:
    """The key a variant's segment outputs were made under (recorded beside
    the cache, not in the outputs: a key holds file stamps, and outputs must
    be the same bytes whenever the same inputs are given)."""
    try:
        return _key_file(cache, name).read_text().strip()
    except OSError:
        return None


def _record_key(cache: Path, name: str, key: str) -> None:
    with atomic_path(_key_file(cache, name)) as tmp:
        tmp.write_text(key + "\n")


def write_plan(results, jobs, complete: bool, config: dict | None = None) -> None:
    """The retrieve jobs (dataset, variant, segment) this invocation will run;
    ``complete`` is false when the DAG can still grow (a checkpoint to run).
    ``config``: the invocation's datasets and variants, from which a job finds
    its siblings (:func:`siblings`; never a rerun trigger, as jobs read it
    only to share work)."""
    from ..core.atomic import write_json

    # default=str: a YAML date in a description is kept as its text (a spec that changed so ranks nothing:
    # its key matches no job's)
    shared = json.loads(json.dumps({"datasets": (config or {}).get("datasets") or {},
                                    "variants": (config or {}).get("variants") or {}}, default=str))
    write_json(layout.path(layout.RETRIEVE_PLAN, root=results),
               {"complete": bool(complete), "jobs": sorted([list(j) for j in jobs]), "config": shared})


def _plan(results) -> dict:
    try:
        plan = json.loads(Path(layout.path(layout.RETRIEVE_PLAN, root=results)).read_text())
        return plan if isinstance(plan, dict) else {}
    except (OSError, ValueError):
        return {}


def read_plan(results) -> tuple[set, bool]:
    plan = _plan(results)
    try:
        return {tuple(j) for j in plan["jobs"]}, bool(plan["complete"])
    except (KeyError, TypeError):
        return set(), False


def plan_config(results) -> dict:
    """The invocation's datasets and variants as its plan records them ({} without a plan)."""
    config = _plan(results).get("config")
    return config if isinstance(config, dict) else {}


def siblings(config: dict, dataset: str, variant: Variant, inputs: dict) -> list[Variant]:
    """The dataset's other configured variants this job can rank: their inputs
    are among this job's, they are of its group (:func:`share_group`), and
    both retrievers share (a user's retriever ranks only in its own job).
    Empty where ``config`` does not hold the dataset (no plan)."""
    ds = (config.get("datasets") or {}).get(dataset)
    if not isinstance(ds, dict):
        return []
    family = dataset_family(ds)
    have = set(inputs)
    out = []
    if not retriever_of(variant).shares:
        return out
    for name in ds.get("variants") or []:
        if name == variant.name:
            continue
        other = resolve(name, family, config.get("variants") or {})
        if other.run is not None:
            continue  # an imported run is read from its file (imported.py), never ranked
        if not retriever_of(other).shares:
            continue
        if needed_inputs(other) <= have and share_group(other) == share_group(variant):
            out.append(other)
    return out


def group_leaders(variants: list[Variant]) -> frozenset[str]:
    """The variants (a dataset's, in configured order) whose retrieve jobs the
    workflow starts before their siblings' (the rule's priority): one per
    group, the one whose pass can rank all the others (the most inputs: an
    FTS variant ranks the index ones of its tokenizer, not the reverse), the
    first configured among equals. A free core then takes another group's
    pass, not a sibling's job that would wait on the lock of a pass running.
    A variant that ranks alone (a user's retriever) is its own group."""
    best: dict[str, Variant] = {}
    alone: list[str] = []
    for v in (v for v in variants if v.run is None):
        if not retriever_of(v).shares:
            alone.append(v.name)
            continue
        group = share_group(v)
        if group not in best or len(needed_inputs(v)) > len(needed_inputs(best[group])):
            best[group] = v
    return frozenset([*(v.name for v in best.values()), *alone])


def _entry(cache: Path, key: str) -> dict[str, Path]:
    return {kind: cache / f"{key}.{kind}.parquet" for kind in KINDS}


def _seal_path(cache: Path, key: str) -> Path:
    return cache / f"{key}.sha256.json"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _drop(cache: Path, key: str) -> None:
    """Remove an entry: its seal first, so what is left is never sealed."""
    _seal_path(cache, key).unlink(missing_ok=True)
    for p in _entry(cache, key).values():
        p.unlink(missing_ok=True)


def _seal(cache: Path, key: str, variant: str, inputs: dict) -> None:
    """Record the sha256 of the entry's tables as written, with its key, its
    variant and the path and stamp of each input it was ranked from (what
    the clean-up decides by)."""
    from ..core.atomic import write_json

    stamps = [[str(p), file_stamp(p)] for ps in inputs.values() for p in (ps if isinstance(ps, list) else [ps])]
    write_json(_seal_path(cache, key),
               {"key": key, "variant": variant, "inputs": stamps,
                "sha256": {kind: _sha256(p.read_bytes()) for kind, p in _entry(cache, key).items()}})


def _sealed(cache: Path, key: str) -> bool:
    return _seal_path(cache, key).exists() and all(p.exists() for p in _entry(cache, key).values())


def _present(cache: Path, key: str) -> bool:
    """Any part of an entry (a table or its seal) is there."""
    return _seal_path(cache, key).exists() or any(p.exists() for p in _entry(cache, key).values())


def _verified(cache: Path, key: str) -> tuple[dict[str, bytes] | None, str]:
    """The entry's tables (their bytes) when each hashes to its seal, else
    (None, what is wrong)."""
    try:
        seal = json.loads(_seal_path(cache, key).read_text())
        want = seal["sha256"] if seal.get("key") == key else None
    except FileNotFoundError:
        return None, "it has no sha256 seal (a job stopped before sealing it, or it was removed)"
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None, "its sha256 seal is unreadable"
    if not isinstance(want, dict):
        return None, "its sha256 seal is for another key"
    data = {}
    for kind, p in _entry(cache, key).items():
        try:
            data[kind] = p.read_bytes()
        except OSError:
            return None, f"its {kind} table is missing"
        if _sha256(data[kind]) != want.get(kind):
            return None, f"its {kind} table does not match its sha256 ({len(data[kind])} bytes)"
    return data, ""


def _write_bytes(data: bytes, dest) -> None:
    with atomic_path(dest) as tmp:
        tmp.write_bytes(data)


def write_segment_shared(variant: Variant, config: dict | None, dataset: str, segment: int, n_segments: int,
                         inputs: dict, outputs: dict, code: str, log=print, metadata=None, warn=None,
                         code_of=None) -> dict:
    """Produce this variant's segment tables (``outputs``: rankings, outcomes,
    deep), from the cache when a sibling's job left them there, else by ranking
    this variant and its siblings whose outputs are missing or stale.
    ``metadata`` (a dict, or a function returning one, called only when lists
    are ranked) goes into each outcomes table. ``code`` is this job's code
    fingerprint; ``code_of(v)`` gives another variant's (each retriever has its
    own: catalog.registry.code_fingerprint; without it, every sibling's is taken to
    be ``code``). Where ``code_of`` disagrees with ``code`` for this variant,
    no sibling is ranked. ``warn`` (default: ``log``, and a ``memobench:``
    line on stderr) says why a cached entry was not used. ``config`` (its
    datasets and variants) names the siblings; None: the invocation's, from its
    plan (:func:`write_plan`). Returns what happened (for the log and the tests)."""
    inputs = {n: p for n, p in inputs.items() if p is not None}
    if warn is None:
        def warn(msg):
            log(msg)
            print(f"memobench: {msg}", file=sys.stderr)
    # the results folder this job writes under (a test's tmp_path, or results/)
    root = layout.root_of(outputs["rankings"], layout.path(layout.SEGMENT_TABLE, suffix=""))
    cache = Path(layout.path(layout.SHARED_CACHE, root=root, dataset=dataset, segment=layout.segment_name(segment)))
    entries = entry_folder(cache, variant)
    codes = {variant.name: code}

    def key_of(v: Variant) -> str:
        if v.name not in codes:
            codes[v.name] = code if code_of is None else code_of(v)
        return retrieval_key(list_spec(v), segment, n_segments, codes[v.name],
                             {n: inputs[n] for n in needed_inputs(v)})

    def own_outputs(v: Variant) -> dict:
        return {kind: Path(layout.path(layout.SEGMENT_TABLE, root=root, dataset=dataset, variant=v.name,
                                       segment=layout.segment_name(segment), suffix=suffix))
                for kind, suffix in layout.SEGMENT_SUFFIXES.items()}

    key = key_of(variant)
    planned, complete = read_plan(root)
    if config is None:
        config = plan_config(root)
    # without locks (a filesystem that has none) jobs may rank a list twice, never a wrong one
    with locked(lock_path(cache, segment, variant)) as held:
        rejected = None
        if _present(entries, key):
            tables, why = _verified(entries, key)
            if tables is not None:
                for kind in KINDS:
                    if outputs.get(kind) is not None:
                        _write_bytes(tables[kind], outputs[kind])
                _drop(entries, key)
                _record_key(cache, variant.name, key)
                log(f"{variant.name} segment {segment}/{n_segments}: lists computed by a sibling's job "
                    f"(key {key}, sha256 verified), copied from {entries}")
                return {"reused": True, "computed": [], "rejected": None}
            rejected = why
            _drop(entries, key)
            warn(f"{variant.name} segment {segment}/{n_segments}: the cached entry {key} in {entries} is not "
                 f"used: {why}; ranking this variant's segment itself")
        todo = [variant]
        outs = {variant.name: dict(outputs)}
        metas = {variant.name: key}
        candidates = siblings(config, dataset, variant, inputs)
        if candidates and code_of is not None and code_of(variant) != code:
            log(f"{variant.name}: the code fingerprint computed here differs from the rule's; ranking no sibling")
            candidates = []
        current = {variant.name: key}  # the variants whose key this job knows
        for other in candidates:
            k = current[other.name] = key_of(other)
            theirs = own_outputs(other)
            if complete:
                if (dataset, other.name, segment) not in planned:
                    continue  # its job does not run in this invocation
            elif any(Path(p).exists() for p in theirs.values()):
                continue  # without a complete plan, only missing outputs are ranked ahead
            if stored_key(cache, other.name) == k and all(Path(p).exists() for p in theirs.values()):
                continue  # its outputs are up to date
            if _sealed(entries, k):
                continue  # already waiting for its job (which verifies it)
            _drop(entries, k)  # a part left unsealed: ranked again, and sealed once written
            todo.append(other)
            outs[other.name] = {kind: str(p) for kind, p in _entry(entries, k).items()}
            metas[other.name] = k
        from .harness import token_tables

        if len(todo) > 1:
            log(f"{variant.name} segment {segment}/{n_segments}: ranking {len(todo) - 1} sibling variant(s) "
                f"in the same pass: {', '.join(v.name for v in todo[1:])}")
        write_segments(todo, inputs["questions"], inputs["haystacks"], inputs.get("events"), segment, n_segments,
                       outs, log=log, tokens=token_tables(variant.recipe.seq, inputs.get("tokens"),
                                                          inputs.get("fts_tokens")),
                       embeddings_path=inputs.get("embeddings"), inputs=inputs,
                       metadata=metadata() if callable(metadata) else metadata, dataset=dataset)
        for other in todo[1:]:
            _seal(entries, metas[other.name], other.name, {n: inputs[n] for n in needed_inputs(other)})
        _record_key(cache, variant.name, key)
        if held:  # without the lock another job of the group may be writing here
            _collect(entries, current)
    return {"reused": False, "computed": [v.name for v in todo], "rejected": rejected}


def _listing(folder: Path) -> list[Path]:
    """The files in an entry folder (none when it is not there)."""
    try:
        return [p for p in folder.iterdir() if not p.is_dir()]
    except FileNotFoundError:
        return []


def _usable(seal_path: Path, key: str, current: dict[str, str]) -> bool:
    """Whether a sealed entry can still be copied by some job: its seal is
    readable, it is not of a variant whose key is now another, and every input
    it was ranked from still has the stamp it had."""
    try:
        seal = json.loads(seal_path.read_text())
        if seal.get("key") != key or current.get(seal["variant"], key) != key:
            return False
        return all(file_stamp(path) == stamp for path, stamp in seal["inputs"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # unreadable, or an input gone
        return False


def _collect(entries: Path, current: dict[str, str]) -> None:
    """Remove what no job can use from a group's entry folder (the caller
    holds the group's lock, so nothing here is being written or copied):
    temporary files and unsealed tables of killed jobs, and sealed entries
    that :func:`_usable` rejects. ``current`` maps the variants whose key this
    job computed to that key; their entries under it are kept."""
    by_key: dict[str, list[Path]] = {}
    for p in _listing(entries):
        if p.name.endswith(".tmp"):
            p.unlink(missing_ok=True)
        else:
            by_key.setdefault(p.name.split(".", 1)[0], []).append(p)
    keep = set(current.values())
    for key, files in by_key.items():
        if key in keep:
            continue
        seal = _seal_path(entries, key)
        if not (seal in files and _usable(seal, key, current)):
            _drop(entries, key)  # the seal first, so what is left is never sealed
            for p in files:
                p.unlink(missing_ok=True)


# --------------------------------------------------------------------------- ranking a segment


def write_segments(variants: list[Variant], questions_path, haystacks_path, events_path, segment: int,
                   n_segments: int, outs: dict, log=print, tokens: dict | None = None,
                   metadata: dict | None = None, variant_metadata: dict[str, dict] | None = None,
                   embeddings_path=None, inputs: dict | None = None, dataset: str = "") -> None:
    """Rank one segment under several variants in one process, each by its
    retriever, and write each variant's tables: ``outs`` maps a variant name
    to its ``rankings``, ``outcomes`` and (optional) ``deep`` and ``timings`` paths.
    ``tokens`` maps tokenizer names to the tokens stage's tables (the Memo
    engine's); ``embeddings_path`` is the embeddings stage's table of
    ``minilm``; ``inputs`` holds any other named input (``prepared``,
    ``wordllama_embeddings``, ``fused``). ``events_path`` may be None for
    variants that do not read the events (a fusion).
    ``metadata`` goes into each outcomes table's Parquet key-value metadata
    (the retrieve job's provenance), with ``variant_metadata[name]`` added for
    that variant."""
    from .harness import Segment, load_questions
    from .turns import empty_turns
    from ..core.tables import write_table

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
    seg = Segment(questions, haystacks, paths, dict(tokens or {}), label=f"{label} segment {segment}/{n_segments}",
                  outputs=outs)
    groups: dict[str, list[Variant]] = {}
    for v in variants:
        groups.setdefault(retriever_of(v).name, []).append(v)
    tables = {}
    for name, group in groups.items():
        tables.update(RETRIEVERS[name].rank_segment(group, seg, log))
    for v in variants:
        out = outs[v.name]
        if out.get("timings") is not None:
            _write_timings(out["timings"], v, seg, dataset)
        if out.get("turns") is not None:
            write_table(out["turns"], seg.turns[v.name] if v.name in seg.turns else empty_turns())
        rankings, outcomes, deep = tables[v.name]
        # a retriever's own metadata (a user retriever's checks) stays
        meta = {**(outcomes.schema.metadata or {}), **(metadata or {}),
                **((variant_metadata or {}).get(v.name) or {})}
        write_table(out["outcomes"], outcomes.replace_schema_metadata(meta) if meta else outcomes)
        if out.get("deep") is not None:
            write_table(out["deep"], deep)
        write_table(out["rankings"], rankings)


def _write_timings(path, v: Variant, seg, dataset: str) -> None:
    """The variant's timings table: what its retriever timed (``seg.timings``), else empty, saying why."""
    from .timings import MEASURES, UNTIMED_MEMO, write_timings, write_untimed

    if v.name not in seg.timings:
        write_untimed(path, dataset, v.name, UNTIMED_MEMO)
        return
    rows, extra = seg.timings[v.name]
    write_timings(path, rows, {"dataset": dataset, "variant": v.name, "timed": True,
                               "measures": MEASURES[retriever_of(v).name], **extra})


def write_segment(variant: Variant, questions_path, haystacks_path, events_path, segment: int,
                  n_segments: int, rankings_out, outcomes_out, log=print, tokens_path=None,
                  fts_tokens_path=None, deep_out=None, metadata: dict | None = None, embeddings_path=None,
                  inputs: dict | None = None, timings_out=None, dataset: str = "", turns_out=None) -> None:
    """One variant's segment (:func:`write_segments` for one variant, its
    tokenizer's tokens given as ``tokens_path``; a memory service's timings
    go to ``timings_out``, a turn variant's turn lists to ``turns_out``)."""
    from .harness import token_tables

    tokens = token_tables(variant.recipe.seq, tokens_path, fts_tokens_path)
    outs = {variant.name: {"rankings": rankings_out, "outcomes": outcomes_out, "deep": deep_out,
                           "timings": timings_out, "turns": turns_out}}
    write_segments([variant], questions_path, haystacks_path, events_path, segment, n_segments, outs, log=log,
                   tokens=tokens, metadata=metadata, embeddings_path=embeddings_path, inputs=inputs, dataset=dataset)
