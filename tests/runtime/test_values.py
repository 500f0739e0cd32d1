"""compiler/runtime/values.py: where a literal ends (whole and in pieces), decoding,
typing tagged values, escaping text for JSON, and reading an object member by
member."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.runtime import values as V

# --- _ValueEnd ------------------------------------------------------------------------

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.sampled_from("ab \"'\\\n{}[](),:é"), max_size=6)
)
json_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(alphabet='ab"\\', max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)
python_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(alphabet="ab'\"\\", max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)
json_layouts = st.sampled_from(
    [
        {},
        {"separators": (",", ":")},
        {"indent": 2},
        {"separators": (" ,  ", " :\n ")},
        {"ensure_ascii": False},
    ]
)


def _pieces_end(text, cuts):
    """The end _ValueEnd finds reading ``text`` cut at ``cuts``, as an index into
    the whole text (or -1)."""
    scan = V._ValueEnd()
    bounds = [0, *cuts, len(text)]
    for number, (start, stop) in enumerate(itertools.pairwise(bounds)):
        final = number == len(bounds) - 2
        found = scan.scan(text[start:stop], 0, final)
        if found is not None:
            return found if found < 0 else start + found
    raise AssertionError("the last piece gave no answer")


def _every_split(text):
    for cut in range(len(text) + 1):
        yield [cut]


@pytest.mark.parametrize(
    "text,end",
    [
        ('{"a": [1, 2]} tail', 13),
        ('{"a": "}"}', 10),  # a bracket inside a string does not count
        ('["]", "\\"]"]x', 12),
        ("123", 3),
        ("123 ", 3),
        ("-1.5e3,", 6),
        ("true]", 4),  # a closer after a bare literal ends it
        ("null)", 4),
        ('"a\\"b" x', 6),
        ('"a\\\\" x', 5),
        ("{'a': (1, 2)}", 13),
        ("'it\\'s'", 7),
        ('"it\'s"', 6),
        ('"', -1),  # broken: an unterminated string
        ('"abc', -1),
        ("[1, 2", -1),
        ("}", -1),  # a closer where a value should start
        (" 1", -1),  # the value must start where it is asked for
        ("", -1),
        ("[[1}]", -1),
    ],
)
def test_value_end(text, end):
    assert V._value_end(text, 0) == end
    for cuts in _every_split(text):
        assert _pieces_end(text, cuts) == end, cuts


def test_value_end_from_an_offset():
    assert V._value_end('key=[1, "]"], next', 4) == 12
    assert V._value_end("a=1)", 2) == 3


@pytest.mark.parametrize("text", ["[1, 2}", "[1)", '{"a": 1]', "(1]"])
def test_value_end_mismatched_closer_is_broken(text):
    """A closer that does not match the only open bracket (it once popped the
    bracket, then read as the closer after a bare literal)."""
    assert V._value_end(text, 0) == -1


@settings(max_examples=300, deadline=None)
@given(json_values, json_layouts, st.sampled_from(["", " tail", ",", "]", "\n}"]))
def test_value_end_of_json_whole_and_in_pieces(value, layout, after):
    literal = json.dumps(value, **layout)
    text = literal + after
    assert V._value_end(text, 0) == len(literal)
    for cuts in _every_split(text):
        assert _pieces_end(text, cuts) == len(literal), cuts


@settings(max_examples=300, deadline=None)
@given(python_values, st.sampled_from(["", " x", ", b=2", ")"]))
def test_value_end_of_python_literals_whole_and_in_pieces(value, after):
    literal = repr(value)
    text = literal + after
    assert V._value_end(text, 0) == len(literal)
    for cuts in _every_split(text):
        assert _pieces_end(text, cuts) == len(literal), cuts


@settings(max_examples=200, deadline=None)
@given(json_values, st.data())
def test_value_end_in_three_pieces(value, data):
    text = json.dumps(value) + " "
    first = data.draw(st.integers(0, len(text)))
    second = data.draw(st.integers(first, len(text)))
    assert _pieces_end(text, [first, second]) == len(text) - 1


@pytest.mark.parametrize(
    "text,cut",
    [
        ('"a\\"b"', 3),  # the backslash ends the first piece
        ('"a\\\\"', 3),  # between the two backslashes of an escaped backslash
        ('"a\\\\"', 4),
        ('["\\\\", "\\""]', 4),
        ("'x\\'y'", 3),
    ],
)
def test_escape_at_a_piece_boundary(text, cut):
    assert _pieces_end(text + " rest", [cut]) == len(text)


def test_attempt_undoes_a_piece_in_which_the_value_ends():
    scan = V._ValueEnd()
    assert scan.scan('{"a": [1, "x\\', 0, False) is None
    state = (list(scan.depth), scan.quote, scan.escaped, scan.read)
    # the escaped quote, the closing one, then ] and }: the value ends, nothing kept
    assert scan.attempt('""]} x') == 4
    assert (scan.depth, scan.quote, scan.escaped, scan.read) == state
    # a piece in which it goes on is kept
    assert scan.attempt('n') is None and scan.read == state[3] + 1
    assert scan.scan('"]}', 0, True) == 3


def test_attempt_restores_deep_nesting_from_the_piece_alone():
    """Undoing costs what the piece holds: as many brackets as it has characters."""
    scan = V._ValueEnd()
    assert scan.scan("[" * 10_000, 0, False) is None
    assert scan.attempt("]]]}") == -1  # the fourth closes a bracket of another kind
    assert scan.depth == ["]"] * 10_000
    assert scan.scan("]" * 10_000, 0, True) == 10_000


# --- _load / _typed -----------------------------------------------------------------


def test_load_json():
    assert V._load('{"a": [1, 2.5, null]}', "json") == {"a": [1, 2.5, None]}
    assert V._load(" 1 ", "json") == 1
    with pytest.raises(ValueError):
        V._load("{'a': 1}", "json")  # a Python literal is no JSON


def test_load_python():
    assert V._load("{'a': (1, 2), 'b': None}", "python") == {"a": (1, 2), "b": None}
    assert V._load("True", "python") is True
    assert V._load("true", "python") is True  # JSON is read first
    assert V._load(" 'x' ", "python") == "x"
    for bad in ("foo", "1 +", "[1, 2", "", "f(1)"):
        with pytest.raises(ValueError):
            V._load(bad, "python")


@pytest.mark.parametrize("literal", ["json", "python"])
@pytest.mark.parametrize(
    "text",
    ["[" * 100_000 + "]" * 100_000, "[" * 100_000, '{"a": ' * 50_000 + "1" + "}" * 50_000],
    ids=["deep-list", "deep-open", "deep-object"],
)
def test_load_too_deep_is_a_value_error(text, literal):
    with pytest.raises(ValueError):
        V._load(text, literal)


@pytest.mark.parametrize(
    "text,kind,literal,value",
    [
        ("3", "string", "python", "3"),  # the schema says string: the text
        ("3", {"integer"}, "python", 3),
        ("3", None, "json", 3),
        ("hello world", {"integer"}, "json", "hello world"),  # no value: the text
        ("[1, 2]", {"array"}, "json", [1, 2]),
        ("True", {"boolean"}, "python", True),
        ("True", {"boolean"}, "json", "True"),
        ("{'a': 1}", {"object"}, "python", {"a": 1}),
        ("null", "string", "json", "null"),
        ("null", None, "json", None),
    ],
)
def test_typed(text, kind, literal, value):
    assert V._typed(text, kind, literal) == value
    assert type(V._typed(text, kind, literal)) is type(value)


# --- _json_text ----------------------------------------------------------------------

_tricky = [
    "",
    "plain",
    'say "hi"',
    "back\\slash",
    "line\nbreak\ttab\r",
    "\x00\x01\x1f\x7f",
    "é ü 中文 🎉",
    "\u2028\u2029",
    "\ud800 lone surrogate",
    "\b\f",
    "</script>",
]


@pytest.mark.parametrize("text", _tricky)
def test_json_text_cases(text):
    assert V._json_text(text) == json.dumps(text, ensure_ascii=False)[1:-1]


@settings(max_examples=1000)
@given(st.text(alphabet=st.characters(codec=None)))
def test_json_text_is_json_dumps(text):
    assert V._json_text(text) == json.dumps(text, ensure_ascii=False)[1:-1]


@settings(max_examples=300)
@given(st.text(alphabet=st.sampled_from('ab"\\\n\x01é\u2028 ')), st.data())
def test_json_text_in_pieces(text, data):
    whole = V._json_text(text)
    for cut in range(len(text) + 1):
        assert V._json_text(text[:cut]) + V._json_text(text[cut:]) == whole
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=4)))
    bounds = [0, *cuts, len(text)]
    assert "".join(V._json_text(text[a:b]) for a, b in itertools.pairwise(bounds)) == whole


# --- _read_members ------------------------------------------------------------------


def test_read_members_spans():
    text = 'xx  { "name" : "f" ,"arguments":{ "a" : 1 } ,"n":[1,\n 2]}  tail'
    found = V._read_members(text, 2)
    assert found is not None
    members, end = found
    assert text[end:] == "  tail"
    assert list(members) == ["name", "arguments", "n"]
    spans = {key: text[start:stop] for key, (_, start, stop) in members.items()}
    assert spans == {"name": '"f"', "arguments": '{ "a" : 1 }', "n": "[1,\n 2]"}
    assert members["arguments"][0] == {"a": 1}
    assert members["n"][0] == [1, 2]


def test_read_members_empty_object():
    assert V._read_members("{}", 0) == ({}, 2)
    assert V._read_members("  { \n }x", 0) == ({}, 7)


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a": 2}',  # a repeated key
        '{"a" 1}',
        '{"a": 1,}',
        '{"a": 1',
        '{"a": }',
        "{'a': 1}",
        "[1]",
        "",
        '{"a": 1 "b": 2}',
        '{\u00a0"a": 1}',  # not JSON whitespace
        '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}",
    ],
)
def test_read_members_malformed(text):
    assert V._read_members(text, 0) is None


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=4), json_values, max_size=4), json_layouts)
def test_read_members_agrees_with_json(value, layout):
    text = json.dumps(value, **layout)
    found = V._read_members(text, 0)
    assert found is not None
    members, end = found
    assert end == len(text)
    assert list(members) == list(value)
    for key, (member, start, stop) in members.items():
        assert member == value[key]
        assert json.loads(text[start:stop]) == value[key]
        assert text[start:stop] == text[start:stop].strip()


# --- _read_object / _field -----------------------------------------------------------


def test_read_object_json():
    assert V._read_object('  {"a": 1} x', 0) == ({"a": 1}, 2, 10)
    assert V._read_object("[1]", 0) is None  # not an object
    assert V._read_object("{'a': 1}", 0) is None


def test_read_object_python(monkeypatch):
    monkeypatch.setattr(V, "LITERAL", "python")
    assert V._read_object(" {'a': (1,)}, x", 0) == ({"a": (1,)}, 1, 12)
    assert V._read_object('{"a": true}', 0) == ({"a": True}, 0, 11)
    assert V._read_object("{'a': }", 0) is None
    assert V._read_object("[1]", 0) is None


def test_field():
    value = {"a": {"b": [1]}}
    assert V._field(value, ("a", "b")) == [1]
    assert V._field(value, ()) == value
    assert V._field(value, ("a", "c")) is None
    assert V._field(value, ("a", "b", "c")) is None


# --- _SchemaTypes --------------------------------------------------------------------


def test_schema_types():
    tools = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {
                    "type": "object",
                    "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
                },
            },
        },
        # a bare function definition, without the wrapper
        {"name": "g", "parameters": {"properties": {"x": {"type": "array"}}}},
        {"type": "function", "function": {"name": "h"}},  # no parameters
        {
            "type": "function",
            "function": {"name": "k", "parameters": {"properties": {"y": {}, "z": True}}},
        },
    ]
    types = V._SchemaTypes(tools)
    assert _kinds(types.get("f"), "a", "b", "c") == {"a": "string", "b": {"integer"}, "c": "-"}
    assert _kinds(types.get("g"), "x") == {"x": {"array"}}
    assert _kinds(types.get("h"), "x") == {"x": "-"}
    assert _kinds(types.get("k", "none"), "y", "z") == {"y": None, "z": None}
    assert types.get("nobody", "none") == "none"
    assert types.get("f") is types.get("f")  # read once, asked twice


def _kinds(found, *keys):
    """How ``found`` (one tool's argument kinds) types each of ``keys``, "-" where
    the tool has no such argument."""
    return {key: found.get(key, "-") for key in keys}


def test_schema_types_last_definition_counts():
    tools = [
        {"name": "f", "parameters": {"properties": {"a": {"type": "string"}}}},
        {"name": "f", "parameters": {"properties": {"a": {"type": "integer"}}}},
    ]
    assert _kinds(V._SchemaTypes(tools).get("f"), "a") == {"a": {"integer"}}


def test_schema_types_of_malformed_definitions():
    tools = [None, "x", {"function": None}, {"name": 3}, {"name": "f", "parameters": "x"}]
    types = V._SchemaTypes(tools)
    assert _kinds(types.get("f"), "a") == {"a": "-"}
    assert types.get("g", "none") == "none"


def test_schema_types_of_no_tools():
    assert V._SchemaTypes(None).get("f", "none") == "none"
    assert V._SchemaTypes([]).get("f", "none") == "none"
    assert V._SchemaTypes("not a list").get("f", "none") == "none"


@pytest.mark.parametrize(
    "schema,kinds",
    [
        ({"type": ["string", "null"]}, {"string", "null"}),
        ({"type": "string", "nullable": True}, {"string", "null"}),
        ({"anyOf": [{"type": "string"}, {"$ref": "#/$defs/n"}]}, {"string", "integer"}),
        ({"oneOf": [{"type": "string"}, {}]}, None),  # one option admits anything
        ({"enum": ["a", 1, None]}, {"string", "integer", "null"}),
        ({"const": 1.5}, {"number"}),
        ({"allOf": [{"type": "boolean"}]}, {"boolean"}),
        ({"properties": {}}, {"object"}),
        ({"type": 5}, None),  # a caller's mistake types nothing
        ({"$ref": "#/$defs/nowhere"}, None),
        (False, set()),
    ],
)
def test_schema_kinds(schema, kinds):
    assert V._schema_kinds(schema, {"$defs": {"n": {"type": "integer"}}}) == kinds


_FIELDS = [
    {"type": "string"},
    {"type": "integer", "description": "n"},
    {"type": "string", "enum": ["a", "b"]},
    {"type": "string", "nullable": True},
    {"type": "string", "nullable": False},
    {"type": "number", "const": "x"},
    {"type": "string", "anyOf": [{"type": "integer"}]},
    {"type": "string", "allOf": [{"type": "boolean"}]},
    {"type": "string", "$ref": "#/$defs/n"},
    {"type": ["string"]},
    {"type": "object", "properties": {}},
    {"items": {}},
    {},
    True,
    False,
    None,
]


@pytest.mark.parametrize("field", _FIELDS, ids=str)
def test_a_field_is_typed_at_once_as_its_schema_kinds_say(field):
    root = {"$defs": {"n": {"type": "integer"}}}
    assert V._field_kind(field, root) == V._kind(V._schema_kinds(field, root))


def test_schema_kinds_of_a_schema_that_refers_to_itself():
    root = {"$ref": "#"}  # followed so far, then any value
    assert V._schema_kinds(root, root) is None


@pytest.mark.parametrize(
    "text,kind,value",
    [
        ("10001", frozenset({"string", "null"}), "10001"),
        ("null", frozenset({"string", "null"}), None),
        ("10001", frozenset({"string", "integer"}), "10001"),  # the string wins
        ("true", frozenset({"string", "integer"}), "true"),  # not admitted: text
        ('"x"', frozenset({"string", "null"}), '"x"'),  # a string is its text
        ("[1]", frozenset({"string", "array"}), [1]),
        ("1e999", None, "1e999"),  # not finite: the text
        ("NaN", frozenset({"number"}), "NaN"),
        ("[1e999]", frozenset({"array"}), "[1e999]"),
    ],
)
def test_typed_by_the_types_a_schema_admits(text, kind, value):
    assert V._typed(text, kind, "json") == value


@pytest.mark.parametrize("text", ["NaN", "-Infinity", "1e999", "[1, -2.5e400]", '{"a": Infinity}'])
@pytest.mark.parametrize("literal", ["json", "python"])
def test_load_refuses_numbers_that_would_not_be_finite(text, literal):
    with pytest.raises(ValueError):
        V._load(text, literal)
    assert V._read_object('{"a": %s}' % text, 0) is None


def test_a_python_string_with_an_unknown_escape_reads_the_same_whatever_the_warning_filters():
    import warnings

    from compiler.runtime import values

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # as under python -W error
        assert values._load("'a\\ b'", "python") == "a\\ b"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert values._load("'a\\ b'", "python") == "a\\ b"
    assert not seen


# --- _scanned: json's scanners over a piece of the text ---------------------------------


def _outcome(scan, text, at, skip):
    """What ``scan(text, at + skip)`` gives: its answer, or the name of what it raises."""
    try:
        return scan(text, at + skip)
    except (StopIteration, ValueError, RecursionError) as error:
        kinds = (StopIteration, ValueError, RecursionError)
        return next(kind.__name__ for kind in kinds if isinstance(error, kind))


def _scanned_outcome(text, at, skip, scan):
    return _outcome(lambda whole, start: V._scanned(scan, whole, start - skip, skip), text, at, skip)


_jsonish = st.text(alphabet=st.sampled_from('{}[]":,0123456789.eE+-\\u abtrunlfsNIy\n'), max_size=60)


@settings(max_examples=500)
@given(_jsonish, st.integers(0, 30), st.sampled_from([1, 2, 5, 64]), st.sampled_from([2, 16]))
def test_scanned_answers_as_the_scanner_over_the_whole_text(text, at, piece, growth):
    """Read from pieces (here of a few characters, growing), every value, string
    and error comes out as the scanner reads it from the whole text."""
    at = min(at, len(text))
    old = V._SCAN_PIECE, V._SCAN_GROWTH
    V._SCAN_PIECE, V._SCAN_GROWTH = piece, growth
    try:
        assert _scanned_outcome(text, at, 0, V._SCAN_ONCE) == _outcome(V._SCAN_ONCE, text, at, 0)
        if text[at : at + 1] == '"':
            assert _scanned_outcome(text, at, 1, V._SCAN_STRING) == _outcome(
                V._SCAN_STRING, text, at, 1
            )
    finally:
        V._SCAN_PIECE, V._SCAN_GROWTH = old


def test_a_broken_call_far_into_the_text_is_scanned_near_where_it_is():
    """A broken object a megabyte into the text is scanned in a piece of it: json's
    error counts the lines of all the text it is given up to the error (a run of
    broken calls, each paying that, cost the square of the text's length)."""
    given_texts: list[int] = []

    def scan(text, at):
        given_texts.append(len(text))
        return V._SCAN_ONCE(text, at)

    text = "x\n" * 500_000 + '{"name": "get_wea\n<tool_call>\n'
    at = text.index("{")
    with pytest.raises(ValueError):
        V._scanned(scan, text, at, 0)
    assert max(given_texts) <= 2 * V._SCAN_PIECE
    assert V._read_members(text, at) is None
