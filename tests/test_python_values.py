"""Calls written as Python (issue 31, item 6): values read as the template writes them,
typed by the tool's schema, and a string in either of Python's quotes.

A template that writes ``name(key=value, ...)`` is answered by models in Python: ``None``,
``True``, ``{'a': True}``, and strings in whichever quote they like. The analysis reads
off the renders that the arguments are Python's keyword arguments and which quote the
template gives a string; the spec records it (``tools.arguments.literal``,
``string_quotes_also``), and the runtime reads it as data. The model outputs here are
written by hand (the template renders none of them: it writes only its own spelling).
"""

from __future__ import annotations

import copy
import json
import os

import pytest

from compiler import model
from compiler.analyze import tools as tools_analysis
from compiler.build import spec_for
from compiler.codegen.module import load
from compiler.loader import load_generated
from compiler.sources import discover
from compiler.spec import SpecError, apply_overrides, validate
from tests import roundtrip as rt
from tests.test_stream import chunkings, merge, stream

INVENTED = os.path.join(rt.ROOT, "tests", "invented")


def _compiled(name: str, overrides=()) -> tuple[dict, object]:
    """(the spec, the parser module) of an invented template, analysed here."""
    source = discover(None, [os.path.join(INVENTED, f"{name}.jinja")])[0]
    spec, _ = spec_for(source, list(overrides), f"{source.slug}.yaml", time_budget=None)
    return spec, load(model.build(spec, slug=source.slug, origin=f"{source.slug}.yaml"))


@pytest.fixture(scope="module")
def keyword():
    return _compiled("keyword_calls")


def _tool(name, **properties):
    return {"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": properties}}}  # fmt: skip


TOOLS = [
    _tool("get_weather", city={"type": "string"}, days={"type": ["integer", "null"]},
          metric={"type": "boolean"}),
    _tool("set_options", options={"type": "object"}, tags={"type": "array"},
          note={"type": "string"}, extra={}),
]  # fmt: skip


def _calls(*lines: str) -> str:
    return "<|calls|>\n" + "\n".join(lines) + "\n<|/calls|>"


# Hand-written outputs of a model that writes Python where keyword_calls writes strings
# between single quotes and every other value as JSON: (text, the calls' arguments).
PYTHON_OUTPUTS = [
    # The issue's: None, True and {'a': True} read as values; "Paris" in double quotes.
    (_calls('get_weather(city="Paris", days=None, metric=True)'),
     [{"city": "Paris", "days": None, "metric": True}]),
    (_calls("set_options(options={'a': True}, extra=None)"),
     [{"options": {"a": True}, "extra": None}]),
    (_calls("get_weather(city='Paris', metric=False)"), [{"city": "Paris", "metric": False}]),
    # Python's escapes in either quote; a quote of the other kind inside as it stands.
    (_calls('get_weather(city="Martha\'s \\"Vineyard\\"", days=3)'),
     [{"city": 'Martha\'s "Vineyard"', "days": 3}]),
    (_calls("set_options(note='it\\'s', tags=['a', \"b\", None])"),
     [{"note": "it's", "tags": ["a", "b", None]}]),
    # JSON's spelling, as the template writes it, still reads.
    (_calls('get_weather(city="Oslo", metric=true, days=null)'),
     [{"city": "Oslo", "metric": True, "days": None}]),
    # The schema types a word: where it says string, True is the text the model wrote;
    # a quoted value is a string whatever the schema says, in either quote.
    (_calls("set_options(note=True, extra=True)"), [{"note": "True", "extra": True}]),
    (_calls("get_weather(days=\"3\", metric='True')"), [{"days": "3", "metric": "True"}]),
    # Two calls, a double-quoted string with a line break in it.
    (_calls('get_weather(city="Rome")', 'set_options(note="two\\nlines", options={})'),
     [{"city": "Rome"}, {"note": "two\nlines", "options": {}}]),
]


def test_the_analysis_reads_python_keyword_arguments(keyword):
    spec, _ = keyword
    arguments = spec["tools"]["arguments"]
    assert (arguments["literal"], arguments["containers"]) == ("python", "json")
    assert (arguments["string_open"], arguments["string_close"]) == ("'", "'")
    assert arguments["string_quotes_also"] == ['"']


@pytest.mark.parametrize("name,quote,also", [("pyrepr_calls", '"', ["'"]),
                                             ("python_calls", '"', ["'"]),
                                             ("pylist_raw_calls", "'", ['"'])])  # fmt: skip
def test_python_quotes_of_other_invented_templates(name, quote, also):
    """Python's other quote wherever the template writes Python values and quotes its
    strings: with its own macro (pyrepr, pylist_raw) or JSON values in keyword
    arguments (python_calls, whose literal is python for that)."""
    spec, _ = _compiled(name)
    arguments = spec["tools"]["arguments"]
    assert arguments["literal"] == "python"
    assert (arguments["string_open"], arguments.get("string_quotes_also")) == (quote, also)


@pytest.mark.parametrize("text,expected", PYTHON_OUTPUTS, ids=range(len(PYTHON_OUTPUTS)))
def test_python_values_are_typed_by_the_schema(keyword, text, expected):
    _, parser = keyword
    message = parser.parse(text, tools=TOOLS)
    assert message["content"] is None or message["content"] == ""
    assert [json.loads(c["function"]["arguments"]) for c in message["tool_calls"]] == expected
    assert parser.parse(text, tools=TOOLS, strict=True) == message
    for name, cuts in chunkings(text, text):
        fed, finished = stream(parser, text, cuts, tools=TOOLS)
        assert merge(fed + finished) == message, name


def test_corpus_lfm2_reads_a_double_quoted_string():
    """LFM2.5 writes strings between single quotes; its model writes double ones too
    (vLLM's LFM2 tests have one nested; here at the top of the arguments)."""
    parser = load_generated(os.path.join(rt.ROOT, "generated"), "lfm2_5_8b_a1b")
    assert parser.SPEC["tools"]["arguments"]["string_quotes_also"] == ['"']
    text = '<|tool_call_start|>[get_weather(city="Paris", days=None, metric=True)]<|tool_call_end|>'
    message = parser.parse(text, tools=TOOLS)
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {
        "city": "Paris", "days": None, "metric": True}  # fmt: skip


def _bare_strings(spec: dict) -> dict:
    """The spec of a template that writes strings bare (``key=text``): it shows no
    quote, so the analysis cannot say a model quotes them."""
    body = {k: v for k, v in copy.deepcopy(spec).items() if k not in ("overrides", "review")}
    arguments = body["tools"]["arguments"]
    for key in ("string_open", "string_close", "string_quotes_also"):
        arguments.pop(key)
    return body


def test_an_override_lets_strings_take_either_quote(keyword):
    spec, _ = keyword
    body = _bare_strings(spec)
    text = _calls('get_weather(city="Paris", metric=True)')
    before = load(model.build(body, slug="bare", origin="bare.yaml"))
    assert json.loads(before.parse(text, tools=TOOLS)["tool_calls"][0]["function"]["arguments"]) == {
        "city": '"Paris"', "metric": True}  # fmt: skip
    override = {"path": "tools.arguments.string_quotes_also", "value": ["'", '"'],
                "reason": "the model quotes its strings", "evidence": "this test"}  # fmt: skip
    patched, _ = apply_overrides(body, [override], "bare.yaml")
    after = load(model.build(patched, slug="bare", origin="bare.yaml"))
    for quoted in ('"Paris"', "'Paris'"):
        text = _calls(f"get_weather(city={quoted}, metric=True)")
        message = after.parse(text, tools=TOOLS)
        assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {
            "city": "Paris", "metric": True}, quoted  # fmt: skip
    without_evidence = {key: value for key, value in override.items() if key != "evidence"}
    with pytest.raises(SpecError, match="evidence"):
        apply_overrides(body, [without_evidence], "bare.yaml")


@pytest.mark.parametrize(
    "change,message",
    [
        ({"literal": "json", "containers": None}, "literal must be python"),
        ({"string_quotes_also": ["'"]}, "the template's own quote"),
        ({"value_suffix": "</v>"}, "nothing after a value"),
    ],
)
def test_the_model_refuses_quotes_it_cannot_read(keyword, change, message):
    spec, _ = keyword
    body = copy.deepcopy(spec)
    arguments = body["tools"]["arguments"]
    for key, value in change.items():
        if value is None:
            arguments.pop(key)
        else:
            arguments[key] = value
    validate(body, "k.yaml")
    with pytest.raises(SpecError, match=message):
        model.build(body, slug="k", origin="k.yaml")
    body["tools"]["arguments"]["string_quotes_also"] = ["`"]
    with pytest.raises(SpecError, match="string_quotes_also"):
        validate(body, "k.yaml")


@pytest.mark.parametrize(
    "region,arguments,expected",
    [
        ("a='x', b=None", {"a": "x", "b": None}, True),
        ('a="x", b=true', {"a": "x", "b": True}, True),
        ("a={'k': [1, None]}, b=False", {"a": {"k": [1, None]}, "b": False}, True),
        ("a=x, b=None", {"a": "x", "b": None}, False),  # a bare string: no literal
        ("a=1, b=True", {"a": True, "b": True}, False),  # 1 is no True
        ("'x', b=None", {"a": "x", "b": None}, False),  # no key
        ("a='x'; b=None", {"a": "x", "b": None}, False),
        ("::a=x\n::b=None\n", {"a": "x", "b": None}, False),
    ],
)
def test_keyword_arguments_are_read_not_run(region, arguments, expected):
    assert tools_analysis._keyword_arguments(region, arguments) is expected


def test_grammars_take_either_quote(keyword):
    """The GBNF and the Lark grammar (read by llguidance) take the string in the
    other quote where the schema says string, as the reader does, and still refuse
    a string left open."""
    from tests.test_grammar import accepts as gbnf_accepts
    from tests.test_lark import accepts as lark_accepts

    _, parser = keyword
    tools = [TOOLS[0]]
    gbnf, lark = parser.grammar(tools=tools), parser.lark_grammar(tools=tools)
    for quoted in ('"Paris"', "'Paris'", '"Par\\"is"'):
        text = _calls(f"get_weather(city={quoted}, metric=True)")
        assert gbnf_accepts(gbnf, text) and lark_accepts(lark, text), quoted
    broken = _calls('get_weather(city="Paris, metric=True)')
    assert not gbnf_accepts(gbnf, broken) and not lark_accepts(lark, broken)
