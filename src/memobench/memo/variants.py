"""Named variants: each reproduces one original harness (or one variant inside it).

A variant name plus the dataset's harness family (``s``: run.cjs and the S
experiments, ``m``: the streamed M harnesses, ``locomo``, ``cn``, ``zh``)
resolves to a ``Recipe`` (what decides the list) and a skip rule (what is
counted; docs/harnesses.md#skips-and-denominators). Where an original harness has a bug that defines
its published number, the variant keeps it and its description says so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from ..errors import ConfigError
from ..formats import USER_TURN_FAMILIES
from .recipe import REFERENCE_BACKENDS, Recipe, validate

FAMILIES = ("s", "m", "locomo", "cn", "zh")
LME = frozenset({"s", "m"})
# An imported run (config ``variants.<name>.run``; src/memobench/retrieve/imported.py):
# another system's lists read from a file. Its recipe's backend; not a recipe
# choice: a user variant states it by ``run``.
IMPORTED_BACKEND = "imported"
RUN_FORMATS = ("trec", "retrievallog", "json")
# The recipe backend of a user's Python retriever (config ``variants.<name>.retriever``;
# src/memobench/retrievers/pyretriever.py): not a recipe choice, a user variant states it by ``retriever``.
PYTHON_BACKEND = "python"
# The recipe backend of a fusion variant (config ``variants.<name>.fuse``; src/memobench/retrievers/fusion.py):
# its list is fused from other variants' deep lists; not a recipe choice either.
FUSION_BACKEND = "fusion"
FUSION_METHODS = ("rrf", "combsum", "borda")
RRF_K = 60  # rrf's constant k in 1 / (k + rank), Cormack et al.'s


@dataclass(frozen=True)
class Variant:
    name: str
    recipe: Recipe
    skip: str  # run | locomo | cn | zh | exp | exp3 | expm
    harness: str  # the original harness this reproduces, for the docs and report
    description: str
    baseline: str = ""  # the variant it is an experiment against (falsifier)
    # an imported run: {"file", "format"}; None for the others
    run: dict | None = field(default=None, hash=False)
    # what ranks a variant that is not a recipe: a user's Python retriever {"callable", "prepare"
    # (or None), "params"}, or a fusion {"of", "method", "k" (rrf only)}; None for the others
    retriever: dict | None = field(default=None, hash=False)


_SKIP = {"s": "run", "m": "run", "locomo": "locomo", "cn": "cn", "zh": "zh"}
_HARNESS = {"s": "run.cjs", "m": "run-m.cjs", "locomo": "locomo.cjs"}


def _shipped(family: str, **over) -> Recipe:
    """run.cjs / run-m.cjs / locomo.cjs: FTS discovery, S-ASCII check, W-CF, 0.8.0 weights."""
    return Recipe(fts_limit=2000 if family == "m" else 500, **over)


def _pipelines(family: str) -> dict[str, Variant]:
    """The shipped pipelines (v0.8.0 and its index twin, v0.5.0, v0.4.0)."""
    h = _HARNESS.get(family, "")
    idx = {"s": "exp6.cjs", "m": "exp6-m.cjs"}.get(family, "exp6.cjs's engine on LoCoMo")
    return {
        "v0.8.0": Variant("v0.8.0", _shipped(family), _SKIP[family], h,
                          "shipped 0.8.0 pipeline, FTS-era backend: SQLite FTS5 discovery + JS-token check, "
                          "content-first window, df-proxy IDF weights"),
        "v0.8.0-index": Variant("v0.8.0-index", Recipe(backend="index", seq="exp6", window="exp6"), _SKIP[family],
                                idx, "shipped 0.8.0 ranking on the in-memory inverted index of the 0.12+ product"),
        "v0.5.0": Variant("v0.5.0", _shipped(family, weights="len"), _SKIP[family], h + " with length weights",
                          "0.5.0: token/pair length weights with the content-first window"),
        "v0.4.0": Variant("v0.4.0", _shipped(family, weights="len", window="plain"), _SKIP[family],
                          h + " with length weights and the plain window",
                          "0.4.0: token/pair length weights with the plain (question-order) window"),
    }


def _experiments() -> dict[str, Variant]:
    """exp, exp2, exp3, exp4, exp4-m, exp5, exp5-m (docs/harnesses.md#expcjs to #exp5cjs-and-exp5-mcjs)."""
    v: dict[str, Variant] = {}

    def add(name, recipe, skip, harness, description, baseline=""):
        v[name] = Variant(name, recipe, skip, harness, description, baseline)

    # exp.cjs: W-PLAIN; the phrase step's JS tokens are question.split(" ") (a bug
    # that empties P) and P is then removed from the output (a second bug).
    exp = Recipe(window="plain", question_check="raw_split", token_check="split", final="drop_p")
    add("exp-V0", replace(exp, weights="one", pairs=False), "exp", "exp.cjs V0",
        "0.3.x matched-term count (tokens weight 1); keeps exp.cjs's raw-split phrase step and dropped P")
    add("exp-V1", replace(exp, weights="one", v1_first_list_only=True), "exp", "exp.cjs V1",
        "tokens + pairs weight 1, but (a bug kept here) only t1's list is counted")
    add("exp-V2", replace(exp, weights="len", pairs=False), "exp", "exp.cjs V2", "token-length weights")
    add("exp-V3", replace(exp, weights="v3"), "exp", "exp.cjs V3", "tokens 1 + pairs 2")
    add("exp-V4", replace(exp, weights="one", pairs=False, page=20), "exp", "exp.cjs V4",
        "tokens weight 1 with a per-term page of 20")
    # exp2.cjs: the phrase step works, but P is still removed from the output.
    exp2 = Recipe(window="plain", final="drop_p")
    add("exp2-V0", replace(exp2, weights="one", pairs=False), "exp", "exp2.cjs V0", "matched-term count")
    add("exp2-V2", replace(exp2, weights="len", pairs=False), "exp", "exp2.cjs V2", "token-length weights")
    add("exp2-V3", replace(exp2, weights="v3"), "exp", "exp2.cjs V3", "tokens 1 + pairs 2")
    add("exp2-V5", replace(exp2, weights="v5"), "exp", "exp2.cjs V5", "len(t) + 2*len(pair)")
    add("exp2-V6", replace(exp2, weights="len"), "exp", "exp2.cjs V6",
        "token + pair length weights, plain window (0.4.x)")
    # exp3.cjs: the 0.5.0 pipeline plus time-aware variants. T2s and T3 call the
    # soft boost with minTime = null, so they equal V6 and T1 (kept as in the original).
    exp3 = Recipe(weights="len")
    add("exp3-V6", exp3, "exp3", "exp3.cjs V6", "0.5.0 baseline: content-first window, length weights")
    add("exp3-T1", replace(exp3, date_words=True), "exp3", "exp3.cjs T1",
        "date words appended to the window without de-duplication", "exp3-V6")
    add("exp3-T2h", replace(exp3, time_filter="hard"), "exp3", "exp3.cjs T2h",
        "hard 'since' filter in every per-phrase list", "exp3-V6")
    add("exp3-T2s", exp3, "exp3", "exp3.cjs T2s",
        "soft time boost, never applied (called with minTime = null): identical to V6", "exp3-V6")
    add("exp3-T2m", replace(exp3, time_filter="dual"), "exp3", "exp3.cjs T2m",
        "T2h final followed by the V6 final", "exp3-V6")
    add("exp3-T3", replace(exp3, date_words=True), "exp3", "exp3.cjs T3",
        "T1 plus the soft boost, never applied: identical to T1", "exp3-V6")
    # exp4.cjs: S-CJKR, W-070 with a stop-list parameter, FTS LIMIT 2000.
    exp4 = Recipe(seq="cjkr", window="070", weights="len", fts_limit=2000)
    add("exp4-A0-base", exp4, "exp3", "exp4.cjs A0-base", "0.7.x baseline (S-CJKR, W-070, length weights)")
    add("exp4-A1+5", replace(exp4, stop="a1"), "exp3", "exp4.cjs A1+5", "base + 5 stop words", "exp4-A0-base")
    add("exp4-A2+15", replace(exp4, stop="a2"), "exp3", "exp4.cjs A2+15", "base + 15 stop words", "exp4-A0-base")
    add("exp4-A3+12", replace(exp4, stop="a3"), "exp3", "exp4.cjs A3+12",
        "base + A3 (labelled +12, adds 11 words)", "exp4-A0-base")
    a2 = replace(exp4, stop="a2")
    add("exp4-B-hard", a2, "exp3", "exp4.cjs B-hard", "A2 stop list (the header says A1), P first", "exp4-A0-base")
    for b in (12, 24, 48):
        add(f"exp4-B-bonus{b}", replace(a2, final="bonus", bonus=b), "exp3", f"exp4.cjs B-bonus{b}",
            f"phrase hits pooled with bonus {b} + (10 - index)", "exp4-A0-base")
    add("exp4-C-len", a2, "exp3", "exp4.cjs C-len", "A2 stop list, length weights (= B-hard)", "exp4-A0-base")
    add("exp4-C-idfOracle", replace(a2, weights="idfO4"), "exp3", "exp4.cjs C-idfOracle",
        "tokens 4*idf (true df), pairs len", "exp4-A0-base")
    add("exp4-C-idfProxy", replace(a2, weights="idfP4"), "exp3", "exp4.cjs C-idfProxy",
        "tokens 4*idf (df capped at 50), pairs len", "exp4-A0-base")
    add("exp4-C-lenIdf", replace(a2, weights="lenIdfO"), "exp3", "exp4.cjs C-lenIdf",
        "tokens len*idf (true df), pairs len", "exp4-A0-base")
    # exp4-m.cjs: the same on the M stream; empty-seq questions are unrecorded but
    # stay in the hit-rate denominators.
    add("exp4m-base", exp4, "expm", "exp4-m.cjs base", "0.7.x baseline on M")
    for name, w in (("idfProxy", "idfP4"), ("idfOracle", "idfO4"), ("lenIdfOracle", "lenIdfO"),
                    ("lenIdfProxy", "lenIdfP")):
        add(f"exp4m-{name}", replace(a2, weights=w), "expm", f"exp4-m.cjs {name}",
            f"A2 stop list, {w} token weights, pairs len", "exp4m-base")
    # exp5.cjs (S-ASCII) and exp5-m.cjs (S-CJKR): stem phrases after the pairs.
    exp5 = Recipe(window="070", weights="len", fts_limit=2000)
    add("exp5-base", exp5, "exp3", "exp5.cjs base", "0.7.x baseline (S-ASCII, W-070)")
    add("exp5-S1", replace(exp5, stems="s1"), "exp3", "exp5.cjs S1",
        "stem phrases, not de-duplicated (a stem equal to its token counts twice)", "exp5-base")
    add("exp5-S2", replace(exp5, stems="s2"), "exp3", "exp5.cjs S2", "de-duplicated stem phrases", "exp5-base")
    add("exp5m-base", replace(exp5, seq="cjkr"), "expm", "exp5-m.cjs base", "0.7.x baseline on M (S-CJKR)")
    add("exp5m-S2", replace(exp5, seq="cjkr", stems="s2"), "expm", "exp5-m.cjs S2",
        "de-duplicated stem phrases on M", "exp5m-base")
    return v


def _cn() -> dict[str, Variant]:
    """cn.cjs: every JS check is S-ASCII, N = distinct ids (docs/harnesses.md#cncjs)."""
    base = Recipe(n_mode="distinct")
    return {
        "cn-A": Variant("cn-A", base, "cn", "cn.cjs A", "pre-0.7.0 tokenizer: ASCII words only (W-CF)"),
        "cn-A2": Variant("cn-A2", replace(base, window="070"), "cn", "cn.cjs A2",
                         "0.7.0 tokenizer (W-070): Han runs enable the weighted step, never match", "cn-A"),
        "cn-B": Variant("cn-B", replace(base, window="cnb"), "cn", "cn.cjs B",
                        "Han runs only: 0 by construction", "cn-A"),
    }


def _zh() -> dict[str, Variant]:
    """zh.cjs: S-ZH checks, N = 10 distinct ids (docs/harnesses.md#zhcjs)."""
    base = Recipe(seq="zh", n_mode="distinct")
    return {
        "zh-A": Variant("zh-A", base, "zh", "zh.cjs A", "pre-0.7.0 window (W-CF, ASCII words only)"),
        "zh-B": Variant("zh-B", replace(base, window="070"), "zh", "zh.cjs B", "0.7.0 window with Han runs", "zh-A"),
    }


# Session documents of the reference retrievers: LongMemEval-format families
# (s, m, and cn, which searches LongMemEval-S's haystacks) use the user turns,
# as LongMemEval's run_retrieval.py; LoCoMo and zh all turns.
_REFERENCE = {
    "bm25-official": ("LongMemEval flat-bm25", "LongMemEval's flat BM25 exactly: rank_bm25 BM25Okapi defaults, "
                                               "split(' ') tokens, numpy argsort order"),
    "bm25s": ("bm25s 0.3.16", "the bm25s library with its defaults (lucene BM25, k1 1.5, b 0.75) and default "
                              "tokenizer, one index per haystack"),
    "fts5-bm25": ("SQLite FTS5 bm25()", "SQLite FTS5's own bm25() (k1 1.2, b 0.75, unicode61), one table per "
                                        "haystack"),
    "minilm": ("all-MiniLM-L6-v2", "dense all-MiniLM-L6-v2 embeddings (truncated at 256 word pieces), cosine "
                                   "similarity"),
    "wordllama": ("WordLlama l2_supercat 256", "static WordLlama embeddings (l2_supercat, 256 dimensions): the mean "
                                               "of a text's token vectors, cosine similarity"),
}


def references(family: str) -> dict[str, Variant]:
    """The reference retrievers (docs/protocol.md#reference-retrievers) as variants of a family:
    the family's skip rule, so their questions and gold (the denominators)
    are the Memo variants'."""
    if family not in FAMILIES:
        raise ConfigError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")
    docs = "user" if family in USER_TURN_FAMILIES else "all"
    out = {name: Variant(name, Recipe(backend=name, documents=docs), _SKIP[family], "reference retriever: " + h,
                         f"{d}; a session's document: its {'user turns' if docs == 'user' else 'turns'}")
           for name, (h, d) in _REFERENCE.items()}
    if docs == "user":
        # the documented pair: the same BM25 over every turn (assistant turns too),
        # compared with bm25-official by the paired statistics
        h, d = _REFERENCE["bm25-official"]
        out["bm25-official-all"] = Variant("bm25-official-all", Recipe(backend="bm25-official", documents="all"),
                                           _SKIP[family], "reference retriever: " + h,
                                           f"{d}; a session's document: all its turns (user and assistant)",
                                           "bm25-official")
    return out


_EXPERIMENTS = _experiments()
_CN = _cn()
_ZH = _zh()


def builtin(family: str) -> dict[str, Variant]:
    """Every built-in Memo variant that applies to a family (the reference
    retrievers are :func:`references`)."""
    if family in LME:
        return {**_pipelines(family), **_EXPERIMENTS}
    if family == "locomo":
        return _pipelines(family)
    if family == "cn":
        return dict(_CN)
    if family == "zh":
        return dict(_ZH)
    raise ConfigError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")


def known_variants() -> list[str]:
    names: set[str] = set()
    for family in FAMILIES:
        names |= set(builtin(family)) | set(references(family))
    return sorted(names)


def resolve(name: str, family: str, custom: dict | None = None) -> Variant:
    """A built-in variant, or a user-defined one (``custom``: the config's
    ``variants`` section: name -> {base, recipe, description})."""
    custom = custom or {}
    if name in custom:
        if name in known_variants():
            # results/{dataset}/{name} would silently hold other numbers under a built-in's label
            raise ConfigError(f"variant {name!r}: a user variant cannot take the name of a built-in one; "
                              f"choose another name")
        entry = custom[name]
        if "run" in entry:
            return imported_variant(name, family, entry)
        if "retriever" in entry:
            return python_variant(name, family, entry)
        if "fuse" in entry:
            return fusion_variant(name, family, entry, {k: v for k, v in custom.items() if k != name})
        if "base" not in entry:
            raise ConfigError(f"variant {name!r}: give base (the built-in variant it changes), retriever "
                              f"(your own Python callable), run (another system's output file) or fuse "
                              f"(other variants' lists fused)")
        base = resolve(entry["base"], family, {k: v for k, v in custom.items() if k != name})
        over = entry.get("recipe") or {}
        validate(over, f"variant {name!r}")
        v = with_recipe(base, **over)
        return replace(v, name=name, baseline=base.name,
                       description=entry.get("description", f"{base.name} with {over}"))
    variants = {**builtin(family), **references(family)}
    if name not in variants:
        if name in known_variants():
            raise ConfigError(f"variant {name!r} does not apply to a dataset of family {family!r}")
        known = sorted(set(known_variants()) | set(custom))
        raise ConfigError(f"unknown variant {name!r}; known: {', '.join(known)}")
    return variants[name]


def imported_variant(name: str, family: str, entry: dict) -> Variant:
    """An imported run (config ``variants.<name>.run``) as a variant of a
    family: the family's skip rule on the default recipe (as the reference
    retrievers), so its questions, gold and denominators are the Memo
    variants'; ``against`` is the variant its paired statistics compare it
    with (besides v0.8.0)."""
    if family not in FAMILIES:
        raise ConfigError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")
    extra = sorted(set(entry) - {"run", "against", "description"})
    if extra:
        raise ConfigError(f"variant {name!r}: an imported run takes no {', '.join(extra)} "
                          f"(only run, against and description)")
    run = entry["run"]
    fmt = run.get("format")
    if fmt not in RUN_FORMATS or not run.get("file"):
        raise ConfigError(f"variant {name!r}: run needs file (a path) and format ({', '.join(RUN_FORMATS)})")
    if fmt == "retrievallog" and family not in (*LME, "cn"):
        raise ConfigError(f"variant {name!r}: a retrieval log is LongMemEval's format; a dataset of family "
                          f"{family!r} takes format trec or json")
    against = entry.get("against") or ""
    if against == name:
        raise ConfigError(f"variant {name!r}: against names the variant itself; name another variant")
    spec = {"file": str(run["file"]), "format": fmt}
    return Variant(name, Recipe(backend=IMPORTED_BACKEND), _SKIP[family], f"imported {fmt} run",
                   entry.get("description", f"ranked lists read from {spec['file']}"), against, run=spec)


def python_variant(name: str, family: str, entry: dict) -> Variant:
    """A user's Python retriever (config ``variants.<name>.retriever``) as a
    variant of a family: the family's skip rule, so its questions and gold
    are the Memo variants'; its documents are the user's choice, by default
    the family's rule (as the reference retrievers')."""
    if family not in FAMILIES:
        raise ConfigError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")
    if set(entry) - {"retriever", "description"}:
        extra = ", ".join(sorted(set(entry) - {"retriever", "description"}))
        raise ConfigError(f"variant {name!r}: a retriever variant takes no {extra} (only retriever and description)")
    r = entry["retriever"]
    where = f"variant {name!r}: retriever"
    for key in ("callable", "prepare"):
        if r.get(key) is not None and not _callable_spec(r[key]):
            raise ConfigError(f"{where}: {key} {r[key]!r} is not 'module:function' or 'path/to/file.py:function'")
    if not r.get("callable"):
        raise ConfigError(f"{where}: callable is required ('module:function' or 'path/to/file.py:function')")
    params = r.get("params") or {}
    if not isinstance(params, dict):
        raise ConfigError(f"{where}: params must be a mapping of keyword arguments, not {params!r}")
    docs = r.get("documents") or ("user" if family in USER_TURN_FAMILIES else "all")
    validate({"documents": docs}, where)
    spec = {"callable": r["callable"], "prepare": r.get("prepare"), "params": params}
    return Variant(name, Recipe(backend=PYTHON_BACKEND, documents=docs), _SKIP[family],
                   f"your retriever: {r['callable']}",
                   entry.get("description", f"{r['callable']} over each session's "
                                            f"{'user turns' if docs == 'user' else 'turns'}"),
                   retriever=spec)


def fusion_variant(name: str, family: str, entry: dict, others: dict | None = None) -> Variant:
    """A fusion of other variants' deep lists (config ``variants.<name>.fuse``;
    src/memobench/retrievers/fusion.py) as a variant of a family: the family's skip
    rule, as the reference retrievers'. ``others``: the config's other user
    variants, which it may fuse (never another fusion)."""
    if family not in FAMILIES:
        raise ConfigError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")
    where = f"variant {name!r}: fuse"
    if set(entry) - {"fuse", "description"}:
        extra = ", ".join(sorted(set(entry) - {"fuse", "description"}))
        raise ConfigError(f"variant {name!r}: a fusion variant takes no {extra} (only fuse and description)")
    f = entry["fuse"] or {}
    of = f.get("of")
    if not isinstance(of, list) or len(of) < 2 or not all(isinstance(o, str) for o in of):
        raise ConfigError(f"{where}: of must list at least two variants, not {of!r}")
    if len(set(of)) != len(of) or name in of:
        raise ConfigError(f"{where}: of lists a variant twice or the fusion itself: {of}")
    method = f.get("method", "rrf")
    if method not in FUSION_METHODS:
        raise ConfigError(f"{where}: method {method!r} is not one of {', '.join(FUSION_METHODS)}")
    if "k" in f and method != "rrf":
        raise ConfigError(f"{where}: k is the rrf constant; method {method!r} takes none")
    k = f.get("k", RRF_K)
    if method == "rrf" and (not isinstance(k, int) or isinstance(k, bool) or k < 0):
        raise ConfigError(f"{where}: k must be an integer >= 0, not {k!r}")
    cycle = _fusion_cycle(name, of, others or {})
    if cycle:
        # resolving it would pass through the fusion itself, which ``others`` leaves out: name the loop instead
        raise ConfigError(f"{where}: a fusion cycle: {' -> '.join(cycle)}; a fusion fuses variants that are not "
                          f"fusions")
    for o in of:
        if resolve(o, family, others).recipe.backend == FUSION_BACKEND:
            raise ConfigError(f"{where}: {o!r} is itself a fusion; fuse the variants it fuses instead")
    spec = {"of": list(of), "method": method, **({"k": k} if method == "rrf" else {})}
    what = f"{method}{f' (k {k})' if method == 'rrf' else ''} of {', '.join(of)}"
    return Variant(name, Recipe(backend=FUSION_BACKEND), _SKIP[family], f"fusion: {what}",
                   entry.get("description", f"the deep lists of {', '.join(of)} fused by {what.split(' of ')[0]}"),
                   retriever=spec)


def _fusion_cycle(name: str, of: list, others: dict) -> list[str] | None:
    """The path [name, ..., name] by which a fusion reaches itself through the
    user variants it fuses (their ``fuse.of``, or a ``base``), or None."""
    def via(v: str) -> list:
        entry = others.get(v)
        if not isinstance(entry, dict):
            return []
        fuse = entry.get("fuse")
        got = list(fuse.get("of") or []) if isinstance(fuse, dict) and isinstance(fuse.get("of"), list) else []
        return got + ([entry["base"]] if isinstance(entry.get("base"), str) else [])

    stack, seen = [(o, [name, o]) for o in reversed(of)], set()
    while stack:
        v, path = stack.pop()
        if v == name:
            return path
        if v in seen:
            continue
        seen.add(v)
        stack += [(w, path + [w]) for w in reversed(via(v))]
    return None


def _callable_spec(text) -> bool:
    """'module.sub:function' or 'path/to/file.py:function' (the function may be dotted: 'Class.method')."""
    import re

    if not isinstance(text, str) or ":" not in text:
        return False
    target, _, func = text.rpartition(":")
    if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", func):
        return False
    return target.endswith(".py") or bool(re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", target))


def to_spec(v: Variant) -> dict:
    """A plain dict (the rule's params): every setting that decides the lists."""
    spec = {"name": v.name, "recipe": asdict(v.recipe), "skip": v.skip, "harness": v.harness,
            "description": v.description, "baseline": v.baseline}
    if v.run is not None:
        spec["run"] = dict(v.run)
    if v.retriever is not None:
        spec["retriever"] = v.retriever
    return spec


def from_spec(spec: dict) -> Variant:
    return Variant(spec["name"], Recipe(**spec["recipe"]), spec["skip"], spec.get("harness", ""),
                   spec.get("description", ""), spec.get("baseline", ""), run=spec.get("run"),
                   retriever=spec.get("retriever"))


def with_recipe(variant: Variant, **over) -> Variant:
    return replace(variant, recipe=replace(variant.recipe, **over))
