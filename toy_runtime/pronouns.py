"""The child's words said back by the toy: first person becomes second person ("remind me to brush my teeth" →
"I'll remind you to brush your teeth"; 提醒我给我的猫喂食 → 提醒你：给你的猫喂食).

Only first → second: a phrase already in the second person is left as it is, so flipping twice changes nothing.
"""

from __future__ import annotations

import re

_EN_BE = re.compile(r"\b(I)(\s+)(am|was)\b", re.IGNORECASE)
_EN_WORDS = {"i": "you", "me": "you", "my": "your", "mine": "yours", "myself": "yourself", "i'm": "you're",
             "i've": "you've", "i'll": "you'll", "i'd": "you'd"}
_EN_WORD = re.compile(r"\b(?:i'm|i've|i'll|i'd|i|me|my|mine|myself)\b", re.IGNORECASE)
_ZH_I = re.compile(r"我(?!们)")  # 我们 may include the toy ("we"): left as said


def _en_word(match: re.Match) -> str:
    word = match.group(0)
    flipped = _EN_WORDS[word.lower()]
    # "I" and "I'm" are capitals anywhere: only a first word (or a capitalized "My") keeps its capital
    keep_capital = word[0].isupper() and (match.start() == 0 or not word.lower().startswith("i"))
    return flipped[0].upper() + flipped[1:] if keep_capital else flipped


def second_person(text: str) -> str:
    """`text` (an English or Chinese phrase the child said) with first-person words turned to second person."""
    text = _EN_BE.sub(lambda m: f"{m.group(1)}{m.group(2)}{'are' if m.group(3).lower() == 'am' else 'were'}", text)
    text = _EN_WORD.sub(_en_word, text)
    return _ZH_I.sub("你", text)
