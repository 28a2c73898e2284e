"""The composition root: the only place that knows every concrete adapter. Builds the runtime from settings."""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Awaitable, Callable, Iterable, cast

from ..config import ConfigError, Settings
from ..errors import StartError
from ..audit import AuditSink, JsonlAudit, NullAudit, TeeAudit
from ..events import EventDefinition, EventKernel, EventRegistry, IdempotencyStore
from ..host.envelope import HostEventRouter
from ..ports.calendar import Calendar, CalendarStorageError
from ..ports.clock import Clock, SystemClock
from ..ports.device import Mixer
from ..ports.search import SearchProvider
from ..session.boundary import SessionBoundary
from ..session.conversation import Conversation
from ..session.items import TurnItem
from ..session.turn import TurnRunner
from ..signals import SignalBus
from .disk_space import free_bytes, human_bytes, unwritable

if TYPE_CHECKING:
    import httpx

    from ..agent.chat_agent import ChatAgent
    from ..agent.event_agent import EventAgent
    from ..agent.llm import ChatClient
    from ..agent.speakable import SpeakableRules

log = logging.getLogger(__name__)


def build_mixer(settings: Settings) -> Mixer:
    """The configured mixer adapter."""
    if settings.volume.backend == "alsa":
        from ..adapters.alsa_mixer import AlsaMixer

        return AlsaMixer(device=settings.volume.device, control=settings.volume.control)
    from ..fakes.device import MemoryMixer

    return MemoryMixer(level=settings.volume.initial_level)


def build_search(settings: Settings) -> SearchProvider | None:
    """The configured search adapter, or None when search is off (`provider = "none"`).

    `[search] url` selects SearxNG; otherwise the provider, Wikipedia by default (no key needed). `provider =
    "static"` is the explicit demo choice of canned, example-labelled results; it is chosen here, in the composition
    root, and nowhere else.
    """
    from ..adapters.search_factory import make_search_provider

    search = settings.search
    if search.url:
        return make_search_provider("searxng", base_url=search.url, timeout_s=search.timeout_s)
    if search.provider == "static":
        from ..fakes.search import StaticSearch

        return StaticSearch()
    if search.provider == "searxng":
        raise ValueError("search.provider is 'searxng' but search.url is not set")
    if search.provider == "wikipedia":
        return make_search_provider("wikipedia", base_url=search.wikipedia_url, timeout_s=search.timeout_s,
                                    contact=search.contact)
    return None


def search_enabled(settings: Settings) -> bool:
    """Whether the configuration offers web search to the model (any provider but `none`, or a SearxNG url)."""
    return bool(settings.search.url) or settings.search.provider != "none"


def build_calendar(settings: Settings, clock: Clock) -> Calendar:
    """The SQLite store at `[calendar] path` (shared by chat, run and schedules)."""
    from ..adapters.sqlite_calendar import SqliteCalendarStore

    return SqliteCalendarStore(settings.calendar_path, clock=clock)


def build_idempotency(settings: Settings) -> IdempotencyStore:
    """The kernel's idempotency on the SQLite file at `[events] idempotency_path`, so a command redelivered after a
    restart applies once. A file that cannot serve is a ConfigError naming the key (one line, exit 2)."""
    from ..adapters.sqlite_idempotency import IdempotencyStoreError, SqliteResultStore

    events = settings.events
    try:
        results = SqliteResultStore(settings.idempotency_path, max_rows=events.idempotency_max_rows,
                                    ttl_s=events.idempotency_ttl_s)
    except IdempotencyStoreError as exc:
        raise ConfigError(f"events.idempotency_path: {exc} (move it away or choose another file)") from None
    return IdempotencyStore(results)


def _calendar_line(settings: Settings, exc: Exception) -> str:
    """The one line for a calendar the disk refused at start (it changed since the preflight probe)."""
    if isinstance(exc, OSError):
        return unwritable("calendar.path", settings.calendar_path, settings.calendar_path.parent, exc)
    free = free_bytes(settings.calendar_path.parent)
    return f"calendar.path: cannot be written: {exc}" + (f" ({human_bytes(free)} free)" if free is not None else "")


# what the runtime closes at the end, last opened first: a plain or an async close
Closer = Callable[[], Awaitable[None] | None]


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
    chat_client: ChatClient | None = None  # None: no LLM configured (the offline gate answers what it can)
    chat_agent: ChatAgent | None = None
    event_agent: EventAgent | None = None
    closers: list[Closer] = field(default_factory=list)
    # The one door for turns that are not the child's voice: each command binds its runners here (host/).
    router: HostEventRouter = field(default_factory=HostEventRouter)
    # the debug console's taps (toy_runtime.web): None unless it is on
    turn_observer: Callable[[str, TurnItem], None] | None = None  # (turn id, each item as it is produced)
    before_turn: Callable[[TurnRunner], None] | None = None

    @property
    def speakable_rules(self) -> SpeakableRules | None:
        """The chat agent's speakable rules (its event names, its persona), None without an LLM."""
        return self.chat_agent.speakable_rules if self.chat_agent is not None else None

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
                          gate_first_token_s=self.settings.llm.gate_first_token_s,
                          confirmation_timeout_s=self.settings.agent.confirmation_timeout_s,
                          observer=self.turn_observer, before_turn=self.before_turn)

    async def aclose(self) -> None:
        for close in reversed(self.closers):
            try:
                result = close()
                if inspect.isawaitable(result):
                    await result
            except Exception:  # closing must go on for the rest, and the failure is told
                log.warning("closing %r failed", close, exc_info=True)


def build_runtime(settings: Settings, *, mixer: Mixer | None = None, search: SearchProvider | None = None,
                  calendar: Calendar | None = None, clock: Clock | None = None,
                  audit: AuditSink | None = None, signals: SignalBus | None = None,
                  audit_tap: AuditSink | None = None, idempotency: IdempotencyStore | None = None,
                  events: Iterable[EventDefinition] = (),
                  llm_transport: httpx.AsyncBaseTransport | None = None) -> Runtime:
    """Wire adapters from settings; any argument given replaces the configured adapter (tests, bench).
    `events`: further definitions registered after the built-in ones (a test's own event, a local plugin).
    `llm_transport`: the httpx transport the LLM client sends through (None: the network; the tests' in-process
    scripted LLM, `testing/scripted_transport.py`, otherwise).

    Without a search provider (none given, none configured) the registry holds only the unadvertised form of the
    search event: the model is not told it can search, and a search request still gets an honest line.
    """
    from ..plugins import PluginPorts, default_registry

    clock = clock or SystemClock()
    closers: list[Closer] = []
    if idempotency is None:  # first: a bad file stops the start before anything else is opened
        idempotency = build_idempotency(settings)
        closers.append(getattr(idempotency.results, "aclose", lambda: None))
    if audit is None:
        if settings.audit.enabled:
            try:
                audit = JsonlAudit(settings.audit_path, max_bytes=settings.audit.max_bytes,
                                   backup_count=settings.audit.backup_count)
            except OSError as exc:  # the disk changed since the preflight probe: still one line, never a traceback
                raise StartError(unwritable("audit.path", settings.audit_path, settings.audit_path.parent, exc)) \
                    from None
            closers.append(audit.close)
        else:
            audit = NullAudit()
    if audit_tap is not None:  # the debug console sees every record the audit sink gets
        audit = TeeAudit(audit, audit_tap)
    signals = signals or SignalBus()
    boundary = SessionBoundary()
    mixer = mixer or build_mixer(settings)
    if search is None:
        search = build_search(settings)
        if search is not None and hasattr(search, "aclose"):
            closers.append(search.aclose)  # the adapter's HTTP client is ours to close
    if calendar is None:
        try:
            calendar = build_calendar(settings, clock)
        except (CalendarStorageError, OSError) as exc:
            if isinstance(audit, JsonlAudit):  # the start ends here: its file is not left open
                audit.close()
            raise StartError(_calendar_line(settings, exc)) from None
        closers.append(getattr(calendar, "aclose", lambda: None))
    from ..host.scheduler import ObservedCalendar

    calendar = ObservedCalendar(calendar)  # the reminder scheduler wakes up when a schedule is added
    ports = PluginPorts(session=boundary, mixer=mixer, calendar=calendar, search=search, signals=signals,
                        volume_step=settings.volume.step, search_results=settings.search.max_results,
                        dayparts=settings.calendar.dayparts())
    registry = default_registry(ports).subset(settings.events.enabled)
    if events:
        registry = EventRegistry([*registry, *events])  # a copy: the subset may be the shared default registry

    chat_client = chat_agent = event_agent = None
    if settings.llm_online:
        from ..agent.chat_agent import ChatAgent, Sampling
        from ..agent.event_agent import EventAgent
        from ..agent.llm import ChatClient

        llm = settings.llm
        chat_client = ChatClient(base_url=cast(str, llm.base_url),  # set: that is what llm_online means
                                 api_key=llm.api_key.get_secret_value() if llm.api_key else None,
                                 connect_timeout_s=llm.connect_timeout_s, read_timeout_s=llm.read_timeout_s,
                                 first_token_timeout_s=llm.first_token_timeout_s,
                                 include_usage=llm.include_usage, transport=llm_transport)
        closers.append(chat_client.aclose)
        chat_agent = ChatAgent(chat_client, registry, mode=settings.agent.tool_invocation_mode, model=llm.model,
                               persona=settings.agent.persona,
                               sampling=Sampling(llm.temperature, llm.top_p, llm.max_tokens), audit=audit,
                               first_clause_min_chars=settings.agent.first_clause_min_chars,
                               tools_reply_first=settings.agent.tools_reply_first)
        event_agent = EventAgent(chat_client, model=llm.event_model or llm.model, max_tokens=llm.event_max_tokens)

    kernel = EventKernel(registry, audit=audit, fallback=event_agent, idempotency=idempotency,
                         max_concurrency=settings.events.max_concurrency,
                         batch_deadline_s=settings.events.batch_deadline_s,
                         terminal_barrier_s=settings.events.terminal_barrier_s)
    return Runtime(settings=settings, audit=audit, registry=registry, kernel=kernel, mixer=mixer, calendar=calendar,
                   search=search, signals=signals, boundary=boundary, clock=clock, chat_client=chat_client,
                   chat_agent=chat_agent, event_agent=event_agent, closers=closers)


def build_console(settings: Settings, command: str):
    """The live debug console when `[web] listen` is set (`--web`), else None: nothing of it is imported then."""
    if not settings.web.listen:
        return None
    from ..web.console import WebConsole

    return WebConsole(settings, command)


def offline_registry(settings: Settings, *, as_configured: bool = False) -> EventRegistry:
    """The event registry over in-memory ports: for inspecting and resolving (`toy-runtime events`) and for the
    doctor's probe, never for side effects. `as_configured`: the enabled events only, with web search advertised
    exactly when the configuration enables a provider (what a real turn's model would be offered)."""
    from ..fakes.calendar import MemoryCalendarStore
    from ..fakes.device import MemoryMixer
    from ..fakes.search import StaticSearch
    from ..plugins import PluginPorts, default_registry

    searching = not as_configured or search_enabled(settings)
    ports = PluginPorts(session=SessionBoundary(), mixer=MemoryMixer(), calendar=MemoryCalendarStore(),
                        search=StaticSearch() if searching else None, signals=None, volume_step=settings.volume.step,
                        search_results=settings.search.max_results, dayparts=settings.calendar.dayparts())
    registry = default_registry(ports)
    return registry.subset(settings.events.enabled) if as_configured else registry
