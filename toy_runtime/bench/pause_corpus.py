"""The pause corpus: how often a fixed hangover cuts a child off in a pause, and what it costs on complete commands.

Children pause mid-sentence ("I want… um… a story"): a hangover shorter than the pause ends the turn inside it and
the toy answers half a request. Issue 30 replaces the one fixed hangover by a prediction; this corpus is the
yardstick, run offline through the runtime's own VAD adapter and endpointer (no sound card):

- `PAUSED`: English and Mandarin child-style utterances split at natural places (after a filler, before an
  object, between clauses), joined by pauses of 300–1,200 ms — a quiet room (−65 dBFS, seeded), not digital
  silence. A *false cut-off* is an utterance whose turn ends before its last part starts.
- `COMPLETE`: short complete commands. What the hangover costs them: the endpoint's delay after the audible end.

Speech: piper joe (English) and the neural Mandarin voice (scripts/make_mandarin_voice.sh), noise off, cached as
WAV (bench/utterances.py); each part from its audible onset to its audible end.

    python -m toy_runtime.bench.pause_corpus        # the table (Markdown), every hangover
    python -m toy_runtime.bench.pause_corpus --predicted --whole-sentences   # predicted too; parts cut from
                                                    # whole sentences (bench/whole_sentences.py)
"""

from __future__ import annotations

import argparse
import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from .utterances import utterance_cache_dir

__all__ = ["PAUSED", "COMPLETE", "PAUSES_MS", "HANGOVERS_MS", "CorpusResult", "judge_utterance", "run_corpus",
           "markdown", "join_parts", "room_noise", "pauses_for"]

PAUSED: tuple[tuple[str, ...], ...] = (
    ("I want", "um", "a story about a dragon"), ("can you tell me", "why the sky is blue"),
    ("remind me to", "feed the fish"), ("my friend Tom", "has a red bike"),
    ("turn the music", "down a little"), ("what do", "elephants eat"),
    ("I drew a cat", "and a dog", "at school"), ("can we play", "hide and seek"),
    ("tell me a joke", "about a penguin"), ("how many legs", "does a spider have"),
    ("I think", "um", "dinosaurs are cool"), ("set a reminder", "for eight o'clock"),
    ("where do", "the birds sleep"), ("my favourite animal", "is the giraffe"),
    ("can you sing", "a song about the moon"), ("I had pasta", "for dinner"),
    ("what happens", "when it snows"), ("please make it", "a bit louder"),
    ("why do", "cats purr"), ("and then", "the bunny ran away"),
    ("我想听", "嗯", "一个小兔子的故事"), ("你能告诉我", "天为什么是蓝的"),
    ("提醒我", "明天喂小鱼"), ("我的朋友", "有一辆红色的自行车"),
    ("把声音", "调小一点"), ("大象", "喜欢吃什么"),
    ("我画了一只猫", "然后", "还有一只狗"), ("我们来玩", "捉迷藏吧"),
    ("给我讲一个", "企鹅的笑话"), ("蜘蛛", "有几条腿"),
    ("我觉得", "嗯", "恐龙很酷"), ("明天早上", "八点提醒我"),
    ("小鸟晚上", "在哪里睡觉"), ("我最喜欢的动物", "是长颈鹿"),
    ("你会唱", "月亮的歌吗"), ("我晚饭吃了", "面条"),
    ("下雪的时候", "会发生什么"), ("请把声音", "开大一点"),
    ("小猫", "为什么会呼噜"), ("然后", "小兔子就跑走了"),
)
COMPLETE: tuple[str, ...] = (
    "turn it down", "goodbye", "tell me a story", "what time is it", "make it louder",
    "what is your name", "sing a song", "good night", "I'm hungry", "play a game",
    "声音小一点", "再见", "讲个故事", "现在几点了", "大声一点",
    "你叫什么名字", "唱首歌", "晚安", "我饿了", "玩个游戏",
)
PAUSES_MS: tuple[int, ...] = (300, 450, 600, 750, 900, 1050, 1200)
HANGOVERS_MS: tuple[int, ...] = (200, 300, 500, 800, 1000, 1300)


@dataclass(frozen=True)
class CorpusResult:
    """One utterance at one hangover: cut in a pause (paused) and the endpoint's delay after the audible end."""

    text: str
    language: str
    kind: str  # "paused" or "complete"
    pauses_ms: tuple[int, ...]
    hangover_ms: int
    cut: bool
    end_delay_ms: float | None  # None: cut (the end came inside a pause)
    mode: str = "fixed"  # "fixed" hangover, or "predicted" (end-of-turn prediction, audio/turn_end.py)


def room_noise(samples: int, seed: int, room_dbfs: float | None = -65.0) -> np.ndarray:
    """A quiet room: seeded white noise at `room_dbfs` RMS, 16-bit (None: digital silence)."""
    if room_dbfs is None:
        return np.zeros(samples, np.int16)
    return np.random.default_rng(seed).normal(0, 32768 * 10 ** (room_dbfs / 20), samples).astype(np.int16)


def join_parts(parts: Sequence[np.ndarray], pauses_ms: Sequence[int], *, seed: int = 0, lead_ms: int = 0,
               room_dbfs: float | None = -65.0) -> tuple[np.ndarray, int]:
    """`parts` (16 kHz int16) after `lead_ms` of the room, joined by `pauses_ms` of it; and where the last part
    starts (samples). The audio ends with the last part's audible end."""
    rate = 16000
    pieces = [room_noise(rate * lead_ms // 1000, seed, room_dbfs)]
    last_start = 0
    for i, part in enumerate(parts):
        if i:
            pieces.append(room_noise(rate * pauses_ms[i - 1] // 1000, seed + i, room_dbfs))
        last_start = sum(len(p) for p in pieces)
        pieces.append(part)
    return np.concatenate(pieces), last_start


def pauses_for(index: int, parts: int) -> tuple[int, ...]:
    """The pauses of `PAUSED[index]` (it has `parts` parts): the corpus's pause lengths in turn."""
    return tuple(PAUSES_MS[(index + k) % len(PAUSES_MS)] for k in range(parts - 1))


def judge_utterance(parts: Sequence[np.ndarray], pauses_ms: Sequence[int], hangover_ms: int, *,
                    vad_factory: Callable[[], Any], seed: int = 0, frame_ms: int = 20, lead_ms: int = 300,
                    end_by_level: bool = True, room_dbfs: float | None = -65.0, turn_end: Any = None,
                    hear: Callable[[bytes], str] | None = None, early_final_ms: int = 40
                    ) -> tuple[bool, float | None]:
    """(cut, end delay ms) for `parts` (16 kHz int16, onset to audible end) joined by `pauses_ms` of a quiet room
    at `room_dbfs` (None: digital silence), through the runtime's endpointer at `hangover_ms` over a VAD from
    `vad_factory` (first warmed on the whole utterance, as a long-running runtime's VAD is).

    With a `turn_end` policy (audio/turn_end.py) and `hear` (a recognizer: PCM → transcript), each silence is
    judged as the listener does: `early_final_ms` into it, the transcript of everything so far sets its wait."""

    from ..audio.endpointer import Endpointer, EndpointerConfig, SpeechEnded
    from ..audio.level import level_db
    from ..ports.audio import AudioFrame

    rate = 16000
    joined, last_start = join_parts(parts, pauses_ms, seed=seed, lead_ms=lead_ms, room_dbfs=room_dbfs)
    audible_end_ms = len(joined) * 1000 / rate
    audio = np.concatenate([joined, room_noise(rate * 2, seed + 99, room_dbfs)])
    n = rate * frame_ms // 1000
    frames = [audio[i:i + n].tobytes() for i in range(0, len(audio) - n + 1, n)]
    vad = vad_factory()
    for pcm in frames:
        vad.is_speech(AudioFrame(pcm, rate, 0.0))
    endpointer: Endpointer = Endpointer(EndpointerConfig(hangover_ms=hangover_ms, level_end=end_by_level,
                                                         min_utterance_ms=0, preroll_ms=0))
    judged_end: float | None = None  # the speech end whose silence was judged
    for i, pcm in enumerate(frames):
        frame = AudioFrame(pcm, rate, i * frame_ms / 1000)
        speech_end = endpointer.speech_end_ms
        if (turn_end is not None and hear is not None and speech_end is not None and speech_end != judged_end
                and endpointer.position_ms - speech_end >= early_final_ms):
            judged_end = speech_end
            endpointer.hold(turn_end.wait_ms(hear(b"".join(frames[:i]))))
        for event in endpointer.process(frame, vad.is_speech(frame), frame_ms, level_db(pcm)):
            if isinstance(event, SpeechEnded):
                if event.at_ms <= last_start * 1000 / rate:
                    return True, None
                return False, event.at_ms - audible_end_ms
    return False, None


def run_corpus(cache_dir: Path, *, hangovers: Sequence[int] = HANGOVERS_MS, aggressiveness: int = 2,
               turn_end: Any = None, hear: Callable[[bytes], str] | None = None,
               early_final_ms: int = 40, whole_sentences: bool = False) -> list[CorpusResult]:
    """Every utterance of the corpus at every hangover, and with `turn_end` and `hear` also predicted (at its
    `hangover_ms`, each silence judged `early_final_ms` into it). `whole_sentences`: each paused utterance voiced
    as one sentence and cut at its pauses (bench/whole_sentences.py), not its parts voiced apart."""
    from ..adapters.webrtc_vad import WebRtcVad
    from ..language import has_cjk
    from .utterances import audible_phrase as _part
    from .whole_sentences import whole_sentence_parts

    def vad() -> Any:
        return WebRtcVad(aggressiveness)

    results = []
    for index, parts_text in enumerate(PAUSED):
        parts = (whole_sentence_parts(parts_text, cache_dir) if whole_sentences
                 else [_part(t, cache_dir) for t in parts_text])
        pauses = pauses_for(index, len(parts))
        language = "zh" if has_cjk(parts_text[0]) else "en"
        for hangover in hangovers:
            cut, delay = judge_utterance(parts, pauses, hangover, vad_factory=vad, seed=index)
            results.append(CorpusResult(" … ".join(parts_text), language, "paused", pauses, hangover, cut, delay))
        if turn_end is not None:
            cut, delay = judge_utterance(parts, pauses, int(turn_end.hangover_ms), vad_factory=vad, seed=index,
                                         turn_end=turn_end, hear=hear, early_final_ms=early_final_ms)
            results.append(CorpusResult(" … ".join(parts_text), language, "paused", pauses,
                                        int(turn_end.hangover_ms), cut, delay, "predicted"))
    for index, text in enumerate(COMPLETE):
        part = _part(text, cache_dir)
        language = "zh" if has_cjk(text) else "en"
        for hangover in hangovers:
            cut, delay = judge_utterance([part], (), hangover, vad_factory=vad, seed=1000 + index)
            results.append(CorpusResult(text, language, "complete", (), hangover, cut, delay))
        if turn_end is not None:
            cut, delay = judge_utterance([part], (), int(turn_end.hangover_ms), vad_factory=vad, seed=1000 + index,
                                         turn_end=turn_end, hear=hear, early_final_ms=early_final_ms)
            results.append(CorpusResult(text, language, "complete", (), int(turn_end.hangover_ms), cut, delay,
                                        "predicted"))
    return results


def markdown(results: Sequence[CorpusResult]) -> str:
    """Per hangover (and predicted): false cut-offs on the paused utterances (by language), the endpoint's delay on
    complete ones."""
    conditions = sorted({(r.mode, r.hangover_ms) for r in results}, key=lambda c: (c[0] == "predicted", c[1]))
    out = ["| end of turn | false cut-offs, English | false cut-offs, Mandarin | all | complete commands: end of "
           "speech → endpoint p50 / p90 |", "|---|---|---|---|---|"]
    for mode, h in conditions:
        cells = []
        for language in ("en", "zh", None):
            rows = [r for r in results if r.hangover_ms == h and r.mode == mode and r.kind == "paused"
                    and (language is None or r.language == language)]
            cuts = sum(r.cut for r in rows)
            cells.append(f"{cuts}/{len(rows)} ({cuts / len(rows):.0%})" if rows else "—")
        delays = sorted(r.end_delay_ms for r in results if r.hangover_ms == h and r.mode == mode
                        and r.kind == "complete" and r.end_delay_ms is not None)
        timing = (f"{statistics.median(delays):.0f} / {delays[int(0.9 * (len(delays) - 1))]:.0f} ms"
                  if delays else "—")
        label = f"fixed {h} ms" if mode == "fixed" else f"predicted (hangover {h} ms)"
        out.append(f"| {label} | " + " | ".join(cells) + f" | {timing} |")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cache-dir", type=Path, default=utterance_cache_dir())
    p.add_argument("--predicted", action="store_true",
                   help="also end turns by prediction ([vad] defaults), judging each silence by Whisper's transcript")
    p.add_argument("--whole-sentences", action="store_true",
                   help="voice each paused utterance as one sentence and cut it at its pauses (a prefix keeps the "
                        "melody of a sentence that goes on), not its parts voiced apart")
    args = p.parse_args(argv)
    turn_end = hear = None
    early = 40
    if args.predicted:
        from ..app.engines import build_recognizer, turn_end_policy
        from ..config import load_settings

        # the environment's TOY_… settings too (e.g. TOY_ASR__EARLY_FINAL_MS), as `run` would read them
        settings = load_settings(None, env={**os.environ, "TOY_VAD__TURN_END": "predicted",
                                            "TOY_ASR__ENGINE": "whisper"})
        turn_end, recognizer = turn_end_policy(settings), build_recognizer(settings)
        early = settings.asr.early_final_ms

        def hear(pcm: bytes) -> str:
            recognizer.start_utterance()
            for i in range(0, len(pcm), 640):
                recognizer.accept(pcm[i : i + 640])
            return recognizer.finish()

    print(markdown(run_corpus(args.cache_dir, turn_end=turn_end, hear=hear, early_final_ms=early,
                                whole_sentences=args.whole_sentences)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
