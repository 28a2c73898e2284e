"""The outside-in voice bench: level detection and the breakdown on made-up signals, and one short real run of
`toy-runtime run` on the virtual sound card that must give a sane report (not a timing assertion)."""

from __future__ import annotations

import numpy as np
import pytest

from toy_runtime.bench.heard import HeardTurn, find_turn, levels_of, split_probe
from toy_runtime.bench.voice_breakdown import LINES, breakdown, summarize_turns
from toy_runtime.bench.voice_report import markdown
from toy_runtime.metrics.turns import Turn

RATE = 16000


def tone(seconds: float, amplitude: float = 8000.0) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return (np.sin(2 * np.pi * 300 * t) * amplitude).astype(np.int16)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * RATE), dtype=np.int16)


def test_speech_end_and_reply_onset_are_found_where_the_sound_is():
    mic = np.concatenate([silence(0.5), tone(1.0), silence(2.0)])  # speech 0.5 → 1.5 s
    speaker = np.concatenate([silence(2.1), tone(0.5), silence(0.9)])  # reply from 2.1 s
    stereo = np.stack([mic, speaker], axis=1).astype("<i2").tobytes()
    left, right = split_probe(stereo)
    assert np.array_equal(left, mic) and np.array_equal(right, speaker)
    heard = find_turn(levels_of(left, RATE), levels_of(right, RATE), 0.0, 3.5, -50.0)
    # centred 10 ms windows: each event is found within half a window (+ one hop) of the true edge
    assert heard.speech_start_s == pytest.approx(0.5, abs=0.007)
    assert heard.speech_end_s == pytest.approx(1.5, abs=0.007)
    assert heard.reply_onset_s == pytest.approx(2.1, abs=0.007)
    assert heard.v2v_ms == pytest.approx(600, abs=10)


def test_a_reply_still_sounding_when_speech_ends_is_not_the_onset():
    mic = np.concatenate([silence(0.2), tone(0.5), silence(1.3)])  # speech ends at 0.7 s
    speaker = np.concatenate([tone(0.8), silence(0.4), tone(0.3), silence(0.5)])  # old tail to 0.8, reply at 1.2
    heard = find_turn(levels_of(mic, RATE), levels_of(speaker, RATE), 0.0, 2.0, -50.0)
    assert heard.reply_onset_s == pytest.approx(1.2, abs=0.007)


def test_no_speech_and_no_reply_are_reported_as_missing():
    quiet = levels_of(silence(1.0), RATE)
    assert find_turn(quiet, quiet, 0.0, 1.0, -50.0) == HeardTurn(None, None, None)
    mic = levels_of(np.concatenate([tone(0.3), silence(0.7)]), RATE)
    assert find_turn(mic, quiet, 0.0, 1.0, -50.0).reply_onset_s is None


def logged_turn(**milestones: float) -> Turn:
    turn = Turn(kind="voice", label="#1", ts=None, text="what time is it", milestones=dict(milestones))
    turn.voice_to_voice_ms = milestones.get("first_audio")
    return turn


WATERFALL = dict(endpoint=200.0, endpoint_decided=204.0, asr_final=215.0, first_token=220.0, first_text=223.0,
                 first_clause_synthesized=320.0, first_audio=330.0)


def test_the_lines_add_up_to_the_heard_total_and_the_unseen_part_splits_on_the_anchor():
    heard = HeardTurn(speech_start_s=1.0, speech_end_s=2.0, reply_onset_s=2.5)  # heard 500 ms
    t0 = 1000.0  # the recording's first frame on CLOCK_MONOTONIC
    # the runtime's end of speech was 120 ms after the heard end: its first token at +220 ms of it
    sent = t0 + 2.0 + 0.120 + 0.220
    row = breakdown(1, heard, logged_turn(**WATERFALL), recording_t0=t0, first_token_sent=sent, ttft_ms=0.0,
                    hangover_ms=200)
    assert row.problem is None
    assert row.heard_v2v_ms == pytest.approx(500)
    assert row.unseen_ms == pytest.approx(170)
    assert row.added_ms == pytest.approx(300)
    assert row.lines["capture"] == pytest.approx(120)
    assert row.lines["output"] == pytest.approx(50)
    assert row.lines["tts_first_chunk"] == pytest.approx(97)
    assert row.lines["capture_lag"] == pytest.approx(4) and row.lines["asr_final"] == pytest.approx(11)
    # a runtime that does not log its capture lag (an older one): none seen, ASR final from the endpoint
    old = breakdown(1, heard, logged_turn(**{k: v for k, v in WATERFALL.items() if k != "endpoint_decided"}),
                    recording_t0=t0, first_token_sent=sent, ttft_ms=0.0, hangover_ms=200)
    assert old.lines["capture_lag"] == 0 and old.lines["asr_final"] == pytest.approx(15)
    assert sum(row.lines.values()) == pytest.approx(row.heard_v2v_ms)
    # the VAD's overhang, measured offline, comes out of the capture side as its own line
    split = breakdown(1, heard, logged_turn(**WATERFALL), recording_t0=t0, first_token_sent=sent, ttft_ms=0.0,
                      hangover_ms=200, vad_tail_ms=100.0)
    assert (split.lines["vad_overhang"], split.lines["capture"]) == (pytest.approx(100), pytest.approx(20))
    assert sum(split.lines.values()) == pytest.approx(split.heard_v2v_ms)


def test_without_an_anchor_the_unseen_part_stays_whole_and_missing_turns_are_named():
    heard = HeardTurn(1.0, 2.0, 2.5)
    row = breakdown(1, heard, logged_turn(**WATERFALL), recording_t0=None, first_token_sent=None, ttft_ms=0.0,
                    hangover_ms=200)
    assert row.lines["capture"] is None and row.lines["output"] is None and row.unseen_ms == pytest.approx(170)
    assert breakdown(2, heard, None, recording_t0=None, first_token_sent=None, ttft_ms=0.0,
                     hangover_ms=200).problem == "no voice.turn record"
    assert breakdown(3, HeardTurn(1.0, 2.0, None), logged_turn(**WATERFALL), recording_t0=None,
                     first_token_sent=None, ttft_ms=0.0, hangover_ms=200).problem == "no reply heard"
    # the runtime's own figure longer than what was heard: its end of speech came before the user stopped
    early = breakdown(4, HeardTurn(1.0, 2.0, 2.28), logged_turn(**WATERFALL), recording_t0=None,
                      first_token_sent=None, ttft_ms=0.0, hangover_ms=200)
    assert early.early_end and early.problem is None
    # ... but a frame's worth (the end by level sits within a frame of the heard end) is not an early end
    near = breakdown(5, HeardTurn(1.0, 2.0, 2.31), logged_turn(**WATERFALL), recording_t0=None,
                     first_token_sent=None, ttft_ms=0.0, hangover_ms=200)
    assert not near.early_end and near.unseen_ms == pytest.approx(-20)
    summary = summarize_turns([row, early], {"ttft_ms": 0.0, "hangover_ms": 200, "events": True})
    assert summary["early_ends"] == 1 and summary["turns_measured"] == 2
    assert summary["heard_v2v_ms"]["n"] == 2 and summary["unseen_ms"]["n"] == 1  # the wait counts, the split not
    assert summary["unseen_ms"]["p50"] == pytest.approx(170) and summary["line_sum_ms"]["n"] == 0
    assert "| capture buffering, unseen — unseen by the runtime | – | – | 0 |" in markdown(summary)


@pytest.mark.audio
def test_a_short_real_run_gives_a_sane_report(tmp_path):
    from toy_runtime.testing.pulse import pulseaudio_available
    from toy_runtime.testing.services import unavailable

    if not pulseaudio_available():
        unavailable("pulseaudio is not installed")
    try:
        from toy_runtime.adapters.piper_tts import default_voice_paths

        if not all(p.exists() for p in default_voice_paths()):
            unavailable("the piper voice is not installed")
    except ImportError as exc:
        unavailable(f"piper unavailable: {exc}")
    from toy_runtime.bench.voice_report import write_voice_report
    from toy_runtime.bench.voice_run import VoiceBenchConfig, run_voice_bench

    # phrases without a mid-sentence pause: a loaded machine must not turn the run into false cuts
    summary = run_voice_bench(VoiceBenchConfig(turns=2, phrases=("play some music", "can you sing a song"),
                                               cache_dir=tmp_path / "cache"))
    paths = write_voice_report(tmp_path / "out", summary)
    assert summary["turns_attempted"] == 2
    assert summary["meta"]["allocator"] == "glibc"  # the config's default: nothing preloaded
    assert summary["turns_measured"] >= 1, summary["turns"]
    comparable = [t for t in summary["turns"] if t["problem"] is None and not t["early_end"]]
    assert comparable, summary["turns"]
    for t in comparable:
        lines = t["lines_ms"]
        assert all(lines[k] is not None for k, _ in LINES), lines
        # ordering: heard total ≥ the runtime's own figure ≥ its hangover; every inside stage non-negative
        assert t["heard_v2v_ms"] > 0 and t["logged_v2v_ms"] > 0
        assert t["logged_v2v_ms"] >= lines["endpoint"] > 0
        assert all(lines[k] >= 0 for k in ("capture_lag", "asr_final", "first_token", "first_clause", "tts_first_chunk",
                                            "playback_queue"))
        assert sum(lines.values()) == pytest.approx(t["heard_v2v_ms"], abs=1.0)
        assert t["text"]  # the runtime heard words
    assert paths["json"].exists() and "heard v2v" in paths["markdown"].read_text()


def test_the_mixed_session_answers_each_request_by_its_kind():
    from toy_runtime.agent.prompts import RESULTS_PREFIX
    from toy_runtime.bench.voice_session import MixedSessionReplies

    replies = MixedSessionReplies(["search", "plain", "reminder"])
    chat = {"messages": [{"role": "user", "content": "what is the weather today"}]}
    assert "<agent_events>knowledge.web.search</agent_events>" in replies(chat).text
    follow = {"messages": [*chat["messages"], {"role": "user", "content": f"{RESULTS_PREFIX}\n..."}]}
    assert "agent_events" not in replies(follow).text
    assert "agent_events" not in replies(chat).text  # the second chat turn is a plain one
    assert "calendar.schedule.create" in replies(chat).text
    tool = {"type": "function", "function": {"name": "add_schedule", "parameters": {}}}
    agent = replies({"messages": chat["messages"], "tools": [tool],
                     "tool_choice": {"type": "function", "function": {"name": "add_schedule"}}})
    [(name, args)] = agent.tool_calls
    assert name == "add_schedule" and {"title", "start_at", "timezone"} <= set(__import__("json").loads(args))
    assert replies.requests_by_kind == {"chat": 3, "event_agent": 1, "follow_up": 1}
    assert len(replies.arrivals) == 5


@pytest.mark.audio
def test_a_short_mixed_session_searches_reminds_and_reports_memory(tmp_path):
    from toy_runtime.testing.pulse import pulseaudio_available
    from toy_runtime.testing.services import unavailable

    if not pulseaudio_available():
        unavailable("pulseaudio is not installed")
    from toy_runtime.bench.voice_report import write_voice_report
    from toy_runtime.bench.voice_run import VoiceBenchConfig, run_voice_bench

    from toy_runtime.service.heap import jemalloc_installed

    # turns 1 and 3 of the mixed session: a search (on the loopback SearxNG) and a reminder with its time in words;
    # on the systemd unit's allocator and with the ALSA drop-in of the toy's install, as the toy runs
    import sys

    if not jemalloc_installed():
        unavailable("libjemalloc2 is not installed (the unit's allocator)")
    summary = run_voice_bench(VoiceBenchConfig(turns=3, session="mixed", cache_dir=tmp_path / "cache",
                                               python=sys.executable, malloc="jemalloc", alsa="toy"))
    meta = summary["meta"]
    assert meta["python"] == sys.executable
    assert meta["malloc"] == "jemalloc" and meta["allocator"] == "jemalloc"  # preloaded, and really mapped
    assert meta["alsa"] == "toy" and meta["a52_codec_mapped"] is False  # the codec plugin stayed out
    assert meta["search_requests"] >= 1, meta
    assert "knowledge.web.search=succeeded" in meta["event_results"], meta
    assert any(r.startswith("calendar.schedule.create=") for r in meta["event_results"]), meta
    assert len(meta["rss_by_turn_mb"]) == 3 and all(r and r > 50 for r in meta["rss_by_turn_mb"])
    assert meta["rss_peak_in_use_mb"] is None or meta["rss_peak_in_use_mb"] >= max(meta["rss_by_turn_mb"])
    text = write_voice_report(tmp_path / "out", summary)["markdown"].read_text()
    assert "Memory (RSS of the runtime)" in text and "session mixed" in text


def test_asking_for_jemalloc_without_it_is_one_clear_line(monkeypatch, capsys):
    import argparse

    from toy_runtime.bench import voice_cli
    from toy_runtime.service import heap
    from toy_runtime.testing import pulse

    parser = argparse.ArgumentParser()
    voice_cli.add_voice_parser(parser.add_subparsers())
    monkeypatch.setattr(pulse, "pulseaudio_available", lambda: True)
    monkeypatch.setattr(heap, "jemalloc_installed", lambda: False)
    args = parser.parse_args(["voice", "--malloc", "jemalloc"])
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "libjemalloc2" in err
