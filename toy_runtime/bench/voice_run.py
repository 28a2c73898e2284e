"""Run the real `toy-runtime run` process on the virtual sound card and listen to it from outside.

The bench process owns everything the runtime talks to: a headless PulseAudio card (`VirtualSoundCard`) with the
probe (mic feed left, speaker right, one clock), the scripted OpenAI-compatible server (it timestamps each request
on CLOCK_MONOTONIC) and the utterances (piper with its noise off, cached as WAV). Per turn it plays one utterance into
the mic sink, waits for the runtime's `voice.turn` record and a quiet gap, then moves on. Afterwards the recording
is cut into turns at the moments each utterance started and measured by level (`heard.py`), and each turn's heard
total is broken down against the runtime's own waterfall (`voice_breakdown.py`).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..config import VadConfig
from ..metrics.turns import Turn, load_audit
from ..testing.alsa import override_installed, toy_alsa_config
from ..testing.pulse import VirtualSoundCard, start_probe
from ..testing.scripted_llm import Reply, ScriptedLLMServer
from ..testing.services import audit_records
from ..testing.fake_searxng import FakeSearxng
from .heard import find_turn, levels_of, split_probe
from .utterances import utterance, utterance_cache_dir, vad_tail_ms
from .voice_breakdown import breakdown, summarize_turns
from .voice_pauses import PausePlay, answered_whole, class_summary, pause_plays, sounded_early, was_cut
from .voice_session import MIXED_PHRASES, MixedSessionReplies, StampedReplies

VAD_HANGOVER_MS: int = VadConfig.model_fields["hangover_ms"].default  # the runtime's own, read from its section

__all__ = ["PHRASES", "PHRASES_ZH", "REPLY_TEXT_ZH", "VoiceBenchConfig", "run_voice_bench"]

PHRASES = (
    "what is the weather today", "play some music", "tell me a story", "what time is it",
    "how are you today", "can you sing a song", "what is your name", "tell me a joke",
    "how far away is the moon", "what do cats like to eat", "can we play a game", "what color is the sky",
)
REPLY_TEXT = "Sure! Here is a short answer for you."
PHRASES_ZH = (
    "今天天气怎么样", "放一首歌吧", "给我讲个故事", "现在几点了", "你今天好吗", "你会唱歌吗",
    "你叫什么名字", "给我讲个笑话", "月亮离我们有多远", "小猫喜欢吃什么", "我们玩个游戏吧", "天空是什么颜色",
)
REPLY_TEXT_ZH = "好的！这是给你的一个简短回答。"


@dataclass
class VoiceBenchConfig:
    """What one bench run does (defaults: the issue's headline condition)."""

    turns: int = 12
    ttft_ms: float = 0.0
    hangover_ms: int = VAD_HANGOVER_MS  # the runtime's own default: one knob, one default
    vad_aggressiveness: int = 2  # given to the runtime, and used to measure the VAD overhang offline
    frame_ms: int = 20  # the runtime's default audio.frame_ms (not passed: TOY_AUDIO__FRAME_MS=20 is refused today)
    threshold_db: float = -50.0  # level of "sound"; raised to noise floor + margin_db if the floor is higher
    margin_db: float = 20.0
    reply_text: str = REPLY_TEXT
    phrases: tuple[str, ...] = PHRASES
    events: bool = True  # False: TOY_EVENTS__ENABLED=[] (no catalog, no event work)
    end_by_level: bool = True  # the runtime's vad.end_by_level (also used to measure its end detection offline)
    legacy_runtime: bool = False  # the runtime under test predates vad.end_by_level: not sent, its end is the VAD's
    gap_s: float = 0.8  # quiet after each reply before the next utterance
    turn_timeout_s: float = 30.0
    load_timeout_s: float = 120.0
    cache_dir: Path = field(default_factory=utterance_cache_dir)
    extra_env: dict[str, str] = field(default_factory=dict)  # more TOY_* settings for the runtime (experiments)
    malloc: str = "glibc"  # "jemalloc": the systemd unit's allocator (service/heap.JEMALLOC_ENV), preloaded
    alsa: str = "machine"  # "toy": with the ALSA drop-in the toy's install adds (testing/alsa.py), if missing here
    session: str = "plain"  # "mixed": searches and reminders between plain answers (voice_session.py); "pauses":
    # the pause corpus's utterances in `pause_language`, judged per class (voice_pauses.py)
    pause_language: str = "en"
    whole_sentences: bool = False  # "pauses": the paused utterances voiced whole and cut (bench/whole_sentences.py)
    settle_s: float = 2.0  # "pauses": after the first turn ends, this long without another before the next utterance
    python: str | None = None  # the interpreter that runs `toy_runtime run` (None: this one); e.g. a venv with
    # only the core dependencies, to measure the toy's memory without test and debug extras loaded
    state_dir: Path | None = None  # a new dir for the runtime's state (audit.jsonl, runtime.stderr); None: temporary


def _allocator(pid: int) -> str:
    """"jemalloc" when the process has it mapped (preloaded), else "glibc": what it really runs on."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return "unknown"
    return "jemalloc" if "libjemalloc" in maps else "glibc"


def _codec_libraries_mapped(pid: int) -> bool | None:
    """True when ALSA's a52 plugin pulled libavcodec into the process (the toy's ALSA drop-in keeps it out)."""
    try:
        return "libavcodec" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return None


def _rss_mb(pid: int, field: str = "VmRSS") -> float | None:
    """The process's resident memory (VmRSS), or its peak since the last `_reset_peak` (VmHWM), in MB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def _reset_peak(pid: int) -> bool:
    """Start VmHWM afresh (Linux: `5` into clear_refs), so the peak seen later is the peak during use, not loading's."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _runtime_env(card: VirtualSoundCard, llm_url: str, state: Path, config: VoiceBenchConfig,
                 search_url: str | None = None) -> dict[str, str]:
    # the user's own TOY_* / OPENAI_* / glibc malloc settings would change what is measured
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOY_", "OPENAI_", "MALLOC_", "LD_PRELOAD"))}
    env.update(card.runtime_env)
    env.update({"TOY_STATE_DIR": str(state), "TOY_AUDIO__INPUT_DEVICE": "pulse", "TOY_AUDIO__OUTPUT_DEVICE": "pulse",
                "TOY_LLM__BASE_URL": llm_url, "TOY_LLM__MODEL": "scripted",
                "TOY_VAD__HANGOVER_MS": str(config.hangover_ms),
                "TOY_VAD__AGGRESSIVENESS": str(config.vad_aggressiveness)})
    if not config.events:
        env["TOY_EVENTS__ENABLED"] = "[]"
    if search_url is not None:
        env["TOY_SEARCH__URL"] = search_url
    if not config.legacy_runtime:
        env["TOY_VAD__END_BY_LEVEL"] = "true" if config.end_by_level else "false"
    if config.malloc == "jemalloc":
        from ..service.heap import JEMALLOC_ENV

        env.update(JEMALLOC_ENV)
    if config.alsa == "toy" and not override_installed():
        env["ALSA_CONFIG_PATH"] = str(toy_alsa_config(state))
    env.update(config.extra_env)
    return env


def run_voice_bench(config: VoiceBenchConfig, *, progress: Callable[[str], None] = lambda _msg: None
                    ) -> dict[str, Any]:
    """Run the bench once and return the summary (see `voice_breakdown.summarize_turns`)."""
    pause_session: list[PausePlay] = []
    if config.session == "pauses":
        corpus = pause_plays(config.pause_language, config.cache_dir, whole_sentences=config.whole_sentences)
        pause_session = [corpus[i % len(corpus)] for i in range(config.turns)]
        audio = [(p.pcm, 16000) for p in pause_session]
    else:
        phrases = ([p for p, _ in MIXED_PHRASES] if config.session == "mixed" else list(config.phrases))
        audio = [utterance(phrases[i % len(phrases)], config.cache_dir) for i in range(config.turns)]
    tails = {}
    for pcm, rate in audio:
        if pcm not in tails:
            tails[pcm] = vad_tail_ms(pcm, rate, config.threshold_db, aggressiveness=config.vad_aggressiveness,
                                     frame_ms=config.frame_ms, hangover_ms=config.hangover_ms,
                                     end_by_level=config.end_by_level and not config.legacy_runtime)
    vad_tails = [tails[pcm] for pcm, _ in audio]
    if config.state_dir is None:
        with tempfile.TemporaryDirectory(prefix="bench-voice-") as tmp:
            return _run(config, Path(tmp), audio, vad_tails, progress, pause_session)
    config.state_dir.mkdir(parents=True)  # new: the runtime must not start with an earlier run's history
    return _run(config, config.state_dir, audio, vad_tails, progress, pause_session)


def _run(config: VoiceBenchConfig, state: Path, audio: list[tuple[bytes, int]], vad_tails: list[float | None],
         progress: Callable[[str], None], pause_session: list[PausePlay]) -> dict[str, Any]:
    audit = state / "audit.jsonl"
    stamps: Any = StampedReplies(Reply(text=config.reply_text, delay_s=config.ttft_ms / 1000.0))
    search: FakeSearxng | None = None
    if config.session == "mixed":
        kinds = [MIXED_PHRASES[i % len(MIXED_PHRASES)][1] for i in range(config.turns)]
        stamps = MixedSessionReplies(kinds, delay_s=config.ttft_ms / 1000.0)
        search = FakeSearxng().start()
    starts: list[tuple[float, float]] = []  # (recording seconds, CLOCK_MONOTONIC) when each utterance started
    records_before: list[int] = []
    meta: dict[str, Any] = {"turns": config.turns, "ttft_ms": config.ttft_ms, "hangover_ms": config.hangover_ms,
                            "vad_aggressiveness": config.vad_aggressiveness, "frame_ms": config.frame_ms,
                            "events": config.events, "end_by_level": config.end_by_level and not config.legacy_runtime,
                            "reply_text": config.reply_text, "extra_env": config.extra_env,
                            "session": config.session, "python": config.python or sys.executable,
                            "malloc": config.malloc, "alsa": config.alsa}
    rss_by_turn: list[float | None] = []
    with VirtualSoundCard() as card, ScriptedLLMServer(stamps) as llm:
        stderr_path = state / "runtime.stderr"
        started = time.monotonic()
        with open(stderr_path, "wb") as err:
            proc = subprocess.Popen([config.python or sys.executable, "-m", "toy_runtime", "run"],
                                    env=_runtime_env(card, llm.url, state, config,
                                                     search.url if search is not None else None),
                                    stdout=subprocess.DEVNULL, stderr=err)
        try:
            while not audit_records(audit, "runtime.warm"):
                if time.monotonic() - started > config.load_timeout_s or proc.poll() is not None:
                    raise RuntimeError(f"runtime did not finish loading (exit {proc.poll()}):\n"
                                       f"{stderr_path.read_text()[-2000:]}")
                time.sleep(0.05)
            meta["loaded_s"] = round(time.monotonic() - started, 2)
            meta["rss_loaded_mb"] = _rss_mb(proc.pid)
            meta["rss_loading_peak_mb"] = _rss_mb(proc.pid, "VmHWM")
            meta["allocator"] = _allocator(proc.pid)
            meta["a52_codec_mapped"] = _codec_libraries_mapped(proc.pid)
            peak_reset = _reset_peak(proc.pid)
            rec = start_probe(card)
            time.sleep(1.0)
            for i, (pcm, rate) in enumerate(audio):
                progress(f"turn {i + 1}/{config.turns}")
                records_before.append(len(audit_records(audit, "voice.turn")))
                starts.append((len(rec.captured) // 4 / rec.sample_rate_hz, time.monotonic()))
                card.play_to_mic(pcm, rate, pad_ms=100)
                deadline = time.monotonic() + config.turn_timeout_s
                while len(audit_records(audit, "voice.turn")) == records_before[-1]:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        break
                    time.sleep(0.05)
                if pause_session:  # a child cut off goes on: her next words may end a second turn
                    _settle(audit, config.settle_s, deadline, proc)
                time.sleep(config.gap_s)
                rss_by_turn.append(_rss_mb(proc.pid))
            meta["rss_after_mb"] = _rss_mb(proc.pid)
            meta["rss_by_turn_mb"] = rss_by_turn
            meta["rss_max_mb"] = max((r for r in rss_by_turn if r is not None), default=None)
            # every moment of the session, synthesis and decoding included (None: the peak could not be reset)
            meta["rss_peak_in_use_mb"] = _rss_mb(proc.pid, "VmHWM") if peak_reset else None
            pcm = rec.stop()
            recording_t0 = rec.first_frame_monotonic()
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if search is not None:
                meta["search_requests"] = len(search.requests)
                search.stop()
            if isinstance(stamps, MixedSessionReplies):
                meta["llm_requests"] = dict(stamps.requests_by_kind)
                results = audit_records(audit, "event.result")
                meta["event_results"] = sorted({f"{r.get('name')}={r.get('status')}" for r in results})
                meta["event_result_count"] = len(results)
    stderr_text = stderr_path.read_text(errors="replace")
    meta["stderr_underrun_lines"] = sum("underrun occurred" in line for line in stderr_text.splitlines())
    # the runtime counts them itself and says so once when the speaker closes
    counted = re.findall(r"(\d+) underruns \(PortAudio(?:; (\d+) while answer audio played)?\)(?:, (\d+) gaps inside "
                         r"answers)? and (\d+) ALSA xrun recoveries", stderr_text)
    meta["output_underruns"] = sum(int(a) for a, _, _, _ in counted)
    meta["output_underruns_while_playing"] = sum(int(p or 0) for _, p, _, _ in counted)
    meta["gaps_in_answers"] = sum(int(g or 0) for _, _, g, _ in counted)
    meta["alsa_xruns"] = sum(int(c) for _, _, _, c in counted)
    voice_turns: list[Turn] = [t for t in load_audit(audit).turns if t.kind == "voice"]
    return _measure(config, meta, pcm, recording_t0, starts, records_before, voice_turns, stamps, vad_tails,
                    pause_session)


def _settle(audit: Path, quiet_s: float, deadline: float, proc: subprocess.Popen) -> None:
    """Wait until the runtime has been listening for `quiet_s` with no turn ended (at most until `deadline`): a
    turn's record is written when its answer has played, so a second turn started meanwhile shows only as states."""

    def seen() -> tuple[int, str | None]:
        records = [r for r in audit_records(audit) if r.get("kind") in ("voice.turn", "voice.state")]
        states = [r.get("state") for r in records if r.get("kind") == "voice.state"]
        return len(records), states[-1] if states else None

    (count, state), since = seen(), time.monotonic()
    while time.monotonic() < deadline and proc.poll() is None:
        if state in ("listening", "idle", "closed") and time.monotonic() - since >= quiet_s:
            return
        time.sleep(0.05)
        now, state = seen()
        if now != count:
            count, since = now, time.monotonic()


def _measure(config: VoiceBenchConfig, meta: dict[str, Any], pcm: bytes, recording_t0: float | None,
             starts: list[tuple[float, float]], records_before: list[int], voice_turns: list[Turn],
             stamps: StampedReplies, vad_tails: list[float | None],
             pause_session: Sequence[PausePlay] = ()) -> dict[str, Any]:
    mic_pcm, speaker_pcm = split_probe(pcm)
    rate = 16000
    mic, speaker = levels_of(mic_pcm, rate), levels_of(speaker_pcm, rate)
    floor = max(mic.noise_floor_db(), speaker.noise_floor_db())
    threshold = max(config.threshold_db, floor + config.margin_db)
    meta.update({"recording_s": round(len(mic_pcm) / rate, 1), "noise_floor_db": round(floor, 1),
                 "threshold_db": round(threshold, 1), "window_ms": 10, "hop_ms": 1})
    rows = []
    cuts: list[bool] = []
    whole: list[bool] = []  # the utterance's last turn, not interrupted, holds all her words
    sounded: list[bool] = []  # the toy sounded before she was done
    for i, (start_s, start_mono) in enumerate(starts):
        end_s = starts[i + 1][0] if i + 1 < len(starts) else len(mic_pcm) / rate
        heard = find_turn(mic, speaker, start_s, end_s, threshold)
        index = records_before[i]
        next_index = records_before[i + 1] if i + 1 < len(records_before) else len(voice_turns)
        logged = voice_turns[index] if index < min(next_index, len(voice_turns)) else None
        arrival = stamps.first_after(start_mono, starts[i + 1][1] if i + 1 < len(starts) else None)
        sent = None if arrival is None else arrival + config.ttft_ms / 1000.0
        row = breakdown(i + 1, heard, logged, recording_t0=recording_t0, first_token_sent=sent,
                        ttft_ms=config.ttft_ms, hangover_ms=config.hangover_ms, vad_tail_ms=vad_tails[i])
        if pause_session:
            early_ms = (None if row.heard_v2v_ms is None or row.logged_v2v_ms is None
                        else row.logged_v2v_ms - row.heard_v2v_ms)
            cuts.append(was_cut(heard, speaker, start_s, threshold, turns_ended=next_index - index,
                                runtime_early_ms=early_ms))
            sounded.append(sounded_early(heard, speaker, start_s, threshold))
            on_it = voice_turns[index:next_index]  # the turns the runtime ended on this utterance
            whole.append(answered_whole(pause_session[i], on_it[-1].text if on_it else None,
                                        interrupted=bool(on_it) and on_it[-1].interrupted))
            if cuts[-1]:
                row.problem = "cut in a pause" + (", then answered whole" if whole[-1] else "")
            row.text = f"[{pause_session[i].kind}] {pause_session[i].text} → {row.text}"
        rows.append(row)
    if pause_session:
        meta["pause_classes"] = class_summary(pause_session, cuts, [r.heard_v2v_ms for r in rows], whole, sounded)
        meta["pause_language"], meta["whole_sentences"] = config.pause_language, config.whole_sentences
    return summarize_turns(rows, meta)
