"""English and Chinese number words."""

import pytest

from toy_runtime.plugins.numbers import find_numbers, parse_number


@pytest.mark.parametrize("text, value", [
    ("thirty", 30), ("twenty five", 25), ("twenty-five", 25), ("30", 30), ("３０", 30), ("a hundred", 100),
    ("one hundred and five", 105), ("zero", 0), ("fifty percent", 50), ("50%", 50),
    ("三十", 30), ("二十", 20), ("两", 2), ("十五", 15), ("一百", 100), ("一百零五", 105), ("一百二", 120),
    ("三十五", 35), ("百分之五十", 50), ("零", 0),
])
def test_parse_number(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize("text", ["", "loud", "twenty thirty", "百", "三三十", "one two", "a bit"])
def test_parse_number_rejects_non_numbers(text):
    assert parse_number(text) is None


def test_find_numbers_reports_values_and_spans():
    text = "turn it up by twenty, 把音量调到三十"
    found = find_numbers(text)
    assert [n.value for n in found] == [20, 30]
    assert text[found[0].start:found[0].end] == "twenty"
    assert text[found[1].start:found[1].end] == "三十"
