"""Tool-call parsing rules that the round trip does not reach: malformed calls, unknown
names, typed and Python-literal values, marker-less JSON, trailing end-of-turn.

The texts are written from each format's own spec (its literals), not copied from the
parser, so a parser that drifts from its spec fails here.
"""

from __future__ import annotations

import importlib
import json

import pytest

from tests import roundtrip as rt

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"},
                "metric": {"type": "boolean"},
                "note": {"type": ["string", "null"]},
            },
        },
    },
}


def module(slug):
    return importlib.import_module(f"generated.{slug}")


def tool_slugs(fmt=None):
    found = []
    for slug in rt.slugs():
        tools = module(slug).SPEC["tools"]
        if tools["format"] != "none" and (fmt is None or tools["format"] == fmt):
            found.append(slug)
    return found


def write_call(spec_tools, name, arguments, *, python=False):
    """One call written from the spec's literals (a tiny writer, independent of the
    parser): only formats whose arguments are one JSON value or simple units."""
    call = spec_tools["call"]
    if spec_tools["format"] == "json":
        fields = spec_tools["json"]
        if fields["name_is_key"]:
            obj = {name: arguments}
        else:
            obj = {}
            _put(obj, fields["name"], name)
            _put(obj, fields["arguments"], json.dumps(arguments) if fields.get("arguments_as_string") else arguments)
        return call["start"] + json.dumps(obj) + call.get("end", "")
    text = call["start"]
    for part in call["parts"]:
        if part["hole"] == "name":
            text += name
        elif part["hole"] == "index":
            text += "0"
        elif part["hole"] == "id":
            text += "abcdefghi"
        elif spec_tools["arguments"]["encoding"] == "json":
            text += json.dumps(arguments)
        else:
            text += _units(spec_tools["arguments"], arguments, python)
        text += part["after"]
    return text


def _put(obj, dotted, value):
    keys = dotted.split(".")
    for key in keys[:-1]:
        obj = obj.setdefault(key, {})
    obj[keys[-1]] = value


def _units(spec, arguments, python):
    pieces = []
    for key, value in arguments.items():
        if isinstance(value, str):
            written = spec.get("string_open", "") + value + spec.get("string_close", "")
            if spec["value_suffix"] == "" and not spec.get("string_open"):
                written = repr(value) if spec["literal"] == "python" else json.dumps(value)
        elif python:
            written = repr(value)
        else:
            written = json.dumps(value)
        middle = spec["key_end"] + (("string" if isinstance(value, str) else "number") + spec["value_start"] if spec["value_start"] else "")
        suffix = spec["value_suffix"].replace("{key}", key) if spec.get("value_suffix_names_key") else spec["value_suffix"]
        pieces.append(spec["key_prefix"] + key + middle + written + suffix)
    return spec["separator"].join(pieces)


def wrap(spec_tools, calls_text):
    section = spec_tools.get("section") or {}
    return (section.get("start") or "") + calls_text + (section.get("end") or "")


def output(parser, text):
    """``text`` as the model writes it after a prompt with thinking off: closing the
    reasoning block first where that prompt leaves one open."""
    reasoning = parser.SPEC["reasoning"]
    if reasoning["opened_by_prompt"]["thinking_off"]:
        return reasoning["end"] + text
    return text


def simple(slug):
    tools = module(slug).SPEC["tools"]
    return tools["format"] == "json" or tools["arguments"]["encoding"] == "json" or not tools[
        "arguments"
    ].get("value_start")


@pytest.mark.parametrize("slug", tool_slugs())
def test_unknown_tool_name_is_still_a_call(slug):
    parser = module(slug)
    text = output(parser, wrap(parser.SPEC["tools"], write_call(parser.SPEC["tools"], "never_declared", {"x": "y"})))
    message = parser.parse(text, tools=[WEATHER], enable_thinking=False)
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["never_declared"], message
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"x": "y"}


@pytest.mark.parametrize("slug", tool_slugs())
def test_a_broken_call_is_kept_as_content(slug):
    parser = module(slug)
    tools = parser.SPEC["tools"]
    whole = wrap(tools, write_call(tools, "get_weather", {"city": "Oslo"}))
    # Cut the call inside its arguments: it can no longer be read.
    cut = whole[: whole.index("Oslo") + 2]
    message = parser.parse(output(parser, "Here goes. " + cut), enable_thinking=False)
    assert message["tool_calls"] == []
    kept = (message["content"] or "") + (message["reasoning_content"] or "")
    assert "Os" in kept and "Here goes." in kept


@pytest.mark.parametrize("slug", tool_slugs())
def test_more_calls_than_the_template_writes_are_read(slug):
    parser = module(slug)
    tools = parser.SPEC["tools"]
    if not tools["call"]["separator"].strip() and not tools["call"]["start"].strip():
        if tools["format"] == "json" and not (tools.get("section") or {}).get("start"):
            pytest.skip("one bare JSON object per output")
    calls = [write_call(tools, f"fn_{i}", {"i": str(i)}) for i in range(3)]
    text = wrap(tools, tools["call"]["separator"].join(calls) if tools["call"]["separator"].strip() or tools["call"]["start"].strip() or (tools.get("section") or {}).get("start") else calls[0])
    message = parser.parse(output(parser, text), enable_thinking=False)
    names = [c["function"]["name"] for c in message["tool_calls"]]
    assert names[0] == "fn_0"
    if len(names) > 1:
        assert names == ["fn_0", "fn_1", "fn_2"]


@pytest.mark.parametrize("slug", tool_slugs())
def test_trailing_end_of_turn_is_tolerated(slug):
    parser = module(slug)
    tools = parser.SPEC["tools"]
    text = output(parser, wrap(tools, write_call(tools, "get_weather", {"city": "Oslo"})))
    plain = parser.parse(text, enable_thinking=False)
    assert plain["tool_calls"], plain
    for marker in parser.STOP + tools.get("end_of_turn_after_calls", []):
        assert parser.parse(text + marker, enable_thinking=False) == plain


@pytest.mark.parametrize("slug", [s for s in tool_slugs("tagged") if module(s).SPEC["tools"]["arguments"]["encoding"] == "tagged"])
def test_tagged_values_are_typed_by_the_schema(slug):
    parser = module(slug)
    tools = parser.SPEC["tools"]
    if tools["arguments"].get("string_open") or tools["arguments"]["value_suffix"] == "":
        pytest.skip("values are written as literals here: typed by how they are written")
    arguments = {"city": "42", "days": 3, "metric": True, "note": None}
    python = tools["arguments"]["literal"] == "python"
    text = output(parser, wrap(tools, write_call(tools, "get_weather", arguments, python=python)))
    message = parser.parse(text, tools=[WEATHER], enable_thinking=False)
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == arguments
    # Without tools: JSON stays JSON, the rest is a string; a value the model marks
    # as a string (the writer's word "string" is Kimi K3's) is one.
    bare = parser.parse(text, enable_thinking=False)
    values = json.loads(bare["tool_calls"][0]["function"]["arguments"])
    said = tools["arguments"].get("string_attribute") == "string"
    assert values["city"] == ("42" if said else 42) and values["days"] == 3


@pytest.mark.parametrize("slug", [s for s in tool_slugs("json") if not (module(s).SPEC["tools"].get("section") or {}).get("start") and not module(s).SPEC["tools"]["call"]["start"].strip()])
def test_markerless_json_only_a_call_shaped_object_is_a_call(slug):
    parser = module(slug)
    for text in ('{"answer": 42}', '{"name": 5}', "[1, 2]", 'The JSON is {"name": "x"}'):
        message = parser.parse(text, enable_thinking=False)
        assert message["tool_calls"] == [] and message["content"] == text
    call = write_call(parser.SPEC["tools"], "get_weather", {"city": "Oslo"})
    assert parser.parse(call)["tool_calls"][0]["function"]["name"] == "get_weather"


def test_a_list_cut_after_its_first_call_keeps_that_call():
    """Issue 12: a Mistral Nemo list whose second call is cut off lost the complete
    first one (the section's ']' never came); it is read, the rest is content."""
    module = rt.module("mistralai_mistral_nemo_instruct_2407")
    first = '{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abcdefghi"}'
    text = "[TOOL_CALLS][" + first + ', {"name": "get_ti'
    message = module.parse(text)
    assert [json.loads(c["function"]["arguments"]) for c in message["tool_calls"]] == [
        {"city": "Paris"}
    ]
    assert message["content"] == ', {"name": "get_ti'
    with pytest.raises(ValueError):
        module.parse(text, strict=True)


def _object_calls(fmt_name_is_key=False):
    return [
        slug
        for slug in tool_slugs("json")
        if module(slug).SPEC["tools"]["json"]["name_is_key"] is fmt_name_is_key
    ]


@pytest.mark.parametrize("slug", _object_calls())
def test_a_call_object_with_a_member_the_template_never_writes_is_content(slug):
    """Issue 12: such a member would be dropped without a trace; the call is not one
    the template writes, so it stays content (strict: an error), in the stream too."""
    from tests.test_stream import merge, streamed

    parser = module(slug)
    tools = parser.SPEC["tools"]
    call = write_call(tools, "get_weather", {"city": "Oslo"})
    marked = (tools.get("section") or {}).get("start") or tools["call"]["start"].strip()
    lead = "Checking. " if marked else ""  # else the whole output is calls or content
    good = output(parser, lead + wrap(tools, call))
    assert parser.parse(good, tools=[WEATHER], enable_thinking=False)["tool_calls"]
    opened, last = call.index("{"), call.rindex("}")
    early = call[: opened + 1] + '"confidence": 0.9, ' + call[opened + 1 :]
    late = call[:last] + ', "confidence": 0.9' + call[last:]  # once the stream sent the call
    for extra in (early, late):
        text = output(parser, lead + wrap(tools, extra))
        message = parser.parse(text, tools=[WEATHER], enable_thinking=False)
        assert message["tool_calls"] == [], (text, message)
        kept = (message["content"] or "") + (message["reasoning_content"] or "")
        assert "confidence" in kept and "Oslo" in kept
        if marked:  # where nothing marks a call, an object that is not one is content
            with pytest.raises(ValueError):
                parser.parse(text, tools=[WEATHER], enable_thinking=False, strict=True)
        for size in (1, 5, len(text)):
            cuts = range(size, len(text), size)
            fed, finished, abandoned = streamed(parser, text, cuts, tools=[WEATHER], enable_thinking=False)
            assert merge(fed + finished, abandoned) == message, (size, text)


def _twice(slug):
    parts = module(slug).SPEC["tools"]["call"].get("parts") or []
    holes = [part["hole"] for part in parts]
    return holes.count("name") > 1 or holes.count("id") > 1


@pytest.mark.parametrize("slug", [slug for slug in tool_slugs("tagged") if _twice(slug)])
def test_a_hole_written_twice_must_hold_the_same_word(slug):
    """Where the template writes the name twice, two different names are not a call
    the template writes: taking either would drop the other without a trace."""
    from tests.test_stream import merge, streamed

    parser = module(slug)
    tools = parser.SPEC["tools"]
    call = write_call(tools, "get_weather", {"city": "Oslo"})
    assert parser.parse(output(parser, wrap(tools, call)), enable_thinking=False)["tool_calls"]
    at = call.rindex("get_weather")
    text = output(parser, wrap(tools, call[:at] + "get_time" + call[at + len("get_weather") :]))
    message = parser.parse(text, enable_thinking=False)
    assert message["tool_calls"] == [] and "get_time" in message["content"], message
    for size in (1, 5, len(text)):
        fed, finished, abandoned = streamed(parser, text, range(size, len(text), size), enable_thinking=False)
        assert merge(fed + finished, abandoned) == message, size


def _content_is_a_unit(slug):
    """Whether the spec writes the content as one unit of the turn in a call's place:
    no marker opens a call, calls are separated by a marker, and the content always
    opens with a marker of its own that nothing closes."""
    spec = module(slug).SPEC
    tools, content = spec["tools"], spec["content"]
    return (
        not (tools.get("section") or {}).get("start")
        and not tools["call"]["start"].strip()
        and bool(tools["call"]["separator"].strip())
        and content["mode"] == "always_wrapped"
        and bool(content["start"])
        and not content["end"]
    )


CONTENT_UNITS = [slug for slug in tool_slugs("tagged") if _content_is_a_unit(slug)]


def test_some_format_writes_its_content_as_a_unit():
    assert CONTENT_UNITS, "no format to test: the corpus had one (Functionary v3.2)"


@pytest.mark.parametrize("slug", CONTENT_UNITS)
def test_calls_after_content_that_is_a_unit(slug):
    """The content, then the separator, then calls: the separator ends the content.
    The separator written where no call that runs to the end of the output can
    follow it is text of the content. The stream reads the same at every cut."""
    from tests.test_stream import merge, streamed

    parser = module(slug)
    tools = parser.SPEC["tools"]
    separator = tools["call"]["separator"]
    opener = parser.SPEC["content"]["start"] + "\n"
    first = write_call(tools, "get_weather", {"city": "Oslo"})
    second = write_call(tools, "get_time", {"zone": "CET"})
    cases = {
        "Let me check." + separator + first + separator + second: (
            "Let me check.",
            ["get_weather", "get_time"],
        ),
        f"a {separator} b": (f"a {separator} b", []),
        f"ends with{separator}": (f"ends with{separator}", []),
        f"see{separator}get_weather and more": (f"see{separator}get_weather and more", []),
        # a call written in the content, followed by prose: not the turn's calls
        f"like{separator}{first} and so on": (f"like{separator}{first} and so on", []),
        # the separator as prose first, then the calls
        f"a {separator} b{separator}{first}": (f"a {separator} b", ["get_weather"]),
    }
    for body, (content, names) in cases.items():
        text = opener + body
        message = parser.parse(text)
        assert message["content"] == content, text
        assert [call["function"]["name"] for call in message["tool_calls"]] == names, text
        for size in (1, 2, 5, len(text)):
            fed, finished, abandoned = streamed(parser, text, range(size, len(text), size))
            assert merge(fed + finished, abandoned) == message, (text, size)
