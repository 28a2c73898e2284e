"""How a fired reminder (`schedule.triggered`) is put into words and delivered, and how the scheduler hears about
new schedules. The binding decides delivery: the toy opens an audio session and speaks it; `chat` prints it."""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Sequence

from .hostevents import HostEvent
from .ports.calendar import CalendarStore, ScheduleEntry, ScheduleRequest


def reminder_line(event: HostEvent) -> str:
    """The templated reminder sentence, in the language of the title."""
    data = event.input.data
    title = str(data.get("title") or "")
    minutes = int(data.get("reminder_minutes") or 0)
    if any("\u4e00" <= ch <= "\u9fff" for ch in title):
        return f"提醒：{minutes}分钟后{title}。" if minutes else f"提醒：该{title}了。"
    if minutes:
        return f"Reminder: in {minutes} minutes, {title}."
    return f"Reminder: it's time to {title}." if not title[:1].isupper() else f"Reminder: {title}."


async def chat_agent_line(runtime, event: HostEvent) -> str:
    """A short ChatAgent line for the reminder (when `[calendar] reminder_style = "chat_agent"`); template on fault."""
    from .agent.llm import CallStats, LLMFault

    if runtime.chat_client is None:
        return reminder_line(event)
    title = str(event.input.data.get("title") or "")
    stats = CallStats(purpose="reminder")
    messages = [{"role": "system", "content": runtime.settings.agent.persona},
                {"role": "user", "content": f"[reminder] In one short friendly sentence, tell the child it is time "
                                            f"for: {title}"}]
    try:
        response = await runtime.chat_client.complete(stats, model=runtime.settings.llm.model, messages=messages,
                                                      max_tokens=60, temperature=runtime.settings.llm.temperature)
        text = (response.choices[0].message.content or "").strip()
    except (LLMFault, IndexError, AttributeError):
        text = ""
    if text:  # model text reaches the speaker only through the speakable guard
        from .agent.speakable import NO_RULES, speakable

        chat = getattr(runtime, "chat_agent", None)
        text = " ".join(speakable(text, chat.speakable_rules if chat is not None else NO_RULES)[0])
    return text or reminder_line(event)


class ObservedCalendar:
    """A CalendarStore wrapper that tells listeners (the reminder scheduler) when schedules change."""

    def __init__(self, store: CalendarStore) -> None:
        self.store = store
        self._listeners: list[Callable[[], None]] = []

    def on_change(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in self._listeners:
            listener()

    async def create(self, request: ScheduleRequest, idempotency_key: str) -> tuple[ScheduleEntry, bool]:
        entry, created = await self.store.create(request, idempotency_key)
        if created:
            self._changed()
        return entry, created

    async def list(self, *, include_inactive: bool = False) -> Sequence[ScheduleEntry]:
        return await self.store.list(include_inactive=include_inactive)

    async def cancel(self, entry_id: str) -> bool:
        cancelled = await self.store.cancel(entry_id)
        if cancelled:
            self._changed()
        return cancelled

    def __getattr__(self, name: str) -> Any:  # due_occurrences, mark_fired, aclose… of the wrapped store
        return getattr(self.store, name)


def start_scheduler(runtime, deliver: Callable[[HostEvent], Awaitable[bool]]):
    """Start the reminder scheduler as a named task over the runtime's calendar; returns (scheduler, task)."""
    import asyncio

    from .scheduling.reminders import ReminderScheduler

    store = runtime.calendar
    scheduler = ReminderScheduler(store, runtime.clock, deliver, max_late_s=runtime.settings.calendar.max_late_s)
    if isinstance(store, ObservedCalendar):
        store.on_change(scheduler.notify_changed)
    task = asyncio.create_task(scheduler.run(), name="reminder-scheduler")
    return scheduler, task
