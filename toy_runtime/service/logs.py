"""Where log lines go: stderr in every command, with journald priorities when systemd reads that stderr.

journald reads a `<N>` prefix (sd-daemon(3): 3 error, 4 warning, 6 info, 7 debug) at the start of each line it gets
on a service's stdout/stderr and files the line at that priority, so `journalctl -p warning` shows warnings and
errors only. The prefix is added only when stderr really is the journal stream (JOURNAL_STREAM names its device and
inode, systemd.exec(5)); in a terminal or a pipe the lines stay as they are.

    configure_logging("warning")      every command, before it runs (library warnings are never silenced)
    configure_logging("info")         `run`/`ptt` with their `log_level`
    user_error_line("bad key")        the one line a user error ends with ("toy-runtime: bad key", `<3>` in journald)
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from typing import TextIO

PRIORITIES = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3, logging.CRITICAL: 2}
FORMAT = "%(levelname)s %(name)s: %(message)s"
CHATTY = ("httpx", "httpx2", "httpcore", "openai")  # one INFO line per LLM request otherwise


def priority(levelno: int) -> int:
    """The syslog priority for a logging level (levels between the named ones round down to the milder one)."""
    for level in sorted(PRIORITIES, reverse=True):
        if levelno >= level:
            return PRIORITIES[level]
    return 7


def journal_stream(stream: TextIO | None = None) -> bool:
    """True when `stream` (default stderr) is connected to journald, per JOURNAL_STREAM=<device>:<inode>."""
    value = os.environ.get("JOURNAL_STREAM")
    stream = stream or sys.stderr
    if not value:
        return False
    try:
        device, inode = (int(part) for part in value.split(":"))
        info = os.fstat(stream.fileno())
    except (ValueError, OSError, AttributeError):
        return False
    return (info.st_dev, info.st_ino) == (device, inode)


def with_priority(text: str, prio: int) -> str:
    """Every line of `text` with the sd-daemon `<prio>` prefix (a traceback stays at one priority, line by line)."""
    return "\n".join(f"<{prio}>{line}" for line in text.splitlines())


class JournalFormatter(logging.Formatter):
    """A formatter that starts every line of a record with its journald priority."""

    def format(self, record: logging.LogRecord) -> str:
        return with_priority(super().format(record), priority(record.levelno))


class _Handler(logging.StreamHandler):
    """Marks the handler this module installed, so configuring again replaces it instead of doubling lines."""


def configure_logging(level: str = "warning", stream: TextIO | None = None) -> None:
    """Send log records at `level` and above to stderr (priority-prefixed under journald); idempotent."""
    stream = stream or sys.stderr
    journal = journal_stream(stream)
    handler = _Handler(stream)
    handler.setFormatter(JournalFormatter(FORMAT) if journal else logging.Formatter(FORMAT))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in CHATTY:
        logging.getLogger(name).setLevel(logging.DEBUG if level.lower() == "debug" else logging.WARNING)
    logging.captureWarnings(True)  # warnings.warn(...) from libraries become WARNING records like the rest
    if journal:
        sys.excepthook = _journal_excepthook


def _journal_excepthook(exc_type, exc, tb) -> None:
    # a crash is an error in `journalctl -p err`, not 40 lines at the default priority
    text = "".join(traceback.format_exception(exc_type, exc, tb))
    print(with_priority(text, PRIORITIES[logging.CRITICAL]), file=sys.stderr, flush=True)


def user_error_line(message: str, stream: TextIO | None = None) -> str:
    """The one line a user error ends a command with (error priority under journald)."""
    line = f"toy-runtime: {message}"
    return with_priority(line, PRIORITIES[logging.ERROR]) if journal_stream(stream) else line
