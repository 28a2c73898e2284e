"""Is this utterance a plain yes or a plain no? English and Chinese, for answering a confirmation question.

Strict on purpose: the whole utterance must be answer words (and a few fillers such as "please", 嗯, 吧); anything
else ("yes, and tell me a story", "I don't know", "是什么") is not an answer, and the caller treats it as a new topic.
Both a yes and a no in one utterance ("no, do it") is no answer either: a held event never runs on a doubtful yes.
Pure and stdlib only; it knows no event.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

Answer = Literal["yes", "no"]

_EN_YES = ("yes", "yeah", "yep", "yup", "yea", "sure", "sure thing", "okay", "ok", "alright", "all right",
           "do it", "go ahead", "of course", "please do", "yes please", "right", "correct", "absolutely")
_EN_NO = ("no", "nope", "nah", "don't", "dont", "do not", "don't do it", "do not do it", "don't do that",
          "dont do it", "cancel", "cancel it", "cancel that", "stop", "never mind", "nevermind", "not now",
          "no way", "no thanks", "no thank you")
_EN_FILLER = ("please", "thanks", "thank you", "um", "uh", "oh", "well", "hmm", "then")

_ZH_YES = ("好", "好的", "是", "是的", "对", "对的", "可以", "行", "要", "确定", "当然", "没问题", "做吧", "好啊")
_ZH_NO = ("不", "不要", "别", "算了", "取消", "不用", "不是", "不对", "不可以", "不行", "不了", "别做", "不要做",
          "先不要", "不做", "不用了")
_ZH_FILLER = ("嗯", "呃", "哦", "噢", "啊", "吧", "呀", "了", "呢", "嘛", "啦", "请")

MAX_ANSWER_CHARS = 40  # longer than any yes or no with its fillers: read no further (the text is untrusted input)
_EN_TOKEN = re.compile(r"[a-z']+")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_PUNCTUATION = re.compile(r"[\s,.;:!?~，。；：！？、…]+")


def _table(yes: tuple[str, ...], no: tuple[str, ...], filler: tuple[str, ...], split) -> dict[tuple, str]:
    table: dict[tuple, str] = {}
    for kind, words in (("filler", filler), ("no", no), ("yes", yes)):
        for word in words:
            table[tuple(split(word))] = kind
    return table


_EN = _table(_EN_YES, _EN_NO, _EN_FILLER, str.split)
_ZH = _table(_ZH_YES, _ZH_NO, _ZH_FILLER, list)


def _kinds(units: list[str], table: dict[tuple, str]) -> set[str] | None:
    """The kinds of the phrases that spell `units`, longest phrase first; None when a unit is no answer word."""
    longest = max(len(key) for key in table)
    kinds: set[str] = set()
    i = 0
    while i < len(units):
        for size in range(min(longest, len(units) - i), 0, -1):
            kind = table.get(tuple(units[i:i + size]))
            if kind is not None:
                kinds.add(kind)
                i += size
                break
        else:
            return None
    return kinds


def read_answer(text: str) -> Answer | None:
    """"yes" or "no" when the whole utterance is one, else None (a new topic, or a doubtful answer)."""
    if len(text or "") > MAX_ANSWER_CHARS:
        return None
    s = unicodedata.normalize("NFKC", text or "").lower().replace("’", "'")
    if _HAN.search(s):
        if re.search(r"[a-z]", s):
            return None  # mixed scripts: not a plain answer
        units = list(_PUNCTUATION.sub("", s))
        kinds = _kinds(units, _ZH)
    else:
        stripped = _PUNCTUATION.sub(" ", s)
        units = _EN_TOKEN.findall(stripped)
        if len(" ".join(units)) != len(stripped.strip()):
            return None  # digits or symbols: more than an answer
        kinds = _kinds(units, _EN)
    if not kinds:
        return None
    kinds.discard("filler")
    return kinds.pop() if len(kinds) == 1 else None  # type: ignore[return-value]
