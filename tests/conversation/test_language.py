"""The child's language (issue 27): every request tells the model which language to answer in, and the fixed lines
follow it. On the project's dataset Qwen2.5-Coder-1.5B answered 4 of 10 Chinese turns in English without the note."""

from __future__ import annotations

import socket

import pytest

from toy_runtime.agent.prompts import LANGUAGE_NOTES
from toy_runtime.config import load_settings
from toy_runtime.testing.scripted_llm import Reply

from .conftest import MODES

FAST = {"read_timeout_s": 1.0, "first_token_timeout_s": 1.0}


def _note_before_the_childs_words(request, words):
    messages = request["messages"]
    assert messages[-1] == {"role": "user", "content": words}
    return messages[-2]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("words, locale", [("为什么天空是蓝色的？", "zh"), ("why is the sky blue?", "en"),
                                           ("Pip, 我喜欢恐龙!", "zh")])
async def test_each_request_names_the_childs_language(mode, words, locale, scripted_llm, make_harness):
    scripted_llm.add(Reply(text="因为阳光。" if locale == "zh" else "Because of sunlight."))
    h = make_harness(mode=mode, llm=scripted_llm)
    await h.turn(words)
    note = _note_before_the_childs_words(scripted_llm.requests[-1], words)
    assert note == {"role": "system", "content": LANGUAGE_NOTES[locale]}
    # the note is never remembered: the next turn's history holds only what was said
    scripted_llm.add(Reply(text="Okay."))
    await h.turn("thanks")
    history = scripted_llm.requests[-1]["messages"]
    assert [m["content"] for m in history].count(LANGUAGE_NOTES[locale]) == (1 if locale == "en" else 0)
    assert history[-2]["content"] == LANGUAGE_NOTES["en"]


@pytest.mark.parametrize("mode", MODES)
async def test_the_follow_up_answer_is_asked_in_the_childs_language(mode, scripted_llm, make_harness):
    from .test_turns import reply_for  # the search turn as each mode writes it

    scripted_llm.add(reply_for(mode, "我帮你查一下。", [("knowledge.web.search", "web_search", {"query": "恐龙"})]))
    scripted_llm.add(Reply(text="恐龙生活在很久以前。"))
    h = make_harness(mode=mode, llm=scripted_llm)
    await h.turn("帮我查一下恐龙")
    follow = scripted_llm.requests[-1]["messages"]
    assert {"role": "system", "content": LANGUAGE_NOTES["zh"]} in follow


@pytest.mark.parametrize("mode", MODES)
async def test_a_chinese_turn_hears_the_chinese_fault_line(mode, scripted_llm, make_harness):
    scripted_llm.add(Reply(fault="http_500"))
    h = make_harness(mode=mode, llm=scripted_llm, **FAST)
    turn = await h.turn("给我讲个故事")
    agent = h.runtime.settings.agent
    assert "".join(turn.speech()) == agent.fault_line_zh  # spoken clause by clause
    scripted_llm.add(Reply(fault="http_500"))
    assert " ".join((await h.turn("tell me a story")).speech()) == agent.fault_line


@pytest.mark.parametrize("mode", MODES)
async def test_a_chinese_turn_with_no_model_hears_the_chinese_offline_line(mode, make_harness):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    h = make_harness(mode=mode, base_url=f"http://127.0.0.1:{port}/v1", **FAST)
    turn = await h.turn("鲸鱼是什么")
    assert "".join(turn.speech()) == h.runtime.settings.agent.offline_line_zh


def test_the_chinese_lines_are_configurable(tmp_path):
    settings = load_settings(env={"TOY_STATE_DIR": str(tmp_path), "TOY_AGENT__FAULT_LINE_ZH": "哎呀！",
                                  "TOY_AGENT__OFFLINE_LINE_ZH": "我在休息。"})
    assert settings.agent.fault_line_for("zh") == "哎呀！" and settings.agent.offline_line_for("zh") == "我在休息。"
    assert settings.agent.fault_line_for("en") == settings.agent.fault_line
