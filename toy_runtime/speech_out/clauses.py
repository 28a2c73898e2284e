"""Cut a long sentence into clause-sized pieces for synthesis.

A neural voice synthesizes a whole sentence in one pass: its time and its memory grow with the sentence (piper's joe
voice, measured: 37 characters → +31 MB peak, 74 → +88 MB, 120 → +121 MB, and the first sound only after the whole
pass). Pieces of at most `max_chars`, cut after a clause mark (`, ; :` before a space, `， ； ：`), bound both;
the clause mark keeps its pause in the speech. A clause longer than `max_chars` without a mark stays whole (cutting
inside it would be heard).
"""

from __future__ import annotations

import re

__all__ = ["clause_pieces", "spoken_clauses"]

# after a Latin clause mark only when a space follows ("1,000" and "10:30" stay whole); after a CJK one always
_CUT = re.compile(r"(?<=[,;:])\s+|(?<=[，；：])")


def clause_pieces(text: str, max_chars: int) -> list[str]:
    """`text` in order, as pieces of at most `max_chars` where clause marks allow; [text] when it is short enough or
    `max_chars` <= 0. Joined with single spaces (CJK: directly) the pieces give back the text's words."""
    text = text.strip()
    if max_chars <= 0 or len(text) <= max_chars:
        return [text] if text else []
    clauses = [c for c in _CUT.split(text) if c.strip()]
    pieces: list[str] = []
    for clause in clauses:
        if pieces and len(pieces[-1]) + 1 + len(clause) <= max_chars:
            glue = "" if pieces[-1][-1] in "，；：" else " "
            pieces[-1] = pieces[-1] + glue + clause
        else:
            pieces.append(clause)
    return pieces


# after a CJK mark always; after a Latin one only before a space or the end ("8:00", "3.5" and "1,000" stay whole)
_AFTER_MARK = re.compile(r"(?<=[、，。！？；：])|(?<=[,.!?;:])(?=\s|$)")


def spoken_clauses(text: str) -> list[str]:
    """`text` cut after every clause or sentence mark (English or Chinese), each piece stripped; pieces with
    nothing to say (only marks) are left out. The unit a voice that speaks clause by clause voices at a time."""
    return [c.strip() for c in _AFTER_MARK.split(text) if any(ch.isalnum() for ch in c)]
