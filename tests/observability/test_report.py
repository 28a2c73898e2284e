"""`toy-runtime report`: audit log → console summary, PNG waterfall, HTML page; bad input never crashes."""

from __future__ import annotations

import base64
import io
import json
import random
import re
from pathlib import Path

import numpy as np
import pytest

from toy_runtime.cli import main
from toy_runtime.audit import JsonlAudit
from toy_runtime.metrics.report import EXIT_NO_TURNS, EXIT_OK, EXIT_USAGE, run_report
from toy_runtime.metrics.turns import load_audit, parse_audit_lines, percentile
from toy_runtime.metrics.voice_turn import VoiceTurnRecord

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def voice_record(turn: int, text: str, v2v: float, *, ttft: float | None = None, second: float | None = None,
                 events: tuple[tuple[str, float], ...] = (), tts: float = 300.0, turn_id: str | None = None) -> dict:
    waterfall = {"endpoint": 300.0, "asr_final": 420.0, "first_token": None if ttft is None else 430.0 + ttft,
                 "first_text": 440.0 + (ttft or 0.0), "first_clause_synthesized": v2v - 20, "first_audio": v2v,
                 "second_answer_audio": second, **{f"event:{n}": at for n, at in events}}
    record = {"kind": "voice.turn", "ts": 1_700_000_000.0 + turn, "turn": turn, "text": text,
              "waterfall_ms": waterfall, "voice_to_voice_ms": v2v, "first_clause_tts_ms": tts,
              "provider_ttft_ms": ttft, "runtime_added_ms": round(v2v - 300 - (ttft or 0) - tts, 1),
              "events": [{"name": n, "status": "succeeded"} for n, _ in events], "spoken": ["x"],
              "terminated": False, "interrupted": False}
    if turn_id:
        record["turn_id"] = turn_id
    return record


def completed_record(turn_id: str, ttft: float | None, first_speech: float, total: float, *,
                     second: float | None = None, events: tuple[tuple[str, float], ...] = (),
                     path: str = "llm") -> dict:
    return {"kind": "turn.completed", "ts": 1_700_000_100.0, "turn_id": turn_id, "terminated": False,
            "mode": "dual_agent", "path": path, "fault": None,
            "first_answer": {"ttft_ms": ttft} if ttft is not None else None,
            "second_answer": {"ttft_ms": 200.0} if second is not None else None,
            "first_speech_ms": first_speech, "second_speech_ms": second,
            "prompt_tokens": "***",  # the audit redaction hits *_tokens keys: must not matter
            "events": [{"name": n, "status": "succeeded", "dispatch_delay_ms": 1.0, "latency_ms": ms}
                       for n, ms in events], "total_ms": total}


def synthetic_lines() -> list[str]:
    """A text turn, a spoken turn (with its own turn.completed before it), another spoken turn, and garbage."""
    return [
        json.dumps({"kind": "turn.started", "ts": 1.0, "turn_id": "sess_a.t1", "text": "why is the <sky> blue"}),
        json.dumps(completed_record("sess_a.t1", 380.0, 420.0, 2900.0, second=1900.0,
                                    events=(("knowledge.web.search", 1300.0),))),
        "this is not json",
        "[1, 2, 3]",
        '{"no_kind": true}',
        json.dumps({"kind": "voice.turn", "waterfall_ms": "not an object"}),
        json.dumps(completed_record("sess_b.t1", 350.0, 400.0, 800.0)),
        json.dumps(voice_record(1, "hello there", 1200.0, ttft=350.0)),
        json.dumps(completed_record("sess_b.t2", 300.0, 330.0, 2500.0, second=1500.0)),
        json.dumps(voice_record(2, "what is the weather", 1100.0, ttft=300.0, second=2600.0,
                                events=(("knowledge.web.search", 1700.0),))),
        json.dumps({"kind": "event.executed", "ts": 2.0}),
        "",
        '{"kind": "voice.turn", "truncated',
    ]


@pytest.fixture
def audit_file(tmp_path: Path) -> Path:
    path = tmp_path / "audit.jsonl"
    path.write_text("\n".join(synthetic_lines()) + "\n", encoding="utf-8")
    return path


def test_parsing_folds_each_spoken_turns_own_record_and_counts_garbage(audit_file: Path) -> None:
    scan = load_audit(audit_file)
    assert scan.malformed == 5 and scan.lines == 12
    assert [(t.kind, t.label) for t in scan.turns] == [("text", "ss_a.t1"), ("voice", "#1"), ("voice", "#2")]
    text, first, second = scan.turns
    assert text.text == "why is the <sky> blue" and text.ttft_ms == 380.0 and text.total_ms == 2900.0
    assert text.events[0].latency_ms == 1300.0 and text.second_answer_ms == 1900.0
    assert first.turn_id == "sess_b.t1" and first.path == "llm" and first.total_ms == 800.0
    assert second.turn_id == "sess_b.t2" and second.second_answer_ms == 2600.0
    assert second.events[0].name == "knowledge.web.search" and second.events[0].at_ms == 1700.0
    assert second.milestones["first_token"] == 730.0 and second.milestones["first_audio"] == 1100.0


def test_a_voice_record_with_a_turn_id_claims_exactly_that_turn() -> None:
    lines = [json.dumps(completed_record("s.t1", 100.0, 150.0, 300.0)),
             json.dumps(completed_record("s.t2", 200.0, 250.0, 400.0)),
             json.dumps(voice_record(1, "hi", 900.0, turn_id="s.t1"))]
    scan = parse_audit_lines(lines)
    assert [(t.kind, t.turn_id) for t in scan.turns] == [("text", "s.t2"), ("voice", "s.t1")]
    assert scan.turns[1].total_ms == 300.0


def test_the_real_voice_turn_record_is_read(tmp_path: Path) -> None:
    # the record exactly as VoiceLoop writes it (VoiceTurnRecord.as_audit through JsonlAudit)
    record = VoiceTurnRecord(turn=3, text="turn it up", end_of_speech_at=10.0, endpoint_at=10.3,
                             asr_final_at=10.45, handoff_at=10.46, first_text_at=10.9,
                             first_clause_started_at=10.9, first_clause_synthesized_at=11.1, first_audio_at=11.12,
                             events=[{"name": "device.volume.adjust", "status": "succeeded", "at": 10.95}],
                             turn_metrics={"first_answer": {"ttft_ms": 400.0}})
    audit = JsonlAudit(tmp_path / "audit.jsonl")
    audit.record("voice.turn", **record.as_audit())
    audit.close()
    (turn,) = load_audit(tmp_path / "audit.jsonl").turns
    assert turn.voice_to_voice_ms == pytest.approx(1120.0) and turn.ttft_ms == 400.0
    assert turn.first_clause_tts_ms == pytest.approx(200.0)
    # 860 as recorded; 850 (ASR final + TTFT) while the audit redaction masks the "first_token" key
    assert 850.0 <= turn.milestones["first_token"] <= 860.0
    assert turn.events[0].at_ms == pytest.approx(950.0) and turn.events[0].status == "succeeded"


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
def test_png_report_and_console_summary(audit_file: Path, tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    png = tmp_path / "report.png"
    assert run_report(audit_file, out=png, stream=out, err=err) == EXIT_OK
    data = png.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 5000
    text = out.getvalue()
    lines = text.splitlines()
    assert lines[0].startswith("text  ss_a.t1") and "TTFT 380 ms" in lines[0] and "total 2900 ms" in lines[0]
    assert lines[1].startswith("voice #1") and "voice-to-voice 1200 ms" in lines[1]
    assert "knowledge.web.search (succeeded, +1700 ms)" in lines[2]
    assert "3 turn(s) (2 spoken, 1 text)" in text and "5 malformed line(s) skipped" in text
    assert re.search(r"voice-to-voice\s+2\s+1150 ms\s+1190 ms", text)  # median / p90 of 1200, 1100
    assert re.search(r"TTFT\s+3\s+350 ms\s+374 ms", text)  # 380 (text), 350, 300 (spoken)
    assert re.search(r"first-clause TTS\s+2\s+300 ms", text)
    assert re.search(r"runtime-added\s+2\s+225 ms", text)
    assert f"wrote {png}" in text and err.getvalue() == ""


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
def test_html_report_embeds_the_picture_and_a_row_per_turn(audit_file: Path, tmp_path: Path) -> None:
    page = tmp_path / "out" / "report.html"
    assert main(["report", str(audit_file), "--out", str(page)]) == EXIT_OK
    html = page.read_text(encoding="utf-8")
    match = re.search(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert match and base64.b64decode(match.group(1)).startswith(PNG_MAGIC)
    assert html.count('<tr class="turn') == 3
    assert "why is the &lt;sky&gt; blue" in html and "<sky>" not in html
    assert "<td>voice-to-voice</td><td>2</td><td>1150</td><td>1190</td>" in html


def test_last_n_keeps_the_latest_turns(audit_file: Path) -> None:
    out = io.StringIO()
    assert run_report(audit_file, last=1, stream=out) == EXIT_OK
    assert out.getvalue().splitlines()[0].startswith("voice #2") and "1 turn(s)" in out.getvalue()


@pytest.mark.parametrize("content", ["", "garbage\n{\"kind\": \"event.executed\"}\n"])
def test_no_turns_is_exit_1_with_a_message_and_no_file(tmp_path: Path, content: str) -> None:
    audit = tmp_path / "audit.jsonl"
    audit.write_text(content)
    out, png = io.StringIO(), tmp_path / "r.png"
    assert run_report(audit, out=png, stream=out, err=io.StringIO()) == EXIT_NO_TURNS
    assert out.getvalue().startswith(f"no turns in {audit}") and "nothing to report" in out.getvalue()
    assert not png.exists()


def test_missing_file_and_bad_out_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "nope.jsonl")]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "audit log not found" in err
    (tmp_path / "a.jsonl").write_text("")
    assert main(["report", str(tmp_path / "a.jsonl"), "--out", str(tmp_path / "r.pdf")]) == EXIT_USAGE
    assert "must end in .png or .html" in capsys.readouterr().err


@pytest.mark.slow  # real waits (timeouts, deadlines, subprocesses): outside the fast lane
def test_many_turns_render(tmp_path: Path) -> None:
    rng = random.Random(7)
    lines = [json.dumps(voice_record(i, f"utterance {i}", rng.uniform(700, 2000), ttft=rng.uniform(100, 600)))
             for i in range(1, 101)]
    audit = tmp_path / "audit.jsonl"
    audit.write_text("\n".join(lines))
    png = tmp_path / "r.png"
    assert run_report(audit, out=png, stream=io.StringIO()) == EXIT_OK
    assert png.read_bytes().startswith(PNG_MAGIC)


def test_percentile_matches_numpy() -> None:
    rng = random.Random(3)
    for n in (1, 2, 5, 17):
        values = [rng.uniform(0, 1000) for _ in range(n)]
        for q in (50, 90):
            assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))
    assert percentile([], 50) is None
