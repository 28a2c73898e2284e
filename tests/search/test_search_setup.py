"""Search is on by default (Wikipedia, no key); off only by choice: no fake in a production path, an honest line
when a search is asked for and none is configured."""

from __future__ import annotations

import ast
from datetime import datetime, timezone
from pathlib import Path

import pytest

from toy_runtime.app.runtime import build_runtime, build_search
from toy_runtime.config import load_settings, with_updates
from toy_runtime.audit import MemoryAudit
from toy_runtime.events import EventRequest, EventStatus, ResolveContext, SourceProtocol
from toy_runtime.fakes.calendar import MemoryCalendarStore
from toy_runtime.fakes.device import MemoryMixer
from toy_runtime.fakes.search import StaticSearch

PACKAGE = Path(__file__).resolve().parents[2] / "toy_runtime"
CONFIGS = Path(__file__).resolve().parents[2] / "configs"
NAME = "knowledge.web.search"


def settings_for(tmp_path, **search):
    settings = load_settings(env={"TOY_STATE_DIR": str(tmp_path)})
    return with_updates(settings, search=search) if search else settings


def context(text, locale="en"):
    return ResolveContext(utterance=text, request_time=datetime(2026, 6, 1, 12, tzinfo=timezone.utc),
                          timezone="UTC", locale=locale)


async def test_wikipedia_is_the_default_search_in_the_defaults_and_the_toy_profile(tmp_path):
    from toy_runtime.adapters.wikipedia import WikipediaSearch

    for settings in (settings_for(tmp_path), load_settings(CONFIGS / "toy.toml", env={})):
        assert settings.search.provider == "wikipedia"
        assert settings.search.wikipedia_url == "https://{lang}.wikipedia.org"
        search = build_search(settings)
        assert isinstance(search, WikipediaSearch) and search.site("zh") == "https://zh.wikipedia.org"
        await search.aclose()
    assert build_search(settings_for(tmp_path, provider="none")) is None  # off only by choice
    laptop = load_settings(CONFIGS / "laptop.toml", env={})
    assert laptop.search.provider == "static"  # the explicit demo/laptop choice
    assert isinstance(build_search(laptop), StaticSearch)


def test_a_configured_url_selects_searxng(tmp_path):
    from toy_runtime.adapters.searxng import SearxngSearch

    assert isinstance(build_search(settings_for(tmp_path, url="http://127.0.0.1:9")), SearxngSearch)
    with pytest.raises(ValueError):
        build_search(settings_for(tmp_path, provider="searxng"))


def test_only_the_composition_root_imports_fakes():
    """Adapters, plugins, the kernel, agents and sessions never import toy_runtime.fakes."""
    # app/ is the composition root: it chooses in-memory ports on purpose (memory volume, offline registry, demo mic)
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] in ("fakes", "bench", "testing", "app"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                module = ("." * node.level) + (node.module or "")
                if "fakes" in module.split("."):
                    offenders.append(f"{rel}: from {module} import …")
            elif isinstance(node, ast.Import) and any("fakes" in a.name.split(".") for a in node.names):
                offenders.append(f"{rel}: import …")
    assert offenders == []


def test_static_results_say_they_are_examples():
    import asyncio

    result = asyncio.run(StaticSearch().search("tallest dinosaur", 3))
    for hit in result.hits:
        assert "example" in hit.title.lower() and "not a real" in hit.title.lower()
        assert "not a real fact" in hit.snippet


async def test_without_search_the_event_is_not_advertised_and_a_request_gets_the_honest_line(tmp_path):
    runtime = build_runtime(settings_for(tmp_path, provider="none"), mixer=MemoryMixer(),
                            calendar=MemoryCalendarStore(), audit=MemoryAudit())
    try:
        assert runtime.search is None
        definition = runtime.registry.lookup(NAME)
        assert definition is not None and not definition.advertised  # still answers a model that asks anyway
        assert NAME not in " ".join(runtime.registry.catalog_lines())
        assert "web_search" not in [t["function"]["name"] for t in runtime.registry.provider_tools()]
        for locale, text, line in (("en", "what is the tallest dinosaur?", "Sorry, I can't look that up right now."),
                                   ("zh", "帮我查一下恐龙", "抱歉，我现在没法上网查。")):
            request = EventRequest(name="web_search", turn_id="t1", source=SourceProtocol.TOOL_CALLS,
                                   arguments={"query": "tallest dinosaur"})
            run = runtime.kernel.open_batch("s1", "t1", context(text, locale))
            run.add(request)
            run.close()
            outcome = await run.wait()
            [result] = outcome.results
            assert result.status is EventStatus.REJECTED and result.error_code == "search_off"
            assert outcome.continuation.lines == (line,) and not outcome.continuation.needs_llm
    finally:
        await runtime.aclose()


def test_the_unavailable_search_recognises_explicit_search_requests():
    from toy_runtime.plugins.web_search import asks_to_search

    for text in ("search for dinosaurs", "can you look it up", "look up giraffes", "google the weather",
                 "can you check online when dinosaurs lived", "帮我查一下天气", "上网搜索恐龙",
                 "look up how tall giraffes are", "搜索一下长颈鹿有多高", "Please google it.",
                 "Can you search the internet for dinosaurs?", "I want to know about whales, look it up"):
        assert asks_to_search(context(text)), text
    for text in ("look up at the stars", "tell me a story", "turn it up", "are you online?", "检查一下",
                 # statements that name search, and searches for the child's own things, go to the model
                 "Google is a big company", "Can you help me search for my teddy bear?", "Google makes phones",
                 "I like to search for shells", "we looked it up yesterday", "search my room", "我喜欢上网",
                 "搜索一下我的泰迪熊"):
        assert not asks_to_search(context(text)), text


async def test_with_a_provider_given_the_search_event_is_advertised(tmp_path):
    runtime = build_runtime(settings_for(tmp_path), mixer=MemoryMixer(), calendar=MemoryCalendarStore(),
                            search=StaticSearch(), audit=MemoryAudit())
    try:
        assert runtime.registry.lookup(NAME).advertised
        assert "web_search" in [t["function"]["name"] for t in runtime.registry.provider_tools()]
    finally:
        await runtime.aclose()


def test_the_default_search_loads_no_http_library_until_its_first_look_up(tmp_path):
    """`run` wires the runtime before READY: the Wikipedia adapter must not import httpx (nor make TLS) by then."""
    import subprocess
    import sys

    code = ("import sys; from toy_runtime.config import load_settings;"
            "from toy_runtime.app.runtime import build_search;"
            f"s = build_search(load_settings(env={{'TOY_STATE_DIR': {str(tmp_path)!r}}}));"
            "print(type(s).__name__, 'httpx' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["WikipediaSearch", "False"]
