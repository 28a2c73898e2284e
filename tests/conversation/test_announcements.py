"""A line the toy says on its own (a reminder) is part of the conversation's history, keeping roles alternating."""

from __future__ import annotations

from toy_runtime.session.conversation import Conversation


class _Call:
    """A recorded tool call as chat_agent_tools keeps it (the two methods Conversation reads)."""

    def provider_call(self):
        return {"id": "call_1", "type": "function", "function": {"name": "add_schedule", "arguments": "{}"}}

    def tool_message(self):
        return {"role": "tool", "tool_call_id": "call_1", "content": '{"status": "succeeded"}'}


def roles_and_text(conv: Conversation):
    return [(m["role"], m["content"]) for m in conv.messages]


def test_a_reminder_opens_an_empty_conversation():
    conv = Conversation()
    conv.add_announcement("Reminder: it's time to brush your teeth.")
    assert roles_and_text(conv) == [("assistant", "Reminder: it's time to brush your teeth.")]
    assert conv.slice_for_events() == [{"role": "assistant", "content": "Reminder: it's time to brush your teeth."}]


def test_after_a_plain_answer_it_joins_it():
    conv = Conversation()
    conv.add("user", "hello")
    conv.add("assistant", "Hi there!")
    conv.add_announcement("Reminder: it's time to feed the cat.")
    assert roles_and_text(conv) == [("user", "hello"), ("assistant", "Hi there! Reminder: it's time to feed the cat.")]


def test_after_a_turns_events_it_is_a_message_of_its_own():
    conv = Conversation()
    conv.add("user", "remind me to feed the cat at 5 pm")
    conv.add("assistant", "Okay!", calls=[_Call()])
    conv.add_announcement("Reminder: it's time to feed the cat.")
    messages = conv.messages
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1]["content"] == "Okay!" and messages[-1]["content"] == "Reminder: it's time to feed the cat."
    block = Conversation()
    block.add("assistant", "Okay!", protocol="<agent_events>calendar.schedule.create</agent_events>")
    block.add_announcement("Reminder: it's time to feed the cat.")
    assert [m["content"] for m in block.messages] == [
        "Okay!<agent_events>calendar.schedule.create</agent_events>", "Reminder: it's time to feed the cat."]
