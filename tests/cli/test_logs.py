"""service/logs.py: journald priority prefixes, line by line (journald files each line of a stream on its own)."""

from __future__ import annotations

import io
import logging
import os

from toy_runtime.service.logs import JournalFormatter, journal_stream, priority, user_error_line


def test_levels_map_to_sd_daemon_priorities():
    assert [priority(level) for level in (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR,
                                          logging.CRITICAL)] == [7, 6, 4, 3, 2]
    assert priority(logging.WARNING + 5) == 4  # a custom level between two named ones takes the milder one


def test_every_line_of_a_record_with_a_traceback_carries_the_priority():
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("toy_runtime.x", logging.ERROR, __file__, 1, "failed: %s", ("why",),
                                   exc_info=__import__("sys").exc_info())
    lines = JournalFormatter("%(levelname)s %(name)s: %(message)s").format(record).splitlines()
    assert lines[0] == "<3>ERROR toy_runtime.x: failed: why" and len(lines) > 3
    assert all(line.startswith("<3>") for line in lines) and lines[-1] == "<3>ValueError: boom"


def test_only_the_stream_journal_stream_names_gets_prefixes(tmp_path, monkeypatch):
    with open(tmp_path / "a", "w") as journal, open(tmp_path / "b", "w") as other:
        info = os.fstat(journal.fileno())
        monkeypatch.setenv("JOURNAL_STREAM", f"{info.st_dev}:{info.st_ino}")
        assert journal_stream(journal) and not journal_stream(other) and not journal_stream(io.StringIO())
        assert user_error_line("bad key", journal) == "<3>toy-runtime: bad key"
        assert user_error_line("bad key", other) == "toy-runtime: bad key"
    monkeypatch.setenv("JOURNAL_STREAM", "garbage")
    assert not journal_stream(None)
