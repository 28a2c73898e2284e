"""Streaming removal of markup from model text: what a small model writes for a screen, never for a speaker.

`MarkupFilter` is fed content deltas and returns, in order, `Text` that may be spoken and `Hidden` items that must
not: HTML (two `html_text.HtmlText` stages in front: tags, comments, script and style content; references decoded,
then parsed again), markdown (emphasis, headings, bullets, rules, quotes, table pipes, code fences, inline code, link
targets; a link keeps its text), emoji, XML-like tags and the blocks of tool-call tags (`<tool_call>…</tool_call>`,
`<tools>…</tools>`, `<function=name>…</function>`, `<agent_events>…</agent_events>`, `<think>…</think>`), and
anything in braces (a JSON object, a list of them, or template-copied doubled braces). Hidden blocks carry the JSON
values found inside them (decoded with `json`), so a tool call written as text can be recovered by the caller.

A `<` or `>` is never released as text: between two numbers it is said in words ("3 less than 5"; "3小于5" in a
Chinese reply), anywhere else it is hidden.

Text is held back only while a prefix could still become markup: a `<` until its tag closes or is ruled out, a line
start until a bullet or heading marker is ruled out, one character after `]`, `_` or `~`, a run of backticks. Plain
text passes through at once. Pure and synchronous; one filter per reply.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..language import has_cjk
from .html_text import HtmlText
from .markup_items import Hidden, Text

__all__ = ["BLOCK_TAGS", "Hidden", "MarkupFilter", "Text", "json_values"]

# block tags whose whole content is hidden; the value says what the block is
BLOCK_TAGS = {"tool_call": "tool_call", "tools": "tool_call", "function": "tool_call", "tool_calls": "tool_call",
              "agent_events": "event_block", "think": "reasoning"}
_MAX_TAG = 80  # a `<` not closed within this many characters is text ("3 < 5 and ...")

_EMOJI = ("\U0001F000-\U0001FAFF\u2600-\u27BF\u2B00-\u2BFF\u2300-\u23FF\u2190-\u21FF\uFE0F\uFE0E\u200D"
          "\U000E0020-\U000E007F\u20E3")
_SPECIAL = re.compile(f"[\\n<>|{{}}\\[\\]`*_~{_EMOJI}]")
_EMOJI_RE = re.compile(f"[{_EMOJI}]")
_TAG = re.compile(r"<(/?)(\|?[A-Za-z_][\w.|-]*\|?)(=[^<>\n]*)?\s*(/?)>")
_TAG_PREFIX = re.compile(r"<(?:/?\|?(?:[A-Za-z_][\w.|-]*\|?(?:=[^<>\n]*)?\s*/?)?)?\Z")
# at a line start: heading, bullet, numbered item, block quote, or a horizontal rule
_LINE_MARKER = re.compile(r"[ \t]*(?:(?:[-*_][ \t]*){3,}(?=\n)|#{1,6}[ \t]+|(?:[-*+•]|\d{1,3}[.)])[ \t]+|>[ \t]?)")
_LAST_RULE = re.compile(r"[ \t]*(?:[-*_][ \t]*){3,}\Z")  # a horizontal rule as the reply's last line
_LINE_PREFIX = re.compile(r"[ \t]*(?:#{1,6}|[-*+•]|\d{1,3}[.)]?|(?:[-*_][ \t]*)+)?\Z")
# a `<` or `>` between two numbers is a comparison, said in words (English, or Chinese once the reply is)
_COMPARISON = {"<": ("less than", "小于"), ">": ("greater than", "大于")}
_DECODER = json.JSONDecoder()
_OPENING = re.compile(r"[{\[]")


def json_values(text: str) -> list[Any]:
    """Every JSON object or array embedded in `text`, in order (doubled `{{ }}` braces are undone first)."""
    values: list[Any] = []
    i = 0
    while True:
        match = _OPENING.search(text, i)
        if match is None:
            return values
        start = match.start()
        value, end = _decode_at(text, start)
        if end is None:
            i = start + 1
            continue
        values.append(value)
        i = end


def _decode_at(text: str, start: int) -> tuple[Any, int | None]:
    try:
        return _DECODER.raw_decode(text, start)
    except ValueError:
        pass
    if text.startswith("{{", start):  # a prompt template's escaped braces copied literally
        end = _balanced_end(text, start)
        if end is not None:
            undoubled = text[start:end].replace("{{", "{").replace("}}", "}")
            try:
                value, _ = _DECODER.raw_decode(undoubled.strip())
                return value, end
            except ValueError:
                pass
    return None, None


def _balanced_end(text: str, start: int) -> int | None:
    scanner = _Balance()
    for i in range(start, len(text)):
        if scanner.step(text[i]):
            return i + 1
    return None


class _Balance:
    """Bracket depth of JSON-like text, aware of strings and escapes, fed one character at a time."""

    __slots__ = ("depth", "in_string", "escape")

    def __init__(self) -> None:
        self.depth, self.in_string, self.escape = 0, False, False

    def step(self, ch: str) -> bool:
        """Consume `ch`; True when it closed the outermost bracket."""
        if self.in_string:
            if self.escape:
                self.escape = False
            elif ch == "\\":
                self.escape = True
            elif ch == '"':
                self.in_string = False
            return False
        if ch == '"':
            self.in_string = True
        elif ch in "{[":
            self.depth += 1
        elif ch in "}]":
            self.depth -= 1
            return self.depth <= 0
        return False


class MarkupFilter:
    """Splits streamed content into speakable `Text` and `Hidden` markup. Feed deltas, then `close()` once."""

    def __init__(self) -> None:
        self._buf = ""  # undecided text, starting at the current state's beginning
        self._line_start = True
        self._last = ""  # last character released as text (for `_` inside a word)
        self._last_visible = ""  # last character released as text other than a space or tab (for comparisons)
        self._dense = False  # whether the reply released Chinese text (a comparison is said in Chinese then)
        self._capture: _Capture | None = None
        # HTML first, twice: the second stage parses what the first decoded (`&lt;b&gt;` → `<b>` → hidden)
        self._html = (HtmlText(frozenset(BLOCK_TAGS)), HtmlText(frozenset(BLOCK_TAGS)))

    @property
    def held(self) -> str:
        """Text not yet released or hidden (a possible marker, an open tag, or an open block)."""
        return self._buf + self._html[1].held + self._html[0].held

    def feed(self, chunk: str) -> list[Text | Hidden]:
        """Consume one delta; return the items it decided, in order."""
        return self._markdown(self._decoded(self._html[0].feed(chunk)))

    def close(self) -> list[Text | Hidden]:
        """End of stream: release what was held, hide any open block (marked unclosed)."""
        out = self._markdown(self._decoded(self._html[0].close()) + self._html[1].close())
        out += self._run(final=True)
        if self._capture is not None:
            out.append(self._capture.hidden(self._buf, unclosed=True))
        elif self._buf:
            self._emit(out, self._buf)
        self._buf, self._capture, self._line_start, self._last = "", None, True, ""
        self._last_visible, self._dense = "", False
        return _merge(out)

    def _decoded(self, items: list[Text | Hidden]) -> list[Text | Hidden]:
        """The first HTML stage's items with its text passed through the second stage."""
        out: list[Text | Hidden] = []
        for item in items:
            out.extend(self._html[1].feed(item.text) if isinstance(item, Text) else (item,))
        return out

    def _markdown(self, items: list[Text | Hidden]) -> list[Text | Hidden]:
        """Text left by the HTML stages through the markdown scan; what they hid passes on."""
        out: list[Text | Hidden] = []
        for item in items:
            if isinstance(item, Text):
                self._buf += item.text
                out += self._run(final=False)
            else:
                out.append(item)
        return _merge(out)

    # -- the scan ---------------------------------------------------------------------------------

    def _run(self, *, final: bool) -> list[Text | Hidden]:
        out: list[Text | Hidden] = []
        while self._buf:
            if self._capture is not None:
                end = self._capture.end(self._buf, final)
                if end is None:
                    break
                out.append(self._capture.hidden(self._buf[:end]))
                self._buf, self._capture = self._buf[end:], None
                continue
            consumed = self._text(out, final)
            if consumed is None:
                break
            self._buf = self._buf[consumed:]
        return _merge(out)

    def _emit(self, out: list[Text | Hidden], text: str) -> None:
        if text:
            out.append(Text(text))
            self._last = text[-1]
            visible = text.rstrip(" \t")
            if visible:
                self._last_visible = visible[-1]
            self._dense = self._dense or has_cjk(text)

    def _text(self, out: list[Text | Hidden], final: bool) -> int | None:
        """Process text outside any block from the buffer start; return how much was consumed (None: wait)."""
        buf = self._buf
        if self._line_start:
            marker = _LINE_MARKER.match(buf) or (_LAST_RULE.match(buf) if final else None)
            if marker is not None:
                self._line_start = False
                out.append(Hidden("markdown", marker.group()))
                return marker.end()
            if not final and _LINE_PREFIX.match(buf):
                return None
            self._line_start = False
        match = _SPECIAL.search(buf)
        if match is None:
            self._emit(out, buf)
            return len(buf)
        i = match.start()
        if i:
            self._emit(out, buf[:i])
            return i
        return self._special(out, final)

    def _special(self, out: list[Text | Hidden], final: bool) -> int | None:
        """The buffer starts with a special character: decide it, or wait for more text."""
        buf = self._buf
        ch = buf[0]
        if ch == "\n":
            self._emit(out, "\n")
            self._line_start = True
            return 1
        if _EMOJI_RE.match(ch):
            out.append(Hidden("emoji", ch))
            return 1
        if ch == "<":
            tag = _TAG.match(buf)
            if tag is not None:
                name = tag.group(2).strip("|").lower()
                if not tag.group(1) and not tag.group(4) and name in BLOCK_TAGS:
                    self._capture = _Block(name, tag.group(3)[1:] if tag.group(3) else None)
                    return 0  # the capture starts at the opening tag
                out.append(Hidden("tag", tag.group()))
                return tag.end()
            if not final and len(buf) < _MAX_TAG and _TAG_PREFIX.match(buf):
                return None
            return self._comparison(out, final)
        if ch == ">":
            return self._comparison(out, final)
        if ch == "|":  # table cells and `||`: the cells' words are spoken, kept apart
            run = len(buf) - len(buf.lstrip("|"))
            out.append(Hidden("markdown", buf[:run]))
            if self._last and not self._last.isspace():
                self._emit(out, " ")
            return run
        if ch == "{":
            self._capture = _Json()
            return 0
        if ch == "}":
            out.append(Hidden("json", "}"))
            return 1
        if ch == "[":
            rest = buf[1:].lstrip()
            if not rest and not final:
                return None
            if rest.startswith("{"):
                self._capture = _Json()
                return 0
            out.append(Hidden("markdown", "["))  # a link's text is spoken, its brackets are not
            return 1
        if ch == "]":
            if len(buf) == 1 and not final:
                return None
            out.append(Hidden("markdown", "]"))
            if buf[1:2] == "(":
                self._capture = _LinkTarget()  # a link target: its text was spoken, the address is not
            return 1
        run = len(buf) - len(buf.lstrip(ch))
        if ch == "*":
            out.append(Hidden("markdown", buf[:run]))
            return run
        if run == len(buf) and not final:
            return None  # the run may go on, or the next character decides
        if ch == "`":
            self._capture = _Fence(run) if run >= 3 else _InlineCode(run)
            return 0
        if run >= 2:
            out.append(Hidden("markdown", buf[:run]))
            return run
        if ch == "_" and self._last.isalnum() and buf[1:2].isalnum():
            self._emit(out, "_")  # inside a word or a name (adjust_device_volume)
            return 1
        if ch == "_":
            out.append(Hidden("markdown", "_"))
            return 1
        self._emit(out, ch)  # a single "~"
        return 1

    def _comparison(self, out: list[Text | Hidden], final: bool) -> int | None:
        """A `<` or `>` that is no tag: between two numbers ("3 < 5") it is said in words, anywhere else it is a
        markup character ("->", "<3") and hidden; never spoken as a sign."""
        ch, rest = self._buf[0], self._buf[1:]
        after = rest.lstrip(" \t")
        if not after and not final and len(rest) < 4:
            return None  # the next character decides
        spaced = self._last in (" ", "\t")
        before = self._last.isdigit() or (spaced and self._last_visible.isdigit())
        if before and after[:1].isdigit() and spaced == (rest[:1] in (" ", "\t")):
            pad = "" if spaced or self._dense else " "
            self._emit(out, f"{pad}{_COMPARISON[ch][self._dense]}{pad}")
        else:
            out.append(Hidden("markup", ch))
            if self._last and not self._last.isspace() and rest[:1] and not rest[:1].isspace():
                self._emit(out, " ")  # "a<b" is two words, not one
        return 1


def _merge(items: list[Text | Hidden]) -> list[Text | Hidden]:
    """Join neighbouring Text items (fewer, larger deltas for the splitter)."""
    merged: list[Text | Hidden] = []
    for item in items:
        if isinstance(item, Text) and merged and isinstance(merged[-1], Text):
            merged[-1] = Text(merged[-1].text + item.text)
        else:
            merged.append(item)
    return merged


# -- captures: regions hidden whole, from their opening to their end ---------------------------------

class _Capture:
    kind = "markup"

    def end(self, buf: str, final: bool) -> int | None:
        """Offset just past the region's end in `buf` (which starts at the region), or None: not yet."""
        raise NotImplementedError

    def values(self, raw: str) -> tuple[Any, ...]:
        return tuple(json_values(raw))

    def hidden(self, raw: str, *, unclosed: bool = False) -> Hidden:
        return Hidden(self.kind, raw, self.values(raw), unclosed)


class _Block(_Capture):
    def __init__(self, name: str, attribute: str | None) -> None:
        self.kind = BLOCK_TAGS[name]
        self.attribute = attribute  # `<function=NAME>`: the function name
        self._close = re.compile(rf"</{re.escape(name)}\s*>", re.IGNORECASE)
        self._searched = 0

    def end(self, buf: str, final: bool) -> int | None:
        match = self._close.search(buf, max(0, self._searched - 20))
        self._searched = len(buf)
        return None if match is None else match.end()

    def values(self, raw: str) -> tuple[Any, ...]:
        body = raw[raw.index(">") + 1:]
        found = json_values(body)
        if self.attribute is not None:  # <function=name>{arguments}</function>
            arguments = next((v for v in found if isinstance(v, dict)), {})
            return ({"name": self.attribute.strip().strip("\"'"), "arguments": arguments},)
        return tuple(found)


class _Json(_Capture):
    kind = "json"

    def __init__(self) -> None:
        self._balance = _Balance()
        self._scanned = 0

    def end(self, buf: str, final: bool) -> int | None:
        for i in range(self._scanned, len(buf)):
            if self._balance.step(buf[i]):
                return i + 1
        self._scanned = len(buf)
        return None


class _Fence(_Capture):
    kind = "code"

    def __init__(self, ticks: int) -> None:
        self._close = re.compile("`{%d,}" % ticks)
        self._ticks = ticks
        self._searched = ticks

    def end(self, buf: str, final: bool) -> int | None:
        match = self._close.search(buf, max(self._ticks, self._searched - self._ticks))
        if match is None or (match.end() == len(buf) and not final):  # a closing run at the end may grow
            self._searched = len(buf)
            return None
        return match.end()


class _InlineCode(_Capture):
    kind = "code"

    def __init__(self, ticks: int) -> None:
        self._ticks = ticks

    def end(self, buf: str, final: bool) -> int | None:
        i = self._ticks
        while i < len(buf):
            if buf[i] == "\n":
                return i  # an unclosed span ends with its line; the newline stays text
            if buf[i] == "`":
                run = len(buf[i:]) - len(buf[i:].lstrip("`"))
                return i + run
            i += 1
        return None


class _LinkTarget(_Capture):
    kind = "link_url"

    def end(self, buf: str, final: bool) -> int | None:
        depth = 0
        for i, ch in enumerate(buf):
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    return i + 1
            elif ch == "\n":
                return i
        return None

    def values(self, raw: str) -> tuple[Any, ...]:
        return ()
