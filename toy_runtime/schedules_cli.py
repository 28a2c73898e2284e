"""`toy-runtime schedules list [--json] [--all]` and `toy-runtime schedules cancel ID` over `[calendar] path`."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timezone


def _store(settings):
    from .adapters.sqlite_calendar import SqliteCalendarStore

    return SqliteCalendarStore(settings.calendar_path)


async def _list(settings, as_json: bool, include_inactive: bool) -> int:
    from .adapters.sqlite_calendar import entry_as_json

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
    for row in rows:
        repeat = (row.get("recurrence") or {}).get("frequency", "once")
        print(f"{row['id']}  {row['start_at']}  {repeat:<8} {row['status']:<9} {row['title']}"
              + (f"  (next reminder {row['next_reminder_at']})" if row.get("next_reminder_at") else ""))
    return 0


async def _cancel(settings, entry_id: str) -> int:
    store = _store(settings)
    try:
        cancelled = await store.cancel(entry_id)
    finally:
        await store.aclose()
    if not cancelled:
        from .cli import CliError

        raise CliError(f"no active schedule with id {entry_id!r}")
    print(f"cancelled {entry_id}")
    return 0


def register(sub) -> None:
    """Add the `schedules` command."""
    from .cli import _add_config, _settings_for

    parser = sub.add_parser("schedules", help="inspect and cancel stored schedules")
    inner = parser.add_subparsers(dest="schedules_command", required=True, metavar="SUBCOMMAND")
    p = inner.add_parser("list", help="list schedules")
    _add_config(p)
    p.add_argument("--json", action="store_true", help="print the schedules as a JSON list")
    p.add_argument("--all", action="store_true", help="include cancelled and finished ones")
    p.set_defaults(func=lambda a: asyncio.run(_list(_settings_for(a), a.json, a.all)))
    p = inner.add_parser("cancel", help="cancel a schedule by id")
    _add_config(p)
    p.add_argument("id")
    p.set_defaults(func=lambda a: asyncio.run(_cancel(_settings_for(a), a.id)))
