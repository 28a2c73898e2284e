"""`toy-runtime chat`: text turns from stdin, speech/event/turn lines to stdout."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import TextIO, cast

from .firmware_link import start_link
from .runtime import build_console, build_runtime
from ..config import Settings
from ..host.envelope import Binding, EventType, HostEvent, message_event
from ..session.items import Answer, EventOutcome, Speech, SpeechKind, TurnEnd, TurnItem
from ..signals import SessionState, StateSignal


def render(item: TurnItem, json_lines: bool) -> str | None:
    """One output line for an item (None = nothing to print)."""
    if json_lines:
        return json.dumps(item.as_json(), ensure_ascii=False)
    if isinstance(item, Speech):
        tag = {0: "toy (thinking)", 1: "toy"}.get(item.answer, "toy (after events)")
        line = f"{tag}: {item.text}"
        if item.sources:
            line += "  [sources: " + ", ".join(s["url"] for s in item.sources) + "]"
        return line
    if isinstance(item, EventOutcome):
        r = item.result
        detail = r.error or json.dumps(dict(r.result), ensure_ascii=False)[:120]
        return f"  · {r.name} {r.status.value} {json.dumps(dict(r.arguments), ensure_ascii=False)} {detail}"
    if isinstance(item, TurnEnd):
        m = item.metrics
        ttft = (m.get("first_answer") or {}).get("ttft_ms")
        return (f"  · turn {item.turn_id}: {item.llm_calls} LLM call(s), first speech "
                f"{_ms(m.get('first_speech_ms'))}, ttft {_ms(ttft)}, total {_ms(m.get('total_ms'))}"
                + (" — session ended" if item.terminated else ""))
    return None


def _ms(value: float | int | None) -> str:
    """A duration for people: "820 ms", or "n/a" when the turn had no such moment (no model call, nothing said)."""
    return "n/a" if value is None else f"{value:.0f} ms"


def _feed_lines(stream: TextIO, inbox: asyncio.Queue) -> None:
    """Put stdin's lines into `inbox` (None at the end) from a daemon thread: a blocked readline must never hold
    up the exit when the console ended the session."""
    import threading

    loop = asyncio.get_running_loop()

    def read() -> None:
        try:
            for line in iter(stream.readline, ""):
                loop.call_soon_threadsafe(inbox.put_nowait, line)
            loop.call_soon_threadsafe(inbox.put_nowait, None)
        except (RuntimeError, ValueError):
            return  # the loop closed (the session ended, Ctrl-C) or stdin was closed under us: nobody is listening

    threading.Thread(target=read, name="chat-stdin", daemon=True).start()


async def run_chat(settings: Settings, *, json_lines: bool, stdin: TextIO | None = None,
                   stdout: TextIO | None = None) -> int:
    """Run turns until a terminating turn or end of input; exit code 0."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    console = build_console(settings, "chat")  # None unless --web / [web] listen
    runtime = build_runtime(settings, audit_tap=console.audit_tap if console else None)
    if console is not None:
        console.attach(runtime)
    bridge = None
    scheduler_task = None
    try:
        await runtime.warm()  # the first reply should not pay for importing the LLM SDK
        bridge = await start_link(runtime, console)
        runner = runtime.new_turn_runner()
        # stdin is read by a daemon thread, never the loop's executor: a readline blocked at the idle prompt would
        # make asyncio.run wait for it on Ctrl-C (the command hung until Enter). Typed in the page or on stdin,
        # whichever comes; the page's "end" is like the end of input, and so is an end through the session boundary
        # from elsewhere (a remote `session.terminate` over MQTT): the console stops after the turn in progress, as
        # after "goodbye".
        inbox: asyncio.Queue[str | None] = asyncio.Queue()
        _feed_lines(stdin, inbox)
        next_line = inbox.get
        runtime.boundary.on_end(lambda session_id, reason: inbox.put_nowait(None))
        if console is not None:
            await console.start(end_session=lambda: inbox.put_nowait(None), send_message=inbox.put_nowait)
        publish = lambda state: runtime.signals.publish(  # noqa: E731 - mirrored to MQTT when connected
            StateSignal(state=state, session_id=runner.conversation.session_id))

        async def converse(event: HostEvent, binding: Binding) -> bool:
            """The console binding for `message.received`: run the turn, print its items; True = terminated."""
            terminated = False
            publish(SessionState.THINKING)
            async for item in runner.run(event):
                if isinstance(item, Speech) and runtime.signals.last.get(StateSignal) is not None \
                        and cast(StateSignal, runtime.signals.last[StateSignal]).state is not SessionState.SPEAKING:
                    publish(SessionState.SPEAKING)
                out = render(item, json_lines)
                if out is not None:
                    print(out, file=stdout, flush=True)
                if isinstance(item, TurnEnd):
                    terminated = item.terminated
            publish(SessionState.CLOSED if terminated else SessionState.LISTENING)
            return terminated

        async def remind(event: HostEvent, binding: Binding) -> bool:
            """The console binding for `schedule.triggered`: a reminder is printed as speech, not as user text."""
            from ..host.reminders import reminder_line

            speech = Speech(answer=Answer.FIRST, text=reminder_line(event), kind=SpeechKind.REMINDER)
            print(render(speech, json_lines), file=stdout, flush=True)
            runner.conversation.add_announcement(speech.text)  # the next line typed may answer it
            return True

        router = runtime.router  # one router per runtime: the MQTT link's runners are bound here too
        router.add_runner("conversation", converse)
        router.add_runner("reminder", remind)
        router.bind(Binding(binding_id="console-chat", event_types=(EventType.MESSAGE_RECEIVED,),
                            runner="conversation"))
        router.bind(Binding(binding_id="console-reminders", event_types=(EventType.SCHEDULE_TRIGGERED,),
                            runner="reminder"))
        from ..host.scheduler import start_scheduler

        _, scheduler_task = start_scheduler(runtime.calendar, runtime.clock, router.dispatch,
                                            max_late_s=runtime.settings.calendar.max_late_s)
        if not json_lines and stdin.isatty():
            mode = runtime.chat_agent.mode if runtime.chat_agent else "offline (no LLM endpoint)"
            print(f"toy-runtime chat — {mode}. Type a message; Ctrl-D to quit.", file=stdout, flush=True)
        publish(SessionState.LISTENING)
        while True:
            line = await next_line()
            if line is None:
                break
            text = line.strip()
            if not text:
                continue
            event = message_event(text, source="console", conversation_id=runner.conversation.session_id)
            if await router.dispatch(event):
                break
    finally:
        if scheduler_task is not None:
            scheduler_task.cancel()
            await asyncio.gather(scheduler_task, return_exceptions=True)
        runtime.signals.publish(StateSignal(state=SessionState.CLOSED))
        if console is not None:
            await asyncio.sleep(0.05)  # let the pages see the closed state
            await console.aclose()
        if bridge is not None:
            await asyncio.sleep(0.05)  # let the adapter mirror the last state before it stops
            await bridge.aclose()
        await runtime.aclose()
    return 0
