"""The real-model summary (issue 17): one table row per model × mode × events from `bench modes` report.json files,
a small JSON of the cited numbers, and one plot (cold/warm first-token time and recall per model and mode).

    python scripts/real_model_table.py bench-out/real/1.5b bench-out/real/0.5b \
        --json docs/real-model-summary.json --plot docs/real-model.png

Each directory is one `bench modes` run (one model); its report.json carries the model name. Needs matplotlib for
the plot (the `plots` extra).
"""

from __future__ import annotations

import argparse
import json
import textwrap
from pathlib import Path
from typing import Any


def _dist(d: dict[str, Any]) -> str:
    if not d or not d.get("n"):
        return "–"
    return f"{d['median']:,.0f} / {d['p90']:,.0f}"


def _ratio(r: dict[str, Any]) -> str:
    if not r or not r.get("den"):
        return "–"
    return f"{r['value']:.2f} ({r['num']}/{r['den']})"


def rows(report: dict[str, Any], label: str = "") -> list[dict[str, Any]]:
    """The cited numbers of every group in one report; `label` is appended to the mode (a variant of a run)."""
    out = []
    for key, g in report["groups"].items():
        mode, condition = key.split("/")
        mode += f" ({label})" if label else ""
        lat, tok, acc = g["latency_ms"], g["tokens"], g["accuracy"]
        out.append({
            "model": report["model"], "mode": mode, "events": condition,
            "turns": g["runs"]["turns"], "fault_turns": g["runs"]["fault_turns"],
            "ttft_cold_ms": lat["first_answer_ttft_cold"], "ttft_warm_ms": lat["first_answer_ttft_warm"],
            "first_speech_ms": lat["first_speech"], "turn_ms": lat["total_turn"],
            "prompt_tokens_counted": tok["first_call_prompt_counted"],
            "completion_tokens": tok["chat_completion_per_turn"],
            "calls_per_turn": g["calls"]["llm_calls_per_turn"]["mean"],
            "precision": acc["precision"], "recall": acc["recall"], "multi_event_recall": acc["multi_event_recall"],
            "valid_args_before": acc["valid_before_normalization"], "visible_leaks": acc["visible_leaks"],
        })
    return out


def table(all_rows: list[dict[str, Any]]) -> str:
    """Markdown: one row per model × mode × events."""
    head = ("| model | mode | events | cold TTFT ms (p50 / p90) | warm TTFT ms | server prompt tokens (first call) | "
            "completion tokens / turn | LLM calls / turn | precision | recall | multi-event recall | "
            "valid args (before normalization) | leak turns | turn ms | faults |")
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for r in all_rows:
        on = r["events"] == "enabled"
        lines.append(
            f"| {r['model']} | {r['mode']} | {'on' if on else 'off'} | {_dist(r['ttft_cold_ms'])} | "
            f"{_dist(r['ttft_warm_ms'])} | {_dist(r['prompt_tokens_counted'])} | {_dist(r['completion_tokens'])} | "
            f"{r['calls_per_turn']:.2f} | {_ratio(r['precision']) if on else '–'} | "
            f"{_ratio(r['recall']) if on else '–'} | {_ratio(r['multi_event_recall']) if on else '–'} | "
            f"{_ratio(r['valid_args_before']) if on else '–'} | {r['visible_leaks']} | {_dist(r['turn_ms'])} | "
            f"{r['fault_turns']}/{r['turns']} |")
    return "\n".join(lines)


def plot(all_rows: list[dict[str, Any]], path: str) -> None:
    """Cold and warm first-token p50 and recall, per model × mode, events on."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    on = [r for r in all_rows if r["events"] == "enabled"]
    labels = ["\n".join(textwrap.wrap(f"{r['model'].replace('qwen2.5-coder-', '')} "
                                       f"{r['mode'].replace('chat_agent_tools', 'tools')}", 11)) for r in on]
    fig, (left, right) = plt.subplots(1, 2, figsize=(16, 5.5))
    xs = range(len(on))
    cold = [(r["ttft_cold_ms"].get("median") or 0) / 1000 for r in on]
    warm = [(r["ttft_warm_ms"].get("median") or 0) / 1000 for r in on]
    left.bar([x - 0.2 for x in xs], cold, 0.4, label="cold (p50)")
    left.bar([x + 0.2 for x in xs], warm, 0.4, label="warm (p50)")
    left.axhline(15, color="grey", linestyle="--", linewidth=1, label="default first_token_timeout_s")
    left.set_xticks(list(xs), labels, fontsize=7)
    left.set_ylabel("first-answer TTFT (s)")
    left.legend(fontsize=8)
    right.bar(list(xs), [r["recall"]["value"] or 0 for r in on], 0.5, color="tab:green")
    right.axhline(0.6, color="grey", linestyle="--", linewidth=1, label="aim (issue 17)")
    right.set_xticks(list(xs), labels, fontsize=7)
    right.set_ylim(0, 1)
    right.set_ylabel("event recall")
    right.legend(fontsize=8)
    fig.suptitle("Real local model on 2 shared x86 cores (llama.cpp, Q4_K_M), events on")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="bench modes output directories (each with report.json); DIR:LABEL "
                                                 "marks a variant run in the table")
    parser.add_argument("--json", help="write the cited numbers here")
    parser.add_argument("--plot", help="write the PNG here")
    args = parser.parse_args()
    all_rows = []
    for run in args.runs:
        path, _, label = run.partition(":")
        all_rows += rows(json.loads((Path(path) / "report.json").read_text()), label)
    order = {"enabled": 0, "disabled": 1}
    all_rows.sort(key=lambda r: (order[r["events"]], r["model"], r["mode"]))
    print(table(all_rows))
    if args.json:
        Path(args.json).write_text(json.dumps(all_rows, indent=1) + "\n")
    if args.plot:
        plot(all_rows, args.plot)


if __name__ == "__main__":
    main()
