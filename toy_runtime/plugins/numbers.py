"""English and Chinese number words → integers, for the deterministic resolvers.

Understands digits ("30", full-width "３０"), English words ("thirty", "twenty five", "twenty-five",
"a hundred", "one hundred and five") and Chinese numerals ("三十", "二十", "两", "十五", "一百", "一百零五",
colloquial "一百二" = 120), plus percent forms ("50%", "fifty percent", "百分之五十") which give the bare number.
Values are non-negative integers below 10 000; signs are the caller's business.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

_EN_UNITS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
}
_EN_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
            "ninety": 90}
_EN_WORDS = "|".join(sorted([*_EN_UNITS, *_EN_TENS, "hundred"], key=len, reverse=True))

_ZH_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_ZH_UNITS = {"十": 10, "百": 100, "千": 1000}
ZH_NUMERAL_CHARS = "".join(_ZH_DIGITS) + "".join(_ZH_UNITS)

#: Regex source for one number token (digits, an English word run, or Chinese numerals), to embed in other patterns.
NUMBER_PATTERN = (
    rf"(?:\d+|(?:\ba\s+hundred\b|\b(?:{_EN_WORDS})\b)(?:[\s-]+(?:and[\s-]+)?(?:{_EN_WORDS})\b)*"
    rf"|[{ZH_NUMERAL_CHARS}]+)"
)
_TOKEN = re.compile(NUMBER_PATTERN, re.IGNORECASE)
_PERCENT_EN = re.compile(r"\s*(?:%|per\s?cent\b)", re.IGNORECASE)


def normalize(text: str) -> str:
    """NFKC-normalize (full-width digits and punctuation become ASCII) and lower-case ASCII letters."""
    return unicodedata.normalize("NFKC", text).lower()


@dataclass(frozen=True)
class NumberSpan:
    """A number found in a text: its value and the [start, end) character span it covered."""

    value: int
    start: int
    end: int


def _en_below_100(words: list[str], i: int) -> tuple[int | None, int]:
    if i < len(words) and words[i] in _EN_TENS:
        value = _EN_TENS[words[i]]
        i += 1
        if i < len(words) and words[i] in _EN_UNITS and 1 <= _EN_UNITS[words[i]] <= 9:
            value += _EN_UNITS[words[i]]
            i += 1
        return value, i
    if i < len(words) and words[i] in _EN_UNITS:
        return _EN_UNITS[words[i]], i + 1
    return None, i


def _parse_en_prefix(words: list[str]) -> tuple[int | None, int]:
    """Longest valid English number at the start of `words`: (value, words consumed)."""
    head: int | None
    if len(words) >= 2 and words[0] == "a" and words[1] == "hundred":
        head, i = 1, 1
    else:
        head, i = _en_below_100(words, 0)
        if head is None:
            return None, 0
        if not (i < len(words) and words[i] == "hundred" and 1 <= head <= 9):
            return head, i
    value = head * 100
    i += 1  # past "hundred"
    j = i + 1 if i < len(words) and words[i] == "and" else i
    rest, k = _en_below_100(words, j)
    if rest:
        return value + rest, k
    return value, i


def _parse_zh(text: str) -> int | None:
    if not text or any(ch not in _ZH_DIGITS and ch not in _ZH_UNITS for ch in text):
        return None
    if not any(ch in _ZH_UNITS for ch in text):
        # digit-by-digit reading ("二零二六") or a single digit ("两")
        return int("".join(str(_ZH_DIGITS[ch]) for ch in text))
    total, digit, last_unit, zero_seen = 0, None, None, False
    for ch in text:
        if ch in _ZH_DIGITS:
            if _ZH_DIGITS[ch] == 0:
                zero_seen = True
                continue
            if digit is not None:
                return None  # two digits in a row inside a unit number
            digit = _ZH_DIGITS[ch]
            continue
        unit = _ZH_UNITS[ch]
        if last_unit is not None and unit >= last_unit:
            return None
        if digit is None:
            if unit == 10:  # "十五" = 15, "一百一十" handled by the digit path
                digit = 1
            else:
                return None
        total += digit * unit
        digit, last_unit, zero_seen = None, unit, False
    if digit is not None:
        # colloquial "一百二" = 120, "两千五" = 2500; after 零 the digit is literal ("一百零五" = 105)
        if last_unit is not None and last_unit >= 100 and not zero_seen:
            total += digit * (last_unit // 10)
        else:
            total += digit
    return total


def parse_number(text: str) -> int | None:
    """The value of `text` when the whole text is one number (optionally a percentage), else None."""
    s = normalize(text).strip()
    s = _PERCENT_EN.sub("", s).strip()
    if s.startswith("百分之"):
        s = s[3:].strip()
    if not s:
        return None
    if s.isdigit():
        return int(s)
    if re.fullmatch(f"[{ZH_NUMERAL_CHARS}]+", s):
        return _parse_zh(s)
    words = re.split(r"[\s-]+", s)
    value, used = _parse_en_prefix(words)
    if value is None or used != len(words):
        return None
    return value


def find_numbers(text: str) -> list[NumberSpan]:
    """Every number in `text` (already normalized or not — spans refer to `normalize(text)`), in order."""
    s = normalize(text)
    found: list[NumberSpan] = []
    for match in _TOKEN.finditer(s):
        token = match.group(0)
        start = match.start()
        if token[0].isdigit():
            found.append(NumberSpan(int(token), start, match.end()))
            continue
        if token[0] in _ZH_DIGITS or token[0] in _ZH_UNITS:
            value = _parse_zh(token)
            if value is not None:
                found.append(NumberSpan(value, start, match.end()))
            continue
        # an English word run may hold several numbers ("seven thirty"); take them greedily
        words = [(m.group(0), m.start()) for m in re.finditer(r"[a-z]+", token)]
        i = 0
        while i < len(words):
            value, used = _parse_en_prefix([w for w, _ in words[i:]])
            if value is None or used == 0:
                i += 1
                continue
            last_word, last_pos = words[i + used - 1]
            found.append(NumberSpan(value, start + words[i][1], start + last_pos + len(last_word)))
            i += used
    return found
