"""The runtime itself on the device side: a spoken/typed volume request changes the real ALSA mixer (PulseAudio
sees it) and the retained volume signal reaches the firmware; a talk button press opens an audio session and the
firmware's LED state follows."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

from firmware_bridge import BridgeConfig
from firmware_bridge.firmware import FirmwareClient
from toy_runtime.app.runtime import build_runtime
from toy_runtime.config import load_settings, with_updates
from toy_runtime.app.firmware_link import start_device_link
from toy_runtime.audit import MemoryAudit
from toy_runtime.fakes.audio import MemorySink, ToneTTS
from toy_runtime.fakes.calendar import MemoryCalendarStore
from toy_runtime.session.voice_loop import Stop, VoiceLoop
from toy_runtime.testing.broker import MosquittoBroker
from toy_runtime.testing.pulse_mixer import PulseMixerServer


async def test_chat_volume_turn_moves_alsa_and_the_retained_signal(fresh_pulse: PulseMixerServer,
                                                                    broker: MosquittoBroker, tmp_path):
    firmware = FirmwareClient(BridgeConfig(url=broker.url, device_id="toyA"))
    await firmware.start()
    await firmware.wait_connected(5)
    try:
        env = {k: v for k, v in fresh_pulse.env().items() if not k.startswith(("TOY_", "OPENAI_"))}
        env.update(TOY_STATE_DIR=str(tmp_path), TOY_VOLUME__DEVICE="pulse", TOY_VOLUME__CONTROL="Master")
        proc = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-m", "toy_runtime", "chat", "--json", "--volume-backend", "alsa",
                             "--mqtt-url", broker.url, "--device-id", "toyA"],
            input="set the volume to 30\nmute\n", capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert fresh_pulse.sink_volume_pct() == 30  # pactl agrees with the runtime's read-back
        volumes = []
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not (volumes and volumes[-1].muted):
            try:
                volumes.append(await asyncio.wait_for(firmware.next_volume(), 1))
            except TimeoutError:
                pass
        assert volumes and volumes[-1].level == 30 and volumes[-1].muted
        assert any(v.level == 30 and not v.muted for v in volumes)
    finally:
        await firmware.stop()


async def test_talk_button_opens_a_session_and_leds_follow(broker: MosquittoBroker, tmp_path):
    settings = with_updates(load_settings(env={"TOY_STATE_DIR": str(tmp_path)}),
                            mqtt={"url": broker.url, "device_id": "toyB"})
    audit = MemoryAudit()
    runtime = build_runtime(settings, audit=audit, calendar=MemoryCalendarStore())
    mic: asyncio.Queue = asyncio.Queue()

    async def listener_events():
        while (item := await mic.get()) is not None:
            yield item

    voice = VoiceLoop(new_runner=runtime.new_turn_runner, listener_events=listener_events,
                      pause_listener=lambda: None, resume_listener=lambda: None, synthesizer=ToneTTS(),
                      new_sink=lambda: MemorySink(22050), signals=runtime.signals, audit=audit,
                      idle_timeout_s=0.5, open_on_speech=True)

    from toy_runtime.session.voice_loop import OpenSession

    async def on_button(event):
        if event.input.data.get("action") == "press":
            voice.post(OpenSession(reason="button.press"))

    loop_task = asyncio.create_task(voice.run())
    link = await start_device_link(runtime, on_button=on_button)
    firmware = FirmwareClient(BridgeConfig(url=broker.url, device_id="toyB"))
    await firmware.start()
    await firmware.wait_connected(5)
    try:
        seen = []
        pressed_at = time.monotonic()
        await firmware.press("press")
        while "listening" not in seen:
            state = await asyncio.wait_for(firmware.next_state(), 5)
            seen.append(state.state)
        latency_ms = (time.monotonic() - pressed_at) * 1000
        print(f"button → listening LED over loopback MQTT: {latency_ms:.1f} ms")
        while "idle" not in seen[seen.index("listening"):]:  # then the idle timeout closes it again
            seen.append((await asyncio.wait_for(firmware.next_state(), 5)).state)
        opened = audit.of("voice.session_opened")
        assert opened and opened[0]["reason"] == "button.press"
    finally:
        voice.post(Stop())
        await asyncio.wait_for(loop_task, 5)
        await firmware.stop()
        await link.aclose()
        await runtime.aclose()
