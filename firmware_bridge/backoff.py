"""Reconnect delays: exponential backoff with full jitter and a cap.

When a broker restarts, every toy loses its connection in the same instant. With a plain doubling backoff they all
retry on the same schedule and hit the new broker together, again and again (a thundering herd). Full jitter
(each wait drawn uniformly from [0, min(cap, base * 2**attempt)], as in AWS's "Exponential Backoff And Jitter")
spreads them over the whole window while keeping the expected wait growing like the plain backoff.
"""

from __future__ import annotations

import random
from typing import Callable


class Backoff:
    """The delays before successive reconnect attempts; `reset()` after a good connection. `uniform` is the random
    source (injectable, so tests can pin or bound it)."""

    def __init__(self, base_s: float, cap_s: float, uniform: Callable[[float, float], float] = random.uniform) -> None:
        if base_s <= 0 or cap_s < base_s:
            raise ValueError(f"backoff needs 0 < base_s ({base_s}) <= cap_s ({cap_s})")
        self.base_s = base_s
        self.cap_s = cap_s
        self._uniform = uniform
        self.attempt = 0  # attempts since the last good connection

    def ceiling(self, attempt: int) -> float:
        """The upper bound of the delay before attempt `attempt` (0-based): base·2^attempt, at most the cap."""
        if attempt >= 64:  # 2**64 · base is past any cap; avoid building huge floats
            return self.cap_s
        return min(self.cap_s, self.base_s * 2**attempt)

    def next_delay(self) -> float:
        """The wait before the next attempt, uniform in [0, ceiling], and count the attempt."""
        ceiling = self.ceiling(self.attempt)
        self.attempt += 1
        return min(ceiling, max(0.0, self._uniform(0.0, ceiling)))

    def reset(self) -> None:
        """A good connection: the next outage starts from the base again."""
        self.attempt = 0
