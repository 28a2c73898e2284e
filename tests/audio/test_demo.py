"""`toy-runtime demo`: the same speech every run, and a line counts as understood only if the toy did it."""

from __future__ import annotations

import hashlib
import io
import json

from toy_runtime.config import load_settings, with_updates
from toy_runtime.app.demo import run_demo, summary
from toy_runtime.app.demo_script import (DEFAULT_SCRIPT, Answered, Handled, Line, ReminderSet, SessionEnds, Verdict,
                                         VolumeSet, VolumeUp, as_lines, judge)
from toy_runtime.ports.device import MixerState
from toy_runtime.metrics.voice_turn import VoiceTurnRecord

SHORT_SCRIPT = (Line("Set the volume to thirty.", VolumeSet(30)), Line("See you later.", SessionEnds()))


def record(text="set the volume to thirty", *, events=(), path="gate", fault=None, spoken=("Okay.",),
           terminated=False) -> VoiceTurnRecord:
    return VoiceTurnRecord(turn=1, text=text, end_of_speech_at=0.0, endpoint_at=0.3, asr_final_at=0.3,
                           handoff_at=0.3, events=[{"name": n, "status": s, "at": 0.5} for n, s in events],
                           turn_metrics={"path": path, "fault": fault}, spoken=list(spoken), terminated=terminated)


AT_50, AT_30, AT_60 = MixerState(50, False), MixerState(30, False), MixerState(60, False)


def test_a_volume_request_that_was_heard_but_did_not_run_is_not_understood():
    line = Line("Set the volume to thirty.", VolumeSet(30))
    heard_only = judge(line, record(spoken=("I can't think right now.",)), AT_50, AT_50)
    assert not heard_only.understood and heard_only.heard == "set the volume to thirty"
    assert heard_only.problem == "the volume is 50"
    # an event that says it succeeded is not enough either: the volume must be what was asked
    wrong = judge(line, record(events=[("device.volume.adjust", "succeeded")]), AT_50, MixerState(35, False))
    assert not wrong.understood
    done = judge(line, record(events=[("device.volume.adjust", "succeeded")]), AT_50, AT_30)
    assert done.understood and done.problem is None


def test_volume_up_goodbye_and_answers_are_judged_by_what_happened():
    up = Line("A bit louder please.", VolumeUp())
    assert judge(up, record(), AT_30, MixerState(40, False)).understood
    assert judge(up, record(), AT_30, AT_30).problem == "the volume stayed at 30"
    assert not judge(up, record(), AT_60, AT_30).understood
    bye = Line("See you later.", SessionEnds())
    assert judge(bye, record(terminated=True), AT_50, AT_50).understood
    assert judge(bye, record(), AT_50, AT_50).problem == "the session went on"
    story = Line("Tell me a story.", Answered())
    assert judge(story, record(path="llm"), AT_50, AT_50).understood
    assert "offline" in judge(story, record(path="gate"), AT_50, AT_50).problem
    assert "timeout" in judge(story, record(path="llm", fault="timeout"), AT_50, AT_50).problem
    assert judge(story, record(text=""), AT_50, AT_50).problem == "nothing was heard"


def test_a_line_without_an_expectation_needs_something_done_or_answered():
    (line,) = as_lines(["what now"])
    assert isinstance(line.expect, Handled)
    assert not judge(line, record(path="gate"), AT_50, AT_50).understood  # only the offline line
    assert not judge(line, record(events=[("device.volume.adjust", "failed")]), AT_50, AT_50).understood
    assert judge(line, record(events=[("device.volume.adjust", "succeeded")]), AT_50, AT_30).understood
    assert judge(line, record(path="llm"), AT_50, AT_50).understood


def test_the_summary_counts_only_understood_lines():
    verdicts = [Verdict(SHORT_SCRIPT[0], "set the volume to thirty", "the volume is 50"),
                Verdict(SHORT_SCRIPT[1], "see you later", None)]
    text = summary(verdicts)
    assert text.startswith("1 of 2 utterances understood")
    assert "'Set the volume to thirty.': wanted volume set to 30, but the volume is 50" in text
    assert [line.expect.description for line in DEFAULT_SCRIPT] == [
        "an answer from the model", "volume set to 30", "volume up", "the session ends"]


async def demo(tmp_path, name, script, **sections):
    settings = with_updates(load_settings(env={"TOY_STATE_DIR": str(tmp_path)}), **sections)
    out = io.StringIO()
    code = await run_demo(settings, tmp_path / name, script=script, stream=out, json_lines=True)
    lines = [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]
    wavs = {p.name.split(".u")[-1] if p.name.startswith("toy-") else p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in (tmp_path / name).glob("*.wav")}
    return code, [l for l in lines if l["type"] == "demo_verdict"], lines[-1], wavs


def words(text: str) -> str:
    """A transcript as lower-case words (Whisper writes sentences: "Set the volume to 30.")."""
    import re

    return " ".join(re.sub(r"[^a-z0-9' ]", " ", text.lower()).split())


async def test_the_demo_is_deterministic_and_a_heard_request_without_its_event_is_not_understood(tmp_path):
    code, verdicts, total, wavs = await demo(tmp_path, "all", SHORT_SCRIPT)
    assert code == 0
    assert [(words(v["heard"]), v["understood"]) for v in verdicts] == [("set the volume to 30", True),
                                                                        ("see you later", True)]
    assert total == {"type": "demo_summary", "understood": 2, "utterances": 2}

    # the same demo with the volume event switched off: every word is heard, but the volume does not change
    code, verdicts, total, wavs_again = await demo(tmp_path, "no-volume", SHORT_SCRIPT,
                                                   events={"enabled": ["session.terminate"]})
    assert code == 0
    assert words(verdicts[0]["heard"]) == "set the volume to 30" and not verdicts[0]["understood"]
    assert verdicts[0]["problem"] == "the volume is 50"
    assert verdicts[1]["understood"]
    assert total["understood"] == 1
    # same speech both runs: what the child said, and the toy's goodbye (turn 2 of each session)
    assert wavs_again["child-1.wav"] == wavs["child-1.wav"] and wavs_again["child-2.wav"] == wavs["child-2.wav"]
    assert wavs_again["2.a1.wav"] == wavs["2.a1.wav"]


async def test_plain_text_lines_are_judged_too(tmp_path):
    code, verdicts, total, _ = await demo(tmp_path, "say", ["hello"])
    assert code == 0 and len(verdicts) == 1
    assert verdicts[0]["expected"] == "something done or answered"
    assert not verdicts[0]["understood"]  # offline: only "I can't think right now" was said
    assert total["understood"] == 0


async def test_the_mandarin_story_happens_with_a_model(tmp_path, zh_voice):
    """The Chinese story end to end with a model on loopback: heard in Mandarin, the volume set, a reminder in the
    calendar, the session ended, and the model asked in Chinese answered the story."""
    from toy_runtime.app.demo_script import CHINESE_SCRIPT
    from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer

    assert [type(line.expect) for line in CHINESE_SCRIPT][2] is ReminderSet
    with ScriptedLLMServer(lambda request: Reply(text="从前有一条小龙，它最喜欢在云里飞。")) as llm:
        code, verdicts, total, _ = await demo(tmp_path, "zh", CHINESE_SCRIPT,
                                              llm={"base_url": llm.url, "model": "scripted-model"})
    assert code == 0
    assert all(v["understood"] for v in verdicts), verdicts
    assert "音量" in verdicts[1]["heard"] and "提醒" in verdicts[2]["heard"], verdicts
    assert total == {"type": "demo_summary", "understood": 4, "utterances": 4}


def test_a_reminder_line_is_judged_by_the_calendar_event():
    line = Line("明天早上八点提醒我刷牙。", ReminderSet())
    assert judge(line, record(events=[("calendar.schedule.create", "succeeded")]), AT_50, AT_50).understood
    assert judge(line, record(), AT_50, AT_50).problem == "no reminder was set"
    assert judge(line, record(events=[("calendar.schedule.create", "failed")]), AT_50, AT_50).problem == (
        "the reminder failed")
