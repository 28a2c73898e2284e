"""A real `toy-runtime chat` with no LLM endpoint: a reminder request is made by the resolver (the offline gate),
said back, and stored; its one question is answered on the next line; anything else still hears the offline line."""

from __future__ import annotations

import json

from .test_cli import run_cli

OFFLINE_LINE = "I can't think right now"


def chat(tmp_path, *lines: str) -> list[dict]:
    proc = run_cli("chat", "--json", input_text="".join(f"{line}\n" for line in lines), tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def said(out: list[dict]) -> list[str]:
    return [line["text"] for line in out if line["type"] == "speech"]


def stored(tmp_path) -> list[str]:
    rows = json.loads(run_cli("schedules", "list", "--json", tmp_path=tmp_path).stdout)
    return [row["title"] for row in rows]


def test_a_reminder_is_made_offline_and_said_back(tmp_path):
    out = chat(tmp_path, "remind me tomorrow morning to brush my teeth")
    [line] = said(out)
    assert line.startswith("OK, I'll remind you to brush your teeth on ") and line.endswith(" at 8:00 AM.")
    assert [t["llm_calls"] for t in out if t["type"] == "turn"] == [0]
    assert stored(tmp_path) == ["brush my teeth"]


def test_the_offline_question_is_answered_on_the_next_line(tmp_path):
    out = chat(tmp_path, "remind me to water the plants", "at 5 pm")
    first, second = said(out)
    assert first == "What time should I remind you?"
    assert second.startswith("OK, I'll remind you to water the plants on ") and second.endswith(" at 5:00 PM.")
    assert stored(tmp_path) == ["water the plants"]


def test_anything_else_still_hears_the_offline_line(tmp_path):
    out = chat(tmp_path, "remind me to feed the cat and make it louder", "tell me a story")
    assert sum(OFFLINE_LINE in text for text in said(out)) == 2  # once per turn
    assert stored(tmp_path) == []
