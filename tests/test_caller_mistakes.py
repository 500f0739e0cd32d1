"""A caller's mistake raises ValueError (TypeError where an argument is of the wrong
Python type) saying which argument is wrong, from every public function of every
module (issue 24): never an AttributeError or a TypeError from deep inside. Reading
a model's output is the exception: tools of the wrong shape type nothing there
(tests/test_fuzz.py), since the output must still be read.
"""

from __future__ import annotations

import pytest

from tests import roundtrip as rt


def _function(parameters):
    return [{"type": "function", "function": {"name": "f", "parameters": parameters}}]


def _typed(schema):
    return _function({"type": "object", "properties": {"a": schema}})


GOOD = _typed({"type": "string"})
CALL = {"id": "call00001", "type": "function", "function": {"name": "f", "arguments": "{}"}}
MESSAGES = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call00001", "content": "done"},
]

# (tools, the exception, what its message names)
BAD_TOOLS = {
    "type 5": (_typed({"type": 5}), ValueError, "'type' is 5"),
    "type list of 5": (_typed({"type": ["string", 5]}), ValueError, "'type'"),
    "None": ([None], ValueError, "tools[0] is None"),
    "function None": ([{"type": "function", "function": None}], ValueError, "tools[0]['function']"),
    "no name": ([{"type": "function", "function": {"name": ["f"]}}], ValueError, "tools[0]"),
    "parameters 5": (_function(5), ValueError, "parameters is 5"),
    "properties a list": (_function({"properties": [1]}), ValueError, "'properties'"),
    "a key that is no name": (_function({"properties": {5: {}}}), ValueError, "'properties'"),
    "required 5": (_function({"properties": {}, "required": 5}), ValueError, "'required'"),
    "enum 5": (_typed({"enum": 5}), ValueError, "'enum'"),
    "enum holding NaN": (_typed({"enum": [float("nan")]}), ValueError, "'enum'"),
    "const no JSON": (_typed({"const": object()}), ValueError, "'const'"),
    "items 5": (_typed({"type": "array", "items": 5}), ValueError, "items is 5"),
    "prefixItems 5": (_typed({"type": "array", "prefixItems": 5}), ValueError, "'prefixItems'"),
    "anyOf of 5": (_typed({"anyOf": [5]}), ValueError, "anyOf[0] is 5"),
    "$ref 5": (_typed({"$ref": 5}), ValueError, "'$ref'"),
    "a definition of type 5": (
        _function({"properties": {"a": {"$ref": "#/$defs/d"}}, "$defs": {"d": {"type": 5}}}),
        ValueError,
        "$defs.d",
    ),
    "a str": ("get_weather", TypeError, "tools"),
    "a dict": (GOOD[0], TypeError, "tools"),
}

BUILDERS = {
    "grammar": lambda m, tools: m.grammar(tools=tools),
    "tool_call_grammar": lambda m, tools: m.tool_call_grammar(tools=tools),
    "structural_tag": lambda m, tools: m.structural_tag(tools),
    "lark_grammar": lambda m, tools: m.lark_grammar(tools=tools),
    "prepare_messages": lambda m, tools: m.prepare_messages(MESSAGES, tools=tools),
}


@pytest.fixture(scope="module", params=rt.slugs())
def module(request):
    return rt.module(request.param)


@pytest.mark.parametrize("builder", list(BUILDERS))
def test_bad_tools_are_named(module, builder):
    BUILDERS[builder](module, GOOD)  # the good definition is taken
    for name, (tools, error, named) in BAD_TOOLS.items():
        with pytest.raises(error, match="tools") as raised:
            BUILDERS[builder](module, tools)
        assert named in str(raised.value), (name, str(raised.value))


def test_a_tool_of_another_type_is_no_function(module):
    other = [{"type": "custom", "custom": {"name": "x"}}] + GOOD
    assert module.grammar(tools=other) == module.grammar(tools=GOOD)
    module.prepare_messages(MESSAGES, tools=other)


@pytest.mark.parametrize(
    "choice", [{"function": "f"}, {"function": None}, {"type": "function"}, 5, "any"]
)
def test_a_bad_tool_choice_is_named(module, choice):
    for build in (
        lambda: module.grammar(tools=GOOD, tool_choice=choice),
        lambda: module.tool_call_grammar(tools=GOOD, tool_choice=choice),
        lambda: module.structural_tag(GOOD, tool_choice=choice),
        lambda: module.lark_grammar(tools=GOOD, tool_choice=choice),
    ):
        with pytest.raises(ValueError, match="tool_choice"):
            build()


BAD_MESSAGES = {
    "None": (None, TypeError, "messages is"),
    "a str": ("hi", TypeError, "messages is"),
    "a message None": ([None], TypeError, r"messages\[0\]"),
    "a call None": (
        [{"role": "assistant", "content": "", "tool_calls": [None]}],
        ValueError,
        r"messages\[0\]\['tool_calls'\]\[0\]",
    ),
    "a call's function a str": (
        [{"role": "assistant", "content": "", "tool_calls": [{"function": "f"}]}],
        ValueError,
        r"messages\[0\]\['tool_calls'\]\[0\]",
    ),
    "tool_calls 5": (
        [{"role": "user", "content": "x"}, {"role": "assistant", "content": "", "tool_calls": 5}],
        ValueError,
        r"messages\[1\]\['tool_calls'\]",
    ),
    "reasoning 5": (
        [{"role": "assistant", "content": "x", "reasoning_content": 5}],
        ValueError,
        r"messages\[0\]\['reasoning_content'\]",
    ),
}


@pytest.mark.parametrize("name", list(BAD_MESSAGES))
def test_bad_messages_are_named(module, name):
    messages, error, named = BAD_MESSAGES[name]
    with pytest.raises(error, match=named):
        module.prepare_messages(messages)


def test_messages_may_come_from_an_iterator(module):
    """A generator of messages is read once, as a list is (Gemma 2, RWKV World and
    Phi 3.5 read it twice, and the second reading found it empty)."""
    assert module.prepare_messages(iter(MESSAGES)) == module.prepare_messages(MESSAGES)
    assert module.prepare_messages(m for m in MESSAGES) == module.prepare_messages(MESSAGES)


def test_reading_an_output_never_asks_the_tools(module):
    for tools, _, _ in BAD_TOOLS.values():
        module.parse("The answer is 42.", tools=tools)
        parser = module.StreamParser(tools=tools)
        parser.feed("The answer is 42.")
        parser.finish()
