"""Whisper's log-mel input features, computed with numpy (the same recipe as openai/whisper and faster-whisper).

80 mel bands over a 25 ms Hann window every 10 ms at 16 kHz, log10, floored 8 decades below the peak, scaled to
roughly [-1, 1]. Whisper was trained on 30 s windows; `pad_s` pads the audio with silence to the window the caller
wants (the recognizer sizes it to the audio plus a few seconds: the encoder's cost grows with the window).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

SAMPLE_RATE_HZ = 16000
N_FFT = 400
HOP = 160
N_MELS = 80

__all__ = ["log_mel", "SAMPLE_RATE_HZ", "HOP"]


@lru_cache(maxsize=2)
def _mel_filters(n_mels: int = N_MELS) -> np.ndarray:
    """Slaney-style mel filterbank (librosa.filters.mel(sr=16000, n_fft=400, n_mels=80), htk=False, norm='slaney')."""
    fft_freqs = np.linspace(0, SAMPLE_RATE_HZ / 2, N_FFT // 2 + 1)
    min_log_hz, f_sp = 1000.0, 200.0 / 3
    min_log_mel = min_log_hz / f_sp
    logstep = np.log(6.4) / 27.0

    def hz_to_mel(hz: np.ndarray) -> np.ndarray:
        mel = hz / f_sp
        return np.where(hz >= min_log_hz, min_log_mel + np.log(np.maximum(hz, 1e-10) / min_log_hz) / logstep, mel)

    def mel_to_hz(mel: np.ndarray) -> np.ndarray:
        hz = mel * f_sp
        return np.where(mel >= min_log_mel, min_log_hz * np.exp(logstep * (mel - min_log_mel)), hz)

    mels = np.linspace(hz_to_mel(np.array(0.0)), hz_to_mel(np.array(SAMPLE_RATE_HZ / 2)), n_mels + 2)
    mel_f = mel_to_hz(mels)
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0, np.minimum(lower, upper))
    weights *= (2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels]))[:, None]  # slaney: constant energy per band
    return weights.astype(np.float32)


def log_mel(samples: np.ndarray, *, pad_s: float = 0.0) -> np.ndarray:
    """[80, frames] float32 features of float32 mono 16 kHz `samples` (in [-1, 1]), padded with `pad_s` of silence."""
    audio = np.asarray(samples, dtype=np.float32)
    if pad_s > 0:
        audio = np.concatenate([audio, np.zeros(int(pad_s * SAMPLE_RATE_HZ), dtype=np.float32)])
    padded = np.pad(audio, (N_FFT // 2, N_FFT // 2), mode="reflect")  # torch.stft(center=True)
    n_frames = 1 + (len(padded) - N_FFT) // HOP
    strides = (padded.strides[0] * HOP, padded.strides[0])
    frames = np.lib.stride_tricks.as_strided(padded, shape=(n_frames, N_FFT), strides=strides)
    window = np.hanning(N_FFT + 1)[:-1].astype(np.float32)  # periodic Hann, as torch.hann_window
    spectrum = np.fft.rfft(frames * window, axis=1)
    power = (np.abs(spectrum) ** 2).T[:, :-1]  # whisper drops the last frame
    mel = _mel_filters() @ power
    log_spec = np.log10(np.maximum(mel, 1e-10))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    return ((log_spec + 4.0) / 4.0).astype(np.float32)
