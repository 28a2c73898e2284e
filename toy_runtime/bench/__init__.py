"""The mode-comparison bench: replay a labelled dataset in `dual_agent` and `chat_agent_tools` and compare them.

    dataset = load_dataset("bench/datasets/toy_turns.jsonl")     # dataset.py: pydantic-validated conversations
    records = await run_bench(BenchConfig(...), dataset)           # modes.py: the harness
    summary = summarize(records, prices=..., ...)                  # metrics.py: medians, p90, rates
    write_report(out_dir, summary, records)                        # report.py: report.md, report.json, PNG

`oracle.py` answers every request from the dataset labels (in the right protocol) for scripted runs.
"""

from .dataset import Conversation, Dataset, DatasetError, ExpectedEvent, Turn, load_dataset

__all__ = ["Conversation", "Dataset", "DatasetError", "ExpectedEvent", "Turn", "load_dataset"]
