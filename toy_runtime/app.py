"""The composition root: the only place that knows every concrete adapter. Builds the runtime from settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .config import Settings
from .events import AuditSink, EventKernel, EventRegistry, JsonlAudit, NullAudit, TeeAudit
from .host.envelope import HostEventRouter
from .ports.calendar import Calendar
from .ports.clock import Clock, SystemClock
from .ports.device import Mixer
from .ports.search import SearchProvider
from .session.boundary import SessionBoundary
from .session.conversation import Conversation
from .session.turn import TurnRunner
from .signals import SignalBus


def build_mixer(settings: Settings) -> Mixer:
    """The configured mixer adapter."""
    if settings.volume.backend == "alsa":
        from .adapters.alsa_mixer import AlsaMixer

        return AlsaMixer(device=settings.volume.device, control=settings.volume.control)
    from .fakes.device import MemoryMixer

    return MemoryMixer(level=settings.volume.initial_level)


def build_search(settings: Settings) -> SearchProvider | None:
    """The configured search adapter, or None when search is off (the default).

    `[search] url` selects SearxNG. `provider = "static"` is the explicit demo choice of canned, example-labelled
    results; it is chosen here, in the composition root, and nowhere else.
    """
    if settings.search.url:
        from .adapters.search_factory import make_search_provider

        return make_search_provider("searxng", base_url=settings.search.url, timeout_s=settings.search.timeout_s)
    if settings.search.provider == "static":
        from .fakes.search import StaticSearch

        return StaticSearch()
    if settings.search.provider == "searxng":
        raise ValueError("search.provider is 'searxng' but search.url is not set")
    return None


def build_calendar(settings: Settings, clock: Clock) -> Calendar:
    """The SQLite store at `[calendar] path` (shared by chat, run and schedules)."""
    from .adapters.sqlite_calendar import SqliteCalendarStore

    return SqliteCalendarStore(settings.calendar_path, clock=clock)


@dataclass
class Runtime:
    """Everything a turn needs, wired once at start-up."""

    settings: Settings
    audit: AuditSink
    registry: EventRegistry
    kernel: EventKernel
    mixer: Mixer
    calendar: Calendar
    search: SearchProvider | None  # None: search is off
    signals: SignalBus
    boundary: SessionBoundary
    clock: Clock
    chat_client: Any = None
    chat_agent: Any = None
    event_agent: Any = None
    closers: list = field(default_factory=list)
    # The one door for turns that are not the child's voice: each command binds its runners here (host/).
    router: HostEventRouter = field(default_factory=HostEventRouter)
    # the debug console's taps (toy_runtime.web): None unless it is on
    turn_observer: Any = None
    before_turn: Any = None

    async def warm(self) -> None:
        """Do now what the first turn would otherwise pay for: check the event schemas, import the LLM SDK."""
        import asyncio

        await asyncio.to_thread(self.registry.verify)
        if self.chat_client is not None:
            await self.chat_client.warm()

    def new_turn_runner(self) -> TurnRunner:
        """A fresh conversation (new session id) bound to the session boundary."""
        conversation = Conversation(history_turns=self.settings.agent.history_turns)
        self.boundary.bind(conversation.session_id)
        return TurnRunner(kernel=self.kernel, chat_agent=self.chat_agent, conversation=conversation,
                          audit=self.audit, clock=self.clock, timezone=self.settings.session.timezone,
                          agent_config=self.settings.agent, event_agent=self.event_agent,
                          observer=self.turn_observer, before_turn=self.before_turn)

    async def aclose(self) -> None:
        for close in reversed(self.closers):
            try:
                result = close()
                if hasattr(result, "__await__"):
                    await result
            except Exception:  # closing must go on for the rest
                pass


def build_runtime(settings: Settings, *, mixer: Mixer | None = None, search: SearchProvider | None = None,
                  calendar: Calendar | None = None, clock: Clock | None = None,
                  audit: AuditSink | None = None, signals: SignalBus | None = None,
                  audit_tap: AuditSink | None = None) -> Runtime:
    """Wire adapters from settings; any argument given replaces the configured adapter (tests, bench).

    Without a search provider (none given, none configured) the registry holds only the unadvertised form of the
    search event: the model is not told it can search, and a search request still gets an honest line.
    """
    from .plugins import PluginPorts, default_registry

    clock = clock or SystemClock()
    closers: list = []
    if audit is None:
        if settings.audit.enabled:
            audit = JsonlAudit(settings.audit_path, max_bytes=settings.audit.max_bytes,
                               backup_count=settings.audit.backup_count)
            closers.append(audit.close)
        else:
            audit = NullAudit()
    if audit_tap is not None:  # the debug console sees every record the audit sink gets
        audit = TeeAudit(audit, audit_tap)
    signals = signals or SignalBus()
    boundary = SessionBoundary()
    mixer = mixer or build_mixer(settings)
    search = search or build_search(settings)
    if calendar is None:
        calendar = build_calendar(settings, clock)
        closers.append(getattr(calendar, "aclose", lambda: None))
    from .host.scheduler import ObservedCalendar

    calendar = ObservedCalendar(calendar)  # the reminder scheduler wakes up when a schedule is added
    ports = PluginPorts(session=boundary, mixer=mixer, calendar=calendar, search=search, signals=signals,
                        volume_step=settings.volume.step, search_results=settings.search.max_results)
    registry = default_registry(ports).subset(settings.events.enabled)

    chat_client = chat_agent = event_agent = None
    if settings.llm_online:
        from .agent.chat_agent import ChatAgent, Sampling
        from .agent.event_agent import EventAgent
        from .agent.llm import ChatClient

        llm = settings.llm
        chat_client = ChatClient(base_url=llm.base_url, api_key=llm.api_key.get_secret_value() if llm.api_key else None,
                                 connect_timeout_s=llm.connect_timeout_s, read_timeout_s=llm.read_timeout_s,
                                 first_token_timeout_s=llm.first_token_timeout_s,
                                 include_usage=llm.include_usage)
        closers.append(chat_client.aclose)
        chat_agent = ChatAgent(chat_client, registry, mode=settings.agent.tool_invocation_mode, model=llm.model,
                               persona=settings.agent.persona,
                               sampling=Sampling(llm.temperature, llm.top_p, llm.max_tokens), audit=audit,
                               first_clause_min_chars=settings.agent.first_clause_min_chars)
        event_agent = EventAgent(chat_client, model=llm.event_model or llm.model, max_tokens=llm.event_max_tokens)

    kernel = EventKernel(registry, audit=audit, fallback=event_agent, max_concurrency=settings.events.max_concurrency,
                         batch_deadline_s=settings.events.batch_deadline_s,
                         terminal_barrier_s=settings.events.terminal_barrier_s)
    return Runtime(settings=settings, audit=audit, registry=registry, kernel=kernel, mixer=mixer, calendar=calendar,
                   search=search, signals=signals, boundary=boundary, clock=clock, chat_client=chat_client,
                   chat_agent=chat_agent, event_agent=event_agent, closers=closers)


def build_console(settings: Settings, command: str):
    """The live debug console when `[web] listen` is set (`--web`), else None: nothing of it is imported then."""
    if not settings.web.listen:
        return None
    from .web.console import WebConsole

    return WebConsole(settings, command)


# -- the voice loop's engines and devices ---------------------------------------------------------------


def build_vad(settings: Settings):
    """The WebRTC VAD at the configured aggressiveness."""
    from .adapters.webrtc_vad import WebRtcVad

    return WebRtcVad(settings.vad.aggressiveness)


def endpointer_config(settings: Settings):
    """Endpointing durations from `[vad]`."""
    from .audio.endpointer import EndpointerConfig

    v = settings.vad
    return EndpointerConfig(preroll_ms=v.preroll_ms, start_ms=v.start_ms, hangover_ms=v.hangover_ms,
                            min_utterance_ms=v.min_utterance_ms, max_utterance_ms=v.max_utterance_ms,
                            no_speech_timeout_ms=v.no_speech_timeout_ms, level_end=v.end_by_level)


def build_recognizer(settings: Settings):
    """The configured ASR engine (blocking: call from a worker thread)."""
    if settings.asr.engine == "vosk":
        from .adapters.vosk_asr import VoskRecognizer

        if settings.asr.model_path is None:
            raise ValueError("asr.model_path: the vosk engine needs a model directory")
        return VoskRecognizer.shared(settings.asr.model_path, grammar=list(settings.asr.grammar or []) or None)
    from .adapters.pocketsphinx_asr import PocketsphinxRecognizer

    return PocketsphinxRecognizer(dictionary_cache=settings.cache_dir)


def check_voice_files(settings: Settings) -> None:
    """ConfigError when a configured voice or voice config file is missing (cheap: loading comes later)."""
    from .preflight import check_voice_files as check

    check(settings)


def build_synthesizer(settings: Settings):
    """Piper with the configured voice, or the bundled en_US joe voice (blocking: call from a worker thread)."""
    from .adapters.piper_tts import PiperSynthesizer

    length_scale = settings.tts.length_scale if settings.tts.length_scale != 1.0 else None
    synthesizer = PiperSynthesizer(settings.tts.voice_path, settings.tts.config_path, length_scale=length_scale,
                                   deterministic=settings.tts.deterministic,
                                   threads=settings.tts.threads or None)
    synthesizer.warm_up()  # onnxruntime's first inference is the slow one: pay it before the first answer
    return synthesizer


def build_microphone(settings: Settings):
    """The sounddevice capture stream on `[audio] input_device`."""
    from .adapters.sounddevice_io import SoundDeviceSource

    a = settings.audio
    return SoundDeviceSource(device=a.input_device, sample_rate_hz=a.sample_rate_hz, frame_ms=a.frame_ms,
                             queue_frames=a.capture_queue_frames, block_frames=a.capture_block_frames)


def build_speaker(settings: Settings):
    """The sounddevice playback stream on `[audio] output_device`."""
    from .adapters.sounddevice_io import SoundDeviceSink

    a = settings.audio
    return SoundDeviceSink(device=a.output_device, block_ms=a.output_block_ms, tail_pad_ms=a.pad_silence_ms)
