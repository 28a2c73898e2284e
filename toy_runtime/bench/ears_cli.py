"""`toy-runtime bench ears`: the capture front end on the echo rig (see bench/ears.py for what is measured).

Needs PulseAudio (a private headless daemon is started), espeak-ng (the child's voices) and the piper voice.
Writes ears.json and ears.md to --out and prints the Markdown table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_ears_parser(bench_sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The `ears` command parser."""
    p = bench_sub.add_parser(
        "ears", help="echo cancellation, false barge-ins and the child's words on the virtual card's echo rig",
        description="Play the toy's answers through its speaker into its own mic (delay, attenuation, room noise) "
                    "while a child speaks over some of them; judge the front end frame by frame.")
    p.add_argument("--answers", type=int, default=20, help="answers played (default 20)")
    p.add_argument("--delay-ms", type=int, nargs="+", default=[60], help="echo path delays (default 60)")
    p.add_argument("--gain-db", type=float, default=-6.0, help="echo path gain (default -6 dB)")
    p.add_argument("--noise", nargs="+", default=["none"], choices=["none", "fan", "babble"],
                   help="room noise conditions (default none)")
    p.add_argument("--no-hold-delay", action="store_true",
                   help="do not measure and hold the echo's delay behind the render (audio/echo_delay.py)")
    p.add_argument("--no-barge-in", action="store_true",
                   help="keep playing over the child (measures the child's words under the toy's whole answer)")
    p.add_argument("--recognizer-echo", choices=["linear", "aec3"], default="linear",
                   help="what the recognizer hears, as [ears] recognizer_echo (default linear: speexdsp's copy, "
                        "with AEC3's own output scored beside it on the same capture)")
    p.add_argument("--recognizer", choices=["whisper", "pocketsphinx"], default="whisper",
                   help="what judges the child's words (default whisper, the runtime's default)")
    p.add_argument("--barge-in-margin-db", type=float, default=None,
                   help="as [ears] barge_in_margin_db: how much louder than the room speech over the toy must be "
                        "(default: the setting's, 12; 0 = the VAD alone)")
    p.add_argument("--keep-audio", action="store_true",
                   help="also write each condition's capture (raw, cleaned, reference, speech starts) as .npz, "
                        "to re-score an own-voice check offline")
    p.add_argument("--out", default="bench-out/ears", help="directory for ears.json and ears.md")
    p.set_defaults(func=cmd_bench_ears)
    return p


def cmd_bench_ears(args: argparse.Namespace) -> int:
    """Run every condition, write the report, print it."""
    import asyncio
    import shutil

    from ..adapters.piper_tts import PiperSynthesizer
    from ..app.engines import build_recognizer
    from ..config import load_settings
    from ..testing.pulse import VirtualSoundCard, pulseaudio_available
    from .ears import EarsPlan, analyse, capture_on_rig, noise_pcm

    if not pulseaudio_available() or shutil.which("espeak-ng") is None:
        print("bench ears needs PulseAudio and espeak-ng (apt install pulseaudio pulseaudio-utils espeak-ng)",
              file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    voice = PiperSynthesizer(deterministic=True)
    recognizer = build_recognizer(load_settings(None, env={"TOY_ASR__ENGINE": args.recognizer}))
    rows = []
    for delay in args.delay_ms:
        for noise in args.noise:
            plan = EarsPlan(answers=args.answers, delay_ms=delay, gain_db=args.gain_db, noise=noise,
                            barge_in=not args.no_barge_in)
            with VirtualSoundCard() as card:
                card.add_echo_path(delay_ms=delay, gain_db=args.gain_db)
                if noise != "none":
                    card.add_room_noise(noise_pcm(noise, 20.0), 16000)
                with card.applied_env():
                    result = asyncio.run(capture_on_rig(card, plan, voice, hold_delay=not args.no_hold_delay,
                                                         recognizer_echo=args.recognizer_echo,
                                                         barge_in_margin_db=args.barge_in_margin_db))
            figures = analyse(result, recognizer=recognizer)
            if args.keep_audio:
                keep_capture(out / f"capture-{delay}ms-{noise}.npz", result)
            rows.append({"delay_ms": delay, "noise": noise, "gain_db": args.gain_db, **figures})
            print(f"delay {delay} ms, noise {noise}: ERLE {figures['erle_db']} dB, "
                  f"{figures['false_barge_ins']} false barge-ins in {figures['answers']} answers", file=sys.stderr)
    (out / "ears.json").write_text(json.dumps(rows, indent=1, ensure_ascii=False))
    table = markdown(rows)
    (out / "ears.md").write_text(table)
    print(table)
    return 0


def keep_capture(path: Path, result) -> None:
    """One condition's capture as arrays: what the mic heard, what the listener got, the render, the child clips'
    starts (capture seconds, over an answer or not) and the own-voice checks made live."""
    import numpy as np

    np.savez_compressed(
        path, raw=result.raw, clean=result.clean, ref=result.ref, cancelled=result.cancelled,
        clip_start_s=np.array([c.start_s if c.start_s is not None else np.nan for c in result.clips]),
        clip_over=np.array([c.over_answer for c in result.clips]),
        clip_samples=np.array([len(c.pcm) // 2 for c in result.clips]),
        checks=np.array(result.own_voice_checks, dtype=float).reshape(-1, 3),
        reference_timeline=np.array(result.reference_timeline, dtype=float).reshape(len(result.reference_timeline), -1),
        speech_floors=result.speech_floors if result.speech_floors is not None else np.zeros(0))


def markdown(rows: list[dict]) -> str:
    """The report table: one row per condition."""
    head = ("| delay | noise | ERLE (first 2 s / converged) | false barge-ins / answers | VAD speech on echo "
            "(raw → clean) | VAD speech on the room (raw → clean) | barge-in detect p50/p90 | stop p50/p90 | child "
            "words right over answer / in silence (AEC3's copy) | front end CPU |")
    lines = [head, "|---" * 10 + "|"]
    for r in rows:
        det, stop = r["barge_in_detect_ms"] or {}, r["barge_in_stop_ms"] or {}
        lines.append(
            f"| {r['delay_ms']} ms | {r['noise']} | {r['erle_db']} dB ({r['erle_first_2s_db']} / "
            f"{r['erle_converged_db']}) | {r['false_barge_ins']} / {r['answers']} | "
            f"{100 * r['vad_speech_on_echo_raw']:.0f} % → {100 * r['vad_speech_on_echo_clean']:.1f} % | "
            f"{100 * r['vad_speech_on_room_raw']:.0f} % → {100 * r['vad_speech_on_room_clean']:.1f} % | "
            f"{det.get('p50')} / {det.get('p90')} ms ({r['barge_ins_detected']}) | {stop.get('p50')} / "
            f"{stop.get('p90')} ms | {r['words_right_over_answer_pct']} % / {r['words_right_in_silence_pct']} %"
            f"{_aec3_words(r)} | "
            f"{r['cpu_pct_of_core']} % |")
    return "\n".join(lines) + "\n"


def _aec3_words(row: dict) -> str:
    """ " (AEC3: over / silence)" when the recognizer heard another copy and AEC3's was scored beside it."""
    if "aec3_words_right_over_answer_pct" not in row:
        return ""
    return f" (AEC3: {row['aec3_words_right_over_answer_pct']} % / {row['aec3_words_right_in_silence_pct']} %)"
