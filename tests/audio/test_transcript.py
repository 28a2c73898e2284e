"""The live transcript: rendered from the SignalBus and the voice loop's items; shown by the real `run` and `ptt`
on a terminal (a pty), absent when stdout is not a terminal; `ptt` without a microphone says why and exits 2."""

from __future__ import annotations

import asyncio
import io
import json
import os
import pty
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from toy_runtime.audio.listener import Utterance
from toy_runtime.events.model import EventResult, EventStatus, ResultPolicy
from toy_runtime.session.items import EventOutcome, Speech
from toy_runtime.metrics.voice_turn import VoiceTurnRecord
from toy_runtime.signals import SessionState, SignalBus, StateSignal
from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer
from toy_runtime.testing.services import audit_records, child_env, end_process, wait_for
from toy_runtime.app.transcript import Transcript, transcript_wanted

QUESTION = "what is the weather today"
ANSWER = "It is sunny and warm today."


# -- the view, fed directly ------------------------------------------------------------------------------------


def utterance(text: str) -> Utterance:
    return Utterance(text=text, started_at=0.0, ended_at=1.0, endpoint_at=1.3, decided_at=1.3, asr_final_at=1.4,
                     audio_ms=1500.0, reason="hangover")


def outcome(name: str, status: EventStatus, error: str | None = None) -> EventOutcome:
    return EventOutcome(EventResult(event_id="e1", name=name, status=status, policy=list(ResultPolicy)[0],
                                    arguments={}, resolution=None, error=error))


async def test_states_items_and_latency_are_drawn_in_order():
    out = io.StringIO()
    signals = SignalBus()
    view = Transcript(out, status_line=False)
    view.attach(signals)
    signals.publish(StateSignal(SessionState.LISTENING))
    await asyncio.sleep(0)
    view.item(utterance("turn the music down"))
    signals.publish(StateSignal(SessionState.THINKING))
    await asyncio.sleep(0)
    view.item(Speech(answer=1, text="Okay, a bit quieter."))
    view.item(outcome("device_volume_adjust", EventStatus.FAILED, error="no mixer"))
    record = VoiceTurnRecord(turn=1, text="turn the music down", end_of_speech_at=1.0, endpoint_at=1.3,
                             asr_final_at=1.4, handoff_at=1.4, first_audio_at=2.2)
    view.turn(record)
    await view.aclose()
    assert out.getvalue().splitlines() == [
        "[listening]",
        "you: turn the music down",
        "[thinking]",
        "toy: Okay, a bit quieter.",
        "  event device_volume_adjust: failed (no mixer)",
        "  turn 1: 1200 ms voice to voice (end of speech 300 ms, recognised 400 ms)",
    ]
    signals.publish(StateSignal(SessionState.SPEAKING))  # after aclose: not subscribed any more
    await asyncio.sleep(0)
    assert "[speaking]" not in out.getvalue()


async def test_the_status_line_is_redrawn_under_each_transcript_line():
    out = io.StringIO()
    view = Transcript(out, status_line=True)
    view.show_state(SessionState.SPEAKING)
    view.item(Speech(answer=0, text="Let me think.", kind="holding"))
    assert out.getvalue() == "\r\x1b[2K[speaking]\r\x1b[2Ktoy (holding): Let me think.\n[speaking]"


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


async def test_other_lines_on_the_terminal_go_above_the_status_line():
    screen = Tty()  # stdout and stderr on one terminal: what a person sees, in order
    view = Transcript(screen, status_line=True)
    stderr = view.above(screen)
    view.show_state(SessionState.LISTENING)
    stderr.write("WARNING audio mic: lost\n")
    assert screen.getvalue() == "\r\x1b[2K[listening]\r\x1b[2KWARNING audio mic: lost\n\r\x1b[2K[listening]"
    plain = io.StringIO()
    assert view.above(plain) is plain  # a file, not the terminal: left alone


def test_the_transcript_is_for_a_terminal_outside_systemd():
    assert transcript_wanted(Tty(), {}) is True
    assert transcript_wanted(io.StringIO(), {}) is False
    assert transcript_wanted(Tty(), {"JOURNAL_STREAM": "8:12345"}) is False
    assert transcript_wanted(Tty(), {"INVOCATION_ID": "abc"}) is False
    assert transcript_wanted(io.StringIO(), {}, flag=True) is True
    assert transcript_wanted(Tty(), {}, flag=False) is False


# -- the real commands -----------------------------------------------------------------------------------------


class Terminal:
    """A pty for a child process: stdin and stdout are a terminal; everything it shows is collected."""

    def __init__(self) -> None:
        self.master, self.slave = pty.openpty()
        self._buf = bytearray()
        self._thread = threading.Thread(target=self._read, name="pty-reader", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 4096)
            except OSError:
                return
            if not data:
                return
            self._buf += data

    @property
    def text(self) -> str:
        return self._buf.decode(errors="replace")

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def close(self) -> None:
        for fd in (self.slave, self.master):
            try:
                os.close(fd)
            except OSError:
                pass
        self._thread.join(timeout=5)


def runtime_env(sound_card, llm, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in child_env().items() if k not in ("JOURNAL_STREAM", "INVOCATION_ID")}
    env.update(sound_card.runtime_env)
    env.update({"TOY_STATE_DIR": str(tmp_path), "TOY_AUDIO__INPUT_DEVICE": "pulse",
                "TOY_AUDIO__OUTPUT_DEVICE": "pulse", "TOY_LLM__BASE_URL": llm.url,
                "TOY_SESSION__IDLE_TIMEOUT_S": "30"})
    return env


def answer_with_an_event(request):
    # the child's words say nothing about the volume, so the model's unasked change is refused (issue 27): the
    # transcript shows the event and why
    return Reply(text=ANSWER, tool_calls=[("adjust_device_volume", json.dumps({"mode": "absolute", "value": 30}))])


stop = end_process


@pytest.mark.audio
def test_run_on_a_terminal_shows_what_was_heard_said_and_done(sound_card, speak, tmp_path):
    question = speak(QUESTION)
    audit = tmp_path / "audit.jsonl"
    term = Terminal()
    with ScriptedLLMServer(answer_with_an_event) as llm:
        proc = subprocess.Popen([sys.executable, "-m", "toy_runtime", "run", "--mode", "chat_agent_tools"],
                                env=runtime_env(sound_card, llm, tmp_path), stdin=term.slave, stdout=term.slave,
                                stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda: audit_records(audit, "runtime.ready"), 60, "ready", proc)
            wait_for(lambda: "[idle]" in term.text, 10, "the status line", proc)
            sound_card.play_to_mic(question.pcm, question.sample_rate_hz, pad_ms=100)
            turn = wait_for(lambda: audit_records(audit, "voice.turn"), 60, "the turn", proc)[0]
            wait_for(lambda: " turn 1: " in term.text, 10, "the latency line", proc)
        finally:
            stop(proc)
            term.close()
    shown = term.text
    assert f"you: {turn['text']}" in shown and "weather" in turn["text"], shown
    assert f"toy: {ANSWER}" in shown, shown
    assert "event device.volume.adjust: rejected (the child's words do not ask for this)" in shown, shown
    assert f"turn 1: {turn['voice_to_voice_ms']:.0f} ms voice to voice" in shown, shown
    for state in ("[listening]", "[thinking]", "[speaking]"):
        assert state in shown, (state, shown)
    # in the order things happened
    assert shown.index("you: ") < shown.index("[thinking]") < shown.index("toy: ") < shown.index(" turn 1: ")


@pytest.mark.audio
def test_run_into_a_pipe_prints_no_transcript(sound_card, speak, tmp_path):
    question = speak(QUESTION)
    audit = tmp_path / "audit.jsonl"
    with ScriptedLLMServer(answer_with_an_event) as llm:
        proc = subprocess.Popen([sys.executable, "-m", "toy_runtime", "run", "--mode", "chat_agent_tools"],
                                env=runtime_env(sound_card, llm, tmp_path), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: audit_records(audit, "runtime.ready"), 60, "ready", proc)
            sound_card.play_to_mic(question.pcm, question.sample_rate_hz, pad_ms=100)
            turn = wait_for(lambda: audit_records(audit, "voice.turn"), 60, "the turn", proc)[0]
        finally:
            stop(proc)
        out, err = proc.communicate(timeout=10)
    assert turn["spoken"] and turn["events"], turn  # the turn happened, with its event…
    assert out == "", out  # …and nothing of it on stdout
    assert ANSWER not in err and "you: " not in err and "[listening]" not in err, err
    # the log has one structured line for the turn instead, without the child's words
    turn_lines = [line for line in err.splitlines() if "toy_runtime.turns" in line]
    assert len(turn_lines) == 1 and "events=device.volume.adjust=rejected" in turn_lines[0], err
    assert "weather" not in turn_lines[0]


@pytest.mark.audio
def test_ptt_hold_space_to_talk(sound_card, speak, tmp_path):
    question = speak(QUESTION)
    audit = tmp_path / "audit.jsonl"
    term = Terminal()
    with ScriptedLLMServer(lambda request: Reply(text=ANSWER)) as llm:
        env = runtime_env(sound_card, llm, tmp_path)
        # this test's thread plays the key repeat; on a loaded machine it may pause longer than a real terminal's
        # repeat ever would, and that must not read as "let go"
        env["TOY_SESSION__PTT_RELEASE_S"] = "2.0"
        proc = subprocess.Popen([sys.executable, "-m", "toy_runtime", "ptt"], env=env,
                                stdin=term.slave, stdout=term.slave, stderr=term.slave)
        holding = threading.Event()

        def hold_space() -> None:  # a held key as a terminal sends it: one press, then its repeats
            while holding.is_set():
                term.type(" ")
                time.sleep(0.03)

        try:
            wait_for(lambda: audit_records(audit, "runtime.ready"), 60, "ready", proc)
            # the audit line is written a moment before the hint reaches the terminal: wait for the hint itself
            wait_for(lambda: "hold space to talk" in term.text, 10, "the push-to-talk hint", proc)
            holding.set()
            threading.Thread(target=hold_space, name="hold-space", daemon=True).start()
            wait_for(lambda: audit_records(audit, "voice.session_opened"), 30, "the session to open", proc)
            sound_card.play_to_mic(question.pcm, question.sample_rate_hz, pad_ms=100)
            wait_for(lambda: "you: " in term.text, 30, "the utterance", proc)
            holding.clear()  # let go
            closed = wait_for(lambda: audit_records(audit, "voice.session_closed"), 30, "the session to close", proc)
            turn = wait_for(lambda: audit_records(audit, "voice.turn"), 30, "the turn", proc)[0]
            term.type("\x04")  # Ctrl-D: quit
            proc.wait(timeout=20)
        finally:
            holding.clear()
            stop(proc)
            term.close()
    shown = term.text
    assert proc.returncode == 0, shown
    assert closed[0]["reason"] == "closed"
    assert "listening… (release space or press Enter to stop)" in shown and "stopped" in shown, shown
    assert f"you: {turn['text']}" in shown and f"toy: {ANSWER}" in shown, shown


@pytest.mark.audio
def test_ptt_without_a_microphone_says_so_and_exits_2(sound_card, tmp_path):
    with ScriptedLLMServer(lambda request: Reply(text=ANSWER)) as llm:
        env = runtime_env(sound_card, llm, tmp_path)
        env["TOY_AUDIO__INPUT_DEVICE"] = "no-such-microphone"
        done = subprocess.run([sys.executable, "-m", "toy_runtime", "ptt"], env=env, input="\n", capture_output=True,
                              text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "ready" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    error = [line for line in done.stderr.splitlines() if line.startswith("toy-runtime: ")]
    assert len(error) == 1 and "microphone" in error[0] and "no-such-microphone" in error[0], done.stderr
