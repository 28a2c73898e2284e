"""A compound request cut into its clauses: "mute and bye" → ["mute", "bye"], "静音然后再见" → ["静音", "再见"].

The offline gate acts on a compound only when every clause is, on its own, a clear request; this module only cuts,
at conjunctions and clause punctuation, in English and Chinese. It knows no event.
"""

from __future__ import annotations

import re
import unicodedata

# "and", "then", "and then", "and also", "after that", "plus" (English words only as whole words); 然后/接着/
# 并且/而且/还有/之后 in Chinese; commas, semicolons and sentence ends in both ("Mute! Bye."). Not 再 or 和: 再见 and 和你 hold them as parts.
_CUT = re.compile(
    r"\s*(?:[,;，；、。！!]|\.(?=\s))\s*(?:(?:and\s+)?(?:then|also)\b|and\b|after\s+that\b|plus\b)?\s*"
    r"|\s+(?:and\s+then|and\s+also|and|then|after\s+that|plus)\s+"
    r"|\s*(?:[,，、]\s*)?(?:然后再(?!见)|再然后|然后|接着|并且|而且|还有|之后)\s*",
    re.IGNORECASE)
_EDGE = re.compile(r"^[\s,.;!?，。；！？、~]+|[\s,.;!?，。；！？、~]+$")
MAX_CLAUSES = 4  # a longer chain is not a clear request: the gate leaves it to the model


def clauses(text: str) -> list[str]:
    """The utterance's clauses, trimmed of edge punctuation; one element when it is not compound."""
    s = unicodedata.normalize("NFKC", text or "").strip()
    parts = [_EDGE.sub("", part) for part in _CUT.split(s)]
    return [part for part in parts if part]
