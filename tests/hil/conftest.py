"""The hardware-in-loop rig: a speaker next to a mic, real or virtual.

Real rig — set `TOY_HIL_DEVICES` to `;`-separated `key=value` pairs (values: a PortAudio device index or a name
substring, as `toy-runtime devices` lists them):

    TOY_HIL_DEVICES="mic=USB Audio;speaker=USB Audio;mixer=hw:1/PCM"

    mic      (required) the input the runtime listens on
    speaker  (required) the output the runtime speaks through, physically next to the mic (acoustic loopback)
    mixer    ALSA mixer as DEVICE/CONTROL (e.g. hw:1/PCM, default/Master); without it the volume test skips
    voice    output that plays the test's question into the mic during the spoken-turn test (default: speaker;
             it must be a different or a shared device — see README.md)
    monitor  input that records what the mic hears while the runtime holds the mic (default: mic; must be shareable)

`TOY_HIL_UNPLUG=1` enables the manual unplug/replug test on a real rig (a human pulls the USB plug when asked).

Virtual rig (the default, and what CI runs) — a private headless PulseAudio (VirtualSoundCard) whose speaker monitor
is looped into its mic with `module-loopback`, so what the toy plays is heard by its own mic; devices are "pulse" and
the mixer is ALSA's `pulse`/`Master` (the default sink = the speaker). Without PulseAudio the tests skip, or fail
when TOY_REQUIRE_SERVICES=1 (CI).
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass, field
from typing import Iterator, Literal

import pytest

from toy_runtime.testing.services import unavailable

ENV_DEVICES = "TOY_HIL_DEVICES"
ENV_UNPLUG = "TOY_HIL_UNPLUG"
LOOPBACK_LATENCY_MS = 20  # the virtual "air gap": PulseAudio loopback from the speaker's monitor into the mic
RIG_KEYS = {"mic", "speaker", "mixer", "voice", "monitor"}


def _device(value: str) -> int | str:
    value = value.strip()
    return int(value) if value.isdigit() else value


def parse_rig_spec(spec: str) -> dict[str, int | str]:
    """`mic=…;speaker=…;mixer=DEV/CONTROL;voice=…;monitor=…` → dict; ValueError naming the problem."""
    out: dict[str, int | str] = {}
    for part in filter(None, (p.strip() for p in spec.split(";"))):
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        if not sep or not value.strip():
            raise ValueError(f"{ENV_DEVICES}: {part!r} is not key=value")
        if key not in RIG_KEYS:
            raise ValueError(f"{ENV_DEVICES}: unknown key {key!r} (known: {', '.join(sorted(RIG_KEYS))})")
        out[key] = value.strip() if key == "mixer" else _device(value)
    for required in ("mic", "speaker"):
        if required not in out:
            raise ValueError(f"{ENV_DEVICES}: {required}= is required, e.g. mic=USB Audio;speaker=USB Audio")
    mixer = out.get("mixer")
    if mixer is not None and "/" not in str(mixer):
        raise ValueError(f"{ENV_DEVICES}: mixer={mixer!r} must be DEVICE/CONTROL, e.g. hw:1/PCM")
    return out


@dataclass
class Rig:
    """Where the tests play and record: devices for the runtime's adapters plus, on the virtual rig, the card."""

    mode: Literal["virtual", "real"]
    mic: int | str
    speaker: int | str
    voice: int | str
    monitor: int | str
    mixer_device: str | None = None
    mixer_control: str | None = None
    card: object | None = None  # VirtualSoundCard on the virtual rig
    _unplugged: list[list[str]] = field(default_factory=list)

    @property
    def virtual(self) -> bool:
        return self.mode == "virtual"

    def runtime_env(self) -> dict[str, str]:
        """Variables that point a `toy-runtime run` subprocess at the rig's mic and speaker."""
        env = {"TOY_AUDIO__INPUT_DEVICE": str(self.mic), "TOY_AUDIO__OUTPUT_DEVICE": str(self.speaker)}
        if self.card is not None:
            env.update(self.card.runtime_env)
        return env

    async def say_to_mic(self, pcm: bytes, sample_rate_hz: int) -> None:
        """Make the mic hear `pcm`: straight into the virtual mic, or through the `voice` output of a real rig."""
        if self.card is not None:
            await asyncio.to_thread(self.card.play_to_mic, pcm, sample_rate_hz, pad_ms=100)
            return
        from toy_runtime.adapters.sounddevice_io import SoundDeviceSink

        sink = SoundDeviceSink(self.voice, sample_rate_hz=sample_rate_hz)
        await sink.start()
        try:
            await sink.play(pcm, sample_rate_hz, "hil-question")
            await sink.drain()
        finally:
            await sink.aclose()

    # -- virtual unplug / replug -------------------------------------------------------------------------------

    def unplug(self) -> None:
        """Virtual rig: remove every sink (mic, speaker, spare) and loopback, like pulling a USB headset on a
        board with no other sound device: running streams die and opening "pulse" fails until `replug()`."""
        assert self.card is not None and not self._unplugged
        modules = [line.split("\t") for line in self.card.pactl("list", "short", "modules").splitlines()]
        self._unplugged = [m for m in modules if len(m) >= 3 and m[1] in ("module-null-sink", "module-loopback")]
        for module in reversed(self._unplugged):  # loopbacks first, then the sinks they hang on
            self.card.pactl("unload-module", module[0])

    def replug(self) -> None:
        """Virtual rig: load the sinks and loopbacks again, with the same names and the card's low latency."""
        assert self.card is not None and self._unplugged
        modules, self._unplugged = self._unplugged, []
        for _, name, args, *_ in sorted(modules, key=lambda m: m[1] != "module-null-sink"):
            self.card.pactl("load-module", name, *args.split())
        self.card.pactl("set-default-sink", "speaker")
        self.card.pactl("set-default-source", "mic.monitor")
        for sink in ("mic", "speaker"):  # re-open the sinks so they run at the loopbacks' latency (see pulse.py)
            self.card.pactl("suspend-sink", sink, "1")
            self.card.pactl("suspend-sink", sink, "0")


def _portaudio_sees_pulse() -> None:
    # PortAudio lists ALSA's "pulse" device only if a PulseAudio server answered when it was initialised. If
    # sounddevice was imported earlier in this process without one, re-initialise it (a private but stable API).
    sd = sys.modules.get("sounddevice")
    if sd is None:
        return
    if any(d["name"] == "pulse" for d in sd.query_devices()):
        return
    if hasattr(sd, "_terminate") and hasattr(sd, "_initialize"):
        sd._terminate()
        sd._initialize()


def _real_rig(spec: str) -> Rig:
    try:
        devices = parse_rig_spec(spec)
        problem = None
    except ValueError as exc:
        problem = str(exc)
    if problem is not None:  # outside the except: a one-line failure, not a chained traceback
        pytest.fail(problem, pytrace=False)
    mixer_device = mixer_control = None
    if "mixer" in devices:
        mixer_device, mixer_control = str(devices["mixer"]).split("/", 1)
    return Rig(mode="real", mic=devices["mic"], speaker=devices["speaker"],
               voice=devices.get("voice", devices["speaker"]), monitor=devices.get("monitor", devices["mic"]),
               mixer_device=mixer_device, mixer_control=mixer_control)


@pytest.fixture(scope="package")
def rig() -> Iterator[Rig]:
    """The real rig from TOY_HIL_DEVICES, else the virtual one (package-scoped: PULSE_* restored afterwards)."""
    spec = os.environ.get(ENV_DEVICES, "").strip()
    if spec:
        yield _real_rig(spec)
        return
    from toy_runtime.testing.pulse import VirtualSoundCard, pulseaudio_available

    if not pulseaudio_available():
        unavailable(f"no hardware rig: set {ENV_DEVICES} (see tests/hil/README.md), or install pulseaudio and "
                    "pulseaudio-utils for the virtual rig")
    card = VirtualSoundCard()
    try:
        card.start()
    except RuntimeError as exc:
        unavailable(f"the virtual rig's PulseAudio did not start: {exc}")
    try:
        # The acoustic path: whatever reaches the speaker is heard by the mic a little later.
        card.pactl("load-module", "module-loopback", "source=speaker.monitor", "sink=mic",
                   f"latency_msec={LOOPBACK_LATENCY_MS}")
        card.pactl("set-default-sink", "speaker")  # ALSA pulse/Master is the default sink's volume
        with card.applied_env():
            _portaudio_sees_pulse()
            yield Rig(mode="virtual", mic="pulse", speaker="pulse", voice="pulse", monitor="pulse",
                      mixer_device="pulse", mixer_control="Master", card=card)
    finally:
        card.stop()


