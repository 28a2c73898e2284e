"""device.volume.adjust: schema, resolver (en/zh), the child's words over proposed arguments, handler through the in-memory mixer."""

import pytest

from toy_runtime.events import EventStatus, ResultPolicy, Risk
from toy_runtime.fakes import MemoryMixer
from toy_runtime.plugins import PluginPorts, default_registry
from toy_runtime.plugins.device_volume import DEFAULT_STEP, NAME, QUESTION_EN, TOOL_NAME
from toy_runtime.ports.device import MixerError
from toy_runtime.signals import VolumeSignal

from .helpers import request, resolve, run


def test_metadata(registry):
    d = registry.get(NAME)
    assert registry.by_tool_name(TOOL_NAME) is d
    assert d.result_policy is ResultPolicy.SILENT_SUCCESS and d.risk is Risk.MEDIUM
    assert d.concurrency_class == "device.volume" and d.timeout_s == 3.0 and d.llm_fallback
    assert not d.terminal and not d.read_only and d.retries == 0


@pytest.mark.parametrize("args", [
    {"mode": "absolute", "value": 0}, {"mode": "absolute", "value": 100}, {"mode": "relative", "delta": -100},
    {"mode": "relative", "delta": 5}, {"mode": "mute"}, {"mode": "unmute"},
])
def test_schema_accepts(registry, args):
    assert registry.validator(NAME).is_valid(args)


@pytest.mark.parametrize("args", [
    {}, {"mode": "loud"}, {"mode": "absolute"}, {"mode": "absolute", "value": 101}, {"mode": "absolute", "value": -1},
    {"mode": "absolute", "value": 30, "delta": 5}, {"mode": "absolute", "value": "30"},
    {"mode": "relative"}, {"mode": "relative", "delta": 0}, {"mode": "relative", "delta": 101},
    {"mode": "relative", "delta": 10, "value": 30},
    {"mode": "mute", "value": 0}, {"mode": "unmute", "delta": 10}, {"mode": "mute", "extra": 1},
])
def test_schema_rejects_mode_specific_violations(registry, args):
    assert not registry.validator(NAME).is_valid(args)


@pytest.mark.parametrize("utterance, expected", [
    ("set the volume to 30", {"mode": "absolute", "value": 30}),
    ("volume 30", {"mode": "absolute", "value": 30}),
    ("turn it up to fifty", {"mode": "absolute", "value": 50}),
    ("turn it up by 20", {"mode": "relative", "delta": 20}),
    ("turn it down by twenty", {"mode": "relative", "delta": -20}),
    ("a bit louder", {"mode": "relative", "delta": DEFAULT_STEP}),
    ("louder", {"mode": "relative", "delta": DEFAULT_STEP}),
    ("quieter please", {"mode": "relative", "delta": -DEFAULT_STEP}),
    ("it's too loud", {"mode": "relative", "delta": -DEFAULT_STEP}),
    ("max volume", {"mode": "absolute", "value": 100}),
    ("mute", {"mode": "mute"}),
    ("sound off please", {"mode": "mute"}),
    ("unmute", {"mode": "unmute"}),
    ("把音量调到30", {"mode": "absolute", "value": 30}),
    ("音量三十", {"mode": "absolute", "value": 30}),
    ("音量调到百分之五十", {"mode": "absolute", "value": 50}),
    ("声音大一点", {"mode": "relative", "delta": DEFAULT_STEP}),
    ("大声点", {"mode": "relative", "delta": DEFAULT_STEP}),
    ("小声一点", {"mode": "relative", "delta": -DEFAULT_STEP}),
    ("调小二十", {"mode": "relative", "delta": -20}),
    ("音量加10", {"mode": "relative", "delta": 10}),
    ("声音太小了", {"mode": "relative", "delta": DEFAULT_STEP}),
    ("静音", {"mode": "mute"}),
    ("取消静音", {"mode": "unmute"}),
])
def test_resolver_understands_en_and_zh(registry, utterance, expected):
    out = resolve(registry, NAME, utterance)
    assert out.outcome == "resolved", out
    assert out.arguments == expected


def test_set_to_30_differs_from_up_by_30(registry):
    assert resolve(registry, NAME, "set it to 30").arguments == {"mode": "absolute", "value": 30}
    assert resolve(registry, NAME, "turn it up by 30").arguments == {"mode": "relative", "delta": 30}


@pytest.mark.parametrize("utterance", ["set the volume to 150", "turn it up by 0", "把音量调到一百五十"])
def test_out_of_range_is_invalid(registry, utterance):
    out = resolve(registry, NAME, utterance)
    assert out.outcome == "invalid" and out.error_code == "out_of_range"


@pytest.mark.parametrize("utterance", ["change the volume", "volume", "调一下音量"])
def test_ambiguous_asks_one_question(registry, utterance):
    out = resolve(registry, NAME, utterance)
    assert out.outcome == "incomplete" and out.missing == ("mode",)
    assert out.question
    if utterance.isascii():
        assert out.question == QUESTION_EN
    else:
        assert "0到100" in out.question


def test_relative_without_direction_asks_louder_or_quieter(registry):
    out = resolve(registry, NAME, "change it by 20")
    assert out.outcome == "incomplete" and out.missing == ("delta",)
    assert "louder or quieter" in out.question


# The child's words outrank proposed arguments (ChatAgent tool calls and EventAgent answers alike); a proposal
# fills only what the words leave open.  (utterance, proposed, expected arguments)
WORDS_WIN = [
    ("set the volume to 30", {"mode": "absolute", "value": 80}, {"mode": "absolute", "value": 30}),
    ("turn it up by 20", {"mode": "absolute", "value": "30"}, {"mode": "relative", "delta": 20}),
    ("turn it down by 20", {"mode": "relative", "delta": 20}, {"mode": "relative", "delta": -20}),
    ("louder", {"mode": "relative", "delta": -20}, {"mode": "relative", "delta": DEFAULT_STEP}),
    ("louder", {"mode": "absolute", "value": 80}, {"mode": "relative", "delta": DEFAULT_STEP}),
    ("mute", {"mode": "absolute", "value": 50}, {"mode": "mute"}),
    ("unmute please", {"mode": "mute"}, {"mode": "unmute"}),
    ("max volume", {"mode": "absolute", "value": 60}, {"mode": "absolute", "value": 100}),
    ("set the volume to 150", {"mode": "absolute", "value": 100}, None),  # out of range, never quietly replaced
    ("把音量调到30", {"mode": "absolute", "value": 80}, {"mode": "absolute", "value": 30}),
    ("调小二十", {"mode": "relative", "delta": 20}, {"mode": "relative", "delta": -20}),
    ("声音大一点", {"mode": "relative", "delta": -30}, {"mode": "relative", "delta": DEFAULT_STEP}),
    ("静音", {"mode": "unmute"}, {"mode": "mute"}),
    # gaps the words leave open are filled by the proposal
    ("louder", {"mode": "relative", "delta": 25}, {"mode": "relative", "delta": 25}),
    ("声音大一点", {"mode": "up", "delta": "25"}, {"mode": "relative", "delta": 25}),
    ("change it by 20", {"mode": "relative", "delta": 20}, {"mode": "relative", "delta": 20}),
    ("change it by 20", {"mode": "down"}, {"mode": "relative", "delta": -20}),
    ("change the volume", {"mode": "absolute", "value": 30}, {"mode": "absolute", "value": 30}),
    ("调一下音量", {"mode": "absolute", "value": 30}, {"mode": "absolute", "value": 30}),
    ("set it to 40", {"mode": "absolute"}, {"mode": "absolute", "value": 40}),
    ("turn it down", {"mode": "relative"}, {"mode": "relative", "delta": -DEFAULT_STEP}),
    ("set it to 30 or to 40", {"mode": "absolute", "value": 40}, {"mode": "absolute", "value": 40}),
    # no words at all (a structured command): the proposal stands, normalized
    ("", {"mode": "down", "delta": "20"}, {"mode": "relative", "delta": -20}),
    ("", {"value": "三十"}, {"mode": "absolute", "value": 30}),
    ("", {"mode": "up"}, {"mode": "relative", "delta": DEFAULT_STEP}),
]


@pytest.mark.parametrize("utterance, proposed, expected", WORDS_WIN)
def test_the_childs_words_win_and_proposals_fill_gaps(registry, utterance, proposed, expected):
    out = resolve(registry, NAME, utterance, proposed)
    if expected is None:
        assert out.outcome == "invalid" and out.error_code == "out_of_range"
    else:
        assert out.outcome == "resolved", out
        assert out.arguments == expected


@pytest.mark.parametrize("utterance, proposed, missing", [
    ("set it to 30 or to 40", {"mode": "absolute", "value": 80}, ("mode",)),  # a proposal never brings a new number
    ("louder or quieter", {"mode": "relative", "delta": 20}, ("mode",)),  # the child has not decided
    ("change it by 20", {"mode": "absolute", "value": 20}, ("delta",)),
])
def test_a_proposal_never_settles_what_the_words_leave_undecided(registry, utterance, proposed, missing):
    out = resolve(registry, NAME, utterance, proposed)
    assert out.outcome == "incomplete" and out.missing == missing and out.question


def test_junk_proposal_is_ignored_when_the_words_settle_everything(registry):
    assert resolve(registry, NAME, "volume 30", {"mode": "loud", "value": 30.5}).arguments == \
        {"mode": "absolute", "value": 30}
    assert resolve(registry, NAME, "change the volume", {"value": 30.5}).error_code == "invalid_arguments"


def test_provider_forbidden_field_is_a_schema_violation(registry):
    out = resolve(registry, NAME, "", {"mode": "absolute", "value": 30, "delta": 5})
    assert out.outcome == "invalid" and out.error_code == "schema_violation"


def test_provider_out_of_range_and_junk(registry):
    assert resolve(registry, NAME, "", {"mode": "absolute", "value": 150}).error_code == "out_of_range"
    assert resolve(registry, NAME, "", {"mode": "absolute", "value": 30.5}).error_code == "invalid_arguments"


# -- execution through the kernel and the in-memory mixer ---------------------------------------------

async def test_absolute_sets_level_and_publishes_signal(kernel, ports, bus):
    queue = bus.subscribe()
    outcome = await run(kernel, request(NAME, {"mode": "absolute", "value": 30}, event_id="ev_vol1"),
                        utterance="volume thirty please")
    result = outcome.results[0]
    assert result.status is EventStatus.SUCCEEDED
    assert result.result == {"level": 30, "muted": False, "previous_level": 50, "previous_muted": False}
    assert ports.mixer.changes == [("set_level", 30)]
    signal = queue.get_nowait()
    assert isinstance(signal, VolumeSignal) and (signal.level, signal.muted, signal.event_id) == (30, False, "ev_vol1")
    assert outcome.continuation.lines == () and not outcome.continuation.needs_llm  # silent success


async def test_up_by_30_is_relative_to_current_level(kernel, ports):
    ports.mixer.level = 40
    await run(kernel, request(NAME), utterance="turn it up by 30")
    assert ports.mixer.level == 70
    ports.mixer.level = 40
    await run(kernel, request(NAME, turn="t2"), utterance="set it to 30")
    assert ports.mixer.level == 30


@pytest.mark.parametrize("start, utterance, end", [(95, "turn it up by 20", 100), (5, "turn it down by 20", 0)])
async def test_relative_changes_clamp(kernel, ports, start, utterance, end):
    ports.mixer.level = start
    outcome = await run(kernel, request(NAME), utterance=utterance)
    assert outcome.results[0].result["level"] == end
    assert ports.mixer.changes == [("set_level", end)]


async def test_mute_unmute_and_level_change_unmutes(kernel, ports):
    await run(kernel, request(NAME), utterance="静音")
    assert ports.mixer.muted
    outcome = await run(kernel, request(NAME, turn="t2"), utterance="a bit louder")
    assert not ports.mixer.muted and ports.mixer.level == 50 + DEFAULT_STEP
    assert outcome.results[0].result["muted"] is False
    await run(kernel, request(NAME, {"mode": "mute"}, turn="t3"))
    await run(kernel, request(NAME, turn="t4"), utterance="unmute")
    assert ports.mixer.changes[-1] == ("set_muted", False)


async def test_invalid_or_ambiguous_requests_never_touch_the_mixer(kernel, ports):
    outcome = await run(kernel, request(NAME), utterance="set the volume to 150")
    assert outcome.results[0].status is EventStatus.REJECTED
    assert outcome.continuation.lines == ("I can only set the volume from 0 to 100.",)
    outcome = await run(kernel, request(NAME, turn="t2"), utterance="change the volume")
    assert outcome.results[0].status is EventStatus.NEEDS_CLARIFICATION
    assert outcome.continuation.lines == (QUESTION_EN,)
    assert ports.mixer.calls == []


async def test_mixer_error_becomes_structured_failure(kernel, ports, bus):
    queue = bus.subscribe()
    ports.mixer.error = MixerError("no_control", "no Master control", available=["PCM", "Speaker"])
    outcome = await run(kernel, request(NAME), utterance="volume 30")
    result = outcome.results[0]
    assert result.status is EventStatus.FAILED and result.error_code == "no_control"
    assert result.result == {"available": ["PCM", "Speaker"]}
    assert outcome.continuation.lines == ("Sorry, I couldn't change the volume.",)
    assert queue.empty()  # nothing changed, nothing announced


async def test_custom_step_and_no_signal_bus(ports):
    custom = PluginPorts(session=ports.session, mixer=MemoryMixer(level=50), calendar=ports.calendar,
                         search=ports.search, signals=None, volume_step=25)
    registry = default_registry(custom)
    assert resolve(registry, NAME, "quieter").arguments == {"mode": "relative", "delta": -25}
    from toy_runtime.events import EventKernel
    outcome = await run(EventKernel(registry), request(NAME), utterance="louder")
    assert outcome.results[0].result["level"] == 75


def test_in_a_longer_request_times_are_not_volume_numbers(registry):
    utterance = "turn it up by 20 and remind me to brush my teeth in 10 minutes"
    assert resolve(registry, NAME, utterance).arguments == {"mode": "relative", "delta": 20}
    assert resolve(registry, NAME, "把音量调到30，然后明天早上7点提醒我刷牙").arguments == {"mode": "absolute", "value": 30}
    assert resolve(registry, NAME, "the volume is 30, make it 40").outcome == "incomplete"  # two volume numbers
    assert resolve(registry, NAME, "louder, and remind me in 30 minutes to eat").arguments == \
        {"mode": "relative", "delta": DEFAULT_STEP}
    assert resolve(registry, NAME, "set the volume to 30 and remind me at 7").arguments == \
        {"mode": "absolute", "value": 30}
    assert resolve(registry, NAME, "set the volume at 10").arguments == {"mode": "absolute", "value": 10}


@pytest.mark.parametrize("utterance, clear", [
    ("set the volume to 30", True), ("mute", True), ("unmute", True), ("louder please", True), ("静音", True),
    ("声音大一点", True), ("volume 30", True),
    ("turn it up", True), ("turn it down", True),  # said to the toy: its speaker is all it can turn up or down
    ("I want more cookies", False), ("turn up the heat", False), ("change the volume", False),
    ("set the volume to 30 and tell me a story", False), ("set the volume to 150", False),
])
def test_offline_gate_only_for_short_clear_commands(registry, utterance, clear):
    from .helpers import ctx
    d = registry.get(NAME)
    assert d.gate_match(ctx(utterance)) is clear
    if clear:
        assert d.gate_reply(resolve(registry, NAME, utterance).arguments, {})


def test_doubled_verb_with_yi_is_not_the_number_one():
    from toy_runtime.plugins.device_volume import parse_utterance
    from datetime import datetime, timezone
    from toy_runtime.events import ResolveContext

    ctx = ResolveContext(utterance="把声音调一调", request_time=datetime(2026, 11, 30, tzinfo=timezone.utc),
                         timezone="UTC", locale="zh")
    resolution = parse_utterance("把声音调一调", ctx)
    assert not resolution.complete and resolution.missing == ("mode",)
