"""Progress lines for long stages (items done / total), rate-limited for logs."""

from __future__ import annotations

import time


class Progress:
    """Logs 'done / total' at most every few seconds."""

    def __init__(self, log, what: str, total: int | None = None, every_s: float = 5.0):
        self.log, self.what, self.total, self.every_s = log, what, total, every_s
        self.last = time.monotonic()

    def __call__(self, done: int, extra: str = "", force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.last >= self.every_s:
            self.last = now
            total = f" / {self.total}" if self.total is not None else ""
            self.log(f"{self.what}: {done}{total}{extra}")
