"""The script a scripted LLM answers from, and its records: shared by the loopback server (`scripted_llm.py`) and the
in-process transport (`scripted_transport.py`), so one script plays the same on the wire and without it.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, Callable, Iterable, Mapping

from .scripted_reply import REJECTIONS, REJECTIONS_MATCH, Reply

__all__ = ["ReplyScript", "Responder"]

# None: the default reply
Responder = Callable[[dict[str, Any]], "Reply | Mapping[str, Any] | None"]


class ReplyScript:
    """Replies (a queue, a responder callable, a default), the fields to reject, and what was asked."""

    def __init__(
        self,
        script: Iterable[Reply | Mapping[str, Any]] | Responder | None = None,
        *,
        default: Reply | None = None,
        model: str = "scripted-model",
        reject_fields: Iterable[str] = (),
    ) -> None:
        """`script`: replies consumed one per request, or a callable answering each request body;
        `reject_fields`: request fields answered with a 400 naming them ("stream_options", "tools", or one form
        of a field: see scripted_reply.REJECTIONS)."""
        self.model = model
        self.reject_fields = tuple(reject_fields)
        self.dropped = 0
        self.abandoned = 0  # answers whose reader went away while they were held (a "stall" or "hang")
        self.default = default
        self._responder: Responder | None = script if callable(script) else None
        self._queue: deque[Reply] = deque()
        if script is not None and not callable(script):
            self.add(*script)
        self._lock = threading.RLock()  # re-entrant: a responder may read .requests
        self._requests: list[dict[str, Any]] = []
        self._errors: list[str] = []
        self._stopping = threading.Event()  # set on close: held answers end

    def add(self, *replies: Reply | Mapping[str, Any]) -> None:
        """Append replies to the queue."""
        for reply in replies:
            self._queue.append(reply if isinstance(reply, Reply) else Reply.from_dict(reply))

    @property
    def pending(self) -> int:
        """Replies still queued."""
        return len(self._queue)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every chat completion request body received, in order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def errors(self) -> list[str]:
        """Script problems seen while serving (exhausted queue, responder exceptions)."""
        with self._lock:
            return list(self._errors)

    def _rejected_field(self, request: dict[str, Any]) -> str | None:
        """The first `reject_fields` entry this request carries (recorded like any request), else None."""
        for name in self.reject_fields:
            if name in REJECTIONS:
                hit = REJECTIONS_MATCH[name](request)
            else:
                hit = bool(request.get(name)) and (name != "tools" or bool(request.get("stream")))
            if hit:
                with self._lock:
                    self._requests.append(request)
                return name
        return None

    def _count_dropped(self, request: dict[str, Any]) -> None:
        with self._lock:
            self.dropped += 1

    def _count_abandoned(self) -> None:
        with self._lock:
            self.abandoned += 1

    def _next_reply(self, request: dict[str, Any]) -> tuple[int, Reply | None]:
        with self._lock:
            self._requests.append(request)
            number = len(self._requests)
            try:
                if self._responder is not None:
                    answer = self._responder(request)
                    reply = answer if isinstance(answer, Reply) or answer is None else Reply.from_dict(answer)
                elif self._queue:
                    reply = self._queue.popleft()
                else:
                    reply = None
            except Exception as exc:  # a broken script must show up in the test, not kill the server
                self._errors.append(f"request {number}: responder raised {exc!r}")
                return number, None
            if reply is None:
                reply = self.default
            if reply is None:
                self._errors.append(f"request {number}: no reply left in the script")
            return number, reply
