"""How the report names what it shows: a variant's kind (Memo, a reference
retriever, an imported run, your retriever, a fusion) and label, a question
type (LoCoMo's categories with their names), the runs by dataset."""

from __future__ import annotations

from ..catalog.registry import kind_of
from ..evaluation.official import LOCOMO_CATEGORIES


def is_reference(m: dict) -> bool:
    """A run of a reference retriever (its recipe's backend), not a Memo variant."""
    return kind_of(m) == "reference"


def is_imported(m: dict) -> bool:
    """An imported run: another system's lists read from a file (imported.py)."""
    return bool(m.get("run"))


def is_yours(m: dict) -> bool:
    """A run of a user's Python retriever (config ``variants.<name>.retriever``; retrieval/python.py)."""
    return kind_of(m) == "python"


def is_fusion(m: dict) -> bool:
    """A fusion of other variants' lists (config ``variants.<name>.fuse``; fusion.py)."""
    return kind_of(m) == "fusion"


def kind(m: dict) -> str:
    """What ranked a run: Memo, a reference retriever, an imported run, your retriever, or a fusion."""
    return ("reference retriever" if is_reference(m) else "imported run" if is_imported(m)
            else "your retriever" if is_yours(m) else "fusion" if is_fusion(m) else "Memo")


def label(m: dict) -> str:
    """The variant's name as the report's tables show it."""
    return m["variant"] if kind(m) == "Memo" else f"{m['variant']} ({kind(m)})"


def is_locomo(m: dict) -> bool:
    return (m.get("data") or {}).get("format") == "locomo" or m.get("skip_rule") == "locomo"


def type_label(m: dict, t: str) -> str:
    """A question type as the report names it: LoCoMo's categories with their names."""
    name = LOCOMO_CATEGORIES.get(t) if is_locomo(m) else None
    return f"{t} ({name})" if name else t


def by_dataset(runs: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for m in runs:
        out.setdefault(m["dataset"], []).append(m)
    return out
