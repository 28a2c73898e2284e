"""Refused console requests as audit records that cannot push the real ones out of the audit log.

Each refusal costs an attacker one request and the audit one line, and the audit rotates by size
(`audit/sink.py`), so a flood of refusals would rotate the child's turns away. Instead, per window: the first few
refusals of each peer are recorded in full (`console.refused`), with a cap over all peers; the rest are counted and
said in one `console.refused_summary` record per peer when the window ends (how many, for which reasons). Peers past
`SUMMARY_PEERS` share one summary, so many addresses do not buy more records. While a flood goes on, each window is
twice as long as the one before (up to `MAX_WINDOW_S`): a flood that lasts days still writes a few KB a day.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Callable

from ..audit import AuditKind

__all__ = ["RefusalLedger"]

WINDOW_S = 60.0
MAX_WINDOW_S = 3600.0
FULL_PER_PEER = 5  # full records per peer and window
FULL_PER_WINDOW = 20  # full records per window, all peers together
SUMMARY_PEERS = 16  # peers with a summary of their own per window
OTHER_PEERS = "(other peers)"


class RefusalLedger:
    """Records console refusals into an audit sink within a bounded number of records per window."""

    def __init__(self, audit, *, window_s: float = WINDOW_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.audit = audit
        self.base_window_s = window_s
        self.window_s = window_s
        self._clock = clock
        self._start = clock()
        self._full: Counter[str] = Counter()
        self._held: dict[str, Counter[str]] = {}

    def refused(self, *, peer: str, reason: str, **fields: Any) -> None:
        """One refusal: in full while the peer's and the window's budget last, else counted for the summary."""
        self.tick()
        if self._full[peer] < FULL_PER_PEER and sum(self._full.values()) < FULL_PER_WINDOW:
            self._full[peer] += 1
            self.audit.record(AuditKind.CONSOLE_REFUSED, peer=peer, reason=reason, **fields)
            return
        key = peer if peer in self._held or len(self._held) < SUMMARY_PEERS else OTHER_PEERS
        self._held.setdefault(key, Counter())[reason] += 1

    def tick(self) -> None:
        """End the window if its time is up (the server calls this now and then, so a summary is not left pending)."""
        now = self._clock()
        if now - self._start >= self.window_s:
            self._close_window(now)

    def flush(self) -> None:
        """Write the pending summaries now (the console is closing)."""
        self._close_window(self._clock())

    def _close_window(self, now: float) -> None:
        for peer, reasons in self._held.items():
            self.audit.record(AuditKind.CONSOLE_REFUSED_SUMMARY, peer=peer, refused=sum(reasons.values()),
                              reasons=dict(reasons), window_s=round(now - self._start, 1))
        # a flood that goes on is summarised less often; a quiet window brings the short window back
        self.window_s = min(self.window_s * 2, MAX_WINDOW_S) if self._held else self.base_window_s
        self._start = now
        self._full.clear()
        self._held = {}
