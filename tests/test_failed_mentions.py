"""Calls after triggers that start none (issue 12, item 4): prose may quote a
format's call trigger any number of times, and a real call after it is still read;
a broken call that reads on past later triggers is read once, and the triggers
inside its text are content.

The texts are built from each module's own markers: its trigger (``TRIGGER``), the
call its template renders (the round trip's ``tool_call`` case: the template is the
oracle for the call), and prose. ``parse`` of the call alone says what the calls
are; the stream, cut one character at a time, five at a time and at random, must
merge into what ``parse`` reads.
"""

from __future__ import annotations

import pytest

from tests import roundtrip as rt
from tests.test_stream import chunkings, merge, streamed

PROSE = " is how a call starts; this one is only quoted.\n"


def _triggered() -> list[str]:
    """The modules whose calls a trigger marks (in a bare-call format the whole
    output is calls or content: nothing is looked for)."""
    return [slug for slug in rt.slugs() if getattr(rt.module(slug), "TRIGGER", "")]


def _call_case(slug: str):
    """The first call case the template renders (one call where it can)."""
    for kind in rt.TOOL_KINDS:
        case = rt.make_case(slug, kind)
        if case is not None and not kind.content and not kind.reasoning:
            return case
    pytest.skip("the template renders no call on its own")


def _mentions(module, count: int) -> str:
    """``count`` failed mentions of the trigger, each in a sentence of its own;
    every other one has a line break after the trigger (where a call's body would
    start)."""
    trigger = module.TRIGGER.strip()
    return "".join(
        ("Note %d: " % n) + trigger + ("\n" if n % 2 else "") + PROSE for n in range(count)
    )


def _text(message: dict) -> str:
    """The message's text: its reasoning (where the prompt opened a block the
    mentions stay in) and its content."""
    return (message["reasoning_content"] or "") + (message["content"] or "")


def _check_stream(module, text: str, message: dict, cuts=("1-char", "5-char", "random"), **options):
    for name, positions in chunkings(text, text[-40:]):
        if name not in cuts:
            continue
        fed, finished, abandoned = streamed(module, text, positions, **options)
        assert merge(fed + finished, abandoned) == message, name


@pytest.mark.parametrize("count", [9, 20, 100])
@pytest.mark.parametrize("slug", _triggered())
def test_a_call_after_failed_mentions_is_read(slug, count):
    module = rt.module(slug)
    case = _call_case(slug)
    alone = module.parse(case.text, tools=case.tools)
    assert alone["tool_calls"], "the rendered call is read on its own"
    mentions = _mentions(module, count)
    text = mentions + case.text
    message = module.parse(text, tools=case.tools)
    assert [c["function"] for c in message["tool_calls"]] == [
        c["function"] for c in alone["tool_calls"]
    ]
    # every mention is text (content, or reasoning where the prompt opened it), in order
    written = _text(message)
    at = 0
    for n in range(count):
        at = written.find("Note %d: " % n, at)
        assert at >= 0, n
    cuts = ("1-char", "5-char", "random") if count < 100 else ("5-char", "random")
    _check_stream(module, text, message, cuts, tools=case.tools)


@pytest.mark.parametrize("slug", _triggered())
def test_calls_between_mentions_are_all_read(slug):
    """Mentions before, between and after two calls: both calls are read (where the
    format reads calls after text after calls), and each is read once."""
    module = rt.module(slug)
    case = _call_case(slug)
    alone = module.parse(case.text, tools=case.tools)
    text = _mentions(module, 12) + case.text + "\n" + _mentions(module, 12) + case.text
    message = module.parse(text, tools=case.tools)
    names = [c["function"]["name"] for c in message["tool_calls"]]
    first = alone["tool_calls"][0]["function"]["name"]
    assert names and set(names) == {first}
    assert len(names) <= 2 * len(alone["tool_calls"])
    _check_stream(module, text, message, ("5-char", "random"), tools=case.tools)


@pytest.mark.parametrize("slug", _triggered())
def test_many_mentions_are_content(slug):
    """A thousand quoted triggers and no call: all content, nothing lost."""
    module = rt.module(slug)
    mentions = _mentions(module, 1000)
    message = module.parse(mentions)
    assert message["tool_calls"] == []
    assert _text(message) == mentions.strip()
    _check_stream(module, mentions, message, ("5-char",))


HERMES = "nousresearch_hermes_2_pro_llama_3_8b_tool_use"
CODER = "qwen3_coder"


def test_a_call_inside_a_broken_calls_text_is_its_text():
    """A call whose arguments never close reads to the end of the output: a trigger
    inside its text more than ``_LOOKBACK`` (256) characters before the end starts
    no call (it is part of the broken call, which is content), and parse and the
    stream agree on it; one closer to the end is tried."""
    module = rt.module(HERMES)
    real = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    opened = '<tool_call>\n{"name": "get_weather", "arguments": {"city": ' + "\n"
    text = opened + real + "\nMore words follow." * 20
    message = module.parse(text)
    assert message["tool_calls"] == []
    assert message["content"] == text.strip()
    _check_stream(module, text, message)
    near = opened + real + "\nA few words."
    message = module.parse(near)
    assert [c["function"]["arguments"] for c in message["tool_calls"]] == ['{"city": "Paris"}']
    _check_stream(module, near, message)


def test_a_call_after_a_broken_call_that_stops_before_it_is_read():
    """A broken call that proves broken before the next trigger (its closer is
    missing) does not hide the call after it."""
    module = rt.module(HERMES)
    broken = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\noops\n'
    real = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    text = broken * 10 + real
    message = module.parse(text)
    assert [c["function"]["arguments"] for c in message["tool_calls"]] == ['{"city": "Paris"}']
    assert message["content"] == (broken * 10).strip()
    _check_stream(module, text, message)


def test_a_tagged_value_left_open_is_read_once():
    """Qwen3-Coder: a parameter whose closer never comes is read to the end of the
    output, once; a quoted trigger before it and the real call before that are read."""
    module = rt.module(CODER)
    real = (
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "</function>\n</tool_call>"
    )
    opened = "<tool_call>\n<function=get_weather>\n<parameter=city>\n"
    text = _mentions(module, 10) + real + "\n" + opened + "<tool_call>\n<function=x\n" * 50
    message = module.parse(text)
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["get_weather"]
    _check_stream(module, text, message, ("5-char", "random"))


NEMO = "mistralai_mistral_nemo_instruct_2407"


@pytest.mark.parametrize("count", [9, 20, 100])
def test_mistral_nemo_call_after_failed_mentions(count):
    """Mistral Nemo's template renders no call the round trip can use (its ids):
    a hand-written one, after quoted triggers, is read."""
    module = rt.module(NEMO)
    call = '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abcdefghi"}]'
    alone = module.parse(call)
    assert alone["tool_calls"]
    text = _mentions(module, count) + call
    message = module.parse(text)
    assert message["tool_calls"] == alone["tool_calls"]
    assert message["content"] == _mentions(module, count).strip()
    _check_stream(module, text, message, ("5-char", "random") if count == 100 else ("1-char", "5-char", "random"))


# Where the content is one unit of the turn (Functionary v3.2: content, then a call
# separator and calls that run to the end), a separator in the content is tried as
# the start of the calls at most _UNIT_TRIES (8) times. Python prompts (">>>", the
# separator) in the content use up those tries: a real bound, documented in
# docs/reliability.md, that real outputs can meet. The calls after three prompts are read; after
# nine they are not yet (strict: this fails once the bound is lifted, to be turned
# into a plain assertion).
UNIT = "meetkai_functionary_medium_v3_2"


def _after_prompts(count: int) -> str:
    module = rt.module(UNIT)
    prompts = "".join(f"{module.CALL_SEPARATOR} x = {i}\n" for i in range(count))
    call = module.CALL_SEPARATOR + 'get_weather\n{"city": "Paris"}'
    return module.CONTENT_START + "In the REPL:\n" + prompts + call


def _unit_calls(text: str) -> list:
    return [
        (call["function"]["name"], call["function"]["arguments"])
        for call in rt.module(UNIT).parse(text)["tool_calls"]
    ]


def test_calls_after_a_few_prompts_in_unit_content():
    assert _unit_calls(_after_prompts(3)) == [("get_weather", '{"city": "Paris"}')]


@pytest.mark.xfail(strict=True, reason="_UNIT_TRIES: at most 8 separators are tried")
def test_calls_after_many_prompts_in_unit_content():
    assert _unit_calls(_after_prompts(9)) == [("get_weather", '{"city": "Paris"}')]
