"""The per-turn latency waterfall: a PNG (matplotlib, Agg, no pyplot) and a self-contained HTML page around it."""

from __future__ import annotations

import base64
import html
import io
from datetime import datetime
from typing import Sequence

from .turns import TEXT_STAGES, VOICE_STAGES, AuditScan, Turn, clock_text, events_text, short_text, summary_stats

__all__ = ["MAX_PLOTTED", "PLOTS_HINT", "render_html", "render_png"]

MAX_PLOTTED = 60  # turns drawn in the picture (the latest ones); the HTML table lists them all
_LEGEND_IN = 0.55  # height of the legend strip under the plot (two rows of six entries at most), inches
PLOTS_HINT = "matplotlib is not installed: pip install 'toy-runtime[plots]' (or pip install matplotlib)"

_COLORS = {
    "endpoint": "#9DA5B4",
    "endpoint_decided": "#C7CCD4",
    "asr_final": "#5B8DB8",
    "first_token": "#E39C3C",
    "first_text": "#F2C75C",
    "first_clause_synthesized": "#6BAF6B",
    "first_audio": "#3F7F5F",
    "first_speech": "#6BAF6B",
}


# -- the picture -----------------------------------------------------------------------------------------


def render_png(turns: Sequence[Turn], *, title: str = "") -> bytes:
    """The waterfall picture as PNG bytes (ImportError with an install hint when matplotlib is missing)."""
    try:
        from matplotlib.artist import Artist
        from matplotlib.figure import Figure
        from matplotlib.patches import Patch
        from matplotlib.lines import Line2D
    except ImportError as exc:
        raise ImportError(PLOTS_HINT) from exc

    shown = list(turns)[-MAX_PLOTTED:]
    height = 1.4 + 0.42 * max(len(shown), 1)
    # A bare Figure (no pyplot): Agg rendering, no global state, no display needed.
    fig = Figure(figsize=(11, height + _LEGEND_IN), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    used: set[str] = set()
    labels = []
    for row, turn in enumerate(shown):
        y = len(shown) - 1 - row  # the first turn on top
        labels.append(f"{turn.kind} {turn.label}  {clock_text(turn.ts)}  {short_text(turn.text, 24)}".rstrip())
        stages = VOICE_STAGES if turn.kind == "voice" else TEXT_STAGES
        names = dict(stages)
        points = sorted(((ms, key) for key, ms in turn.milestones.items() if key in names), key=lambda p: p[0])
        start = 0.0
        for ms, key in points:
            width = max(ms - start, 0.0)
            ax.barh(y, width, left=start, height=0.55, color=_COLORS.get(key, "#888888"), edgecolor="white",
                    linewidth=0.6)
            used.add(key)
            start = max(start, ms)
        headline = turn.voice_to_voice_ms if turn.kind == "voice" else turn.first_speech_ms
        if headline is not None:  # right after the bar: the figure that matters most for the turn
            ax.annotate(f"{headline:.0f} ms", (start, y), xytext=(4, -3), textcoords="offset points", fontsize=8,
                        fontweight="bold")
        if turn.kind == "text" and turn.total_ms is not None and turn.total_ms > start:
            ax.plot([start, turn.total_ms], [y - 0.12, y - 0.12], color="#555555", linewidth=1.0)
            ax.plot([turn.total_ms], [y - 0.12], marker="|", markersize=10, color="#555555")
        if turn.second_answer_ms is not None:
            ax.plot([turn.second_answer_ms], [y], marker="^", markersize=9, color="#C0392B", linestyle="none")
        for k, event in enumerate(turn.events):
            if event.at_ms is not None:
                ax.plot([event.at_ms], [y + 0.33], marker="D", markersize=6, color="#8E44AD", linestyle="none")
                ax.annotate(event.name.rsplit(".", 1)[-1], (event.at_ms, y + 0.33), xytext=(4, 2),
                            textcoords="offset points", fontsize=7, color="#8E44AD")
            elif event.latency_ms is not None:
                offset = -0.32 - 0.1 * k
                ax.barh(y + offset, event.latency_ms, left=0, height=0.08, color="none", edgecolor="#8E44AD",
                        hatch="////", linewidth=0.6)
                label = f"{event.name.rsplit('.', 1)[-1]} {event.latency_ms:.0f} ms"
                ax.annotate(label, (event.latency_ms, y + offset),
                            xytext=(3, -3), textcoords="offset points", fontsize=6, color="#8E44AD")
    ax.set_yticks(range(len(shown)))
    ax.set_yticklabels(list(reversed(labels)), fontsize=8)
    ax.set_xlabel("ms after the end of speech (spoken turns) / after the turn started (text turns)")
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    ax.margins(x=0.12)
    order = [key for key, _ in VOICE_STAGES + TEXT_STAGES]
    labels_of = dict(TEXT_STAGES + VOICE_STAGES)
    handles: list[Artist] = [Patch(color=_COLORS.get(key, "#888888"), label=labels_of[key])
               for key in sorted(used, key=order.index)]
    if any(t.second_answer_ms is not None for t in shown):
        handles.append(Line2D([], [], marker="^", color="#C0392B", linestyle="none", label="second answer"))
    if any(e.at_ms is not None for t in shown for e in t.events):
        handles.append(Line2D([], [], marker="D", color="#8E44AD", linestyle="none", label="event finished"))
    if any(e.latency_ms is not None and e.at_ms is None for t in shown for e in t.events):
        handles.append(Patch(facecolor="none", edgecolor="#8E44AD", hatch="////", label="event duration (text)"))
    if any(t.kind == "text" and t.total_ms is not None for t in shown):
        handles.append(Line2D([], [], marker="|", color="#555555", label="turn total (text)"))
    fig.legend(handles=handles, fontsize=7, loc="lower center", ncol=6, frameon=False)
    more = f" (latest {len(shown)} of {len(turns)} turns)" if len(turns) > len(shown) else ""
    ax.set_title((title or "per-turn latency waterfall") + more, fontsize=10)
    fig.tight_layout(rect=(0, _LEGEND_IN / (height + _LEGEND_IN), 1, 1))
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


# -- HTML ------------------------------------------------------------------------------------------------


def _cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}"


def render_html(scan: AuditScan, png: bytes) -> str:
    """One self-contained page: the picture (base64), the summary statistics and a table row per turn."""
    esc = html.escape
    stats_rows = "".join(
        f"<tr><td>{esc(title)}</td><td>{row['n']}</td><td>{_cell(row['median'])}</td><td>{_cell(row['p90'])}</td></tr>"
        for title, row in summary_stats(scan.turns).items()
    )
    turn_rows = []
    for t in scan.turns:
        first = t.milestones.get("first_audio") if t.kind == "voice" else t.first_speech_ms
        turn_rows.append(
            f'<tr class="turn {t.kind}"><td>{esc(t.kind)} {esc(t.label)}</td><td>{clock_text(t.ts)}</td>'
            f"<td>{esc(t.text)}</td><td>{_cell(t.milestones.get('endpoint'))}</td>"
            f"<td>{_cell(t.milestones.get('asr_final'))}</td><td>{_cell(t.ttft_ms)}</td>"
            f"<td>{_cell(t.first_clause_tts_ms)}</td><td>{_cell(first)}</td><td>{_cell(t.voice_to_voice_ms)}</td>"
            f"<td>{_cell(t.runtime_added_ms)}</td><td>{_cell(t.second_answer_ms)}</td><td>{_cell(t.total_ms)}</td>"
            f"<td>{esc(events_text(t))}</td><td>{esc(t.path or '')}{esc(' / ' + t.fault if t.fault else '')}</td></tr>"
        )
    image = base64.b64encode(png).decode("ascii")
    generated = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    skipped = f" · {scan.malformed} malformed line(s) skipped" if scan.malformed else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>toy-runtime latency report</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; font-size: 0.85em; }}
th, td {{ border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: right; }}
td:nth-child(3), td:nth-child(13) {{ text-align: left; }}
th {{ background: #f3f3f3; }}
img {{ max-width: 100%; }}
</style></head><body>
<h1>Per-turn latency</h1>
<p>{esc(scan.source)} · {len(scan.turns)} turn(s){skipped} · generated {generated}</p>
<img alt="per-turn latency waterfall" src="data:image/png;base64,{image}">
<h2>Summary (ms)</h2>
<table><tr><th>metric</th><th>n</th><th>median</th><th>p90</th></tr>{stats_rows}</table>
<h2>Turns (ms after the end of speech; text turns: after the turn started)</h2>
<table>
<tr><th>turn</th><th>time</th><th>text</th><th>endpoint</th><th>ASR final</th><th>TTFT</th><th>TTS 1st clause</th>
<th>first audio / speech</th><th>voice-to-voice</th><th>runtime-added</th><th>second answer</th><th>total</th>
<th>events</th><th>path</th></tr>
{''.join(turn_rows)}
</table>
</body></html>
"""
