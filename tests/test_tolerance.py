"""What real outputs do to a format that its template never renders, read by general
rules of the runtime (issue 26; docs/real-outputs.md, "General rules"):

- a closer missing or cut short at the end of the text closes what it closes, wherever
  the cut falls after the last value, unless what is left may also begin what else
  follows there (class 2); a section closer cut after its first character leaves
  nothing in the content (class 3);
- values a literal reader refuses: JSON's or Python's null/true/false inside a value of
  the template's own syntax; in call syntax, an unquoted word, a quote left unescaped
  inside a string, a comma left out (class 4);
- a call inside an open reasoning block is reasoning text when the block's closer
  follows it, and ends the block only where none does (class 6);
- whitespace between the markers of a key's closing literal (class 8).

Model outputs are written by hand, for corpus formats and for the invented templates
`muse_keyval` and `pylist_raw_calls` (tests/invented/). Each states what ``parse``
reads; the stream, cut at every chunking below, must merge into exactly that, and the
calls it abandons must never read as JSON (DESIGN's stream contract). Where a text has
two readings, the test says which one is taken and why.
"""

from __future__ import annotations

import json
import os
import random

import pytest

from compiler.loader import load_generated
from tests import roundtrip as rt
from tests.test_deviations import calls, expect
from tests.test_stream import merge, streamed

INVENTED = ("muse_keyval", "pylist_raw_calls", "pyrepr_calls", "python_calls", "atat_section")


@pytest.fixture(scope="module")
def invented(tmp_path_factory):
    """The invented templates these tests use, compiled as a user's templates are."""
    out = tmp_path_factory.mktemp("tolerance")
    rt.build_invented(out, INVENTED)
    modules = {}
    for name in INVENTED:
        modules[name] = load_generated(out / "generated", name)
    return modules


def _cuts(text: str):
    size = len(text)
    for step in (1, 2, 3, 5, 7):
        yield range(step, size, step)
    yield []
    rng = random.Random(text)
    for _ in range(3):
        yield sorted(rng.sample(range(1, size), min(size - 1, 9))) if size > 1 else []


def read(module, text: str, **options) -> dict:
    """``parse``'s message, once the stream has merged into it at every chunking (and
    never sent an abandoned call's arguments as JSON: ``merge`` checks)."""
    if isinstance(module, str):
        module = rt.module(module)
    whole = module.parse(text, **options)
    for cuts in _cuts(text):
        fed, finished, abandoned = streamed(module, text, cuts, **options)
        assert merge(fed + finished, abandoned) == whole, list(cuts)
    return whole


WEATHER = ("get_weather", {"city": "Paris"})
MUSE = "<call>\n<fn=get_weather>\n<key>city</key><val>Paris</val>\n</fn>\n</call>"
CODER = "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>"


# --- class 2: a missing last closer -----------------------------------------------


def test_a_missing_last_closer_closes():
    # The issue's form: only '</tool_call>' missing (it was content; cut after
    # '</parameter>\n' the same text was already a call).
    text = CODER[: CODER.index("\n</tool_call>")]
    expect(read("qwen3_coder", text), called=[("f", {"a": 1})])


@pytest.mark.parametrize("ending", ["", "<|stop_turn|>", "\n<|stop_turn|>"])
def test_a_closer_cut_anywhere_after_the_last_value_closes(invented, ending):
    """Every cut from the end of the last value's closer on reads the same call:
    recovery does not depend on where the cut falls."""
    module = invented["muse_keyval"]
    last = MUSE.index("</val>") + len("</val>")
    for cut in range(last, len(MUSE) + 1):
        if MUSE[:cut].endswith("\n<"):
            continue  # two readings: the next test
        expect(read(module, MUSE[:cut] + ending), called=[WEATHER])


def test_a_cut_that_may_begin_the_next_key_is_not_a_call(invented):
    """Two readings: after a value, '<' may begin the call's closer '</fn>' or the next
    argument's '<key>'; the call may have had more arguments, so it stays text."""
    text = MUSE[: MUSE.index("</fn>") + 1]
    assert text.endswith("\n<")
    expect(read(invented["muse_keyval"], text), content=text)


def test_a_cut_inside_a_value_is_not_a_call(invented):
    # The value may go on: no call is read from a value whose closer never began.
    for end in ("Par", "Paris", "Paris</va"):
        text = MUSE[: MUSE.index("Paris")] + end
        expect(read(invented["muse_keyval"], text), content=text)


def test_a_call_object_cut_before_its_brace_is_not_a_call():
    """A JSON call is the model's own JSON text: one cut inside it (its closing brace
    included) is malformed, as vLLM's Hermes tests hold ('invalid_json'); a cut in
    the markers after it closes it."""
    whole = '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'
    slug = "qwen_qwen2_5_7b_instruct"
    text = whole[: whole.index("}}") + 1]
    expect(read(slug, text, enable_thinking=False), content=text)
    for cut in range(whole.index("}}") + 2, len(whole) + 1):
        expect(read(slug, whole[:cut], enable_thinking=False), called=[("f", {"a": 1})])


# --- class 3: a leftover closer ---------------------------------------------------


@pytest.mark.parametrize(
    "slug,text",
    [
        # '<TOOLCALL>[...]' with '</TOOLCALL>' cut: the ']' stayed in the content
        ("nvidia_nemotron_nano_v2", '</think><TOOLCALL>[{"name": "f", "arguments": {"a": 1}}]'),
        ("nvidia_nemotron_nano_v2", '</think><TOOLCALL>[{"name": "f", "arguments": {"a": 1}}]</TOOL'),
        ("lfm2_5_8b_a1b", "<|tool_call_start|>[f(a=1)]"),
        ("lfm2_5_8b_a1b", "<|tool_call_start|>[f(a=1)]<|tool_call_"),
    ],
)
def test_a_section_closer_cut_leaves_nothing(slug, text):
    expect(read(slug, text, enable_thinking=False), called=[("f", {"a": 1})])


def test_an_invented_section_closer_cut(invented):
    text = '@@calls\n[{"tool": "get_weather", "input": {"city": "Paris"}}]'
    expect(read(invented["atat_section"], text), called=[WEATHER])


def test_a_comma_that_may_begin_another_call_stays(invented):
    """Two readings: after a call, ', ' may begin the next call; it is text after the
    calls (the calls read stand), not a closer."""
    text = '@@calls\n[{"tool": "get_weather", "input": {"city": "Paris"}},'
    expect(read(invented["atat_section"], text), content=",", called=[WEATHER])


# --- class 4: values a literal reader refuses -------------------------------------

GEMMA = "google_gemma_4_31b_it"


@pytest.mark.parametrize(
    "value,expected",
    [
        ("{a:null}", {"a": None}),  # the template writes None; the whole call was text
        ("{a:None,b:true,c:[1,null,False]}", {"a": None, "b": True, "c": [1, None, False]}),
        ("True", True),
    ],
)
def test_json_and_python_words_in_a_value_of_its_own_syntax(value, expected):
    text = "<|tool_call>call:f{o:" + value + "}<tool_call|>"
    expect(read(GEMMA, text, enable_thinking=False), called=[("f", {"o": expected})])


def test_a_word_that_is_no_value_stays_text():
    text = "<|tool_call>call:f{o:{a:nil}}<tool_call|>"
    expect(read(GEMMA, text, enable_thinking=False), content=text)


def _pylist(*calls_text: str) -> str:
    return "<|py|>[" + ", ".join(calls_text) + "]<|/py|>"


@pytest.mark.parametrize(
    "text,called",
    [
        # an unquoted word: a string
        (_pylist("get_weather(city=Paris)"), [WEATHER]),
        (_pylist("get_weather(city=Paris, days=3)"), [("get_weather", {"city": "Paris", "days": 3})]),
        # quotes inside a string, as the template itself writes them (it escapes none)
        (_pylist("f(q='the 'old' town')"), [("f", {"q": "the 'old' town"})]),
        (_pylist("f(q='it's', n=2)", "g(p='a')"), [("f", {"q": "it's", "n": 2}), ("g", {"p": "a"})]),
        (_pylist("f(cmd='sed -n '1,5p' x.py')"), [("f", {"cmd": "sed -n '1,5p' x.py"})]),
        (_pylist("f(c='print(f'a')')"), [("f", {"c": "print(f'a')"})]),
        # a comma left out between arguments
        (_pylist("f(a='x' b=2)"), [("f", {"a": "x", "b": 2})]),
        (_pylist("f(a=1  b='y')"), [("f", {"a": 1, "b": "y"})]),
    ],
)
def test_loose_values_in_call_syntax(invented, text, called):
    expect(read(invented["pylist_raw_calls"], text), called=called)


LFM2 = "lfm2_5_8b_a1b"


def _lfm2(*calls_text: str) -> str:
    return "<|tool_call_start|>[" + ", ".join(calls_text) + "]<|tool_call_end|>"


@pytest.mark.parametrize(
    "text,called",
    [
        # vLLM's LFM2 tests: a Python set, the array it stands for (JSON has no set),
        # its items in the order written
        (_lfm2("label(tags={'urgent', 'bug'})"), [("label", {"tags": ["urgent", "bug"]})]),
        (_lfm2("f(o={'a': {3, 1}, 'b': {}})"), [("f", {"o": {"a": [3, 1], "b": {}}})]),
    ],
)
def test_a_python_set_is_an_array(text, called):
    expect(read(LFM2, text), called=called)


def test_a_set_python_refuses_is_no_value():
    # a list inside a set: Python refuses it, and it is no value (read as the text)
    text = _lfm2("f(o={[1], 2})")
    expect(read(LFM2, text), called=[("f", {"o": "{[1], 2}"})])


def test_an_unquoted_value_with_a_space_is_not_read(invented):
    """Not unambiguous: 'New York' unquoted is a word, then a unit with no key; the
    call stays text."""
    text = _pylist("get_weather(city=New York)")
    expect(read(invented["pylist_raw_calls"], text), content=text)


def test_two_readings_of_an_unquoted_word_and_a_key(invented):
    """Two readings: 'a=hello world=3' is two arguments with the comma left out, or one
    unquoted string holding '='. The template quotes every string, so a bare word is
    one word, and the comma-left-out reading is taken."""
    text = _pylist("f(a=hello world=3)")
    expect(read(invented["pylist_raw_calls"], text), called=[("f", {"a": "hello", "world": 3})])


def test_two_readings_of_a_quote_before_a_separator(invented):
    """Two readings: in "f(a='x', b='y')" the value of a may be "x', b='y" (the template
    writes a quote inside a string as it is). The first quote that a value's end
    follows ends the string: two arguments."""
    text = _pylist("f(a='x', b='y')")
    expect(read(invented["pylist_raw_calls"], text), called=[("f", {"a": "x", "b": "y"})])


def test_a_name_after_a_quote_holds_no_quote():
    """What follows a value is the next key (or call), a name that holds no quote: a
    quote inside a string is its end only by the text up to the next quote. Here
    "then'" is no key, so the quote after "hi" is the string's own (read before as
    the end, "then',b" the next key)."""
    text = _lfm2("f(q='she said 'hi', then',b=1)")
    expect(read(LFM2, text), called=[("f", {"q": "she said 'hi', then", "b": 1})])


@pytest.mark.parametrize("slug", ["pyrepr_calls", "python_calls"])
def test_an_unescaped_quote_in_an_escaping_format(invented, slug):
    # Both templates escape a quote inside a string; a model that does not is read too.
    if slug == "pyrepr_calls":
        text = '<|acts|>\n→ f(q="the "old" town", n=2)\n<|/acts|>'
    else:
        text = '⟨⟨f(q="the "old" town", n=2)⟩⟩'
    expect(read(invented[slug], text), called=[("f", {"q": 'the "old" town', "n": 2})])


def test_an_escaped_quote_still_ends_nothing(invented):
    text = '⟨⟨f(q="say \\"hi\\"", n=2)⟩⟩'
    expect(read(invented["python_calls"], text), called=[("f", {"q": 'say "hi"', "n": 2})])


# --- class 6: calls and content inside reasoning ----------------------------------

SEED = "bytedance_seed_oss"
SEED_CALL = (
    "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n"
    "</function>\n</seed:tool_call>"
)


def test_a_call_quoted_inside_reasoning_is_reasoning():
    """The issue's Seed-OSS form: the call ended the reasoning and the closer was left
    in the content."""
    text = "<seed:think>I could call " + SEED_CALL + " here</seed:think>It is sunny."
    expect(
        read(SEED, text),
        content="It is sunny.",
        reasoning="I could call " + SEED_CALL + " here",
    )


def test_a_call_in_reasoning_with_no_closer_ends_it():
    text = "<seed:think>Let me look.\n" + SEED_CALL
    expect(read(SEED, text), reasoning="Let me look.", called=[WEATHER])


@pytest.mark.parametrize("call", ["", SEED_CALL])
def test_a_long_unclosed_reasoning_of_broken_calls(call):
    """More broken call openers in a block no closer ends than the stream reads at a
    time (its rest comes again a piece at a time once the output has ended: each
    try had cost the rest's length): each is reasoning text, and a well-formed call
    after them ends the block, in parse and the stream alike."""
    opener = SEED_CALL.split("\n")[0] + "\n"
    text = "<seed:think>Let me look.\n" + opener * 400 + call
    message = read(SEED, text)
    assert message["reasoning_content"].startswith("Let me look.\n" + opener)
    assert message["reasoning_content"].count(opener.strip()) == 400
    assert calls(message) == ([WEATHER] if call else [])
    assert message["content"] is None


@pytest.mark.parametrize("between", ["", "\n\n", "Checking.\n"])
def test_calls_in_and_after_the_reasoning(invented, between):
    call = "\n" + MUSE
    text = "<muse>Maybe" + call + " or not.</muse>\n" + between + call
    expect(
        read(invented["muse_keyval"], text),
        content=between.strip() or None,
        reasoning="Maybe" + call + " or not.",
        called=[WEATHER],
    )


def test_a_call_in_reasoning_then_text_and_no_closer(invented):
    # No closer comes: the call ends the block, and what follows it is content.
    text = "<muse>Looking." + "\n" + MUSE + "\nDone"
    expect(read(invented["muse_keyval"], text), content="Done", reasoning="Looking.", called=[WEATHER])


# --- class 8: whitespace between tagged markers ------------------------------------


@pytest.mark.parametrize(
    "slug,text",
    [
        # the template writes '</arg_key><arg_value>'; the model a newline between
        ("glm_4_7_flash", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>"),
        # the template writes '</arg_key>\n<arg_value>'; the model nothing between
        ("glm_4_6", "<tool_call>get_weather\n<arg_key>city</arg_key><arg_value>Paris</arg_value>\n</tool_call>"),
        ("glm_4_6", "<tool_call>get_weather\n<arg_key>city</arg_key>  \n <arg_value>Paris</arg_value></tool_call>"),
    ],
)
def test_whitespace_between_a_keys_closing_markers(slug, text):
    expect(read(slug, text, enable_thinking=False), called=[WEATHER])


@pytest.mark.parametrize("between", ["\n", " ", "\n\t "])
def test_whitespace_between_invented_markers(invented, between):
    text = MUSE.replace("</key><val>", "</key>" + between + "<val>")
    expect(read(invented["muse_keyval"], text), called=[WEATHER])


def test_text_between_the_markers_is_no_call(invented):
    text = MUSE.replace("</key><val>", "</key> x <val>")
    expect(read(invented["muse_keyval"], text), content=text)


def test_a_key_after_a_left_out_separator_is_a_word(invented):
    # Whitespace then a marker is no unit: the separator was not left out there.
    text = _pylist("f(a='x' <b>=2)")
    expect(read(invented["pylist_raw_calls"], text), content=text)


def test_transformers_reads_gemmas_own_nested_none_as_text():
    """What the response_template export cannot say (its review note on
    tools.arguments.syntax): transformers' json reader takes no word for null but
    JSON's (``string_delims`` restores strings only, ``unquoted_keys`` quotes keys
    only), so a nested value holding the template's own None stays text, where
    parse reads an object. A nested null written as JSON, which parse now reads
    too, both read alike."""
    chat_parsing = pytest.importorskip("transformers.utils.chat_parsing")
    path = os.path.join(rt.ROOT, "generated", f"{GEMMA}.response_template.json")
    with open(path, encoding="utf-8") as handle:
        template = json.load(handle)
    module = rt.module(GEMMA)
    assert "null (written None)" in json.dumps(module.SPEC["review"])
    for written, theirs in (("None", "{depth:2,follow:None}"), ("null", {"depth": 2, "follow": None})):
        text = "<|tool_call>call:f{o:{depth:2,follow:" + written + "}}<tool_call|>"
        ours = calls(module.parse(text, enable_thinking=False))
        assert ours == [("f", {"o": {"depth": 2, "follow": None}})]
        parsed = chat_parsing.parse_response(text, template, prefix="")
        assert parsed["tool_calls"][0]["function"]["arguments"] == {"o": theirs}


@pytest.mark.parametrize("ending", ["<|im_end|>", "<|im_end|>\n", "\n<|im_end|>"])
def test_a_held_call_in_reasoning_then_the_end_of_turn(ending):
    """The stream holds the text of a call inside open reasoning; the end-of-turn
    marker after it must stay apart as ``parse`` strips it (it was read as a name)."""
    text = "Look: <tool_call>\n<function=" + ending  # the prompt opened <think>
    expect(read("qwen3_5_4b", text, enable_thinking=True), reasoning="Look: <tool_call>\n<function=")


# --- whitespace inside a marker ------------------------------------------------------

MINICPM = "openbmb_minicpm5_1b"
MINICPM_W = '<function name="get_weather"><param name="city">Paris</param></function>'


@pytest.mark.parametrize(
    "text,content",
    [
        # vLLM's MiniCPM5 tests: the space between the tag name and 'name=' left out
        (MINICPM_W.replace(" name=", "name="), None),
        (MINICPM_W.replace("<param name=", "<paramname="), None),
        ("Sure.\n" + MINICPM_W.replace(" name=", "  \nname="), "Sure."),
    ],
)
def test_whitespace_inside_a_marker_left_out_or_written_otherwise(text, content):
    expect(read(MINICPM, text, enable_thinking=False), content=content, called=[WEATHER])


@pytest.mark.parametrize(
    "text",
    [
        # what is not the marker's words stays content: the tokenizer's space marker
        # (text not detokenized), other letters after the tag name
        MINICPM_W.replace(" name=", "\u0120name="),
        "Use <functions> and <function-name> tags.",
        MINICPM_W.replace(" name=", "s name="),
    ],
)
def test_a_marker_with_other_text_inside_is_content(text):
    expect(read(MINICPM, text, enable_thinking=False), content=text)
