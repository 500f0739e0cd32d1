"""compiler/runtime/values.py and calls.py: values written in a syntax of the
template's own (Gemma 4's ``{key:<|"|>text<|"|>,n:[1,None]}``), and strings between
quotes that the template escapes (``name(key="say \\"hi\\"")``), with a format's
constants patched onto the modules that read them."""

from __future__ import annotations

import itertools
import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.runtime import calls as C
from compiler.runtime import values as V

# Gemma 4's calls and its value syntax, as its spec gives them.
GEMMA = dict(
    CALL_START="<|tool_call>call:",
    CALL_PARTS=(("name", "{", ()), ("arguments", "}<tool_call|>", ())),
    TRIGGER="<|tool_call>call:",
    _SEEK="<|tool_call>",
    END_AFTER_CALLS=["<|tool_response>"],
    _TURN_ENDS=["<turn|>"],
    ARG_KEY_END=":",
    ARG_SEPARATOR=",",
    ARG_STRING_OPEN='<|"|>',
    ARG_STRING_CLOSE='<|"|>',
    RAW_STRINGS=True,
    LITERAL="json",
    OWN_VALUES=True,
    OWN_OBJECT_OPEN="{",
    OWN_OBJECT_CLOSE="}",
    OWN_KEY_PREFIX="",
    OWN_KEY_END=":",
    OWN_MEMBER_SEPARATOR=",",
    OWN_ARRAY_OPEN="[",
    OWN_ARRAY_CLOSE="]",
    OWN_ITEM_SEPARATOR=",",
    OWN_WORDS={"None": None, "true": True, "false": False},
)
Q = '<|"|>'


def _patch(monkeypatch, constants):
    for module in (V, C):
        for name, value in constants.items():
            if hasattr(module, name):
                monkeypatch.setattr(module, name, value)
    monkeypatch.setattr(C, "_read_call", C._read_tagged_call)
    # (the table binding makes from them)
    monkeypatch.setattr(C, "_TRAILING_MARKERS", C._trailing_markers())


@pytest.fixture
def gemma(monkeypatch):
    _patch(monkeypatch, GEMMA)


def write(value, sort=True):
    """``value`` as Gemma 4's format_argument macro writes it."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, str):
        return Q + value + Q
    if isinstance(value, list):
        return "[" + ",".join(write(item, sort) for item in value) + "]"
    items = sorted(value.items()) if sort else value.items()
    return "{" + ",".join(f"{key}:{write(item, sort)}" for key, item in items) + "}"


def _pieces_end(text, cuts):
    """The end _OwnEnd finds reading ``text`` cut at ``cuts`` as the stream feeds it
    (what it has not read begins the next piece), as an index into the whole text."""
    scan = V._OwnEnd()
    pending, read = "", 0
    bounds = [0, *cuts, len(text)]
    for number, (start, stop) in enumerate(itertools.pairwise(bounds)):
        final = number == len(bounds) - 2
        pending += text[start:stop]
        end = scan.scan(pending, 0, final)
        if end is not None:
            return end if end < 0 else read + end
        read += scan.safe
        pending = pending[scan.safe :]
    raise AssertionError("the last piece decides")


TRICKY = {
    "args": ["--name", "two words", 'quote"d', ""],
    "code": "print(f\"{a}\")\nreturn {'ok': True, \"p\": \"C:\\\\temp\"}, [1, 2]",
    "max_lines": None,
    "options": {
        "env": {"GREETING": "Grüß Gott", "PATH": "/usr/bin:/bin"},
        "ports": [8080, -1, 0],
        "ratio": 0.25,
        "timeout": 30,
        "verbose": True,
        "deep": [[[]], {}, [{"x": [None, False, 1e-05]}]],
    },
    "sandbox": False,
    "stdin": 'She said "hi" \\ then, {left}: [x]',
}


# --- where a value ends --------------------------------------------------------------


@pytest.mark.parametrize(
    "text,end",
    [
        ("None,x:1", 4),
        ("-1.5e+3}<tool_call|>", 7),
        ("true", 4),
        (Q + "a,b}" + Q + ",", 14),
        ("[1,[2,{a:" + Q + "]}" + Q + "}]],b", 24),
        ("{a:{b:[]}}}<tool_call|>", 10),
        ("[1,2}", -1),  # closed by another kind
        ("{a:1", -1),  # never closed
        ("", -1),
        (",x", -1),
        ('"json"', -1),  # not this syntax's string
    ],
)
def test_own_end(gemma, text, end):
    assert V._OwnEnd().scan(text) == end


def test_own_end_in_pieces(gemma):
    """At every cut, and in random pieces: the end found whole, however the marks
    (five characters) are split."""
    text = write(TRICKY) + ",more:1}<tool_call|>"
    whole = V._OwnEnd().scan(text)
    assert whole == len(write(TRICKY))
    for cut in range(1, len(text)):
        assert _pieces_end(text, [cut]) == whole, cut
    rng = random.Random(13)
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(text)), rng.randint(2, 40)))
        assert _pieces_end(text, cuts) == whole, cuts


def test_own_end_holds_back_a_mark_cut_in_two(gemma):
    scan = V._OwnEnd()
    assert scan.scan("[1,<|", 0, False) is None
    # no more than a mark's length less one comes again with the next piece
    assert 1 <= scan.safe <= 3
    rest = "[1,<|"[scan.safe :]
    assert scan.scan(rest + '"|>a<|"|>]', 0, False) == len(rest) + 10


# --- what a value is -----------------------------------------------------------------


def test_own_typed_reads_back_what_the_macro_writes(gemma):
    for key, value in TRICKY.items():
        assert V._own_typed(write(value), None) == value, key
        assert V._own_typed(write(value, sort=False), None) == value, key


@pytest.mark.parametrize(
    "text,kind,value",
    [
        ("None", None, None),
        ("None", "string", "None"),  # the schema says string: the text as written
        ("null", None, None),  # a JSON word at the top: read as before
        ("7", "string", "7"),
        ("7", {"integer"}, 7),
        ("hello", None, "hello"),
        ("{a:1}", "string", "{a:1}"),
        ("{ a : 1 , b : [ 2 , None ] }", None, {"a": 1, "b": [2, None]}),
        ("{}", {"object"}, {}),
        # JSON's and Python's words inside a value, where the template writes its own
        # (issue 26: a nested null the model writes as JSON does left the call as text)
        ("[null]", None, [None]),
        ("{a:true,b:False,c:None}", None, {"a": True, "b": False, "c": None}),
    ],
)
def test_own_typed(gemma, text, kind, value):
    assert V._own_typed(text, kind) == value


@pytest.mark.parametrize(
    "text", ["[nil]", "[hello]", "{a}", "{a:1,}", "[1 2]", "[1.]", "{a:1}x", "{a:1,a:2}"]
)
def test_own_typed_refuses_what_the_syntax_does_not_write(gemma, text):
    with pytest.raises(ValueError):
        V._own_typed(text, None)


def test_own_typed_too_deep_is_no_value(gemma):
    with pytest.raises(ValueError):
        V._own_typed("[" * 5000 + "]" * 5000, None)


_keys = st.text(alphabet="abXY_09-é", min_size=1, max_size=4)
_strings = st.text(alphabet='ab "\'\\\n{}[]:,<|>é', max_size=8).filter(lambda s: Q not in s)
_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**9), 10**9)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _strings,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(value=_values, seed=st.integers(0, 10**6))
def test_own_values_round_trip(value, seed):
    with pytest.MonkeyPatch.context() as monkeypatch:
        _patch(monkeypatch, GEMMA)
        text = write(value)
        assert V._own_typed(text, None) == value
        rng = random.Random(seed)
        tail = text + ",k:1}"
        cuts = sorted(rng.sample(range(1, len(tail)), min(len(tail) - 1, rng.randint(1, 8))))
        assert _pieces_end(tail, cuts) == len(text)


# --- a whole call --------------------------------------------------------------------


def test_gemma_call_with_nested_arguments(gemma):
    units = ",".join(f"{key}:{write(value)}" for key, value in sorted(TRICKY.items()))
    text = f"<|tool_call>call:run{{{units}}}<tool_call|><|tool_response>"
    before, calls, after = C._find_calls(text, {}, False)
    assert (before, after) == ("", "")
    assert [call["function"]["name"] for call in calls] == ["run"]
    assert json.loads(calls[0]["function"]["arguments"]) == TRICKY


def test_gemma_call_with_a_broken_value_is_content(gemma):
    text = "<|tool_call>call:run{a:[1,2}}<tool_call|>"
    assert C._find_calls(text, {}, False) == (text, [], "")


# --- strings between quotes the template escapes ------------------------------------

PYCALL = dict(
    CALL_START="⟨⟨",
    CALL_PARTS=(("name", "(", ()), ("arguments", ")⟩⟩", ())),
    TRIGGER="⟨⟨",
    _SEEK="⟨⟨",
    ARG_KEY_END="=",
    ARG_SEPARATOR=", ",
    ARG_STRING_OPEN='"',
    ARG_STRING_CLOSE='"',
    QUOTED_STRINGS=True,
    LITERAL="json",
)


def test_quoted_string_holding_an_escaped_quote(monkeypatch):
    _patch(monkeypatch, PYCALL)
    text = '⟨⟨say(text="she said \\"hi, {x}\\" \\\\", n=[1, "a\\"]"], m={"k": "v,)"})⟩⟩'
    _, calls, _ = C._find_calls(text, {}, False)
    assert json.loads(calls[0]["function"]["arguments"]) == {
        "text": 'she said "hi, {x}" \\',
        "n": [1, 'a"]'],
        "m": {"k": "v,)"},
    }


def test_unescaped_quotes_are_read_to_the_first_closing_one(monkeypatch):
    """A template that does not escape (LFM2 writes '...' around the text as it
    stands): the first closing quote ends the string, a backslash escapes nothing."""
    _patch(monkeypatch, {**PYCALL, "QUOTED_STRINGS": False})
    text = '⟨⟨say(path="C:\\temp\\", n=1)⟩⟩'
    _, calls, _ = C._find_calls(text, {}, False)
    assert json.loads(calls[0]["function"]["arguments"]) == {"path": "C:\\temp\\", "n": 1}


# A syntax with bare keys and strings in quotes that the template escapes
# ({key: "a \"b\""}, null as nil).
SCRIPT = {
    **GEMMA,
    "ARG_STRING_OPEN": '"',
    "ARG_STRING_CLOSE": '"',
    "RAW_STRINGS": False,
    "OWN_KEY_END": ": ",
    "OWN_MEMBER_SEPARATOR": ", ",
    "OWN_ITEM_SEPARATOR": ", ",
    "OWN_WORDS": {"nil": None, "yes": True, "no": False},
}


def test_quoted_strings_in_an_own_syntax(monkeypatch):
    _patch(monkeypatch, SCRIPT)
    text = '{a: "say \\"}\\" \\\\", b: [nil, yes, "]"], c: {}}'
    tail = text + ", d: 1)"
    assert V._OwnEnd().scan(tail) == len(text)
    for cut in range(1, len(tail)):
        assert _pieces_end(tail, [cut]) == len(text), cut
    assert V._own_typed(text, None) == {"a": 'say "}" \\', "b": [None, True, "]"], "c": {}}
