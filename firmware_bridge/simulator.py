"""`firmware-sim`: the toy's firmware on a laptop. Shows the LED state, volume and runtime presence as they arrive and
sends button presses from the keyboard, speaking exactly the firmware half of firmware_bridge.protocol.

Keys: t talk click · p press · r release · l long press · b battery status · c toggle charging · h help · q quit.
Script mode (no keyboard): --script "press,sleep:0.5,release,expect:listening" then exit; exit codes: 0 ok,
2 cannot connect / refused, 3 an `expect` step timed out, 64 bad arguments.
The password comes from the environment variable FIRMWARE_SIM_PASSWORD, never from the command line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
import time
from typing import Any, Sequence

from .config import BridgeConfig
from .endpoint import BridgeError

LED = {"idle": "○", "listening": "◉", "thinking": "◌", "speaking": "◍", "closed": "·"}
KEYS = {"t": "click", "p": "press", "r": "release", "l": "long_press"}
HELP = "keys: t talk click | p press | r release | l long press | b battery | c charging | h help | q quit"
PASSWORD_ENV = "FIRMWARE_SIM_PASSWORD"


def say(text: str) -> None:
    """One display line, flushed at once (tests read them from a pipe)."""
    print(f"{time.strftime('%H:%M:%S')} {text}", flush=True)


class Simulator:
    """Owns a FirmwareClient, prints what arrives and sends what is asked."""

    def __init__(self, config: BridgeConfig) -> None:
        from .firmware import FirmwareClient

        self.client = FirmwareClient(config)
        self.battery = 90
        self.charging = False
        self._changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self, connect_timeout: float) -> None:
        await self.client.start()
        await self.client.wait_connected(connect_timeout, fail_fast=True)  # refused: say so now, not at the timeout
        say(f"connected to {self.client.config.url} as device {self.client.device_id}")
        did = self.client.device_id
        self._tasks = [
            asyncio.create_task(self._show_states(), name=f"sim-states-{did}"),
            asyncio.create_task(self._show_volumes(), name=f"sim-volumes-{did}"),
            asyncio.create_task(self._show_presence(), name=f"sim-presence-{did}"),
        ]

    async def stop(self) -> None:
        try:
            for task in self._tasks:
                task.cancel()
            if self._tasks:
                await asyncio.wait(self._tasks, timeout=2)
        finally:
            await self.client.stop()

    def _bump(self) -> None:
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    async def _show_states(self) -> None:
        async for state in self.client.states():
            session = f" session={state.session_id}" if state.session_id else ""
            say(f"LED {LED.get(state.state, '?')} state {state.state}{session}")
            self._bump()

    async def _show_volumes(self) -> None:
        async for volume in self.client.volumes():
            bar = "█" * (volume.level // 10) + "░" * (10 - volume.level // 10)
            say(f"VOL {bar} volume {volume.level} muted={str(volume.muted).lower()}")
            self._bump()

    async def _show_presence(self) -> None:
        async for online in self.client.presence():
            say(f"runtime {'online' if online else 'offline'}")

    async def button(self, action: str) -> None:
        sent = await self.client.press(action)  # type: ignore[arg-type]
        say(f"sent {action}{'' if sent else ' (queued: not connected)'}")

    async def status(self, battery: int | None = None, charging: bool | None = None) -> None:
        if battery is not None:
            self.battery = max(0, min(100, battery))
        if charging is not None:
            self.charging = charging
        await self.client.send_status(self.battery, self.charging, firmware_version="sim-1.0")
        say(f"sent status battery={self.battery}% charging={str(self.charging).lower()}")

    async def expect(self, what: str, value: str, timeout: float) -> bool:
        """Wait until the last LED state (or volume level) equals `value`."""

        def current() -> str | None:
            if what == "state":
                return self.client.last_state.state if self.client.last_state else None
            return str(self.client.last_volume.level) if self.client.last_volume else None

        deadline = time.monotonic() + timeout
        while current() != value:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                say(f"expect {what}={value} timed out (last: {current()})")
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
        say(f"expect {what}={value} ok")
        return True

    # --- script mode ------------------------------------------------------------------------------------------------

    async def run_script(self, script: str, expect_timeout: float) -> int:
        for raw in (step.strip() for step in script.split(",")):
            if not raw:
                continue
            name, _, arg = raw.partition(":")
            if name in ("press", "release", "click", "long_press"):
                await self.button(name)
            elif name == "talk":
                await self.button("click")
            elif name == "status":
                pct, _, charging = arg.partition(":")
                await self.status(int(pct) if pct else None, charging in ("1", "true") if charging else None)
            elif name == "sleep":
                await asyncio.sleep(float(arg or 0.1))
            elif name in ("expect", "expect-state"):
                if not await self.expect("state", arg, expect_timeout):
                    return 3
            elif name == "expect-volume":
                if not await self.expect("volume", arg, expect_timeout):
                    return 3
            else:
                say(f"unknown script step {raw!r}")
                return 64
        return 0

    # --- keyboard mode ----------------------------------------------------------------------------------------------

    async def run_keyboard(self) -> int:
        say(HELP)
        keys: asyncio.Queue[str] = asyncio.Queue(64)
        loop = asyncio.get_running_loop()
        fd = sys.stdin.fileno()
        restore: Any = None
        if sys.stdin.isatty():
            import termios
            import tty

            restore = termios.tcgetattr(fd)
            tty.setcbreak(fd)  # one key at a time, no Enter needed

        def on_readable() -> None:
            data = os.read(fd, 64).decode(errors="ignore")
            for ch in data or "q":  # EOF quits
                if not keys.full():
                    keys.put_nowait(ch)

        loop.add_reader(fd, on_readable)
        try:
            while True:
                key = (await keys.get()).lower()
                if key == "q":
                    return 0
                if key in KEYS:
                    await self.button(KEYS[key])
                elif key == "b":
                    await self.status(self.battery - 5 if self.battery > 5 else 100)
                elif key == "c":
                    await self.status(charging=not self.charging)
                elif key == "h":
                    say(HELP)
        finally:
            loop.remove_reader(fd)
            if restore is not None:
                import termios

                termios.tcsetattr(fd, termios.TCSADRAIN, restore)


def build_parser() -> argparse.ArgumentParser:
    # The whole docstring (keys, script mode, exit codes), its own line breaks kept: its first line alone stopped
    # mid-sentence.
    description = __doc__.replace("`firmware-sim`: the", "The", 1)
    parser = argparse.ArgumentParser(prog="firmware-sim", description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mqtt-url", default="mqtt://127.0.0.1:1883", help="mqtt://HOST:PORT or mqtts://HOST:PORT")
    parser.add_argument("--device-id", default="toy1", help="the toy's id in its topics toy/<ID>/... (default toy1)")
    parser.add_argument("--username", default=None, help=f"password from ${PASSWORD_ENV}")
    parser.add_argument("--ca-file", default=None, help="CA bundle for mqtts://")
    parser.add_argument("--protocol", choices=["5", "3.1.1"], default="5", help="MQTT protocol version (default 5)")
    parser.add_argument("--script", default=None, help='non-interactive steps, e.g. "press,sleep:0.3,release"')
    parser.add_argument("--expect-timeout", type=float, default=5.0, help="seconds an expect step may wait")
    parser.add_argument("--connect-timeout", type=float, default=10.0,
                        help="seconds to wait for the broker before exit code 2")
    parser.add_argument("--linger", type=float, default=0.0, help="script mode: keep showing messages this long")
    return parser


async def amain(args: argparse.Namespace) -> int:
    password = os.environ.get(PASSWORD_ENV)
    config = BridgeConfig(
        url=args.mqtt_url, device_id=args.device_id, username=args.username,
        password=password or None, ca_file=args.ca_file, protocol=args.protocol,
        reconnect_min_delay_s=0.25, reconnect_max_delay_s=5.0,
    )
    sim = Simulator(config)
    try:
        try:
            await sim.start(args.connect_timeout)
        except BridgeError as exc:
            say(f"error {exc.code}: {exc.message}")
            return 2
        except TimeoutError:
            say(f"error timeout: no connection to {args.mqtt_url} within {args.connect_timeout}s")
            return 2
        if args.script is not None:
            code = await sim.run_script(args.script, args.expect_timeout)
            if args.linger > 0:
                await asyncio.sleep(args.linger)
            return code
        return await sim.run_keyboard()
    finally:
        await sim.stop()


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point of `firmware-sim`."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")
    try:
        return asyncio.run(amain(args))
    except KeyboardInterrupt:
        return 130
    except ValueError as exc:  # bad URL or device id
        print(f"firmware-sim: {exc}", file=sys.stderr)
        return 64


if __name__ == "__main__":
    sys.exit(main())
