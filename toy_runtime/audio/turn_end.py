"""End-of-turn prediction: how long to wait in a silence before the child's turn is over, from what they said.

One fixed hangover is a trade: short cuts a child off in a pause ("I want… um… a story"), long makes every answer
late. The listener finishes the recognizer early in each silence (`early_final_ms`); this module reads that
transcript and picks the wait:

- `complete`: the sentence is finished by its punctuation (Whisper writes it: "Turn it down." / "What time is
  it?") or a Mandarin sentence-final particle (吗 呢 吧 了 啊), and does not end on a word that needs more →
  `complete_ms` (short: the turn ends as soon as the transcript is in);
- `unfinished`: it trails on a word that needs more — a conjunction, an article, a filler ("and", "the", "um",
  "然后", "一个", "嗯"), "I want", "what do", "tell me", "告诉我" — or on "…", "," → `unfinished_ms` (long);
- `unsure`: neither (no punctuation, no telling word; most short Mandarin commands) → `hangover_ms`, the fixed
  hangover as before.

Rules, not a model: measured on the pause corpus (docs/benchmarks.md, "Turn-taking"), Pipecat's smart-turn v3.2
audio model (8.7 MB, in the `pipecat-ai` wheel) cost ~66 ms of CPU per call here and called "sing a song" and
"讲个故事" unfinished (0.07, 0.02) and "can we play" / "please make it" finished (0.99, 0.98): it did not pay.

Pure and stdlib-only: the listener calls `classify()` on its loop.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ..language import has_cjk

__all__ = ["TurnEndPolicy", "TurnClass", "classify"]

TurnClass = Literal["complete", "unfinished", "unsure"]

# An English sentence that ends on one of these needs more words.
_EN_TRAILING = frozenset("""
and or but so because then if when while with without to of for about from into in on at by as than
the a an my your his her its our their this these those some any every no
um uh er erm hmm uhm mm like
is are was were am be been being do does did can could will would should shall may might must
want wanna gonna need think guess mean
""".split())
# …and so does one ending on these pairs (a verb waiting for its object).
_EN_TRAILING_PAIRS = frozenset({
    ("tell", "me"), ("give", "me"), ("show", "me"), ("remind", "me"), ("let", "me"), ("help", "me"), ("ask", "me"),
    ("make", "it"), ("turn", "it"), ("put", "it"), ("set", "it"),
    ("i", "like"), ("i", "love"), ("we", "like"), ("i", "have"), ("i", "had"), ("i", "saw"), ("i", "want"),
})
# The subject or object that ends these pairs is not the end (I do. / Yes I can. are sentences of their own).
_EN_ENDS_OK = frozenset({("i", "do"), ("you", "do"), ("we", "do"), ("i", "can"), ("you", "can"), ("we", "can"),
                         ("i", "am"), ("i", "will"), ("i", "did"), ("you", "are"), ("i", "think"),
                         # "so" that answers ("I think so.": held 1.2 s on Whisper's held-out transcripts)
                         ("think", "so"), ("hope", "so"), ("guess", "so"), ("said", "so"), ("do", "so")})
# Mandarin endings that need more: conjunctions, fillers, a measure word without its noun, a verb waiting for its
# object ("告诉我…", "我想听…"), "…的时候".
_ZH_TRAILING = ("然后", "还有", "而且", "因为", "所以", "但是", "可是", "就是", "那个", "这个", "如果", "和", "跟",
                "嗯", "呃", "额", "一个", "一只", "一些", "一首", "一条", "个", "的时候", "想听", "想要", "想", "要",
                "把", "在", "是", "的", "我觉得", "很", "太", "最", "更", "非常")
# A verb and its listener with nothing after: waiting for what to tell, give, remind ("你能告诉我…") — unless
# more came before ("明天早上八点提醒我" is a whole request).
_ZH_WAITING_OBJECT = ("告诉我", "提醒我", "给我", "帮我", "让我", "教我")
_ZH_SHORT = 6  # characters: "你能告诉我" waits, "明天早上八点提醒我" does not
_ZH_FINAL_PARTICLES = ("吗", "呢", "吧", "了", "啊", "呀", "嘛", "哦")
_COMPLETE_MARKS = (".", "?", "!", "。", "？", "！")
_UNFINISHED_MARKS = ("...", "…", ",", "，", "、", "-", "—", ":", "：")
_WORD = re.compile(r"[a-z0-9']+")  # digits too: "Set the volume to 30." ends on "30", not on "to"


def classify(text: str) -> TurnClass:
    """Is `text` (a transcript so far) a finished turn, one that needs more, or can't it tell?"""
    stripped = text.strip().strip("\"'“”")
    if not stripped:
        return "unsure"
    if stripped.endswith(_UNFINISHED_MARKS):
        return "unfinished"
    core = stripped.rstrip("".join(_COMPLETE_MARKS) + " ")
    if not core:
        return "unsure"
    if has_cjk(core[-1]) or has_cjk(core[-3:]):
        if core.endswith(_ZH_TRAILING) or (core.endswith(_ZH_WAITING_OBJECT) and len(core) <= _ZH_SHORT):
            return "unfinished"
        if stripped.endswith(_COMPLETE_MARKS) or core.endswith(_ZH_FINAL_PARTICLES):
            return "complete"
        return "unsure"
    words = _WORD.findall(core.lower())
    if words:
        pair = tuple(words[-2:])
        if pair not in _EN_ENDS_OK and (words[-1] in _EN_TRAILING or pair in _EN_TRAILING_PAIRS):
            return "unfinished"
    return "complete" if stripped.endswith(_COMPLETE_MARKS) else "unsure"


@dataclass(frozen=True)
class TurnEndPolicy:
    """The silence (ms from the end of speech) after which a turn ends, by what the transcript says."""

    complete_ms: float = 120.0
    hangover_ms: float = 300.0
    unfinished_ms: float = 1200.0

    def __post_init__(self) -> None:
        if not 0 < self.complete_ms <= self.hangover_ms <= self.unfinished_ms:
            raise ValueError("turn-end waits must satisfy 0 < complete_ms <= hangover_ms <= unfinished_ms")

    def wait_ms(self, text: str) -> float:
        """The wait for a turn whose transcript so far is `text`."""
        kind = classify(text)
        if kind == "complete":
            return self.complete_ms
        if kind == "unfinished":
            return self.unfinished_ms
        return self.hangover_ms
