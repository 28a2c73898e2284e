"""The outside-in voice bench report: `voice.json` (every number) and `voice.md` (the tables people read)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from .voice_breakdown import LINES

__all__ = ["markdown", "write_voice_report"]


def _cell(dist: Mapping[str, Any], key: str) -> str:
    value = dist.get(key)
    return "–" if value is None else f"{value:.0f}"


def _row(label: str, dist: Mapping[str, Any]) -> str:
    return f"| {label} | {_cell(dist, 'p50')} | {_cell(dist, 'p90')} | {dist.get('n', 0)} |"


def _memory_line(meta: Mapping[str, Any]) -> str:
    by_turn = [r for r in meta.get("rss_by_turn_mb") or [] if r is not None]
    if meta.get("rss_loaded_mb") is None and not by_turn:
        return "Memory: not measured."
    peak = max(by_turn, default=None)
    at = (by_turn.index(peak) + 1) if peak is not None else None
    return (f"Memory (RSS of the runtime): {meta.get('rss_loaded_mb')} MB loaded, "
            + (f"{peak} MB at most between turns (after turn {at} of {len(by_turn)}), " if peak is not None else "")
            + (f"{meta['rss_peak_in_use_mb']} MB peak during use (VmHWM), " if meta.get("rss_peak_in_use_mb") else "")
            + f"{meta.get('rss_after_mb')} MB at the end; session {meta.get('session', 'plain')}"
            + (f", event results {', '.join(meta['event_results'])}" if meta.get("event_results") else "") + ".")


def _pause_lines(meta: Mapping[str, Any]) -> list[str]:
    """The pause session's table (voice_pauses.py): cuts and heard voice to voice per class; nothing otherwise."""
    classes = meta.get("pause_classes")
    if not classes:
        return []
    voiced = "voiced whole and cut at the pauses" if meta.get("whole_sentences") else "parts voiced apart"
    out = [f"The pause corpus ({meta.get('pause_language')}, {voiced}): a *cut* is a turn ended before the child "
           "had finished (the runtime's end of speech in a pause, two turns on one utterance, or the toy sounding "
           "before she was done); *then answered whole*: of those, the ones whose last turn held all her words "
           "(she went on and the toy answered the whole sentence); *heard as cut*: the toy sounded before she was "
           "done, or she got an answer to part of it; heard v2v over the ones not heard as cut.", "",
           "| class | utterances | cut | then answered whole | heard as cut | heard v2v p50 | p90 |",
           "|---|---|---|---|---|---|---|"]
    for kind, row in classes.items():
        cells = ["–" if row[k] is None else f"{row[k]:.0f}" for k in ("heard_p50_ms", "heard_p90_ms")]
        out.append(f"| {kind} | {row['utterances']} | {row['cut']} | {row.get('cut_answered_whole', 0)} | "
                   f"{row.get('heard_as_cut', row['cut'])} | {cells[0]} ms | {cells[1]} ms |")
    return out + [""]


def markdown(summary: Mapping[str, Any]) -> str:
    """The report as Markdown: headline, breakdown, per-turn rows, conditions."""
    meta = summary["meta"]
    out = [
        "# Voice-to-voice, heard from outside",
        "",
        f"`toy-runtime run` on the virtual sound card; scripted LLM TTFT {meta['ttft_ms']:.0f} ms, VAD hangover "
        f"{meta['hangover_ms']} ms, events {'on' if meta['events'] else 'off'}; "
        f"{summary['turns_measured']} of {summary['turns_attempted']} turns measured"
        + (f"; in {summary['early_ends']} the runtime's end of speech came before the user stopped (VAD missed the"
           " last words, or a pause cut the utterance): heard and added include them, the other rows do not."
           if summary["early_ends"] else "."),
        "",
        "| ms | p50 | p90 | n |",
        "|---|---|---|---|",
        _row("**heard v2v** (reply onset − end of speech)", summary["heard_v2v_ms"]),
        _row("added (heard − TTFT − hangover)", summary["added_ms"]),
        _row("runtime-logged v2v", summary["logged_v2v_ms"]),
        _row("heard − runtime-logged (unseen by the runtime)", summary["unseen_ms"]),
        "",
        *_pause_lines(meta),
        _memory_line(meta),
        "",
        "Breakdown (each line's own p50/p90; per turn the lines add up to the heard total):",
        "",
        "| line | p50 | p90 | n |",
        "|---|---|---|---|",
    ]
    for key, label in LINES:
        suffix = " — unseen by the runtime" if key in ("vad_overhang", "capture", "output") else ""
        out.append(_row(label + suffix, summary["lines_ms"][key]))
    out.append(_row("sum of the lines", summary["line_sum_ms"]))
    out += ["", "Per turn (ms):", "",
            "| # | heard | logged | unseen | " + " | ".join(k for k, _ in LINES) + " | heard text / problem |",
            "|" + "---|" * (5 + len(LINES))]
    for t in summary["turns"]:
        cells = [t["heard_v2v_ms"], t["logged_v2v_ms"], t["unseen_ms"], *(t["lines_ms"].get(k) for k, _ in LINES)]
        text = t["problem"] or (t["text"] + (" (runtime's end of speech early)" if t["early_end"] else ""))
        out.append(f"| {t['turn']} | " + " | ".join("–" if c is None else f"{c:.0f}" for c in cells)
                   + f" | {text} |")
    out += ["", "Conditions: " + ", ".join(f"{k}={v}" for k, v in meta.items()), ""]
    return "\n".join(out)


def write_voice_report(out_dir: str | Path, summary: Mapping[str, Any]) -> dict[str, Path]:
    """Write voice.json and voice.md into `out_dir`; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "voice.json", "markdown": out / "voice.md"}
    paths["json"].write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    paths["markdown"].write_text(markdown(summary))
    return paths
