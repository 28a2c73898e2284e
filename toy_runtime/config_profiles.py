"""`[llm] profile`: the limits a kind of model needs, as one choice instead of four numbers (issue 27).

A hosted model (an API in a data centre) answers its first token in under a second; a local CPU model spends tens of
seconds in prompt prefill on its first call (measured here: 19 s cold in `dual_agent`, 79 s in `chat_agent_tools`
on Qwen2.5-Coder-1.5B, 2 x86 cores) and its fallback call competes with the answer for one server slot. With the
hosted limits a local model fails every cold turn and the event deadline always beats its EventAgent call.

A profile only changes defaults: a key the owner sets (TOML, environment or a flag) always wins, whatever the profile.
It is applied as a settings source just above the fields' own defaults (`ProfileDefaults`), so the choice is made
once, where settings are built, and the rest of the code reads plain numbers.
"""

from __future__ import annotations

from typing import Any, Callable, Literal, Mapping

from pydantic_settings import PydanticBaseSettingsSource

LLMProfile = Literal["hosted", "local"]

# (section, key) → value, for every default a profile changes; "hosted" is the fields' own defaults.
PROFILE_DEFAULTS: dict[str, dict[tuple[str, str], float]] = {
    "hosted": {},
    "local": {
        # a cold first call prefills the whole prompt: ~460 tokens in dual_agent at 30-80 ms per token here
        ("llm", "first_token_timeout_s"): 90.0,
        # a CPU server can pause between chunks while another request (the EventAgent's) holds its one slot
        ("llm", "read_timeout_s"): 15.0,
        # a story at ~8 tokens/s takes a minute to write; 30 s cut one after six sentences
        ("agent", "turn_deadline_s"): 120.0,
        # the EventAgent's fallback call on a busy single-slot server took 7-11 s warm, more when cold
        ("events", "batch_deadline_s"): 60.0,
    },
}


def profile_defaults(profile: str) -> dict[str, dict[str, float]]:
    """The nested settings data a profile puts under the owner's own values ({} for hosted or an unknown name: the
    field's validator reports an unknown name)."""
    nested: dict[str, dict[str, float]] = {}
    for (section, key), value in PROFILE_DEFAULTS.get(profile, {}).items():
        nested.setdefault(section, {})[key] = value
    return nested


class ProfileDefaults(PydanticBaseSettingsSource):
    """A settings source that reads `llm.profile` from the sources above it and supplies that profile's defaults.

    Placed below every source the owner writes to, so any key given there wins over the profile."""

    def __init__(self, settings_cls: Any, above: tuple[Callable[[], Mapping[str, Any]], ...]) -> None:
        super().__init__(settings_cls)
        self._above = above

    def get_field_value(self, field, field_name):  # pragma: no cover - unused, __call__ returns all at once
        return None, field_name, False

    def chosen(self) -> str:
        """The profile named by the highest source that names one; "hosted" when none does."""
        for source in self._above:  # highest priority first
            llm = source().get("llm")
            if isinstance(llm, Mapping) and isinstance(llm.get("profile"), str):
                return llm["profile"].strip()
        return "hosted"

    def __call__(self) -> dict[str, Any]:
        return profile_defaults(self.chosen())
