"""Progress lines for long stages: what, done / total, the percentage, the
rate and the time left at that rate, rate-limited for logs; a job that runs long also says so on the console.

Every long stage (download, verify, normalize, tokens, retrieve and the
reference retrievers, embeddings, merge with its official metrics and
retrieval log, analyze) makes a :class:`Progress` and calls it as it goes.
Lines go to the job's log at most every ``every_s`` seconds; when the
workflow's stage runner has set a console (:func:`set_console`), a job that
has run for ``CONSOLE_EVERY_S`` seconds also prints its latest line there,
every ``CONSOLE_EVERY_S`` seconds, and its last line when it ends, so a long
job is never silent and a short one adds nothing to the console.
"""

from __future__ import annotations

import time
from typing import Callable

CONSOLE_EVERY_S = 30.0

_console: Callable[[str], None] | None = None


def set_console(write: Callable[[str], None] | None) -> None:
    """Where a long job's progress also goes (None: the log only)."""
    global _console
    _console = write


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def human_seconds(s: float) -> str:
    """A duration as a reader takes it in: ``45 s``, ``12 min``, ``2.5 h``."""
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def _rate(per_s: float, unit: str) -> str:
    if unit == "bytes":
        return f"{human_bytes(per_s)}/s"
    per = f" {unit}/s" if unit else "/s"
    return f"{per_s:,.0f}{per}" if per_s >= 100 else f"{per_s:.1f}{per}"


class Progress:
    """Logs 'what: done / total unit (pct%, rate, time left)' at most every ``every_s``
    seconds, or when another ``every_pct`` percent of ``total`` is done. The
    rate counts from :meth:`begin` (a resumed download counts only what this
    run fetched). ``extra`` is appended to the line."""

    def __init__(self, log, what: str, total: int | None = None, every_s: float = 5.0,
                 every_pct: float | None = None, unit: str = ""):
        self.log, self.what, self.total, self.every_s = log, what, total, every_s
        self.every_pct, self.unit = every_pct, unit
        self.console_last = self.created = time.monotonic()
        self.console_shown = False
        self.begin(0)

    def begin(self, done: int) -> None:
        self.t0 = self.last = time.monotonic()
        self.start, self.last_pct = done, self._pct(done)

    def _pct(self, done: int) -> float:
        return 100.0 * done / self.total if self.total else 100.0

    def __call__(self, done: int, extra: str = "", force: bool = False) -> None:
        now = time.monotonic()
        pct = self._pct(done)
        due = now - self.last >= self.every_s
        if self.every_pct is not None:
            due = due or pct - self.last_pct >= self.every_pct or (self.total is not None and done >= self.total)
        if not (force or due):
            return
        self.last, self.last_pct = now, pct
        elapsed = now - self.t0
        per_s = (done - self.start) / elapsed if elapsed > 0 else 0.0
        rate = _rate(per_s, self.unit)
        total = f" / {self.total}" if self.total is not None else ""
        unit = f" {self.unit}" if self.unit else ""
        share = f"{pct:.0f}%, " if self.total else ""
        # at this rate, what is left: a line that only says how far it is cannot say when to come back
        left = f", {human_seconds((self.total - done) / per_s)} left" \
            if self.total is not None and 0 < done < self.total and per_s > 0 else ""
        line = f"{self.what}: {done}{total}{unit} ({share}{rate}{left}){extra}"
        self.log(line)
        if _console is not None and (now - self.console_last >= CONSOLE_EVERY_S or (force and self.console_shown)):
            self.console_last, self.console_shown = now, True
            _console(line)
