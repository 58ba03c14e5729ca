"""The result every reference retriever returns."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Ranking(NamedTuple):
    """A whole haystack ranked: ``positions[r]`` is the haystack position
    (0-based) of the document at rank r+1, ``scores[r]`` its score (higher is
    better; non-increasing with rank). Every position appears exactly once."""

    positions: np.ndarray  # int64
    scores: np.ndarray  # float64

    @classmethod
    def empty(cls) -> "Ranking":
        return cls(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64))

    def top(self, depth: int = 50) -> "Ranking":
        """The first ``depth`` ranks (all of them when the haystack is shorter)."""
        return Ranking(self.positions[:depth], self.scores[:depth])

    def ids(self, session_ids, depth: int = 50) -> list[str]:
        """Session ids of the first ``depth`` ranks."""
        return [session_ids[p] for p in self.positions[:depth].tolist()]
