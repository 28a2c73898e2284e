"""What `toy-runtime schedules list [--json] [--all]` and `schedules cancel ID` do over the `[calendar] path` store."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from ..errors import CliError


def _store(settings):
    from ..adapters.sqlite_calendar import SqliteCalendarStore

    return SqliteCalendarStore(settings.calendar_path)


async def list_schedules(settings, as_json: bool, include_inactive: bool) -> int:
    """Print the stored schedules (a table, or JSON with `as_json`); `include_inactive` adds cancelled and finished."""
    from ..adapters.sqlite_calendar import entry_as_json

    store = _store(settings)
    try:
        entries = await store.list(include_inactive=include_inactive)
    finally:
        await store.aclose()
    now = datetime.now(timezone.utc)
    rows = [dict(entry_as_json(e, now=now)) for e in entries]
    if as_json:
        print(json.dumps(rows, ensure_ascii=False, indent=2))
        return 0
    if not rows:
        print(f"no schedules in {settings.calendar_path}")
        return 0
    id_width = max(len("ID"), *(len(str(row["id"])) for row in rows))
    start_width = max(len("STARTS"), *(len(str(row["start_at"])) for row in rows))
    print(f"{'ID':<{id_width}}  {'STARTS':<{start_width}}  {'REPEAT':<8} {'STATUS':<9} TITLE")
    for row in rows:
        repeat = (row.get("recurrence") or {}).get("frequency", "once")
        print(f"{row['id']:<{id_width}}  {row['start_at']:<{start_width}}  {repeat:<8} {row['status']:<9} {row['title']}"
              + (f"  (next reminder {row['next_reminder_at']})" if row.get("next_reminder_at") else ""))
    return 0


async def cancel_schedule(settings, entry_id: str) -> int:
    """Cancel one active schedule; an unknown id is a CliError (one line, exit 2)."""
    store = _store(settings)
    try:
        cancelled = await store.cancel(entry_id)
    finally:
        await store.aclose()
    if not cancelled:
        raise CliError(f"no active schedule with id {entry_id!r}")
    print(f"cancelled {entry_id}")
    return 0
