"""Named variants: each reproduces one original harness (or one variant inside it).

A variant name plus the dataset's harness family (``s``: run.cjs and the S
experiments, ``m``: the streamed M harnesses, ``locomo``, ``cn``, ``zh``)
resolves to a ``Recipe`` (what decides the list) and a skip rule (what is
counted; HARNESSES.md 6.0).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from .engine import Recipe
from .errors import ConfigError

FAMILIES = ("s", "m", "locomo", "cn", "zh")


@dataclass(frozen=True)
class Variant:
    name: str
    recipe: Recipe
    skip: str  # run | locomo | cn | zh
    harness: str  # the original harness this reproduces, for the docs and report
    description: str


def _skip_for(family: str) -> str:
    return {"s": "run", "m": "run", "locomo": "locomo", "cn": "cn", "zh": "zh"}[family]


def _shipped(family: str, **over) -> Recipe:
    """run.cjs / run-m.cjs / locomo.cjs: FTS discovery, S-ASCII check, W-CF, 0.8.0 weights."""
    return Recipe(fts_limit=2000 if family == "m" else 500, **over)


_HARNESS = {"s": "run.cjs", "m": "run-m.cjs", "locomo": "locomo.cjs", "cn": "cn.cjs", "zh": "zh.cjs"}


def _v080(family):
    return Variant("v0.8.0", _shipped(family), _skip_for(family), _HARNESS[family],
                   "shipped 0.8.0 pipeline, FTS-era backend: SQLite FTS5 discovery + JS-token check, "
                   "content-first window, df-proxy IDF weights")


def _v080_index(family):
    harness = {"s": "exp6.cjs", "m": "exp6-m.cjs"}.get(family, "exp6.cjs (on this dataset)")
    return Variant("v0.8.0-index", Recipe(backend="index", seq="exp6", window="exp6"), _skip_for(family),
                   harness, "shipped 0.8.0 ranking on the in-memory inverted index of the 0.12+ product")


def _v050(family):
    return Variant("v0.5.0", _shipped(family, weights="len"), _skip_for(family),
                   _HARNESS[family] + " with length weights",
                   "0.5.0: token/pair length weights with the content-first window")


def _v040(family):
    return Variant("v0.4.0", _shipped(family, weights="len", window="plain"), _skip_for(family),
                   _HARNESS[family] + " with length weights and the plain window",
                   "0.4.0: token/pair length weights with the plain (question-order) window")


BUILDERS = {"v0.8.0": _v080, "v0.8.0-index": _v080_index, "v0.5.0": _v050, "v0.4.0": _v040}

SUPPORTED = {
    "v0.8.0": {"s", "m", "locomo"},
    "v0.8.0-index": {"s", "m", "locomo"},
    "v0.5.0": {"s", "m", "locomo"},
    "v0.4.0": {"s", "m", "locomo"},
}


def resolve(name: str, family: str, custom: dict | None = None) -> Variant:
    """A built-in variant, or a user-defined one (``custom``: the config's
    ``variants`` section: name -> {base, recipe, description})."""
    custom = custom or {}
    if name in custom:
        entry = custom[name]
        base = resolve(entry["base"], family, {k: v for k, v in custom.items() if k != name})
        over = entry.get("recipe") or {}
        unknown = set(over) - {f.name for f in fields(Recipe)}
        if unknown:
            raise ConfigError(f"variant {name!r}: unknown recipe field(s) {', '.join(sorted(unknown))}")
        from .engine import WEIGHTS

        if "weights" in over and over["weights"] not in WEIGHTS:
            raise ConfigError(f"variant {name!r}: unknown weights {over['weights']!r}; known: {', '.join(sorted(WEIGHTS))}")
        v = with_recipe(base, **over)
        return replace(v, name=name, description=entry.get("description", f"{base.name} with {over}"))
    if name not in BUILDERS:
        known = sorted(set(BUILDERS) | set(custom))
        raise ConfigError(f"unknown variant {name!r}; known: {', '.join(known)}")
    if family not in SUPPORTED[name]:
        raise ConfigError(f"variant {name!r} does not apply to a dataset of family {family!r}")
    return BUILDERS[name](family)


def to_spec(v: Variant) -> dict:
    """A plain dict (the rule's params): every setting that decides the lists."""
    return {"name": v.name, "recipe": asdict(v.recipe), "skip": v.skip, "harness": v.harness,
            "description": v.description}


def from_spec(spec: dict) -> Variant:
    return Variant(spec["name"], Recipe(**spec["recipe"]), spec["skip"], spec["harness"], spec["description"])


def known_variants() -> list[str]:
    return sorted(BUILDERS)


def with_recipe(variant: Variant, **over) -> Variant:
    return replace(variant, recipe=replace(variant.recipe, **over))
