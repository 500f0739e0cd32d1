"""Strings a template writes between quotes, ended where the reader ends them.

Where key/value units write a string between Python's quotes, a quote inside it may
stand as it is: LFM2.5's template writes ``code='…greet('wörld')…'`` unescaped, and a
model that does not escape a quote of its own (``q="the "old" town"``) writes the
same. The reader (compiler/runtime/calls.py: ``_string_end``, ``_quoted_end``) ends
such a string at the first quote that what the template writes after a value
follows, a *follower*: the separator and the next key (``, key=``), the key written
after whitespace where the separator is left out (`` key=``), and the arguments'
closer, then the section's closer or the next call's opening (``)]<|tool_call_end|>``,
``), name(``); where the calls have no section, the closer alone. A key or a name
holds no whitespace and no quote, so a follower never reaches past the next quote:
whether a quote ends the string is told by the text between it and the next quote
(a *segment*) alone.

So a grammar says the same without looking ahead: a string is its opening quote and
the text through its first quote, and then any number of segments, each the text up to
and with the next quote, none of which starts with a follower. The string's last
quote is its closing one; what follows it is the grammar's own (the next unit, the
closer), which is a follower: the reader ends the string there too.

llguidance lexes greedily and backs off one byte at most, so where a quote may or may
not end the string, the lexeme that goes on with the string (a segment: it dies only
once a follower is whole) and those that follow a closing quote must part at one byte.
A segment therefore begins with the lexemes a follower begins with in that grammar:
the GBNF writes the separator and the next key as one lexeme, which a segment races
whole (both end at the key's ``=``); the call's closer is a lexeme of its own before
the section's closer or the next call's opening, so a segment that starts with the
closer starts with that very lexeme, and races what follows it; the Lark writes the
separator as a lexeme of its own too (``Strings.segments``). A key or name the
grammars take holds no quote, so no lexeme after a closing quote runs on past the
quote that ends a segment.

The follower here is the reader's with no bound on whitespace and names (the reader
looks 64 characters of whitespace and 256 of a name ahead), and a word of any
character beyond ASCII that is no whitespace: a grammar ends a string at no quote the
reader does not, and goes on past none the reader ends it at. Past those bounds, and
where whitespace other than the grammar's own stands before a closer or a separator,
the grammars refuse what the reader would take.
"""

from __future__ import annotations

from dataclasses import dataclass

from .charclass import WORD_CHARS, marker_pieces
from .model import Format

# The whitespace the reader skips (``str.isspace``: none above U+3000).
SPACES = "".join(c for c in map(chr, range(0x3001)) if c.isspace())
QUOTES = "'\""
# What a word (a key written where the separator is left out) is not made of: the
# reader's word is letters, digits and ``_-.:``; beyond ASCII, any character that is
# no whitespace stands for a letter here (a word of more characters than the reader's
# ends a string at no quote the reader does not: a grammar only refuses more).
_NOT_IN_WORDS = "".join(c for c in map(chr, range(0x80)) if c not in WORD_CHARS)

# A character class: (negated, the characters).
Class = tuple[bool, str]
# A step of a follower: a class, once or (repeated) any number of times.
Item = tuple[Class, bool]
Way = tuple[Item, ...]


def _spaces() -> Item:
    return (False, SPACES), True


def _literal(text: str, tokens: list[str]) -> list[Item]:
    """A literal as the reader's ``_literal_step`` matches it: each word of it after
    any whitespace."""
    items: list[Item] = []
    for word in _words(text, tokens):
        items.append(_spaces())
        items += [((False, char), False) for char in word]
    return items


def _words(text: str, tokens: list[str]) -> list[str]:
    pieces, _ = marker_pieces(text, tokens)
    return [word for piece in pieces for word in piece.split()]


def _name(after: str, tokens: list[str], word: bool = False) -> list[Item]:
    """A name up to the literal ``after`` as the reader's ``_name_step`` reads it: after
    any whitespace, one or more characters that are no whitespace, no quote and not
    the literal's first (a ``word``: letters, digits and ``_-.:`` only)."""
    words = _words(after, tokens)
    stop = words[0][0] if words else " "
    chars: Class = (True, (_NOT_IN_WORDS if word else QUOTES) + SPACES + stop)
    return [_spaces(), (chars, False), (chars, True)]


@dataclass(frozen=True)
class Strings:
    """The strings of a format's units that end where a follower follows them, and
    the followers, each a way (steps in a row) as the reader matches it."""

    # (the quote, whether a backslash escapes the character after it)
    quotes: tuple[tuple[str, bool], ...]
    # what follows a value: the followers the reader knows
    value: tuple[Way, ...]
    # the separator, and what follows it in a follower (the next unit)
    separator: Way
    unit: tuple[Way, ...]
    # the arguments' closer, and what follows it in a follower (none without a
    # section: the closer alone is one)
    closer: Way
    after_closer: tuple[Way, ...]

    def segments(self, separator_apart: bool) -> dict[str, tuple[Way, ...]]:
        """The segments a grammar makes after a quote inside a string, by the lexeme
        they begin with (``plain``: none; ``separator``: the separator, a lexeme of its
        own where ``separator_apart``; ``closer``: the arguments' closer, where a
        section follows the calls), each with the ways it must not start with."""
        plain = self.value + ((self.separator,) if separator_apart else ())
        found = {"plain": plain}
        if separator_apart:
            found["separator"] = self.unit
        if self.after_closer:
            found["plain"] += (self.closer,)
            found["closer"] = self.after_closer
        return found


def strings(fmt: Format) -> Strings | None:
    """The strings of ``fmt``'s units that the reader ends at a follower; None where
    its values are not such units (or the reader could not be followed exactly:
    the arguments not the call's last hole, other literals that end them, no
    separator between units)."""
    calls = fmt.calls
    if calls is None or calls.format != "tagged" or not calls.typed_values:
        return None
    arguments = calls.arguments
    assert arguments is not None
    if arguments.suffixed or arguments.syntax is not None or arguments.elements is not None:
        return None
    if arguments.verbatim is not None or not arguments.separator.strip():
        return None
    quotes: list[tuple[str, bool]] = []
    if arguments.string_open in QUOTES and arguments.string_close == arguments.string_open:
        quotes.append((arguments.string_open, arguments.quoted_strings))
    elif arguments.string_open:
        return None
    quotes += [(quote, True) for quote in arguments.string_quotes_also if quote in QUOTES]
    last = calls.parts[-1] if calls.parts else None
    if not quotes or last is None or last.hole != "arguments" or calls.part_options[-1]:
        return None
    if not last.after.strip():
        return None  # nothing closes the arguments: every quote would end a string
    if any(stop and last.after.strip().startswith(stop) for stop in fmt.stop):
        return None  # a closer a server may stop at: the grammars leave it optional
    tokens = sorted((t for t in fmt.preserved_tokens if t.strip()), key=len)[::-1]
    literal = lambda text: _literal(text, tokens)  # noqa: E731
    unit = (
        literal(arguments.key_prefix)
        + _name(arguments.key_end, tokens)
        + literal(arguments.key_end)
    )
    left_out = [((False, SPACES), False)] + literal(arguments.key_prefix)
    left_out += _name(arguments.key_end, tokens, word=True) + literal(arguments.key_end)
    closer = tuple(literal(last.after))
    after_closer: list[list[Item]] = []
    if calls.section_end:
        after_closer.append(literal(calls.section_end))
        first = calls.parts[0]
        for start in calls.starts or (calls.start,):
            opening = literal(calls.separator + start)
            if first.hole == "name" and first.after.strip():
                opening += _name(first.after, tokens) + literal(first.after)
            after_closer.append(opening)
    if not all(after_closer):
        return None  # calls one after another with nothing between them
    separator = tuple(literal(arguments.separator))
    value = [separator + tuple(unit), tuple(left_out)]
    if after_closer:
        value += [closer + tuple(way) for way in after_closer]
    else:
        value.append(closer)
    return Strings(
        quotes=tuple(quotes),
        value=tuple(value),
        separator=separator,
        unit=(tuple(unit),),
        closer=closer,
        after_closer=tuple(tuple(way) for way in after_closer),
    )


# -- a segment that starts with none of some ways, as an automaton ---------------------

# Any character the classes do not name.
OTHER = ""


@dataclass(frozen=True)
class Segment:
    """The automaton of a segment: state 0 first, every state may end the segment.
    A state's moves are (``escape``: a backslash and then one of ``chars``, else one
    of ``chars``; the state it leads to); ``chars`` a set of atoms, ``OTHER`` standing
    for every character ``named`` does not hold. No state leads back to one it came
    from but by a move to itself: each is a regular expression of those after it."""

    states: tuple[tuple[tuple[bool, frozenset[str], int], ...], ...]
    named: frozenset[str]

    def as_class(self, atoms: frozenset[str]) -> Class:
        """A set of atoms as a class: (negated, characters)."""
        if OTHER in atoms:
            return True, "".join(sorted(self.named - atoms))
        return False, "".join(sorted(atoms))


def segment(ways: tuple[Way, ...], quote: str, escaped: bool) -> Segment:
    """The automaton of a segment (its text up to the quote that ends it, without it)
    that starts with none of ``ways``. ``escaped``: a backslash and the character
    after it are one (it may be the quote), as the reader skips an escape."""
    named = sorted(
        {c for way in ways for ((_, chars), _) in way for c in chars}
        | set(map(chr, range(0x80)))
        | set(SPACES)
        | set(QUOTES)
    )
    atoms = named + [OTHER]

    def member(atom: str, cls: Class) -> bool:
        negated, chars = cls
        return (atom != OTHER and atom in chars) != negated

    def closure(found: set) -> frozenset | None:
        """The positions with those the empty text reaches; None: a way is whole."""
        todo = list(found)
        found = set(found)
        while todo:
            w, at = todo.pop()
            if at == len(ways[w]):
                return None
            if ways[w][at][1] and (w, at + 1) not in found:
                found.add((w, at + 1))
                todo.append((w, at + 1))
        return frozenset(found)

    def step(positions: frozenset | None, atom: str) -> frozenset | None:
        if positions is None:
            return None
        after = set()
        for w, at in positions:
            cls, repeated = ways[w][at]
            if member(atom, cls):
                after.add((w, at) if repeated else (w, at + 1))
        return closure(after)

    start = closure({(w, 0) for w in range(len(ways))})
    assert start is not None, "a way that holds nothing"
    index = {start: 0}
    order = [start]
    states: list[tuple[tuple[bool, frozenset[str], int], ...]] = []
    plain = [a for a in atoms if a != quote and not (escaped and a == "\\")]
    while len(states) < len(order):
        positions = order[len(states)]
        steps = [(False, a, step(positions, a)) for a in plain]
        if escaped:
            after = step(positions, "\\")
            steps += [(True, a, step(after, a)) for a in atoms]
        found: dict = {}
        for escape, atom, target in steps:
            if target is None:
                continue  # a way is whole: the segment may not go on so
            if target not in index:
                index[target] = len(order)
                order.append(target)
            found.setdefault((escape, index[target]), set()).add(atom)
        states.append(
            tuple((escape, frozenset(chars), to) for (escape, to), chars in found.items())
        )
    _refuse_loops(states)
    return Segment(tuple(states), frozenset(named))


def _refuse_loops(states) -> None:
    """Refuse an automaton that leads back to a state it came from other than by a
    move to itself (a grammar could not then say it without recursion)."""
    done: set = set()
    path: set = set()

    def visit(state: int) -> None:
        path.add(state)
        for _, _, to in states[state]:
            if to == state or to in done:
                continue
            if to in path:
                raise ValueError("a follower the grammars cannot say without recursion")
            visit(to)
        path.discard(state)
        done.add(state)

    visit(0)
