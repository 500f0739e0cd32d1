"""compiler/runtime/text.py: matching markers with tolerance for whitespace, and
deciding how much of a text may still turn into a marker.

Expectations are worked out by hand from what each function promises in its
docstring; the properties check the promises the stream reader relies on."""

from __future__ import annotations


import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.runtime import text as T

IM_END = "<|im_end|>"


def _turn_ends(monkeypatch, markers):
    """End-of-turn markers patched in, with the table made from them when the
    runtime is bound (``_LONGEST_ENDS``) and a fresh tail-pattern cache."""
    monkeypatch.setattr(T, "_TURN_ENDS", markers)
    monkeypatch.setattr(T, "_LONGEST_ENDS", T._longest_first(markers))
    monkeypatch.setattr(T, "_TAIL_PATTERNS", {})


@pytest.fixture
def im_end(monkeypatch):
    _turn_ends(monkeypatch, [IM_END])


@pytest.fixture
def two_stops(monkeypatch):
    _turn_ends(monkeypatch, ["<|e|>", "</s>"])


# --- _skip_space / _match -------------------------------------------------------------


def test_skip_space():
    assert T._skip_space("  \n\tx", 0) == 4
    assert T._skip_space("x  ", 1) == 3
    assert T._skip_space("abc", 1) == 1
    assert T._skip_space("", 0) == 0


@pytest.mark.parametrize(
    "text,at,literal,end",
    [
        # written exactly
        ("ab<x>cd", 2, "<x>", 5),
        ("<x>", 0, "<x>", 3),
        ("\n<x>\nrest", 0, "\n<x>\n", 5),
        # other whitespace before the literal's core
        ("   <x>", 0, "<x>", 6),
        ("\t <x>\nrest", 0, "\n<x>\n", 6),  # the literal's trailing newline is eaten
        (" <x>rest", 0, "\n<x>\n", 4),  # ... and not required
        (" <x> \nrest", 0, "\n<x>\n", 4),  # other whitespace after is not eaten
        ("<x>\n\n", 0, " <x>\n", 4),  # only as much trailing text as the literal has
        # the literal with its own leading whitespace, the text with none
        ("<x>", 0, "\n\n<x>", 3),
        # an empty literal matches where it is
        ("abc", 1, "", 1),
    ],
)
def test_match(text, at, literal, end):
    assert T._match(text, at, literal) == end


@pytest.mark.parametrize(
    "text,at,literal",
    [
        ("abc", 0, "<x>"),
        ("a<x>", 0, "<x>"),  # a letter before it is not whitespace
        ("<y>", 0, "<x>"),
        ("<x", 0, "<x>"),  # the text ends first
        ("<x>", 1, "<x>"),
        ("", 0, "<x>"),
    ],
)
def test_match_none(text, at, literal):
    assert T._match(text, at, literal) == -1


@settings(max_examples=300)
@given(
    st.text(alphabet=" \n\t", max_size=3),
    st.sampled_from(["<x>", "\n<x>\n", " [TOOL] ", "</a>\n\n"]),
    st.text(alphabet="ab <", max_size=5),
)
def test_match_after_any_whitespace(lead, literal, rest):
    """Whitespace, then the literal's core: the match ends after the core (and the
    literal's own trailing whitespace where the text goes on with it)."""
    text = lead + literal.strip() + rest
    end = T._match(text, 0, literal)
    core_end = len(lead) + len(literal.strip())
    if text.startswith(literal):
        assert end == len(literal)
    else:
        trail = literal[len(literal.rstrip()) :]
        expected = core_end + len(trail) if trail and rest.startswith(trail) else core_end
        assert end == expected


# --- _before ------------------------------------------------------------------


def test_before():
    assert T._before("abc\n", "\n</p>") == "abc"
    assert T._before("abc\n\n", "\n</p>") == "abc\n"  # only the literal's own lead
    assert T._before("abc", "\n</p>") == "abc"
    assert T._before("abc\n", "</p>") == "abc\n"  # the literal starts with none
    assert T._before("abc \n", " \n</p>") == "abc"


# --- _partial_at -----------------------------------------------------------------------


def test_partial_at():
    assert T._partial_at("hello <to", "<tool>") == 6
    assert T._partial_at("hello <", "<tool>") == 6
    assert T._partial_at("hello", "<tool>") == 5  # none: the length
    assert T._partial_at("x<tool>", "<tool>") == 7  # the whole marker is no proper prefix
    assert T._partial_at("<<t", "<<t>") == 0
    assert T._partial_at("a<<", "<<t>") == 1  # the longest prefix
    assert T._partial_at("", "<t>") == 0
    assert T._partial_at("abc", "") == 3
    assert T._partial_at("ab", "b") == 2  # a one-character marker has no proper prefix


def _partial_brute(text, marker):
    for start in range(len(text)):
        tail = text[start:]
        if len(tail) < len(marker) and marker.startswith(tail):
            return start
    return len(text)


@settings(max_examples=500)
@given(st.text(alphabet="<t>ab", max_size=10), st.text(alphabet="<t>ab", max_size=5))
def test_partial_at_is_the_longest_proper_prefix_at_the_end(text, marker):
    assert T._partial_at(text, marker) == (_partial_brute(text, marker) if marker else len(text))


# --- _good_name / _word_end ------------------------------------------------------------


@pytest.mark.parametrize(
    "name,good",
    [
        ("get_weather", True),
        ("ns.tool-v2:x", True),
        ("x" * 256, True),
        ("x" * 257, False),
        ("", False),
        ("a b", False),
        (" a", False),
        ("a\n", False),
    ],
)
def test_good_name(name, good):
    assert T._good_name(name) is good


def test_word_end():
    assert T._word_end("get.weather-v2:x_y>rest", 0) == len("get.weather-v2:x_y")
    assert T._word_end("ab cd", 3) == 5
    assert T._word_end("ab cd", 0) == 2
    assert T._word_end(">x", 0) == -1  # no word
    assert T._word_end("ab", 2) == -1  # nothing left


# --- end-of-turn markers ----------------------------------------------------------------


def test_strip_stop(im_end):
    assert T._strip_stop("answer<|im_end|>\n") == "answer"
    assert T._strip_stop("answer <|im_end|>") == "answer "  # whitespace before it stays
    assert T._strip_stop("a<|im_end|><|im_end|>") == "a<|im_end|>"  # one marker only
    assert T._strip_stop("<|im_end|>x") == "<|im_end|>x"
    # no marker: the text as it was, trailing whitespace included
    assert T._strip_stop("answer  ") == "answer  "


def test_strip_stop_reads_end_markers_written_one_after_another(monkeypatch):
    """The template's marker, then the tokenizer's eos: both end the turn, each once;
    where one ends in another, the longest written is read."""
    _turn_ends(monkeypatch, ["<|im_end|>", "<|endofturn|>"])
    assert T._strip_stop("a<|im_end|><|endofturn|>\n") == "a"
    assert T._strip_stop("a <|endofturn|>") == "a "
    assert T._strip_stop("a<|endofturn|><|im_end|>") == "a"  # in either order
    assert T._strip_stop("a<|im_end|><|im_end|>") == "a<|im_end|>"  # each once
    assert T._strip_stop("a<|im_end|> <|endofturn|>") == "a<|im_end|> "  # written apart
    _turn_ends(monkeypatch, ["<|END_OF_TURN_TOKEN|>", "<|END_TEXT|><|END_OF_TURN_TOKEN|>"])
    assert T._strip_stop("a<|END_TEXT|><|END_OF_TURN_TOKEN|>") == "a"
    assert T._strip_stop("a<|END_OF_TURN_TOKEN|>") == "a"


def test_stops_begin(monkeypatch):
    _turn_ends(monkeypatch, ["<|e|>", "</s>"])
    assert T._stops_begin("x<|e|></") == 1  # a marker, then one begun
    assert T._stops_begin("x<|e|></s>  ") == 1
    assert T._stops_begin("x</") == 1
    assert T._stops_begin("x<|e|>y") == len("x<|e|>y")
    assert T._stops_begin("x<|e|> </") == len("x<|e|> ")  # markers written apart: the last


def test_strip_stop_without_stops(monkeypatch):
    _turn_ends(monkeypatch, [])
    assert T._strip_stop("answer<|im_end|>") == "answer<|im_end|>"


def test_trim_end():
    markers = ["<|im_end|>", "<|endoftext|>"]
    assert T._trim_end("abc <|im_end|>\n<|endoftext|>  ", markers) == "abc"
    assert T._trim_end("abc", markers) == "abc"
    assert T._trim_end("a<|im_end|>b", markers) == "a<|im_end|>b"
    assert T._trim_end("abc \n", []) == "abc"
    assert T._trim_end("<|im_end|>", markers) == ""


def test_tail_pattern(im_end):
    pattern, reach = T._tail_pattern(("<tool_call>",))
    assert reach == len("<tool_call>")
    assert pattern.search("abc<|im").start() == 3
    assert pattern.search("abc<tool_").start() == 3
    assert pattern.search("abc<").start() == 3
    assert pattern.search("abc") is None
    assert pattern.search("abc<tool_call>") is None  # the whole marker is no prefix
    assert pattern.search("abc<|im_end|>") is None
    # cached per markers
    assert T._tail_pattern(("<tool_call>",)) is T._tail_pattern(("<tool_call>",))


def test_tail_pattern_of_nothing(monkeypatch):
    _turn_ends(monkeypatch, [])
    pattern, reach = T._tail_pattern(("", "x"))  # "" and a 1-char marker: no prefixes
    assert reach == 1
    assert pattern.search("anything x") is None


@pytest.mark.parametrize(
    "text,settled",
    [
        ("hello world", 11),
        ("hello <to", 5),  # a possible marker held back, and the space before it
        ("hello <|im", 5),  # ... or a possible end of turn
        ("hello  ", 5),  # whitespace may come before a marker
        ("answer<|im_end|>", 6),  # a whole end-of-turn marker is not sent
        ("answer \n<|im_end|>  ", 6),
        ("a <x", 4),  # '<x' can start no marker here
        ("<to", 0),
        ("", 0),
    ],
)
def test_settled(im_end, text, settled):
    assert T._settled(text, ("<tool>",)) == settled


_ALPHABET = "<|e>/st x\n"


# The fixture only sets constants, the same for every input.
@settings(max_examples=1500, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=_ALPHABET, max_size=14), st.text(alphabet=_ALPHABET, max_size=8))
def test_settled_never_takes_back(two_stops, text, more):
    """What was settled stays settled: the reader cannot unsend text."""
    markers = ("<t>", "<|x")
    first = T._settled(text, markers)
    assert 0 <= first <= len(text)
    assert T._settled(text + more, markers) >= first


@settings(max_examples=800, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=_ALPHABET, max_size=14))
def test_settled_holds_back_only_what_may_be_a_marker(two_stops, text):
    markers = ("<t>", "<|x")
    kept = T._settled(text, markers)
    assert text[:kept] == text[:kept].rstrip()
    held = text[kept:].strip()
    whole = markers + ("<|e|>", "</s>")

    def partial(rest):
        return any(len(rest) < len(m) and m.startswith(rest) for m in whole)

    # An end-of-turn marker, what may still become a marker, or the one before the
    # other (the marker is final only if nothing but whitespace follows it).
    # End-of-turn markers may be written one after the other, each once.
    runs = {"", "<|e|>", "</s>", "<|e|></s>", "</s><|e|>"}
    assert (
        not held
        or held in runs
        or partial(held)
        or any(run and held.startswith(run) and partial(held[len(run) :].lstrip()) for run in runs)
    ), held


def test_stops(im_end):
    pattern = T._stops("<tool>", "[x")
    assert pattern.search("abc [ d").start() == 4
    assert pattern.search("ab<").start() == 2
    assert pattern.search("abc") is None


def test_stops_escapes_class_characters(monkeypatch):
    _turn_ends(monkeypatch, ["\\end"])
    pattern = T._stops("]x", "^y", "-z", "")
    for char in "]^-\\":
        assert pattern.fullmatch(char), char
    for char in "abcxyz[|":
        assert not pattern.fullmatch(char), char


def test_stops_of_nothing(monkeypatch):
    _turn_ends(monkeypatch, [])
    assert T._stops().search("<anything>") is None
    assert T._stops("").search("<anything>") is None


@pytest.mark.parametrize(
    "text,maybe",
    [
        ("", True),
        ("  <|im", True),
        ("<|im_end|>", True),
        ("\n<|im_end|>  ", True),
        ("<|im x", False),
        ("<|im ", False),  # whitespace after a part of one ends the hope
        ("hello", False),
        ("<|im_end|>x", False),
        ("<|im_end|><|im_", False),  # each marker once
    ],
)
def test_maybe_stop(im_end, text, maybe):
    assert T._maybe_stop(text) is maybe


def test_maybe_stop_without_stops(monkeypatch):
    _turn_ends(monkeypatch, [])
    assert T._maybe_stop("") is False


# --- _decided / _undecided ----------------------------------------------------------


@pytest.mark.parametrize(
    "text,literal,decided",
    [
        ("<tool>", "<tool>", True),
        ("<tool>abc", "<tool>", True),
        ("<to", "<tool>", False),  # more text may complete it
        ("", "<tool>", False),
        ("   ", "<tool>", False),  # whitespace may come before it
        ("  <to", "<tool>", False),
        ("  <tool>", "<tool>", True),
        ("  <tx", "<tool>", True),  # it cannot match any more
        ("abc", "<tool>", True),
        (" <x>", "<x>\n", False),  # the literal's trailing newline may follow
        (" <x>a", "<x>\n", True),
        (" <x>\n", "<x>\n\n", False),
        (" <x>\n\n", "<x>\n\n", True),
        ("\n", "\n\n<x>", False),
    ],
)
def test_decided(text, literal, decided):
    assert T._decided(text, literal) is decided


@settings(max_examples=2000)
@given(
    st.text(alphabet="<x> \na", max_size=7),
    st.sampled_from(["<x>", "<x>\n", "\n<x>", " <x>\n\n", "<x> <x>", "x", ""]),
    st.text(alphabet="<x> \na", max_size=5),
)
def test_decided_means_no_continuation_changes_the_match(text, literal, more):
    if T._decided(text, literal):
        assert T._match(text + more, 0, literal) == T._match(text, 0, literal)


def test_undecided():
    assert T._undecided("<to", ("<tool>",)) is True
    assert T._undecided("", ("<t",)) is True
    assert T._undecided("<tool>", ("<tool>",)) is False  # already whole
    assert T._undecided("x", ("<t",)) is False
    assert T._undecided("", ()) is False
    assert T._undecided("<a", ("<b>", "<ab>")) is True


# --- _read_name_to, _skip_space ---------------------------------------------------


@pytest.mark.parametrize(
    "written",
    [
        "get_weather(",
        "  get_weather   (",
        "get_weather" + " " * 2000 + "(",  # whitespace past the first window
        " " * 2000 + "get_weather(",
        "a" * 256 + "(",
    ],
)
def test_read_name_to_reads_what_read_to_reads(written):
    text = written + '{"city": "Paris"})' + " tail (" * 10
    assert T._read_name_to(text, 0, "(") == T._read_to(text, 0, "(")
    found = T._read_name_to(text, 0, "(")
    assert T._good_name(text[: found[0]].strip())


@pytest.mark.parametrize(
    "written",
    [
        "a" * 257 + "(",  # too long to be a name
        "get weather(",  # two words
        "get_weather" + " " * 300 + "x(",
    ],
)
def test_read_name_to_gives_up_where_no_name_can_end(written):
    text = written + "x" * 5000 + "("
    found = T._read_name_to(text, 0, "(")
    # Either not found, or found where read_to finds it and still no name.
    if found is not None:
        assert found == T._read_to(text, 0, "(")
        assert not T._good_name(text[: found[0]].strip())
    else:
        assert not T._good_name(text[: T._read_to(text, 0, "(")[0]].strip())


def test_skip_space_is_isspace():
    text = "a \t\n\u2028\u00a0\u3000b" + " " * 1000
    for at in range(len(text) + 1):
        end = at
        while end < len(text) and text[end].isspace():
            end += 1
        assert T._skip_space(text, at) == end


# --- _name_end, _name_reach: a name's whitespace, however long ----------------------

CHANNEL = "<|channel|>"


@pytest.fixture
def channel(monkeypatch):
    """A preserved token that the literals after a name start with."""
    monkeypatch.setattr(T, "_TOKENS", [CHANNEL])
    monkeypatch.setattr(T, "_PIECES", {})
    monkeypatch.setattr(T, "_LOOSE", {})


@pytest.mark.parametrize("space", [0, 1, 300, 600, 5000])
def test_name_end_reads_the_name_whatever_whitespace_follows_it(channel, space):
    """The literal after a name is found past any run of whitespace (it was looked
    for in 512 characters: past them the call was not one)."""
    after = CHANNEL + "commentary json<|message|>"
    options = ((CHANNEL + "analysis<|message|>", 0),)
    for literal in (after, options[0][0]):
        text = "get_weather" + " \n" * space + literal + '{"a": 1}'
        found = T._name_end(text, 0, after, options)
        assert found is not None
        assert text[: found[0]].strip() == "get_weather"
        assert text[found[1] :] == '{"a": 1}'


def test_name_end_finds_no_literal_past_a_second_word(channel):
    text = "get_weather now" + " " * 600 + CHANNEL + "analysis<|message|>{}"
    found = T._name_end(text, 0, CHANNEL + "analysis<|message|>", ())
    assert found is None


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(["a", "b", " ", "\n", "\u3000", "x" * 100, " " * 300]), max_size=12),
    st.integers(0, 20),
)
def test_name_reach_is_whitespace_a_word_of_257_and_whitespace(pieces, at):
    """_name_reach ends where ``\\s*\\S{0,257}\\s*`` matched from ``at``."""
    import re

    text = "".join(pieces)
    at = min(at, len(text))
    assert T._name_reach(text, at) == re.compile(r"\s*\S{0,257}\s*").match(text, at).end()


# --- _seek: the earliest of several openers, each looked for once --------------------


@pytest.fixture
def two_seeks(monkeypatch):
    monkeypatch.setattr(T, "_SEEKS", ("<tc>", "<f="))
    monkeypatch.setattr(T, "_KNOWN", (None, {}), raising=False)


def _first(text, at, limit):
    found = [text.find(seek, at, limit) for seek in ("<tc>", "<f=")]
    return min((f for f in found if f >= 0), default=-1)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.sampled_from(["<tc>", "<f=", "<", "x", "<t", " "]), max_size=30),
    st.lists(st.tuples(st.integers(0, 80), st.one_of(st.none(), st.integers(0, 80))), max_size=20),
)
def test_seek_finds_what_find_finds(two_seeks, pieces, queries):
    """Whatever order the places are asked in (forward as tries go on, back by a
    lookback), _seek answers as str.find over each opener would."""
    text = "".join(pieces)
    for at, limit in queries:
        at = min(at, len(text))
        assert T._seek(text, at, limit) == _first(text, at, limit), (text, at, limit)


def test_seek_looks_for_an_absent_opener_once(two_seeks):
    """A run of the second opener with no trigger after it: the trigger is looked
    for to the end of the text once, not at every try (that cost the square of the
    text's length: 1 MB of '<function= ' took 36 s to parse)."""

    class Counted(str):
        looked = 0  # characters looked through, all finds together

        def find(self, sub, start=0, end=None):
            found = str.find(self, sub, start, end)
            stop = len(self) if end is None else min(end, len(self))
            Counted.looked += (found + len(sub) if found >= 0 else stop) - start
            return found

    text = Counted("<f= " * 1000)
    at = 0
    while at >= 0:
        at = T._seek(text, at)
        if at >= 0:
            at += 1
    assert Counted.looked <= 3 * len(text)
