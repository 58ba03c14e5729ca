"""Named variants: each reproduces one original harness (or one variant inside it).

A variant name plus the dataset's harness family (``s``: run.cjs and the S
experiments, ``m``: the streamed M harnesses, ``locomo``, ``cn``, ``zh``)
resolves to a ``Recipe`` (what decides the list) and a skip rule (what is
counted; docs/harnesses.md#skips-and-denominators). Where an original harness has a bug that defines
its published number, the variant keeps it and its description says so.
The reference retrievers' variants are made from the catalog's rows
(``registry``); a user's variant that is not a recipe (a Python retriever, a
fusion, an imported run) is made by its kind's row (``Row.make_variant``).
"""

from __future__ import annotations

from dataclasses import replace

from ..core.errors import ConfigError
from ..core.formats import USER_TURN_FAMILIES
from ..memo.recipe import Recipe
from . import registry
from .variant import FAMILIES, GRAINS, LME, SKIP as _SKIP, Variant, check_family, with_recipe

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
def references(family: str) -> dict[str, Variant]:
    """The reference retrievers (docs/protocol.md#reference-retrievers) as variants of a family:
    the family's skip rule, so their questions and gold (the denominators)
    are the Memo variants'."""
    check_family(family)
    docs = "user" if family in USER_TURN_FAMILIES else "all"
    rows = registry.rows("reference")
    out = {r.name: Variant(r.name, Recipe(backend=r.name, documents=docs), _SKIP[family],
                           "reference retriever: " + r.label,
                           f"{r.description}; a session's document: its {'user turns' if docs == 'user' else 'turns'}")
           for r in rows}
    if docs == "user":
        # the documented pair: the same retriever over every turn (assistant turns too),
        # compared with it by the paired statistics
        for r in rows:
            if r.all_turns:
                name = f"{r.name}-all"
                out[name] = Variant(name, Recipe(backend=r.name, documents="all"), _SKIP[family],
                                    "reference retriever: " + r.label,
                                    f"{r.description}; a session's document: all its turns (user and assistant)",
                                    r.name)
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


def _with_grain(v: Variant, entry: dict) -> Variant:
    """A user variant at the grain its entry asks (``grain``; sessions by
    default), where its retriever ranks turns (its row's ``turns``)."""
    grain = entry.get("grain", "session")
    if grain not in GRAINS:
        raise ConfigError(f"variant {v.name!r}: grain {grain!r} is not one of {', '.join(GRAINS)}")
    if grain == "turn" and not registry.row(v.recipe.backend).turns:
        raise ConfigError(f"variant {v.name!r}: grain turn: {registry.row(v.recipe.backend).label} ranks whole "
                          f"sessions only (turns are ranked by: {', '.join(r.name for r in registry.rows() if r.turns)})")
    if grain == "turn" and (v.retriever or {}).get("prepare"):
        raise ConfigError(f"variant {v.name!r}: grain turn: prepare gives one value per session document, and a "
                          f"turn variant ranks turns; leave prepare out (or rank sessions)")
    return v if grain == "session" else replace(v, grain=grain)


def resolve(name: str, family: str, custom: dict | None = None) -> Variant:
    """A built-in variant, or a user-defined one (``custom``: the config's
    ``variants`` section: name -> {base, recipe, description})."""
    custom = custom or {}
    if name in custom:
        if name in known_variants():
            # results/{dataset}/{name} would silently hold other numbers under a built-in's label
            raise ConfigError(f"variant {name!r}: a user variant cannot take the name of a built-in one; "
                              f"choose another name")
        entry = {k: v for k, v in custom[name].items() if k != "grain"}
        others = {k: v for k, v in custom.items() if k != name}
        for row in registry.rows():
            if row.config_key and row.config_key in entry:
                check_family(family)
                v = _with_grain(row.make_variant(name, family, entry, others), custom[name])
                if row.check_variant:
                    row.check_variant(v, family, others)
                return v
        if "base" not in entry:
            raise ConfigError(f"variant {name!r}: give base (the built-in variant it changes), retriever "
                              f"(your own Python callable), run (another system's output file) or fuse "
                              f"(other variants' lists fused)")
        base = resolve(entry["base"], family, {k: v for k, v in custom.items() if k != name})
        over = entry.get("recipe") or {}
        registry.validate(over, f"variant {name!r}")
        v = with_recipe(base, **over)
        return _with_grain(replace(v, name=name, baseline=base.name,
                                   description=entry.get("description", f"{base.name} with {over}")),
                           custom[name])
    variants = {**builtin(family), **references(family)}
    if name not in variants:
        if name in known_variants():
            raise ConfigError(f"variant {name!r} does not apply to a dataset of family {family!r}")
        known = sorted(set(known_variants()) | set(custom))
        raise ConfigError(f"unknown variant {name!r}; known: {', '.join(known)}")
    return variants[name]
