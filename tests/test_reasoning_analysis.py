"""Reasoning formats the analysis must read off the renders (issue 13): reasoning the
history shows only in turns with calls, an empty block that only the thinking-off
prompt writes, and the parsers made from what was read. Templates are small and
inline (marker styles of their own) or from the corpus; each is compiled in memory."""

from __future__ import annotations

import hashlib
import os

import pytest

from compiler.analyze import analyze
from compiler.build import spec_for
from compiler.loader import load_spec
from compiler.render import ChatTemplate, RenderInputs
from compiler.sources import TemplateSource

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INPUTS = RenderInputs("<s>", "</s>", {})


def template(source: str, name: str = "inline.jinja") -> ChatTemplate:
    return ChatTemplate(source, name, INPUTS)


def corpus(name: str) -> str:
    path = os.path.join(ROOT, "templates", name)
    if not os.path.exists(path):
        pytest.skip(f"corpus template {name} not fetched")
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def compiled(source: str, slug: str = "inline"):
    """The parser module of a template, built in memory as the build would."""
    found = TemplateSource(
        slug=slug,
        path=f"{slug}.jinja",
        source=source,
        sha256=hashlib.sha256(source.encode()).hexdigest(),
        bos_token="<s>",
        eos_token="</s>",
    )
    spec, warnings = spec_for(found, [], f"{slug}.yaml", time_budget=None)
    assert warnings == []
    return spec, vars(load_spec(slug, spec))


# ---------------------------------------------------------------------------
# reasoning that only turns with calls show; an empty block in the thinking-off prompt

GEMMA_4 = "google-gemma-4-31B-it.jinja"


def test_reasoning_shown_only_in_turns_with_calls_is_read():
    """Gemma 4 writes the reasoning of the last turn only when it has calls (a turn
    with content drops it), and its thinking-off prompt writes an empty block."""
    body = analyze(template(corpus(GEMMA_4), GEMMA_4)).body
    assert body["capabilities"]["reasoning_field"] is not None
    reasoning = body["reasoning"]
    assert reasoning["mode"] == "tools_only"
    assert (reasoning["start"], reasoning["end"]) == ("<|channel>thought", "<channel|>")
    assert reasoning["opened_by_prompt"] == {"thinking_on": False, "thinking_off": False}


def test_reasoning_before_calls_is_not_content():
    _, module = compiled(corpus(GEMMA_4), "gemma_4")
    parse = module["parse"]
    text = '<|channel>thought\nNeed the weather.\n<channel|><|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>'
    message = parse(text)
    assert message["reasoning_content"] == "Need the weather."
    assert message["content"] is None
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["get_weather"]
    # With thinking off the prompt wrote the empty block: the model writes content.
    assert parse("Sunny.", enable_thinking=False)["content"] == "Sunny."
    assert parse("Sunny.")["reasoning_content"] is None


# A fine-tune's template: the history never shows reasoning; thinking on adds a system
# line, thinking off writes an empty block named by a word after the opener.
EMPTY_CHANNEL_OFF = """\
{{- bos_token -}}
{%- if enable_thinking is defined and enable_thinking %}{{ '<|sys>\\n<|muse|>\\n<sys|>\\n' }}{% endif -%}
{%- for m in messages -%}
{{ '<|' + m.role + '>\\n' + m.content + '<' + m.role + '|>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{ '<|assistant>\\n' }}
{%- if not (enable_thinking is defined and enable_thinking) %}{{ '<|muse>plan\\n<muse|>' }}{% endif -%}
{%- endif -%}
"""


def test_empty_block_in_the_thinking_off_prompt_gives_the_markers():
    body = analyze(template(EMPTY_CHANNEL_OFF)).body
    reasoning = body["reasoning"]
    assert (reasoning["start"], reasoning["end"]) == ("<|muse>plan", "<muse|>")
    assert reasoning["mode"] == "tag"
    assert reasoning["opened_by_prompt"] == {"thinking_on": False, "thinking_off": False}


# ---------------------------------------------------------------------------
# an empty reasoning block that a turn with calls writes before them

INVENTED = os.path.join(ROOT, "tests", "invented")


def invented(name: str) -> str:
    with open(os.path.join(INVENTED, name), encoding="utf-8") as handle:
        return handle.read()


def test_empty_block_before_calls_is_not_where_calls_begin():
    spec, module = compiled(invented("ponder_calls.jinja"), "ponder_calls")
    assert (spec["reasoning"]["start"], spec["reasoning"]["end"]) == ("<ponder>", "</ponder>")
    assert spec["tools"].get("section") is None
    assert spec["tools"]["call"]["start"] == "<call>"
    call = '<call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</call>'
    for text, reasoning in (
        ("<ponder></ponder>\n" + call, None),
        ("<ponder>Cold there.</ponder>\n" + call, "Cold there."),
        (call, None),
    ):
        message = module["parse"](text)
        assert message["reasoning_content"] == reasoning, text
        assert [c["function"]["arguments"] for c in message["tool_calls"]] == [
            '{"city": "Oslo"}'
        ], text


# No reasoning field at all, one call a turn: only the empty block before the call
# shows that the model may reason there.
EMPTY_BLOCK_ONE_CALL = """\
{{- bos_token -}}
{%- for m in messages -%}
{%- if m.role == 'assistant' -%}
{{ '[[asst]]\\n' }}
{%- if m.tool_calls -%}
{{ '<ponder>\\n</ponder>\\n' }}
{%- set c = m.tool_calls[0].function -%}
{{ '<call>' + c.name + ' ' + (c.arguments if c.arguments is string else c.arguments | tojson) + '</call>' }}
{%- else -%}{{ m.content }}{%- endif -%}
{{ '[[end]]\\n' }}
{%- else -%}
{{ '[[' + m.role + ']]\\n' + m.content + '[[end]]\\n' }}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt %}{{ '[[asst]]\\n' }}{% endif -%}
"""


def test_empty_block_before_the_only_call_is_reasoning_in_turns_with_calls():
    spec, module = compiled(EMPTY_BLOCK_ONE_CALL, "one_call")
    assert spec["reasoning"]["mode"] == "tools_only"
    assert (spec["reasoning"]["start"], spec["reasoning"]["end"]) == ("<ponder>", "</ponder>")
    assert spec["tools"]["call"]["start"] == "<call>"
    message = module["parse"]('<ponder>\nCold.\n</ponder>\n<call>get_weather {"city": "Oslo"}</call>')
    assert message["reasoning_content"] == "Cold."
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["get_weather"]


# ---------------------------------------------------------------------------
# a prompt that opens the block only when no tools are given

WEATHER_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def merged(module, text: str, **options) -> dict:
    """The stream's deltas for ``text`` fed a character at a time, merged."""
    stream = module["StreamParser"](**options)
    deltas = [d for ch in text for d in stream.feed(ch)] + stream.finish()
    message: dict = {"content": None, "reasoning_content": None, "tool_calls": []}
    for delta in deltas:
        for key in ("content", "reasoning_content"):
            if key in delta:
                message[key] = (message[key] or "") + delta[key]
        for call in delta.get("tool_calls", []):
            while len(message["tool_calls"]) <= call["index"]:
                message["tool_calls"].append({"name": "", "arguments": ""})
            function = call.get("function", {})
            message["tool_calls"][call["index"]]["name"] += function.get("name", "")
            message["tool_calls"][call["index"]]["arguments"] += function.get("arguments", "")
    return message


def test_prompt_that_opens_the_block_only_without_tools():
    spec, module = compiled(invented("toolless_reason.jinja"), "toolless_reason")
    reasoning = spec["reasoning"]
    assert reasoning["opened_by_prompt"] == {"thinking_on": True, "thinking_off": False}
    assert reasoning["opened_with_tools"] == {"thinking_on": False, "thinking_off": False}
    parse = module["parse"]
    call = '<invoke fn="get_weather">{"city": "Oslo"}</invoke>'
    for text in (call, "Let me check." + call):
        message = parse(text, tools=WEATHER_TOOLS)
        assert message["reasoning_content"] is None, text
        assert [c["function"]["name"] for c in message["tool_calls"]] == ["get_weather"]
        streamed = merged(module, text, tools=WEATHER_TOOLS)
        assert streamed["reasoning_content"] is None
        assert streamed["content"] == message["content"]
        assert [c["name"] for c in streamed["tool_calls"]] == ["get_weather"]
    # With thinking on and without tools the prompt opened the block: the model
    # starts inside it.
    message = parse("Cold there.\n</reason>\n\nTake a coat.", enable_thinking=True)
    assert (message["reasoning_content"], message["content"]) == ("Cold there.", "Take a coat.")
    assert merged(
        module, "Cold there.\n</reason>\n\nTake a coat.", enable_thinking=True
    )["reasoning_content"] == ("Cold there.")
    # With tools the model may still open it itself.
    message = parse("<reason>\nCold.\n</reason>\n\n" + call, tools=WEATHER_TOOLS)
    assert message["reasoning_content"] == "Cold."
    assert len(message["tool_calls"]) == 1


# ---------------------------------------------------------------------------
# a delimiter (no opener) that the history leaves out of plain answers; doubled brackets


def test_doubled_brackets_are_one_marker():
    from compiler.diff import markers_in, tokens

    assert tokens("a[[call]]{") == ["a", "[[call]]", "{"]
    assert markers_in("[[/turn]]\n[[assistant]]") == ["[[/turn]]", "[[assistant]]"]


def test_text_without_the_delimiter_is_content_as_the_history_writes_it():
    spec, module = compiled(invented("bracket_answer.jinja"), "bracket_answer")
    assert spec["reasoning"]["mode"] == "delimiter"
    assert spec["reasoning"]["end"] == "[[ANSWER]]"
    assert spec["reasoning"]["opened_by_prompt"] == {"thinking_on": False, "thinking_off": False}
    assert spec["tools"].get("section") is None
    assert (spec["tools"]["call"]["start"], spec["tools"]["call"]["end"]) == (
        "[[call]]",
        "[[/call]]",
    )
    parse = module["parse"]
    call = '[[call]]{"name": "get_weather", "arguments": {"city": "Oslo"}}[[/call]]'
    cases = [
        ("Take a coat.", None, "Take a coat.", 0),
        ("Cold there.\n[[ANSWER]]\nTake a coat.", "Cold there.", "Take a coat.", 0),
        ("Let me check." + call, None, "Let me check.", 1),
        ("Cold?\n[[ANSWER]]\n" + call, "Cold?", None, 1),
        ("Take a coat.[[/turn]]", None, "Take a coat.", 0),
    ]
    for text, reasoning, content, calls in cases:
        message = parse(text, tools=WEATHER_TOOLS)
        assert (message["reasoning_content"], message["content"]) == (reasoning, content), text
        assert len(message["tool_calls"]) == calls, text
        streamed = merged(module, text, tools=WEATHER_TOOLS)
        assert (streamed["reasoning_content"], streamed["content"]) == (reasoning, content), text
        assert len(streamed["tool_calls"]) == calls, text
    grammar = pytest.importorskip("tests.test_grammar")
    for text, *_ in cases:
        assert grammar.accepts(module["grammar"](tools=WEATHER_TOOLS), text), text
