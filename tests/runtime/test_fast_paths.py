"""The runtime's fast paths read a text as the slower code they replaced did: each is
checked here against its promise, worked out the long way (every place tried, every
marker tried), on texts made of the markers' own pieces so that they overlap often.

(``make bench`` times them; these say they give the same answers.)"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.runtime import stream as S
from compiler.runtime import text as T

# Pieces that make markers and texts overlap in every way: a marker that ends in
# another, one that begins as another ends, whitespace around them.
PIECES = ["<", "|", "e", ">", "/", "s", " ", "\n", "<|e|>", "</s>", "e|>"]
markers = st.lists(st.text(alphabet="<|e>/s \n", max_size=6), max_size=4)
texts = st.lists(st.sampled_from(PIECES), max_size=8).map("".join)
# (each example patches the markers afresh: the fixture is the same for all)
PATCHED = [HealthCheck.function_scoped_fixture]


@pytest.fixture
def turn_ends(monkeypatch):
    """A function patching end-of-turn markers in, with the table made from them
    (as binding a format makes it) and a fresh tail-pattern cache."""

    def patch(ends):
        monkeypatch.setattr(T, "_TURN_ENDS", ends)
        monkeypatch.setattr(T, "_LONGEST_ENDS", T._longest_first(ends))
        monkeypatch.setattr(T, "_TAIL_PATTERNS", {})

    return patch


def _stop_run_by_hand(text, end, ends, begun=(), once=False):
    """_stop_run's promise: markers written one after another that end text[:end],
    each once, the longest where several end it at one place."""
    at, used = end, list(begun)
    while True:
        found = [m for m in ends if m and m not in used and text.endswith(m, 0, at)]
        if not found:
            return at
        longest = max(found, key=len)
        used.append(longest)
        at -= len(longest)
        if once:
            return at


@settings(max_examples=400, deadline=None, suppress_health_check=PATCHED)
@given(ends=markers, text=texts, data=st.data())
def test_stop_run_reads_the_longest_marker_each_once(turn_ends, ends, text, data):
    turn_ends(ends)
    end = data.draw(st.integers(0, len(text)))
    begun = (
        tuple(data.draw(st.lists(st.sampled_from(ends), max_size=1))) if ends else ()
    )
    once = data.draw(st.booleans())
    assert T._stop_run(text, end, begun, once) == _stop_run_by_hand(
        text, end, ends, begun, once
    )
    # _stop_at: where the markers that end the text, whitespace after them aside,
    # begin (the text's length where none does)
    kept = len(text.rstrip())
    at = _stop_run_by_hand(text, kept, ends)
    assert T._stop_at(text) == (at if at < kept else len(text))


def test_longest_first_keeps_each_marker_once():
    assert T._longest_first(["<a>", "", "<abc>", "<b>", "<a>"]) == (
        "<abc>",
        "<a>",
        "<b>",
    )
    assert T._longest_first([]) == ()


@settings(max_examples=400, deadline=None, suppress_health_check=PATCHED)
@given(ends=markers, text=texts)
def test_before_stop_is_the_earliest_place_a_final_marker_may_begin(
    turn_ends, ends, text
):
    """Where the output may end once its final end-of-turn markers are dropped:
    before markers that end it, or before a marker begun at its very end (each
    tried at every place it may begin)."""
    turn_ends(ends)
    begun = [
        at
        for marker in ends
        if marker
        for at in range(max(0, len(text) - len(marker) + 1), len(text))
        if marker.startswith(text[at:])
    ]
    expected = min([len(text), T._stop_from(text, len(text)), *begun])
    assert T._before_stop(text) == expected


@settings(max_examples=400, deadline=None, suppress_health_check=PATCHED)
@given(
    ends=markers,
    literal=st.lists(st.sampled_from(PIECES + ["<p>", "x"]), min_size=1, max_size=4)
    .map("".join)
    .filter(str.strip),
    lead=st.sampled_from(["", " ", "\n"]),
    tail=texts,
)
def test_apart_literal_never_ends_past_where_a_final_marker_may_begin(
    turn_ends, monkeypatch, ends, literal, lead, tail
):
    """_decide's shortcut: where no end-of-turn marker can begin inside what
    _match reads of a literal (_apart), the literal read ends before the earliest
    place _before_stop finds, whatever follows it."""
    turn_ends(ends)
    monkeypatch.setattr(T, "_APART", {})
    text = lead + literal + tail
    end = T._match(text, 0, literal)
    assert end >= 0
    if T._apart(literal):
        assert T._before_stop(text) >= end


def test_apart_reads_the_markers_against_every_place_in_the_literal(turn_ends):
    turn_ends(["<|e|>"])
    assert T._apart("</p>")
    assert T._apart("e|>")  # a marker's end, not its start
    assert not T._apart("x<|")  # begun at its end
    assert not T._apart("a <|e|> b")  # whole inside it
    turn_ends([" <|e|>"])  # a marker that starts with whitespace: never apart
    assert not T._apart("</p>")


@settings(max_examples=400, deadline=None, suppress_health_check=PATCHED)
@given(
    prompt_ends=st.lists(
        st.sampled_from(["<|e|>", "</s>", "<", "e|>", " <"]), max_size=3
    ),
    text=texts,
)
def test_without_echo_is_the_echo_reader_fed_the_whole_text(
    monkeypatch, prompt_ends, text
):
    monkeypatch.setattr(T, "PROMPT_ENDS", tuple(prompt_ends))
    echo = T._Echo()
    assert T._without_echo(text) == echo.feed(text) + echo.finish()


@settings(max_examples=400, deadline=None)
@given(
    suffixes=st.lists(st.text(alphabet="</pa>\n", max_size=7), min_size=1, max_size=3),
    text=st.lists(
        st.sampled_from(["<", "/", "p", "a", ">", "\n", "</pa>"]), max_size=8
    ).map("".join),
)
def test_a_format_suffix_pattern_finds_the_tail_the_linear_reader_finds(suffixes, text):
    """The pattern kept per format suffix and the reader made afresh for a suffix
    that names a key give the same place: the leftmost where a proper prefix of a
    marker ends the text."""
    by_hand = min(
        [len(text)]
        + [
            at
            for marker in suffixes
            if marker
            for at in range(len(text))
            if len(text) - at < len(marker) and marker.startswith(text[at:])
        ]
    )
    search, reach = S._pattern_tail(*suffixes)
    found = search(text, max(0, len(text) - reach))
    assert (found.start() if found else len(text)) == by_hand
    assert S._prefix_tail(*suffixes)(text) == by_hand


def test_only_the_format_own_suffixes_are_kept(monkeypatch):
    """A suffix that names a key the model wrote (MiniMax M3's) gets no pattern and
    no entry: what is kept is bounded by the format."""
    monkeypatch.setattr(S, "_OWN_SUFFIXES", ("\n</parameter>\n",))
    monkeypatch.setattr(S, "_VALUE_TAILS", {})
    own = S._value_tail("\n</parameter>\n", "\n<parameter=")
    assert S._value_tail("\n</parameter>\n", "\n<parameter=") is own
    search, reach, tail = own
    assert tail is None and search("x\n</para", 0).start() == 1
    for key in ("city", "days", "a" * 300):
        search, reach, keyed = S._value_tail(f"</{key}>", "")
        assert search is None and keyed(f"v</{key[:3]}") == 1
    assert list(S._VALUE_TAILS) == [("\n</parameter>\n", "\n<parameter=")]


@settings(max_examples=400, deadline=None, suppress_health_check=PATCHED)
@given(ends=markers, watch=markers, text=texts)
def test_settled_holds_back_a_begun_marker_and_the_markers_before_it(
    turn_ends, ends, watch, text
):
    """_settled: all but a tail that may still become one of ``watch`` or an
    end-of-turn marker (the leftmost place, every place tried), less end-of-turn
    markers that end what is left and the whitespace before them; where a tail is
    held, no more than what the same reading of the whole text leaves."""
    turn_ends(ends)
    cut = min(
        [len(text)]
        + [
            at
            for marker in [*watch, *ends]
            if marker
            for at in range(len(text))
            if len(text) - at < len(marker) and marker.startswith(text[at:])
        ]
    )

    def before_markers(end):
        return T._space_before(text, T._stop_from(text, end))

    expected = before_markers(cut)
    if cut < len(text):
        expected = min(expected, before_markers(len(text)))
    assert T._settled(text, tuple(watch)) == expected
