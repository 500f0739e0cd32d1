"""How values come back (issue 24): a tagged value whose schema admits a string stays
the text the model wrote (type lists, anyOf/oneOf, enum, const, $ref); the model's own
word for a string (DeepSeek's ``string="true"``, Kimi K3's ``type="string"``) is
obeyed; and a number that would not be finite (NaN, Infinity, 1e999) never reaches
``arguments``: where the format writes JSON the call is malformed, in a tagged value it
is the text as written.

The calls are written from each format's spec (its literals) or rendered by the
template, never by the parser; each text is read by ``parse`` and by the stream at
several chunkings.
"""

from __future__ import annotations

import json

import pytest

from tests import roundtrip as rt
from tests.test_stream import merge, streamed
from tests.test_tool_parsing import module, output, tool_slugs, wrap, write_call


def _strict(text):
    """``json.loads`` as JavaScript's, serde's or Go's reader takes JSON: no NaN,
    no Infinity, no number beyond a double's range."""

    def refuse(name):
        raise ValueError(name)

    def finite(number):
        value = float(number)
        if value in (float("inf"), float("-inf")):
            raise ValueError(number)
        return value

    return json.loads(text, parse_constant=refuse, parse_float=finite)


def read(parser, text, **options):
    """``parse(text)``, checked against the stream at 1, 2, 3, 7 and 64 characters a
    piece and whole, every call's arguments read by the strict reader."""
    whole = parser.parse(text, **options)
    for size in (1, 2, 3, 7, 64, len(text)):
        cuts = range(size, len(text), size)
        fed, finished, abandoned = streamed(parser, text, cuts, **options)
        assert merge(fed + finished, abandoned) == whole, size
    for call in whole["tool_calls"]:
        _strict(call["function"]["arguments"])
    return whole


def _tagged_slugs():
    return [
        slug
        for slug in tool_slugs("tagged")
        if module(slug).SPEC["tools"]["arguments"]["encoding"] == "tagged"
    ]


TAGGED = _tagged_slugs()


def _unit(arguments, key, written, attribute):
    """One key/value unit from the spec's literals, the value ``written`` as a model
    may write it (bare), ``attribute`` the word before ``value_start``."""
    middle = arguments["key_end"]
    if arguments.get("value_start"):
        middle += attribute + arguments["value_start"]
    suffix = arguments["value_suffix"]
    if arguments.get("value_suffix_names_key"):
        suffix = suffix.replace("{key}", key)
    return arguments["key_prefix"] + key + middle + written + suffix


def tagged_call(slug, units, attribute="x"):
    """A call to ``f`` with ``units`` ((key, text as written)), from the spec."""
    spec_tools = module(slug).SPEC["tools"]
    arguments = spec_tools["arguments"]
    text = "".join(
        arguments["separator"] * bool(number) + _unit(arguments, key, written, attribute)
        for number, (key, written) in enumerate(units)
    )
    # The units go where write_call puts a call's arguments.
    marker = write_call(spec_tools, "f", {"SLOT": "SLOT"})
    slot = _unit(arguments, "SLOT", _slot_written(arguments), "string")
    assert marker.count(slot) == 1, (slug, marker)
    return output(module(slug), wrap(spec_tools, marker.replace(slot, text)))


def _slot_written(arguments):
    """How write_call writes the string "SLOT" (tests/test_tool_parsing.py's _units)."""
    if arguments.get("string_open"):
        return arguments["string_open"] + "SLOT" + arguments["string_close"]
    if arguments["value_suffix"] == "":
        return repr("SLOT") if arguments["literal"] == "python" else json.dumps("SLOT")
    return "SLOT"


def arguments_of(slug, text, tools=None):
    message = read(module(slug), text, tools=tools, enable_thinking=False)
    assert len(message["tool_calls"]) == 1, (slug, text, message)
    return json.loads(message["tool_calls"][0]["function"]["arguments"])


def _tool(properties, defs=None):
    parameters = {"type": "object", "properties": properties}
    if defs:
        parameters["$defs"] = defs
    return [{"type": "function", "function": {"name": "f", "parameters": parameters}}]


# -- a string the schema declares stays the string the model wrote ------------------

STRING_SCHEMAS = {
    "type list": ({"zip": {"type": ["string", "null"]}}, None),
    "anyOf with null": ({"zip": {"anyOf": [{"type": "string"}, {"type": "null"}]}}, None),
    "oneOf": ({"zip": {"oneOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]}}, None),
    "enum": ({"zip": {"enum": ["10001", "10002"]}}, None),
    "const": ({"zip": {"const": "10001"}}, None),
    "$ref": ({"zip": {"$ref": "#/$defs/zip"}}, {"zip": {"type": "string"}}),
    "$ref in anyOf": (
        {"zip": {"anyOf": [{"$ref": "#/$defs/zip"}, {"type": "null"}]}},
        {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
    ),
    # issue 32, item 6: a $ref to an anchor pointed to the whole parameters object
    "$ref to an $anchor": ({"zip": {"$ref": "#zip"}}, {"zip": {"$anchor": "zip", "type": "string"}}),
    "$ref to a draft 7 $id": ({"zip": {"$ref": "#zip"}}, {"code": {"$id": "#zip", "type": "string"}}),
    "$ref percent-encoded": (
        {"zip": {"$ref": "#/$defs/zip%20code~1us"}}, {"zip code/us": {"type": "string"}}
    ),
    # issue 32, item 11: an anyOf that holds itself adds no type to its others
    "anyOf that holds itself": (
        {"zip": {"$ref": "#/$defs/z"}},
        {"z": {"anyOf": [{"$ref": "#/$defs/z"}, {"type": "string"}]}},
    ),
    "nullable": ({"zip": {"type": "string", "nullable": True}}, None),
    "allOf of one": ({"zip": {"allOf": [{"type": "string"}]}}, None),
    # where a number is admitted too, the string wins: docs/reliability.md
    "string or integer": ({"zip": {"type": ["integer", "string"]}}, None),
    "anyOf string, number": ({"zip": {"anyOf": [{"type": "number"}, {"type": "string"}]}}, None),
    "enum of both": ({"zip": {"enum": [10001, "10001"]}}, None),
}


@pytest.mark.parametrize("slug", TAGGED)
@pytest.mark.parametrize("schema", list(STRING_SCHEMAS))
def test_a_string_the_schema_admits_stays_as_written(slug, schema):
    properties, defs = STRING_SCHEMAS[schema]
    text = tagged_call(slug, [("zip", "10001"), ("phone", "0612345678")])
    properties = {**properties, "phone": properties["zip"]}
    found = arguments_of(slug, text, _tool(properties, defs))
    assert found == {"zip": "10001", "phone": "0612345678"}


@pytest.mark.parametrize("slug", TAGGED)
def test_a_schema_without_strings_still_reads_numbers(slug):
    """The fix does not turn every value into text: a number the schema wants, and
    null, true or an object where the schema admits them beside a string, are values."""
    text = tagged_call(
        slug, [("count", "10001"), ("note", "null"), ("flag", "true"), ("id", "10001")]
    )
    properties = {
        "count": {"type": "integer"},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "flag": {"type": ["string", "boolean"]},
        "id": {"type": ["string", "null"]},
    }
    found = arguments_of(slug, text, _tool(properties))
    assert found == {"count": 10001, "note": None, "flag": True, "id": "10001"}


@pytest.mark.parametrize("slug", TAGGED)
def test_a_word_the_schema_does_not_admit_beside_a_string_is_text(slug):
    text = tagged_call(slug, [("a", "null"), ("b", "true")])
    properties = {"a": {"type": ["string", "integer"]}, "b": {"enum": ["true", "no"]}}
    assert arguments_of(slug, text, _tool(properties)) == {"a": "null", "b": "true"}


# -- the model's own word for a string ----------------------------------------------

ATTRIBUTED = [slug for slug in TAGGED if rt.load_spec(slug)["tools"]["arguments"].get("string_attribute")]


def test_the_formats_that_name_a_value_s_type_record_their_word_for_a_string():
    words = {slug: rt.load_spec(slug)["tools"]["arguments"]["string_attribute"] for slug in ATTRIBUTED}
    assert words == {
        "deepseek_ai_deepseek_v3_2": "true",
        "deepseek_ai_deepseek_v4": "true",
        "deepseek_ai_deepseek_v4_flash_0731": "true",
        "kimi_k3": "string",
    }


@pytest.mark.parametrize("slug", ATTRIBUTED)
def test_the_template_s_string_comes_back_a_string_without_tools(slug):
    """The template as the oracle: it marks the string "10001" as a string and the
    number as none; without tools to say so, the reader must take its word."""
    kind = rt.Kind(
        "typed", "", calls=(("save_record", {"text": "10001", "count": 12345.5}),)
    )
    case = rt.build_case(slug, kind) or rt.build_case(
        slug, rt.Kind("typed", "", enable_thinking=False, calls=kind.calls)
    )
    assert case is not None
    message = read(module(slug), case.text, enable_thinking=case.kind.enable_thinking)
    (call,) = message["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"text": "10001", "count": 12345.5}


@pytest.mark.parametrize("slug", ATTRIBUTED)
def test_the_model_s_word_for_a_string_is_obeyed(slug):
    word = rt.load_spec(slug)["tools"]["arguments"]["string_attribute"]
    said = tagged_call(slug, [("zip", "10001")], attribute=word)
    # where the schema says nothing, the model's word
    assert arguments_of(slug, said) == {"zip": "10001"}
    assert arguments_of(slug, said, _tool({"zip": {}})) == {"zip": "10001"}
    # where it admits no string, the schema's (vLLM's tests of DeepSeek V3.2 have
    # the model mark an integer and an object as strings)
    assert arguments_of(slug, said, _tool({"zip": {"type": "integer"}})) == {"zip": 10001}
    # another word: the schema decides, as for every tagged value
    other = tagged_call(slug, [("zip", "10001")], attribute="number")
    assert arguments_of(slug, other) == {"zip": 10001}
    assert arguments_of(slug, other, _tool({"zip": {"type": "string"}})) == {"zip": "10001"}


# -- numbers that would not be finite -------------------------------------------------

NOT_FINITE = ["1e999", "-1e999", "NaN", "Infinity", "-Infinity", "2.5E+400"]
SENTINEL = 12345.5


def _writes_json(slug):
    tools = module(slug).SPEC["tools"]
    return tools["format"] == "json" or tools["arguments"]["encoding"] == "json"


def _marked(slug):
    """Whether a marker opens the format's calls."""
    tools = module(slug).SPEC["tools"]
    return bool((tools.get("section") or {}).get("start") or tools["call"]["start"].strip())


def _with_number(slug, written):
    """A call to ``f`` whose argument ``n`` is the number ``written``: the call as
    write_call writes it with a number there, that number replaced."""
    tools = module(slug).SPEC["tools"]
    python = (tools.get("arguments") or {}).get("literal") == "python"
    text = output(module(slug), wrap(tools, write_call(tools, "f", {"n": SENTINEL}, python=python)))
    assert text.count(str(SENTINEL)) == 1, text
    return text.replace(str(SENTINEL), written)


@pytest.mark.parametrize("slug", tool_slugs())
@pytest.mark.parametrize("written", NOT_FINITE)
def test_a_number_that_would_not_be_finite_never_reaches_arguments(slug, written):
    parser = module(slug)
    text = _with_number(slug, written)
    assert parser.parse(_with_number(slug, "1.5"), enable_thinking=False)["tool_calls"]
    for tools in (None, _tool({"n": {"type": "number"}})):
        message = read(parser, text, tools=tools, enable_thinking=False)
        if _writes_json(slug):
            # the JSON the model wrote is no JSON a client can read: no call
            assert message["tool_calls"] == [], message
            kept = message["content"] + (message["reasoning_content"] or "")
            assert written in kept
            if _marked(slug):  # (unmarked, an output that is no call is content)
                with pytest.raises(ValueError):
                    parser.parse(text, tools=tools, enable_thinking=False, strict=True)
        else:
            (call,) = message["tool_calls"]
            assert json.loads(call["function"]["arguments"]) == {"n": written}


@pytest.mark.parametrize("slug", TAGGED)
def test_a_number_that_would_not_be_finite_inside_a_tagged_value_keeps_its_text(slug):
    text = tagged_call(slug, [("a", "[1, 1e999]"), ("b", "2e308")])
    assert arguments_of(slug, text) == {"a": "[1, 1e999]", "b": "2e308"}
