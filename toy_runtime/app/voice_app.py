"""The voice application behind `toy-runtime run` (always-listening voice loop on the configured devices) and
`toy-runtime ptt` (laptop push-to-talk: Enter opens a session and the mic, Enter again closes it).

Start-up: the watchdog starts first; the recognizer loads off the loop (with a progress display) while the runtime
is wired; the microphone opens, and systemd hears READY: the toy is listening. The voice, the JSON-Schema checks and
the LLM SDK load right after (`_finish_loading`); an answer that needs the voice before it is loaded waits for it.
A failure there ends the service with exit 1. SIGTERM closes the audio session cleanly (acknowledged events finish)
and exits 0.
"""

from __future__ import annotations

import asyncio
import dataclasses
import contextlib
import logging
import sys
import time

from ..config import Settings
from ..errors import StartError
from ..audit.kinds import AuditKind

log = logging.getLogger("toy_runtime.run")


class _Steps:
    """Minimal model-loading progress lines (replaced by metrics.progress when present)."""

    def __init__(self, stream) -> None:
        self.stream = stream

    @contextlib.asynccontextmanager
    async def step(self, name: str):
        started = time.monotonic()
        print(f"loading {name}…", file=self.stream, flush=True)
        yield
        print(f"  {name} ready in {(time.monotonic() - started) * 1000:.0f} ms", file=self.stream, flush=True)


def _progress(stream):
    try:
        from ..metrics.progress import LoadingProgress

        return LoadingProgress(stream)
    except ImportError:
        return _Steps(stream)


async def run_voice(settings: Settings, *, keyboard: bool = False, once: bool = False,
                    stream=None, transcript: bool | None = None) -> int:
    """The voice loop on real devices. Returns the exit code.

    Push-to-talk (`[session] trigger = "button"`, or the `ptt` command) opens sessions only on a talk button or,
    with `keyboard`, on the keyboard (hold space, or Enter to start and stop); `trigger = "wake_word"` on the wake
    word (or a button); otherwise speech itself opens them. The microphone is heard through the front end of
    `[ears]` (app/ears.py). `transcript`: show the live transcript on stdout (None: when stdout is a terminal
    outside systemd).
    """
    push_to_talk = keyboard or settings.session.trigger == "button"
    wake_word = settings.session.trigger == "wake_word" and not keyboard
    from ..service.heap import tune_heap
    from ..service.startup import process_marks

    tune_heap()  # before the engines' threads: big buffers via mmap, two arenas (heap.py says why)

    marks = process_marks()
    marks.mark("settings")
    from .ears import build_ears, load_canceller, own_voice_check
    from .engines import (build_microphone, build_recognizer, build_speaker, build_synthesizer, build_vad,
                          check_voice_files, endpointer_config, turn_end_policy)
    from .runtime import build_console, build_runtime
    from ..audio.listener import Listener
    from ..speech_out.loading_voice import LoadingSynthesizer
    from ..audio.recovery import ReopeningSink, ReopeningSource
    from ..host.envelope import Binding, EventType, HostEvent
    from ..ports.speech import SpeechEngineError
    from ..host.reminders import chat_agent_line, reminder_line
    from ..host.scheduler import start_scheduler
    from ..service import ServiceNotifier, install_shutdown_handlers
    from ..session.voice_loop import CloseSession, OpenSession, Stop, deliver_host_event
    from .firmware_link import start_link
    from .transcript import Transcript, log_turn, transcript_wanted

    check_voice_files(settings)  # a wrong voice path is a start error (exit 2), even though the voice loads later
    stream = stream or sys.stderr
    view = Transcript(sys.stdout, status_line=sys.stdout.isatty()) if transcript_wanted(
        sys.stdout, flag=transcript) else None
    if view is not None:  # progress and log lines go above the transcript's status line
        stream = view.above(stream)
        view.guard_logging()
    loop_ = asyncio.get_running_loop()
    notifier = ServiceNotifier()
    mic = None

    def mic_alive() -> bool:
        # Pings only while the mic delivers (or is idle by design): a mic that stays away makes systemd restart
        # the toy after WatchdogSec instead of keeping a deaf toy "alive" forever.
        return mic is None or mic.down_s is None

    watchdog = notifier.start_watchdog(is_healthy=mic_alive)
    started = time.monotonic()
    progress = _progress(stream)
    notifier.status("loading the speech recognizer")

    async def load(name, build):
        async with progress.step(name):
            engine = await asyncio.to_thread(build, settings)
        marks.mark(name)
        return engine

    # Ready means listening: the recognizer loads (in a worker thread) while the runtime is wired here; the
    # voice, the JSON-Schema checks and the LLM SDK load right after READY (_finish_loading). Their imports need
    # the interpreter lock that the recognizer's load and the wiring hold, so loading them before READY would
    # delay it by ~0.2 s offline and ~1 s with the openai SDK (measured), for nothing a listening toy needs yet.
    loading = asyncio.create_task(load("speech recognizer", build_recognizer), name="load-recognizer")
    await asyncio.sleep(0)  # the loader thread starts before the runtime is wired (imports) on the loop
    console = build_console(settings, "ptt" if keyboard else "run")  # None unless --web / [web] listen
    runtime = build_runtime(settings, audit_tap=console.audit_tap if console else None)
    if console is not None:
        console.attach(runtime)
    marks.mark("wired")
    try:
        recognizer = await loading
    except (SpeechEngineError, ValueError) as exc:
        await runtime.aclose()
        if watchdog is not None:  # None outside systemd
            watchdog.cancel()
        raise StartError(f"speech recognizer: {exc}") from None
    voice_loaded: asyncio.Future = loop_.create_future()
    synthesizer = LoadingSynthesizer(
        voice_loaded, on_wait=lambda ms: runtime.audit.record(AuditKind.TTS_WAITED_FOR_VOICE, ms=ms))

    def report_device(event) -> None:
        fields = dataclasses.asdict(event)
        fields["event"] = fields.pop("kind")  # `kind` is the audit record's own key ("audio.device")
        runtime.audit.record(AuditKind.AUDIO_DEVICE, **fields)
        log.warning("audio %s: %s %s", event.role, event.kind, event.message)

    # unplug/replug: the mic and speaker re-open with bounded backoff instead of ending the service
    mic = ReopeningSource(lambda: build_microphone(settings), on_event=report_device)
    if console is not None:
        mic = console.metered(mic)

    def on_wake(heard_at: float) -> None:
        # the phrase is not the child's request: the utterance it was part of is dropped, what follows is heard
        listener.restart()
        runtime.audit.record(AuditKind.VOICE_WAKE_WORD, word=ears.wake.detector.name,
                             ms_after_phrase=round((time.monotonic() - heard_at) * 1000, 1))
        voice.post(OpenSession(reason="wake_word", earcon=settings.ears.earcon))

    try:
        ears_settings = settings if wake_word else _without_wake(settings)
        ears = (await asyncio.to_thread(build_ears, ears_settings, mic, on_wake=on_wake) if wake_word
                else build_ears(ears_settings, mic))  # cheap without the wake-word model
    except (ValueError, ImportError, OSError) as exc:
        await runtime.aclose()
        if watchdog is not None:
            watchdog.cancel()
        raise StartError(f"[ears]: {exc}") from None
    marks.mark("ears")
    listener = Listener(ears.source, build_vad(settings), recognizer, endpointer_config(settings),
                        early_final_ms=settings.asr.early_final_ms, turn_end=turn_end_policy(settings))
    voice = voice_loop(runtime, listener, synthesizer,
                       new_sink=lambda: ReopeningSink(lambda: build_speaker(settings, reference=ears.reference),
                                                      on_event=report_device),
                       barge_in=settings.barge_in, open_on_speech=not (push_to_talk or wake_word),
                       on_item=view.item if view else None, on_turn=view.turn if view else log_turn,
                       keep_output_open=ears.reference is not None,
                       own_voice=own_voice_check(ears))
    mode = "push-to-talk" if push_to_talk else "always"
    failures: list[str] = []

    def loading_done(task: asyncio.Task) -> None:
        if task.cancelled() or task.exception() is None:
            return
        exc = task.exception()
        failures.append(str(exc))
        # READY was already sent: end the service with a failure so systemd restarts it (and says why)
        log.error("start-up could not finish: %s", exc)
        runtime.audit.record(AuditKind.RUNTIME_FAILED, reason=f"start-up: {exc}")
        voice.post(Stop())

    link = scheduler_task = ptt_task = loading_task = wake_task = None
    shutdown = None
    try:
        async def on_button(event: HostEvent) -> None:
            action = event.input.data.get("action")
            if action in ("press", "click"):
                if push_to_talk:
                    await mic.start()
                voice.post(OpenSession(reason=f"button.{action}"))
            elif action == "long_press":
                voice.post(CloseSession(reason="button.long_press"))

        link = await start_link(runtime, console, on_button=on_button)
        if console is not None:
            await console.start(end_session=lambda: voice.post(CloseSession(reason="console")), stream=stream)

        async def remind(event: HostEvent, binding: Binding) -> bool:
            """The voice binding for `schedule.triggered`: open a session and speak the reminder."""
            if settings.calendar.reminder_style == "chat_agent":
                line = await chat_agent_line(event, runtime.chat_client, settings, runtime.speakable_rules)
            else:
                line = reminder_line(event)
            return await deliver_host_event(voice, event, line)

        runtime.router.add_runner("reminder", remind)
        runtime.router.bind(Binding(binding_id="voice-reminders", event_types=(EventType.SCHEDULE_TRIGGERED,),
                                    runner="reminder"))
        _, scheduler_task = start_scheduler(runtime.calendar, runtime.clock, runtime.router.dispatch,
                                            max_late_s=settings.calendar.max_late_s)
        # a remote `session.terminate` (or any end through the session boundary) closes the audio session too
        runtime.boundary.on_end(lambda session_id, reason: voice.post(CloseSession(reason=f"ended: {reason}")))
        await _open_mic(mic, listening=not push_to_talk)
        if ears.wake is not None:
            wake_task = asyncio.create_task(_arm_when_idle(runtime.signals, ears.wake), name="wake-word-arming")
        if view is not None:
            view.attach(runtime.signals)
        if keyboard:
            notice = view.line if view else (lambda text: print(text, file=stream, flush=True))
            ptt_task = asyncio.create_task(_push_to_talk(voice, mic, notice, settings.session.ptt_release_s),
                                           name="ptt-keyboard")
        shutdown = install_shutdown_handlers(loop_, lambda: voice.post(Stop()))
        ready_ms = (time.monotonic() - started) * 1000
        marks.mark("ready")
        runtime.audit.record(AuditKind.RUNTIME_READY, ms=round(ready_ms, 1), push_to_talk=push_to_talk,
                             since_start_ms=marks.marks["ready"], marks=marks.marks)
        notifier.ready(f"listening ({mode})")
        from .ptt_keys import keys_are_live

        hint = (("hold space to talk (or Enter to start and stop), Ctrl-D to quit" if keys_are_live(sys.stdin)
                 else "press Enter to talk, Enter again to stop, Ctrl-D to quit") if keyboard
                else "waiting for the talk button" if push_to_talk else "listening")
        if wake_word:
            hint = f"say {ears.wake.detector.name!r} to talk"
        print(f"ready in {ready_ms:.0f} ms — {hint}", file=stream, flush=True)
        async def load_voice():
            # the canceller first: it must be in place before the toy can make a sound (front_end.py)
            await load("echo canceller", lambda s: load_canceller(s, ears))
            margin = settings.ears.barge_in_margin_db if settings.ears.echo_cancellation else 0
            barge_in = ("on" + (f" ({margin:g} dB over the room)" if margin else "")) if settings.barge_in else "off"
            ears_lines = [*ears.describe(), f"barge-in {barge_in}"]
            print("ears: " + "; ".join(ears_lines), file=stream, flush=True)
            if console is not None:
                console.show_ears(ears_lines)
            return await load("voice", build_synthesizer)

        loading_task = asyncio.create_task(
            _finish_loading(runtime, load_voice, voice_loaded, notifier, marks, mode), name="finish-loading")
        loading_task.add_done_callback(loading_done)
        await voice.run(once=once)
        if failures:
            return 1
        if voice.source_ended.is_set() and not once and not (shutdown and shutdown.received):
            # the microphone went away for good: fail, so systemd's Restart=on-failure brings the service back
            log.error("the audio input ended unexpectedly")
            runtime.audit.record(AuditKind.RUNTIME_FAILED, reason="audio input ended")
            return 1
        return 0
    finally:
        notifier.stopping("closing the audio session")
        for task in (loading_task, ptt_task, scheduler_task, wake_task, watchdog):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if shutdown is not None:
            shutdown.remove()
        if view is not None:
            await view.aclose()
        await close_voice(console=console, link=link, listener=listener, mic=mic, runtime=runtime,
                          synthesizer=synthesizer)
        notifier.close()


def voice_loop(runtime, listener, synthesizer, *, new_sink, barge_in: bool, open_on_speech: bool = True,
               on_item=None, on_turn=None, keep_output_open: bool = False, own_voice=None):
    """The VoiceLoop over a runtime and a listener: the one assembly `run`, `ptt` and `demo` share (they differ in
    the sink, barge-in, what opens a session, and what watches the turns)."""
    from ..session.voice_loop import VoiceLoop

    return VoiceLoop(new_runner=runtime.new_turn_runner, listener_events=listener.events,
                     pause_listener=listener.pause, resume_listener=listener.resume, synthesizer=synthesizer,
                     new_sink=new_sink, signals=runtime.signals, audit=runtime.audit,
                     idle_timeout_s=runtime.settings.session.idle_timeout_s, barge_in=barge_in,
                     open_on_speech=open_on_speech, on_item=on_item, on_turn=on_turn,
                     keep_output_open=keep_output_open, own_voice=own_voice,
                     speculate=runtime.settings.vad.speculate and runtime.settings.vad.turn_end == "predicted",
                     resume_window_s=runtime.settings.vad.resume_ms / 1000)


async def close_voice(*, console, link, listener, mic, runtime, synthesizer) -> None:
    """The one teardown of a voice application, outermost first: the web console, the audio path, the MQTT link
    (after the last state was published), the runtime (acknowledged events finish), then the voice."""
    if console is not None:
        await console.aclose()
    await listener.aclose()
    await mic.aclose()
    if link is not None:
        await link.aclose()
    await runtime.aclose()
    close = getattr(synthesizer, "close", None)
    if close:
        close()


async def _finish_loading(runtime, load_voice, voice_loaded: asyncio.Future, notifier, marks, mode: str) -> None:
    """After READY: the voice first (an answer may be waiting for it), then the schema checks and the LLM SDK, then
    the buffers freed by loading go back to the OS (~30 MB). Records `runtime.warm` with the start-up marks."""
    from ..service.heap import trim_heap

    try:
        engine = await load_voice()
    except asyncio.CancelledError:
        voice_loaded.cancel()
        raise
    except Exception as exc:
        voice_loaded.set_exception(exc)
        raise
    voice_loaded.set_result(engine)
    await runtime.warm()
    await asyncio.to_thread(trim_heap)
    marks.mark("warm")
    runtime.audit.record(AuditKind.RUNTIME_WARM, since_start_ms=marks.marks["warm"], marks=dict(marks.marks))
    notifier.status(f"listening ({mode}); everything loaded")


def _without_wake(settings: Settings) -> Settings:
    """`settings` with the VAD as trigger: `ptt` on a profile that wakes on a word listens to the keyboard only."""
    return settings.model_copy(update={"session": settings.session.model_copy(update={"trigger": "vad"})})


async def _arm_when_idle(signals, wake) -> None:
    """The wake word is listened for exactly while no session is open (idle), whatever opened or closed it."""
    from ..signals import SessionState, StateSignal

    queue = signals.subscribe()
    try:
        while True:
            signal = await queue.get()
            if isinstance(signal, StateSignal):
                wake.arm(signal.state is SessionState.IDLE)
    finally:
        signals.unsubscribe(queue)


async def _open_mic(mic, *, listening: bool) -> None:
    """Open the microphone before READY (push-to-talk too: a missing device is a start error, not a silent hang
    at the first Enter); it keeps capturing only when `listening`."""
    from ..ports.audio import AudioDeviceError

    try:
        await mic.start()
        if not listening:
            await mic.stop()
    except AudioDeviceError as exc:
        raise StartError(f"microphone: {exc.message} (check [audio] input_device; `toy-runtime devices` lists "
                         "them, `toy-runtime doctor` checks them)") from None


async def _push_to_talk(voice, mic, notice, release_s: float = 0.25) -> None:
    """Keyboard push-to-talk (see ptt_keys): each start opens a session and the mic; end of input stops the loop."""
    from ..ports.audio import AudioDeviceError
    from .ptt_keys import HoldToTalk, drive_push_to_talk, key_presses, keys_are_live
    from ..session.voice_loop import CloseSession, OpenSession, Stop

    release = "release space or press Enter to stop" if keys_are_live(sys.stdin) else "Enter to stop"

    async def talk(on: bool) -> bool:
        if on:
            try:
                await mic.start()
            except AudioDeviceError as exc:  # said, not swallowed by a dead task: the user knows why nothing listens
                notice(f"cannot listen: {exc.message}")
                return False
            voice.post(OpenSession(reason="push_to_talk"))
            notice(f"listening… ({release})")
        else:
            await mic.stop()
            voice.post(CloseSession(reason="push_to_talk"))
            notice("stopped")
        return True

    try:
        await drive_push_to_talk(key_presses(sys.stdin), talk,
                                 machine=HoldToTalk(release_s=release_s, repeat_window_s=max(0.8, release_s)))
    finally:
        voice.post(Stop())


def serve(settings: Settings, *, keyboard: bool = False, once: bool = False, transcript: bool | None = None) -> int:
    """`run` / `ptt`: check the audio devices (a wrong name is one line and exit 2, before anything starts), log at
    `log_level` (journald priorities under systemd), then run the voice loop. Returns the exit code."""
    from ..service.logs import configure_logging
    from .preflight import check_audio_devices

    check_audio_devices(settings)
    configure_logging(settings.log_level)
    return asyncio.run(run_voice(settings, keyboard=keyboard, once=once, transcript=transcript))
