"""The toy's MQTT wire protocol: topic layout under `toy/<device_id>/` and versioned JSON payloads.

Both ends (the runtime's bridge client and the firmware, or `firmware-sim`) use this module, so they cannot drift.
Every JSON payload carries `"v": 1`; a breaking change bumps `v`, additive optional fields do not (unknown fields are
ignored). The presence topic `online` is a plain string, not JSON, so that brokers and dashboards can show it as is.
See docs/mqtt.md for the full table with QoS and retain flags.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

PROTOCOL_VERSION: Final = 1
DEFAULT_PREFIX = "toy"
MAX_DEPTH = 32  # lists/objects inside a payload; real payloads nest 2-3 levels (command arguments)
MAX_PAYLOAD_BYTES = 64 * 1024  # the largest real payload (a command with a 200-character title) is < 1 KiB
MAX_ID_CHARS = 128  # command ids, names and actor ids
MAX_MESSAGE_CHARS = 300  # a ProtocolError's message: it goes into one log line and back to the sender

ONLINE = "online"
OFFLINE = "offline"

# Topic suffixes below `toy/<device_id>/` (wire names: never rename).
BUTTON = "button"
FIRMWARE_STATUS = "firmware/status"
STATE = "state"
VOLUME = "volume"
PRESENCE = "online"
COMMAND = "command"
COMMAND_RESULT = "command/result"

_DEVICE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")

ButtonAction = Literal["press", "release", "click", "long_press"]
LedState = Literal["idle", "listening", "thinking", "speaking", "closed"]
CommandActor = Literal["app", "fleet"]
CommandStatus = Literal["ok", "refused", "failed", "invalid"]


class ProtocolError(ValueError):
    """A payload or topic that does not follow the protocol. `code` is stable, `message` is for logs."""

    def __init__(self, code: str, message: str, *, command_id: str | None = None):
        message = clip(message, MAX_MESSAGE_CHARS)  # hostile input must not make a log line or a reply unbounded
        super().__init__(f"{code}: {message}")
        # invalid_json | payload_too_large | unsupported_version | invalid_payload | unknown_topic | invalid_device_id
        self.code = code
        self.message = message
        self.command_id = command_id  # set when a bad command still names its id, so it can be answered


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, marked with `…` when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def answerable_id(value: Any) -> str | None:
    """The id to answer a bad command with: its own when valid, its first MAX_ID_CHARS characters when longer (a
    result must itself be valid), None when there is nothing usable (not a string, empty, lone surrogates)."""
    if not isinstance(value, str) or not value or _has_surrogate(value):
        return None
    return value[:MAX_ID_CHARS]


def _has_surrogate(text: str) -> bool:
    """True if `text` holds a lone UTF-16 surrogate (JSON allows `\\ud800`; it cannot be encoded as UTF-8 again)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def validate_device_id(device_id: str) -> str:
    """Return `device_id` if it is safe as one topic level (no `/`, `+`, `#`, at most 64 chars)."""
    if not _DEVICE_ID.match(device_id):
        raise ProtocolError("invalid_device_id", f"device id {device_id!r} must match {_DEVICE_ID.pattern}")
    return device_id


@dataclass(frozen=True)
class Topics:
    """All topics of one device."""

    device_id: str
    prefix: str = DEFAULT_PREFIX

    def __post_init__(self) -> None:
        validate_device_id(self.device_id)

    def topic(self, suffix: str) -> str:
        return f"{self.prefix}/{self.device_id}/{suffix}"

    @property
    def button(self) -> str:
        return self.topic(BUTTON)

    @property
    def firmware_status(self) -> str:
        return self.topic(FIRMWARE_STATUS)

    @property
    def state(self) -> str:
        return self.topic(STATE)

    @property
    def volume(self) -> str:
        return self.topic(VOLUME)

    @property
    def online(self) -> str:
        return self.topic(PRESENCE)

    @property
    def command(self) -> str:
        return self.topic(COMMAND)

    @property
    def command_result(self) -> str:
        return self.topic(COMMAND_RESULT)

    def suffix_of(self, topic: str) -> str:
        """The suffix of one of this device's topics (`"button"`, `"firmware/status"`...), else ProtocolError."""
        head = f"{self.prefix}/{self.device_id}/"
        if not topic.startswith(head):
            raise ProtocolError("unknown_topic", f"{topic!r} is not under {head}")
        return topic[len(head):]


def _now() -> float:
    return round(time.time(), 3)


class _Payload(BaseModel):
    """Common base: version field, frozen, unknown fields ignored (additive changes stay v1)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    v: Literal[1] = PROTOCOL_VERSION


# --- firmware → runtime -------------------------------------------------------------------------------------------


class ButtonEvent(_Payload):
    """`toy/<id>/button` (QoS 1, not retained): the talk button was pressed/released/clicked/long-pressed."""

    action: ButtonAction
    button: str = Field(default="talk", min_length=1, max_length=32)
    seq: int | None = Field(default=None, ge=0)  # firmware counter, lets the runtime spot duplicates
    ts: float | None = None  # firmware clock (s since epoch) when known


class FirmwareStatus(_Payload):
    """`toy/<id>/firmware/status` (QoS 1, retained): battery and firmware facts."""

    battery_pct: int = Field(ge=0, le=100)
    charging: bool = False
    firmware_version: str = Field(default="", max_length=64)
    ts: float | None = None


# --- runtime → firmware -------------------------------------------------------------------------------------------


class StateMessage(_Payload):
    """`toy/<id>/state` (QoS 1, retained): the session/agent state the LEDs show."""

    state: LedState
    session_id: str | None = None
    ts: float = Field(default_factory=_now)


class VolumeMessage(_Payload):
    """`toy/<id>/volume` (QoS 1, retained): the device volume read back after a change."""

    level: int = Field(ge=0, le=100)
    muted: bool
    event_id: str | None = None  # the kernel event that caused the change, if any
    ts: float = Field(default_factory=_now)


# --- companion app / fleet → runtime, and the reply -----------------------------------------------------------------


class Command(_Payload):
    """`toy/<id>/command` (QoS 1, never retained): a remote request that becomes an `api.invoked` host event."""

    command_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)
    name: str = Field(min_length=1, max_length=MAX_ID_CHARS)  # e.g. "device.volume.adjust", "session.end"
    arguments: dict[str, Any] = Field(default_factory=dict)
    actor: CommandActor
    actor_id: str = Field(default="", max_length=MAX_ID_CHARS)
    ts: float | None = None
    # seconds since the epoch after which the command must not run (answered `refused`, error.code `expired`): a
    # command queued while the toy was offline must not fire hours later. Also set from an MQTT 5 message expiry.
    expires_at: float | None = Field(default=None, ge=0)

    def expired(self, now: float) -> bool:
        """True once `now` (epoch seconds) is past `expires_at`; never for a command without one."""
        return self.expires_at is not None and now > self.expires_at


class CommandErrorInfo(BaseModel):
    """Why a command did not succeed."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    code: str
    message: str = ""


class CommandResult(_Payload):
    """`toy/<id>/command/result` (QoS 1, not retained): the outcome of one command, matched by `command_id`."""

    command_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)
    status: CommandStatus
    result: dict[str, Any] = Field(default_factory=dict)
    error: CommandErrorInfo | None = None
    ts: float = Field(default_factory=_now)


Payload = ButtonEvent | FirmwareStatus | StateMessage | VolumeMessage | Command | CommandResult
P = TypeVar("P", bound=_Payload)

# Which model lives on which topic suffix.
MODELS: dict[str, type[_Payload]] = {
    BUTTON: ButtonEvent,
    FIRMWARE_STATUS: FirmwareStatus,
    STATE: StateMessage,
    VOLUME: VolumeMessage,
    COMMAND: Command,
    COMMAND_RESULT: CommandResult,
}


def encode(payload: _Payload) -> bytes:
    """The wire bytes of a payload (compact JSON, `None` fields left out)."""
    return payload.model_dump_json(exclude_none=True).encode()


def _shape(value: Any) -> tuple[int, bool]:
    """How deeply `value` nests lists and objects, and whether any key or string holds a lone surrogate
    (iterative: a hostile payload must not exhaust the stack)."""
    deepest, surrogate, stack = 0, False, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, str):
            surrogate = surrogate or _has_surrogate(item)
            continue
        if isinstance(item, dict):
            surrogate = surrogate or any(_has_surrogate(key) for key in item)
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, level)
            if level <= MAX_DEPTH:  # deeper than the bound is already a rejection: stop walking
                stack.extend((child, level + 1) for child in item)
    return deepest, surrogate


def _no_constant(name: str) -> Any:
    # NaN and ±Infinity are not JSON (RFC 8259); Python's decoder accepts them, and they would travel on into
    # events, results and audit lines that strict readers then reject.
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 decodes to inf
        raise ValueError(f"{clip(text, 32)} is out of range for a JSON number")
    return value


def _load_object(raw: bytes | str) -> dict[str, Any]:
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise ProtocolError("payload_too_large", f"payload of {len(raw)} bytes is over {MAX_PAYLOAD_BYTES}")
    try:
        data = json.loads(raw, parse_constant=_no_constant, parse_float=_finite_float)
    except RecursionError:  # e.g. 100k nested `[`: the decoder gives up at the interpreter's recursion limit
        raise ProtocolError("invalid_json", f"payload nests deeper than {MAX_DEPTH} levels") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError("invalid_json", f"payload is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ProtocolError("invalid_payload", f"payload must be a JSON object, got {type(data).__name__}")
    return data


def parse(model: type[P], raw: bytes | str) -> P:
    """Decode `raw` as `model`, or raise ProtocolError (too large, bad JSON, wrong version, invalid or unknown
    values)."""
    data = _load_object(raw)
    command_id = answerable_id(data.get("command_id"))
    depth, surrogate = _shape(data)
    if depth > MAX_DEPTH:
        # deep but decodable nesting would still recurse later (validation, audit lines, re-encoding)
        raise ProtocolError("invalid_payload", f"payload nests deeper than {MAX_DEPTH} levels", command_id=command_id)
    if surrogate:  # would fail later, when an audit line or a reply is encoded
        raise ProtocolError("invalid_payload", "a string holds a lone UTF-16 surrogate (\\ud800-\\udfff)",
                            command_id=command_id)
    if "v" not in data:
        raise ProtocolError("unsupported_version", "payload has no version field 'v'", command_id=command_id)
    if data["v"] != PROTOCOL_VERSION:
        raise ProtocolError(
            "unsupported_version",
            f"version {clip(repr(data['v']), 32)} not supported (this side speaks v{PROTOCOL_VERSION})",
            command_id=command_id,
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}" for e in exc.errors())
        raise ProtocolError("invalid_payload", f"{model.__name__}: {problems}", command_id=command_id) from None


def parse_button(raw: bytes | str) -> ButtonEvent:
    """Decode a `button` payload."""
    return parse(ButtonEvent, raw)


def parse_firmware_status(raw: bytes | str) -> FirmwareStatus:
    """Decode a `firmware/status` payload."""
    return parse(FirmwareStatus, raw)


def parse_state(raw: bytes | str) -> StateMessage:
    """Decode a `state` payload."""
    return parse(StateMessage, raw)


def parse_volume(raw: bytes | str) -> VolumeMessage:
    """Decode a `volume` payload."""
    return parse(VolumeMessage, raw)


def parse_command(raw: bytes | str) -> Command:
    """Decode a `command` payload."""
    return parse(Command, raw)


def parse_command_result(raw: bytes | str) -> CommandResult:
    """Decode a `command/result` payload."""
    return parse(CommandResult, raw)


def parse_online(raw: bytes | str) -> bool:
    """Decode the presence topic: True for "online", False for "offline"."""
    text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
    if text == ONLINE:
        return True
    if text == OFFLINE:
        return False
    raise ProtocolError("invalid_payload", f"presence must be {ONLINE!r} or {OFFLINE!r}, got {text[:32]!r}")


def parse_for_topic(topics: Topics, topic: str, raw: bytes | str) -> tuple[str, Payload | bool]:
    """Decode a message of one device by its topic: returns (suffix, payload), ProtocolError if unknown."""
    suffix = topics.suffix_of(topic)
    if suffix == PRESENCE:
        return suffix, parse_online(raw)
    model = MODELS.get(suffix)
    if model is None:
        raise ProtocolError("unknown_topic", f"no payload is defined for {topic!r}")
    return suffix, parse(model, raw)  # type: ignore[return-value]


def command_error(command_id: str, code: str, message: str, status: CommandStatus = "failed") -> CommandResult:
    """A non-ok result for `command_id`."""
    return CommandResult(command_id=command_id, status=status, error=CommandErrorInfo(code=code, message=message))
