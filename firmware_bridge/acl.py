"""The broker ACL of a fleet: the per-toy template (configs/mosquitto/fleet.acl) plus one `user` block per owner app
account, granting exactly that owner's toys.

    python -m firmware_bridge.acl owners.toml [--template configs/mosquitto/fleet.acl] > /etc/mosquitto/fleet.acl

`owners.toml` holds `[owners]` with `"app-alice" = ["toy-0001", "toy-0002"]`. An owner account that is also a device
id would get that toy's `%u` patterns too, so it is refused.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path
from typing import Iterable, Mapping

from .protocol import COMMAND, COMMAND_RESULT, DEFAULT_PREFIX, FIRMWARE_STATUS, PRESENCE, STATE, VOLUME, ProtocolError
from .protocol import validate_device_id

TEMPLATE = Path(__file__).resolve().parents[1] / "configs" / "mosquitto" / "fleet.acl"

# What an owner's app may do on each of its toys: send commands, read results and the published signals.
APP_WRITES = (COMMAND,)
APP_READS = (COMMAND_RESULT, STATE, VOLUME, PRESENCE, FIRMWARE_STATUS)

# A mosquitto user name that is safe on an ACL line: no spaces, no MQTT wildcards (mosquitto refuses %u for those).
_ACCOUNT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$")


class AclError(ValueError):
    """An owners mapping that cannot become a safe ACL (the message names the culprit)."""


def owner_block(account: str, device_ids: Iterable[str], prefix: str = DEFAULT_PREFIX) -> str:
    """The ACL lines of one owner app account: write `command`, read results and signals, of its toys only."""
    if not _ACCOUNT.match(account):
        raise AclError(f"owner account {account!r} must match {_ACCOUNT.pattern}")
    lines = [f"user {account}"]
    for device_id in sorted(set(device_ids)):
        try:
            validate_device_id(device_id)
        except ProtocolError as exc:
            raise AclError(f"owner {account}: {exc.message}") from None
        lines += [f"topic write {prefix}/{device_id}/{suffix}" for suffix in APP_WRITES]
        lines += [f"topic read {prefix}/{device_id}/{suffix}" for suffix in APP_READS]
    return "\n".join(lines) + "\n"


def render_fleet_acl(owners: Mapping[str, Iterable[str]], template: str | None = None) -> str:
    """The full ACL file: the template (per-toy patterns, the fleet account) and one block per owner."""
    owned = {account: list(ids) for account, ids in owners.items()}
    devices = {device_id for ids in owned.values() for device_id in ids}
    for account in owned:
        if account in devices or account == "fleet":
            raise AclError(f"owner account {account!r} is also a device id or the fleet account: use another name")
    text = template if template is not None else TEMPLATE.read_text()
    blocks = [owner_block(account, ids) for account, ids in sorted(owned.items())]
    return text.rstrip("\n") + "\n\n" + "\n".join(blocks)


def main(argv: list[str] | None = None) -> int:
    """Print the rendered ACL; one line and exit 2 for a bad owners file."""
    parser = argparse.ArgumentParser(prog="python -m firmware_bridge.acl", description=__doc__.splitlines()[0])
    parser.add_argument("owners", type=Path, help="TOML file with an [owners] table: account = [device ids]")
    parser.add_argument("--template", type=Path, default=TEMPLATE)
    args = parser.parse_args(argv)
    try:
        owners = tomllib.loads(args.owners.read_text()).get("owners")
        if not isinstance(owners, dict) or not all(isinstance(v, list) for v in owners.values()):
            raise AclError(f"{args.owners}: [owners] must map each account to a list of device ids")
        sys.stdout.write(render_fleet_acl(owners, args.template.read_text()))
    except (OSError, tomllib.TOMLDecodeError, AclError) as exc:
        print(f"firmware_bridge.acl: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
