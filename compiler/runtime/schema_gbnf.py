"""JSON schemas → GBNF, at call time: rules that hold a tool's arguments to the JSON
schema of its ``parameters``, written the way the format writes arguments (a JSON
object, Python literals, key/value units), and the GBNF text helpers the grammars
are edited with.

What a schema constrains: ``type`` (one or a list; ``nullable``), ``enum``,
``const``, ``properties`` (in the order the schema lists them, or sorted by key),
``required``,
``additionalProperties`` (``false`` closes an object, a schema types the other
members; absent, other members hold any value; a tool with ``"strict": true`` closes
every object), ``items``, ``prefixItems``, ``anyOf`` and ``oneOf`` (either: one of
them), ``allOf`` of one schema, local ``$ref`` (``#/$defs/…``, recursion
included). Bounds: ``minLength``/``maxLength`` of a JSON or Python string, counted
as JSON Schema counts (one item a character or an escape: a Python string held to a
length takes only the escapes that are one character in JSON and Python alike, and
not the format's raw quoted text); ``minItems``/``maxItems`` (``prefixItems``
included); an integer's ``minimum``/``maximum``/``exclusiveMinimum``/
``exclusiveMaximum`` (``_integer_pattern``: exactly the integers in range, no leading
zero). Counts are GBNF's ``x{m,n}``; one above ``_LARGEST_COUNT``, or an integer bound
of more than ``_LONGEST_BOUND`` digits, is not enforced. A value that is the format's
own text up to a closer (``TOOL_RAW_VALUE``: a unit's string, Gemma 4's ``<|"|>…``)
is counted exactly where its ``maxLength`` is enforced (``raw_string``): the text as
the reader reads it (up to the first closer, less the whitespace the suffix starts
with, never holding the next unit's key mark) of at most that many characters, the
rules a product of the characters left and an automaton of the closer
(``_text_rules``), about ``maxLength`` times the closer's length of them; a bound that
needs more than ``_LARGEST_TEXT`` is not enforced, nor is ``minLength`` there. Where
the template's verbatim marks (XML's CDATA) are written, the value between them is
counted. Keywords not listed
(``pattern``, ``format``, a number's bounds, ``multipleOf``, ``uniqueItems``, …) are
not enforced; where a schema says nothing that types its value (``{}``, ``not``,
``if``, ``allOf`` of several, a ``$ref`` to another document) the value is any value.
The rules made here are linear in the schema's size, but for a counted raw value's
(at most ``_LARGEST_TEXT`` of them).
"""

from __future__ import annotations

import json
import re

from .format import (
    ARG_STRING_CLOSE,
    ARG_STRING_OPEN,
    ARG_VALUE_SUFFIX,
    LITERAL,
    OWN_ARRAY_CLOSE,
    OWN_ARRAY_OPEN,
    OWN_ITEM_SEPARATOR,
    OWN_KEY_END,
    OWN_KEY_PREFIX,
    OWN_MEMBER_SEPARATOR,
    OWN_OBJECT_CLOSE,
    OWN_OBJECT_OPEN,
    OWN_VALUES,
    OWN_WORDS,
    RAW_STRINGS,
    SUFFIXED_VALUES,
    TOOL_ANY_VALUE,
    TOOL_ARGUMENTS,
    TOOL_ATTRIBUTES,
    TOOL_CLOSE,
    TOOL_KEY_CHARS,
    TOOL_RAW_KINDS,
    TOOL_RAW_VALUE,
    TOOL_TOP_VALUES,
    TOOL_UNIT,
    TOOL_UNIT_EXACT,
    TOOL_UNIT_SEPARATOR,
    TOOL_VALUE_CLOSE,
    TOOL_VALUE_CLOSE_EXACT,
    VALUE_SUFFIX_NAMES_KEY,
    VERBATIM_CLOSE,
    VERBATIM_OPEN,
)
from .calls import _KEY_MARK
from .values import _DEEPEST_SCHEMA, _pointed, _schema_choices, _schema_kinds

# Whitespace between lexemes (around markers, keys and values, where the reader skips
# any), bounded so that a model held to a grammar cannot write it without end (the
# live run's 135M model, held to an unbounded run, wrote line breaks until its token
# cap, issue 33): at most one line break ("\r\n", "\n" or "\r"), with at most
# WS_BLANKS spaces or tabs before it and after it (one line's end, the next one's
# indentation: eight levels of four). The one bound every export spells in its own
# syntax: the GBNF's ``ws``, the Lark's, the structural tag's, the triggers' inside
# their group; xgrammar's JSON reader counts whitespace characters in a row
# (WS_LONGEST). Where a marker's own whitespace goes beyond it (Gigachat's
# "<|message_sep|>\n\nfunction call"), the exports take that whitespace as written
# too (``ws_fits`` tells which).
WS_BLANKS = 32
WS_GBNF = '[ \\t]{0,%d} "\\r"? "\\n"? [ \\t]{0,%d}' % (WS_BLANKS, WS_BLANKS)
WS_REGEX = "[ \\t]{0,%d}\\r?\\n?[ \\t]{0,%d}" % (WS_BLANKS, WS_BLANKS)
WS_LONGEST = 2 * WS_BLANKS + 2


def ws_fits(text):
    """Whether the bounded whitespace takes ``text``."""
    return re.fullmatch(WS_REGEX, text) is not None


# The rules of JSON values (compiler/codegen/gbnf.py writes the same ones): each
# mark that a lexeme may start or end with carries the whitespace around it, but the
# closing mark of an empty object or array, which follows the opening's.
JSON_RULES = {
    "ws": WS_GBNF,
    "json-value": "json-object | json-array | json-string | json-number"
    ' | "true" | "false" | "null"',
    "json-object": "json-open json-members",
    "json-members": 'json-member ( json-comma json-member )* json-close | "}"',
    "json-member": "json-key json-value",
    "json-key": 'json-string ws ":" ws',
    "json-array": "json-list-open ( json-value ( json-comma json-value )*"
    ' json-list-close | "]" )',
    "json-open": '"{" ws',
    "json-close": 'ws "}"',
    "json-list-open": '"[" ws',
    "json-list-close": 'ws "]"',
    "json-comma": 'ws "," ws',
    "json-string": '"\\"" json-char* "\\""',
    "json-char": '[^"\\\\\\x00-\\x1F] | json-escape',
    "json-escape": '"\\\\" ( ["\\\\/bfnrt] | "u" [0-9A-Fa-f]{4} )',
    "json-number": '"-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?',
    "json-integer": '"-"? ( "0" | [1-9] [0-9]* )',
}
# Where the format writes Python literals, values are read as JSON or else as Python.
PY_RULES = {
    "py-value": 'py-object | py-array | py-string | json-number | "true" | "false"'
    ' | "null" | "True" | "False" | "None"',
    "py-object": "json-open py-members",
    "py-members": 'py-member ( json-comma py-member )* json-close | "}"',
    "py-member": "py-key py-value",
    "py-key": 'py-string ws ":" ws',
    "py-array": "json-list-open ( py-value ( json-comma py-value )* json-list-close"
    ' | "]" )',
    "py-string": '"\\"" ( [^"\\\\\\x00-\\x1F] | "\\\\" [^\\x00-\\x1F] )* "\\""'
    ' | "\'" ( [^\'\\\\\\x00-\\x1F] | "\\\\" [^\\x00-\\x1F] )* "\'"',
}
# A rule that matches nothing but NUL characters (never in an output): not a lexeme.
_BREAK = "lexeme-break"
# A string literal, a character class, or a rule name in GBNF text.
_GBNF_TOKEN = re.compile(
    r'"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|[A-Za-z][A-Za-z0-9-]*'
)
# The characters a JSON string holds unescaped: not these.
_NOT_JSON_CHARS = '"\\' + "".join(map(chr, range(0x20)))


# Counts (of characters, of items) above this are not enforced: llguidance and
# xgrammar read ``x{m,n}`` whatever ``n``, but llama.cpp writes ``n`` copies of ``x``.
_LARGEST_COUNT = 4096
# Integer bounds of more digits than this are not enforced (the rule of a range is
# linear in its bounds' digits).
_LONGEST_BOUND = 100


def _bound(schema, keyword):
    """A count ``schema`` gives under ``keyword`` (``minLength``, ``maxItems``…): a
    non-negative integer (a float with no fraction too) no larger than
    ``_LARGEST_COUNT``; None for any other value, or none."""
    value = schema.get(keyword)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if value != value or value < 0 or value > _LARGEST_COUNT or value != int(value):
        return None
    return int(value)


# The most states (characters of the value left, place in the closer) the rules of
# a counted raw value may have (``_text_rules``: one rule each); a bound that needs
# more is not enforced.
_LARGEST_TEXT = 4096


def _raw_forms(key=None):
    """How a string value is written where the format writes it as its own text up to
    a closer: [(opening, closers, forbidden, not_first)], one per way of writing it,
    as the reader reads it. The value is the text after ``opening``, before the first
    of ``closers``, less the closer itself; it holds none of ``forbidden`` and does not
    start with ``not_first``. None where the format writes strings otherwise, or its
    closer names the key and ``key`` is not given."""
    if SUFFIXED_VALUES:
        core = ARG_VALUE_SUFFIX.strip()
        if VALUE_SUFFIX_NAMES_KEY and "{key}" in core:
            if key is None:
                return None
            core = core.replace("{key}", key)
        # (the reader leaves out the whitespace the suffix starts with, once)
        lead = ARG_VALUE_SUFFIX[
            : len(ARG_VALUE_SUFFIX) - len(ARG_VALUE_SUFFIX.lstrip())
        ]
        closers: tuple = (core, lead + core) if lead else (core,)
        # A value that holds the next unit's key mark is read as cut short there; one
        # that starts with the verbatim mark is read as verbatim.
        forbidden: tuple = (_KEY_MARK,) if _KEY_MARK else ()
        forms = [("", closers, forbidden, VERBATIM_OPEN)]
        if VERBATIM_OPEN:
            # ... between the verbatim marks, as the template writes it (the suffix
            # right after the closing mark): any text but the closing mark and suffix
            forms.append(
                (VERBATIM_OPEN, tuple(VERBATIM_CLOSE + c for c in closers), (), "")
            )
        return forms
    if OWN_VALUES and RAW_STRINGS:
        return [(ARG_STRING_OPEN, (ARG_STRING_CLOSE,), (), "")]
    return None


# ``_text_rules``' answers, by its arguments (a format's few texts; emptied when full).
_TEXT_RULES: dict = {}


def _text_rules(name, closers, forbidden, not_first, most):
    """``_make_text_rules``, made once for each text (each tool's string would make
    it again)."""
    key = (name, closers, forbidden, not_first, most)
    if key not in _TEXT_RULES:
        if len(_TEXT_RULES) >= 64:
            _TEXT_RULES.clear()
        _TEXT_RULES[key] = _make_text_rules(*key)
    return _TEXT_RULES[key]


def _make_text_rules(name, closers, forbidden, not_first, most):
    """GBNF rules (name → body, ``name`` the first) of a text of at most ``most``
    characters that holds none of ``forbidden``, does not start with ``not_first``,
    and ends at the first of ``closers`` (which it holds: they are not counted); None
    where they would be more than ``_LARGEST_TEXT``.

    The states are (characters counted, node of the Aho–Corasick automaton of the
    closers and the forbidden texts): a node's text (its depth) is not yet counted,
    as it may turn out to be a closer's; the characters that leave it are counted
    when the automaton falls back to a shorter node. The rules are deterministic
    (one alternative per character: llguidance refuses some grammars that write
    one text two ways) and one regular expression, so that llguidance reads the
    value with its closer as one lexeme."""
    words = list(closers) + list(forbidden)
    kids: list = [{}]
    depth = [0]
    ends: list = [
        None
    ]  # node → ("closer" | "forbidden", length) of a word ending there
    for index, word in enumerate(words):
        node = 0
        for char in word:
            if char not in kids[node]:
                kids[node][char] = len(kids)
                kids.append({})
                depth.append(depth[node] + 1)
                ends.append(None)
            node = kids[node][char]
        if ends[node] is None or index >= len(closers):
            ends[node] = ("closer" if index < len(closers) else "forbidden", len(word))
    fail = [0] * len(kids)
    queue = [0]
    for node in queue:  # breadth first: a node's failure is shallower than it
        for char, kid in kids[node].items():
            back = fail[node]
            while back and char not in kids[back]:
                back = fail[back]
            fail[kid] = kids[back].get(char, 0) if node else 0
            # (a word the text ends with, this node's or a shorter one's: a
            # forbidden one first)
            shorter = ends[fail[kid]]
            if ends[kid] is None or (shorter is not None and shorter[0] == "forbidden"):
                ends[kid] = shorter or ends[kid]
            queue.append(kid)
    alphabet = sorted({char for word in words for char in word} | set(not_first))

    def step(node, char):
        while node and char not in kids[node]:
            node = fail[node]
        return kids[node].get(char, 0)

    # The states, from the first: (counted, node, how much of ``not_first`` the text
    # so far is, -1 once it is not) → {outcome: characters}; None for any other.
    moves: dict = {}
    todo = [(0, 0, 0 if not_first else -1)]
    while todo:
        state = todo.pop()
        if state in moves:
            continue
        if len(moves) >= _LARGEST_TEXT:
            return None
        counted, node, start = state
        found: dict = {}
        for char in alphabet + [None]:
            after = step(node, char) if char is not None else 0
            at = -1
            if start >= 0 and char == not_first[start]:
                at = start + 1
                if at == len(not_first):
                    continue
            end = ends[after]
            if end is not None and end[0] == "forbidden":
                continue
            if end is not None:
                if counted + depth[node] + 1 - end[1] <= most:
                    found.setdefault("end", []).append(char)
                continue
            more = counted + depth[node] + 1 - depth[after]
            if more <= most:
                found.setdefault((more, after, at), []).append(char)
        moves[state] = found
        todo.extend(outcome for outcome in found if outcome != "end")
    # Only states from which the closer can still be reached.
    alive = set()
    grown = True
    while grown:
        grown = False
        for state, found in moves.items():
            if state not in alive and any(o == "end" or o in alive for o in found):
                alive.add(state)
                grown = True
    if (0, 0, 0 if not_first else -1) not in alive:
        return None
    names = {
        state: f"{name}-{index}" for index, state in enumerate(moves) if state in alive
    }
    names[(0, 0, 0 if not_first else -1)] = name
    rules = {}
    for state, found in moves.items():
        if state not in alive:
            continue
        options = []
        for outcome, chars in found.items():
            if outcome != "end" and outcome not in alive:
                continue
            if None in chars:
                taken = "".join(c for c in alphabet if c not in chars)
                written = _gbnf_class(True, taken or alphabet)
                if not taken:  # (every character: none taken out)
                    written = f"( {written} | {_gbnf_class(False, alphabet)} )"
            elif len(chars) == 1:
                written = _gbnf_literal(chars[0])
            else:
                written = _gbnf_class(False, "".join(chars))
            options.append(
                written if outcome == "end" else f"{written} {names[outcome]}"
            )
        rules[names[state]] = " | ".join(options)
    return rules


def _counted(item, low, high):
    """GBNF for ``low`` to ``high`` (None: any number) of ``item`` in a row."""
    if high is None:
        return item + {0: "*", 1: "+"}.get(low, "{%d,}" % low)
    if high == low:
        return "" if not low else item if low == 1 else "%s{%d}" % (item, low)
    return f"{item}?" if (low, high) == (0, 1) else "%s{%d,%d}" % (item, low, high)


def _integer_range(schema):
    """(least, greatest) integer ``schema``'s ``minimum``, ``maximum``,
    ``exclusiveMinimum`` and ``exclusiveMaximum`` admit (numbers as JSON Schema
    2020-12 writes them; draft 4's booleans read too), None for no bound; a bound
    that is not a finite number, or of more than ``_LONGEST_BOUND`` digits, is
    none."""

    def number(keyword):
        value = schema.get(keyword)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        if value != value or abs(value) >= 10**_LONGEST_BOUND:
            return None  # (NaN, an infinity or too long a bound)
        return value

    low, high = number("minimum"), number("maximum")
    above, below = number("exclusiveMinimum"), number("exclusiveMaximum")
    if schema.get("exclusiveMinimum") is True and low is not None:
        low, above = None, low
    if schema.get("exclusiveMaximum") is True and high is not None:
        high, below = None, high
    # (``x // 1`` floors a float exactly; ``-(-x // 1)`` ceils it)
    least = [-int(-low // 1)] if low is not None else []
    least += [int(above // 1) + 1] if above is not None else []
    most = [int(high // 1)] if high is not None else []
    most += [-int(-below // 1) - 1] if below is not None else []
    return max(least, default=None), min(most, default=None)


def _integer_pattern(low, high, regex=False):
    """The integers from ``low`` to ``high`` (None: no bound on that side), as JSON
    writes them (no leading zero, no "-0"): GBNF, or (``regex``) a regular
    expression; None where no integer is in range. Built digit by digit: its size
    is linear in the bounds' digits."""
    if low is not None and high is not None and low > high:
        return None
    lit, either = (
        (str, lambda parts: "(?:" + "|".join(parts) + ")")
        if regex
        else (_gbnf_literal, lambda parts: "( " + " | ".join(parts) + " )")
    )
    join = "".join if regex else " ".join

    def one(parts):
        return parts[0] if len(parts) == 1 else either(parts)

    def digits(first, last):
        return lit(str(first)) if first == last else "[%d-%d]" % (first, last)

    def span(least, most):
        """Digit strings of one length from ``least`` to ``most`` (leading zeros
        kept: they are what follows a first digit)."""
        same = 0
        while same < len(least) and least[same] == most[same]:
            same += 1
        if same:
            rest = span(least[same:], most[same:]) if same < len(least) else ""
            return join([p for p in (lit(least[:same]), rest) if p])
        rest = len(least) - 1
        first, last = int(least[0]), int(most[0])
        parts = []
        if least[1:] != "0" * rest:
            parts.append(join([lit(least[0]), span(least[1:], "9" * rest)]))
            first += 1
        upper = None
        if most[1:] != "9" * rest:
            upper = join([lit(most[0]), span("0" * rest, most[1:])])
            last -= 1
        if first <= last:
            whole = _counted("[0-9]", rest, rest)
            parts.append(join([p for p in (digits(first, last), whole) if p]))
        if upper is not None:
            parts.append(upper)
        return one(parts)

    def naturals(least, most):
        """The integers from ``least`` (≥ 0) to ``most`` (None: no bound)."""
        parts = []
        if least == 0:
            parts.append(lit("0"))
            least = 1
        if most is not None and most < least:
            return one(parts)
        size = len(str(least))
        if most is not None and len(str(most)) == size:
            return one(parts + [span(str(least), str(most))])
        parts.append(span(str(least), "9" * size))
        longest = None if most is None else len(str(most)) - 1
        if longest is None or longest > size:
            more = None if longest is None else longest - 1
            parts.append(join(["[1-9]", _counted("[0-9]", size, more)]))
        if most is not None:
            parts.append(span("1" + "0" * (len(str(most)) - 1), str(most)))
        return one(parts)

    parts = []
    if low is None or low < 0:
        nearest = 1 if high is None or high >= 0 else -high
        parts.append(join([lit("-"), naturals(nearest, None if low is None else -low)]))
    if high is None or high >= 0:
        parts.append(naturals(0 if low is None or low < 0 else low, high))
    return one(parts)


def _gbnf_literal(text):
    """``text`` as a GBNF string: quotes, backslashes and control characters escaped."""
    named = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    out = []
    for char in text:
        if char in named:
            out.append(named[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append("\\x%02X" % ord(char))
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _gbnf_class(negated, chars):
    """A GBNF character class of ``chars`` (all but them where ``negated``); runs of
    three or more consecutive characters written as ranges."""
    codes = sorted(set(map(ord, chars)))
    out = []
    at = 0
    while at < len(codes):
        end = at
        while end + 1 < len(codes) and codes[end + 1] == codes[end] + 1:
            end += 1
        if end - at >= 2:
            out.append(_class_char(codes[at]) + "-" + _class_char(codes[end]))
        else:
            out.extend(_class_char(code) for code in codes[at : end + 1])
        at = end + 1
    return "[" + ("^" if negated else "") + "".join(out) + "]"


def _class_char(code):
    char = chr(code)
    if char in '"\\]-[^' or code < 0x20 or code == 0x7F:
        return "\\x%02X" % code if char not in '"\\]' else "\\" + char
    return char


def _rules(text):
    """A grammar's rules: name → body, in their order."""
    rules = {}
    # Rules end at "\n" only: a literal may hold U+2028 or U+0085.
    for line in text.split("\n"):
        if line:
            name, _, body = line.partition(" ::= ")
            rules[name] = body
    return rules


def _refs(body):
    """The rule names a body refers to."""
    return {token for token in _GBNF_TOKEN.findall(body) if token[0] not in '"['}


def _renamed(body, names):
    """``body`` with the rule names in ``names`` replaced by their GBNF text."""
    return _GBNF_TOKEN.sub(lambda found: names.get(found.group(), found.group()), body)


def _written(rules):
    """The grammar text of ``root`` and the rules it reaches, in their order."""
    reached = set()
    todo = ["root"]
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo.extend(_refs(rules[name]))
    return "".join(f"{name} ::= {rules[name]}\n" for name in rules if name in reached)


def _seq(parts):
    """GBNF texts in a row (empty ones left out)."""
    return " ".join(part for part in parts if part)


def _alternative(text, other):
    """``text`` or ``other`` (GBNF; "" for nothing at all)."""
    return f"{text} | {other}" if other else f"( {text} )?"


def _either(options):
    """One of ``options`` (GBNF texts; None: no text at all fits); None if none."""
    options = list(dict.fromkeys(option for option in options if option is not None))
    if not options:
        return None
    return options[0] if len(options) == 1 else "( " + " | ".join(options) + " )"


class _Arguments:
    """The rules of one tool's arguments, added to ``rules`` under names that start
    with ``tag``."""

    def __init__(self, rules, tag, schema, strict, split, sort=False, counted=True):
        self.rules = rules
        # Whether a raw value's maxLength is held (``raw_string``): not in the
        # structural tag, whose rules xgrammar would take seconds to compile.
        self.counted = counted
        self.tag = tag
        self.root = schema
        self.strict = strict  # every object closed
        # Every object's members in the schema's order, or (``sort``) sorted by key
        # as templates that sort keys write them (``_ordered``).
        self.sort = sort
        # Where some value is no regular language (recursion, any JSON value), every
        # key, value and mark is a lexeme of its own, as in JSON_RULES: a rule made of
        # several members or items that llguidance took for one lexeme could race a
        # shorter one and be lost (it backs off one byte only). ``_BREAK`` between
        # them keeps such rules from being lexemes.
        self.gap = f" {_BREAK} " if split else " "
        if split:
            rules[_BREAK] = f'( "\\x00" {_BREAK} )?'
        self.made = {}  # body → name: a body written twice is one rule
        # A counted raw value's rule → (closers, forbidden, not_first, most): the
        # text ``_text_rules`` made its rules for (the Lark grammar writes it as one
        # regular expression).
        self.texts: dict = {}
        self.refs = {}  # $ref → the name of its rule
        self.loops: dict = {}  # $ref → the $refs it leads round to (``_loop``)
        self.depth = 0  # how many values (and $refs) the one being made is inside
        self.count = 0
        self.style = "own" if OWN_VALUES else LITERAL
        if OWN_VALUES:
            # The marks of objects and arrays in the template's own syntax, each a
            # lexeme with the whitespace around it (as JSON_RULES' are).
            for name, mark, before, after in (
                ("own-typed-open", OWN_OBJECT_OPEN, "", " ws"),
                ("own-typed-close", OWN_OBJECT_CLOSE, "ws ", ""),
                ("own-typed-comma", OWN_MEMBER_SEPARATOR, "ws ", " ws"),
                ("own-typed-list-open", OWN_ARRAY_OPEN, "", " ws"),
                ("own-typed-list-close", OWN_ARRAY_CLOSE, "ws ", ""),
                ("own-typed-list-comma", OWN_ITEM_SEPARATOR, "ws ", " ws"),
            ):
                rules.setdefault(name, before + _gbnf_literal(mark.strip()) + after)
        for name, body in JSON_RULES.items():
            rules.setdefault(name, body)
        if LITERAL == "python":
            for name, body in PY_RULES.items():
                rules.setdefault(name, body)

    def _name(self):
        self.count += 1
        return f"{self.tag}-{self.count}"

    def _rule(self, body):
        """A rule with this body (named here)."""
        if body not in self.made:
            name = self._name()
            self.made[body] = name
            self.rules[name] = body
        return self.made[body]

    # the arguments of a call

    def arguments(self):
        """The rule of the arguments, as ``TOOL_ARGUMENTS`` says they are written: a
        whole object, its members after the opening brace, or key/value units; None
        where the schema leaves them free, "" where it admits none."""
        schema = self._resolved(self.root)
        if TOOL_ARGUMENTS == "units":
            return self._units(schema)
        members = self._members(schema)
        if members is None or TOOL_ARGUMENTS == "members":
            return members
        return self._rule(f"json-open {members}")

    def _shape(self, schema):
        """(properties, required keys, what other members hold: False none, else a
        schema) of an object schema; None for one that leaves its members free."""
        if not isinstance(schema, dict):
            return None
        properties = schema.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        required = schema.get("required")
        required = set(required) if isinstance(required, list) else set()
        other = False if self.strict else schema.get("additionalProperties", True)
        if not properties and (other is True or other == {}):
            return None
        return properties, required, other

    def _members(self, schema):
        """The members of an object after its opening (closing brace included)."""
        shape = self._shape(schema)
        if shape is None:
            return None
        properties, required, other = shape
        entries = {}
        for key, field in properties.items():
            value = self._value(field)
            if value is not None:
                written = self._key(key)
                member = f"{written}{self.gap}{value}"
                entries[key] = (member, f"json-comma {member}")
        extra = None
        value = self._value(other) if other is not False else None
        if value is not None:
            written = self._other_key(list(properties))
            member = f"{written}{self.gap}{value}"
            extra = (member, f"json-comma {member}")
        return self._ordered(entries, required, extra, "json-close", '"}"')

    def _key(self, key):
        """A member's key and its colon."""
        written = [json.dumps(key, ensure_ascii=False), json.dumps(key)]
        if self.style == "python" and "'" not in key and "\\" not in key:
            written.append("'" + key + "'")
        return self._rule(_either(map(_gbnf_literal, written)) + ' ws ":" ws')

    def _other_key(self, keys):
        """The key of a member the schema does not list, and its colon."""
        word = self._other_word(
            [json.dumps(key, ensure_ascii=False)[1:-1] for key in keys],
            (True, _NOT_JSON_CHARS),
            "json-char",
            "json-escape",
            None,
        )
        options = [f'"\\"" {word} "\\""']
        if self.style == "python":
            escape = self._rule('"\\\\" [^\\x00-\\x1F]')
            single = "'\\" + _NOT_JSON_CHARS[2:]
            char = self._rule(f"{_gbnf_class(True, single)} | {escape}")
            word = self._other_word(keys, (True, single), char, escape, None)
            options.append(f'"\'" {word} "\'"')
        return self._rule(f'{_either(options)} ws ":" ws')

    def _units(self, schema):
        """Key/value units, each as ``TOOL_UNIT`` writes one."""
        shape = self._shape(schema)
        if shape is None:
            return None
        properties, required, other = shape
        entries = {}
        for key, field in properties.items():
            value = self._unit_value(field, key)
            if value is not None:
                entries[key] = self._unit(value, _gbnf_literal(key), field)
        extra = None
        value = self._unit_value(other) if other is not False else None
        if value is not None:
            negated, chars, lead = TOOL_KEY_CHARS
            anything = self._rule(_gbnf_class(negated, chars))
            word = self._other_word(
                list(properties), (negated, chars), anything, None, lead
            )
            extra = self._unit(value, word, other)
        return self._ordered(entries, required, extra, TOOL_CLOSE)

    def _ordered(self, entries, required, extra, close, empty=None):
        """The members (key → (first written, written after another)) in the order
        the schema lists them, or (``sort``) sorted by key, as templates that sort
        them (``dictsort``) write them; then ``extra`` ones and ``close``
        (``_chain``). Every object of a call takes one order: the other exports'
        JSON schema readers follow the order ``properties`` lists, and
        ``_for_tools`` offers the schema's and the sorted one (``_sorted_keys``)."""
        order = sorted(entries, key=str.lower) if self.sort else list(entries)
        return self._chain(
            [(*entries[key], key in required) for key in order], extra, close, empty
        )

    def _attribute(self, schema):
        """The attribute before a unit's value that names its type, as the template
        writes it for the types ``schema`` admits (an integer is a number too)."""
        kinds = self._kinds(schema, 0)
        if kinds is not None and "number" in kinds:
            kinds = kinds | {"integer"}
        written = [
            text
            for kind, text in TOOL_ATTRIBUTES.items()
            if kinds is None or kind in kinds
        ]
        return self._rule(_either(written or list(TOOL_ATTRIBUTES.values())))

    def _unit(self, value, key, schema):
        """(a unit with this key and (value, what closes it, whether the whitespace
        around it is exactly the reader's: ``_unit_value``), the same after the
        separator): the marks around the value are rules of their own, so that
        each is one lexeme with the whitespace it holds."""
        *value, exact = value
        unit = TOOL_UNIT_EXACT if exact and TOOL_UNIT_EXACT else TOOL_UNIT
        head, _, tail = unit.partition("tool-value")
        names = {"tool-key": key}
        if TOOL_ATTRIBUTES:
            names["tool-attribute"] = self._attribute(schema)
        value, close = (_renamed(text, names) for text in value)
        first = self._rule(_renamed(head, names).strip())
        later = first
        if TOOL_UNIT_SEPARATOR:
            written = _renamed(head, names).strip()
            if TOOL_UNIT_SEPARATOR.endswith(" ws") and written.startswith("ws "):
                written = written[3:]  # one bounded run between separator and key
            later = self._rule(_seq([TOOL_UNIT_SEPARATOR, written]))
        after = _seq([close.strip(), _renamed(tail, names).strip()])
        if not after.replace("ws", "").strip():
            after = ""  # what follows starts with whitespace of its own
        rest = _seq([self.gap.strip(), value, self._rule(after) if after else ""])
        return f"{first} {rest}", f"{later} {rest}"

    def _unit_value(self, schema, key=None):
        """(a unit's value, what closes it, whether the whitespace around it is
        exactly what the reader leaves out): the text as written where the value
        is a string (the reader types the rest by the schema); None where no value
        fits. A suffixed value the schema lists is read as written where the
        schema admits strings: whitespace around it would be its own (an enum's
        "19:30" written after a blank line is "\n19:30")."""
        listed = self._listed(schema)
        if SUFFIXED_VALUES:
            if listed is not None:
                written = [
                    _gbnf_literal(v) if isinstance(v, str) else self._literals([v])
                    for v in listed
                ]
                exact = TOOL_VALUE_CLOSE_EXACT if TOOL_UNIT_EXACT else TOOL_VALUE_CLOSE
                kinds = self._kinds(schema, 0)
                if kinds is None or "string" in kinds:
                    return _either(written), exact, True
                return _either(written), TOOL_VALUE_CLOSE, False
            counted = self.raw_string(schema, key)
            if counted is not None:
                # (counted from where the reader starts it: the whitespace the key's
                # literal ends with, once; any other is the value's)
                return counted, "", True
            kinds = self._kinds(schema, 0)
            if kinds is None or "string" in kinds or kinds & set(TOOL_RAW_KINDS):
                return TOOL_RAW_VALUE, "", False
            value = self._value(schema)
            return None if value is None else (value, TOOL_VALUE_CLOSE, False)
        value = self._value(schema)
        if value is None:
            return None
        if TOOL_TOP_VALUES:
            value = _renamed(value, TOOL_TOP_VALUES)  # the format's own, here
        kind = schema.get("type") if isinstance(schema, dict) else None
        if kind == "string" and listed is None and self.style != "own":
            if _bound(schema, "minLength") or _bound(schema, "maxLength") is not None:
                return value, "", False  # its length bounded: only where it is counted
            return _either([TOOL_RAW_VALUE, value]), "", False
        return value, "", False

    def _chain(self, entries, extra, close, empty=None):
        """Members in order, ``entries`` being (first written, written after another,
        required), then any number of ``extra`` ones (first, after another) where
        given, then ``close``: every rule ends with ``close``, so that none is a
        lexeme that could end before whitespace it may also run on through.
        ``empty``: what closes an object with no member (its mark without the
        whitespace before it, which the opening's holds)."""
        empty = empty or close
        some, none = close, empty  # what follows: after a member, and with none yet
        if extra is not None:
            first, later = extra
            some = self._rule(_seq([f"( {later} )*", close]))
            none = self._rule(_alternative(_seq([first, some]), empty))
        for first, later, required in reversed(entries):
            if required:
                some, none = self._rule(_seq([later, some])), self._rule(
                    _seq([first, some])
                )
            else:
                some, none = (
                    self._rule(_alternative(_seq([later, some]), some)),
                    self._rule(_alternative(_seq([first, some]), none)),
                )
        return none

    def _other_word(self, words, chars, anything, escape, lead):
        """A rule for a word of ``chars`` (negated, characters) or ``escape``s that
        is none of ``words``: a rule per node of their trie. ``lead``: None for a
        word that may be empty, else the characters it does not start with."""
        kids: list[dict] = [{}]
        ends = set()
        for word in words:
            node = 0
            for char in word:
                if char == "\\":
                    break  # an escape: a word that holds one is not excluded
                if char not in kids[node]:
                    kids[node][char] = len(kids)
                    kids.append({})
                node = kids[node][char]
            else:
                ends.add(node)
        names = [self._name() for _ in kids]
        negated, alphabet = chars
        for node, options in enumerate(kids):
            written = [
                f"{_gbnf_literal(char)} {names[kid]}" for char, kid in options.items()
            ]
            taken = "".join(options) + ("" if node else lead or "")
            if negated:
                others = _gbnf_class(True, alphabet + taken)
            else:
                rest = "".join(char for char in alphabet if char not in taken)
                others = _gbnf_class(False, rest) if rest else None
            if others is not None:
                written.append(f"{others} {anything}*")
            if escape:
                written.append(f"{escape} {anything}*")
            body = " | ".join(written)
            if node not in ends and (node or lead is None):
                body = f"( {body} )?"
            self.rules[names[node]] = body
        return names[0]

    # values

    def _value(self, schema):
        """GBNF for the values ``schema`` admits (None: no value does): one of the
        schemas it chooses among before any text is read (``_choices``)."""
        if self.depth >= _DEEPEST_SCHEMA:
            return self._any()  # deeper than any real schema: a clear, bounded answer
        self.depth += 1
        try:
            return _either(
                [
                    self._ref(part) if kind == "ref" else self._leaf(part)
                    for kind, part in self._choices(schema)
                ]
            )
        finally:
            self.depth -= 1

    def _choices(self, schema):
        """``schema`` taken apart where it chooses without reading any text
        (``_schema_choices``). (A rule made of one of these and not the rest would
        refer back to itself before any text: a left recursion, which llama.cpp
        refuses.)"""
        return _schema_choices(schema, self.root)

    def _leaf(self, schema):
        """GBNF for the values of a schema that is none of ``_choices``' choices."""
        if not isinstance(schema, dict):
            return None if schema is False else self._any()
        if "const" in schema:
            return self._literals([schema["const"]])
        if isinstance(schema.get("enum"), list):
            return self._literals(schema["enum"])
        every = schema.get("allOf")
        if every is not None or "not" in schema or "if" in schema:
            return self._any()
        kinds = schema.get("type")
        if kinds is None:
            if "properties" in schema or "additionalProperties" in schema:
                kinds = "object"
            elif "items" in schema or "prefixItems" in schema:
                kinds = "array"
            else:
                return self._any()
        kinds = [kinds] if isinstance(kinds, str) else list(kinds)
        if schema.get("nullable") is True:
            kinds.append("null")
        return _either([self._typed(kind, schema) for kind in kinds])

    def _typed(self, kind, schema):
        style = self.style
        if kind == "string":
            if style == "own":
                # the text between the string's marks: counted where it may be
                return self._raw_text(schema) or TOOL_RAW_VALUE
            return self._string(schema)
        if kind == "integer":
            low, high = _integer_range(schema)
            if low is None and high is None:
                return "json-integer"
            found = _integer_pattern(low, high)
            return None if found is None else self._rule(found)
        if kind == "number":
            return "json-number"
        if kind == "boolean":
            return self._literals([True, False])
        if kind == "null":
            return self._literals([None])
        if style == "own" and kind in ("object", "array"):
            # In the template's own syntax, typed as JSON's are.
            if kind == "array":
                return self._array(schema, "own-typed")
            members = self._own_members(schema)
            return (
                self._any()
                if members is None
                else self._rule(f"own-typed-open {members}")
            )
        if style == "own" or kind not in ("object", "array"):
            return self._any()
        if kind == "array":
            return self._array(schema)
        members = self._members(schema)
        if members is None:
            return "py-object" if style == "python" else "json-object"
        return self._rule(f"json-open {members}")

    def _string(self, schema):
        """A JSON (or Python) string of the characters ``minLength`` and
        ``maxLength`` allow: each item one character as JSON Schema counts them
        (an escape is one); None where no length fits."""
        style = self.style
        low, high = _bound(schema, "minLength") or 0, _bound(schema, "maxLength")
        if low == 0 and high is None:
            return "py-string" if style == "python" else "json-string"
        if high is not None and high < low:
            return None
        if style != "python":
            return self._rule(f'"\\"" {_counted("json-char", low, high)} "\\""')
        # Python's escapes that are one character in JSON and in Python alike (an
        # escape Python does not know is two: a backslash and the character).
        escape = self._rule('"\\\\" ( ["\'\\\\bfnrt] | "u" [0-9A-Fa-f]{4} )')
        quoted = []
        for quote in "\"'":
            plain = _gbnf_class(True, quote + "\\" + _NOT_JSON_CHARS[2:])
            char = self._rule(f"{plain} | {escape}")
            mark = _gbnf_literal(quote)
            quoted.append(f"{mark} {_counted(char, low, high)} {mark}")
        return self._rule(" | ".join(quoted))

    def raw_string(self, schema, key=None):
        """The rule of a string of ``schema`` where the format writes one as its own
        text up to a closer (``_raw_forms``; ``key``: the unit's, where the closer
        names it) and ``maxLength`` bounds it: the text of each form with at most that
        many characters (``_text_rules``), its closer included; None where the
        format writes strings otherwise, ``schema`` admits other values than strings,
        sets no bound this enforces, or these rules are not ``counted``. (The Lark
        grammar takes the same texts.)"""
        if self._kinds(schema, 0) != {"string"}:
            return None
        return self._raw_text(schema, key)

    def _raw_text(self, schema, key=None):
        """``raw_string`` for a string ``schema`` admits (among other values)."""
        most = _bound(self._resolved(schema), "maxLength")
        forms = _raw_forms(key)
        if most is None or forms is None or not self.counted:
            return None
        options = []
        for opening, closers, forbidden, not_first in forms:
            text = (closers, forbidden, not_first, most)
            for index in range(len(self.rules) + 1):
                # one rule name per text in these rules: the first free, or the one
                # already holding this text's rules
                name = f"raw{most}-{index}"
                rules = _text_rules(name, *text)
                if rules is None:
                    return None
                if name not in self.rules:
                    self.rules.update(rules)
                    break
                if all(self.rules.get(rule) == body for rule, body in rules.items()):
                    break
            self.texts[name] = text
            options.append(_seq([_gbnf_literal(opening) if opening else "", name]))
        return _either(options)

    def _own_members(self, schema):
        """The members of an object in the template's own syntax after its opening
        (closing mark included); None where the schema leaves them free."""
        shape = self._shape(schema)
        if shape is None:
            return None
        properties, required, other = shape
        entries = {}
        for key, field in properties.items():
            value = self._value(field)
            if value is not None:
                head = _gbnf_literal(OWN_KEY_PREFIX.strip() + key)
                written = self._rule(
                    f"{head} ws {_gbnf_literal(OWN_KEY_END.strip())} ws"
                )
                member = f"{written}{self.gap}{value}"
                entries[key] = (member, f"own-typed-comma {member}")
        extra = None
        value = self._value(other) if other is not False else None
        if value is not None:
            # Other members: any key the format's grammar takes (``own-key``).
            head = (
                _gbnf_literal(OWN_KEY_PREFIX.strip()) + " "
                if OWN_KEY_PREFIX.strip()
                else ""
            )
            written = self._rule(
                f"{head}own-key ws {_gbnf_literal(OWN_KEY_END.strip())} ws"
            )
            member = f"{written}{self.gap}{value}"
            extra = (member, f"own-typed-comma {member}")
        close = _gbnf_literal(OWN_OBJECT_CLOSE.strip())
        return self._ordered(entries, required, extra, "own-typed-close", close)

    def _array(self, schema, marks="json"):
        items = schema.get("items", True)
        prefix = schema.get("prefixItems")
        if isinstance(items, list):
            prefix, items = items, schema.get("additionalItems", True)
        item = self._value(items)
        values = [self._value(position) for position in prefix or []]
        if isinstance(prefix, list) and None in values:
            values, item = values[: values.index(None)], None  # no item fits there
        least, most = _bound(schema, "minItems") or 0, _bound(schema, "maxItems")
        if most is not None and most < least:
            return None
        if most is not None and most < len(values):
            values, item = values[:most], None
        if least > len(values) and item is None:
            return None  # fewer items fit than the array needs
        comma = "own-typed-list-comma" if marks == "own-typed" else "json-comma"
        # The items after the first, from the last on: the prefix's (each left out
        # where the array may end before it), then any number of ``item`` that keeps
        # the count within bounds.
        if item is None:
            rest = ""
        else:
            done = max(len(values), 1)
            more = None if most is None else max(most - done, 0)
            rest = _counted(f"( {comma} {item} )", max(least - done, 0), more)
        for at in range(len(values) - 1, 0, -1):
            rest = _seq([comma, values[at], rest])
            rest = self._rule(f"( {rest} )?" if at >= least else rest)
        first = values[0] if values else item
        # An empty array's closing mark without the whitespace before it (the
        # opening's holds it).
        empty = _gbnf_literal(
            (OWN_ARRAY_CLOSE if marks == "own-typed" else "]").strip()
        )
        if most == 0 or first is None:
            body = empty
        else:
            body = _seq([first, rest, f"{marks}-list-close"])
            body = self._rule(_alternative(body, empty) if least == 0 else body)
        return self._rule(_seq([f"{marks}-list-open", self.gap.strip(), body]))

    def _any(self):
        if self.style == "own":
            return TOOL_ANY_VALUE
        return "py-value" if self.style == "python" else "json-value"

    def _literals(self, values):
        """The values as the format writes them (in each spelling it may use)."""
        written = []
        for value in values:
            if self.style == "own" and isinstance(value, str):
                written.append(ARG_STRING_OPEN + value + ARG_STRING_CLOSE)
                continue
            if self.style == "own" and (value is None or isinstance(value, bool)):
                written += [word for word, meant in OWN_WORDS.items() if meant is value]
                continue
            written.append(json.dumps(value, ensure_ascii=False))
            written.append(json.dumps(value))
            if self.style == "python" and (
                value is None or isinstance(value, (str, bool, int, float))
            ):
                written.append(repr(value))
        return _either(map(_gbnf_literal, written))

    def _listed(self, schema):
        """The values an ``enum`` or ``const`` lists (None for other schemas)."""
        if not isinstance(schema, dict):
            return None
        values = [schema["const"]] if "const" in schema else schema.get("enum")
        return values if isinstance(values, list) and values else None

    def _kinds(self, schema, depth):
        """The JSON types a value ``schema`` admits may have (None: any)."""
        return _schema_kinds(schema, self.root, depth)

    def _ref(self, ref):
        """The rule of the schema ``ref`` points to: one per target, so recursion
        through an object or an array is a rule that refers to itself. ``$ref``s
        that lead round to one another through ``_choices`` alone (aliases,
        ``anyOf``s that hold themselves) admit the same values: one rule for them
        all, of the choices each makes besides them (none: any value)."""
        if ref in self.refs:
            return self.refs[ref]
        loop = self._loop(ref) or [ref]
        name = self._name()
        for each in loop:
            self.refs[each] = name
        options = []
        self.depth += 1  # (a chain of aliases is as deep as its length)
        try:
            for each in loop:
                for kind, part in self._choices(self._pointed(each)):
                    if self.depth >= _DEEPEST_SCHEMA:
                        options.append(self._any())
                    elif kind != "ref":
                        options.append(self._leaf(part))
                    elif part not in loop:
                        options.append(self._ref(part))
        finally:
            self.depth -= 1
        self.rules[name] = _either(options) or self._any()
        return name

    def _loop(self, ref):
        """The ``$ref``s that ``ref`` leads to through ``_choices`` and that lead
        back to it (itself among them), in the order they are found; [] where none
        leads back. The graph is read once from each ``$ref`` first asked about,
        all its loops found then (Tarjan's algorithm, without recursion)."""
        if ref not in self.loops:
            self._find_loops(ref)
        return self.loops[ref]

    def _find_loops(self, start):
        edges: dict = {}  # ref → the refs its choices are

        def nexts(ref):
            if ref not in edges:
                edges[ref] = [
                    part
                    for kind, part in self._choices(self._pointed(ref))
                    if kind == "ref"
                ]
            return [part for part in edges[ref] if part not in self.loops]

        index = {start: 0}  # ref → the order it was found in
        low = {start: 0}
        stack, on_stack = [start], {start}
        walk = [(start, iter(nexts(start)))]
        while walk:
            ref, todo = walk[-1]
            step = next(todo, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    walk.append((step, iter(nexts(step))))
                elif step in on_stack:
                    low[ref] = min(low[ref], index[step])
                continue
            walk.pop()
            if walk:
                low[walk[-1][0]] = min(low[walk[-1][0]], low[ref])
            if low[ref] != index[ref]:
                continue
            members: list = []
            while not members or members[-1] != ref:
                members.append(stack.pop())
                on_stack.discard(members[-1])
            members.reverse()
            looped = len(members) > 1 or ref in edges[ref]
            for member in members:
                self.loops[member] = members if looped else []

    def _resolved(self, schema):
        """``schema``, or what its ``$ref`` points to."""
        for _ in range(20):
            if not isinstance(schema, dict) or not isinstance(schema.get("$ref"), str):
                break
            target = self._pointed(schema["$ref"])
            if target is None:
                break
            schema = target
        return schema

    def _pointed(self, ref):
        """What a local JSON pointer (``#/$defs/name``) in the tool's schema points
        to; None for any other reference."""
        return _pointed(self.root, ref)
