"""How a fired reminder (`schedule.triggered`) is put into words: a template, or a short ChatAgent line.

Delivery is the binding's business (the toy opens an audio session and speaks it; `chat` prints it); the scheduler
that fires reminders is `host/scheduler.py`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..language import has_cjk
from ..pronouns import second_person
from .envelope import HostEvent

if TYPE_CHECKING:
    from ..agent.llm import ChatClient
    from ..agent.speakable import SpeakableRules
    from ..config import Settings


def reminder_line(event: HostEvent) -> str:
    """The templated reminder sentence, in the language of the title ("it's time to brush your teeth": the child's
    "my" said back as "your").

    A stored title may have come from a model's proposal, and the line is both spoken and kept in the conversation
    the model reads next: it passes the same speakable guard as model text (no markup, event blocks or JSON).
    """
    from ..agent.speakable import NO_RULES, speakable

    data = event.input.data
    title = second_person(str(data.get("title") or ""))
    minutes = int(data.get("reminder_minutes") or 0)
    if has_cjk(title):
        line = f"提醒：{minutes}分钟后{title}。" if minutes else f"提醒：该{title}了。"
    elif minutes:
        line = f"Reminder: in {minutes} minutes, {title}."
    else:
        line = f"Reminder: it's time to {title}." if not title[:1].isupper() else f"Reminder: {title}."
    return ("" if has_cjk(line) else " ").join(speakable(line, NO_RULES)[0])


async def chat_agent_line(event: HostEvent, client: ChatClient | None, settings: Settings,
                          rules: SpeakableRules | None = None) -> str:
    """A short ChatAgent line for the reminder (when `[calendar] reminder_style = "chat_agent"`); template on fault.

    `client`: the runtime's LLM client (None: no LLM, the template); `settings`: the persona and the model;
    `rules`: the chat agent's speakable rules (its event names and persona), the guard's defaults when None."""
    from ..agent.llm import CallStats, LLMFault
    from ..agent.speakable import NO_RULES, speakable

    if client is None:
        return reminder_line(event)
    title = second_person(str(event.input.data.get("title") or ""))
    stats = CallStats(purpose="reminder")
    messages = [{"role": "system", "content": settings.agent.persona},
                {"role": "user", "content": f"[reminder] In one short friendly sentence, tell the child it is time "
                                            f"for: {title}"}]
    try:
        response = await client.complete(stats, model=settings.llm.model, messages=messages,
                                         max_tokens=60, temperature=settings.llm.temperature)
        # a provider may answer with no choice, or a choice with no message: the template then
        text = (response.choices[0].message.content or "").strip()
    except (LLMFault, IndexError, AttributeError):
        text = ""
    if text:  # model text reaches the speaker only through the speakable guard
        text = " ".join(speakable(text, rules if rules is not None else NO_RULES)[0])
    return text or reminder_line(event)
