"""Which script a text is written in: Chinese detection, locale guessing, and what that means for spacing and tokens.

The one owner of the Unicode ranges. Three sets, each for its own question:

- Han ideographs (`has_cjk`, `guess_locale`): "did the child speak Chinese?", so we answer in Chinese.
- Dense scripts — Han plus kana and Hangul (`is_dense`): written without spaces between words or dense enough that
  a short clause says a lot; the sentence splitter uses the shorter CJK first-clause threshold for them.
- Wide characters — Han plus CJK and full-width punctuation (`WIDE_CHARS`): where spaces between words are dropped
  when a phrase is tidied up.

Stdlib only, no imports from the package: every floor may use it.
"""

from __future__ import annotations

import re

# (first, last) code points, inclusive.
_HAN = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF))  # extension A, unified, compatibility ideographs
_KANA = ((0x3040, 0x30FF),)  # hiragana, katakana
_HANGUL = ((0xAC00, 0xD7AF),)  # Hangul syllables
_CJK_PUNCTUATION = ((0x3000, 0x303F), (0xFF00, 0xFFEF))  # CJK symbols and punctuation, half/full-width forms


def _char_class(*ranges: tuple[int, int]) -> str:
    return "".join(f"\\u{first:04x}-\\u{last:04x}" for first, last in ranges)


HAN_CHARS = f"[{_char_class(*_HAN)}]"
"""A regex character class matching one Han ideograph."""

WIDE_CHARS = f"[{_char_class(*_HAN, *_CJK_PUNCTUATION)}]"
"""A regex character class matching one Han ideograph or CJK / full-width punctuation mark."""

_HAN_RE = re.compile(HAN_CHARS)
_DENSE_RE = re.compile(f"[{_char_class(*_HAN, *_KANA, *_HANGUL)}]")
_TOKEN_DENSE_RE = re.compile(f"[{_char_class(*_HAN, *_KANA, *_HANGUL, *_CJK_PUNCTUATION)}]")

TOKEN_ESTIMATOR = "approx: 1 per CJK char + 1 per 4 other chars (+4 per message)"


def has_cjk(text: str | None) -> bool:
    """True when `text` contains a Han ideograph (Chinese characters: the child spoke, or the title is, Chinese)."""
    return text is not None and _HAN_RE.search(text) is not None


def guess_locale(text: str | None) -> str:
    """'zh' when `text` contains Han ideographs, else 'en'."""
    return "zh" if has_cjk(text) else "en"


def is_dense(ch: str) -> bool:
    """True for one character of a script written without spaces between words (Han, kana, Hangul)."""
    return _DENSE_RE.fullmatch(ch) is not None


def estimate_tokens(text: str) -> int:
    """A tokenizer-free token estimate (TOKEN_ESTIMATOR): one per CJK character or CJK punctuation mark, one per four
    other characters. Used when a provider sends no usage, and by the scripted test server to report usage."""
    dense = len(_TOKEN_DENSE_RE.findall(text))
    return dense + (len(text) - dense + 3) // 4
