"""Writes a bench summary: DIR/report.md (Markdown tables), DIR/report.json, DIR/records.jsonl and PNG plots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

PLOT_FILE = "ttft_tokens.png"


def write_report(out_dir: str | Path, summary: Mapping[str, Any],
                 records: Sequence[Mapping[str, Any]] = ()) -> dict[str, Path]:
    """Write every report file; returns their paths by kind."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": out / "report.md", "json": out / "report.json", "records": out / "records.jsonl",
             "plot": out / PLOT_FILE}
    paths["json"].write_text(json.dumps(summary, ensure_ascii=False, indent=2), encoding="utf-8")
    with paths["records"].open("w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
    paths["markdown"].write_text(markdown(summary), encoding="utf-8")
    plot(summary, paths["plot"])
    return paths


# -- Markdown -----------------------------------------------------------------------------------------

def _ms(d: Mapping[str, Any] | None) -> str:
    if not d or not d.get("n"):
        return "–"
    return f"{d['median']:.0f} / {d['p90']:.0f} (n={d['n']})"


def _num(d: Mapping[str, Any] | None, digits: int = 0) -> str:
    if not d or not d.get("n"):
        return "–"
    return f"{d['median']:.{digits}f} / {d['p90']:.{digits}f} (n={d['n']})"


def _mean(d: Mapping[str, Any] | None) -> str:
    if not d or not d.get("n"):
        return "–"
    return f"{d['mean']:.2f} (n={d['n']})"


def _rate(r: Mapping[str, Any] | None) -> str:
    if not r or r.get("value") is None:
        return "–"
    return f"{r['value']:.3f} ({r['num']}/{r['den']})"


def _usd(value: float | None, digits: int = 6) -> str:
    return "null" if value is None else f"${value:.{digits}f}"


Cell = Callable[[Mapping[str, Any]], str]  # a group's summary → one table cell
Row = tuple[str, Cell]


def _event_latency(name: str) -> Cell:
    return lambda x: _ms(x["events"]["latency_ms"].get(name))


def _calls_in(category: str) -> Cell:
    def cell(x: Mapping[str, Any]) -> str:
        by_category = x["calls"]["llm_calls_by_category"]
        return f"{by_category[category]:.2f}" if category in by_category else "–"
    return cell


def _table(groups: Mapping[str, Mapping[str, Any]], rows: Sequence[Row]) -> str:
    names = list(groups)
    lines = ["| metric | " + " | ".join(f"`{n}`" for n in names) + " |",
             "|---|" + "---|" * len(names)]
    for label, cell in rows:
        lines.append(f"| {label} | " + " | ".join(cell(groups[n]) for n in names) + " |")
    return "\n".join(lines)


def markdown(summary: Mapping[str, Any]) -> str:
    """The report as Markdown: one table per concern, groups (mode/condition) as columns."""
    g = summary["groups"]
    meta = summary.get("meta") or {}
    out = ["# Mode comparison: dual_agent vs chat_agent_tools", ""]
    out.append(f"Model `{summary['model']}`, event model `{summary['event_model']}`. "
               + ", ".join(f"{k}: {v}" for k, v in meta.items() if not isinstance(v, (dict, list))))
    out += ["", "Cells: median / p90 (n = number of values) unless noted; rates: value (num/den). "
            "Groups are `mode/condition`: `disabled` = no events enabled (no catalog, no tools), "
            "`enabled` = all four events.", ""]

    out += ["## Runs", "", _table(g, [
        ("turns (completed)", lambda x: f"{x['runs']['turns']} ({x['runs']['completed_turns']})"),
        ("conversations × repeats", lambda x: f"{x['runs']['conversations']}"),
        ("provider-fault turns", lambda x: f"{x['runs']['fault_turns']} {x['runs']['faults'] or ''}".strip()),
        ("harness errors", lambda x: str(sum(x['runs']['harness_errors'].values()))),
    ]), ""]

    out += ["## Latency (ms)", "", _table(g, [
        ("first-answer TTFT", lambda x: _ms(x["latency_ms"]["first_answer_ttft"])),
        ("first-answer TTFT, cold (uncached prefix)", lambda x: _ms(x["latency_ms"].get("first_answer_ttft_cold"))),
        ("first-answer TTFT, warm (later turns)", lambda x: _ms(x["latency_ms"].get("first_answer_ttft_warm"))),
        ("first-answer TTFT, ordinary turns", lambda x: _ms(x["latency_ms"]["first_answer_ttft_ordinary"])),
        ("first-answer TTFT, event turns", lambda x: _ms(x["latency_ms"]["first_answer_ttft_event_turns"])),
        ("first-answer completion", lambda x: _ms(x["latency_ms"]["first_answer_completion"])),
        ("first speech segment", lambda x: _ms(x["latency_ms"]["first_speech"])),
        ("second-answer TTFT", lambda x: _ms(x["latency_ms"]["second_answer_ttft"])),
        ("total turn", lambda x: _ms(x["latency_ms"]["total_turn"])),
        ("event-dispatch delay", lambda x: _ms(x["events"]["dispatch_delay_ms"])),
    ]), ""]

    event_names = sorted({n for x in g.values() for n in x["events"]["latency_ms"]})
    if event_names:
        out += ["### Per-event latency (ms, detection → result)", "", _table(g, [
            (f"`{name}`", _event_latency(name)) for name in event_names
        ]), ""]

    out += ["## Tokens, calls and cost", "", _table(g, [
        ("ChatAgent prompt tokens / turn", lambda x: _num(x["tokens"]["chat_prompt_per_turn"])),
        ("ChatAgent first-call prompt tokens, server-counted",
         lambda x: _num(x["tokens"].get("first_call_prompt_counted"))),
        ("… estimate, only where the server counted none",
         lambda x: _num(x["tokens"].get("first_call_prompt_estimated"))),
        ("… counted by", lambda x: ", ".join(f"{k}: {v}" for k, v in
                                            (x["tokens"].get("first_call_prompt_source") or {}).items()) or "–"),
        ("ChatAgent completion tokens / turn", lambda x: _num(x["tokens"]["chat_completion_per_turn"])),
        ("token source (calls)", lambda x: ", ".join(f"{k}: {v}" for k, v in x["tokens"]["usage_source"].items())),
        ("LLM calls / turn (mean)", lambda x: _mean(x["calls"]["llm_calls_per_turn"])),
        ("ordinary turns with exactly 1 call", lambda x: _rate(x["calls"]["ordinary_turns_one_call"])),
        ("turns with a second ChatAgent call", lambda x: _rate(x["calls"]["second_chat_call_turns"])),
        ("EventAgent calls (total)", lambda x: str(x["event_agent"]["calls"])),
        ("EventAgent fallback rate (events)", lambda x: _rate(x["event_agent"]["fallback_rate"])),
        ("EventAgent tokens (total)", lambda x: str(x["event_agent"]["tokens_total"])),
        ("cost per 1,000 turns (USD)", lambda x: "null" if x["cost_usd"] is None
         else _usd(x["cost_usd"]["per_1k_turns"]["mean"], 3)),
        ("cost total (USD)", lambda x: "null" if x["cost_usd"] is None else _usd(x["cost_usd"]["total"])),
        ("cost / successful event (USD)", lambda x: "null" if x["cost_usd"] is None
         else _usd(x["cost_usd"]["per_successful_event"])),
    ]), ""]
    categories = sorted({c for x in g.values() for c in x["calls"]["llm_calls_by_category"]})
    out += ["### LLM calls per turn by category (mean)", "", _table(g, [
        (c, _calls_in(c)) for c in categories
    ]), ""]

    enabled = {k: v for k, v in g.items() if v["events"]["count"] or k.endswith("/enabled")}
    if enabled:
        out += ["## Event accuracy (enabled events only)", "", _table(enabled, [
            ("event-selection precision", lambda x: _rate(x["accuracy"]["precision"])),
            ("event-selection recall", lambda x: _rate(x["accuracy"]["recall"])),
            ("multiple-event recall", lambda x: _rate(x["accuracy"]["multi_event_recall"])),
            ("status accuracy (incl. clarification)", lambda x: _rate(x["accuracy"]["status_accuracy"])),
            ("argument accuracy vs labels", lambda x: _rate(x["accuracy"]["argument_accuracy"])),
            ("valid args before normalization (all proposals)",
             lambda x: _rate(x["accuracy"]["valid_before_normalization"])),
            ("… ChatAgent tool-call proposals", lambda x: _rate(x["accuracy"]["valid_before_chat_proposals"])),
            ("… EventAgent fallback proposals", lambda x: _rate(x["accuracy"]["valid_before_fallback_proposals"])),
            ("valid args after normalization", lambda x: _rate(x["accuracy"]["valid_after_normalization"])),
            ("execution success", lambda x: _rate(x["accuracy"]["execution_success"])),
            ("deterministic-resolution hit rate (no EventAgent LLM)", lambda x: _rate(x["resolution"]["deterministic_hit_rate"])),
            ("correct events / expected", lambda x: _rate(x["accuracy"]["correct_events"])),
            ("first answer spoken before search result", lambda x: _rate(x["accuracy"]["first_answer_before_search"])),
            ("turns with unspeakable text spoken (guard's detector)", lambda x: str(x["accuracy"]["visible_leaks"])),
            ("turns where the guard hid text before speech",
             lambda x: _rate(x["speakable_guard"]["turns_with_hidden_text"])),
            ("turns whose answer claimed an action no event backed (model)",
             lambda x: str(x.get("truth", {}).get("turns_with_unbacked_claim", "–"))),
            ("… promises left standing (no event, no correction spoken)",
             lambda x: str(x.get("truth", {}).get("promises_left", "–"))),
            ("unasked disruptive events that succeeded", lambda x: str(x.get("truth", {}).get(
                "unasked_disruptive_succeeded", "–"))),
            ("turns where a holding cue played (the answer was late)", lambda x: str(x.get("truth", {}).get(
                "turns_with_holding_cue", "–"))),
            ("Chinese turns answered in Chinese", lambda x: "{}/{}".format(
                x.get("truth", {}).get("zh_answered_in_zh", "–"), x.get("truth", {}).get("zh_turns", "–"))),
        ]), ""]

        out += ["## Direct-mode behaviour: visible content vs native tool calls", "",
                "Event turns = turns where at least one event was detected. 'No visible content' = the first "
                "answer streamed no text at all; 'content after first tool-call delta' = the first visible content "
                "delta came after the first native tool-call delta of the same stream (or never came). Measured on "
                "the stream the ChatAgent consumes; the harness neither reorders nor hides anything.", "",
                _table(enabled, [
                    ("event turns", lambda x: str(x["direct_mode"]["event_turns"])),
                    ("no visible content in first answer", lambda x: _rate(x["direct_mode"]["no_visible_content"])),
                    ("content after first tool-call delta",
                     lambda x: _rate(x["direct_mode"]["content_after_first_tool_call"])
                     if x["direct_mode"]["content_after_first_tool_call"] else "n/a (no tool calls)"),
                    ("reply spoken before the first event settled",
                     lambda x: _rate(x["direct_mode"].get("reply_before_first_event"))),
                    ("TTFT median: no-event turns → event turns", lambda x: " → ".join(
                        "–" if v is None else f"{v:.0f}" for v in x["direct_mode"]["ttft_ordinary_vs_event_turns_ms"])),
                ]), ""]

    cost = summary.get("prompt_cost")
    if cost:
        out += ["## Catalog vs schema prompt cost (measured on its own)", "",
                f"Enabled registry: {cost['events']} events; token estimate: {cost['estimator']}.", "",
                "| ChatAgent capability context | tokens | chars |", "|---|---|---|",
                f"| dual_agent: catalog system message | {cost['catalog_message_tokens']} | {cost['catalog_chars']} |",
                f"| chat_agent_tools: tool instruction message | {cost['tools_instruction_tokens']} | – |",
                f"| chat_agent_tools: `tools` JSON schemas | {cost['tools_schema_tokens']} | "
                f"{cost['tools_schema_chars']} |", "",
                "| event | catalog line tokens | schema tokens |", "|---|---|---|"]
        out += [f"| `{name}` | {v['catalog_line_tokens']} | {v['schema_tokens']} |"
                for name, v in cost["per_event"].items()]
        out.append("")

    if summary.get("notes"):
        out += ["## Notes", ""] + [f"- {n}" for n in summary["notes"]] + [""]
    out += [f"Plot: `{PLOT_FILE}`.", ""]
    return "\n".join(out)


# -- plot -----------------------------------------------------------------------------------------------

def first_call_prompt(group: Mapping[str, Any]) -> Mapping[str, Any]:
    """The server-counted first-call prompt tokens, or the estimate when the server counted none."""
    counted = group["tokens"].get("first_call_prompt_counted") or {}
    return counted if counted.get("n") else group["tokens"]["first_call_prompt"]


def plot(summary: Mapping[str, Any], path: str | Path) -> None:
    """First-answer TTFT, total turn latency and ChatAgent first-call prompt tokens per mode/condition."""
    import matplotlib

    matplotlib.use("Agg")  # headless: never needs a display
    import matplotlib.pyplot as plt

    groups = summary["groups"]
    names = list(groups)
    panels = [
        ("first-answer TTFT, cold (ms)", lambda x: x["latency_ms"].get("first_answer_ttft_cold") or {}),
        ("first-answer TTFT, warm (ms)", lambda x: x["latency_ms"].get("first_answer_ttft_warm") or {}),
        ("total turn latency (ms)", lambda x: x["latency_ms"]["total_turn"]),
        ("ChatAgent first-call prompt tokens", lambda x: first_call_prompt(x)),
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.0))
    colors = ["#4C72B0" if n.startswith("dual_agent") else "#DD8452" for n in names]
    for ax, (title, pick) in zip(axes, panels):
        medians = [pick(groups[n]).get("median") or 0 for n in names]
        p90 = [pick(groups[n]).get("p90") or 0 for n in names]
        positions = range(len(names))
        ax.bar(positions, medians, color=colors, label="median")
        ax.scatter(positions, p90, color="black", marker="_", s=300, zorder=3, label="p90")
        ax.set_xticks(list(positions))
        ax.set_xticklabels([n.replace("chat_agent_tools", "tools").replace("dual_agent", "dual").replace("/", "\n")
                            for n in names], fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{summary['model']}: dual_agent (blue) vs chat_agent_tools (orange); bar = median, dash = p90",
                 fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
