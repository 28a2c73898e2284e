"""language.py owns the script ranges: Chinese detection, locale guessing, dense scripts, the token estimate."""

from __future__ import annotations

import pytest

from toy_runtime.language import WIDE_CHARS, estimate_tokens, guess_locale, has_cjk, is_dense


@pytest.mark.parametrize("text, chinese", [
    ("提醒我喝水", True),
    ("set it to 三十", True),
    ("㐀", True),  # extension A ideograph
    ("ありがとう", False),  # kana only: Japanese, not Chinese
    ("안녕하세요", False),
    ("hello, world", False),
    ("", False),
    (None, False),
])
def test_has_cjk_and_guess_locale_agree(text, chinese):
    assert has_cjk(text) is chinese
    assert guess_locale(text) == ("zh" if chinese else "en")


def test_dense_scripts_include_kana_and_hangul_but_not_punctuation():
    assert all(is_dense(ch) for ch in "好あア한")
    assert not any(is_dense(ch) for ch in "a1,。，")


def test_wide_chars_cover_ideographs_and_full_width_punctuation():
    import re

    assert re.fullmatch(f"{WIDE_CHARS}+", "好，。！") and not re.search(WIDE_CHARS, "abc, あ")


def test_token_estimate_counts_cjk_per_character_and_latin_per_four():
    assert estimate_tokens("你好。") == 3
    assert estimate_tokens("hello world!") == 3
    assert estimate_tokens("") == 0
