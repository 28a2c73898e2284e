"""What every command's parser shares: the help formatter, the common flags, and settings from TOML + env + flags."""

from __future__ import annotations

import argparse
from typing import Any

from ..config import Settings, load_settings, with_updates
from ..errors import CliError

__all__ = ["CliError", "Parser", "add_config", "add_turn_flags", "settings_for"]


class _HelpFormatter(argparse.HelpFormatter):
    """Help columns wide enough for every command name, and words never split at a hyphen ("start-\nup")."""

    def __init__(self, prog: str, **kwargs: Any) -> None:
        kwargs.setdefault("max_help_position", 30)
        super().__init__(prog, **kwargs)

    def add_argument(self, action: argparse.Action) -> None:
        super().add_argument(action)
        # argparse measures subcommand names without their extra indent, so a long one ("schedules") was pushed
        # onto a line of its own with its help below it
        subactions: list[argparse.Action] = getattr(action, "_get_subactions", lambda: [])()
        if action.help is not argparse.SUPPRESS and subactions:
            longest = max(len(self._format_action_invocation(a)) for a in subactions)
            self._action_max_length = max(self._action_max_length,
                                          longest + self._current_indent + self._indent_increment)

    def _split_lines(self, text: str, width: int) -> list[str]:
        import textwrap

        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        return textwrap.fill(" ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent,
                             break_on_hyphens=False)


class Parser(argparse.ArgumentParser):
    """ArgumentParser whose subcommand parsers (made with type(self)) share the help formatter."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)


def add_config(parser: argparse.ArgumentParser) -> None:
    """`--config FILE`: the TOML profile."""
    parser.add_argument("--config", metavar="FILE", help="TOML profile loaded on top of the defaults")


def add_turn_flags(parser: argparse.ArgumentParser) -> None:
    """Flags shared by every command that runs turns (chat, demo, run, ptt)."""
    add_config(parser)
    parser.add_argument("--mode", choices=["dual_agent", "chat_agent_tools"], help="tool invocation mode")
    parser.add_argument("--llm-base-url", metavar="URL", help="OpenAI-compatible endpoint (default: offline)")
    parser.add_argument("--llm-model", metavar="MODEL", help="model name sent to the endpoint ([llm] model)")
    parser.add_argument("--llm-profile", choices=["hosted", "local"],
                        help="limits that fit the model: local for a CPU model ([llm] profile, docs/local-models.md)")
    parser.add_argument("--volume-backend", choices=["memory", "alsa"],
                        help="where volume changes go: memory (no hardware) or the ALSA mixer")
    parser.add_argument("--mqtt-url", metavar="URL", help="firmware broker: mqtt://HOST:PORT or mqtts://HOST:PORT")
    parser.add_argument("--device-id", metavar="ID", help="this toy's id in the MQTT topics ([mqtt] device_id)")
    parser.add_argument("--web", metavar="HOST:PORT", help="serve the live debug console there (docs/console.md)")


def settings_for(args: argparse.Namespace) -> Settings:
    """The settings for a command: TOML + environment + flags, then every load-time check (preflight)."""
    settings = _load_with_flags(args)
    from ..app.preflight import check_settings

    check_settings(settings)
    return settings


def _load_with_flags(args: argparse.Namespace) -> Settings:
    # the profile is chosen where settings are built: it sets defaults under every key the owner wrote
    profile = getattr(args, "llm_profile", None)
    settings = load_settings(getattr(args, "config", None), **({"llm": {"profile": profile}} if profile else {}))
    updates: dict[str, dict[str, Any]] = {}
    if getattr(args, "mode", None):
        updates.setdefault("agent", {})["tool_invocation_mode"] = args.mode
    if getattr(args, "llm_base_url", None):
        updates.setdefault("llm", {})["base_url"] = args.llm_base_url
    if getattr(args, "llm_model", None):
        updates.setdefault("llm", {})["model"] = args.llm_model
    if getattr(args, "volume_backend", None):
        updates.setdefault("volume", {})["backend"] = args.volume_backend
    if getattr(args, "mqtt_url", None):
        updates.setdefault("mqtt", {})["url"] = args.mqtt_url
    if getattr(args, "device_id", None):
        updates.setdefault("mqtt", {})["device_id"] = args.device_id
    if getattr(args, "web", None):
        updates.setdefault("web", {})["listen"] = args.web
    return with_updates(settings, **updates) if updates else settings
