"""Streaming removal of HTML from model text, with the standard library's HTML parser.

`HtmlText` is the first stage of the markup filter. It is fed content deltas and returns, in order, `Text` and
`Hidden` items: every tag (`<img src=x onerror=alert(1)>`, `</b>`, `<br/>`), comment, declaration and processing
instruction is hidden, and so is the whole content of `script` and `style`; character references in the text are
decoded (`&lt;i&gt;` → `<i>`). Decoded text may itself be markup, so the markup filter runs two of these stages in a
row: what the first decodes, the second parses.

The tool-call block tags (`passthrough`, the markup filter's `BLOCK_TAGS`: `<tool_call>`, `<function=name>`, …)
and everything up to their end tag pass through untouched, because the markup filter hides those blocks whole and
recovers the calls written in them.

`html.parser.HTMLParser` already holds a tag split over deltas (`<scr` + `ipt>alert(2)</sc` + `ript>`) until it is
whole, and text only while a character reference may be cut. What it would hold without end — a `<` that opens no
tag ("if a<b then …") — is released after `MAX_TAG` characters: that `<` is passed on as text (the markup filter
decides it) and the rest is parsed again.
"""

from __future__ import annotations

from html.parser import HTMLParser

from .markup_items import Hidden, Text

MAX_TAG = 200  # characters a `<` may hold text back before it is taken as text; long enough for `<a href="…">`


class HtmlText(HTMLParser):
    """One HTML stage: feed deltas, then `close()` once; each call returns the items it decided, in order."""

    def __init__(self, passthrough: frozenset[str]) -> None:
        """`passthrough`: tag names (lower-case) passed on as text, not hidden."""
        super().__init__(convert_charrefs=True)  # references in text are decoded, in attributes never seen
        self._passthrough = passthrough
        self._out: list[Text | Hidden] = []

    @property
    def held(self) -> str:
        """Text not yet decided (an open tag, a cut reference, or the content of an open script)."""
        return self.rawdata

    # feed() and close() return the items they decided where HTMLParser's return None: a caller that treats this as
    # a plain HTMLParser ignores the result, so the override is safe though mypy cannot see it
    def feed(self, data: str) -> list[Text | Hidden]:  # type: ignore[override]
        """Consume one delta; return the items it decided."""
        if not self.rawdata and self.cdata_elem is None and "<" not in data and "&" not in data:
            return [Text(data)] if data else []  # what the parser would do with plain text, at a quarter of the cost
        self._parse(data)
        while self.cdata_elem is None and len(self.rawdata) > MAX_TAG and self.rawdata.startswith("<"):
            self._not_a_tag()
        return self._take()

    def _parse(self, data: str) -> None:
        try:
            super().feed(data)
        except AssertionError:
            self._confused()

    def _confused(self) -> None:
        """The stdlib parser asserted (it does on some malformed declarations; `parse_marked_section` below covers
        the one known to us): garbled model output must not end the turn. Where it stopped is unknown, so what it
        held is hidden (its raw may start with text already passed on), never spoken twice or as markup, and
        parsing starts afresh."""
        held = self.rawdata
        self.reset()
        self._out.append(Hidden("tag", held, unclosed=True))

    def _not_a_tag(self) -> None:
        """The held `<` opens no tag: it is passed on as text and the rest is parsed again from a clean state."""
        rest = self.rawdata[1:]
        self.reset()
        self._out.append(Text("<"))
        self._parse(rest)

    def close(self) -> list[Text | Hidden]:  # type: ignore[override]  # items returned, see feed()
        """End of stream: what an open script or style still held is hidden (marked unclosed)."""
        try:
            super().close()
        except AssertionError:
            self._confused()
        if self.cdata_elem in self._passthrough and self.rawdata:
            self._out.append(Text(self.rawdata))  # an unclosed call block: the markup filter hides it, marked so
        elif self.cdata_elem is not None and self.rawdata:
            self._out.append(Hidden("script", self.rawdata, unclosed=True))
        self.reset()
        return self._take()

    def _take(self) -> list[Text | Hidden]:
        out, self._out = self._out, []
        return out

    # -- HTMLParser callbacks ---------------------------------------------------------------------

    def handle_data(self, data: str) -> None:
        if self.cdata_elem is not None and self.cdata_elem not in self._passthrough:
            self._out.append(Hidden("script", data))  # script and style content is code, never words
        elif data:
            self._out.append(Text(data))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        name = tag.split("=", 1)[0]  # `<function=name>` parses as one name
        self.handle_startendtag(tag, attrs)
        if name in self._passthrough:
            # the block is passed on untouched up to its end tag: a call's JSON is the markup filter's to read
            # ('{"query": "a<b"}' is no tag)
            self.set_cdata_mode(name)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        raw = self.get_starttag_text() or f"<{tag}>"
        if tag.split("=", 1)[0] in self._passthrough:
            self._out.append(Text(raw))
        else:
            self._out.append(Hidden("tag", raw))

    def handle_endtag(self, tag: str) -> None:
        if tag.split("=", 1)[0] in self._passthrough:
            self._out.append(Text(f"</{tag}>"))
        else:
            self._out.append(Hidden("tag", f"</{tag}>"))

    def handle_comment(self, data: str) -> None:
        self._out.append(Hidden("tag", f"<!--{data}-->"))

    def handle_decl(self, decl: str) -> None:
        self._out.append(Hidden("tag", f"<!{decl}>"))

    def handle_pi(self, data: str) -> None:
        self._out.append(Hidden("tag", f"<?{data}>"))

    def parse_marked_section(self, i: int, report: int = 1) -> int:
        """`<![…`: HTML outside SVG and MathML has no marked sections; like a browser, up to the next `>` is a
        bogus comment (the stdlib's SGML rules assert on what a model may write, `<![if x]>`)."""
        end = self.rawdata.find(">", i + 3)
        if end < 0:
            return -1
        self.unknown_decl(self.rawdata[i + 3:end])
        return end + 1

    def unknown_decl(self, data: str) -> None:
        self._out.append(Hidden("tag", f"<![{data}]>"))
