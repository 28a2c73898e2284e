"""The speakable-text guard: the one gate every word passes on its way to TTS.

    content deltas ─▶ MarkupFilter (HTML, markdown, emoji, tags, JSON, code) ─▶ SpeechSplitter ─▶ segment check ─▶ speech
                                   └─▶ Hidden items (tool calls in them can be recovered by the caller)

The segment check drops what only the registry and the prompts can recognise: registered event and tool names
(`device.volume.adjust`, `adjust_device_volume`), catalog lines (`session.terminate: End the …`) and sentences of the
instruction text read back aloud ("You can also trigger these device events:"). It runs on whole segments, which the
splitter holds until a clause or sentence ends anyway, so it adds no waiting; the markup filter holds text only while
a prefix could still become markup. `detect()` runs the same guard over a finished text and says what it would
remove and why, so the bench counts leaks with the code that prevents them.

Last, whatever the removals in between joined, no segment is spoken with a `<`, a `>` or a character reference
(`&…;`): the markup filter decodes references and says a comparison in words, so this only catches what removal
glued together ("&*amp*;").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from .markup import Hidden, MarkupFilter, Text
from .sentences import SpeechSplitter, ends_sentence

REASONS = {
    "markdown": "markdown formatting",
    "emoji": "emoji",
    "tag": "an XML-like tag",
    "script": "the content of a script or style element",
    "markup": "a markup character",
    "entity": "an HTML character reference",
    "tool_call": "tool-call syntax",
    "event_block": "an event block",
    "reasoning": "a reasoning block",
    "json": "a JSON object",
    "code": "code",
    "link_url": "a link address",
    "name": "a registered event or tool name",
    "identifier": "an identifier-like name (an invented event or tool name)",
    "catalog": "a line of the event catalog",
    "instruction": "instruction text read back",
    "partial_sentence": "a sentence cut by the token limit",
    "tool_talk": "talk about a tool call: its parameters, or a sentence cut by code",
}
MIN_ECHO_WORDS = 5  # a segment this long found word for word in the prompts is an echo, not an answer
_WORDS = re.compile(r"\w+")
_UNSPOKEN = re.compile(r"&#?[A-Za-z0-9]+;|[<>]")  # never spoken, whatever is left around them
_SPACES = re.compile(r"[ \t]{2,}")
_SPACE_BEFORE_MARK = re.compile(r"\s+(?=[.,!?;:。，！？；：])")  # left where something was removed: "did it 👍."
_SENTENCE_PARTS = re.compile(r"[.:;!?]+(?=\s|\Z)|\n")  # a period inside a dotted name does not cut
# An identifier no one speaks: a dotted name (`feed.fish.start`, `volume.set`), with call arguments if written as a
# call. Small models invent such event names; the registry cannot know them, and nothing spoken may be a tool or
# event name. Every part has two or more characters and starts with a letter, so "e.g.", "a.m." and "3.5" stay
# speech; a web domain (a last part that is a common top-level domain, "pbskids.org") stays speech too. snake_case
# stays speech unless it is a registered name: "snake_case" itself is a word a child may ask about.
_IDENTIFIER = re.compile(
    r"(?<![\w.@/])[A-Za-z_][A-Za-z0-9_]+(?:\.[A-Za-z_][A-Za-z0-9_]+)+(?![\w]|\.\w)(\s*\([^()]*\))?", re.ASCII)
_DOMAINS = frozenset({"com", "org", "net", "edu", "gov", "io", "co", "uk", "cn", "de", "fr", "jp", "info", "app"})


# The catalog examples' form, `Child: "…" You: …`: a 0.5B model writes its answer in it. A segment that starts with
# the child's label is a made-up child line (hidden up to a "You:" label); a leading "You:" label is dropped and
# what follows is the answer.
_CHILD_LABEL = re.compile(r"\s*Child\s*[:：]")
_YOU_LABEL = re.compile(r"(?:^|(?<=\s)|(?<=[\"”]))You\s*[:：]\s*")


# Words only the machinery uses. Together with a parameter of a registered schema or one of its enum values they make
# a sentence that reads a call aloud ("use the function with the mode set to "relative" and a value of -5"); "tool"
# alone is a child's word (a hammer is a tool), so only "the tool" / "tool call" count.
_MACHINERY = re.compile(r"\b(?:functions?|parameters?|arguments?|json|api|tool[ -]?calls?|(?:the|this|that|a) tool)\b"
                        r"|函数|参数|工具调用", re.IGNORECASE)
_QUOTE_OPEN = "\"'“‘`"
# where a sentence cut by a hidden block continues: it starts lower case or with a comma-like mark
_CONTINUES = re.compile(r"\s*(?:[a-z]|[,;:)\]，；：])")
_SENTENCE_STOP = re.compile(r"[.!?。！？]+[\"'”’)\]]*(?=\s|\Z)|[。！？]")
# hidden items that can sit inside a sentence and leave a broken one around them (an event block is the protocol's
# own end of a reply and a reasoning block is no part of the answer: neither cuts a sentence)
_CUTTING = frozenset({"code", "json", "tool_call"})


def _identifier(match: re.Match[str]) -> bool:
    """Whether a dotted candidate is an identifier rather than a web domain."""
    return match.group().split("(")[0].rstrip().rsplit(".", 1)[-1].lower() not in _DOMAINS


def reason(kind: str) -> str:
    """Why text of this kind is never spoken."""
    return REASONS.get(kind, kind)


def _as_spoken(text: str) -> str:
    markup = MarkupFilter()
    return "".join(i.text for i in markup.feed(text) + markup.close() if isinstance(i, Text))


def _tidy(text: str) -> str:
    """Collapse the gaps that removed text leaves ("did it 👍." → "did it.")."""
    return _SPACE_BEFORE_MARK.sub("", _SPACES.sub(" ", text)).strip()


def _normalized(text: str) -> str:
    return " ".join(_WORDS.findall(text.lower()))


class SpeakableRules:
    """What only the runtime knows: event/tool names and the prompt text. Built once per agent, shared by guards."""

    def __init__(self, names: Iterable[str] = (), instructions: Iterable[str] = (),
                 examples: Iterable[tuple[str, str]] = (), parameters: Iterable[str] = (),
                 values: Iterable[str] = ()) -> None:
        # a name without a separator ("search") cannot be told from an ordinary word, so only dotted, snake- or
        # kebab-case names are removed (every built-in name and tool name is one of those)
        unique = sorted({n for n in names if n and any(sep in n for sep in "._-")}, key=len, reverse=True)
        alternatives = "|".join(re.escape(n) for n in unique)
        # a name is a whole token: not part of a longer word or dotted name
        # written as a call, `adjust_device_volume(mode="mute")`, its arguments go too (to the segment's end if open)
        self._names = (re.compile(rf"(?<![\w.])(?:{alternatives})(?![\w]|\.\w)(\s*\((?:[^()]*\)|[^()]*\Z))?",
                                  re.IGNORECASE) if unique else None)
        self._catalog = (re.compile(rf"\W*(?:{alternatives})\s*(?:[:：—–-]|\Z)", re.IGNORECASE) if unique else None)
        # compared as spoken: the prompts' own markup (`<agent_events>…`, "- " bullets) is what the guard removes
        texts = [_as_spoken(text) for text in instructions]
        self._fragments = {_normalized(part) for text in texts for part in _SENTENCE_PARTS.split(text)}
        self._fragments = {f for f in self._fragments if " " in f}  # one word alone is never an echo
        # the prompt's examples (`Child: "…" You: …`) are echoes only in their labelled form: an example's reply on
        # its own is natural speech a model may rightly say
        for child, reply in examples:
            child, reply = _normalized(_as_spoken(child)), _normalized(_as_spoken(reply))
            self._fragments |= {f"child {child}", f"you {reply}", f"child {child} you {reply}"}
        self._corpus = " " + " ".join(_normalized(text) for text in texts) + " "
        # the schemas' parameter names and enum values: a sentence that reads them out with the machinery's words,
        # a parameter next to a quoted value (`mode "relative"`, `query: "cats"`) or a snake_case parameter
        # (`start_at`) is a call read aloud
        params = sorted({p for p in parameters if p}, key=len, reverse=True)
        enums = sorted({v for v in values if v and len(v) > 2}, key=len, reverse=True)
        words = "|".join(re.escape(w) for w in params + enums)
        self._schema_word = re.compile(rf"(?<![\w])(?:{words})(?![\w])", re.IGNORECASE) if words else None
        quoted = "|".join(re.escape(p) for p in params)
        self._quoted_parameter = (re.compile(
            rf"(?<![\w])(?:{quoted})\s*(?:(?:is\s+)?set\s+to|=|:|of|as)?\s*[{_QUOTE_OPEN}]", re.IGNORECASE)
            if quoted else None)
        snake = "|".join(re.escape(p) for p in params if "_" in p)
        self._snake_parameter = re.compile(rf"(?<![\w])(?:{snake})(?![\w])", re.IGNORECASE) if snake else None

    def tool_talk(self, segment: str) -> bool:
        """Whether the sentence reads a tool call aloud: its parameters or values in the machinery's words."""
        if self._schema_word is None:
            return False
        if self._snake_parameter is not None and self._snake_parameter.search(segment):
            return True
        if self._quoted_parameter is not None and self._quoted_parameter.search(segment):
            return True
        return bool(_MACHINERY.search(segment) and self._schema_word.search(segment))

    def check(self, segment: str) -> tuple[str, list[Hidden], bool]:
        """(the segment with names removed, or '' when it must not be spoken at all; what was removed; whether a
        call written as `name(` is still open at the segment's end)."""
        if self._catalog is not None and self._catalog.match(segment):
            return "", [Hidden("catalog", segment)], False
        words = _normalized(segment)
        if words and (words in self._fragments or
                      (words.count(" ") + 1 >= MIN_ECHO_WORDS and f" {words} " in self._corpus)):
            return "", [Hidden("instruction", segment)], False
        hidden: list[Hidden] = []
        open_call = False
        you = _YOU_LABEL.search(segment)
        if _CHILD_LABEL.match(segment):
            hidden.append(Hidden("instruction", segment[: you.end()] if you else segment))
            segment = segment[you.end():] if you else ""
        elif you and you.start() == 0:
            hidden.append(Hidden("instruction", you.group()))
            segment = segment[you.end():]
        original = segment
        mentioned = ""  # the kind of a name used as a word in the sentence, not written as a call
        if self._names is not None:
            matches = list(self._names.finditer(segment))
            if matches:
                hidden = [Hidden("tool_call" if m.group(1) else "name", m.group()) for m in matches]
                open_call = bool(matches[-1].group(1)) and not matches[-1].group(1).endswith(")")
                mentioned = "name" if any(not m.group(1) for m in matches) else ""
                segment = self._names.sub("", segment)
        invented = [m for m in _IDENTIFIER.finditer(segment) if _identifier(m)]
        if invented:
            hidden += [Hidden("tool_call" if m.group(1) else "identifier", m.group()) for m in invented]
            mentioned = mentioned or ("identifier" if any(not m.group(1) for m in invented) else "")
            segment = _IDENTIFIER.sub(lambda m: "" if _identifier(m) else m.group(), segment)
        if not hidden:
            return ("", [Hidden("tool_talk", segment)], False) if self.tool_talk(segment) else (segment, [], False)
        text = _tidy(segment)
        if mentioned and any(ch.isalnum() for ch in text):
            # a sentence that names the machinery talks about it ('To change the volume, use adjust_device_volume
            # with mode…', 'Now device.volume.adjust is done.'): without the name it is a broken sentence, so none
            # of it is spoken (the turn's outcome is said by the runtime, never left silent)
            return "", [Hidden(mentioned, original)], open_call
        if self.tool_talk(text):  # what is left after the names still reads a call aloud
            return "", [*hidden, Hidden("tool_talk", text)], open_call
        return (text if any(ch.isalnum() for ch in text) else ""), hidden, open_call


NO_RULES = SpeakableRules()


class SpeakableGuard:
    """Turns one reply's content deltas into speakable segments plus the hidden items. One guard per reply."""

    def __init__(self, rules: SpeakableRules = NO_RULES, *, first_clause_min_chars: int = 12,
                 first_clause_min_chars_cjk: int = 6) -> None:
        self.rules = rules
        self._open_call = False
        # a hidden item cut the sentence: "inline" drops the rest of it, "block" drops it if the text goes on
        self._drop_rest: str | None = None
        self._markup = MarkupFilter()
        self._splitter = SpeechSplitter(first_clause_min_chars=first_clause_min_chars,
                                        first_clause_min_chars_cjk=first_clause_min_chars_cjk)

    def feed(self, chunk: str) -> list[str | Hidden]:
        """Consume one content delta; return finished segments and hidden items, in order."""
        return self._pass(self._markup.feed(chunk))

    def finish(self, *, cut_by_length: bool = False) -> list[str | Hidden]:
        """End of the reply. With `cut_by_length` (finish_reason "length") an unfinished last sentence is hidden."""
        out = self._pass(self._markup.close())
        tail = self._splitter.pending
        segments = self._splitter.flush()
        if cut_by_length and segments and not ends_sentence(tail):
            return out + [Hidden("partial_sentence", segments[0])]
        for segment in segments:
            out.extend(self._segment(segment))
        return out

    def _pass(self, items: list[Text | Hidden]) -> list[str | Hidden]:
        out: list[str | Hidden] = []
        for item in items:
            if isinstance(item, Text):
                text = item.text
                if self._drop_rest is not None:
                    text = self._rest_of_sentence(text, out)
                for segment in self._splitter.feed(text):
                    out.extend(self._segment(segment))
            else:
                if item.kind in _CUTTING:
                    self._cut_by(item, out)
                out.append(item)
        return out

    def _cut_by(self, item: Hidden, out: list[str | Hidden]) -> None:
        """Code or a call inside a sentence leaves a broken sentence around it ("Here is the JSON object for the",
        "Sure, I'll call `adjust_device_volume` now."): the unfinished part before it is never spoken, nor the rest
        up to the sentence's end — after an inline code span always, after a block when the text goes on
        mid-sentence (lower case, a comma)."""
        pending = self._splitter.pending
        if any(ch.isalnum() for ch in pending) and not ends_sentence(pending):
            out.append(Hidden("tool_talk", self._splitter.discard()))
            self._drop_rest = "block"
        if item.kind == "code" and not item.raw.startswith("```") and "\n" not in item.raw:
            self._drop_rest = "inline"  # also at a sentence's start: "`web_search` finds it." is no sentence

    def _rest_of_sentence(self, text: str, out: list[str | Hidden]) -> str:
        """Drop text up to the end of the sentence a hidden item cut; return what follows it."""
        if self._drop_rest == "block":
            if not text.strip():
                return text
            if not _CONTINUES.match(text):
                self._drop_rest = None  # a new sentence starts after the block
                return text
            self._drop_rest = "inline"
        stop = _SENTENCE_STOP.search(text)
        if stop is None:
            if text.strip():
                out.append(Hidden("tool_talk", text))
            return ""
        if text[: stop.end()].strip():
            out.append(Hidden("tool_talk", text[: stop.end()]))
        self._drop_rest = None
        return text[stop.end():]

    def _segment(self, segment: str) -> list[str | Hidden]:
        segment = _tidy(segment)
        hidden: list[str | Hidden] = []
        if self._open_call:  # the arguments of `name(` went on past a clause cut
            close = segment.find(")")
            if close < 0:
                return [Hidden("tool_call", segment)]
            hidden.append(Hidden("tool_call", segment[: close + 1]))
            segment = segment[close + 1:].strip()
            self._open_call = False
        text, found, self._open_call = self.rules.check(segment)
        hidden += found
        if text and _UNSPOKEN.search(text):
            hidden += [Hidden("markup" if m.group() in "<>" else "entity", m.group()) for m in _UNSPOKEN.finditer(text)]
            text = _tidy(_UNSPOKEN.sub(" ", text))
            text = text if any(ch.isalnum() for ch in text) else ""
        return [*hidden, text] if text else hidden


def speakable(text: str, rules: SpeakableRules = NO_RULES, **splitter: int) -> tuple[list[str], list[Hidden]]:
    """A whole text through the guard: (segments to speak, hidden items)."""
    guard = SpeakableGuard(rules, **splitter)
    items = guard.feed(text) + guard.finish()
    return [i for i in items if isinstance(i, str)], [i for i in items if isinstance(i, Hidden)]


@dataclass(frozen=True, slots=True)
class Finding:
    """One unspeakable thing in a text: its kind, why it is never spoken, and the raw text."""

    kind: str
    reason: str
    raw: str


def detect(text: str, rules: SpeakableRules = NO_RULES) -> list[Finding]:
    """What the guard would remove from `text`, and why; [] when all of it is speakable."""
    return [Finding(h.kind, reason(h.kind), h.raw) for h in speakable(text, rules)[1]]
