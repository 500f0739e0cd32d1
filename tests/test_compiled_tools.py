"""Tools compiled once (issue 32): ``compile_tools(tools)``, which every module exports.

- A compiled value reads as the list it was compiled from: ``parse`` (lenient and
  strict), the stream and every export give the same results on the round-trip texts,
  cut short too, with the value compiled by the module itself or by another module;
  and asked twice, an export gives the same text again (it keeps it).
- It is frozen when made: changing the caller's dicts afterwards, even before anything
  has read the value, changes nothing, nor does changing what it hands out (its
  ``tools`` copy, a structural tag's schemas); its fields cannot be set.
- A malformed tools list is refused when compiled, with the error every export gives
  for it (tests/test_caller_mistakes.py lists them).
- Reading model output with compiled tools never raises (fuzzed as tests/test_fuzz.py
  fuzzes, with tool definitions that are odd but well-formed too), and the stream
  still merges into ``parse``'s message.
"""

from __future__ import annotations

import copy
import pickle
import random

import pytest

from tests import roundtrip as rt
from tests.test_caller_mistakes import BAD_TOOLS, MESSAGES
from tests.test_fuzz import _built, _markers
from tests.test_stream import merge, streamed

ALL_TOOLS = list(rt.TOOLS.values())
# The module whose compile_tools compiles the value another module is given.
OTHER = "qwen3_coder"
# Every tool_choice a request can make, as exports take it.
NAMED = {"type": "function", "function": {"name": "get_weather"}}
CHOICES = ("auto", "none", "required", NAMED)


def _outcome(call, *args, **keywords):
    """What ``call(*args, **keywords)`` gives, or the error it raises (type and
    message)."""
    try:
        return ("ok", call(*args, **keywords))
    except (ValueError, TypeError) as error:
        return (type(error).__name__, str(error))


def _stream(module, text, tools, thinking):
    fed, finished, abandoned = streamed(
        module, text, range(3, len(text), 3), tools=tools, enable_thinking=thinking
    )
    return fed + finished, list(abandoned)


# A call whose string argument reads as a number where no schema types it.
TYPED_KIND = rt.Kind("typed_string", "", calls=(("get_weather", {"city": "12"}),))


def _texts(slug):
    """(text, tools, enable_thinking) of every round-trip case, and of a call whose
    reading the tools decide, whole and cut short."""
    found = []
    for kind in rt.ALL_KINDS + (TYPED_KIND,):
        case = rt.make_case(slug, kind)
        if case is None:
            continue
        tools = case.tools or ALL_TOOLS
        for text in (case.text, case.text[: len(case.text) * 2 // 3]):
            found.append((text, tools, kind.enable_thinking))
    return found or [("The answer is 42.", ALL_TOOLS, True)]


def _exports(module, tools):
    """Every export made from ``tools``, for every setting, as (name, outcome)."""
    made = []
    for choice in CHOICES:
        for thinking in (True, False):
            made.append(
                (
                    f"grammar {choice} {thinking}",
                    _outcome(
                        module.grammar,
                        tools=tools,
                        tool_choice=choice,
                        enable_thinking=thinking,
                    ),
                )
            )
        made.append(
            (
                f"tool_call_grammar {choice}",
                _outcome(module.tool_call_grammar, tools=tools, tool_choice=choice),
            )
        )
        for parallel in (True, False):
            made.append(
                (
                    f"lark_grammar {choice} {parallel}",
                    _outcome(
                        module.lark_grammar,
                        tools=tools,
                        tool_choice=choice,
                        parallel_tool_calls=parallel,
                    ),
                )
            )
        made.append(
            (
                f"structural_tag {choice}",
                _outcome(module.structural_tag, tools, tool_choice=choice),
            )
        )
    made.append(
        ("prepare_messages", _outcome(module.prepare_messages, MESSAGES, tools=tools))
    )
    return made


@pytest.mark.parametrize("slug", rt.slugs())
def test_a_compiled_value_reads_as_the_list(slug):
    module = rt.module(slug)
    other = rt.module(OTHER)
    for number, (text, tools, thinking) in enumerate(_texts(slug)):
        compiled = module.compile_tools(tools)
        given = [compiled, other.compile_tools(tools)]
        for strict in (False, True):
            options = {"enable_thinking": thinking, "strict": strict}
            wanted = _outcome(module.parse, text, tools=tools, **options)
            for value in given:
                found = _outcome(module.parse, text, tools=value, **options)
                assert found == wanted, f"text {number} strict={strict}: {text!r}"
        wanted = _stream(module, text, tools, thinking)
        for value in given:
            assert _stream(module, text, value, thinking) == wanted, f"text {number}: {text!r}"
    tools = _texts(slug)[0][1]
    compiled = module.compile_tools(tools)
    wanted = _exports(module, tools)
    assert _exports(module, compiled) == wanted
    assert _exports(module, compiled) == wanted, "asked again, an export kept another text"
    assert _exports(module, other.compile_tools(tools))[:3] == wanted[:3]


def test_the_texts_are_typed_by_the_tools():
    """The reading compared above depends on the tools: without them, a value the
    schema types as a string reads as a number (so a compiled value that typed
    nothing would differ)."""
    module = rt.module("qwen3_coder")
    case = rt.make_case("qwen3_coder", TYPED_KIND)
    assert case is not None
    untyped = module.parse(case.text)
    typed = module.parse(case.text, tools=module.compile_tools(ALL_TOOLS))
    assert typed != untyped
    assert typed == module.parse(case.text, tools=ALL_TOOLS)
    assert typed["tool_calls"][0]["function"]["arguments"] == '{"city": "12"}'


# An output of one call whose arguments the tools type: "12" is a string where the
# schema says string, a number where it says integer.
TYPED_TEXT = (
    "<tool_call>\n<function=f>\n<parameter=a>\n12\n</parameter>\n"
    "<parameter=b>\ntrue\n</parameter>\n</function>\n</tool_call>"
)


def _tools_ab(a_type, name="f"):
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "parameters": {
                    "type": "object",
                    "properties": {"a": {"type": a_type}, "b": {"type": "boolean"}},
                },
            },
        }
    ]


def _everything(module, tools):
    """What parse, the stream and the exports give with ``tools``."""
    return (
        module.parse(TYPED_TEXT, tools=tools),
        _stream(module, TYPED_TEXT, tools, True),
        _exports(module, tools),
    )


@pytest.mark.parametrize("slug", ["qwen3_coder", "nousresearch_hermes_2_pro_llama_3_8b_tool_use"])
@pytest.mark.parametrize("first_read", ["before", "after"])
def test_changing_the_callers_dicts_changes_nothing(slug, first_read):
    """The caller's dicts are changed right after compiling (before anything has
    read the compiled value, whose argument kinds are read when first needed), or
    after a first reading: every result stays what the list as it was gives."""
    module = rt.module(slug)
    tools = _tools_ab("string")
    wanted = _everything(module, copy.deepcopy(tools))
    compiled = module.compile_tools(tools)
    if first_read == "after":
        assert _everything(module, compiled) == wanted
    function = tools[0]["function"]
    function["parameters"]["properties"]["a"]["type"] = "integer"
    function["parameters"]["properties"]["b"] = {"type": "string"}
    tools.append(_tools_ab("number", name="g")[0])
    if slug == "qwen3_coder":  # (the change is one a list reader sees)
        assert module.parse(TYPED_TEXT, tools=tools) != wanted[0]
    assert _everything(module, compiled) == wanted
    function["name"] = "renamed"
    tools.clear()
    assert _everything(module, compiled) == wanted


def test_what_a_compiled_value_hands_out_is_a_copy():
    module = rt.module("qwen3_coder")
    compiled = module.compile_tools(_tools_ab("string"))
    wanted = _everything(module, compiled)
    handed = compiled.tools
    assert handed == _tools_ab("string")
    handed[0]["function"]["parameters"]["properties"]["a"]["type"] = "integer"
    tag = module.structural_tag(compiled)
    _schemas_changed(tag)
    assert _everything(module, compiled) == wanted
    assert compiled.tools == _tools_ab("string")


def _schemas_changed(value):
    """Every dict inside a structural tag changed: its type "null", its properties
    none."""
    if isinstance(value, dict):
        for item in list(value.values()):
            _schemas_changed(item)
        if "type" in value:
            value["type"] = "null"
        if isinstance(value.get("properties"), dict):
            value["properties"].clear()
    elif isinstance(value, list):
        for item in value:
            _schemas_changed(item)


def test_a_compiled_value_is_frozen():
    module = rt.module("qwen3_coder")
    compiled = module.compile_tools(_tools_ab("string"))
    for name in ("_definitions", "_types", "_made", "tools", "new"):
        with pytest.raises(AttributeError):
            setattr(compiled, name, None)
        with pytest.raises(AttributeError):
            delattr(compiled, name)
    assert copy.deepcopy(compiled) is compiled
    assert module.compile_tools(compiled) is compiled
    assert pickle.loads(pickle.dumps(compiled)).tools == compiled.tools
    assert len(compiled) == 1 and "f" in repr(compiled)
    assert not module.compile_tools(None) and not module.compile_tools([])


def test_tools_compiled_by_another_runtime_are_refused():
    """A value that says it is compiled tools of another layout (a runtime of another
    build) is refused, naming compile_tools, rather than read as no tools."""

    class Elsewhere:
        _chatfmt_tools = -1

    module = rt.module("qwen3_coder")
    for use in (
        lambda: module.parse(TYPED_TEXT, tools=Elsewhere()),
        lambda: module.StreamParser(tools=Elsewhere()),
        lambda: module.grammar(tools=Elsewhere()),
        lambda: module.compile_tools(Elsewhere()),
    ):
        with pytest.raises(TypeError, match="compile_tools"):
            use()


def test_a_schema_nested_deep_is_compiled():
    """A schema nested deeper than Python's recursion goes (the check that compiling
    makes walks it without recursing) is copied too, and reads as the list."""
    module = rt.module("qwen3_coder")
    nested: dict = {"type": "string"}
    for _ in range(5000):
        nested = {"type": "object", "properties": {"a": nested}}
    tools = _tools_ab("string")
    tools[0]["function"]["parameters"]["properties"]["c"] = nested
    compiled = module.compile_tools(tools)
    assert module.parse(TYPED_TEXT, tools=compiled) == module.parse(TYPED_TEXT, tools=tools)
    copied = compiled.tools[0]["function"]["parameters"]["properties"]["c"]
    depth = 0
    while "properties" in copied:
        assert copied is not nested
        copied, nested, depth = copied["properties"]["a"], nested["properties"]["a"], depth + 1
    assert depth == 5000 and copied == {"type": "string"}


@pytest.fixture(scope="module", params=rt.slugs())
def module(request):
    return rt.module(request.param)


def test_malformed_tools_are_refused_when_compiled(module):
    """``compile_tools`` raises what every export raises for the list (those the
    build made for this format)."""
    exports = {
        "grammar": lambda tools: module.grammar(tools=tools),
        "lark_grammar": lambda tools: module.lark_grammar(tools=tools),
        "structural_tag": lambda tools: module.structural_tag(tools),
        "prepare_messages": lambda tools: module.prepare_messages(MESSAGES, tools=tools),
    }
    made = {"grammar": "gbnf", "lark_grammar": "lark", "structural_tag": "structural_tag"}
    exports = {
        name: build
        for name, build in exports.items()
        if made.get(name) not in module.MISSING_EXPORTS
    }
    assert "prepare_messages" in exports
    for name, (tools, error, named) in BAD_TOOLS.items():
        found = _outcome(module.compile_tools, tools)
        assert found[0] == error.__name__ and named in found[1], (name, found)
        for export, build in exports.items():
            assert _outcome(build, tools) == found, (name, export)


# Definitions that are well-formed but odd: a schema that refers to itself, one that
# holds itself, types given as a list, deep nesting, two functions of one name (the
# last counts), a tool that is no function, a function without parameters.
def _odd_tools():
    holding = {"type": "object"}
    holding["properties"] = {"self": holding, "city": {"type": "integer"}}
    nested: dict = {"type": "integer"}
    for _ in range(40):
        nested = {"anyOf": [nested, {"type": "null"}]}
    return ALL_TOOLS + [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "city": {"type": "integer"},
                        "timezone": {"type": ["integer", "string"]},
                        "unit": {"$ref": "#"},
                        "x": nested,
                        "y": {"$ref": "#/properties/x"},
                    },
                },
            },
        },
        {"type": "function", "function": {"name": "get_time", "parameters": holding}},
        {"type": "function", "function": {"name": "hello world"}},
        {"type": "retrieval", "retrieval": {"name": "x"}},
    ]


INPUTS_PER_MODULE = 120


@pytest.mark.parametrize("slug", rt.slugs())
def test_reading_with_compiled_tools_never_raises(slug):
    module = rt.module(slug)
    markers = _markers(module.SPEC)
    rng = random.Random("compiled " + slug)
    texts = [text for text, _, _ in _texts(slug)]
    for tools in (ALL_TOOLS, _odd_tools()):
        compiled = module.compile_tools(tools)
        inputs = texts + [_built(rng, markers, texts) for _ in range(INPUTS_PER_MODULE)]
        for number, text in enumerate(inputs):
            thinking = rng.random() < 0.5
            where = f"input {number}: {text!r} (enable_thinking={thinking})"
            whole = module.parse(text, tools=compiled, enable_thinking=thinking)
            assert whole == module.parse(text, tools=tools, enable_thinking=thinking), where
            cuts = sorted(rng.sample(range(1, len(text)), max(0, min(len(text) - 1, 6))))
            for cutting in (cuts, range(1, len(text))):
                fed, finished, abandoned = streamed(
                    module, text, cutting, tools=compiled, enable_thinking=thinking
                )
                assert merge(fed + finished, abandoned) == whole, f"{where}: cut at {cutting}"
