"""The audio session state machine with in-package fakes: half-duplex, terminate, barge-in, host-event sessions,
idle timeout. Listener events are injected directly; TTS and the speaker are the fakes (the speaker paced in real
time so flushes really cut audio)."""

from __future__ import annotations

import pytest
import asyncio
import time


from toy_runtime.app.runtime import build_runtime
from toy_runtime.audio.listener import EarlyTranscript, SpeechStart, Utterance, UtteranceDiscarded
from toy_runtime.audio.own_voice import OwnVoiceCheck
from toy_runtime.config import load_settings, with_updates
from toy_runtime.events import EventDefinition, Resolution, ResultPolicy
from toy_runtime.audit import MemoryAudit
from toy_runtime.fakes.audio import MemorySink, ToneTTS
from toy_runtime.fakes.calendar import MemoryCalendarStore
from toy_runtime.fakes.device import MemoryMixer
from toy_runtime.fakes.search import StaticSearch
from toy_runtime.host.envelope import EventSource, HostEvent
from toy_runtime.session.voice_loop import CloseSession, OpenSession, Stop, VoiceLoop, deliver_host_event
from toy_runtime.signals import SessionState
from toy_runtime.testing.scripted_llm import Reply, ScriptedLLMServer


async def until(condition, timeout_s: float = 60.0) -> None:
    """Wait for `condition()` to hold; the bound only keeps a broken loop from hanging the suite."""

    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), timeout_s)


def closed_reasons(rig) -> list[str]:
    return [r["reason"] for r in rig.audit.of("voice.session_closed")]


def utterance(text: str) -> Utterance:
    now = time.monotonic()
    return Utterance(text=text, started_at=now - 1.0, ended_at=now - 0.3, endpoint_at=now, decided_at=now,
                     asr_final_at=now + 0.01, audio_ms=1000.0, reason="hangover")


class Rig:
    """A VoiceLoop over fakes plus a scripted LLM; `mic` is the queue the fake listener reads."""

    def __init__(self, tmp_path, llm_url, *, barge_in=False, idle_timeout_s=5.0, realtime=True, tts_delay_s=0.0,
                 agent=None, llm=None, events=(), own_voice=None, resume_window_s=0.0):
        settings = with_updates(load_settings(env={"TOY_STATE_DIR": str(tmp_path)}),
                                llm={"base_url": llm_url, "model": "scripted-model", **(llm or {})},
                                agent={"holding_cue_after_s": 600.0, **(agent or {})})
        self.audit = MemoryAudit()
        self.mixer = MemoryMixer()
        self.runtime = build_runtime(settings, audit=self.audit, mixer=self.mixer, search=StaticSearch(),
                                     calendar=MemoryCalendarStore(), events=events)
        self.mic: asyncio.Queue = asyncio.Queue()
        self.paused: list[bool] = []
        self.sinks: list[MemorySink] = []
        self.states: list[SessionState] = []
        self.signal_queue = self.runtime.signals.subscribe()

        async def events():
            while True:
                item = await self.mic.get()
                if item is None:
                    return
                yield item

        def new_sink():
            sink = MemorySink(22050, realtime=realtime, block_ms=10)
            self.sinks.append(sink)
            return sink

        self.loop = VoiceLoop(new_runner=self.runtime.new_turn_runner, listener_events=events,
                              pause_listener=lambda: self.paused.append(True),
                              resume_listener=lambda: self.paused.append(False),
                              synthesizer=ToneTTS(ms_per_char=8.0, delay_s=tts_delay_s), new_sink=new_sink,
                              signals=self.runtime.signals, audit=self.audit, idle_timeout_s=idle_timeout_s,
                              barge_in=barge_in, own_voice=own_voice, resume_window_s=resume_window_s)

    def state_history(self):
        out = []
        while not self.signal_queue.empty():
            signal = self.signal_queue.get_nowait()
            if hasattr(signal, "state"):
                out.append(signal.state)
        return out

    async def close(self):
        await self.runtime.aclose()


@pytest.mark.slow  # real waits (a first-token budget, a stall, an idle timeout): outside the fast lane
async def test_mute_and_bye_to_a_stalled_model_mutes_says_so_and_closes_the_session(tmp_path):
    """Issue 34 §2: the model sends its headers and then nothing. Past `gate_first_token_s` the gate mutes, the
    child hears its two lines played out, and the session closes as terminated — not after the turn deadline, and
    with no fault line."""
    with ScriptedLLMServer([Reply(text="Okay, bye!", fault="stall")]) as llm:
        rig = Rig(tmp_path, llm.url, llm={"gate_first_token_s": 0.3, "first_token_timeout_s": 120.0,
                                          "read_timeout_s": 120.0}, agent={"turn_deadline_s": 120.0})
        runner = asyncio.create_task(rig.loop.run(once=True))
        await rig.mic.put(utterance("mute and bye"))
        await asyncio.wait_for(runner, 60)  # a safety bound only: without the budget the stall lasts 120 s
        await rig.close()
    [record] = rig.loop.records
    assert record.terminated and closed_reasons(rig) == ["terminated"]
    assert rig.mixer.muted and rig.mixer.changes == [("set_muted", True)]
    assert " ".join(record.spoken) == "Okay, muting now. Bye bye! Talk to you soon."
    assert record.turn_metrics["fault"] == "first_token_budget"
    sink = rig.sinks[0]
    assert sink.closed and sink.chunks  # the lines were played before the output closed


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_half_duplex_turn_and_terminate_closes_the_session(tmp_path):
    with ScriptedLLMServer([Reply(text="Sure, I'll make it quieter."
                                       "<agent_events>device.volume.adjust</agent_events>"),
                            Reply(text="Bye bye, see you tomorrow!<agent_events>session.terminate</agent_events>")]
                           ) as llm:
        rig = Rig(tmp_path, llm.url)
        runner = asyncio.create_task(rig.loop.run(once=True))
        await rig.mic.put(utterance("turn it down by 20"))
        await rig.mic.put(utterance("goodbye"))
        await asyncio.wait_for(runner, 30)
        await rig.close()
    records = rig.loop.records
    assert [r.text for r in records] == ["turn it down by 20", "goodbye"]
    assert rig.mixer.level == 30
    assert records[1].terminated
    # half-duplex: the mic was paused for each turn and resumed after it
    assert rig.paused[:4] == [True, False, True, False]
    # the farewell played to the end before the output stream closed
    sink = rig.sinks[0]
    farewell = [c for c in sink.chunks if c.answer_id.endswith("u2.a1")]
    assert farewell and sink.closed
    assert sink.played_ms(farewell[0].answer_id) >= 0.95 * sum(len(c.pcm) / 2 / 22.05 for c in farewell)
    states = rig.state_history()
    assert states[:4] == [SessionState.IDLE, SessionState.LISTENING, SessionState.THINKING, SessionState.SPEAKING]
    assert states[-1] is SessionState.CLOSED and SessionState.IDLE in states[-3:]
    closed = rig.audit.of("voice.session_closed")
    assert closed[-1]["reason"] == "terminated"


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_barge_in_flushes_playback_and_discarded_turn_events_never_run(tmp_path):
    long_text = "Once upon a time there was a very long story. " * 6
    script = [Reply(text=long_text + "<agent_events>session.terminate</agent_events>", chunk_size=8,
                    chunk_delay_s=0.05),
              Reply(text="Okay, I stopped.")]
    with ScriptedLLMServer(script) as llm:
        rig = Rig(tmp_path, llm.url, barge_in=True)
        runner = asyncio.create_task(rig.loop.run(once=True))
        await rig.mic.put(utterance("tell me a long story"))
        await until(lambda: rig.loop.state is SessionState.SPEAKING)
        await asyncio.sleep(0.2)
        await rig.mic.put(SpeechStart(at=time.monotonic(), detected_at=time.monotonic()))
        await rig.mic.put(utterance("stop"))
        await until(lambda: len(rig.loop.records) >= 2)
        rig.loop.post(Stop())
        await asyncio.wait_for(runner, 60)
        await rig.close()
    first, second = rig.loop.records[:2]
    assert first.interrupted and not first.terminated
    assert second.text == "stop"
    sink = rig.sinks[0]
    assert sink.flush_count >= 1
    story_ids = {c.answer_id for c in sink.chunks if ".u1." in c.answer_id}
    played = sum(sink.played_ms(a) for a in story_ids)
    assert played < 3000  # the story (≈ 20 s of audio) was cut off
    assert rig.runtime.boundary.ended == {}  # the discarded turn's terminate never ran
    [barge] = rig.audit.of("voice.barge_in")
    # the history keeps what the child heard of the story, not the ~20 s of it that never played
    assert first.heard and barge["heard"] == first.heard
    heard = " ".join(first.heard)
    assert heard.endswith("…") and len(heard) < len(long_text) / 2, heard
    second_request = llm.requests[1]["messages"]
    assistant = [m["content"] for m in second_request if m["role"] == "assistant"]
    assert assistant and assistant[-1] == heard, assistant
    assert [m["content"] for m in second_request if m["role"] == "user"][-2:] == ["tell me a long story", "stop"]


def going_on(text: str, started_at: float) -> Utterance:
    """The words a child goes on with: 0.8 s of speech from `started_at`, just decided."""
    now = time.monotonic()
    return Utterance(text=text, started_at=started_at, ended_at=started_at + 0.8, endpoint_at=now, decided_at=now,
                     asr_final_at=now, audio_ms=1100.0, reason="hangover")


async def go_on_when(rig, first: str, state: SessionState) -> float:
    """The child says `first` and, once the loop is `state`, starts speaking again: when she did (monotonic)."""
    await rig.mic.put(utterance(first))
    await until(lambda: rig.loop.state is state)
    resumed = time.monotonic()
    await rig.mic.put(SpeechStart(at=resumed, detected_at=resumed))
    return resumed


# the window is wide here: a cold first request on a busy machine must not decide these tests (going_on's own
# tests cover the window)


def user_words(request) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "user"]


@pytest.mark.slow  # real waits (a slow first token, a paced speaker): outside the fast lane
async def test_a_child_who_goes_on_before_the_toy_speaks_is_answered_once_for_her_whole_sentence(tmp_path):
    """Issue 30: the turn ended in her pause ("My friend Tom." … "has a red bike"). She starts again while the toy
    still thinks: it must not start talking over her, and the model is asked about the whole sentence — the first
    words are not lost (an answer nobody heard is not remembered) and are not asked about twice."""
    def answer(request):  # the first request may be cancelled before it is sent: answer by what was asked
        if "red bike" in user_words(request)[-1]:
            return Reply(text="A red bike, how fun!")
        return Reply(text="Who is Tom?", delay_s=0.8)

    with ScriptedLLMServer(answer) as llm:
        rig = Rig(tmp_path, llm.url, barge_in=True, resume_window_s=5.0)
        runner = asyncio.create_task(rig.loop.run(once=True))
        resumed = await go_on_when(rig, "My friend Tom.", SessionState.THINKING)
        await asyncio.sleep(1.0)  # she is still speaking when the first answer is ready: it must not play
        assert not [c for c in rig.sinks[0].chunks if ".u1." in c.answer_id]
        await rig.mic.put(going_on("Has a red bike.", resumed))
        await until(lambda: len(rig.loop.records) >= 2)
        rig.loop.post(Stop())
        await asyncio.wait_for(runner, 60)
        await rig.close()
    stopped, whole = rig.loop.records
    assert stopped.interrupted and stopped.went_on and not stopped.heard
    assert whole.text == "My friend Tom has a red bike." and whole.joins == "My friend Tom."
    assert whole.spoken == ["A red bike, how fun!"]
    assert not [c for c in rig.sinks[0].chunks if ".u1." in c.answer_id]  # not a sound of the first answer
    assert user_words(llm.requests[-1]) == ["My friend Tom has a red bike."]
    assert [m for m in llm.requests[-1]["messages"] if m["role"] == "assistant"] == []
    assert rig.audit.of("voice.turn")[1]["joins"] == "My friend Tom."


@pytest.mark.slow  # real waits (a paced speaker): outside the fast lane
async def test_words_begun_as_the_answer_starts_go_on_and_words_after_she_heard_it_are_a_barge_in(tmp_path):
    """Speech that starts within a reaction time of the answer's first sound was begun before the child heard it:
    it goes on with her turn. Speech that starts later answers what she heard: a barge-in, as before — her words
    are the next turn and the history keeps the part of the answer she heard."""
    story = "Once upon a time there was a fox who lived in a very big forest. " * 4
    script = [Reply(text=story, chunk_size=8, chunk_delay_s=0.02), Reply(text="A fox and a dragon, then!"),
              Reply(text=story, chunk_size=8, chunk_delay_s=0.02), Reply(text="Okay, I stopped.")]
    with ScriptedLLMServer(script) as llm:
        rig = Rig(tmp_path, llm.url, barge_in=True, resume_window_s=5.0)
        runner = asyncio.create_task(rig.loop.run(once=True))
        resumed = await go_on_when(rig, "Tell me a story.", SessionState.SPEAKING)
        await rig.mic.put(going_on("About a dragon.", resumed))
        await until(lambda: len(rig.loop.records) >= 2)
        await rig.mic.put(utterance("Tell me another one."))
        await until(lambda: len(llm.requests) >= 3 and rig.loop.state is SessionState.SPEAKING)
        await asyncio.sleep(1.0)  # she listens, then speaks (well past the reaction time, on a busy machine too)
        stopped_at = time.monotonic()
        await rig.mic.put(SpeechStart(at=stopped_at, detected_at=stopped_at))
        await rig.mic.put(going_on("Stop.", stopped_at))
        await until(lambda: len(rig.loop.records) >= 4)
        rig.loop.post(Stop())
        await asyncio.wait_for(runner, 60)
        await rig.close()
    texts = [r.text for r in rig.loop.records]
    assert texts == ["Tell me a story.", "Tell me a story about a dragon.", "Tell me another one.", "Stop."], texts
    first, joined, third, barge = rig.loop.records
    assert first.went_on and joined.joins == "Tell me a story."
    assert third.interrupted and not third.went_on and third.heard and barge.joins is None
    assert len(rig.audit.of("voice.went_on")) == 1
    last = llm.requests[-1]["messages"]
    assert user_words(llm.requests[-1]) == ["Tell me a story about a dragon.", "Tell me another one.", "Stop."]
    heard = [str(m["content"]) for m in last if m["role"] == "assistant"]
    # nothing of the first answer; of the third only what she heard, once (its model had finished: it had been
    # remembered whole while its audio still played)
    assert heard == ["A fox and a dragon, then!", " ".join(third.heard)], heard


NO_WORDS = [UtteranceDiscarded("too_short", 120.0), going_on("", 0.0)]  # dropped, or heard with no transcript


@pytest.mark.slow  # real waits (a slow first token): outside the fast lane
@pytest.mark.parametrize("nothing", NO_WORDS, ids=["dropped", "no-transcript"])
async def test_a_sound_while_the_toy_thinks_that_comes_to_nothing_only_holds_the_answer_back(tmp_path, nothing):
    """The speech start was a cough (the listener drops it as too short, or hears no words in it): the answer held
    back for it plays at once, the turn is not asked again."""
    with ScriptedLLMServer([Reply(text="Who is Tom?", delay_s=0.3)]) as llm:
        rig = Rig(tmp_path, llm.url, barge_in=True, resume_window_s=5.0)
        runner = asyncio.create_task(rig.loop.run(once=True))
        await go_on_when(rig, "My friend Tom.", SessionState.THINKING)
        await asyncio.sleep(0.8)  # the answer is ready and held
        assert not rig.loop.records and not [c for c in rig.sinks[0].chunks if ".u1." in c.answer_id]
        released = time.monotonic()
        await rig.mic.put(nothing)
        await until(lambda: len(rig.loop.records) >= 1)
        assert time.monotonic() - released < 10  # not the hold's 20 s bound
        rig.loop.post(Stop())
        await asyncio.wait_for(runner, 60)
        await rig.close()
    [record] = rig.loop.records
    assert record.text == "My friend Tom." and record.spoken == ["Who is Tom?"] and not record.interrupted
    assert len(llm.requests) == 1 and not rig.audit.of("voice.went_on")


@pytest.mark.slow  # real waits (a paced speaker): outside the fast lane
@pytest.mark.parametrize("nothing", NO_WORDS, ids=["dropped", "no-transcript"])
async def test_when_the_words_she_went_on_with_come_to_nothing_her_first_words_are_answered(tmp_path, nothing):
    """She started again as the answer started (so it stopped), and that speech was dropped as too short: she
    heard nothing of the answer, so the turn is asked again rather than left unanswered."""
    with ScriptedLLMServer([Reply(text="Who is Tom? " * 5), Reply(text="Who is Tom?")]) as llm:
        rig = Rig(tmp_path, llm.url, barge_in=True, resume_window_s=5.0)
        runner = asyncio.create_task(rig.loop.run(once=True))
        await go_on_when(rig, "My friend Tom.", SessionState.SPEAKING)
        await until(lambda: rig.audit.of("voice.went_on"))
        await rig.mic.put(nothing)
        await until(lambda: len(rig.loop.records) >= 2)
        rig.loop.post(Stop())
        await asyncio.wait_for(runner, 60)
        await rig.close()
    assert [r.text for r in rig.loop.records] == ["My friend Tom.", "My friend Tom."]
    assert rig.loop.records[1].spoken == ["Who is Tom?"] and not rig.loop.records[1].interrupted
    assert user_words(llm.requests[-1]) == ["My friend Tom."]


def slow_music_down(calls: list[str], started: asyncio.Event) -> EventDefinition:
    """An event whose handler takes a while: it is still running when the child goes on."""
    async def turn_down(arguments, ctx):
        calls.append("turned down")
        started.set()
        await asyncio.sleep(1.5)
        return {"done": True}

    return EventDefinition(
        name="test.music.down", version=1, tool_name="music_down", description="Turn the music down.",
        schema={"type": "object", "properties": {}, "additionalProperties": False},
        resolver=lambda proposed, ctx: Resolution(arguments={}), handler=turn_down,
        result_policy=ResultPolicy.SILENT_SUCCESS, llm_fallback=False)


@pytest.mark.slow  # real waits (a slow handler, a slow stream): outside the fast lane
async def test_a_turn_whose_event_already_started_is_not_asked_again_when_she_goes_on(tmp_path):
    """The turn that ended in her pause ("Turn the music." … "down a little") already started an event whose result
    has not come back when she goes on. That action stands: her next words are a turn of their own, not asked again
    as one with the first (which would turn the music down twice)."""
    calls: list[str] = []
    started = asyncio.Event()

    def answer(request):  # the model acts on each request that asks for it: joined, the action would run twice
        if user_words(request)[-1] == "Turn the music.":
            return Reply(text="<agent_events>test.music.down</agent_events>Okay, quieter now.", chunk_size=6,
                         chunk_delay_s=0.15)
        if "turn the music" in user_words(request)[-1].lower():
            return Reply(text="Quieter!<agent_events>test.music.down</agent_events>")
        return Reply(text="A little more, okay.")

    with ScriptedLLMServer(answer) as llm:
        rig = Rig(tmp_path, llm.url, barge_in=True, resume_window_s=5.0, events=[slow_music_down(calls, started)])
        runner = asyncio.create_task(rig.loop.run(once=True))
        await rig.mic.put(utterance("Turn the music."))
        await asyncio.wait_for(started.wait(), 30)  # the handler runs; the answer's words are still coming
        resumed = time.monotonic()
        await rig.mic.put(SpeechStart(at=resumed, detected_at=resumed))
        await rig.mic.put(going_on("Down a little.", resumed))
        await until(lambda: len(rig.loop.records) >= 2)
        rig.loop.post(Stop())
        await asyncio.wait_for(runner, 60)
        await rig.close()
    first, second = rig.loop.records
    assert first.interrupted and not first.went_on
    assert second.text == "Down a little." and second.joins is None
    assert not rig.audit.of("voice.went_on")
    assert len(calls) == 1
    # the model answering her next words knows the first ones and that the music is already being turned down
    assert user_words(llm.requests[-1]) == ["Turn the music.", "Down a little."]
    said = [str(m["content"]) for m in llm.requests[-1]["messages"] if m["role"] == "assistant"]
    assert said == ["<agent_events>test.music.down</agent_events>"], said


@pytest.mark.slow  # real waits (a slow first token, a paced speaker): outside the fast lane
async def test_an_action_of_an_earlier_turn_does_not_keep_a_later_one_from_going_on(tmp_path):
    """Turn 1 turns the music down and is done. Turn 2 ends in her pause and starts nothing: she goes on, and it is
    joined — the earlier turn's action is not taken for this one's."""
    calls: list[str] = []

    def answer(request):
        last = user_words(request)[-1]
        if last == "Turn the music down.":
            return Reply(text="Quieter!<agent_events>test.music.down</agent_events>")
        if "red bike" in last:
            return Reply(text="A red bike, how fun!")
        return Reply(text="Who is Tom?", delay_s=0.8)

    with ScriptedLLMServer(answer) as llm:
        rig = Rig(tmp_path, llm.url, barge_in=True, resume_window_s=5.0,
                  events=[slow_music_down(calls, asyncio.Event())])
        runner = asyncio.create_task(rig.loop.run(once=True))
        await rig.mic.put(utterance("Turn the music down."))
        await until(lambda: len(rig.loop.records) >= 1)
        resumed = await go_on_when(rig, "My friend Tom.", SessionState.THINKING)
        await rig.mic.put(going_on("Has a red bike.", resumed))
        await until(lambda: len(rig.loop.records) >= 3)
        rig.loop.post(Stop())
        await asyncio.wait_for(runner, 60)
        await rig.close()
    acted, stopped, whole = rig.loop.records
    assert len(calls) == 1 and acted.events
    assert stopped.interrupted and stopped.went_on
    assert whole.text == "My friend Tom has a red bike." and whole.joins == "My friend Tom."


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_speech_that_sounds_like_the_toy_itself_does_not_interrupt_it(tmp_path):
    """The echo canceller's double-talk check says the speech that started is the toy's own voice leaking: the
    answer plays on, and the utterance that speech becomes is not taken for the child's."""
    with ScriptedLLMServer([Reply(text="Once upon a time there was a fox. " * 3, chunk_size=8, chunk_delay_s=0.02)]
                           ) as llm:
        rig = Rig(tmp_path, llm.url, barge_in=True, own_voice=OwnVoiceCheck(lambda window_s: 0.9))
        runner = asyncio.create_task(rig.loop.run(once=True))
        await go_on_when(rig, "tell me a story", SessionState.SPEAKING)
        await rig.mic.put(utterance("once upon a"))
        await until(lambda: len(rig.loop.records) >= 1)
        rig.loop.post(Stop())
        await asyncio.wait_for(runner, 60)
        await rig.close()
    [record] = rig.loop.records
    assert not record.interrupted and not rig.audit.of("voice.barge_in")
    assert rig.audit.of("voice.barge_in_ignored")[0]["own_voice"] == 0.9
    assert [r.text for r in rig.loop.records] == ["tell me a story"]  # the leaked words were no turn


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_the_toys_own_voice_heard_out_after_the_answer_ended_is_no_turn(tmp_path):
    """The echo of an answer's last words ends after the answer does: a speech start judged the toy's own voice
    near the end, whose transcript and utterance arrive once the answer is over, is still not the child (a
    clean-clone CI run answered "I could think the point outside", the echo of "…play outside"). The child's next
    words are heard as before."""
    script = [Reply(text="A fox."), Reply(text="The fox ran home.")]
    with ScriptedLLMServer(script) as llm:
        rig = Rig(tmp_path, llm.url, barge_in=True, own_voice=OwnVoiceCheck(lambda window_s: 0.9))
        runner = asyncio.create_task(rig.loop.run(once=True))
        await go_on_when(rig, "tell me a story", SessionState.SPEAKING)
        await until(lambda: len(rig.loop.records) >= 1)  # the answer ended; the toy's echo is still being heard
        await rig.mic.put(EarlyTranscript(text="a box", turn_class="complete", wait_ms=600.0, silent_ms=100.0))
        await rig.mic.put(utterance("a box"))
        await rig.mic.put(SpeechStart(at=time.monotonic(), detected_at=time.monotonic()))
        await rig.mic.put(utterance("and then"))
        await until(lambda: len(rig.loop.records) >= 2)
        rig.loop.post(Stop())
        await asyncio.wait_for(runner, 60)
        await rig.close()
    assert [r.text for r in rig.loop.records] == ["tell me a story", "and then"]
    assert [str(r["messages"][-1]["content"]) for r in llm.requests] == ["tell me a story", "and then"]
    assert [r["text"] for r in rig.audit.of("voice.own_voice_dropped")] == ["a box"]
    assert not rig.audit.of("voice.barge_in")


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_host_event_opens_a_session_and_speaks_the_reminder(tmp_path):
    with ScriptedLLMServer([]) as llm:
        rig = Rig(tmp_path, llm.url, idle_timeout_s=0.3)
        runner = asyncio.create_task(rig.loop.run(once=True))
        event = HostEvent(event_type="schedule.triggered", source=EventSource(kind="scheduler"))
        spoken = await deliver_host_event(rig.loop, event, "Reminder: it's time to brush your teeth.")
        await asyncio.wait_for(runner, 60)
        await rig.close()
    assert spoken is True
    assert rig.sinks and rig.sinks[0].played_ms() > 0
    assert rig.audit.of("voice.session_closed")[-1]["reason"] == "idle"  # then it closed on its own
    assert llm.requests == []  # a reminder is not disguised as user text: no LLM turn


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_a_spoken_reminder_is_part_of_the_conversation(tmp_path):
    """The child's answer to a reminder ("I already did it!") reaches the model with the reminder before it."""
    reminder = "Reminder: it's time to brush your teeth."
    with ScriptedLLMServer([Reply(text="Great job, your teeth are sparkly!")]) as llm:
        rig = Rig(tmp_path, llm.url, idle_timeout_s=30.0)
        runner = asyncio.create_task(rig.loop.run(once=True))
        event = HostEvent(event_type="schedule.triggered", source=EventSource(kind="scheduler"))
        assert await deliver_host_event(rig.loop, event, reminder)
        await rig.mic.put(utterance("I already did it!"))
        await until(lambda: len(rig.loop.records) >= 1)
        rig.loop.post(Stop())
        await asyncio.wait_for(runner, 60)
        await rig.close()
    [request] = llm.requests
    dialogue = [(m["role"], m["content"]) for m in request["messages"] if m["role"] != "system"]
    assert dialogue == [("assistant", reminder), ("user", "I already did it!")]


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_idle_timeout_and_close_request(tmp_path):
    with ScriptedLLMServer([]) as llm:
        rig = Rig(tmp_path, llm.url, idle_timeout_s=0.2)
        runner = asyncio.create_task(rig.loop.run())
        rig.loop.post(OpenSession(reason="button.press"))
        await until(lambda: closed_reasons(rig))  # nothing else happens, so only the idle timeout can close it
        assert closed_reasons(rig) == ["idle"]
        # a long idle timeout now, so that a slow machine cannot let it win the race against the close request
        rig.loop.idle_timeout_s = 60.0
        rig.loop.post(OpenSession(reason="button.press"))
        rig.loop.post(CloseSession(reason="button.long_press"))
        await until(lambda: len(closed_reasons(rig)) == 2)
        assert closed_reasons(rig) == ["idle", "closed"]
        assert all(s.closed for s in rig.sinks) and len(rig.sinks) == 2  # one output stream per session
        rig.loop.post(Stop())
        await asyncio.wait_for(runner, 60)
        await rig.close()


class BrokenTTS:
    """A synthesizer whose engine fails on every sentence."""

    sample_rate_hz = 22050

    async def synthesize(self, text):
        from toy_runtime.ports.speech import SpeechEngineError

        raise SpeechEngineError("tts-failed", "piper failed")
        yield  # pragma: no cover - makes this an async generator


async def test_tts_failure_does_not_take_the_loop_down(tmp_path):
    with ScriptedLLMServer([Reply(text="Sentence one. " * 40), Reply(text="Still here.")]) as llm:
        rig = Rig(tmp_path, llm.url, realtime=False)
        rig.loop.synthesizer = BrokenTTS()
        runner = asyncio.create_task(rig.loop.run())
        await rig.mic.put(utterance("talk a lot"))
        await rig.mic.put(utterance("are you there"))
        await until(lambda: len(rig.loop.records) >= 2 or runner.done())
        assert len(rig.loop.records) == 2 and not runner.done()
        rig.loop.post(Stop())
        await asyncio.wait_for(runner, 60)
        await rig.close()


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
async def test_stop_during_a_barge_in_turn_is_honoured(tmp_path):
    with ScriptedLLMServer([Reply(text="A long story. " * 30, chunk_size=6, chunk_delay_s=0.03)]) as llm:
        rig = Rig(tmp_path, llm.url, barge_in=True)
        runner = asyncio.create_task(rig.loop.run())
        await rig.mic.put(utterance("tell me a story"))
        await asyncio.sleep(0.3)
        rig.loop.post(Stop())
        await asyncio.wait_for(runner, 30)  # the turn finishes, then the loop stops
        assert not rig.audit.of("voice.barge_in")
        await rig.close()


async def test_session_boundary_end_closes_the_audio_session(tmp_path):
    with ScriptedLLMServer([]) as llm:
        rig = Rig(tmp_path, llm.url, idle_timeout_s=30)
        rig.runtime.boundary.on_end(lambda sid, reason: rig.loop.post(CloseSession(reason="remote")))
        runner = asyncio.create_task(rig.loop.run())
        rig.loop.post(OpenSession(reason="button.press"))
        await until(lambda: rig.loop.state is SessionState.LISTENING)
        await rig.runtime.boundary.end_session("remote command", "ev_remote")  # e.g. an api.invoked terminate
        await until(lambda: closed_reasons(rig))
        assert closed_reasons(rig) == ["closed"]
        rig.loop.post(Stop())
        await asyncio.wait_for(runner, 60)
        await rig.close()


async def test_a_late_answer_is_preceded_by_a_holding_cue_counted_from_the_end_of_speech(tmp_path):
    """The child stopped speaking 5 s before the hand-over: with a 2 s cue delay the cue is due at once; the answer
    (held by the scripted server until the cue was chosen) plays after it."""
    import threading

    go = threading.Event()
    with ScriptedLLMServer([Reply(text="A whale is a big sea animal.", delay_s=60, release=go)]) as llm:
        rig = Rig(tmp_path, llm.url, agent={"holding_cue_after_s": 2.0}, realtime=False)
        runner = asyncio.create_task(rig.loop.run())
        now = time.monotonic()
        await rig.mic.put(Utterance(text="what is a whale", started_at=now - 6.0, ended_at=now - 5.0,
                                    endpoint_at=now, decided_at=now, asr_final_at=now, audio_ms=1000.0,
                                    reason="hangover"))
        async def until(condition):
            while not condition():
                await asyncio.sleep(0.01)

        await asyncio.wait_for(until(lambda: rig.audit.of("turn.holding_cue")), 30)
        go.set()
        await asyncio.wait_for(until(lambda: rig.loop.records), 30)
        await rig.mic.put(Stop())
        await asyncio.wait_for(runner, 30)
        await rig.close()
    [record] = rig.loop.records
    cue = rig.audit.of("turn.holding_cue")[0]["text"]
    assert record.spoken == [cue, "A whale is a big sea animal."]
    answers = [c.answer_id.rsplit(".", 1)[1] for c in rig.sinks[0].chunks]
    assert answers[0] == "a0" and answers == ["a0"] * answers.count("a0") + ["a1"] * answers.count("a1")
    assert record.holding_audio_at is not None
