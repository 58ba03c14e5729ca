"""The dataset formats, one row each: how its file is read, the harness
families that read it (the first is the default), what a session document
holds for the reference retrievers, which official scorer applies, and
whether its questions search another dataset's haystacks. Every check of a
format in the package and the workflow reads this table (docs/tables.md for
the tables each reader writes)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DatasetFormat:
    name: str
    reader: str  # the function of memobench.datasets.normalize that writes its tables (readers/ holds the reader)
    families: tuple[str, ...]  # the harness families that read it; the first is the default
    documents: str  # a session document for the reference retrievers: "user" turns or "all" turns
    scorer: str | None  # the official metrics: "longmemeval" (and the retrieval log), "locomo", or none
    raw_file: bool = True  # read from a downloaded or placed file (else embedded in the package)
    searches_haystacks_of: str | None = None  # the format whose haystacks its questions search
    reads_in_parts: bool = False  # its reader takes ``workers`` and reads a large file in parts (datasets/inparts.py)


FORMATS = {f.name: f for f in (
    DatasetFormat("longmemeval", "normalize_longmemeval", ("s", "m"), "user", "longmemeval", reads_in_parts=True),
    DatasetFormat("locomo", "normalize_locomo", ("locomo",), "all", "locomo"),
    DatasetFormat("longmemeval_cn", "normalize_cn", ("cn",), "user", "longmemeval",
                  searches_haystacks_of="longmemeval"),
    DatasetFormat("embedded", "normalize_zh", ("zh",), "all", None, raw_file=False),
)}

# The LongMemEval formats: official metrics by LongMemEval's scorer, and a retrieval log.
LME_FORMATS = tuple(n for n, f in FORMATS.items() if f.scorer == "longmemeval")
# The formats whose session documents are the user turns only.
USER_TURN_FORMATS = frozenset(n for n, f in FORMATS.items() if f.documents == "user")


def user_turns_only(fmt: str) -> bool:
    """True when the documents keep only user turns: ``fmt`` is a dataset
    format, or a recipe's ``documents`` value (``"user"`` or ``"all"``)."""
    return fmt in USER_TURN_FORMATS or fmt == "user"
# The families whose session documents are the user turns only (those of the formats above).
USER_TURN_FAMILIES = frozenset(fam for f in FORMATS.values() if f.documents == "user" for fam in f.families)
# The variant family a dataset's format implies when its config names none.
DEFAULT_FAMILY = {n: f.families[0] for n, f in FORMATS.items()}


def has_raw_file(fmt: str) -> bool:
    """Whether a dataset of this format reads a raw file (downloaded or placed)."""
    return FORMATS[fmt].raw_file
