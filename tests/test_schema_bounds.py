"""The bounds of a tool's JSON schema in the grammars written from it
(compiler/runtime/schema_gbnf.py; the Lark integer in compiler/runtime/lark.py):
``minLength``/``maxLength``, ``minItems``/``maxItems``, and an integer's
``minimum``/``maximum``/``exclusiveMinimum``/``exclusiveMaximum``, checked by
llguidance (one token per byte) against jsonschema and brute force.

First the integer-range construction against every integer in [-1100, 1100]; then
strings and arrays exhaustively on a JSON format and a Python-literal one, values
read back by ``parse`` and judged by jsonschema; then, on formats of each argument
syntax, a call rendered by the template inside the bounds and outside them, under
``tool_call_grammar`` (GBNF) and ``lark_grammar``. (xgrammar's structural tag on the
same calls: tests/exports/test_schema_bounds_tag.py.)
"""

from __future__ import annotations

import functools
import itertools
import json

import pytest

pytest.importorskip("llguidance")

import jsonschema  # noqa: E402

from compiler.runtime import schema_gbnf  # noqa: E402
from compiler.runtime.schema_gbnf import _integer_pattern, _integer_range  # noqa: E402
from tests import roundtrip as rt  # noqa: E402
from tests.test_grammar import accepts, why_rejected  # noqa: E402
from tests.test_lark import accepts as lark_accepts  # noqa: E402
from tests.test_lark import why_rejected as lark_why_rejected  # noqa: E402
from tests.test_tool_choice_gbnf import _call_kind, _json_call, _output, _tool  # noqa: E402
from tests.test_tool_grammar import trigger_start  # noqa: E402

# ---------------------------------------------------------------------------
# integers in a range

BOUNDS = [None, -1000, -999, -101, -100, -99, -10, -9, -1, 0, 1, 9, 10, 11, 99, 100, 101]
BOUNDS += [123, 990, 999, 1000]
NOT_JSON = ["-0", "00", "01", "007", "-01", "-", "", "+1", "1.0"]


def _in_range(number, low, high):
    return (low is None or number >= low) and (high is None or number <= high)


def test_integer_regex_admits_exactly_the_range():
    """Every pair of bounds, every integer in [-1100, 1100]: as a (Python) regular
    expression, the same construction as the GBNF's."""
    import re

    for low, high in itertools.product(BOUNDS, BOUNDS):
        pattern = _integer_pattern(low, high, regex=True)
        if low is not None and high is not None and low > high:
            assert pattern is None
            continue
        matcher = re.compile(pattern)
        for number in range(-1100, 1101):
            found = matcher.fullmatch(str(number)) is not None
            assert found == _in_range(number, low, high), (low, high, number, pattern)
        assert not any(matcher.fullmatch(text) for text in NOT_JSON), (low, high)


@pytest.mark.parametrize(
    "low,high",
    [(None, None), (-1000, 1000), (-99, -10), (7, 880), (0, 0), (None, -101), (101, None)],
)
def test_integer_gbnf_admits_exactly_the_range_in_llguidance(low, high):
    # (a rule of its own, as the grammars write it: llguidance reads it as one lexeme)
    if low is None and high is None:
        grammar = "root ::= n\nn ::= " + schema_gbnf.JSON_RULES["json-integer"] + "\n"
    else:
        grammar = "root ::= n\nn ::= " + _integer_pattern(low, high) + "\n"
    for number in range(-1100, 1101):
        assert accepts(grammar, str(number)) == _in_range(number, low, high), number
    for text in NOT_JSON:
        if text != "-0" or (low, high) != (None, None):  # (JSON's own rule takes -0)
            assert not accepts(grammar, text), text


@pytest.mark.parametrize("low,high", [(-1000, 1000), (-99, -10), (101, None)])
def test_integer_regex_admits_exactly_the_range_in_llguidance_lark(low, high):
    grammar = "start: /%s/\n" % _integer_pattern(low, high, regex=True)
    for number in range(-1100, 1101, 7):
        assert lark_accepts(grammar, str(number)) == _in_range(number, low, high), number


@pytest.mark.parametrize(
    "schema,expected",
    [
        ({"minimum": 3, "maximum": 9}, (3, 9)),
        ({"exclusiveMinimum": 3, "exclusiveMaximum": 9}, (4, 8)),
        ({"minimum": 2.5, "maximum": 9.5}, (3, 9)),
        ({"exclusiveMinimum": 2.5, "exclusiveMaximum": -1.5}, (3, -2)),
        ({"minimum": 3, "exclusiveMinimum": 5, "maximum": 9, "exclusiveMaximum": 7}, (6, 6)),
        ({"minimum": 3, "exclusiveMinimum": True}, (4, None)),  # draft 4
        ({"minimum": True, "maximum": "9"}, (None, None)),  # not numbers
        ({"minimum": 1e300}, (None, None)),  # too long a bound: not enforced
        ({"minimum": float("nan"), "maximum": float("inf")}, (None, None)),
    ],
)
def test_integer_bounds_read(schema, expected):
    assert _integer_range(schema) == expected


def test_integer_rule_is_linear_in_the_bound_s_digits():
    sizes = [len(_integer_pattern(-(10**k) + 7, 10**k - 3)) for k in (10, 20, 40, 80)]
    assert all(later <= 2.3 * earlier for earlier, later in itertools.pairwise(sizes)), sizes


# ---------------------------------------------------------------------------
# strings and arrays, exhaustively: a JSON format and a Python-literal one

JSON_SLUG = "qwen_qwen2_5_7b_instruct"  # as tests/test_tool_choice_gbnf.py's
PYTHON_SLUG = "lfm2_5_8b_a1b"  # <|tool_call_start|>[f(key=value)]<|tool_call_end|>


def _json_accepts(schema, value_text: str) -> bool:
    tools = [_tool({"type": "object", "properties": {"v": schema}, "required": ["v"]})]
    grammar = rt.module(JSON_SLUG).tool_call_grammar(tools=tools)
    return accepts(grammar, _json_call('{"v": %s}' % value_text), JSON_SLUG)


def _python_call(value_text: str) -> str:
    return "<|tool_call_start|>[f(v=%s)]<|tool_call_end|>" % value_text


def _python_accepts(schema, value_text: str) -> bool:
    tools = [_tool({"type": "object", "properties": {"v": schema}, "required": ["v"]})]
    grammar = rt.module(PYTHON_SLUG).tool_call_grammar(tools=tools)
    return accepts(grammar, _python_call(value_text), PYTHON_SLUG)


def _python_read(value_text: str, schema):
    tools = [_tool({"type": "object", "properties": {"v": schema}})]
    message = rt.module(PYTHON_SLUG).parse(_python_call(value_text), tools=tools)
    (call,) = message["tool_calls"]
    return json.loads(call["function"]["arguments"])["v"]


STRING = {"type": "string", "minLength": 2, "maxLength": 4}


def test_json_strings_are_counted_as_json_schema_counts():
    """An escape is one character; every writing of a length outside the bounds is
    refused, every one inside accepted."""
    pieces = ["a", "é", "\\n", '\\"', "\\u00e9", "\\/", "🙂"]
    for size in range(0, 6):
        for chosen in itertools.product(pieces[: 7 if size < 4 else 3], repeat=size):
            written = '"' + "".join(chosen) + '"'
            valid = jsonschema.Draft202012Validator(STRING).is_valid(json.loads(written))
            assert _json_accepts(STRING, written) == valid, written


def test_python_strings_are_counted_as_json_schema_counts():
    """Either quote, Python's escapes that are one character counted as one; a
    writing the grammar takes is read back by ``parse`` as a string within bounds,
    and every writing of plain characters and those escapes within bounds is taken."""
    pieces = ["a", "é", "\\n", "\\'", '\\"', "\\\\", '"', "'"]
    for quote in "'\"":
        for size in range(0, 6):
            for chosen in itertools.product(pieces[: 8 if size < 4 else 2], repeat=size):
                if quote in chosen:
                    continue  # (a quote of its own left unescaped closes the string)
                written = quote + "".join(chosen) + quote
                value = _python_read(written, {"type": "string"})
                valid = jsonschema.Draft202012Validator(STRING).is_valid(value)
                assert _python_accepts(STRING, written) == valid, (written, value)
    # an escape Python does not know is not counted (two characters, or one?)
    assert _python_accepts({"type": "string"}, "'a\\qb'")
    assert not _python_accepts(STRING, "'a\\qb'")


ARRAYS = [
    {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
    {"type": "array", "items": {"type": "integer"}, "maxItems": 0},
    {"type": "array", "items": {"type": "integer"}, "minItems": 2},
    {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "minItems": 1},
    {
        "type": "array",
        "prefixItems": [{"type": "integer"}, {"type": "string"}],
        "items": {"type": "boolean"},
        "minItems": 3,
        "maxItems": 4,
    },
    {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "maxItems": 1},
    {"type": "array", "prefixItems": [{"type": "integer"}], "items": False, "minItems": 2},
    {"type": "array", "minItems": 3, "maxItems": 2},
]
ITEMS = ["7", '"s"', "true"]
PYTHON_ITEMS = ["7", "'s'", "True"]


@pytest.mark.parametrize("schema", ARRAYS, ids=[json.dumps(a) for a in ARRAYS])
def test_arrays_hold_their_item_counts(schema):
    """Every array of up to five items drawn from an integer, a string and a boolean,
    JSON and Python: taken iff jsonschema takes it."""
    validator = jsonschema.Draft202012Validator(schema)
    for size in range(0, 6):
        for chosen in itertools.product(range(3), repeat=size):
            value = [json.loads(ITEMS[at]) for at in chosen]
            valid = validator.is_valid(value)
            written = "[" + ", ".join(ITEMS[at] for at in chosen) + "]"
            assert _json_accepts(schema, written) == valid, written
            if size <= 3:
                written = "[" + ", ".join(PYTHON_ITEMS[at] for at in chosen) + "]"
                assert _python_accepts(schema, written) == valid, written


def test_a_bound_above_the_largest_count_is_not_enforced():
    """A huge bound gives a small grammar: above ``_LARGEST_COUNT`` the bound is left
    out (the grammar is the unbounded one); at it, enforced, and llguidance takes it."""
    module = rt.module(JSON_SLUG)

    def grammar(schema):
        tool = _tool({"type": "object", "properties": {"v": schema}, "required": ["v"]})
        return module.tool_call_grammar(tools=[tool])

    largest = schema_gbnf._LARGEST_COUNT
    free = grammar({"type": "string"})
    for huge in ({"maxLength": 10**6}, {"minLength": 10**6}, {"maxItems": 10**9}):
        schema = {"type": "array" if "maxItems" in huge else "string", **huge}
        plain = grammar({"type": schema["type"]})
        assert grammar(schema) == plain and len(plain) < 2 * len(free)
    bounded = grammar({"type": "string", "maxLength": largest})
    assert len(bounded) < len(free) + 200
    assert accepts(bounded, _json_call('{"v": "%s"}' % ("a" * largest)), JSON_SLUG)
    assert not accepts(bounded, _json_call('{"v": "%s"}' % ("a" * (largest + 1))), JSON_SLUG)


# ---------------------------------------------------------------------------
# a call the template renders, on formats of each argument syntax

BOOK = {
    "type": "function",
    "function": {
        "name": "book",
        "description": "Book seats for a party.",
        "parameters": {
            "type": "object",
            "properties": {
                "who": {"type": "string", "minLength": 2, "maxLength": 8},
                "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
                "seats": {"type": "integer", "minimum": 1, "maximum": 120},
            },
            "required": ["who", "tags", "seats"],
        },
    },
}
GOOD = {"who": "Ada", "tags": ["x"], "seats": 37}
# what breaks the schema → the arguments that break it (None: GOOD's text, its 37 as 037)
BAD = {
    "string too long": {"who": "Adalovelace", "tags": ["x"], "seats": 37},
    "string too short": {"who": "A", "tags": ["x"], "seats": 37},
    "too many items": {"who": "Ada", "tags": ["x", "y", "z"], "seats": 37},
    "too few items": {"who": "Ada", "tags": [], "seats": 37},
    "integer too large": {"who": "Ada", "tags": ["x"], "seats": 121},
    "integer too small": {"who": "Ada", "tags": ["x"], "seats": 0},
    "leading zero": None,
}
INTEGER = {"integer too large", "integer too small", "leading zero"}
ARRAY = {"too many items", "too few items"}
STRINGS = {"string too long", "string too short"}
LONG = {"string too long"}
# Per format and export, what is refused. Strict: a breach that starts being refused
# joins its set (docs/exports.md says what each leaves unbounded, and why).
REFUSED = {
    # a JSON object: every bound, in the GBNF and in Lark's %json
    "nousresearch_hermes_2_pro_llama_3_8b_tool_use": {
        "gbnf": INTEGER | ARRAY | STRINGS,
        "lark": INTEGER | ARRAY | STRINGS,
    },
    "qwen_qwen3_0_6b": {"gbnf": INTEGER | ARRAY | STRINGS, "lark": INTEGER | ARRAY | STRINGS},
    # key/value units: a string is the text up to </parameter>, its pieces counted by
    # maxLength (a piece one or more characters: no minLength)
    "qwen3_coder": {"gbnf": INTEGER | ARRAY | LONG, "lark": INTEGER | ARRAY | LONG},
    # Python literals: Lark types an array as any value (the GBNF's rules reach it
    # with s10-live2), and a string as the quoted text
    "lfm2_5_8b_a1b": {"gbnf": INTEGER | ARRAY | STRINGS, "lark": INTEGER},
    # its own syntax: a string is the text up to <|"|>, its pieces counted; an array
    # typed by the GBNF's rules for it, in Lark too
    "google_gemma_4_31b_it": {"gbnf": INTEGER | ARRAY | LONG, "lark": INTEGER | ARRAY | LONG},
}


@pytest.fixture
def book(monkeypatch):
    monkeypatch.setitem(rt.TOOLS, "book", BOOK)


@functools.lru_cache(maxsize=None)
def _rendered(slug: str, what: str | None) -> str:
    """The template's call of ``book`` (GOOD's, or one that breaks the schema)."""
    if what == "leading zero":
        text = _rendered(slug, None)
        assert text.count("37") == 1, text
        return text.replace("37", "037")
    text = _output(slug, _call_kind("book", GOOD if what is None else BAD[what]))
    assert text is not None, (slug, what)
    return text


def _exports(slug: str, tool=BOOK):
    """export → (whether it takes the text, why not), the calls' grammars of ``tool``."""
    module = rt.module(slug)
    gbnf = module.tool_call_grammar(tools=[tool], parallel_tool_calls=False)
    lark = module.lark_grammar(tools=[tool])

    def lazy(text):
        start = trigger_start(module.TRIGGERS, text)
        assert start is not None, text
        return text[start:]

    return {
        "gbnf": (
            lambda text: accepts(gbnf, lazy(text), slug),
            lambda text: why_rejected(gbnf, lazy(text)),
        ),
        "lark": (lambda text: lark_accepts(lark, text, slug), lambda text: lark_why_rejected(lark, text)),
    }


@pytest.mark.parametrize("slug", sorted(REFUSED))
def test_a_rendered_call_within_bounds_is_taken_and_one_outside_refused(slug, book):
    good = _rendered(slug, None)
    tools = [BOOK]
    message = rt.module(slug).parse(good, tools=tools)
    assert [json.loads(c["function"]["arguments"]) for c in message["tool_calls"]] == [GOOD]
    for export, (takes, why) in _exports(slug).items():
        assert takes(good), (export, why(good))
        for what in BAD:
            text = _rendered(slug, what)
            refused = what in REFUSED[slug][export]
            verdict = "taken, though out of bounds" if refused else "refused now: add it to REFUSED"
            assert takes(text) != refused, (export, what, verdict)


def test_an_unbounded_string_keeps_the_raw_quoted_text():
    """Only a bound drops the raw quoted text LFM2.5's template writes: a nullable
    string, or one whose bound is not enforced, still takes it."""
    for schema in (
        {"type": "string", "nullable": True},
        {"type": "string", "maxLength": 10**6},
    ):
        assert _python_accepts(schema, "'a\tb'"), schema  # (a tab: no Python literal)
    assert not _python_accepts({"type": "string", "maxLength": 9}, "'a\tb'")


# ---------------------------------------------------------------------------
# a string that is the format's own text up to a closer (a unit's value, Gemma 4's
# <|"|>…<|"|>): counted exactly, as the reader reads it

NOTE = {
    "type": "function",
    "function": {
        "name": "note",
        "description": "Keep a note.",
        "parameters": {
            "type": "object",
            "properties": {"text": {"type": "string", "maxLength": 8}},
            "required": ["text"],
        },
    },
}
# Values of the bound's length, plain and holding what begins a closer or a marker
# (MiniCPM5's template writes those with "<" or a line break between CDATA marks).
WITHIN = ["abcdefgh", "<<<<<<<<", "</</</</", "a\nb\nc\nd\n", "]<]<|>|>", "Ada's <b", "  ab  \n"]
# One character more, the same kinds.
BEYOND = ["abcdefghi", "<<<<<<<<<", "a\nb\nc\nd\ne\n", " Ada's <b"]


def _raw_slugs() -> list[str]:
    """The corpus formats that write a string argument as their own text up to a
    closer: a unit's value up to its suffix, or the text between string marks that
    hold no escapes (not LFM2.5's Python strings, counted as Python's)."""
    return [
        slug
        for slug in rt.slugs()
        if getattr(rt.module(slug), "SUFFIXED_VALUES", False)
        or getattr(rt.module(slug), "RAW_STRINGS", False)
    ]


@pytest.fixture
def note(monkeypatch):
    monkeypatch.setitem(rt.TOOLS, "note", NOTE)


def _note(slug: str, value: str) -> str | None:
    """The template's call of ``note`` with ``value``; None where it writes none that
    parse reads back."""
    return _output(slug, _call_kind("note", {"text": value}))


@pytest.mark.parametrize("slug", _raw_slugs())
def test_a_raw_string_is_held_to_its_max_length(slug, note):
    """The template's calls with values of maxLength's characters are taken by the
    GBNF and Lark, with one more refused (they took any text: a model looped there);
    without the bound, taken."""
    within = [text for text in map(functools.partial(_note, slug), WITHIN) if text]
    beyond = [text for text in map(functools.partial(_note, slug), BEYOND) if text]
    assert len(within) >= 4 and len(beyond) >= 2, "the template writes too few notes"
    free = json.loads(json.dumps(NOTE))
    del free["function"]["parameters"]["properties"]["text"]["maxLength"]
    for export, (takes, why) in _exports(slug, NOTE).items():
        for text in within:
            assert takes(text), (export, why(text))
        for text in beyond:
            assert not takes(text), (export, "taken, over maxLength", text)
    for export, (takes, why) in _exports(slug, free).items():
        for text in beyond:
            assert takes(text), (export, why(text))


def test_a_raw_string_never_holds_the_next_unit_s_key():
    """MiniCPM5's reader ends a value where the next unit's key mark is written (its
    suffix then missing): a counted value holding one is refused, as parse reads it
    cut short there (the live run: ``<param name="guests" …`` inside a value, and no
    call read)."""
    slug = "openbmb_minicpm5_1b"
    long = json.loads(json.dumps(NOTE))
    long["function"]["parameters"]["properties"]["text"]["maxLength"] = 40
    text = '<function name="note"><param name="text">a <param name="b"></param></function>'
    (call,) = rt.module(slug).parse(text, tools=[long])["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"text": "a ", "b": ""}
    for export, (takes, _) in _exports(slug, long).items():
        assert not takes(text), export
        assert takes(text.replace('<param name="b">', "<param b>")), export


@pytest.mark.parametrize(
    "slug",
    ["qwen3_coder", "deepseek_ai_deepseek_v3_2", "openbmb_minicpm5_1b", "minimax_m3",
     "google_gemma_4_31b_it", "kimi_k3"],
)
def test_a_raw_string_taken_is_one_parse_reads_within_bounds(slug, note):
    """Values drawn from the characters of the format's closers and key mark (and
    holding them, whole or cut), written where the template writes a note's value:
    the GBNF and Lark take the same ones, and parse reads each taken as one call
    whose text is within maxLength (the grammars count the value as the reader reads
    it); one parse reads as written within bounds is taken, but where the template
    would write it between MiniCPM5's CDATA marks."""
    import random

    module = rt.module(slug)
    frame = _note(slug, "abcdefgh")
    assert frame is not None and frame.count("abcdefgh") == 1
    most = 16  # (room for a key mark)
    tool = json.loads(json.dumps(NOTE))
    tool["function"]["parameters"]["properties"]["text"]["maxLength"] = most
    names = ("ARG_VALUE_SUFFIX", "ARG_KEY_PREFIX", "ARG_STRING_CLOSE", "VERBATIM_OPEN",
             "VERBATIM_CLOSE")  # fmt: skip
    words = [getattr(module, name, "").replace("{key}", "text") for name in names]
    words = [word for word in words if word]
    alphabet = sorted(set("".join(words) + "ax \n"))
    chooser = random.Random(33)
    exports = _exports(slug, tool)
    taken_count = 0
    for _ in range(200):
        size = chooser.randint(0, 20)
        value = "".join(chooser.choice(alphabet) for _ in range(size))
        if chooser.random() < 0.4:  # a closer or mark, or its beginning, in it
            word = chooser.choice(words)
            word = word[: chooser.randint(1, len(word))]
            value = value[: size // 2] + word + value[size // 2 :][: chooser.randint(0, 3)]
        text = frame.replace("abcdefgh", value)
        gbnf, lark = (takes(text) for takes, _ in exports.values())
        assert gbnf == lark, (value, gbnf, lark)
        message = module.parse(text, tools=[tool])
        read = [json.loads(c["function"]["arguments"]) for c in message["tool_calls"]]
        if gbnf:
            taken_count += 1
            assert len(read) == 1 and set(read[0]) == {"text"}, (value, read)
            assert len(read[0]["text"]) <= most, (value, read)
        elif read == [{"text": value}] and len(value) <= most and not value[:1].isspace():
            # refused, though parse reads it as written: only where the template
            # would not write it so (a verbatim mark the reader needs)
            assert slug == "openbmb_minicpm5_1b" and ("<" in value or "\n" in value), value
    assert taken_count >= 20, taken_count
