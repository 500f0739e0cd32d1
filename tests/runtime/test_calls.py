"""compiler/runtime/calls.py: reading a whole output's tool calls, with a format's
constants patched onto the module (its functions read their module's globals)."""

from __future__ import annotations

import json

import pytest

from compiler.runtime import calls as C
from compiler.runtime import values as V

# Qwen3-Coder's calls: tagged, key/value units typed by the tools' schemas.
TAGGED = dict(
    CALL_START="<tool_call>\n<function=",
    CALL_PARTS=(("name", ">\n", ()), ("arguments", "</function>\n</tool_call>", ())),
    CALL_SEPARATOR="\n",
    ARG_KEY_PREFIX="<parameter=",
    ARG_KEY_END=">\n",
    ARG_VALUE_SUFFIX="\n</parameter>\n",
    SUFFIXED_VALUES=True,
    LITERAL="python",
    _SEEK="<tool_call>",  # what calls are looked for by: the trigger's first piece
    _TURN_ENDS=["<|im_end|>"],
)
TYPES = {"get_weather": {"city": "string", "days": frozenset({"integer"})}}


def _unit(key, value):
    return f"<parameter={key}>\n{value}\n</parameter>\n"


def _tagged_call(name, *units):
    return "<tool_call>\n<function=" + name + ">\n" + "".join(units) + "</function>\n</tool_call>"


WEATHER = _tagged_call("get_weather", _unit("city", "Paris"), _unit("days", "3"))


def _call(name, arguments, call_id=None):
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def _rebound(monkeypatch):
    """The tables binding makes from a format's constants, made again from those
    patched in."""
    monkeypatch.setattr(C, "_TRAILING_MARKERS", C._trailing_markers())


@pytest.fixture
def tagged(monkeypatch):
    for name, value in TAGGED.items():
        monkeypatch.setattr(C, name, value)
    monkeypatch.setattr(C, "_read_call", C._read_tagged_call)
    _rebound(monkeypatch)


# --- a tagged format -----------------------------------------------------------------


def test_read_tagged_call(tagged):
    call, end = C._read_tagged_call(WEATHER + "\n<|im_end|>", 0, TYPES)
    assert call == _call("get_weather", '{"city": "Paris", "days": 3}')
    assert end == len(WEATHER)


def test_read_tagged_call_from_an_offset(tagged):
    text = "prose " + WEATHER
    assert C._read_tagged_call(text, 0, TYPES) is None  # no call starts at 0
    call, end = C._read_tagged_call(text, 6, TYPES)
    assert call["function"]["name"] == "get_weather" and end == len(text)


def test_arguments_typed_by_the_schema(tagged):
    text = _tagged_call("get_weather", _unit("city", "3"), _unit("days", "3"))
    call, _ = C._read_tagged_call(text, 0, TYPES)
    arguments = json.loads(call["function"]["arguments"])
    assert arguments == {"city": "3", "days": 3}
    assert isinstance(arguments["city"], str) and isinstance(arguments["days"], int)


def test_arguments_without_a_schema_are_values_where_they_spell_one(tagged):
    text = _tagged_call(
        "other",
        _unit("n", "3"),
        _unit("flag", "True"),
        _unit("items", "['a', 1]"),
        _unit("word", "Paris"),
    )
    call, _ = C._read_tagged_call(text, 0, TYPES)
    assert json.loads(call["function"]["arguments"]) == {
        "n": 3,
        "flag": True,
        "items": ["a", 1],
        "word": "Paris",
    }


def test_string_values_are_kept_as_written(tagged):
    value = 'line 1\n\n  <b>x</b> "q" \\ é'
    call, _ = C._read_tagged_call(_tagged_call("get_weather", _unit("city", value)), 0, TYPES)
    assert json.loads(call["function"]["arguments"]) == {"city": value}


def test_a_call_without_arguments(tagged):
    text = _tagged_call("noop")
    assert C._read_tagged_call(text, 0, {}) == (_call("noop", "{}"), len(text))


def test_a_cut_closer_closes_the_call(tagged):
    # the server cut the text after the last value: the call still counts
    text = "<tool_call>\n<function=get_weather>\n" + _unit("city", "Paris")
    call, end = C._read_tagged_call(text, 0, TYPES)
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert end == len(text)


@pytest.mark.parametrize(
    "text",
    [
        "<tool_call>\n<function=get weather>\n</function>\n</tool_call>",  # not a name
        "<tool_call>\n<function=f>\n<parameter=a>\n1</function>\n</tool_call>",  # no suffix
        "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\nxx</tool_call>",
        "<tool_call>\n<function=f",  # the name never ends
        "<tool_call><fn=f>",
    ],
)
def test_broken_tagged_calls(tagged, text):
    assert C._read_tagged_call(text, 0, {}) is None


def test_read_arguments(tagged):
    stop = "</function>\n</tool_call>"
    text = _unit("a", "1") + _unit("b", "x y") + stop
    values, end = C._read_arguments(text, 0, {"a": "string"}, stop)
    assert values == {"a": "1", "b": "x y"}
    assert end == text.index(stop)


def test_a_value_without_its_suffix_ends_at_the_next_key(tagged, monkeypatch):
    # The next key's prefix on a line of its own ends a value whose suffix the model
    # left out; written inside a line it is the value's, and so is every other "<"
    # (more of them than the few the search tries one by one).
    monkeypatch.setattr(C, "_KEY_MARK", "\n<parameter=")
    stop = "</function>\n</tool_call>"
    value = "if a<b and <c> <d> <e> <f>: see <parameter=z> here"
    text = "<parameter=a>\n" + value + "\n" + _unit("b", "2") + stop
    values, end = C._read_arguments(text, 0, {"a": "string"}, stop)
    assert values == {"a": value, "b": 2}
    assert end == text.index(stop)
    # with its suffix, the same value is read whole
    text = _unit("a", value) + _unit("b", "2") + stop
    assert C._read_arguments(text, 0, {"a": "string"}, stop)[0] == {"a": value, "b": 2}


def test_read_arguments_stops_at_what_starts_no_unit(tagged):
    stop = "</function>"
    assert C._read_arguments("garbage", 0, {}, stop) == ({}, 0)
    text = _unit("a", "1") + "garbage"
    assert C._read_arguments(text, 0, {}, stop) == ({"a": 1}, len(_unit("a", "1")))
    # a key that is not a name starts no unit
    assert C._read_arguments(_unit("a b", "1"), 0, {}, stop) == ({}, 0)
    # a unit that starts and breaks: None
    assert C._read_arguments("<parameter=a>\n1", 0, {}, stop) is None


def test_find_calls(tagged):
    text = "Let me check.\n\n" + WEATHER + "\n" + _tagged_call("noop") + "\nDone."
    before, calls, after = C._find_calls(text, TYPES, False)
    assert before == "Let me check."
    assert calls == [
        _call("get_weather", '{"city": "Paris", "days": 3}'),
        _call("noop", "{}"),
    ]
    assert after == "\nDone."


def test_find_calls_without_calls(tagged):
    assert C._find_calls("just text", TYPES, False) == ("just text", [], "")
    assert C._find_calls("just text", TYPES, True) == ("just text", [], "")


def test_a_broken_call_is_content(tagged):
    text = "Hi <tool_call>\n<function=f>\n<parameter=a>\n1"
    assert C._find_calls(text, {}, False) == (text, [], "")
    with pytest.raises(ValueError, match="malformed tool call"):
        C._find_calls(text, {}, True)


def test_calls_after_prose_that_quotes_the_marker(tagged):
    prose = "Write <tool_call>\n<function= then a name.\n"
    before, calls, after = C._find_calls(prose + _tagged_call("f"), {}, False)
    assert before == prose.rstrip()
    assert calls == [_call("f", "{}")]
    assert after == ""


def test_section_markers(tagged, monkeypatch):
    monkeypatch.setattr(C, "SECTION_START", "<calls>\n")
    monkeypatch.setattr(C, "SECTION_END", "\n</calls>")
    monkeypatch.setattr(C, "_SEEK", "<calls>")
    monkeypatch.setattr(C, "END_AFTER_CALLS", ["<|end|>"])
    _rebound(monkeypatch)
    inner = _tagged_call("f") + "\n" + _tagged_call("g")
    text = "<calls>\n" + inner + "\n</calls><|end|> after"
    calls, end = C._read_calls(text, 0, {})
    assert [c["function"]["name"] for c in calls] == ["f", "g"]
    assert text[end:] == " after"
    # the section's closer cut off at the end of the text: still closed
    calls, end = C._read_calls("<calls>\n" + inner, 0, {})
    assert len(calls) == 2 and end == len("<calls>\n" + inner)
    # other text in its place: the calls read stand, the text is after them (issue
    # 12: a Mistral Nemo list cut after its first call lost that call)
    calls, end = C._read_calls("<calls>\n" + inner + "\nxx", 0, {})
    assert len(calls) == 2 and end == len("<calls>\n" + inner)
    # no opener, no calls
    assert C._read_calls(inner, 0, {}) is None


def test_trailing(tagged, monkeypatch):
    monkeypatch.setattr(C, "END_AFTER_CALLS", ["<|end|>"])
    _rebound(monkeypatch)
    assert C._trailing("\n<|im_end|>") == ""
    assert C._trailing(" <|end|>\n<|im_end|> ") == ""
    assert C._trailing("\nDone.<|im_end|>") == "Done."
    assert C._trailing("<|end|> Done.") == "Done."


@pytest.mark.parametrize("value", ["{1, [2]}", "b'x'", "1j", "{(1, 2): 3}"])
def test_python_values_that_json_cannot_hold_do_not_raise(tagged, value):
    """A Python-literal value that is no JSON value (a set Python refuses, bytes, a
    complex number, a dict with tuple keys) stays text: json.dumps raised TypeError on
    it. (A set Python accepts is the array it stands for: tests/test_tolerance.py.)"""
    text = "A " + _tagged_call("f", _unit("a", value))
    before, calls, after = C._find_calls(text, {}, False)
    assert [json.loads(call["function"]["arguments"]) for call in calls] == [{"a": value}]


# --- a JSON-object format ---------------------------------------------------------------

JSON_FORMAT = dict(
    JSON_CALLS=True,
    LITERAL="json",
    CALL_START="<tool_call>\n",
    CALL_END="\n</tool_call>",
    CALL_SEPARATOR="\n",
    _SEEK="<tool_call>",
    NAME_PATH=("name",),
    ARGUMENTS_PATH=("arguments",),
    ID_PATH=(),
    NAME_IS_KEY=False,
    _TURN_ENDS=["<|im_end|>"],
)


@pytest.fixture
def hermes(monkeypatch):
    for name, value in JSON_FORMAT.items():
        monkeypatch.setattr(C, name, value)
    monkeypatch.setattr(C, "_read_call", C._read_json_call)
    _rebound(monkeypatch)


def _json_call(body):
    return "<tool_call>\n" + body + "\n</tool_call>"


def test_json_call_keeps_the_models_own_arguments_text(hermes):
    arguments = '{"a":  1,\n "b": [1,2] ,"c":"é\\u00e9"}'
    text = _json_call('{"name": "f", "arguments": ' + arguments + "}")
    call, end = C._read_json_call(text, 0, {})
    assert call == _call("f", arguments)
    assert end == len(text)


def test_json_call_tolerates_whitespace_around_its_markers(hermes):
    text = '  <tool_call> {"arguments": {}, "name": "f"}  </tool_call>'
    call, end = C._read_json_call(text, 0, {})
    assert call == _call("f", "{}") and end == len(text)


def test_json_call_arguments_as_a_string_holding_json(hermes):
    text = _json_call('{"name": "f", "arguments": "{\\"a\\": 1}"}')
    call, _ = C._read_json_call(text, 0, {})
    assert call["function"]["arguments"] == '{"a": 1}'


@pytest.mark.parametrize(
    "body",
    [
        '{"name": "f", "arguments": "not json"}',
        '{"name": "f", "arguments": 3}',
        '{"name": "f"}',  # no arguments
        '{"name": 3, "arguments": {}}',
        '{"name": "a b", "arguments": {}}',
        '{"arguments": {}}',
        '{"name": "f", "name": "g", "arguments": {}}',  # a repeated key
        '{"name": "f", "arguments": {}',
        "[]",
    ],
)
def test_json_call_that_makes_no_call(hermes, body):
    assert C._read_json_call(_json_call(body), 0, {}) is None


def test_json_call_end(hermes):
    body = '{"name": "f", "arguments": {}}'
    # the closer cut off: the text's end closes the call
    assert C._read_json_call("<tool_call>\n" + body, 0, {})[1] == len("<tool_call>\n" + body)
    # other text in the closer's place: -1, and _find_calls keeps it all as content
    text = "<tool_call>\n" + body + " garbage"
    assert C._read_json_call(text, 0, {})[1] == -1
    assert C._find_calls(text, {}, False) == (text, [], "")


def test_json_call_nested_paths_and_id(hermes, monkeypatch):
    monkeypatch.setattr(C, "NAME_PATH", ("function", "name"))
    monkeypatch.setattr(C, "ARGUMENTS_PATH", ("function", "arguments"))
    monkeypatch.setattr(C, "ID_PATH", ("id",))
    text = _json_call(
        '{"id": "call_1", "type": "function", '
        '"function": {"name": "f", "arguments": {"x":"é","y":[1,2]}}}'
    )
    call, _ = C._read_json_call(text, 0, {})
    # nested arguments have no span of their own: re-encoded, unicode kept
    assert call == _call("f", '{"x": "é", "y": [1, 2]}', "call_1")
    # an id that is not a string is no id
    text = _json_call('{"id": 7, "function": {"name": "f", "arguments": {}}}')
    assert C._read_json_call(text, 0, {})[0]["id"] is None


def test_json_call_name_is_key(hermes, monkeypatch):
    monkeypatch.setattr(C, "NAME_IS_KEY", True)
    monkeypatch.setattr(C, "NAME_PATH", ())
    monkeypatch.setattr(C, "ARGUMENTS_PATH", ())
    call, _ = C._read_json_call(_json_call('{"f": {"a" : 1}}'), 0, {})
    assert call == _call("f", '{"a" : 1}')
    assert C._read_json_call(_json_call('{"f": {}, "g": {}}'), 0, {}) is None


def test_find_json_calls(hermes):
    one = _json_call('{"name": "f", "arguments": {"a": 1}}')
    two = _json_call('{"name": "g", "arguments": {}}')
    text = "I will call.\n" + one + "\n" + two + "<|im_end|>"
    before, calls, after = C._find_calls(text, {}, False)
    assert before == "I will call."
    assert calls == [_call("f", '{"a": 1}'), _call("g", "{}")]
    assert after == "<|im_end|>"
    assert C._trailing(after) == ""


def test_bare_json_calls(hermes, monkeypatch):
    # Llama 3.1: nothing marks a call; the whole output is a call or content
    monkeypatch.setattr(C, "BARE_CALLS", True)
    monkeypatch.setattr(C, "CALL_START", "")
    monkeypatch.setattr(C, "CALL_END", "")
    monkeypatch.setattr(C, "_SEEK", "")
    monkeypatch.setattr(C, "ARGUMENTS_PATH", ("parameters",))
    monkeypatch.setattr(C, "_TURN_ENDS", ["<|eom_id|>"])
    _rebound(monkeypatch)
    text = ' {"name": "f", "parameters": {"a": 1}}<|eom_id|>'
    assert C._find_calls(text, {}, False) == ("", [_call("f", '{"a": 1}')], "")
    prose = 'Use {"name": "f", "parameters": {}} like this.'
    assert C._find_calls(prose, {}, False) == (prose, [], "")
    tail = '{"name": "f", "parameters": {}} and more'
    assert C._find_calls(tail, {}, False) == (tail, [], "")


def test_calls_after_content_that_is_a_unit(monkeypatch):
    # Content written in a call's place ("@@" opens a unit, the prompt the first):
    # a separator after the content starts calls that run to the end of the output.
    for name, value in dict(
        BARE_CALLS=True,
        CONTENT_AS_UNIT=True,
        CONTENT_START="say",
        CALL_START="",
        CALL_SEPARATOR="@@",
        _SEPARATOR_SEEK="@@",
        CALL_PARTS=(("name", "\n", ()), ("arguments", "", ())),
        JSON_ARGUMENTS=True,
        _TURN_ENDS=["<end>"],
    ).items():
        monkeypatch.setattr(C, name, value)
    monkeypatch.setattr(C, "_read_call", C._read_tagged_call)
    _rebound(monkeypatch)
    call = 'f\n{"a": 1}'
    assert C._find_calls(call + "@@" + call, {}, False)[1] == [_call("f", '{"a": 1}')] * 2
    text = "say\nhi @@ there@@" + call + "<end>"
    assert C._find_calls(text, {}, False) == ("say\nhi @@ there", [_call("f", '{"a": 1}')], "")
    for prose in ("say\nhi @@ there", "say\nuse @@" + call + " like so", "hi@@" + call):
        # the separator where no calls to the end follow it; or no content opener
        assert C._find_calls(prose, {}, False) == (prose, [], "")


def test_literal_call(hermes, monkeypatch):
    monkeypatch.setattr(C, "LITERAL", "python")
    monkeypatch.setattr(V, "LITERAL", "python")  # _read_object reads its own
    monkeypatch.setattr(C, "_read_call", C._read_literal_call)
    text = _json_call("{'name': 'f', 'arguments': {'a': True, 'b': (1, 2), 'c': 'é'}}")
    call, end = C._read_literal_call(text, 0, {})
    # the model wrote no JSON: the arguments are encoded afresh
    assert call == _call("f", '{"a": true, "b": [1, 2], "c": "é"}')
    assert end == len(text)
    string_args = _json_call("{'name': 'f', 'arguments': '{\"a\": 1}'}")
    assert C._read_literal_call(string_args, 0, {})[0]["function"]["arguments"] == '{"a": 1}'
    assert C._read_literal_call(_json_call("{'name': 'f', 'arguments': 'x'}"), 0, {}) is None
    assert C._read_literal_call(_json_call("{'name': 'f', 'arguments': 1}"), 0, {}) is None
