"""GBNF for every ``tool_choice`` and ``parallel_tool_calls`` setting, and arguments held
to the tools' JSON schemas (compiler/runtime/grammar.py, compiler/runtime/schema_gbnf.py),
checked with llguidance one token per byte (tests/test_grammar.py).

For every corpus format with tool calls, on texts its template renders (written by hand
where its prompt opens a reasoning block the history never shows): "required"
refuses a reply without a call, a named function refuses a call to another, a single
call setting refuses a second call, "none" refuses a call; arguments that break the
schema (a value outside an enum, a required key missing, a value of the wrong type)
are refused where the schema-less grammar takes them, and matching ones accepted.
Then the schema subset, on hand-written outputs of a JSON format and a tagged one.
(That every round-trip text ``parse`` reads as well-formed is still accepted under
"auto", with the tools' schemas, is tests/test_tool_grammar.py's figures.)
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re

import pytest

from compiler.codegen import gbnf
from tests import roundtrip as rt
from tests.fallback_outputs import fallback_slugs, without_fallback
from tests.test_grammar import accepts, compile_grammar, format_of, left_recursive, why_rejected
from tests.test_lark import accepts as lark_accepts
from tests.test_lark import _matcher as lark_compile
from tests.test_roundtrip import KNOWN_FAILURES
from tests.test_tool_grammar import KNOWN_REJECTIONS
from tests.test_tool_grammar import tool_slugs, trigger_start


def _kind(name: str) -> rt.Kind:
    return next(kind for kind in rt.ALL_KINDS if kind.name == name)


def _named(name: str) -> dict:
    return {"type": "function", "function": {"name": name}}


SLUGS = tool_slugs()
WEATHER, TIME = rt.TOOLS["get_weather"], rt.TOOLS["get_time"]


@functools.lru_cache(maxsize=None)
def _output(slug: str, kind: rt.Kind) -> str | None:
    """What the model writes for ``kind``: the round trip's text where the template
    is its own oracle; else (the prompt opens a reasoning block that the history
    never shows, or places the system message elsewhere) written by hand as
    DESIGN.md says: the kind's content, or the calls as the template writes them in
    the history, after a closed reasoning block where the format needs one. None
    where neither gives a text that ``parse`` reads back as the kind."""
    module = rt.module(slug)
    tools = rt.tool_definitions(kind)
    case = rt.build_case(slug, kind)
    if case is not None and (slug, kind.name) not in KNOWN_FAILURES | KNOWN_REJECTIONS:
        return case.text if _reads_back(module.parse(case.text, tools=tools), kind) else None
    if kind.reasoning or (kind.content and kind.calls):
        return None
    bodies = [kind.content]
    if kind.calls:
        spec = rt.load_spec(slug)
        template = rt.template_for(spec)
        message = rt.message_for(spec, kind, kind.content or "")
        if template is None or message is None:
            return None
        try:
            prefix, full = rt._render_pair(
                spec, template, message, kind, rt.template_tools(spec, tools)
            )
        except rt.RenderError:
            return None
        # (the prompt may end with the first characters of the calls' marker)
        tail = full[max(0, len(os.path.commonprefix([prefix, full])) - 64) :]
        start = trigger_start(module.TRIGGERS, tail)
        if start is None:
            return None
        calls = rt.cut_tool_text(tail[start:], kind, rt.end_of_turn_markers(spec, template))
        # (or up to a marker after the calls: the template may go on with a turn of its own)
        after = rt._end_of_last_needle(calls, kind)
        # (the longest first: a cut inside a closer reads back too, issue 26, and
        # the grammar keeps to the template's own form)
        bodies = [calls] + [
            calls[: after + cut.start()] for cut in re.finditer(r"\s*<", calls[after:])
        ][::-1]
    reasoning = format_of(slug).reasoning
    ends = [reasoning.end] if reasoning.has_block and reasoning.end else []
    for body in bodies:
        for text in [f"Thinking it over.{end}\n\n{body}" for end in ends] + [body]:
            if _reads_back(module.parse(text, tools=tools), kind):
                return text
    return None


def _reads_back(message: dict, kind: rt.Kind) -> bool:
    calls = [
        (call["function"]["name"], json.loads(call["function"]["arguments"]))
        for call in message["tool_calls"]
    ]
    if len(calls) != len(kind.calls) or (message["content"] or "").strip() != kind.content:
        return False
    return all(
        name == wanted and rt.json_equal(arguments, wanted_arguments)
        for (name, arguments), (wanted, wanted_arguments) in zip(calls, kind.calls, strict=True)
    )


def _text(slug: str, name: str) -> str:
    text = _output(slug, _kind(name))
    if text is None:
        pytest.skip(f"no {name} output for this format")
    return text


# ---------------------------------------------------------------------------
# tool_choice and parallel_tool_calls, on every format


@pytest.mark.parametrize("slug", SLUGS)
def test_required_refuses_a_reply_without_a_call(slug):
    module = rt.module(slug)
    plain = _text(slug, "content")
    call = _text(slug, "tool_call")
    for tools in (None, [WEATHER, TIME]):
        required = module.grammar(tools=tools, tool_choice="required")
        assert accepts(module.grammar(tools=tools), plain, slug)
        assert not accepts(required, plain, slug), plain
        assert accepts(required, call, slug), why_rejected(required, call)
    text = _output(slug, _kind("content_then_tool_call"))
    if text is not None:
        required = module.grammar(tools=[WEATHER], tool_choice="required")
        assert accepts(required, text, slug), why_rejected(required, text)


@pytest.mark.parametrize("slug", SLUGS)
def test_a_named_function_refuses_another(slug):
    module = rt.module(slug)
    call = _text(slug, "tool_call")  # get_weather
    start = trigger_start(module.TRIGGERS, call)
    assert start is not None
    for tools in ([WEATHER, TIME], None):
        weather = module.grammar(tools=tools, tool_choice=_named("get_weather"))
        time = module.grammar(tools=tools, tool_choice=_named("get_time"))
        assert accepts(weather, call, slug), why_rejected(weather, call)
        assert not accepts(time, call, slug)
        lazy = module.tool_call_grammar(tools=tools, tool_choice=_named("get_time"))
        assert not accepts(lazy, call[start:], slug)
        lazy = module.tool_call_grammar(tools=tools, tool_choice=_named("get_weather"))
        assert accepts(lazy, call[start:], slug)
    plain = _text(slug, "content")
    assert not accepts(weather, plain, slug), "a named function is a required call"


@pytest.mark.parametrize("slug", SLUGS)
def test_a_single_call_setting_refuses_a_second_call(slug):
    module = rt.module(slug)
    two = _text(slug, "parallel_tool_calls")
    one = _text(slug, "tool_call")
    tools = [WEATHER, TIME]
    start = trigger_start(module.TRIGGERS, two)
    assert start is not None
    for choice in ("auto", "required"):
        single = module.grammar(tools=tools, tool_choice=choice, parallel_tool_calls=False)
        assert not accepts(single, two, slug), two
        assert accepts(single, one, slug), why_rejected(single, one)
    lazy = module.tool_call_grammar(tools=tools, parallel_tool_calls=False)
    assert not accepts(lazy, two[start:], slug)
    assert accepts(lazy, one[trigger_start(module.TRIGGERS, one) :], slug)
    assert accepts(module.tool_call_grammar(tools=tools), two[start:], slug)


@pytest.mark.parametrize("slug", SLUGS)
def test_none_refuses_a_call(slug):
    module = rt.module(slug)
    call = _text(slug, "tool_call")
    plain = _text(slug, "content")
    none = module.grammar(tools=[WEATHER], tool_choice="none")
    assert not accepts(none, call, slug), call
    assert accepts(none, plain, slug), why_rejected(none, plain)
    assert module.tool_call_grammar(tools=[WEATHER], tool_choice="none") is None


# ---------------------------------------------------------------------------
# arguments held to the schema, on every format

# (in the schema's order: the grammar takes members in that order, or sorted)
GOOD_RUN = {"language": "python", "code": "print(1)", "options": {"timeout": 5}, "sandbox": True}
BROKEN = {
    "outside the enum": ("get_weather", {"city": "Tokyo", "unit": "kelvin"}),
    "required key missing": ("get_weather", {"unit": "celsius"}),
    "wrong type": ("run_code", {"language": "python", "code": "print(1)", "sandbox": "maybe"}),
    "wrong type, nested": (
        "run_code",
        {"language": "python", "code": "print(1)", "options": {"timeout": "soon"}},
    ),
}
MATCHING = {
    "weather": ("get_weather", {"city": "Tokyo", "unit": "celsius"}),
    "run": ("run_code", GOOD_RUN),
}


def _call_kind(name: str, arguments: dict) -> rt.Kind:
    return rt.Kind(f"{name}-{json.dumps(arguments)}", "", calls=((name, arguments),))


def _nested_values_typed(slug: str) -> bool:
    """Whether objects inside a tagged value are held to their schema: not where the
    template writes its own value syntax or elements (docs/exports.md: what is not typed)."""
    calls = format_of(slug).calls
    arguments = calls.arguments if calls is not None else None
    if arguments is None:
        return True
    return arguments.syntax is None and getattr(arguments, "elements", None) is None


@pytest.mark.parametrize("slug", SLUGS)
def test_arguments_follow_the_schema(slug):
    module = rt.module(slug)
    checked = 0
    for what, (name, arguments) in MATCHING.items():
        text = _output(slug, _call_kind(name, arguments))
        if text is None:
            continue  # the format does not give these arguments back: not ours to judge
        grammar = module.grammar(tools=[rt.TOOLS[name]])
        assert accepts(grammar, text, slug), (what, why_rejected(grammar, text))
        checked += 1
    for what, (name, arguments) in BROKEN.items():
        if what == "wrong type, nested" and not _nested_values_typed(slug):
            continue
        text = _output(slug, _call_kind(name, arguments))
        if text is None:
            continue
        assert accepts(module.grammar(tools=[_named(name)["function"]]), text, slug)
        assert not accepts(module.grammar(tools=[rt.TOOLS[name]]), text, slug), (what, text)
        start = trigger_start(module.TRIGGERS, text)
        lazy = module.tool_call_grammar(tools=[rt.TOOLS[name]])
        assert start is None or not accepts(lazy, text[start:], slug), what
        checked += 1
    if not checked:
        pytest.skip("no output of these calls that parse reads back")
    assert checked >= 4, checked


# ---------------------------------------------------------------------------
# the schema subset, on hand-written outputs

JSON_SLUG = (
    "qwen_qwen2_5_7b_instruct"  # <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
)
TAGGED_SLUG = "qwen3_coder"  # <parameter=key>\nvalue\n</parameter>, Python literals


def _tool(parameters, name: str = "f", strict: bool = False) -> dict:
    function = {"name": name, "parameters": parameters}
    if strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def _json_call(arguments, name: str = "f") -> str:
    fields = {"name": name, "arguments": arguments}
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return (
        '<tool_call>\n{"name": '
        + json.dumps(fields["name"])
        + ', "arguments": '
        + text
        + "}\n</tool_call>"
    )


def _json_accepts(parameters, arguments, strict: bool = False) -> bool:
    grammar = rt.module(JSON_SLUG).grammar(tools=[_tool(parameters, strict=strict)])
    return accepts(grammar, _json_call(arguments), JSON_SLUG)


OBJECT = {"type": "object"}


def test_types_enums_and_required_keys():
    schema = {
        "type": "object",
        "properties": {
            "s": {"type": "string"},
            "i": {"type": "integer"},
            "n": {"type": "number"},
            "b": {"type": "boolean"},
            "z": {"type": "null"},
            "e": {"enum": ["a", 'we"ird', 3, None]},
            "c": {"const": {"k": [1]}},
            "t": {"type": ["integer", "string"]},
            "o": {"type": "string", "nullable": True},
        },
        "required": ["s", "i"],
    }
    assert _json_accepts(schema, {"s": "x", "i": -3})
    assert _json_accepts(schema, {"s": "x", "i": 0, "n": 1.5e3, "b": False, "z": None})
    assert _json_accepts(schema, {"s": "x", "i": 1, "e": 'we"ird', "c": {"k": [1]}})
    for e in ("a", 3, None):
        assert _json_accepts(schema, {"s": "", "i": 1, "e": e})
    assert _json_accepts(schema, {"s": "", "i": 1, "t": 5}) and _json_accepts(
        schema, {"s": "", "i": 1, "t": "5"}
    )
    assert _json_accepts(schema, {"s": "", "i": 1, "o": None})
    refused = [
        {"i": 1},  # s missing
        {"s": "x"},  # i missing
        {"s": 1, "i": 1},
        {"s": "x", "i": 1.5},
        {"s": "x", "i": "1"},
        {"s": "x", "i": 1, "b": "true"},
        {"s": "x", "i": 1, "z": 0},
        {"s": "x", "i": 1, "e": "b"},
        {"s": "x", "i": 1, "e": 4},
        {"s": "x", "i": 1, "c": {"k": [2]}},
        {"s": "x", "i": 1, "t": True},
        '{"s": "x", "i": 1, "s": "twice"}',
    ]
    for arguments in refused:
        assert not _json_accepts(schema, arguments), arguments


def test_members_in_the_schemas_order_or_sorted():
    schema = {
        "type": "object",
        "properties": {
            "b": {"type": "integer"},
            "a": {"type": "integer"},
            "c": {"type": "integer"},
        },
    }
    assert _json_accepts(schema, '{"b": 1, "a": 2, "c": 3}')  # the schema's order
    assert _json_accepts(schema, '{"a": 2, "b": 1, "c": 3}')  # sorted (dictsort)
    assert _json_accepts(schema, '{"b": 1, "c": 3}') and _json_accepts(schema, "{}")
    assert not _json_accepts(schema, '{"c": 3, "a": 2}')


def test_other_members():
    properties = {"a": {"type": "integer", "enum": [1]}}
    open_ = {"type": "object", "properties": properties}
    closed = {**open_, "additionalProperties": False}
    typed = {**open_, "additionalProperties": {"type": "string"}}
    # Absent: any other member, any value; never a listed key twice or untyped.
    assert _json_accepts(open_, {"a": 1, "b": [None, {"x": 1}], "ab": 2, "": 0})
    assert not _json_accepts(open_, {"a": 2}) and not _json_accepts(open_, '{"b": 1, "a": 2}')
    assert not _json_accepts(open_, '{"a": 1, "a": 1}')
    assert not _json_accepts(closed, {"a": 1, "b": 2}) and _json_accepts(closed, {"a": 1})
    assert _json_accepts(typed, {"a": 1, "b": "x"}) and not _json_accepts(typed, {"a": 1, "b": 2})
    # strict closes every object, nested ones too.
    nested = {"type": "object", "properties": {"o": open_}}
    assert _json_accepts(nested, {"o": {"a": 1, "z": 0}})
    assert not _json_accepts(nested, {"o": {"a": 1, "z": 0}}, strict=True)
    assert not _json_accepts(nested, {"o": {}, "z": 0}, strict=True)
    assert _json_accepts(nested, {"o": {"a": 1}}, strict=True)
    # A free object: any members.
    assert _json_accepts(
        {"type": "object", "properties": {"o": OBJECT}}, {"o": {"x": [1, {"y": None}]}}
    )


def test_arrays_refs_and_alternatives():
    tree = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "v": {"type": "integer"},
                    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                },
                "required": ["v"],
                "additionalProperties": False,
            }
        },
        "type": "object",
        "properties": {
            "root": {"$ref": "#/$defs/node"},
            "pair": {"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
            "either": {
                "anyOf": [
                    {"type": "integer"},
                    {"type": "object", "properties": {"x": {"type": "boolean"}}, "required": ["x"]},
                ]
            },
            "one": {"oneOf": [{"const": "a"}, {"type": "array", "items": {"type": "number"}}]},
            "all": {"allOf": [{"type": "integer"}]},
            "free": {"not": {"type": "string"}},
            "remote": {"$ref": "https://example.com/s.json"},
        },
    }
    good = {
        "root": {"v": 1, "kids": [{"v": 2, "kids": []}, {"v": 3, "kids": [{"v": 4}]}]},
        "pair": ["a", 1],
        "either": {"x": True},
        "one": [1, 2.5],
        "all": 7,
        "free": "anything",
        "remote": {"any": ["thing"]},
    }
    assert _json_accepts(tree, good)
    assert _json_accepts(tree, {"pair": ["a"], "either": 3, "one": "a"})
    refused = [
        {"root": {"v": 1, "kids": [{"kids": []}]}},  # v missing, deep inside
        {"root": {"v": 1, "kids": [{"v": "2"}]}},
        {"root": {"v": 1, "extra": 0}},
        {"pair": [1, "a"]},
        {"pair": ["a", 1, 2]},
        {"either": {"x": 1}},
        {"one": "b"},
        {"all": 1.5},
    ]
    for arguments in refused:
        assert not _json_accepts(tree, arguments), arguments


def test_hostile_strings_are_escaped():
    keys = ['qu"ote', "back\\slash", "new\nline", "x ::= root", "日本語", "<parameter=", "tab\t"]
    schema = {
        "type": "object",
        "properties": {key: {"enum": [key, "]", "\\x00"]} for key in keys},
        "required": keys[:2],
        "additionalProperties": False,
    }
    name = 'na"me\\'
    module = rt.module(JSON_SLUG)
    grammar = module.grammar(tools=[_tool(schema, name=name)])
    compile_grammar(grammar)
    arguments = {key: key for key in keys}
    text = (
        '<tool_call>\n{"name": '
        + json.dumps(name)
        + ', "arguments": '
        + json.dumps(arguments)
        + "}\n</tool_call>"
    )
    assert accepts(grammar, text), why_rejected(grammar, text)
    assert not accepts(grammar, text.replace('"x ::= root": "x ::= root"', '"x ::= root": "root"'))
    assert not accepts(grammar, text.replace('"new\\nline": ', '"new\\tline": '))
    tagged = rt.module(TAGGED_SLUG)
    grammar = tagged.grammar(tools=[_tool(schema, name="f")])
    compile_grammar(grammar)
    units = "".join(f"<parameter={key}>\n{key}\n</parameter>\n" for key in keys[:2] + keys[4:5])
    text = f"<tool_call>\n<function=f>\n{units}</function>\n</tool_call>"
    assert accepts(grammar, text), why_rejected(grammar, text)


# ---------------------------------------------------------------------------
# tagged key/value units: values typed per schema


def _tagged(units: str, parameters) -> bool:
    grammar = rt.module(TAGGED_SLUG).grammar(tools=[_tool(parameters)])
    return accepts(
        grammar, f"<tool_call>\n<function=f>\n{units}</function>\n</tool_call>", TAGGED_SLUG
    )


def _unit(key: str, value: str) -> str:
    return f"<parameter={key}>\n{value}\n</parameter>\n"


def test_tagged_values_are_typed():
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "number"},
            "flag": {"type": "boolean"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "o": {"type": "object", "properties": {"k": {"type": "integer"}}, "required": ["k"]},
            "text": {"type": "string"},
            "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        },
        "required": ["n"],
    }
    assert _tagged(_unit("n", "1.5") + _unit("flag", "True") + _unit("unit", "celsius"), schema)
    assert _tagged(
        _unit("n", "-2") + _unit("o", '{"k": 3}') + _unit("text", "free <b>text</b>"), schema
    )
    assert _tagged(_unit("n", "0") + _unit("maybe", "None") + _unit("more", "anything"), schema)
    for units in (
        _unit("n", "many"),  # a number where the schema says number
        _unit("flag", "True"),  # n missing
        _unit("n", "1") + _unit("flag", "yes"),
        _unit("n", "1") + _unit("unit", "kelvin"),
        _unit("n", "1") + _unit("o", '{"k": "3"}'),
        _unit("n", "1") + _unit("o", "{}"),
        _unit("n", "1") + _unit("maybe", "3.5"),
        _unit("n", "1") + _unit("unit", "kelvin") + _unit("unit", "celsius"),
    ):
        assert not _tagged(units, schema), units
    module = rt.module(TAGGED_SLUG)
    text = (
        "<tool_call>\n<function=f>\n"
        + _unit("n", "1")
        + _unit("flag", "True")
        + "</function>\n</tool_call>"
    )
    read = module.parse(text, tools=[_tool(schema)])["tool_calls"][0]["function"]["arguments"]
    assert json.loads(read) == {"n": 1, "flag": True}


# ---------------------------------------------------------------------------
# the API


def test_bad_settings_are_refused():
    module = rt.module(JSON_SLUG)
    for choice in ("any", {"type": "function"}, {"function": {"name": ""}}, 3):
        with pytest.raises(ValueError):
            module.grammar(tool_choice=choice)
    with pytest.raises(ValueError, match="not in tools"):
        module.grammar(tools=[WEATHER], tool_choice=_named("get_time"))
    # (every corpus format reads calls, the template's or our fallback ones)
    plain = without_fallback(fallback_slugs()[0])
    with pytest.raises(ValueError):
        plain.grammar(tool_choice="required")
    assert plain.grammar(tool_choice="none") == plain.GBNF


def _rules(text: str) -> dict[str, str]:
    return dict(line.split(" ::= ", 1) for line in text.split("\n") if line)


@pytest.mark.parametrize(
    "slug", [JSON_SLUG, TAGGED_SLUG, "google_gemma_4_31b_it", "deepseek_ai_deepseek_v3_1"]
)
def test_module_settings_match_the_generator(slug):
    """Without schemas, a module's grammar for each setting has the generator's rules."""
    module = rt.module(slug)
    fmt = format_of(slug)
    for choice, parallel in gbnf.SETTINGS + (("auto", True),):
        for thinking in (True, False):
            made = module.grammar(
                enable_thinking=thinking, tool_choice=choice, parallel_tool_calls=parallel
            )
            built = gbnf.build(
                fmt, enable_thinking=thinking, tool_choice=choice, parallel_tool_calls=parallel
            )
            assert _rules(made) == _rules(built), (choice, parallel, thinking)
        made = module.tool_call_grammar(tool_choice=choice, parallel_tool_calls=parallel)
        built = gbnf.build_tool_calls(fmt, tool_choice=choice, parallel_tool_calls=parallel)
        assert (made and _rules(made)) == (built and _rules(built)), (choice, parallel)


def test_grammar_size_is_linear_in_the_schema():
    module = rt.module(TAGGED_SLUG)
    json_module = rt.module(JSON_SLUG)

    def size(module, count: int) -> int:
        properties = {
            f"key_{index}": {
                "type": "object",
                "properties": {
                    "x": {"enum": ["a", "b"]},
                    "y": {"type": "array", "items": {"type": "integer"}},
                },
            }
            for index in range(count)
        }
        tools = [_tool({"type": "object", "properties": properties, "required": ["key_0"]})]
        return len(module.grammar(tools=tools))

    for each in (module, json_module):
        small, middle, large = size(each, 10), size(each, 20), size(each, 40)
        assert large - middle < 2.5 * (middle - small), (small, middle, large)


def test_tools_without_a_schema_limit_names_only():
    module = rt.module(JSON_SLUG)
    before = copy.deepcopy(rt.TOOLS)
    grammar = module.grammar(tools=[_named("a")["function"], _tool({"type": "object"}, name="b")])
    assert grammar == module.grammar(tools=[{"name": "a"}, {"name": "b"}])
    assert re.search(r'^tool-name ::= "a" \| "b"$', grammar, re.M)
    # Mixed: the free function takes any arguments, the typed one its schema's.
    mixed = module.grammar(tools=[{"name": "free"}, WEATHER, TIME])
    assert accepts(mixed, _json_call({"anything": [1, {"x": None}]}, name="free"))
    assert accepts(mixed, _json_call({"timezone": "UTC"}, name="get_time"))
    assert not accepts(mixed, _json_call({"city": "Oslo"}, name="get_time"))
    assert not accepts(mixed, _json_call({"timezone": "UTC"}, name="other"))
    assert rt.TOOLS == before  # the definitions are left as they were


# ---------------------------------------------------------------------------
# $refs: anchors and pointers, loops, depth (issue 32, items 6 and 11), in the GBNF and
# in llguidance's Lark alike


def _lark_json_accepts(parameters, arguments) -> bool:
    grammar = rt.module(JSON_SLUG).lark_grammar(tools=[_tool(parameters)])
    return lark_accepts(grammar, _json_call(arguments), JSON_SLUG)


REF_FORMS = {
    "$anchor": ("#zip", {"zip": {"$anchor": "zip", "type": "string"}}),
    "draft 7 $id": ("#zip", {"code": {"$id": "#zip", "type": "string"}}),
    "percent-encoded pointer": ("#/$defs/zip%20code~1us", {"zip code/us": {"type": "string"}}),
}


@pytest.mark.parametrize("form", list(REF_FORMS))
def test_a_ref_to_an_anchor_or_an_encoded_pointer(form):
    """Issue 32, item 6: ``"$ref": "#zip"`` pointed to the whole parameters object,
    and the GBNF admitted no value for zip at all: a model held to it could never
    finish the call. Now its string, and nothing else, in both grammars."""
    ref, defs = REF_FORMS[form]
    schema = {
        "type": "object",
        "properties": {"zip": {"$ref": ref}},
        "required": ["zip"],
        "$defs": defs,
    }
    for check in (_json_accepts, _lark_json_accepts):
        assert check(schema, {"zip": "02134"}), check.__name__
        assert not check(schema, {"zip": 2134}), check.__name__
        assert not check(schema, {}), check.__name__


def _loops() -> dict:
    a, b = {"$ref": "#/$defs/a"}, {"$ref": "#/$defs/b"}
    return {
        "an alias cycle": {"a": b, "b": a},
        "an anyOf that holds itself": {"a": {"anyOf": [a, {"type": "string"}]}},
        "two anyOfs that hold each other": {
            "a": {"anyOf": [b, {"type": "string"}]},
            "b": {"oneOf": [{"allOf": [a]}, {"type": "integer"}]},
        },
    }


LOOPS = _loops()
# What each admits for "v" (and "w"), and what it refuses.
LOOP_VALUES = {
    "an alias cycle": (["s", 1, [None, {"x": True}]], []),  # says nothing: any value
    "an anyOf that holds itself": (["s"], [1, None]),
    "two anyOfs that hold each other": (["s", 1], [True, None]),
}


@pytest.mark.parametrize("name", list(LOOPS))
def test_refs_that_lead_round_make_no_left_recursion(name):
    """Issue 32, item 11: a $ref alias cycle, or an anyOf that holds itself, gave
    rules that refer to each other before any text (``tool0-2 ::= tool0-1``,
    ``tool0-1 ::= tool0-2``), which llama.cpp refuses. The $refs that lead round
    share one rule, of what each admits besides the others; every format's grammars
    are free of left recursion, and llguidance compiles them."""
    schema = {
        "type": "object",
        "properties": {"v": {"$ref": "#/$defs/a"}, "w": {"$ref": "#/$defs/b"}},
        "$defs": {"b": {"$ref": "#/$defs/a"}, **LOOPS[name]},
    }
    for slug in SLUGS:
        module = rt.module(slug)
        for grammar in (
            module.grammar(tools=[_tool(schema)]),
            module.tool_call_grammar(tools=[_tool(schema)]),
        ):
            assert left_recursive(grammar) == set(), slug
            compile_grammar(grammar, slug)
    good, bad = LOOP_VALUES[name]
    for check in (_json_accepts, _lark_json_accepts):
        for value in good:
            assert check(schema, {"v": value, "w": value}), (check.__name__, value)
        for value in bad:
            assert not check(schema, {"v": value}), (check.__name__, value)
            assert not check(schema, {"w": value}), (check.__name__, value)


def test_a_schema_that_refers_to_its_whole_self():
    schema = {"anyOf": [{"$ref": "#"}, {"type": "object", "properties": {"v": {"type": "integer"}}}]}
    for slug in (JSON_SLUG, TAGGED_SLUG):
        grammar = rt.module(slug).grammar(tools=[_tool(schema)])
        assert left_recursive(grammar) == set(), slug
        compile_grammar(grammar, slug)
    assert _json_accepts(schema, {"v": 1}) and _lark_json_accepts(schema, {"v": 1})


def _nested(depth: int, leaf: dict) -> dict:
    for _ in range(depth):
        leaf = {"type": "object", "properties": {"a": leaf}, "required": ["a"]}
    return {"type": "object", "properties": {"x": leaf}, "required": ["x"]}


def _nested_value(depth: int, leaf) -> dict:
    for _ in range(depth):
        leaf = {"a": leaf}
    return {"x": leaf}


@pytest.mark.parametrize("depth", [200, 400])
def test_a_schema_nested_deeper_than_any_real_one(depth):
    """Issue 32, item 11: a schema nested 400 levels deep made grammar() raise
    RecursionError, and at 200 llguidance refused the Lark (its JSON reader's
    recursion limit). Down to 32 levels a schema holds; below that any value does:
    every export is made, llguidance takes the GBNF and the Lark, and they agree."""
    schema = _nested(depth, {"type": "string"})
    tools = [_tool(schema)]
    for slug in (JSON_SLUG, TAGGED_SLUG, "minimax_m2"):
        module = rt.module(slug)
        compile_grammar(module.grammar(tools=tools), slug)
        compile_grammar(module.tool_call_grammar(tools=tools), slug)
        lark_compile(module.lark_grammar(tools=tools), slug)
        json.dumps(module.structural_tag(tools))
    # Down to the bound the schema holds, in both: an object where one is wanted.
    refused = [{"x": {}}, {"x": {"a": 1}}, _nested_value(20, "leaf")]
    # Below it, any value, in both.
    taken = [_nested_value(depth, "leaf"), _nested_value(depth, 1), _nested_value(40, [1])]
    for check in (_json_accepts, _lark_json_accepts):
        for value in refused:
            assert not check(schema, value), (check.__name__, json.dumps(value)[:40])
        for value in taken:
            assert check(schema, value), (check.__name__, json.dumps(value)[:40])
