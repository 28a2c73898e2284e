"""USB replug under a real `toy-runtime run`: the mic comes back by name without a restart, and while it is away the
systemd watchdog is not pinged (so a toy that stays deaf is restarted by systemd after WatchdogSec).

A USB mic that is pulled and plugged back in returns as a new ALSA card ("… (hw:2,0)" where it was "(hw:1,0)").
The virtual rig plays that out with an ALSA config of the runtime's own (XDG_CONFIG_HOME/alsa/asoundrc): the
"card" is a PulseAudio null sink fed from the rig's mic, listed to PortAudio as `toy_usb_mic_hw1`. Unplugging
removes the sink and the ALSA entry, and every other sink of the rig too (PulseAudio would otherwise move the
runtime's capture stream to another source, as no USB unplug does); replugging brings the rig back, then adds a
new sink and `toy_usb_mic_hw2`. The runtime is configured
with the name "toy_usb_mic": only a process that re-reads PortAudio's device list finds the new card — the old
entry points at a sink that never comes back.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

from tests.hil.probe import stop_runtime
from tests.hil.test_spoken_turn import wait_for_record
from tests.service.conftest import listening_notify_socket
from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer
from toy_runtime.testing.services import audit_records, child_env

pytestmark = pytest.mark.hil

QUESTION = "what is the weather today"
ANSWER = "It is sunny and warm today."
WATCHDOG_S = 1.0  # WatchdogSec=1 → a ping every 0.5 s


class UsbCard:
    """The virtual USB mic: a null sink fed by the rig's mic, listed to ALSA as toy_usb_mic_hw<N>."""

    def __init__(self, card, config_home: Path) -> None:
        self.card = card
        self.asoundrc = config_home / "alsa" / "asoundrc"
        self.asoundrc.parent.mkdir(parents=True, exist_ok=True)
        self.number = 0
        self.modules: list[str] = []

    def plug(self) -> None:
        assert not self.modules
        self.number += 1
        sink = f"usbmic{self.number}"
        self.modules.append(self.card.pactl("load-module", "module-null-sink", f"sink_name={sink}", "rate=16000",
                                            "channels=1").strip())
        self.modules.append(self.card.pactl("load-module", "module-loopback", "source=mic.monitor", f"sink={sink}",
                                            "latency_msec=10").strip())
        self.card.pactl("suspend-sink", sink, "1")  # run at the loopback's low latency (see testing/pulse.py)
        self.card.pactl("suspend-sink", sink, "0")
        self.asoundrc.write_text(f'pcm.toy_usb_mic_hw{self.number} {{ type pulse device "{sink}.monitor" }}\n')

    def unplug(self) -> None:
        self.asoundrc.write_text("")
        for module in reversed(self.modules):
            self.card.pactl("unload-module", module)
        self.modules.clear()


def device_events(audit: Path, event: str) -> list[dict]:
    return [r for r in audit_records(audit, "audio.device") if r.get("role") == "mic" and r.get("event") == event]


async def wait_until(predicate, timeout: float, what: str, proc, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.returncode is not None:
            raise AssertionError(f"runtime exited ({proc.returncode}) waiting for {what}:\n{log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}:\n{log.read_text()[-3000:]}")
        await asyncio.sleep(0.05)


@pytest.fixture
def notify():
    """A unix datagram socket standing in for systemd's NOTIFY_SOCKET."""
    with listening_notify_socket() as listener:
        yield listener


async def test_a_replugged_mic_is_found_by_name_and_a_missing_one_stops_the_watchdog(rig, speak, notify, tmp_path):
    if not rig.virtual:
        pytest.skip("the replug of a real USB mic is tested by test_recovery.py with TOY_HIL_UNPLUG=1")
    usb = UsbCard(rig.card, tmp_path / "config")
    usb.plug()
    asked: list[str] = []

    def answer(request):
        asked.append(str(request["messages"][-1]["content"]))
        return Reply(text=ANSWER)

    question = speak(QUESTION)
    audit, log = tmp_path / "audit.jsonl", tmp_path / "runtime.log"
    with ScriptedLLMServer(answer) as llm:
        env = child_env(drop=("WATCHDOG_",))
        env.update(rig.runtime_env())
        env.update({
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "NOTIFY_SOCKET": str(notify.path),
            "WATCHDOG_USEC": str(int(WATCHDOG_S * 1_000_000)),
            "TOY_AUDIO__INPUT_DEVICE": "toy_usb_mic",
            "TOY_STATE_DIR": str(tmp_path),
            "TOY_LLM__BASE_URL": llm.url,
            "TOY_LLM__MODEL": "scripted-model",
            "TOY_SESSION__IDLE_TIMEOUT_S": "30",
        })
        with log.open("wb") as out:
            proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "toy_runtime", "run", env=env,
                                                        stdout=out, stderr=asyncio.subprocess.STDOUT)
        try:
            await wait_for_record(audit, "runtime.ready", 60, proc, log)
            assert await notify.until(lambda m: m.count("WATCHDOG=1") >= 2, 10), notify.texts()

            # pulled: the mic reports the loss and fails to re-open, and the watchdog goes quiet
            usb.unplug()
            rig.unplug()
            await wait_until(lambda: device_events(audit, "retry"), 20, "a failed re-open of the mic", proc, log)
            quiet_from = time.monotonic()
            await asyncio.sleep(4 * WATCHDOG_S)
            late = [t for t in notify.times_of("WATCHDOG=1") if t > quiet_from + 0.2]
            assert late == [], f"{len(late)} watchdog pings while the mic was away"
            assert proc.returncode is None

            # plugged back in, as a new card: found by name, pings resume, and speech gets a turn
            rig.replug()
            usb.plug()
            await wait_until(lambda: device_events(audit, "recovered"), 30, "the mic to come back", proc, log)
            back = time.monotonic()
            assert await notify.until(lambda m: any(t > back for t in notify.times_of("WATCHDOG=1")), 10)
            await rig.say_to_mic(question.pcm, question.sample_rate_hz)
            turn = await wait_for_record(audit, "voice.turn", 40, proc, log)
        finally:
            if rig._unplugged:
                rig.replug()
            await stop_runtime(proc)
            if usb.modules:
                usb.unplug()
    assert proc.returncode == 0, log.read_text()[-3000:]
    lost = device_events(audit, "lost")[0]
    assert lost["code"] in ("device-lost", "device-stalled"), lost
    assert any("toy_usb_mic" in r["message"] or r["code"] == "device-not-found"
               for r in device_events(audit, "retry")), device_events(audit, "retry")
    assert turn["text"].strip() and asked and asked[0] == turn["text"], (turn["text"], asked)
    assert "sunny" in " ".join(turn["spoken"]), turn["spoken"]
