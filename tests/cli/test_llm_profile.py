"""`[llm] profile` (issue 27): one choice sets the four limits a CPU model needs; a key the owner sets still wins.

On hosted limits a local 1.5B model failed every cold first token (19-79 s > 15 s), a story was cut at the 30 s turn
deadline, and the 10 s event deadline always beat the EventAgent's fallback call.
"""

from __future__ import annotations

import argparse
import os

import pytest

from toy_runtime.app.runtime import build_runtime
from toy_runtime.cli.common import _load_with_flags, add_turn_flags
from toy_runtime.config import ConfigError, load_settings
from toy_runtime.config_profiles import PROFILE_DEFAULTS
from toy_runtime.audit import MemoryAudit
from toy_runtime.fakes.calendar import MemoryCalendarStore
from toy_runtime.fakes.device import MemoryMixer
from toy_runtime.fakes.search import StaticSearch

HOSTED = {"first_token_timeout_s": 15.0, "read_timeout_s": 8.0, "turn_deadline_s": 30.0, "batch_deadline_s": 10.0}
LOCAL = {"first_token_timeout_s": 90.0, "read_timeout_s": 15.0, "turn_deadline_s": 120.0, "batch_deadline_s": 60.0}


def limits(settings) -> dict[str, float]:
    return {"first_token_timeout_s": settings.llm.first_token_timeout_s, "read_timeout_s": settings.llm.read_timeout_s,
            "turn_deadline_s": settings.agent.turn_deadline_s, "batch_deadline_s": settings.events.batch_deadline_s}


def test_hosted_is_the_default_and_keeps_the_fields_own_defaults():
    settings = load_settings(env={})
    assert settings.llm.profile == "hosted" and limits(settings) == HOSTED


def test_the_local_profile_sets_all_four_limits():
    assert limits(load_settings(env={"TOY_LLM__PROFILE": "local"})) == LOCAL
    assert {key for _, key in PROFILE_DEFAULTS["local"]} == set(LOCAL)  # the table and this test agree


def test_a_limit_the_owner_sets_wins_over_the_profile_wherever_it_is_set(tmp_path):
    toml = tmp_path / "toy.toml"
    toml.write_text('[llm]\nprofile = "local"\nread_timeout_s = 20\n[events]\nbatch_deadline_s = 15\n')
    settings = load_settings(toml, env={"TOY_AGENT__TURN_DEADLINE_S": "45"})
    assert limits(settings) == {**LOCAL, "read_timeout_s": 20.0, "batch_deadline_s": 15.0, "turn_deadline_s": 45.0}


def test_the_environment_chooses_the_profile_over_the_file(tmp_path):
    toml = tmp_path / "toy.toml"
    toml.write_text('[llm]\nprofile = "local"\n')
    assert limits(load_settings(toml, env={"TOY_LLM__PROFILE": "hosted"})) == HOSTED
    toml.write_text('[llm]\nprofile = "hosted"\n')
    assert limits(load_settings(toml, env={"TOY_LLM__PROFILE": "local"})) == LOCAL


def test_an_unknown_profile_is_one_line_naming_the_key_and_the_choices():
    with pytest.raises(ConfigError) as caught:
        load_settings(env={"TOY_LLM__PROFILE": "cpu"})
    message = str(caught.value)
    assert message.startswith("llm.profile:") and "'hosted' or 'local'" in message and "\n" not in message


def test_the_flag_chooses_the_profile_and_a_key_in_the_file_still_wins(tmp_path, monkeypatch):
    for key in list(os.environ):
        if key.startswith("TOY_"):
            monkeypatch.delenv(key)
    toml = tmp_path / "toy.toml"
    toml.write_text('[llm]\nfirst_token_timeout_s = 40\n')
    parser = argparse.ArgumentParser()
    add_turn_flags(parser)
    settings = _load_with_flags(parser.parse_args(["--config", str(toml), "--llm-profile", "local"]))
    assert limits(settings) == {**LOCAL, "first_token_timeout_s": 40.0}
    assert limits(_load_with_flags(parser.parse_args([]))) == HOSTED


async def test_the_runtime_runs_on_the_profiles_limits(tmp_path):
    settings = load_settings(env={"TOY_STATE_DIR": str(tmp_path), "TOY_LLM__PROFILE": "local",
                                  "TOY_LLM__BASE_URL": "http://127.0.0.1:9/v1"})  # never contacted
    runtime = build_runtime(settings, mixer=MemoryMixer(), search=StaticSearch(), calendar=MemoryCalendarStore(),
                            audit=MemoryAudit())
    try:
        assert runtime.kernel.batch_deadline_s == 60.0
        assert runtime.chat_client._first_token_timeout_s == 90.0 and runtime.chat_client._read_timeout_s == 15.0
    finally:
        await runtime.aclose()
