"""How the report names what it shows: a variant's kind (Memo, a reference
retriever, an imported run, your retriever, a fusion) and label, a question
type (LoCoMo's categories with their names), the runs by dataset."""

from __future__ import annotations

from ..catalog.registry import kind_of
from ..evaluation.metrics import coverage
from ..evaluation.official import LOCOMO_CATEGORIES


def is_imported(m: dict) -> bool:
    """An imported run: another system's lists read from a file (imported.py)."""
    return bool(m.get("run"))


# how the report names each kind of the catalog (catalog.registry.kind_of)
KIND_NAMES = {"memo": "Memo", "reference": "reference retriever", "imported": "imported run",
              "python": "your retriever", "fusion": "fusion", "system": "memory service"}


def kind(m: dict) -> str:
    """What ranked a run: Memo, a reference retriever, an imported run, your retriever, or a fusion."""
    return KIND_NAMES["imported"] if is_imported(m) else KIND_NAMES[kind_of(m)]


def label(m: dict) -> str:
    """The variant's name as the report's tables show it (a turn variant says so: its session
    figures are its sessions at their best turn; a run that lists only some of the evaluated
    questions says how many, since its rates count the others as misses)."""
    what = [] if kind(m) == "Memo" else [kind(m)]
    if m.get("grain") == "turn":
        what.append("ranks turns")
    if coverage_text(m):
        what.append(coverage_text(m))
    return f"{m['variant']} ({', '.join(what)})" if what else m["variant"]


def coverage_text(m: dict) -> str:
    """``covers 1 of 1977 questions`` where a run's lists leave evaluated questions out (else "")."""
    cov, n = coverage(m)
    return f"covers {cov} of {n} questions" if cov < n else ""


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
