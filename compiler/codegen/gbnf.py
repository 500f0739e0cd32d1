"""Format model → GBNF grammars, in the dialect DESIGN.md fixes (llama.cpp's, no ``.``).

Every grammar is built from a ``Format`` (compiler/model.py), never from the raw spec.

Every string from a template reaches the grammar through ``literal`` or ``char_class``
(or ``_class``), which escape it; nothing else writes template text into a grammar.

The grammars are shaped by how llguidance reads them (tests/test_grammar.py runs them
there, one token per byte): a rule built only from strings, classes and other such
rules is one lexeme, lexemes are greedy, and the lexer backs off at most one byte, so
a lexeme that could have ended two bytes before its rival dies is lost. Hence, where a
grammar offers a choice, each alternative's first lexeme runs on until the
alternatives part: free text is one lexeme together with the marker that ends it
(``without``), a marker is one lexeme together with the whitespace before it and what
follows up to the next free text or JSON value, and no alternative starts with a bare
``ws`` of its own.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Callable

from ..charclass import NOT_IN_NAMES, WS_CHARS, class_body, name_class
from ..model import Format, Part, ValueSyntax
from .. import quoted_strings
from ..quoted_strings import QUOTES, Segment
from ..runtime.schema_gbnf import JSON_RULES, PY_RULES, WS_GBNF, ws_fits

_NAMED = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_CLASS_EXTRA = {"]": "\\]", "[": "\\x5B", "-": "\\x2D", "^": "\\x5E"}


def _escape_char(char: str, in_class: bool) -> str:
    if char in _NAMED:
        return _NAMED[char]
    if in_class and char in _CLASS_EXTRA:
        return _CLASS_EXTRA[char]
    if ord(char) < 0x20 or ord(char) == 0x7F:
        return "\\x%02X" % ord(char)
    return char


def literal(text: str) -> str:
    return '"' + "".join(_escape_char(c, False) for c in text) + '"'


def char_class(chars, negated: bool = False) -> str:
    body = class_body(chars, lambda char: _escape_char(char, True))
    return "[" + ("^" if negated else "") + body + "]"


ANY_CHAR = "[^\\x00]"
EMPTY = '""'
WS = WS_GBNF  # bounded (compiler/runtime/schema_gbnf.py says how)
# How many end-of-turn markers the grammars take in a row after the calls (whitespace
# between them): the reader drops any number there, but a model held to a run
# without end writes the marker until its token cap (the live run: MiniMax M3's
# ``</tool_call>``, issue 33); templates write one, and models two at most (MiniMax's
# doubled marker, issue 32).
MARKERS_AFTER_CALLS = 4
# The rule a caller's tool names replace (``with_tool_names``).
NAME_RULE = "tool-name"
# Stands for the argument's key in a value suffix that repeats it (the analysis's).
KEY_SLOT = "{key}"
# The rule a tool's schema replaces: its arguments (compiler/runtime/grammar.py), and
# in a unit's template, the key and the value.
ARGUMENTS_RULE = "tool-arguments"
KEY_HOLE = "tool-key"
VALUE_HOLE = "tool-value"
# ... and the attribute before the value that names its type, where the template
# writes one word per type (``TOOL_ATTRIBUTES``).
ATTRIBUTE_HOLE = "tool-attribute"
# A call id the template writes in no form it checks (``polyfills.call_ids``), and the
# other members a JSON call holds beside its name, arguments and id (an index, a type;
# Command R7B's ``tool_call_id``, a counter), are held short in every grammar, so that a
# model cannot write one without end (the live run: a hundred digits). Real ids fit:
# vLLM's ``chatcmpl-tool-`` and 32 hex digits is 46 characters, OpenAI's ``call_…`` some
# 30, a UUID 36. An id holds at most this many characters (a JSON string's escape one),
# an integer at most ``INTEGER_DIGITS`` digits (within a 64-bit integer).
ID_LONGEST = 64
INTEGER_DIGITS = 18


# -- text in which given strings do not occur -------------------------------------------


def without(rule: str, stop, closed=None) -> list[str]:
    """Rules for ``rule``: any text in which ``stop`` (a string, or a list of strings)
    does not occur; with ``closed``, also a rule of that name (a dict: one per stop)
    for such a text followed by the stop (text through the first occurrence of any
    stop, that stop being the one). A closed rule no text can match is left out.

    Built from the automaton that tracks the longest end of the text that begins some
    stop (Aho–Corasick; one stop: Knuth–Morris–Pratt). A state's depth is that end's
    length. ``{rule}-{u}-{v}`` is a return: a walk that leaves state ``u``, stays
    deeper than it, and first comes back to ``u``'s depth or less at ``v``. A text is
    a sequence of returns at depth 0, then possibly a step up to depth 1 and returns
    there, and so on.

    Written with ``*`` and no recursion, so that each rule is one regular expression:
    llguidance lexes it as one lexeme (the body together with its closing marker, instead
    of single characters racing the marker's literal, which fails on a text holding two
    or more characters of the marker) and its Earley parser never meets right recursion
    (which it caps at a few thousand items a row).
    """
    stops = [stop] if isinstance(stop, str) else list(stop)
    if closed is None:
        closing = {}
    elif isinstance(closed, str):
        if len(stops) != 1:
            raise ValueError("without(): name one closed rule per stop")
        closing = {stops[0]: closed}
    else:
        closing = dict(closed)
    rules = _Without(rule, stops).rules(closing)
    return [
        f"{label} ::= {' | '.join(map(_render, options))}"
        for label, options in rules.items()
    ]


class _Without:
    """The returns and walks of ``without``'s automaton, and the rules made of them.

    A state is a node of the stops' trie that is live: a proper prefix of some stop,
    holding no stop (node 0 is the empty text). Its depth is its length; states are
    ordered by depth, then by the first stop they begin. A state keeps only the steps
    that do not lead back to the empty text (most characters do), so the tables, the
    rules and the time to make them grow with the stops' length, not with its square,
    and nothing recurses once per character (a stop of 50,000 characters is as good
    as one of ten).
    """

    def __init__(self, rule: str, stops: list[str]):
        if not stops or not all(stops):
            raise ValueError("without(): empty stop string")
        self.rule = rule
        self.stops = stops
        # The trie: children, depth, the first stop through the node, stops ending there.
        self.kids: list[dict[str, int]] = [{}]
        self.depth = [0]
        first = [0]
        ends: list[list[int]] = [[]]
        for index, stop in enumerate(stops):
            node = 0
            for char in stop:
                kid = self.kids[node].get(char)
                if kid is None:
                    kid = len(self.kids)
                    self.kids[node][char] = kid
                    self.kids.append({})
                    self.depth.append(self.depth[node] + 1)
                    first.append(index)
                    ends.append([])
                node = kid
            ends[node].append(index)
        # Aho–Corasick over the live nodes, breadth first: ``moves[u]`` maps a character
        # to the node reached (the longest end of the text that begins a stop) where that
        # is not the empty text; ``hits[v]``: the stops the text of ``v`` ends with (none
        # for a live node; a node reached from a live one with hits completes a stop).
        self.live = [False] * len(self.kids)
        self.live[0] = True
        self.hits: dict[int, list[int]] = {0: []}
        self.moves: dict[int, dict[str, int]] = {0: dict(self.kids[0])}
        back = {0: 0}
        self.levels: dict[int, list[int]] = {0: [0]}
        queue = [0]
        for node in queue:
            for char, kid in self.kids[node].items():
                fallback = 0 if node == 0 else self.moves[back[node]].get(char, 0)
                back[kid] = fallback
                self.hits[kid] = (
                    ends[kid] + self.hits[fallback]
                    if ends[kid]
                    else self.hits[fallback]
                )
                if self.hits[kid]:
                    continue
                self.live[kid] = True
                moves = dict(self.moves[fallback])
                moves.update(self.kids[kid])
                self.moves[kid] = moves
                self.levels.setdefault(self.depth[kid], []).append(kid)
                queue.append(kid)
        self.rank = {node: (self.depth[node], first[node]) for node in queue}
        for level in self.levels.values():
            level.sort(key=self.rank.__getitem__)
        self.children = {
            node: [
                (c, kid) for c, kid in sorted(self.kids[node].items()) if self.live[kid]
            ]
            for node in queue
        }
        self.ids = {}
        for depth, level in self.levels.items():
            for index, node in enumerate(level):
                suffix = "" if len(level) == 1 else "abcdefghijklmnopqrstuvwxyz"[index]
                self.ids[node] = f"{depth}{suffix}"
        self.returns: dict[tuple[int, int], list[list]] = {}
        # The targets of the returns from each state.
        self.targets: dict[int, list[int]] = {}
        # (y, z) on one level -> items of the walks from y to z staying at that depth
        # or deeper (y == z: the loops at y, possibly none).
        self.walks: dict[tuple[int, int], list] = {}
        # Rules that cut deep nesting (``_going_on``).
        self.extra: dict[str, list[list]] = {}
        for depth in sorted(self.levels, reverse=True):
            for state in self.levels[depth]:
                self._returns_from(state)
            self._walks_at(depth)

    def id(self, state: int) -> str:
        return self.ids[state]

    def name(self, state: int, target: int) -> str:
        return f"{self.rule}-{self.id(state)}-{self.id(target)}"

    def _returns_from(self, state: int) -> None:
        depth = self.depth[state]
        moves = self.moves[state]
        by_target: dict[int, list[str]] = {}
        for char in sorted(moves):
            target = moves[char]
            if self.live[target] and self.depth[target] <= depth:
                by_target.setdefault(target, []).append(char)
        ups = [
            (char, child, other)
            for char, child in self.children[state]
            for other in self.levels[depth + 1]
            if (child, other) in self.walks
        ]
        candidates = {0, *by_target}
        for _, _, other in ups:
            candidates.update(t for t in self.targets[other] if self.depth[t] <= depth)
        self.targets[state] = []
        for target in sorted(candidates, key=self.rank.__getitem__):
            options = []
            if target == 0:
                options.append([_cached_class(tuple(sorted(moves)), True)])
            elif target in by_target:
                options.append([_cached_class(tuple(by_target[target]), False)])
            for char, child, other in ups:
                if (other, target) in self.returns:
                    options.append(self._up(char, child, other, target))
            if options:
                self.returns[(state, target)] = options
                self.targets[state].append(target)

    def _up(self, char: str, child: int, other: int, target: int) -> list:
        up = [(char,)] + self.walks[(child, other)]
        rest = self.returns[(other, target)]
        if len(up) == 1 and len(rest) == 1:
            # Written out in place; a chain of these is shared, not copied.
            return up + [_Seq(rest[0])]
        return up + [self.name(other, target)]

    def _walks_at(self, depth: int) -> None:
        nodes = self.levels[depth]
        crossing = [
            (y, z) for y in nodes for z in nodes if y != z and (y, z) in self.returns
        ]
        if not crossing:
            for y in nodes:
                self.walks[(y, y)] = (
                    [f"{self.name(y, y)}*"] if (y, y) in self.returns else []
                )
            return
        # Returns that move between states of one depth: the walks are the star of that
        # matrix (Kleene's construction over the states of the level).
        paths = {
            (y, z): self.name(y, z)
            for y in nodes
            for z in nodes
            if (y, z) in self.returns
        }
        for k in nodes:
            # Only the star of a state's own walks is ever used, so those stay as they are.
            loop = [_star(paths[(k, k)])] if (k, k) in paths else []
            new = dict(paths)
            for y in nodes:
                for z in nodes:
                    if (y, z) == (k, k) or (y, k) not in paths or (k, z) not in paths:
                        continue
                    via = " ".join(([] if y == k else [_paren(paths[(y, k)])]) + loop
                                   + ([] if z == k else [_paren(paths[(k, z)])]))  # fmt: skip
                    if y == k or z == k:
                        new[(y, z)] = via
                    else:
                        new[(y, z)] = (
                            f"{paths[(y, z)]} | {via}" if (y, z) in paths else via
                        )
            paths = new
        for y in nodes:
            for z in nodes:
                if y == z:
                    self.walks[(y, y)] = (
                        [_star(paths[(y, y)])] if (y, y) in paths else []
                    )
                elif (y, z) in paths:
                    self.walks[(y, z)] = [_paren(paths[(y, z)])]

    def _going_on(self, start: int, end, label: str) -> list[list]:
        """Options after the walks that end at ``start``: ``end(state)`` (options: how
        the text may end there; ``[]`` for right there), or a step up and on. Every
        few levels the rest becomes a rule ``{label}-{state}`` of its own: a grammar
        reader caps how deeply groups nest. Each state's options are made once, deepest
        first, on a stack of its own rather than Python's."""

        def options_at(state: int):
            options = list(end(state))
            for char, child in self.children[state]:
                for other in self.levels[self.depth[child]]:
                    if (child, other) not in self.walks:
                        continue
                    further = yield other
                    if not further:
                        continue
                    rest = _group(further)
                    if rest and self.depth[other] % _NESTING == 0:
                        name = f"{label}-{self.id(other)}"
                        self.extra[name] = [rest]
                        rest = [name]
                    options.append([(char,)] + self.walks[(child, other)] + rest)
            return options

        made: dict[int, list[list]] = {}
        stack = [(start, options_at(start))]
        value: list[list] | None = None
        while True:
            state, frame = stack[-1]
            try:
                wanted = frame.send(value)
            except StopIteration as done:
                made[state] = done.value
                stack.pop()
                if not stack:
                    return done.value
                value = done.value
                continue
            if wanted in made:
                value = made[wanted]
            else:
                stack.append((wanted, options_at(wanted)))
                value = None

    def _found(self, state: int, char: str) -> list[str]:
        """The stops the text of ``state`` followed by ``char`` ends with."""
        target = self.moves[state].get(char, 0)
        return [self.stops[index] for index in self.hits[target]]

    def rules(self, closing: dict[str, str]) -> dict[str, list[list]]:
        def body_end(state):
            return [[]]

        body = self._going_on(0, body_end, self.rule + "-from")
        rules = {self.rule: [self.walks[(0, 0)] + _group(body)]}
        for stop, label in closing.items():

            def found_end(state, stop=stop):
                moves = self.moves[state]
                chars = [c for c in sorted(moves) if stop in self._found(state, c)]
                if not chars:
                    return []
                return [[(chars[0],)] if len(chars) == 1 else [char_class(chars)]]

            options = self._going_on(0, found_end, label + "-from")
            if options:
                rules[label] = [self.walks[(0, 0)] + _group(options)]
        rules.update(self.extra)
        named = set().union(
            *(_refs(_render(o)) for options in rules.values() for o in options)
        )
        for (state, target), options in sorted(
            self.returns.items(),
            key=lambda item: (self.rank[item[0][0]], self.rank[item[0][1]]),
        ):
            if self.name(state, target) in named:
                rules[self.name(state, target)] = options
                named |= set().union(*(_refs(_render(o)) for o in options))
        return rules


@functools.lru_cache(maxsize=4096)
def _cached_class(chars: tuple[str, ...], negated: bool) -> str:
    return char_class(chars, negated)


class _Seq:
    """Items of one option written out inside another (``_render`` flattens them)."""

    __slots__ = ("items",)

    def __init__(self, items: list):
        self.items = items


# How deeply ``without`` nests groups before it names a rule.
_NESTING = 16


def _paren(text: str) -> str:
    return text if re.fullmatch(r"[a-z0-9-]+", text) else f"( {text} )"


def _star(text: str) -> str:
    return _paren(text) + "*"


def _joined(options: list[list]) -> list:
    out: list = []
    for index, option in enumerate(options):
        out += (["|"] if index else []) + option
    return out


def _group(options: list[list]) -> list:
    """Options as items: one as it is, several in parentheses; an empty option
    makes the group optional."""
    others = [option for option in options if option]
    if len(others) < len(options):
        return ["("] + _joined(others) + [")?"] if others else []
    if len(others) == 1:
        return others[0]
    return ["("] + _joined(others) + [")"]


def _render(items: list) -> str:
    """Items as GBNF, runs of characters merged into one literal (``_Seq`` items
    written out in place)."""
    out: list[str] = []
    run: list[str] = []
    stack = [iter(items)]
    while stack:
        for item in stack[-1]:
            if isinstance(item, _Seq):
                stack.append(iter(item.items))
                break
            if isinstance(item, tuple):
                run.append(item[0])
                continue
            if run:
                out.append(literal("".join(run)))
                run = []
            out.append(item)
        else:
            stack.pop()
    if run:
        out.append(literal("".join(run)))
    return " ".join(out)


_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|[A-Za-z][A-Za-z0-9-]*')


def _refs(body: str) -> set[str]:
    """The rule names a rule's body refers to."""
    return {t for t in _TOKEN.findall(body) if t[0] not in '"['}


# -- character classes as sets ----------------------------------------------------------


def _class(negated: bool, chars: str, repeated: bool = False) -> str:
    return char_class(chars, negated) + ("+" if repeated else "")


def _intersection(a: tuple[bool, str], b: tuple[bool, str]) -> tuple[bool, str]:
    (neg_a, chars_a), (neg_b, chars_b) = a, b
    if neg_a and neg_b:
        return True, "".join(sorted(set(chars_a) | set(chars_b)))
    if neg_a:
        return False, "".join(sorted(set(chars_b) - set(chars_a)))
    if neg_b:
        return False, "".join(sorted(set(chars_a) - set(chars_b)))
    return False, "".join(sorted(set(chars_a) & set(chars_b)))


def _complement(a: tuple[bool, str]) -> tuple[bool, str]:
    return (not a[0], a[1])


def _union(a: tuple[bool, str], b: tuple[bool, str]) -> tuple[bool, str]:
    return _complement(_intersection(_complement(a), _complement(b)))


def _not_starting_with(shape: list) -> str:
    """GBNF for any text that does not start with ``shape`` (a ``triggers`` shape)."""
    loops: list[tuple[bool, str]] = [(False, "")]
    steps: list[tuple[bool, str]] = []
    for segment in shape:
        if segment[0] == "ws":
            loops[-1] = _union(loops[-1], (False, WS_CHARS))
        elif segment[0] == "text":
            for char in segment[1]:
                steps.append((False, char))
                loops.append((False, ""))
        elif segment[0] == "class":
            _, negated, chars, repeated = segment
            steps.append((negated, chars))
            loops.append((negated, chars) if repeated else (False, ""))

    # Each state's text is written around the next state's: heads in order, then the
    # tails, so that a long shape neither recurses nor copies what follows it.
    if not steps:
        raise ValueError("a shape with nothing but whitespace")
    heads: list[str] = []
    for state, (loop, step) in enumerate(zip(loops, steps, strict=False)):
        if _intersection(loop, step) != (False, ""):
            raise ValueError("a shape whose loops overlap its next step")
        parts = [_class(*loop) + "*"] if loop != (False, "") else []
        other = _complement(_union(loop, step))
        options = [f"{_class(*other)} any"] if other != (False, "") else []
        if state + 1 < len(steps):
            first = (
                literal(step[1]) if not step[0] and len(step[1]) == 1 else _class(*step)
            )
            heads.append(" ".join(parts + ["( " + " | ".join(options + [first + " "])]))
        else:
            heads.append(
                " ".join(
                    parts + (["( " + " | ".join(options) + " )?"] if options else [])
                )
            )
    return "".join(heads) + " )?" * (len(heads) - 1)


# -- JSON --------------------------------------------------------------------------------

# The JSON (and JSON-or-Python) value rules are the runtime's (a module adds them where
# a tool's schema needs them).
_JSON_RULES = {
    name: body
    for name, body in JSON_RULES.items()
    if name not in ("ws", "json-integer")
}
_PY_RULES = PY_RULES
# A Python (or JSON) value that is no string.
_PY_LITERAL = (
    'py-object | py-array | json-number | "true" | "false" | "null" | "True" | "False" | "None"'
)
# A rule that matches nothing but NUL characters (never in an output): not a lexeme,
# so the rule that holds it is none either (compiler/runtime/schema_gbnf.py's).
_BREAK = "lexeme-break"


def _segment_rules(name: str, found: Segment) -> list[str]:
    """Rules ``{name}-{state}`` for a segment's automaton (compiler/quoted_strings.py),
    each a regular expression of those after it (no recursion: one lexeme)."""

    def text(escape: bool, atoms: frozenset[str]) -> str:
        negated, chars = found.as_class(atoms)
        written = ANY_CHAR if negated and not chars else char_class(chars, negated)
        return f'"\\\\" {written}' if escape else written

    lines = []
    for state, moves in enumerate(found.states):
        loops = [text(escape, atoms) for escape, atoms, to in moves if to == state]
        outs = [f"{text(escape, atoms)} {name}-{to}" for escape, atoms, to in moves if to != state]
        body = []
        if loops:
            body.append(f"( {' | '.join(loops)} )*")
        if outs:
            body.append(f"( {' | '.join(outs)} )?")
        lines.append(f"{name}-{state} ::= {' '.join(body) or EMPTY}")
    return lines


# -- a format's grammars -------------------------------------------------------------------


@dataclass
class _Piece:
    """Part of a sequence: GBNF text that is one lexeme or part of one (``terminal``),
    or other GBNF; ``absorb`` makes the non-terminal take the terminal text before it
    into its own first lexemes."""

    text: str = ""
    terminal: bool = True
    absorb: Callable[[str], str] | None = None


def _trail(text: str) -> str:
    """For the whitespace a literal ends with (which the reader takes when it is
    there), any whitespace: exact, it could end a lexeme inside the next one's ``ws``.
    """
    tail = text[len(text.rstrip()) :]
    return _space(tail) if text.strip() and tail else ""


def _space(chars: str) -> str:
    """Whitespace where a literal writes ``chars``: ``ws``, or, where the bound does
    not take them (more line breaks, or other whitespace than ``ws``'s: U+2028, …),
    them as written or ``ws``, so that what the template writes is taken."""
    return "ws" if ws_fits(chars) else f"( {literal(chars)} | ws )"


def _marker(text: str, lead: bool = True) -> str:
    """A literal as the generated reader matches it: as written, or with any
    whitespace before its text (``lead``) and without the whitespace after it."""
    core = text.strip()
    if not core:
        return _space(text) if text and lead else ""
    before = [_space(text[: len(text) - len(text.lstrip())])] if lead else []
    return " ".join(before + [literal(core)] + [_trail(text)]).strip()


def _optional(text: str) -> str:
    """``text`` (whitespace a literal writes) once or not at all, as the reader takes
    it; "" for none."""
    return f"{literal(text)}?" if text else ""


def _join(texts: list[str]) -> str:
    """GBNF texts in a row, one whitespace rule (the wider) where two would meet."""
    out = ""
    for text in texts:
        text = text.strip()
        head, tail = text.split(" ", 1)[0], out.rsplit(" ", 1)[-1]
        if head == "ws" and tail == "ws":
            text = text[len(head) :].strip()
        out = f"{out} {text}".strip()
    return out


# What ends a bare word (a value written without quotes): as in the reader.
_NOT_IN_WORDS = "".join(map(chr, range(0x21))) + "\x7f,;(){}[]\"'"

# A word or number in a value syntax of the template's own: letters, digits, "_", ".",
# "+", "-" (any character beyond ASCII, where the reader takes letters and digits).
_NOT_IN_OWN_WORDS = "".join(
    c for c in map(chr, range(0x80)) if not (c.isalnum() or c in "_.+-")
)


def _alternatives(options: list[str]) -> str:
    options = [o for o in options if o]
    return options[0] if len(options) == 1 else "( " + " | ".join(options) + " )"


class _Grammar:
    """The rules of one grammar, built from a format's model."""

    def __init__(self, fmt: Format, choice: str = "auto", parallel: bool = True):
        self.fmt = fmt
        self.has_calls = fmt.has_calls
        # tool_choice ("auto", "none": no calls, "required": at least one) and
        # parallel_tool_calls (False: at most one call).
        self.choice = choice if fmt.has_calls else "auto"
        self.parallel = parallel
        # The strings a unit's value may be that end where a follower follows them
        # (compiler/quoted_strings.py); None where the format has none.
        self.quoted = quoted_strings.strings(fmt)
        # How the tools' schemas reach the arguments (TOOL_ARGUMENTS, TOOL_UNIT, ...:
        # compiler/runtime/format.py), filled in as the call is built.
        self.hooks: dict = {}
        # The marker that opens the calls ("" where none does or there are no calls),
        # which free text holds only where calls follow it. Where the content is a unit
        # of the turn (model.Format.content_as_unit), the call separator after it
        # starts the calls: that is the word.
        self.word = fmt.calls.trigger if fmt.calls is not None else ""
        if fmt.content_as_unit:
            assert fmt.calls is not None
            self.word = fmt.calls.separator.strip()
        self.rules: dict[str, str] = {
            "ws": WS,
            "any": f"{ANY_CHAR}*",
        }
        # The end of an output: whitespace, possibly an end-of-turn marker.
        stops = [literal(stop) for stop in fmt.stop]
        self.add("end", f"ws ( {_alternatives(stops)} ws )?" if stops else "ws")

    # rules

    def add(self, name: str, body: str) -> str:
        if self.rules.get(name, body) != body:
            raise ValueError(f"rule {name} defined twice")
        self.rules[name] = body
        return name

    def named(self, base: str, body: str) -> str:
        """A rule with this body, named ``base`` (``base-2``, … when taken)."""
        for name in [base] + [f"{base}-{n}" for n in range(2, 100)]:
            if self.rules.get(name, body) == body:
                return self.add(name, body)
        raise ValueError(f"too many rules named {base}")

    def extend(self, lines: list[str]) -> set[str]:
        """Adds rules given as ``name ::= body`` lines; their names."""
        for line in lines:
            self.add(*line.split(" ::= ", 1))
        return {line.split(" ::= ", 1)[0] for line in lines}

    def text(self, root: str) -> str:
        """``root ::= …`` and the rules it reaches, in the order they were made."""
        self.rules = {"root": root, **self.rules}
        reached, todo = set(), ["root"]
        while todo:
            name = todo.pop()
            if name not in reached:
                reached.add(name)
                todo += sorted(_refs(self.rules[name]))
        return "".join(
            f"{n} ::= {body}\n" for n, body in self.rules.items() if n in reached
        )

    def sequence(self, name: str, pieces: list[_Piece]) -> tuple[str, bool]:
        """GBNF for ``pieces`` in a row, and whether it is all terminal; runs of
        terminal pieces next to other GBNF become rules ``{name}-part``, … (a lexeme
        each)."""
        items: list[tuple[str, bool]] = []
        run: list[str] = []
        for piece in pieces:
            if piece.terminal:
                run.append(piece.text)
                continue
            if piece.absorb is not None:
                items.append((piece.absorb(_join(run)), False))
            else:
                if _join(run):
                    items.append((_join(run), True))
                items.append((piece.text, False))
            run = []
        if _join(run):
            items.append((_join(run), True))
        if all(terminal for _, terminal in items):
            return _join([text for text, _ in items]), True
        out = [
            self.named(f"{name}-part", text) if terminal else text
            for text, terminal in items
        ]
        return " ".join(out), False

    # values and names

    def value_rules(self, python: bool) -> str:
        """Adds the JSON (or JSON-or-Python) value rules; their prefix."""
        for name, body in _JSON_RULES.items():
            self.add(name, body)
        if python:
            for name, body in _PY_RULES.items():
                self.add(name, body)
        return "py" if python else "json"

    def object_piece(self, python: bool) -> _Piece:
        """An object (after any whitespace), its opening one lexeme with what precedes."""
        prefix = self.value_rules(python)

        def absorb(lead: str) -> str:
            opening = self.named(
                "arguments-open", _join([lead, "ws", literal("{"), "ws"])
            )
            self.hooks["TOOL_ARGUMENTS"] = "members"
            return f"{opening} {self.add(ARGUMENTS_RULE, f'{prefix}-members')}"

        return _Piece(terminal=False, absorb=absorb)

    def hole_rule(self, name: str, parts: tuple[Part, ...], hole: str) -> str:
        """The rule of a name or id hole: the characters every such hole may hold; an
        id as the template checks it (``polyfills.call_ids``), else at most
        ``ID_LONGEST`` of them."""
        chars = (True, QUOTES if self.quoted is not None else "")
        for part in parts:
            if part.hole == hole:
                chars = _intersection(chars, name_class(part.after))
        if hole != "id":
            return self.add(name, _class(*chars, repeated=True))
        form = _id_class(self.fmt.polyfills.call_ids)
        if form is not None and _within(form, chars):
            return self.add(name, form)
        return self.add(name, _class(*chars) + "{1,%d}" % ID_LONGEST)

    # calls

    def closer(self, text: str) -> str:
        """A literal that closes a call or the calls; optional where it starts with an
        end-of-turn marker, which a server stops at (the reader reads a call whose
        closer the end of the text cut off). Without the whitespace it ends with:
        what follows opens with whitespace of its own (the next call, the section's
        closer, the end) or is text that holds it, one bounded run between the two."""
        core = text.strip()
        found = _marker(text.rstrip())
        if any(core.startswith(stop) for stop in self.fmt.stop):
            return f"( {found} )?"
        return found

    def call_pieces(self) -> list[_Piece]:
        """One call after its start marker (which the caller's lead holds)."""
        calls = self.fmt.calls
        assert calls is not None
        if calls.format == "json":
            closing = self.closer(calls.end)
            return [_Piece(terminal=False, absorb=self.call_object), _Piece(closing)]
        pieces = []
        in_units = calls.arguments is not None and calls.arguments.units
        for number, (part, options) in enumerate(
            zip(calls.parts, calls.part_options, strict=True)
        ):
            hole, after = part.hole, part.after
            following = calls.parts[number + 1 :][:1]
            if in_units and following and following[0].hole == "arguments":
                # Key/value units follow (and the closer, where there are none): each
                # opens with whitespace of its own, one bounded run after the literal.
                after = after.rstrip()
            if hole in ("name", "id"):
                rule = NAME_RULE if hole == "name" else "call-id"
                rule = self.hole_rule(rule, calls.parts, hole)
                if any(not text.strip() for text, _ in options):
                    # The reader may also end the name at its word's end (real
                    # outputs leave the literal out): whitespace after the word ends
                    # it there, so the literal follows the word as written.
                    close = (
                        _join([literal(after.rstrip()), _trail(after)])
                        if after.strip()
                        else ""
                    )
                    pieces.append(_Piece(_join(["ws", rule, close])))
                    continue
                pieces.append(_Piece(_join(["ws", rule, _marker(after)])))
            elif hole == "index":
                pieces.append(_Piece(_join(["ws", "[0-9]+", _marker(after)])))
            elif calls.arguments is not None and not calls.arguments.units:
                python = calls.arguments.literal == "python"
                pieces += [self.object_piece(python), _Piece(self.closer(after))]
            else:
                # The units and the call's closer: where a tool's schema makes them
                # more than one lexeme, the marks around them are lexemes of their own,
                # and every rule of the units ends with the closer (none could end
                # before whitespace it also runs on through, which llguidance loses).
                text, _ = self.tagged_arguments(after)
                closer = self.closer(after)
                close = self.named("arguments-close", closer) if closer else ""
                self.hooks.update(TOOL_ARGUMENTS="units", TOOL_CLOSE=close)
                units = self.add(ARGUMENTS_RULE, _join([text, close]))
                pieces.append(_Piece(units, terminal=False))
        return pieces

    def tagged_arguments(self, closing: str) -> tuple[str, bool]:
        """Key/value units up to ``closing``, as the generated reader takes them; and
        whether that is terminal."""
        assert self.fmt.calls is not None and self.fmt.calls.arguments is not None
        arguments = self.fmt.calls.arguments
        key_end = arguments.key_end
        if not key_end.strip():
            raise ValueError("tools.arguments.key_end has no text")
        # A key holds no space and does not start what may come instead of a unit (the
        # separator, the closing literal): a key written without a prefix would
        # otherwise run past them.
        firsts = "".join(text.strip()[:1] for text in (arguments.separator, closing))
        chars = _intersection(name_class(key_end), (True, firsts))
        if self.quoted is not None:
            # No quote either where a quote inside a string ends it only before the
            # next key (compiler/quoted_strings.py): a key that held one would let a
            # lexeme run on past a quote that ends a segment of the string.
            chars = _intersection(chars, (True, QUOTES))
        # Nor, where the separator or the closing literal starts with the key's prefix,
        # with what follows the prefix there (a closer read as a unit).
        prefix = arguments.key_prefix.strip()
        marks = [text.strip() for text in (arguments.separator, closing)]
        lead = "".join(mark[len(prefix)] for mark in marks
                       if prefix and mark.startswith(prefix) and len(mark) > len(prefix))  # fmt: skip
        if lead:
            first = _class(*_intersection(chars, (True, lead)))
            key = self.add("argument-key", f"{first} {_class(*chars)}*")
        else:
            key = self.add("argument-key", _class(*chars, repeated=True))

        def head_of(
            key: str, exact: bool = False, attribute: str = "argument-attribute-closed"
        ) -> str:
            """A unit's text up to its value; ``exact``: the whitespace the last
            literal ends with as the reader takes it (once, or not at all), where
            more would be the value's own text (a suffixed value)."""
            last = arguments.value_start or key_end
            end = literal(key_end.strip()) if exact and not arguments.value_start else (
                _marker(key_end, lead=False))  # fmt: skip
            head = _join([_marker(arguments.key_prefix), "ws", key, "ws", end])
            if arguments.value_start:
                head = _join([head, attribute] + (
                    [] if exact else [_trail(arguments.value_start)]))  # fmt: skip
            if exact:
                head = _join([head, _optional(last[len(last.rstrip()) :])])
            return head

        # What stands between the key and the value (an attribute naming its type):
        # the template's word for a type where the analysis read them (a tool's
        # schema picks the one its value's type has: ``tool-attribute``), else any
        # text up to value_start.
        unit_attribute = "argument-attribute-closed"
        if arguments.value_start:
            start = arguments.value_start.strip()
            words = dict(arguments.type_attributes)
            if words:
                written = {kind: literal(word + start) for kind, word in words.items()}
                self.add(
                    "argument-attribute-closed",
                    _alternatives(list(dict.fromkeys(written.values()))),
                )
                self.hooks["TOOL_ATTRIBUTES"] = written
                unit_attribute = ATTRIBUTE_HOLE
            else:
                self.extend(
                    without(
                        "argument-attribute", start, closed="argument-attribute-closed"
                    )
                )
        head = head_of(key)
        separator = _marker(arguments.separator)
        # What a tool's schema replaces (runtime/schema_gbnf.py): one unit, ``tool-key``
        # standing for its key and ``tool-value`` for its value and what closes it.
        self.hooks.update(TOOL_UNIT_SEPARATOR=separator, TOOL_KEY_CHARS=(*chars, lead))
        if getattr(arguments, "elements", None) is not None:
            # Objects and arrays may be written as elements, which this grammar takes
            # as the text of a value.
            self.hooks["TOOL_RAW_KINDS"] = ("object", "array")
        suffix = arguments.value_suffix
        if arguments.suffixed:
            core = suffix.strip()
            if arguments.value_suffix_names_key and KEY_SLOT in core:
                # The closing text repeats the key: the value runs up to the part
                # before the key (the closest this grammar gets).
                before, _, after = core.partition(KEY_SLOT)
            else:
                before, after = core, None
            self.extend(
                without(
                    "argument-value", before or after, closed="argument-value-closed"
                )
            )
            value = "argument-value-closed"
            close = ["ws", literal(before or after or "")]
            if before and after is not None:
                value = _join([value, key, literal(after) if after else ""])
                close += [KEY_HOLE, literal(after) if after else ""]
            # A value written as it is (a string: an enum's, a const's) is the text
            # between the key's literal and the suffix less one run of the whitespace
            # each writes there (the reader's _read_to): no other whitespace around it.
            exact_close = [
                _optional(suffix[: len(suffix) - len(suffix.lstrip())])
            ] + close[1:]
            # A unit ends at its suffix's text: what follows it (another unit, the
            # separator, the closer) opens with whitespace of its own, one bounded run
            # between the two, as in the Lark grammar and the structural tag.
            unit = self.add("argument", _join([head, value]))
            raw = value
            if before and after is not None:
                # The value runs to the closer that names its key (elements inside it
                # are closed by closers that name theirs).
                raw = _join(
                    [
                        "argument-value-closed+",
                        KEY_HOLE,
                        literal(after) if after else "",
                    ]
                )
            self.hooks.update(
                TOOL_UNIT=_join([head_of(KEY_HOLE, attribute=unit_attribute), VALUE_HOLE]),
                TOOL_RAW_VALUE=raw,
                TOOL_ANY_VALUE=raw,
                TOOL_VALUE_CLOSE=_join(close),
                TOOL_UNIT_EXACT=_join(
                    [head_of(KEY_HOLE, exact=True, attribute=unit_attribute), VALUE_HOLE]
                ),
                TOOL_VALUE_CLOSE_EXACT=_join(exact_close),
            )
            if not separator:
                return f"{unit}*", True
            return f"( {unit} ( {_join([separator, unit])} )* )?", True
        # A value the reader finds the end of: a string between the format's quotes, a
        # JSON (or Python) value, or a bare word (read as text).
        options = []
        if self.quoted is not None:
            options.append(self.quoted_strings(closing))
        elif arguments.string_open:
            opening, closing = arguments.string_open, arguments.string_close
            self.extend(
                without(
                    "argument-string-text", closing, closed="argument-string-closed"
                )
            )
            string = self.add(
                "argument-string", f"{literal(opening)} argument-string-closed"
            )
            options.append(string)
        if arguments.syntax is not None:
            options += self.own_values(arguments.syntax)
        else:
            prefix = self.value_rules(arguments.literal == "python")
            if self.quoted is not None and len(self.quoted.quotes) == len(QUOTES):
                # Every string a unit's value may be is the format's own (its quotes
                # both): no Python string besides (one that ended at an escaped quote
                # would end where the reader does not).
                self.add("py-literal", _PY_LITERAL)
                options.append("py-literal")
            else:
                options.append(f"{prefix}-value")
            options.append(
                self.add("argument-word", _class(True, _NOT_IN_WORDS, repeated=True))
            )
        value = _alternatives(options)
        self.hooks.update(
            TOOL_UNIT=_join([head_of(KEY_HOLE, attribute=unit_attribute), VALUE_HOLE]),
            TOOL_RAW_VALUE=options[0] if arguments.string_open else "argument-word",
            TOOL_ANY_VALUE=value,
        )
        if "py-literal" in options:
            # At a unit's value (not inside a list or an object), a schema's strings
            # and any values are the format's own (compiler/runtime/schema_gbnf.py).
            self.hooks["TOOL_TOP_VALUES"] = {"py-string": options[0], "py-value": value}
        unit = self.add("argument", f"{self.add('argument-head', head)} {value}")
        following = self.add("argument-next-head", _join([separator, head]))
        more = self.add("argument-next", f"{following} {value}")
        return f"( {unit} {more}* )?", False

    def quoted_strings(self, closing: str) -> str:
        """Rules ``argument-string…`` for the strings of units whose reader ends one at
        the first quote a follower follows (compiler/quoted_strings.py): each its
        opening quote and text through its first quote, then segments through the next
        quote that start with no follower; the rule of them all. A segment is a lexeme
        (a rule made of strings and classes) and the string is none (``lexeme-break``
        between them), so that llguidance decides at each quote whether the string
        goes on: a segment dies at the byte a follower, which is the next lexemes of
        the grammar (the separator and the next key, one lexeme; the closer, then the
        section's closer or the next call's opening), is whole. Where a section
        follows the calls, a segment that starts with the closer starts with its
        lexeme, ``arguments-close``, as what follows a closing quote would."""
        assert self.quoted is not None
        close = self.named("arguments-close", self.closer(closing))
        self.add(_BREAK, f'( "\\x00" {_BREAK} )?')
        found = []
        for index, (quote, escaped) in enumerate(self.quoted.quotes):
            name = f"argument-string-{index}"
            mark = literal(quote)
            if escaped:
                plain = char_class(quote + "\\", True)
                text = f'( {plain} | "\\\\" {ANY_CHAR} )*'
            else:
                text = f"{char_class(quote, True)}*"
            first = self.add(f"{name}-first", f"{mark} {text} {mark}")
            more = []
            for kind, ways in self.quoted.segments(separator_apart=False).items():
                rule = f"{name}-{kind}"
                self.extend(_segment_rules(rule, quoted_strings.segment(ways, quote, escaped)))
                self.add(rule, _join([f"{rule}-0", mark]))
                more.append(f"{_BREAK} {rule}" if kind == "plain" else f"{close} {rule}")
            found.append(self.add(name, f"{first} ( {' | '.join(more)} )*"))
        return self.add("argument-string", _alternatives(found))

    def own_values(self, syntax: ValueSyntax) -> list[str]:
        """Rules ``own-…`` for values in a syntax of the template's own, strings being
        ``argument-string``; the options of an argument's value: an object, an array,
        or a word or number (any word: the reader types it by the tools' schema)."""
        self.value_rules(False)  # json-number
        word = self.add("own-word", _class(True, _NOT_IN_OWN_WORDS, repeated=True))
        words = [
            literal(w) for w in (syntax.null_word, syntax.true_word, syntax.false_word)
        ]
        self.add("own-value", _alternatives(
            ["argument-string", "own-object", "own-array", "json-number"] + words))  # fmt: skip
        # A key holds no space, nor the first character of what ends it or of a mark.
        marks = (syntax.key_end, syntax.member_separator, syntax.object_open,
                 syntax.object_close, syntax.array_open, syntax.array_close)  # fmt: skip
        stops = WS_CHARS + "".join(mark.strip()[:1] for mark in marks)
        key = self.add("own-key", _class(True, stops, repeated=True))
        member = _join([_marker(syntax.key_prefix), "ws", key, "ws", literal(syntax.key_end.strip()),
                        "ws", "own-value"])  # fmt: skip
        self.add("own-member", member)
        for kind, opening, closing, separator, item in (
            (
                "object",
                syntax.object_open,
                syntax.object_close,
                syntax.member_separator,
                "own-member",
            ),
            (
                "array",
                syntax.array_open,
                syntax.array_close,
                syntax.item_separator,
                "own-value",
            ),
        ):
            more = f"( ws {literal(separator.strip())} ws {item} )*"
            # (empty: the closing mark after the opening's whitespace, no more)
            close = literal(closing)
            body = f"{literal(opening)} ws ( {item} {more} ws {close} | {close} )"
            self.add(f"own-{kind}", body)
        return ["own-object", "own-array", word]

    def call_object(self, lead: str) -> str:
        """A call written as one JSON object: its name, arguments (and other fields) in
        any order; ``lead`` goes into the first lexemes."""
        assert self.fmt.calls is not None and self.fmt.calls.json is not None
        fields = self.fmt.calls.json
        python = fields.literal == "python"
        prefix = self.value_rules(python)
        # A name inside a JSON (or Python) string: no quotes, no escapes.
        rule = self.add(NAME_RULE, _class(True, NOT_IN_NAMES + "\"'\\", repeated=True))
        name = _alternatives(
            [f"{literal(q)} {rule} {literal(q)}" for q in _quotes(python)]
        )
        if fields.arguments_as_string:
            arguments = f"{prefix}-string"  # not typed by the tools' schemas
        else:
            arguments = self.add(ARGUMENTS_RULE, f"{prefix}-object")
            self.hooks["TOOL_ARGUMENTS"] = "object"
        opening = _join([lead, "ws", literal("{"), "ws"])
        if fields.name_is_key:
            head = self.named("call-open", f'{opening} {name} ws ":" ws')
            return f"{head} {arguments} json-close"
        shape = fields.member_tree
        # The other members (an index, a type): short (``ID_LONGEST``), as the reader
        # takes none of them.
        short = self.short_string(python)
        digits = "[0-9]{0,%d}" % (INTEGER_DIGITS - 1)
        words = ["true", "false", "null"] + (["True", "False", "None"] if python else [])
        other = self.add(
            "call-other-value",
            _alternatives(
                [short, f'( "0" | "-"? [1-9] {digits} )'] + [literal(w) for w in words]
            ),
        )
        leaves = {
            "name": (name, True),
            "arguments": (arguments, False),
            "other": (other, True),
        }
        if fields.id is not None:
            # The id: of the form the template checks (Mistral's nine letters or
            # digits), or short; a string all the same.
            node = shape = _copied(shape)
            for key in fields.id[:-1]:
                node = node[key]
            node[fields.id[-1]] = "id"
            form = _id_class(self.fmt.polyfills.call_ids)
            if form is not None:
                chars = self.add("call-id-chars", form)
                form = _alternatives(
                    [f"{literal(q)} {chars} {literal(q)}" for q in _quotes(python)]
                )
            leaves["id"] = (short if form is None else form, True)
        return self.json_object("call", shape, opening, leaves, python)

    def short_string(self, python: bool) -> str:
        """A JSON (or Python) string of at most ``ID_LONGEST`` characters, an escape
        one."""
        if not python:
            return self.add(
                "short-string", '"\\"" json-char{0,%d} "\\""' % ID_LONGEST
            )
        quoted = []
        escape = '"\\\\" [^\\x00-\\x1F]'
        for quote in _quotes(True):
            plain = char_class(quote + "\\" + NOT_IN_NAMES[:0x20], True)
            mark = literal(quote)
            quoted.append(f"{mark} ( {plain} | {escape} ){{0,{ID_LONGEST}}} {mark}")
        return self.add("short-string", _alternatives(quoted))

    def json_object(
        self, prefix: str, shape: dict, opening: str, leaves: dict, python: bool
    ) -> str:
        """An object with the fields of ``shape`` (key -> leaf name or sub-shape), each
        once, in any order, and no others (the reader refuses members the template
        never writes): rules ``{prefix}-…``, one per set of fields seen
        (``{prefix}-10``: the first seen, not the second). Fields whose leaf is
        ``other`` may be left out. ``opening``: the terminal text up to the first key.
        """
        keys = list(shape)
        required = {
            i for i, key in enumerate(keys) if shape[key] not in ("other", "id")
        }
        comma = f"ws {literal(',')} ws"

        def quoted(key: str) -> str:
            return _alternatives([literal(q + key + q) for q in _quotes(python)])

        def member(index: int, head_start: str) -> str:
            """The field ``keys[index]`` after ``head_start``."""
            role = "first" if head_start == opening else "then"
            head = f'{head_start} {quoted(keys[index])} ws ":" ws'
            leaf = shape[keys[index]]
            if isinstance(leaf, dict):
                return self.json_object(f"{prefix}-{index}", leaf, head, leaves, python)
            text, terminal = leaves[leaf]
            name = f"{prefix}-{role}-" + (f"field-{index}" if leaf == "other" else leaf)
            if terminal:
                return self.named(name, f"{head} {text}")
            return f"{self.named(name, head)} {text}"

        def state(seen: frozenset) -> str:
            label = f"{prefix}-" + "".join(
                "1" if i in seen else "0" for i in range(len(keys))
            )
            if label not in self.rules:
                unseen = [i for i in range(len(keys)) if i not in seen]
                fields = [f"{member(i, comma)} {state(seen | {i})}" for i in unseen]
                if required <= seen:
                    fields.append("json-close")
                self.add(label, _alternatives(fields))
            return label

        return _alternatives(
            [f"{member(i, opening)} {state(frozenset([i]))}" for i in range(len(keys))]
        )

    def calls(self, variant: str) -> str:
        """The calls to the end of the output: ``full`` (from any whitespace and the
        trigger on), ``rest`` (after the trigger), ``root`` (from the trigger)."""
        name = f"calls-{variant}"
        if name in self.rules:
            return name
        calls = self.fmt.calls
        assert calls is not None
        first = calls.opener or calls.start
        lead = {
            "full": _marker(first),
            "rest": _trail(first),
            "root": _marker(first, lead=not first.strip()),
        }[variant]
        if calls.opener:
            lead = _join([lead, _marker(calls.start)])
        if variant == "rest" and self.fmt.content_as_unit:
            # After the separator that ends the content: the first call's start.
            lead = _join([_trail(calls.separator), _marker(calls.start)])
        pieces = [_Piece(lead)] + self.call_pieces() + [_Piece(*self.more_calls())]
        return self.add(name, self.sequence(name, pieces)[0])

    def more_calls(self) -> tuple[str, bool]:
        """Further calls, the section's end, the markers that may follow calls and the
        end of the output: a rule, and whether it is terminal."""
        if "calls-more" not in self.rules:
            calls = self.fmt.calls
            assert calls is not None
            markers = list(self.fmt.stop) + list(calls.end_of_turn_after_calls)
            closing = self.closer(calls.section_end)
            pieces = [_Piece(closing)]
            if self.parallel:
                lead = _join([_marker(calls.separator), _marker(calls.start)])
                text, terminal = self.sequence(
                    "call-next", [_Piece(lead)] + self.call_pieces()
                )
                following = self.add("call-next", text)
                pieces.insert(0, _Piece(f"{following}*", terminal))
            ending = []
            if markers:
                literals = [literal(marker) for marker in dict.fromkeys(markers)]
                most = MARKERS_AFTER_CALLS - 1  # ``end`` takes the last one
                ending.append(f"( ws {_alternatives(literals)} ){{0,{most}}}")
            if calls.content_after_calls:
                pieces.append(
                    _Piece(self.content_after_calls(markers, ending), terminal=False)
                )
            else:
                pieces += [_Piece(text) for text in ending] + [_Piece("end")]
            text, self.more_terminal = self.sequence("calls-more", pieces)
            self.add("calls-more", text)
        return "calls-more", self.more_terminal

    def content_after_calls(self, markers: list[str], ending: list[str]) -> str:
        """The end of the output after the calls where the template writes content
        there: none, or text up to an end-of-turn marker (one lexeme with it), or
        text to the end; never the trigger (that would be a broken call)."""
        ends = _join(ending + ["end"])
        options = [ends]
        stops = list(dict.fromkeys(marker for marker in markers if marker))
        closing = {stop: f"calls-after-closed-{n}" for n, stop in enumerate(stops)}
        if self.word and self.word not in stops:
            stops.append(self.word)
        made = self.extend(without("calls-after-body", stops, closed=closing))
        options += [_join([rule, ends]) for rule in closing.values() if rule in made]
        options.append("calls-after-body end")
        return self.add("calls-after", _alternatives(options))

    # content and reasoning

    def region(self, name: str, end: str | None, opener: str) -> list[str]:
        """Alternatives for free text (after ``opener``, GBNF) that runs to the end of
        the output or is closed by ``end``, and that holds the trigger only where calls
        follow it."""
        word = self.word if self.has_calls else ""
        stops = [s for s in (end, word) if s]
        if not stops:
            if self.choice == "required":
                return []  # text to the end holds no call
            return [
                (
                    self.named(f"{name}-open-any", f"{opener} any end")
                    if opener
                    else "any end"
                )
            ]
        closing = {}
        if end:
            closing[end] = f"{name}-closed"
        if word and word != end:
            closing[word] = f"{name}-trig"
        made = self.extend(without(f"{name}-body", stops, closed=closing))

        def opened(rule: str, then: str = "") -> str:
            if not opener:
                return _join([rule, then])
            return self.named(
                f"{name}-open-{rule[len(name) + 1:]}", _join([opener, rule, then])
            )

        # tool_choice: "none" leaves out the calls, "required" what ends without one.
        calls, ending = self.choice != "none", self.choice != "required"
        options = []
        if f"{name}-closed" in made:
            if word and calls:
                after = (
                    f"( {self.calls('full')} | end )" if ending else self.calls("full")
                )
                options.append(f"{opened(name + '-closed')} {after}")
            elif ending:
                options.append(opened(f"{name}-closed", "end"))
        if ending:
            options.append(opened(f"{name}-body", "end"))
        if f"{name}-trig" in made and calls:
            options.append(f"{opened(name + '-trig')} {self.calls('rest')}")
        return options

    def reply(self, opened: bool = False) -> list[str]:
        """Alternatives for content and calls to the end of the output; each takes the
        whitespace before it (``opened``: the prompt wrote the content's opener)."""
        content = self.fmt.content
        if not content.wrapped:
            shape = self.fmt.calls.output_shape if self.fmt.calls else None
            if shape is not None:
                # No marker opens a call: content is what does not start like one.
                body = self.add("content-body", _not_starting_with(shape))
                options = [] if self.choice == "required" else [f"{body} end"]
                return options + ([] if self.choice == "none" else [self.calls("full")])
            return self.region("content", None, "")
        options = self.region("content", content.end, f"ws {literal(content.start)}")
        if opened:
            # The output starts inside the content: its closer ends it.
            options += self.region("content", content.end, "")
        if not content.always_wrapped:
            # The opener is written only after reasoning (or only where tools are
            # given): bare text is content too.
            return options + self.region("text" if content.end else "content", None, "")
        calls = self.has_calls and self.choice != "none"
        return (
            options
            + ([self.calls("full")] if calls else [])
            + ([] if self.choice == "required" else ["end"])
        )

    def output(self, enable_thinking: bool | None) -> str:
        """The root of a whole output for one thinking setting (None: a request that
        gives none, the template's default). Each alternative runs to the end of the
        output, end-of-turn marker included: a lexeme that could end where the ``end``
        lexeme starts would swallow its whitespace."""
        reasoning = self.fmt.reasoning
        options = self.reply(self.fmt.content.opened(enable_thinking))
        if not options:
            raise ValueError(f"{self.fmt.slug}: no output holds a call ({self.choice})")
        single = len(options) == 1 and re.fullmatch(r"[a-z][a-z0-9-]*", options[0])
        reply = options[0] if single else self.add("reply", " | ".join(options))
        if not reasoning.has_block:
            return reply
        start = reasoning.start
        # With tools given or not (a prompt may open the block only without them):
        # the grammar admits what parse reads either way.
        settings = [
            reasoning.opened_by_prompt(enable_thinking, tools)
            for tools in (False, True)
        ]
        opened, always = any(settings), all(settings)
        # (None: the prompt may have opened it, and the text is reasoning where the
        # closer comes, the answer where it does not)
        maybe = not opened and None in settings
        led = ""
        if not opened and (not start or maybe):
            # Without an opener the text is reasoning only where the closer comes, and
            # otherwise the answer: reasoning is text up to the closer that holds no
            # call (one lexeme that a call's trigger ends, so that it never races the
            # answer's).
            word = self.word if self.has_calls else ""
            stops = [stop for stop in (reasoning.end, word) if stop]
            self.extend(
                without(
                    "reasoning-lead", stops, closed={reasoning.end: "reasoning-led"}
                )
            )
            led = f"reasoning-led {reply}"
            if not start:
                return f"{led} | {reply}"
        self.extend(without("reasoning-body", reasoning.end, closed="reasoning-closed"))
        if start:
            opener = f"ws {literal(start)}{'?' if opened else ''}"
            closed = self.add("reasoning-open-closed", f"{opener} reasoning-closed")
            unclosed = self.add("reasoning-open-body", f"{opener} reasoning-body end")
        else:
            closed, unclosed = "reasoning-closed", "reasoning-body end"
        # Reasoning the output ends in holds no call.
        unclosed_ends = [] if self.choice == "required" else [unclosed]
        return " | ".join(
            [f"{closed} {reply}"]
            + ([led] if led else [])
            + unclosed_ends
            + ([] if always else [reply])
        )


def _quotes(python: bool) -> list[str]:
    """The quotes a string may be written in."""
    return ['"', "'"] if python else ['"']


def build(
    fmt: Format,
    *,
    enable_thinking: bool | None,
    tools=None,
    tool_choice="auto",
    parallel_tool_calls: bool = True,
) -> str:
    """The grammar of a whole output for one thinking setting, ``tool_choice`` and
    ``parallel_tool_calls`` (as the module's ``grammar`` takes them), tool calls
    included: their names limited to those of ``tools`` when given. (The tools'
    schemas are the module's to apply, at run time: compiler/runtime/grammar.py.)"""
    choice, name = _tool_choice(tool_choice)
    grammar = _Grammar(fmt, choice, parallel_tool_calls)
    text = grammar.text(grammar.output(enable_thinking))
    return with_tool_names(text, fmt, tools if name is None else [{"name": name}])


def build_tool_calls(
    fmt: Format, *, tools=None, tool_choice="auto", parallel_tool_calls: bool = True
) -> str | None:
    """The grammar of the tool-call part of an output, from where the trigger fires
    (None for a format without tool calls, or where ``tool_choice`` is "none")."""
    choice, name = _tool_choice(tool_choice)
    grammar = _Grammar(fmt, "auto", parallel_tool_calls)
    if not grammar.has_calls or choice == "none":
        return None
    assert fmt.calls is not None
    calls = grammar.calls("root" if fmt.calls.trigger else "full")
    return with_tool_names(
        grammar.text(calls), fmt, tools if name is None else [{"name": name}]
    )


def _tool_choice(tool_choice) -> tuple[str, str | None]:
    """("auto" | "none" | "required", the function named or None)."""
    if tool_choice in ("auto", "none", "required"):
        return tool_choice, None
    function = tool_choice.get("function") if isinstance(tool_choice, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str) or not name:
        raise ValueError(f"tool_choice {tool_choice!r}")
    return "required", name


# The tool_choice and parallel_tool_calls settings other than the default ("auto", True)
# whose grammars a module keeps, as the rules that differ from the default's.
SETTINGS = (("auto", False), ("required", True), ("required", False), ("none", True))


def choices(fmt: Format) -> dict:
    """The module's ``_GRAMMAR_CHOICES``: (tool_choice, parallel_tool_calls,
    enable_thinking (None: the template's default), "tools" for the tool-call
    grammar) → the rules of that setting's grammar that differ from the grammar of
    its thinking setting. Thinking off and the default are left out where they change
    the same rules as thinking on; the runtime then takes those."""
    out: dict = {}
    if not fmt.has_calls:
        return out
    for thinking in (True, False, None):
        base = _rule_map(build(fmt, enable_thinking=thinking))
        for choice, parallel in SETTINGS:
            text = build(fmt, enable_thinking=thinking, tool_choice=choice,
                         parallel_tool_calls=parallel)  # fmt: skip
            changed = {
                n: body for n, body in _rule_map(text).items() if base.get(n) != body
            }
            if (
                changed
                if thinking
                else changed != out.get((choice, parallel, True), {})
            ):
                out[(choice, parallel, thinking)] = changed
    base = _rule_map(build_tool_calls(fmt) or "")
    single = _rule_map(build_tool_calls(fmt, parallel_tool_calls=False) or "")
    changed = {n: body for n, body in single.items() if base.get(n) != body}
    if changed:
        out[("auto", False, "tools")] = changed
    return out


def _rule_map(text: str) -> dict[str, str]:
    return dict(line.split(" ::= ", 1) for line in text.split("\n") if line)


def hooks(fmt: Format) -> dict:
    """The constants through which a module's ``grammar`` holds arguments to the tools'
    schemas (TOOL_ARGUMENTS, TOOL_UNIT, ...: compiler/runtime/format.py)."""
    grammar = _Grammar(fmt)
    if not grammar.has_calls:
        return {}
    grammar.calls("full")
    return dict(grammar.hooks)


def with_tool_names(text: str, fmt: Format, tools) -> str:
    """The grammar with its ``tool-name`` rule limited to the function names of
    ``tools`` (OpenAI tool definitions); unchanged when they name none. The generated
    module's ``grammar`` does the same at run time for tools without schemas."""
    names = []
    for tool in tools or ():
        function = tool.get("function", tool) if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str) and name:
            # Names inside JSON strings are written JSON-escaped.
            in_json = fmt.calls is not None and fmt.calls.format == "json"
            names.append(
                json.dumps(name, ensure_ascii=False)[1:-1] if in_json else name
            )
    names = list(dict.fromkeys(names))
    if not names or f"\n{NAME_RULE} ::= " not in text:
        return text
    rule = f"{NAME_RULE} ::= " + " | ".join(literal(name) for name in names)
    # Rules end at "\n" only: a literal may hold U+2028 or U+0085, which splitlines() cuts at.
    lines = text.split("\n")
    return "\n".join(
        rule if line.startswith(f"{NAME_RULE} ::= ") else line for line in lines
    )


# A call id pattern the GBNF writes as it stands: one character class, counted.
_ID_PATTERN = re.compile(r"\[[A-Za-z0-9-]+\]\{[0-9]+(,[0-9]+)?\}")


def _id_class(pattern: str | None) -> str | None:
    """The GBNF of a call id's characters where the template checks ids against
    ``pattern`` and it is a counted character class (the only form the analysis
    records, compiler/probe.py); None for any other pattern (any string, then)."""
    if pattern is None or not _ID_PATTERN.fullmatch(pattern):
        return None
    return pattern


def _within(form: str, chars: tuple[bool, str]) -> bool:
    """Whether every character an id of ``form`` (``_id_class``'s: ASCII letters,
    digits and "-" in one class) may hold is one of ``chars`` (negated, chars)."""
    found = re.match(r"\[[^\]]*\]", form)
    assert found is not None
    negated, given = chars
    return all(
        (char in given) != negated
        for char in map(chr, range(0x80))
        if re.fullmatch(found.group(), char)
    )


def _copied(shape: dict) -> dict:
    return {
        key: _copied(leaf) if isinstance(leaf, dict) else leaf
        for key, leaf in shape.items()
    }
