"""The ingestion ledger (:data:`layout.SYSTEM_LEDGER`): the namespaces a variant has ingested, across
its jobs, with what shaped their requests."""

from __future__ import annotations

import json
import os
from pathlib import Path

# Parquet key-value metadata of a system variant's outcomes tables: a digest of the definition that
# made them (:func:`definition`), by which memobench score tells this service's results from another's

class Ledger:
    """The namespaces a variant has ingested (one JSON line each: url, namespace, sessions, and ``sent``,
    the :func:`sent_shape` they were sent with; a line without one, written before it was recorded, is
    never confirmed: what shaped it is not known)."""

    def __init__(self, path: Path, sent: str | None = None):
        self.path, self.sent = Path(path), sent

    def recorded(self, url: str, namespace: str) -> int | None:
        """The session count recorded for ``namespace`` at ``url``, sent as now (the last line), or None."""
        return self._last(url, namespace).get("sessions")

    def assigned(self, url: str, namespace: str) -> dict | None:
        """The ids the service assigned to ``namespace``'s items (id -> item key), recorded with its last
        line sent as now; None when none are recorded."""
        return self._last(url, namespace).get("ids")

    def _last(self, url: str, namespace: str) -> dict:
        """The last line recorded for ``namespace`` at ``url``, or {} when there is none or it was sent
        otherwise than now."""
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return {}
        found: dict = {}
        for line in lines:
            try:
                d = json.loads(line)
            except ValueError:
                continue  # a line a killed job left half-written
            if d.get("url") == url and d.get("namespace") == namespace:
                found = d if d.get("sent") == self.sent else {}
        return found

    def record(self, url: str, namespace: str, sessions: int, ids: dict | None = None) -> None:
        """``ids``: the ids the service assigned (id -> item key), so that a later job that confirms the
        namespace reads its results."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"url": url, "namespace": namespace, "sessions": sessions, "sent": self.sent,
                           **({"ids": ids} if ids is not None else {})}, sort_keys=True) + "\n"
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
