"""A variant: a name, the recipe that decides its lists, the skip rule that
decides what is counted, and what it reproduces; with the rule-params form of
it (:func:`to_spec`, :func:`from_spec`) and the harness families' skip rules.

Imports no retriever (the catalog's rows are ``registry``): a stage that only
reads a variant from its rule's params loads no retriever's code."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from ..core.errors import ConfigError
from ..memo.recipe import Recipe

FAMILIES = ("s", "m", "locomo", "cn", "zh")
LME = frozenset({"s", "m"})
# each family's skip rule (docs/harnesses.md#skips-and-denominators)
SKIP = {"s": "run", "m": "run", "locomo": "locomo", "cn": "cn", "zh": "zh"}
# what a variant ranks: whole sessions (every harness, the default), or turns (docs/protocol.md#turn-level),
# whose ranking is also read as a session ranking (each session at its best turn)
GRAINS = ("session", "turn")
# What decides a variant's lists, of its spec (to_spec): the retrieve rule's `variant` param and the
# sibling cache's key (`retriever` only for a user's Python retriever, `grain` only for a turn variant)
LIST_FIELDS = ("name", "recipe", "skip", "retriever", "grain")


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
    grain: str = "session"  # one of GRAINS


def check_family(family: str) -> None:
    if family not in FAMILIES:
        raise ConfigError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}")


def to_spec(v: Variant) -> dict:
    """A plain dict (the rule's params): every setting that decides the lists."""
    spec = {"name": v.name, "recipe": asdict(v.recipe), "skip": v.skip, "harness": v.harness,
            "description": v.description, "baseline": v.baseline}
    if v.run is not None:
        spec["run"] = dict(v.run)
    if v.retriever is not None:
        spec["retriever"] = v.retriever
    spec.update(grain_spec(v))
    return spec


def grain_spec(v: Variant) -> dict:
    """``{"grain": "turn"}`` for a turn variant, else nothing: a session
    variant's params and cache keys stay what they were before grains
    existed (so adding them left every result current)."""
    return {} if v.grain == "session" else {"grain": v.grain}


def from_spec(spec: dict) -> Variant:
    return Variant(spec["name"], Recipe(**spec["recipe"]), spec["skip"], spec.get("harness", ""),
                   spec.get("description", ""), spec.get("baseline", ""), run=spec.get("run"),
                   retriever=spec.get("retriever"), grain=spec.get("grain", "session"))


def with_recipe(variant: Variant, **over) -> Variant:
    return replace(variant, recipe=replace(variant.recipe, **over))
