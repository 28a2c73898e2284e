"""`knowledge.web.search`: look up current or external facts through the SearchProvider port.

Read-only, so the kernel may retry a transient failure once. A result goes back to ChatAgent for ONE follow-up
answer; `summarize` makes the compact view (query, a few trimmed snippets with titles and urls) that enters it, as
quoted, untrusted evidence. A failed search is never a follow-up (there is no evidence to build one from): the child
hears the short truthful failure line instead.

With no provider configured, `unavailable_definition()` takes the same name: it is not advertised to the model, and a
request for it (a model's habit, or an explicit "search for …" in the offline gate) gets the honest line.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from ..events.definition import EventDefinition, EventFailure, ExecutionContext, Resolution, ResolveContext
from ..events.model import ResultPolicy, Risk
from ..ports.search import SearchError, SearchProvider
from .numbers import parse_number
from .text import collapse_spaces, wants_chinese

FAILED_LINE = {"en": "Sorry, I couldn't look that up just now.", "zh": "抱歉，我刚才没查到。"}
OFF_LINE = {"en": "Sorry, I can't look that up right now.", "zh": "抱歉，我现在没法上网查。"}
# what a follow-up prompt may say about a failure (design 000 §4); the provider's own error text never goes there
FAILURE_VISIBLE = {"search_failed": "the search did not answer", "timeout": "the search took too long"}

NAME = "knowledge.web.search"
TOOL_NAME = "web_search"
MAX_QUERY = 300
MAX_RESULTS = 5
DEFAULT_RESULTS = 3
SUMMARY_HITS = 3
SNIPPET_CHARS = 300

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY, "pattern": r"\S",
                  "description": "A focused search query built from the user's question."},
        "max_results": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS,
                        "description": "How many sources to fetch (1-5)."},
    },
    "required": ["query"],
    "additionalProperties": False,
}

_EN_FILLER = re.compile(
    r"^(?:(?:hey|hi|ok|okay|so|well|um|uh|please)\b[\s,!]*"
    r"|(?:can|could|would|will)\s+you\s+(?:please\s+)?"
    r"|(?:search|look|google|check)(?:\s+(?:the\s+)?(?:web|internet|online))?(?:\s+(?:for|up|on|about))?\b"
    r"|find\s+out(?:\s+about)?\b|tell\s+me(?:\s+about)?\b|i\s+(?:want|would\s+like)\s+to\s+know(?:\s+about)?\b"
    r"|do\s+you\s+know\b|what'?s\b|what\s+is\b)[\s,]*", re.IGNORECASE)
_EN_TRAIL = re.compile(r"(?:\s+(?:for\s+me|please|online|on\s+the\s+(?:web|internet)))+\s*$|[\s?.!,]+$", re.IGNORECASE)
_ZH_FILLER = re.compile(r"^(?:请|麻烦你?|你|帮我|给我|帮忙|能不能|能|可以|可不可以|上网|在网上|网上"
                        r"|搜索一下|查询一下|查找一下|查一下|搜一下|查查|搜搜|搜索|查询|查找|看看|一下)+")
_ZH_TRAIL = re.compile(r"(?:吧|呢|吗|啊|呀|一下|[？?。！!，,\s])+$")


def clean_query(text: str) -> str:
    """Strip request filler ("can you search", "look up", "帮我查一下") from a user's words, keep the question."""
    s = collapse_spaces(text or "")
    previous = None
    while previous != s:
        previous = s
        s = _EN_FILLER.sub("", s, count=1)
        s = _ZH_FILLER.sub("", s)
        s = _EN_TRAIL.sub("", s)
        s = _ZH_TRAIL.sub("", s).strip()
    return s[:MAX_QUERY]


def _latest_user_words(ctx: ResolveContext) -> str:
    if ctx.utterance and ctx.utterance.strip():
        return ctx.utterance
    for turn in reversed(ctx.history):
        if turn.get("role") == "user" and str(turn.get("content", "")).strip():
            return str(turn["content"])
    return ""


_EN_ANAPHORA = re.compile(r"^(?:and|so|but)?\s*(?:what|how)\s+about\b|^(?:and|also)\b|\b(?:it|that|this|them|they|"
                          r"him|her|he|she|there|those|these)\b", re.IGNORECASE)
_ZH_ANAPHORA = re.compile(r"^(?:那|那么|还有|另外)|(?:他|她|它|他们|那个|这个|那里|那儿)")


def depends_on_history(words: str, query: str, ctx: ResolveContext) -> bool:
    """True when the request only makes sense with earlier turns ("what about tomorrow?", "那明天呢？").

    Then the query is left to EventAgent, which sees the recent history; a self-contained request never is.
    """
    if not any(turn.get("role") == "user" for turn in ctx.history):
        return False
    if _ZH_ANAPHORA.search(words):
        return len(query) <= 12
    return bool(_EN_ANAPHORA.search(words)) and len(query.split()) <= 6


def resolve(proposed: Mapping[str, Any] | None, ctx: ResolveContext) -> Resolution:
    """The provider's query (tidied) or one derived from the latest user request; max_results clamped to 1..5."""
    given = proposed or {}
    query = collapse_spaces(str(given["query"]))[:MAX_QUERY] if given.get("query") is not None else ""
    derived_needs_history = False
    if not query:
        words = _latest_user_words(ctx)
        query = clean_query(words)
        derived_needs_history = bool(query) and depends_on_history(words, query, ctx)
    args: dict[str, Any] = {}
    raw = given.get("max_results")
    if raw is not None and not isinstance(raw, bool):
        number = raw if isinstance(raw, int) else parse_number(str(raw))
        if number is not None:
            args["max_results"] = max(1, min(MAX_RESULTS, int(number)))  # read-only: clamping is harmless
    if not query or derived_needs_history:
        question = "你想让我查什么？" if wants_chinese(ctx.utterance, ctx.locale) else "What should I look up?"
        if derived_needs_history:  # EventAgent builds the focused query from the request + recent history
            return Resolution(arguments=args, ambiguous=("query",), question=question)
        return Resolution(arguments=args, missing=("query",), question=question)
    return Resolution(arguments={"query": query, **args})


def _trim(text: str, limit: int) -> str:
    text = collapse_spaces(text)
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "…"


def summarize(result: Mapping[str, Any], *, max_hits: int = SUMMARY_HITS, max_chars: int = SNIPPET_CHARS) -> dict:
    """The compact view of a search result for the follow-up ChatAgent call (raw payload stays in audit)."""
    evidence = [
        {"title": _trim(str(hit.get("title", "")), 120), "url": str(hit.get("url", "")),
         "snippet": _trim(str(hit.get("snippet", "")), max_chars)}
        for hit in list(result.get("evidence") or [])[:max_hits]
    ]
    return {"query": result.get("query"), "evidence": evidence, "retrieved_at": result.get("retrieved_at")}


def _line(lines: Mapping[str, str], info: Mapping[str, Any]) -> str:
    return lines["zh"] if info.get("locale") == "zh" else lines["en"]


# A clear search request is a request whose verb is "search", "google" or "look up" (or "check/find … online"): at
# the start of a clause, after at most a polite frame ("can you", "please", "help me", "let's"). The verb as a word in
# a statement ("Google is a big company", "I like to search for shells") is not one, and neither is a search for the
# child's own things ("help me search for my teddy bear"): those go to the model, which can talk about them.
_EN_CLAUSE = r"(?:^|[,.;!?]\s*|\b(?:and|then|so)\s+)"
_EN_FRAME = (r"(?:(?:hey|hi|ok|okay|so|well|um|uh|please|now)\b[\s,!]*)*"
             r"(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?|please\s+|i\s+(?:want|need)\s+you\s+to\s+"
             r"|let'?s\s+|go\s+(?:and\s+)?|help\s+me\s+|(?:try\s+(?:to|and)\s+))*")
_EN_NOT_FACTS = (r"my|your|our|his|her|their|mine|yours|me|us"  # the child's belongings, or "search me"
                 r"|is|was|are|were|has|had|does|did|makes|made|can|could|will|would|and|or|engine|bar")
_EN_ASKS_SEARCH = re.compile(
    _EN_CLAUSE + _EN_FRAME + r"(?:"
    r"(?:search|google)(?:\s+(?:the\s+)?(?:web|internet|online))?+(?:\s+(?:for|about|up|on))?+"
    r"(?:\s+(?!(?:" + _EN_NOT_FACTS + r")\b)\w|\s*[?.!]*$)"
    r"|look\s+(?:it|that|this|them|those)\s+up\b"
    r"|look\s+up\s+(?!(?:at|to|in|high|" + _EN_NOT_FACTS + r")\b)\w"
    r"|(?:check|find(?:\s+out)?)\b[^.?!]*\b(?:online|on\s+the\s+(?:web|internet))\b)", re.IGNORECASE)
# 检查 is "inspect", not "look up"; a bare 上网 is "go online" ("我喜欢上网"), so it counts only with 查/搜 after it
_ZH_ASKS_SEARCH = re.compile(r"(?:搜索|搜一下|搜搜|(?<!检)查一下|查查|上网(?:查|搜)|网上查|查询|百度)(?:一下)?+"
                             r"(?!我的|你的)")


def asks_to_search(ctx: ResolveContext) -> bool:
    """The child clearly asked to look something up ("search for …", "look it up", "帮我查一下"), as a request, not a
    statement that names search ("Google is a big company") or a search for their own things ("my teddy bear")."""
    words = collapse_spaces(ctx.utterance or "")
    return bool(_EN_ASKS_SEARCH.search(words) or _ZH_ASKS_SEARCH.search(words))


def unavailable_definition() -> EventDefinition:
    """The search event when no provider is configured: never advertised, always answered with the honest line.

    The resolver rejects every request (code `search_off`), so nothing runs and no EventAgent call is made; the
    policy is a template, so no follow-up can pretend that anything was looked up.
    """

    def resolve_off(proposed: Mapping[str, Any] | None, ctx: ResolveContext) -> Resolution:
        return Resolution(arguments={}, error="no search provider is configured", error_code="search_off")

    async def handle(arguments: Mapping[str, Any], ctx: ExecutionContext) -> Mapping[str, Any]:
        raise EventFailure("search_off", "no search provider is configured")

    return EventDefinition(
        name=NAME,
        version=1,
        tool_name=TOOL_NAME,
        description="Web search is not set up on this toy.",
        schema=SCHEMA,
        resolver=resolve_off,
        handler=handle,
        result_policy=ResultPolicy.TEMPLATE_FOLLOW_UP,
        llm_fallback=False,
        risk=Risk.LOW,
        idempotent=True,
        read_only=True,
        failure_template=lambda arguments, info: _line(OFF_LINE, info),
        failure_visible={"search_off": "web search is not set up"},
        gate_match=asks_to_search,
        tags=frozenset({"builtin", "knowledge"}),
        advertised=False,
    )


def definition(search: SearchProvider, *, default_results: int = DEFAULT_RESULTS) -> EventDefinition:
    """The plugin definition bound to a SearchProvider port."""

    async def handle(arguments: Mapping[str, Any], ctx: ExecutionContext) -> Mapping[str, Any]:
        try:
            result = await search.search(arguments["query"], arguments.get("max_results", default_results))
        except SearchError as exc:
            raise EventFailure("search_failed", str(exc), {"transient": exc.transient}) from exc
        return result.as_dict()

    return EventDefinition(
        name=NAME,
        version=1,
        tool_name=TOOL_NAME,
        description="Search the web for current or external facts needed to answer the user.",
        schema=SCHEMA,
        resolver=resolve,
        handler=handle,
        result_policy=ResultPolicy.LLM_FOLLOW_UP,
        llm_fallback=True,
        risk=Risk.LOW,
        idempotent=True,
        read_only=True,
        concurrency_class=None,
        timeout_s=4.0,  # two attempts (one retry) stay inside the 10 s batch deadline
        retries=1,
        summarize=summarize,
        failure_template=lambda arguments, info: _line(FAILED_LINE, info),
        failure_visible=FAILURE_VISIBLE,
        tags=frozenset({"builtin", "knowledge"}),
    )
