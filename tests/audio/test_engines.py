"""The real engines: WebRTC VAD, PocketSphinx, Vosk (Korean model), Piper."""

from __future__ import annotations

import asyncio
import os

import numpy as np
import pytest

from tests.audio.conftest import transcribe
from toy_runtime.audio.resample import leading_silence_samples
from toy_runtime.ports.audio import AudioFrame

# -- VAD -----------------------------------------------------------------------------------------------------


def frames(pcm: bytes, frame_ms: int = 20, rate: int = 16000) -> list[AudioFrame]:
    n = rate * frame_ms // 1000 * 2
    return [AudioFrame(pcm[i : i + n], rate, i / 2 / rate) for i in range(0, len(pcm) - n + 1, n)]


@pytest.mark.parametrize("frame_ms", [10, 20, 30])
def test_webrtc_vad_hears_piper_speech_and_not_silence(speak16k, frame_ms):
    from toy_runtime.adapters.webrtc_vad import WebRtcVad

    vad = WebRtcVad(2)
    speech = [vad.is_speech(f) for f in frames(speak16k("tell me a story about a dragon"), frame_ms)]
    quiet = [vad.is_speech(f) for f in frames(bytes(32000), frame_ms)]
    # A quiet room's steady hiss, to a fresh detector (it adapts to the noise floor it has heard).
    rng = np.random.default_rng(1)
    hiss = (rng.normal(0, 30, 3 * 16000)).astype("<i2").tobytes()
    room = WebRtcVad(2)
    noise = [room.is_speech(f) for f in frames(hiss, frame_ms)]
    assert sum(speech) / len(speech) > 0.7
    assert not any(quiet)
    assert sum(noise) / len(noise) < 0.1


def test_webrtc_vad_splits_odd_frames_and_rejects_odd_rates():
    from toy_runtime.adapters.webrtc_vad import WebRtcVad

    vad = WebRtcVad()
    assert vad.is_speech(AudioFrame(bytes(2 * 800), 16000, 0.0)) is False  # 50 ms: split into 10 ms pieces
    with pytest.raises(ValueError):
        vad.is_speech(AudioFrame(bytes(2 * 220), 22050, 0.0))
    with pytest.raises(ValueError):
        WebRtcVad(4)


# -- PocketSphinx --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("phrase", ["turn the volume up", "what is the weather today", "play some music"])
def test_pocketsphinx_transcribes_piper_speech(sphinx, speak16k, phrase):
    assert transcribe(sphinx, speak16k(phrase)) == phrase


def test_pocketsphinx_through_its_c_api_hears_what_its_own_decoder_hears(speak16k):
    """NativeDecoder is the same library with the same configuration, only called without the GIL."""
    from pocketsphinx import Decoder

    from toy_runtime.adapters.pocketsphinx_native import NativeDecoder

    pcm = speak16k("tell me a story about a dragon") + speak16k("make it a bit louder")
    heard = []
    for decoder in (Decoder(loglevel="FATAL", fwdflat=False), NativeDecoder(loglevel="FATAL", fwdflat=False)):
        decoder.start_utt()
        for i in range(0, len(pcm), 640):
            decoder.process_raw(pcm[i:i + 640], False, False)
        partial = decoder.hyp()
        decoder.end_utt()
        final = decoder.hyp()
        heard.append((getattr(partial, "hypstr", partial), getattr(final, "hypstr", final)))
    assert heard[0] == heard[1] and "story about a dragon" in heard[1][1]


def test_pocketsphinx_decodes_without_holding_the_interpreter(speak16k):
    """Another thread runs while the decoder works (pocketsphinx's own Decoder holds the GIL throughout: the
    event loop and the speaker's callbacks stalled for up to 30-40 ms at each utterance's end)."""
    import threading
    import time

    from toy_runtime.adapters.pocketsphinx_native import NativeDecoder

    noise = np.random.default_rng(0).normal(0, 3000, 16000 * 4).astype(np.int16).tobytes()  # slow to decode
    audio = noise + speak16k("play some music")
    decoder = NativeDecoder(loglevel="FATAL")
    span: list[float] = []

    def decode() -> None:
        decoder.start_utt()
        span.append(time.monotonic())
        decoder.process_raw(audio, False, False)  # one call: ~1.8 s here
        span.append(time.monotonic())
        decoder.end_utt()

    worker = threading.Thread(target=decode)
    wakeups: list[float] = []
    worker.start()
    while worker.is_alive():
        time.sleep(0.001)
        wakeups.append(time.monotonic())
    worker.join()
    inside = [t for t in wakeups if span[0] < t < span[1]]
    assert span[1] - span[0] > 0.1
    # holding the GIL, at most one switch interval (5 ms) of wake-ups could fall inside; without it, hundreds do
    # (a busy machine gives this thread fewer turns, hence a floor far below that, still far above one)
    assert len(inside) >= 10, (len(inside), span[1] - span[0])


def test_pocketsphinx_uses_the_model_inside_the_wheel(sphinx):
    import pocketsphinx

    paths = sphinx.model_paths
    assert paths["hmm"].startswith(pocketsphinx.get_model_path())
    assert paths["lm"].endswith("en-us.lm.bin")


def test_pocketsphinx_with_the_lm_dictionary_hears_the_same_and_reuses_the_cache(sphinx, speak16k, tmp_path):
    from toy_runtime.adapters.pocketsphinx_asr import PocketsphinxRecognizer

    small = PocketsphinxRecognizer(dictionary_cache=tmp_path)
    dictionary = small.model_paths["dict"]
    assert dictionary.startswith(str(tmp_path))
    entries = sum(1 for _ in open(dictionary, encoding="utf-8"))
    assert 70_000 < entries < 134_000  # the language model's words only
    for phrase in ("turn the volume up", "what is the weather today", "tell me a story about a dragon"):
        assert transcribe(small, speak16k(phrase)) == transcribe(sphinx, speak16k(phrase))
    built = os.stat(dictionary).st_mtime_ns
    assert PocketsphinxRecognizer(dictionary_cache=tmp_path).model_paths["dict"] == dictionary
    assert os.stat(dictionary).st_mtime_ns == built


def test_pocketsphinx_grammars_and_keyphrases_keep_the_whole_dictionary(tmp_path, speak16k):
    """A grammar or keyword list may name words the language model lacks: those searches get every entry."""
    from toy_runtime.adapters.pocketsphinx_asr import PocketsphinxRecognizer

    grammar = "#JSGF V1.0; grammar g; public <c> = turn it up | turn it down;"
    for options in ({"jsgf": grammar}, {"keyphrase": "hello toy", "kws_threshold": 1e-20}):
        recognizer = PocketsphinxRecognizer(dictionary_cache=tmp_path, **options)
        assert recognizer.model_paths["dict"].endswith("cmudict-en-us.dict")
        if "jsgf" in options:
            assert transcribe(recognizer, speak16k("turn it down")) == "turn it down"
    assert not list(tmp_path.iterdir())


def test_pocketsphinx_partials_reset_and_silence(sphinx, speak16k):
    pcm = bytes(32 * 300) + speak16k("what is the weather today")
    sphinx.start_utterance()
    partials = [p for p in (sphinx.accept(pcm[i : i + 640]) for i in range(0, len(pcm), 640)) if p]
    assert partials and "weather" in partials[-1]
    sphinx.reset()  # abandon it: nothing may leak into the next utterance
    assert transcribe(sphinx, bytes(32000)) == ""
    assert sphinx.finish() == ""  # no open utterance


# -- Vosk (Korean model) ---------------------------------------------------------------------------------


def feed(rec, pcm: bytes, block: int = 640) -> list[str]:
    out = []
    for i in range(0, len(pcm), block):
        p = rec.accept(pcm[i : i + block])
        if p is not None:
            out.append(p)
    return out


def hiss(ms: int, seed: int = 0) -> bytes:
    """Low room noise: Kaldi decodes digital zeros slowly and oddly, real mics are never that quiet."""
    return np.random.default_rng(seed).normal(0, 20, 16 * ms).astype("<i2").tobytes()


def test_vosk_collects_mid_stream_results_and_the_final_result(vosk_ko, speak16k):
    speech = speak16k("what is the weather today")
    # 2.5 s of pause: past the model's rule4 (2 s trailing silence), so vosk closes a segment mid-stream
    audio = hiss(300) + speech + hiss(2500, 1) + speech + hiss(300, 2)
    vosk_ko.start_utterance()
    segment_text = None
    running = ""
    for i in range(0, len(audio), 640):
        before = vosk_ko.results_mid_stream
        running = vosk_ko.accept(audio[i : i + 640]) or running
        if vosk_ko.results_mid_stream > before:
            segment_text = running  # the running transcript right after Result(): the finished segment
    transcript = vosk_ko.finish()
    assert segment_text, "vosk emitted no Result() mid-stream"
    # Both parts are kept: the mid-stream Result() and FinalResult() for the second half.
    assert transcript.startswith(segment_text) and len(transcript) > len(segment_text)
    assert "[unk]" not in transcript and "<UNK>" not in transcript


def test_vosk_reset_between_utterances_leaks_nothing(vosk_ko, speak16k):
    vosk_ko.start_utterance()
    assert feed(vosk_ko, hiss(300) + speak16k("tell me a story about a dragon"))  # partials while speaking
    vosk_ko.reset()
    vosk_ko.start_utterance()
    feed(vosk_ko, hiss(1000))
    assert vosk_ko.finish() == ""
    assert vosk_ko.finish() == ""  # finishing twice is harmless


def test_vosk_grammar_restricts_the_vocabulary(vosk_ko, speak16k):
    from toy_runtime.adapters.vosk_asr import VoskRecognizer

    assert vosk_ko.find_word("안녕") and not vosk_ko.find_word("zzzqqq")
    # A second recognizer on the same (cached) model, so the shared one keeps its open vocabulary.
    rec = VoskRecognizer(vosk_ko.model_path, grammar=["안녕", "날씨", "<UNK>"])
    rec.start_utterance()
    feed(rec, hiss(300) + speak16k("what is the weather today") + hiss(300))
    words = rec.finish().split()
    assert set(words) <= {"안녕", "날씨"}
    assert VoskRecognizer.shared(vosk_ko.model_path) is vosk_ko  # one recognizer per process


def test_vosk_missing_model_is_a_clear_error(tmp_path):
    from toy_runtime.adapters.vosk_asr import VoskRecognizer
    from toy_runtime.ports.speech import SpeechEngineError

    with pytest.raises(SpeechEngineError) as info:
        VoskRecognizer(tmp_path)
    assert info.value.code == "asr-model-missing"


# -- Piper -----------------------------------------------------------------------------------------------------


async def test_piper_yields_one_trimmed_piece_per_sentence_at_22050(voice):
    pieces = [p async for p in voice.synthesize("Hello there. How are you today?")]
    assert voice.sample_rate_hz == 22050
    assert len(pieces) == 2
    for p in pieces:
        assert p.sample_rate_hz == 22050 and len(p.pcm) > 22050  # over half a second each
        assert p.trimmed_ms >= 15  # piper's quiet lead-in was there and is gone
        lead = leading_silence_samples(p.pcm, threshold=300, keep_ms=0, sample_rate_hz=22050)
        assert lead * 1000 / 22050 <= 5.5  # what is left: the 5 ms margin


async def test_piper_untrimmed_has_leading_silence(voice):
    raw = list(voice._voice.synthesize("Hello there.", syn_config=voice._syn_config))[0].audio_int16_bytes
    lead_ms = leading_silence_samples(raw, threshold=300, keep_ms=0, sample_rate_hz=22050) * 1000 / 22050
    assert lead_ms > 15


async def test_piper_stream_can_be_abandoned_and_reused(voice):
    text = "One. Two. Three. Four."
    async for piece in voice.synthesize(text):
        break  # abandon after the first sentence
    await asyncio.sleep(0)
    again = [p async for p in voice.synthesize("Still working.")]
    assert len(again) == 1 and again[0].pcm


async def test_piper_empty_text_yields_nothing(voice):
    assert [p async for p in voice.synthesize("   ")] == []


async def test_piper_speaks_a_long_sentence_in_clause_pieces_that_say_as_much(voice):
    text = "OK, I will remind you to brush your teeth on Wednesday, December second, at eight in the morning."
    assert voice._max_chars == 60 and len(text) > 60
    pieces = [p async for p in voice.synthesize(text)]
    assert len(pieces) >= 2  # cut after clause marks, not one pass over the whole sentence
    whole = list(voice._voice.synthesize(text, syn_config=voice._syn_config))
    seconds = sum(len(p.pcm) for p in pieces) / 2 / 22050
    whole_seconds = sum(len(c.audio_int16_bytes) for c in whole) / 2 / 22050
    assert abs(seconds - whole_seconds) < 0.25 * whole_seconds  # the same words, with the commas' pauses
