"""`toy-runtime schedules list [--json] [--all]` and `toy-runtime schedules cancel ID`."""

from __future__ import annotations

import asyncio

from .common import add_config, settings_for


def _list(args) -> int:
    from ..app.schedules import list_schedules

    return asyncio.run(list_schedules(settings_for(args), args.json, args.all))


def _cancel(args) -> int:
    from ..app.schedules import cancel_schedule

    return asyncio.run(cancel_schedule(settings_for(args), args.id))


def register(sub) -> None:
    """Add the `schedules` command."""
    parser = sub.add_parser("schedules", help="inspect and cancel stored schedules")
    inner = parser.add_subparsers(dest="schedules_command", required=True, metavar="SUBCOMMAND")
    p = inner.add_parser("list", help="list schedules")
    add_config(p)
    p.add_argument("--json", action="store_true", help="print the schedules as a JSON list")
    p.add_argument("--all", action="store_true", help="include cancelled and finished ones")
    p.set_defaults(func=_list)
    p = inner.add_parser("cancel", help="cancel a schedule by id")
    add_config(p)
    p.add_argument("id")
    p.set_defaults(func=_cancel)
