"""Connection settings of a bridge endpoint: broker URL, credentials, TLS, protocol, reconnect and queue bounds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from .protocol import DEFAULT_PREFIX, validate_device_id


@dataclass(frozen=True)
class MqttUrl:
    """A parsed `mqtt://` / `mqtts://` broker URL."""

    host: str
    port: int
    tls: bool
    username: str | None = None
    password: str | None = None


_SCHEMES = {"mqtt": (False, 1883), "tcp": (False, 1883), "mqtts": (True, 8883), "ssl": (True, 8883)}


def parse_mqtt_url(url: str) -> MqttUrl:
    """Parse `mqtt://host[:1883]` or `mqtts://host[:8883]` (TLS); `user[:password]@` is accepted but better kept
    out of URLs (pass the password from the environment instead)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise ValueError(f"MQTT URL {url!r}: scheme must be mqtt:// or mqtts://")
    if not parts.hostname:
        raise ValueError(f"MQTT URL {url!r} has no host")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"MQTT URL {url!r}: no path, query or fragment expected")
    tls, default_port = _SCHEMES[scheme]
    try:
        port = parts.port or default_port
    except ValueError:
        raise ValueError(f"MQTT URL {url!r} has an invalid port") from None
    return MqttUrl(
        host=parts.hostname,
        port=port,
        tls=tls,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
    )


class BridgeConfig(BaseModel):
    """Everything a bridge endpoint needs to connect. Build it once at start-up; secrets come from the environment."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str = "mqtt://127.0.0.1:1883"
    device_id: str
    username: str | None = None
    password: SecretStr | None = None  # pass in from env (e.g. TOY_MQTT_PASSWORD); never put it in a config file
    # or: a file holding only the password (mode 0600, e.g. provisioned per toy); read when connecting, never logged
    password_file: str | None = None
    ca_file: str | None = None  # CA bundle for mqtts:// (system CAs when None)
    cert_file: str | None = None  # client certificate (mutual TLS), optional
    key_file: str | None = None
    tls_insecure: bool = False  # skip host name verification (test brokers with self-signed certs only)
    protocol: Literal["5", "3.1.1"] = "5"
    client_id: str | None = None  # default: "<role>-<device_id>-<random>" ("<role>-<device_id>" with a session)
    session_expiry_s: int = Field(default=0, ge=0)  # >0: the broker keeps our subscriptions and queues QoS 1
    # messages for us while our connection is down (a stable client id is derived; the broker must stay up)
    topic_prefix: str = DEFAULT_PREFIX
    keepalive_s: int = Field(default=30, ge=5, le=3600)
    reconnect_min_delay_s: float = Field(default=0.5, gt=0)
    reconnect_max_delay_s: float = Field(default=30.0, gt=0)  # the backoff doubles up to this bound
    outbox_limit: int = Field(default=100, ge=1)  # non-retained publishes kept while disconnected (oldest dropped)
    inbox_limit: int = Field(default=64, ge=1)  # per inbound stream (buttons, statuses, commands; oldest dropped)
    stop_timeout_s: float = Field(default=2.0, gt=0)  # how long stop() waits for the `offline` PUBACK

    @field_validator("device_id")
    @classmethod
    def _device_id(cls, value: str) -> str:
        return validate_device_id(value)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        parse_mqtt_url(value)
        return value

    def broker(self) -> MqttUrl:
        """The parsed URL, with explicit username/password (or password_file) taking precedence over URL userinfo.
        PasswordFileError when `password_file` cannot be read."""
        parsed = parse_mqtt_url(self.url)
        password = parsed.password
        if self.password:
            password = self.password.get_secret_value()
        elif self.password_file:
            password = read_password_file(self.password_file)
        return MqttUrl(
            host=parsed.host,
            port=parsed.port,
            tls=parsed.tls,
            username=self.username or parsed.username,
            password=password,
        )


class PasswordFileError(ValueError):
    """The password file is missing, unreadable or empty (the message names the file, never its content)."""


def read_password_file(path: str) -> str:
    """The password in `path`: its first line without the line end (what `printf '%s\\n' "$pw" > file` wrote)."""
    try:
        with open(path, encoding="utf-8") as handle:
            password = handle.readline().rstrip("\r\n")
    except OSError as exc:
        raise PasswordFileError(f"cannot read the MQTT password file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise PasswordFileError(f"the MQTT password file {path} is not UTF-8 text") from None
    if not password:
        raise PasswordFileError(f"the MQTT password file {path} is empty")
    return password
