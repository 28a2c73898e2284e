"""The speakable guard: every form of unspeakable text, at every chunk boundary."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toy_runtime.agent.chat_agent import speakable_rules
from toy_runtime.speech_out.clauses import clause_pieces
from toy_runtime.agent.html_text import HtmlText
from toy_runtime.agent.markup import BLOCK_TAGS, Hidden, MarkupFilter, Text, json_values
from toy_runtime.agent.prompts import catalog_instruction, example_lines, tools_instruction
from toy_runtime.agent.speakable import NO_RULES, Finding, SpeakableGuard, SpeakableRules, detect, speakable
from toy_runtime.agent.text_events import TextEventParser, Visible
from toy_runtime.agent.tool_calls import calls_from_text
from toy_runtime.events import EventRegistry
from toy_runtime.fakes import memory_ports
from toy_runtime.plugins import default_registry

VOLUME_CALL = {"name": "adjust_device_volume", "arguments": {"mode": "absolute", "value": 30}}
CAT = ("Here is a cat: <img src=x onerror=alert(1)> &lt;i&gt;Meow&lt;/i&gt; || <script>alert(2)</script> "
       "She says purr.")
HERMES = '<tool_call>{"name": "adjust_device_volume", "arguments": {"mode": "absolute", "value": 30}}</tool_call>'


def _registry() -> EventRegistry:
    return default_registry(memory_ports())


RULES = speakable_rules(_registry(), "You are Pip, a warm, playful talking toy for a young child.")

# (reply as a model wrote it, what may be spoken, kinds that must be reported hidden, JSON values hidden)
CASES = {
    "bold and italics": ("**Dinosaurs** were *huge* and __fast__, _really_!",
                         ["Dinosaurs were huge and fast,", "really!"], {"markdown"}, []),
    "heading and bullets": ("## Fun facts\n- They laid eggs.\n* Some flew.\n1. T. rex was big.\n2) So was Bob.",
                            ["Fun facts", "They laid eggs.", "Some flew.", "T. rex was big.", "So was Bob."],
                            {"markdown"}, []),
    "rule and quote": ("Hello there.\n---\n> A quote here.", ["Hello there.", "A quote here."], {"markdown"}, []),
    "link keeps its text": ("See [the zoo page](https://zoo.example/a_(b)) today.", ["See the zoo page today."],
                            {"markdown", "link_url"}, []),
    # issue 27: a sentence that code cut is broken; none of it is spoken
    "inline code": ("Say `print(1)` twice. Okay!", ["Okay!"], {"code", "tool_talk"}, []),
    "backticked tool name": ("Sure, I'll call `adjust_device_volume` now. Have fun!", ["Have fun!"],
                             {"code", "tool_talk"}, []),
    "backticked name starts the sentence": ("`web_search` can find it for you. Ask me!", ["Ask me!"],
                                            {"code", "tool_talk"}, []),
    "call parameters read aloud": ('Okay! I can use the function with the mode set to "relative" and a value of -5. '
                                   "There you go.", ["Okay!", "There you go."], {"tool_talk"}, []),
    "a parameter with a quoted value": ("I set it with mode 'absolute' and level 30. Yay!", ["Yay!"],
                                        {"tool_talk"}, []),
    "a snake_case parameter": ("The start_at is tomorrow. See you!", ["See you!"], {"tool_talk"}, []),
    "dangling fragment before json": ('Okay! Here is the JSON object for the {"name": "adjust_device_volume", '
                                      '"arguments": {"mode": "absolute", "value": 30}} Done!', ["Okay!", "Done!"],
                                      {"json", "tool_talk"}, [VOLUME_CALL]),
    "dangling fragment before a fence": ('Sure! To do that, I will ```json\n{"name": "adjust_device_volume", '
                                         '"arguments": {"mode": "absolute", "value": 30}}\n``` All set.',
                                         ["Sure!", "All set."], {"code", "tool_talk"}, [VOLUME_CALL]),
    "a sentence going on after a call": ('Okay, turning it up {"name": "adjust_device_volume", "arguments": '
                                         '{"mode": "absolute", "value": 30}} now, okay? Yes!', ["Yes!"],
                                         {"json", "tool_talk"}, [VOLUME_CALL]),
    "emoji": ("Great job! 🎉🦖 You did it 👍🏽.", ["Great job!", "You did it."], {"emoji"}, []),
    "hermes tool call": ("Okay, turning it up!" + HERMES, ["Okay, turning it up!"], {"tool_call"}, [VOLUME_CALL]),
    "bare json call": ('Sure! {"name": "adjust_device_volume", "arguments": {"mode": "absolute", "value": 30}} Done.',
                       ["Sure!", "Done."], {"json"}, [VOLUME_CALL]),
    "json fence": ('Sure!\n```json\n{"name": "adjust_device_volume", "arguments": {"mode": "absolute", "value": 30}}'
                   '\n```\nAll set.', ["Sure!", "All set."], {"code"}, [VOLUME_CALL]),
    "tools tags": ('<tools>\n{"name": "adjust_device_volume", "arguments": {"mode": "absolute", "value": 30}}\n</tools>'
                   "Okay.", ["Okay."], {"tool_call"}, [VOLUME_CALL]),
    "doubled braces": ('Okay! {{"name": "adjust_device_volume", "arguments": {{"mode": "absolute", "value": 30}}}}',
                       ["Okay!"], {"json"}, [VOLUME_CALL]),
    "list of calls": ('Okay! [{"name": "adjust_device_volume", "arguments": {"mode": "absolute", "value": 30}}, '
                      '{"name": "terminate_session", "arguments": {}}] Bye.', ["Okay!", "Bye."], {"json"},
                      [[VOLUME_CALL, {"name": "terminate_session", "arguments": {}}]]),
    "function tag": ('Bye!<function=terminate_session>{}</function>', ["Bye!"], {"tool_call"},
                     [{"name": "terminate_session", "arguments": {}}]),
    "other tags and specials": ("Hi<|im_end|> <b>there</b>, friend.", ["Hi there, friend."], {"tag"}, []),
    "event block outside dual_agent": ("Bye!<agent_events>session.terminate</agent_events>", ["Bye!"],
                                       {"event_block"}, []),
    # a sentence that uses a name as a word talks about the machinery: none of it is spoken
    "names": ("Okay, louder! Now device.volume.adjust is done. I called adjust_device_volume!", ["Okay, louder!"],
              {"name"}, []),
    "a sentence about a tool": ('Here is the JSON object for the "adjust_device_volume" function call: What time '
                                'should I remind you?', ["What time should I remind you?"], {"name"}, []),
    "python-style call": ('adjust_device_volume(mode="absolute", value=30) Done. Bye!', ["Done.", "Bye!"],
                          {"tool_call"}, []),
    "python-style call later": ('Okay! device.volume.adjust(mode="mute") Done.', ["Okay!", "Done."], {"tool_call"}, []),
    "catalog echo": (catalog_instruction(_registry()) + "\nHi there!", ["Hi there!"], {"instruction", "catalog"}, []),
    "invented dotted names": ("Okay! I will feed.fish.start now. And volume.set(level=3) too.",
                              ["Okay!", "And too."], {"identifier", "tool_call"}, []),
    "the examples' form": ('Child: "Mmm, blue!" You: That\'s great!', ["That's great!"], {"instruction"}, []),
    "a made-up child line only": ('Child: "Make it 70!"', [], {"instruction"}, []),
    "invented name alone": ("Bye!\ngoodbye.session.end", ["Bye!"], {"identifier"}, []),
    "tools instruction echo": (tools_instruction() + " Hello!", ["Hello!"], {"instruction"}, []),
    # HTML: tags and the content of script/style go, references are decoded and then parsed, table pipes go
    "html and references": (CAT, ["Here is a cat:", "Meow She says purr."], {"tag", "script", "markdown"}, []),
    "comments, styles, numeric references": ("<!-- say hi --><style>p {color: red}</style>Hi &amp; bye.<br/> "
                                             "&#60;script&#x3e;alert(3)&#60;/script&#62;Done &#33;",
                                             ["Hi & bye.", "Done!"], {"tag", "script"}, []),
    "conditional comments and marked sections": ("Hi <![if !IE]>there<![endif]>, <![ ]]>friend <![CDATA[x]]>.",
                                                 ["Hi there, friend."], {"tag"}, []),
    # a call block is the markup filter's to read, untouched by the HTML stages
    "a call whose arguments hold markup": ('Sure! <tool_call>{"name": "web_search", "arguments": {"query": '
                                           '"is 2<3 &amp; <b>why</b>"}}</tool_call> Bye.', ["Sure!", "Bye."],
                                           {"tool_call"}, [{"name": "web_search",
                                                            "arguments": {"query": "is 2<3 &amp; <b>why</b>"}}]),
    "a markdown table": ("| Animal | Sound |\n|---|:---:|\n| Cat | Meow |\n", ["Animal Sound", "Cat Meow"],
                         {"markdown"}, []),
    "a reference left by a removal": ("Ha &*amp*; ha.", ["Ha ha."], {"markdown", "entity"}, []),
    "persona echo": ("You are Pip, a warm, playful talking toy for a young child. Hi!", ["Hi!"], {"instruction"}, []),
}

# ordinary speech that must come through untouched (no hiding at all)
PLAIN = [
    ("It is 3.5 meters long, about 1,000 kg, and 3 is less at 10:30.", ["It is 3.5 meters long,",
                                                                        "about 1,000 kg, and 3 is less at 10:30."]),
    # `&` alone is no character reference: the voice says "and"
    ("Cats & dogs play; AT&T rings!", ["Cats & dogs play;", "AT&T rings!"]),
    ("小猫和小狗，一起玩吧！好不好？", ["小猫和小狗，一起玩吧！", "好不好？"]),
    ("My volume is loud, and the session was fun.", ["My volume is loud,", "and the session was fun."]),
    ("Use snake_case ~5 times - ok?", ["Use snake_case ~5 times - ok?"]),
    ("恐龙很大！它们会下蛋。", ["恐龙很大！", "它们会下蛋。"]),
    # dotted, but words: abbreviations, numbers, a web domain
    ("See pbskids.org, e.g. at 3.5 m at 5 p.m. with Mr. Smith.", ["See pbskids.org,",
                                                                 "e.g. at 3.5 m at 5 p.m. with Mr. Smith."]),
]


def run(text: str, pieces: list[str], rules: SpeakableRules = RULES) -> tuple[list[str], list[Hidden]]:
    guard = SpeakableGuard(rules)
    items = []
    for piece in pieces:
        items += guard.feed(piece)
    items += guard.finish()
    return [i for i in items if isinstance(i, str)], [i for i in items if isinstance(i, Hidden)]


def splits(text: str) -> dict[str, list[str]]:
    """Whole, char by char, and seeded random splits (1-7 characters)."""
    rng = random.Random(13)
    out = {"whole": [text], "chars": list(text)}
    for n in range(3):
        pieces, i = [], 0
        while i < len(text):
            step = rng.randint(1, 7)
            pieces.append(text[i:i + step])
            i += step
        out[f"random{n}"] = pieces
    return out


@pytest.mark.parametrize("case", CASES)
def test_unspeakable_forms_are_hidden_at_any_chunking(case):
    text, spoken, kinds, values = CASES[case]
    for how, pieces in splits(text).items():
        said, hidden = run(text, pieces)
        assert said == spoken, how
        assert kinds <= {h.kind for h in hidden}, how
        assert [v for h in hidden for v in h.values] == values, how
        assert not detect(" ".join(said), RULES), how


@pytest.mark.parametrize("case", CASES)
def test_every_two_piece_split(case):
    text, spoken, _, values = CASES[case]
    for cut in range(len(text) + 1):
        said, hidden = run(text, [text[:cut], text[cut:]])
        assert said == spoken, cut
        assert [v for h in hidden for v in h.values] == values, cut


@pytest.mark.parametrize("text,spoken", PLAIN)
def test_plain_speech_passes_untouched(text, spoken):
    for how, pieces in splits(text).items():
        said, hidden = run(text, pieces)
        assert said == spoken and hidden == [], how
    assert detect(text, RULES) == []


def test_a_reply_like_a_catalog_example_is_speech_but_the_labelled_example_is_an_echo():
    examples = example_lines(_registry())
    assert examples
    for child, reply, _ in examples:
        said, hidden = speakable(reply, RULES)
        assert " ".join(said) == reply and hidden == []
        said, hidden = speakable(f'Child: "{child}" You: {reply}', RULES)
        assert said == [] and {h.kind for h in hidden} == {"instruction"}


def test_detector_says_what_and_why():
    findings = detect("**Hi!** 🎉 " + HERMES + " Now device.volume.adjust is on.", RULES)
    kinds = [(f.kind, f.reason) for f in findings]
    assert ("markdown", "markdown formatting") in kinds
    assert ("emoji", "emoji") in kinds
    assert ("tool_call", "tool-call syntax") in kinds
    assert ("name", "a registered event or tool name") in kinds
    assert detect("Okay, feed.fish.start!", RULES) == [
        Finding("identifier", "an identifier-like name (an invented event or tool name)", "Okay, feed.fish.start!")]
    assert next(f.raw for f in findings if f.kind == "tool_call") == HERMES


def test_plain_text_is_released_at_once_and_markup_prefixes_only_until_ruled_out():
    markup = MarkupFilter()
    assert markup.feed("Sure") == [Text("Sure")] and markup.held == ""
    assert markup.feed(" <") == [Text(" ")] and markup.held == "<"  # could become <tool_call>
    assert markup.feed(" 3") == [Hidden("markup", "<"), Text(" 3")] and markup.held == ""  # a sign, never said
    assert markup.feed(" <tool") == [Text(" ")] and markup.held == "<tool"
    assert markup.feed('_call>{"name"') == [] and markup.held.startswith("<tool_call>")
    markup = MarkupFilter()
    assert markup.feed("1") == [] and markup.feed("0 cats") == [Text("10 cats")]  # "1. " was possible, then not


def test_unclosed_blocks_are_hidden_not_spoken():
    for text in ("Okay!<tool_call>{\"name\": \"adjust_device", "Okay! {\"name\": \"x\"", "Okay! ```json\n{",
                 "Okay! `code"):
        said, hidden = run(text, list(text))
        assert said == ["Okay!"]
        assert hidden[-1].unclosed


def test_a_closed_call_in_an_unclosed_tag_is_still_recovered():
    said, hidden = run("Sure!<tool_call>" + '{"name": "terminate_session", "arguments": {}}', ["Sure!<tool_call>{",
                                                                                             '"name": "terminate_session", "arguments": {}}'])
    assert said == ["Sure!"]
    assert hidden[-1].unclosed and hidden[-1].values == ({"name": "terminate_session", "arguments": {}},)


def test_cut_by_length_drops_only_the_partial_sentence():
    for cut_text, spoken in (("Dinosaurs were huge. Some of them could fl", ["Dinosaurs were huge."]),
                             ("Dinosaurs were huge. They flew!", ["Dinosaurs were huge.", "They flew!"]),
                             ('He said "hi." ', ['He said "hi."']),
                             ("恐龙很大。它们会", ["恐龙很大。"])):
        guard = SpeakableGuard(RULES)
        items = guard.feed(cut_text) + guard.finish(cut_by_length=True)
        assert [i for i in items if isinstance(i, str)] == spoken
        dropped = [i for i in items if isinstance(i, Hidden) and i.kind == "partial_sentence"]
        assert len(dropped) == (0 if cut_text.rstrip().endswith(('.', '!', '"')) else 1)
    # without the length cut, the same tail is spoken
    assert speakable("Dinosaurs were huge. Some of them could fl", RULES)[0][-1] == "Some of them could fl"


def test_json_values_undo_doubled_braces_and_skip_garbage():
    assert json_values('x {"a": 1} y [1, 2] {bad} {{"b": {{"c": 2}}}}') == [{"a": 1}, [1, 2], {"b": {"c": 2}}]


def test_calls_from_text_shapes_and_argument_rules():
    calls = calls_from_text([
        [{"name": "adjust_device_volume", "arguments": {"mode": "mute"}}, {"name": "terminate_session"}],
        {"name": "Rex", "age": 3},  # a JSON object about a dinosaur is not a call
        {"type": "function", "function": {"name": "web_search", "arguments": '{"query": "cats"}'}},
        {"name": "adjust_device_volume", "parameters": {"mode": "unmute"}},
        {"name": "adjust_device_volume", "arguments": "not json"},
        {"name": "adjust_device_volume", "arguments": [1]},
        {"tool_calls": [{"name": "terminate_session", "arguments": None}]},
    ], first_index=2)
    assert [(c.name, c.arguments) for c in calls] == [
        ("adjust_device_volume", {"mode": "mute"}), ("terminate_session", {}), ("web_search", {"query": "cats"}),
        ("adjust_device_volume", {"mode": "unmute"}), ("adjust_device_volume", None), ("adjust_device_volume", None),
        ("terminate_session", {})]
    assert [c.call_id for c in calls][:2] == ["text_call_2", "text_call_3"]
    assert calls[4].arguments_error.startswith("malformed JSON") and "list" in calls[5].arguments_error


def test_plain_word_names_are_not_removed_from_speech():
    rules = SpeakableRules(["search", "web_search", "knowledge.web.search"])
    assert speakable("I can search for it. Not web_search or knowledge.web.search though.", rules)[0] == [
        "I can search for it."]


def test_ends_sentence():
    from toy_runtime.agent.sentences import ends_sentence

    assert ends_sentence("Hi there.") and ends_sentence('He said "go!" ') and ends_sentence("好的。")
    assert not ends_sentence("Some of them could fl") and not ends_sentence("Well,") and not ends_sentence("")


def test_a_comparison_is_said_in_words_and_any_other_angle_bracket_is_hidden():
    said, hidden = speakable("Yes, 3 < 5 and 7>2. So a -> b, and I <3 you!", RULES)
    assert said == ["Yes, 3 less than 5 and 7 greater than 2.", "So a - b, and I 3 you!"]
    assert [h.raw for h in hidden] == [">", "<"]
    assert speakable("因为3<5，所以对。", RULES)[0] == ["因为3小于5，", "所以对。"]


def test_a_tag_split_over_deltas_and_an_unclosed_script_are_never_spoken():
    said, hidden = run("", ["Hi! <scr", "ipt>alert(2)</sc", "ript> Bye.", " <sty", "le>p {}"])
    assert said == ["Hi!", "Bye."]
    assert [(h.kind, h.raw, h.unclosed) for h in hidden if h.kind == "script"] == [
        ("script", "alert(2)", False), ("script", "p {}", True)]


def test_a_lone_angle_bracket_holds_speech_back_only_a_bounded_while():
    guard = SpeakableGuard(RULES)
    said = guard.feed("So if a<b then we keep going. ")
    for _ in range(12):
        said += guard.feed("And we keep going. ")
    # "<b then …" could still be a tag with attributes; past MAX_TAG characters it is not, and speech flows on
    assert [s for s in said if isinstance(s, str)][:2] == ["So if a b then we keep going.", "And we keep going."]


# -- the property: nothing spoken is an angle bracket or a character reference ---------------------------------

_REFERENCE = re.compile(r"&#?[A-Za-z0-9]+;")
_PIECES = ["<", ">", "&", ";", "#", "/", "=", '"', "'", " ", "\n", ".", "!", ",", "3", "x", "lt", "gt", "amp", "#60",
           "x3c", "&lt;", "&gt;", "&amp;", "&#60;", "&#x3e;", "<b>", "</b>", "<i", "<script>", "</script>", "scr", "ipt",
           "<style>", "</sty", "<img src=x onerror=alert(1)>", "<!--", "-->", "<!", "<?", "*", "`", "|", "{", "}",
           "[", "]", "(", ")", "_", "Meow", "猫", "<tool_call>", "</tool_call>", "<|im_end|>", "<think>", "<![", "<![if",
           "]]>", "<!DOCTYPE", "<agent_events>", "</agent_events>", "session.terminate"]
_TEXTS = st.lists(st.sampled_from(_PIECES) | st.text(max_size=4), max_size=40).map("".join)


@st.composite
def _chunked(draw) -> list[str]:
    """A text made of markup fragments and arbitrary characters, cut into arbitrary deltas."""
    text = draw(_TEXTS)
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=12)))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]


def _through_event_parser(pieces: list[str]) -> list[str]:
    """dual_agent's path: the text-event parser takes its blocks out first, the guard gets the visible text."""
    parser, guard, items = TextEventParser(), SpeakableGuard(RULES), []
    for piece in pieces:
        items += [out for p in parser.feed(piece) if isinstance(p, Visible) for out in guard.feed(p.text)]
    items += [out for p in parser.close() if isinstance(p, Visible) for out in guard.feed(p.text)]
    return [i for i in items + guard.finish() if isinstance(i, str)]


@pytest.mark.parametrize("path", ["chat_agent_tools", "dual_agent"])
@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=_chunked())
def test_no_angle_bracket_or_reference_is_ever_spoken(path, pieces):
    said = run("".join(pieces), pieces)[0] if path == "chat_agent_tools" else _through_event_parser(pieces)
    for segment in said:
        for piece in clause_pieces(segment, 20):  # what the voice is finally given
            assert "<" not in piece and ">" not in piece and not _REFERENCE.search(piece), (pieces, piece)


_WORDS = st.lists(st.from_regex(r"[a-z]{1,8}", fullmatch=True), min_size=1, max_size=12)
_MARKUP = st.sampled_from(["<b>", "</i>", "<img src=x onerror=alert(1)>", "&lt;i&gt;", "&lt;/i&gt;", "<br/>",
                           "<script>alert(2)</script>", "<style>p {}</style>", "<!-- x -->", "&#60;u&#62;", "||", "|"])


@settings(max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(_WORDS, st.data())
def test_the_words_around_html_are_all_spoken(words, data):
    parts = [f"{word} {data.draw(_MARKUP)} " if data.draw(st.booleans()) else f"{word} " for word in words]
    text = "".join(parts) + "end."
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=8)))
    said, _ = run(text, [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])], NO_RULES)
    assert re.findall(r"\w+", " ".join(said)) == [*words, "end"]


def test_a_parser_assertion_hides_what_it_held_and_parsing_goes_on():
    from _markupbase import ParserBase

    class StdlibMarkedSections(HtmlText):  # the stdlib's own rules, which assert on `<![ x]>`
        parse_marked_section = ParserBase.parse_marked_section

    stage = StdlibMarkedSections(frozenset(BLOCK_TAGS))
    items = stage.feed("Hi <![ x]> there") + stage.feed(" <b>friend</b>") + stage.close()
    assert [i.text for i in items if isinstance(i, Text)] == ["Hi ", " ", "friend"]
    confused, *tags = [i for i in items if isinstance(i, Hidden)]
    assert confused.raw.endswith("<![ x]> there") and confused.unclosed and [t.raw for t in tags] == ["<b>", "</b>"]
