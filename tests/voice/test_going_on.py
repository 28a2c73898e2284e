"""When the child's next words go on with her turn (session/going_on.py): begun soon after her last words and
before she could have heard the answer; and how two transcripts of one paused sentence are joined."""

from __future__ import annotations

import pytest

from toy_runtime.session.going_on import REACTION_S, joined_text, went_on


def test_speech_begun_before_the_answer_sounded_goes_on_within_the_window():
    assert went_on(first_ended_at=10.0, resumed_at=10.9, answer_audio_at=None, window_s=1.5)
    assert went_on(first_ended_at=10.0, resumed_at=10.9, answer_audio_at=10.7, window_s=1.5)  # 0.2 s into it


def test_speech_begun_after_she_could_hear_the_answer_is_a_barge_in():
    assert not went_on(first_ended_at=10.0, resumed_at=10.7 + REACTION_S, answer_audio_at=10.7, window_s=1.5)
    assert not went_on(first_ended_at=10.0, resumed_at=11.2, answer_audio_at=10.4, window_s=1.5)


def test_speech_after_the_window_or_with_the_window_off_is_not_going_on():
    assert not went_on(first_ended_at=10.0, resumed_at=11.6, answer_audio_at=None, window_s=1.5)
    assert not went_on(first_ended_at=10.0, resumed_at=10.2, answer_audio_at=None, window_s=0.0)


@pytest.mark.parametrize("first, second, joined", [
    ("My friend Tom.", "Has a red bike.", "My friend Tom has a red bike."),
    ("Set a reminder.", "For eight o'clock.", "Set a reminder for eight o'clock."),
    ("I think.", "I like dinosaurs.", "I think I like dinosaurs."),  # "I" keeps its capital
    ("Can we play?", "Hide and seek.", "Can we play? Hide and seek."),  # the child's own question stays
    ("I want", "a story.", "I want a story."),
    ("Turn the music.", "OK, down a little.", "Turn the music OK, down a little."),
    ("我的朋友。", "有一辆红色的自行车。", "我的朋友有一辆红色的自行车。"),
    ("你会唱", "月亮的歌吗？", "你会唱月亮的歌吗？"),
    ("", "Hello.", "Hello."),
])
def test_two_transcripts_of_one_paused_sentence_read_as_one(first, second, joined):
    assert joined_text(first, second) == joined


def test_a_reply_remembered_whole_and_then_cut_off_keeps_only_what_was_heard():
    """The model finished while the answer still played, so the turn was remembered whole; a barge-in then cuts the
    reply back to what the child heard (kept once), and a turn she went on from leaves the history."""
    from toy_runtime.session.conversation import Conversation
    from toy_runtime.session.items import Answer, Speech
    from toy_runtime.session.turn_memory import remember_interrupted

    conversation = Conversation()
    turn_id = conversation.next_turn_id()
    conversation.add("user", "Tell me a story.", turn_id=turn_id)
    conversation.add("assistant", "Once upon a time there was a fox. It lived in a wood.", turn_id=turn_id)
    remember_interrupted(conversation, "Tell me a story.", [Speech(Answer.FIRST, "Once upon a time…")])
    assert [(m["role"], m["content"]) for m in conversation.messages] == [
        ("user", "Tell me a story."), ("assistant", "Once upon a time…")]

    turn_id = conversation.next_turn_id()
    conversation.add("user", "My friend Tom.", turn_id=turn_id)
    conversation.add("assistant", "Who is Tom?", turn_id=turn_id)
    assert conversation.cut_reply(turn_id, "")  # she went on before she heard it
    assert [m["content"] for m in conversation.messages] == ["Tell me a story.", "Once upon a time…"]
    assert not conversation.cut_reply(turn_id, "")  # nothing of that turn is left to cut


def test_a_cut_reply_whose_events_ran_keeps_their_record():
    from toy_runtime.session.conversation import Conversation

    conversation = Conversation()
    turn_id = conversation.next_turn_id()
    conversation.add("user", "Turn it down.", turn_id=turn_id)
    conversation.add("assistant", "Okay, quieter now.", protocol="<agent_events>device.volume.adjust</agent_events>",
                     turn_id=turn_id)
    assert conversation.cut_reply(turn_id, "")
    assert [m["content"] for m in conversation.messages] == [
        "Turn it down.", "<agent_events>device.volume.adjust</agent_events>"]


def test_a_turn_cut_off_unheard_that_started_an_event_is_remembered_with_its_record():
    """Cut off before a word of it was heard, a turn that started nothing leaves no trace; one whose event had
    started (it stands) enters the history with the child's words and the event's record."""
    from toy_runtime.session.conversation import Conversation
    from toy_runtime.session.turn_memory import remember_interrupted

    conversation = Conversation()
    conversation.next_turn_id()
    remember_interrupted(conversation, "Tell me a story.", [])
    assert conversation.messages == []
    conversation.next_turn_id()
    remember_interrupted(conversation, "Turn the music.", [],
                         protocol="<agent_events>device.volume.adjust</agent_events>")
    assert [(m["role"], m["content"]) for m in conversation.messages] == [
        ("user", "Turn the music."), ("assistant", "<agent_events>device.volume.adjust</agent_events>")]


def test_in_the_tools_mode_a_started_event_of_a_cut_off_turn_is_kept_as_a_call_with_the_status_started():
    from toy_runtime.agent.tool_calls import HistoryCall
    from toy_runtime.session.conversation import Conversation
    from toy_runtime.session.turn_memory import remember_interrupted

    conversation = Conversation()
    conversation.next_turn_id()
    call = HistoryCall("call_s_t1_0", "set_volume", {"direction": "down"}, "started")
    remember_interrupted(conversation, "Turn the music.", [], calls=[call])
    user, assistant, tool = conversation.messages
    assert user == {"role": "user", "content": "Turn the music."}
    assert assistant["content"] == "" and assistant["tool_calls"][0]["function"]["name"] == "set_volume"
    assert tool["tool_call_id"] == "call_s_t1_0" and '"started"' in tool["content"]
