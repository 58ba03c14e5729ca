"""Progress lines for long stages (items done / total), rate-limited for logs."""

from __future__ import annotations

import time


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


class Progress:
    """Logs 'what: done / total' at most every ``every_s`` seconds, or when
    another ``every_pct`` percent of ``total`` is done. With ``unit="bytes"``
    the line also gives the percentage and the transfer rate since
    :meth:`begin` (a resumed download counts only what this run fetched)."""

    def __init__(self, log, what: str, total: int | None = None, every_s: float = 5.0,
                 every_pct: float | None = None, unit: str = ""):
        self.log, self.what, self.total, self.every_s = log, what, total, every_s
        self.every_pct, self.unit = every_pct, unit
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
        total = f" / {self.total}" if self.total is not None else ""
        unit = f" {self.unit}" if self.unit else ""
        if self.unit == "bytes":
            elapsed = now - self.t0
            rate = (done - self.start) / elapsed if elapsed > 0 else 0.0
            extra = f" ({pct:.0f}%, {human_bytes(rate)}/s)" + extra
        self.log(f"{self.what}: {done}{total}{unit}{extra}")
