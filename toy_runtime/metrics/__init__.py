"""Observability: per-turn latency reports from the audit log and start-up progress display.

- `report`    `toy-runtime report AUDIT.jsonl [--out report.html|report.png]`: waterfall picture + console summary
- `turns`     audit records → one `Turn` per turn, and the median/p90 statistics
- `waterfall` the picture (PNG) and the HTML page around it
- `progress`  `LoadingProgress`: "loading ASR model… done 820 ms" lines (spinner on a TTY) while models load

matplotlib is imported only when a picture is rendered (extra `toy-runtime[plots]`).
"""

from .progress import LoadingProgress

__all__ = ["LoadingProgress"]
