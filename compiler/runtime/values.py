"""Reading values: where a JSON (or Python) literal ends, decoding it, typing a
tagged value by the tools' JSON schemas, and encoding text as JSON."""

from __future__ import annotations

import ast
import json
import re
import warnings

from .format import (
    ARG_STRING_CLOSE,
    ARG_STRING_OPEN,
    ELEMENT_CLOSE,
    ELEMENT_ITEM,
    ELEMENT_OPEN,
    ELEMENT_SEPARATOR,
    LITERAL,
    OWN_ARRAY_CLOSE,
    OWN_ARRAY_OPEN,
    OWN_ITEM_SEPARATOR,
    OWN_KEY_END,
    OWN_KEY_PREFIX,
    OWN_MEMBER_SEPARATOR,
    OWN_OBJECT_CLOSE,
    OWN_OBJECT_OPEN,
    OWN_WORDS,
    RAW_STRINGS,
    VERBATIM_CLOSE,
)
from .text import _match, _read_to, _skip_space

# A string, or what is left of one: characters other than its quote and backslash,
# and escapes. One match jumps over it, however long.
_STRING_REST = {
    '"': re.compile(r'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL),
    "'": re.compile(r"[^'\\]*(?:\\.[^'\\]*)*", re.DOTALL),
}
_NESTED_MARK = re.compile(r"[\"'(){}\[\]]")
_TOP_MARK = re.compile(r"[\"'(){}\[\],;\s]")
_CLOSING = {"{": "}", "[": "]", "(": ")"}


class _ValueEnd:
    """Where a JSON (or Python) literal ends, read in one piece or in several:
    strings skipped with their escapes, brackets counted. Regular expressions jump
    to the next character that matters, so the cost is a few steps per bracket or
    string, not per character."""

    def __init__(self):
        self.depth = []
        self.quote = None
        self.escaped = False
        self.read = 0  # characters read in earlier pieces

    def attempt(self, text):
        """Scan ``text`` as a piece that may not be the last: None when the literal
        goes on past it; else its end (or -1), with the scanner left as it was
        before ``text``, so that the text can be read afresh. Undoing costs time in
        proportion to ``text``, not to the depth of the nesting: only as many
        brackets as ``text`` has characters can have been closed."""
        depth = self.depth
        keep = max(0, len(depth) - len(text))
        below = depth[keep:]
        state = self.quote, self.escaped, self.read
        end = self.scan(text, 0, False)
        if end is not None:
            del depth[keep:]
            depth += below
            self.quote, self.escaped, self.read = state
        return end

    def scan(self, text, at=0, final=True):
        """The end of the literal in ``text`` (which goes on from earlier pieces),
        -1 when it is broken, or None when it goes on past ``text``."""
        depth = self.depth
        index = at
        size = len(text)
        while index < size:
            if self.quote:
                if self.escaped:
                    self.escaped = False
                    index += 1
                    continue
                index = _STRING_REST[self.quote].match(text, index).end()  # type: ignore[union-attr]
                if index == size:
                    break
                if text[index] != self.quote:
                    # a backslash that ends the piece: it escapes what comes next
                    self.escaped = True
                    index += 1
                    continue
                self.quote = None
                index += 1
                if not depth:
                    return index
                continue
            found = (_NESTED_MARK if depth else _TOP_MARK).search(text, index)
            if found is None:
                index = size
                break
            index = found.start()
            char = text[index]
            if char in _CLOSING:
                depth.append(_CLOSING[char])
            elif char in ")]}":
                if not depth:  # a closer after a bare literal: the literal ends
                    return index if index > at or self.read else -1
                if depth.pop() != char:
                    return -1  # a bracket closed by another kind
                if not depth:
                    return index + 1
            elif char in "\"'":
                self.quote = char
            else:  # whitespace or a separator after a bare literal
                return index if index > at or self.read else -1
            index += 1
        self.read += size - at
        if not final:
            return None
        return size if not depth and not self.quote and self.read else -1


def _value_end(text, at):
    """The end of the JSON or Python literal starting at ``at``, or -1."""
    return _ValueEnd().scan(text, at)


_INFINITY = float("inf")


def _finite_float(text):
    """A JSON number with a fraction or an exponent, where a double holds it."""
    value = float(text)
    if value in (_INFINITY, -_INFINITY):
        raise ValueError("a number beyond a double's range")
    return value


def _no_constant(name):
    raise ValueError(name)  # NaN and Infinity are no JSON values


# The json module's reader, less what other JSON readers reject (JavaScript's, serde,
# Go's): NaN, Infinity and a number too large for a double (1e999) are no values.
_DECODER = json.JSONDecoder(parse_float=_finite_float, parse_constant=_no_constant)


def _json_loads(text):
    """``json.loads(text)`` for a str, a number that would not be finite a
    ValueError."""
    return _DECODER.decode(text)


def _load(text, literal):
    """The value a JSON (or, where the format writes them, Python) literal denotes;
    ValueError when it denotes none (too deep a nesting, a number that would not be
    finite included)."""
    try:
        return _DECODER.decode(text)
    except (ValueError, RecursionError):
        if literal != "python":
            raise ValueError("not a JSON value") from None
    try:
        # A string with an escape Python does not know ('a\\ b') is read as written,
        # whatever the process's warning filters say (-W error would refuse it).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text.strip(), mode="eval")
            value = ast.literal_eval(_SetsAsLists().visit(tree))
        # bytes or a complex number is no JSON value, nor is an infinity
        json.dumps(value, allow_nan=False)
    except (SyntaxError, MemoryError, RecursionError, TypeError, ValueError) as error:
        raise ValueError(str(error)) from None
    return value


def _python_string(text):
    """The string written as ``text``, between one of Python's quotes: as Python
    reads it, or where Python reads none (a line break inside, a quote of its own
    left unescaped) the text between the quotes as it stands."""
    try:
        value = _load(text, "python")
    except ValueError:
        value = None
    return value if isinstance(value, str) else text[1:-1]


class _SetsAsLists(ast.NodeTransformer):
    """A Python set display as a list of its items in the order written: JSON has
    no set, and an array is what it stands for (``{'a', 'b'}`` is ``["a", "b"]``).
    One Python refuses (an item that is a list, dict or set) stays a set, and
    ``literal_eval`` refuses it."""

    def visit_Set(self, node):
        self.generic_visit(node)
        if any(isinstance(item, (ast.List, ast.Dict, ast.Set)) for item in node.elts):
            return node
        return ast.List(elts=node.elts, ctx=ast.Load())


# -- values in the template's own syntax (Gemma 4: <|"|>text<|"|>, {key:value}, None) --

# A word (null, true, false as the template writes them) or a number; what ends one.
_OWN_TOKEN = re.compile(r"[\w.+-]+")
_OWN_NOT_TOKEN = re.compile(r"[^\w.+-]")
_OWN_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?\Z")
_OWN_PATTERNS: dict = {}


def _own_patterns():
    """For the format's own syntax, made once: the marks that open or close a value
    (one pattern, longest first); what ends a string (an escape, in group
    ``escape``, where strings are quoted); the marks that begin a longer one; the
    proper beginnings of any mark (a lone backslash too, where strings are quoted);
    the longest mark's length."""
    key = (
        ARG_STRING_OPEN,
        ARG_STRING_CLOSE,
        RAW_STRINGS,
        OWN_OBJECT_OPEN,
        OWN_OBJECT_CLOSE,
        OWN_ARRAY_OPEN,
        OWN_ARRAY_CLOSE,
    )
    found = _OWN_PATTERNS.get(key)
    if found is None:
        opening = {ARG_STRING_OPEN, OWN_OBJECT_OPEN, OWN_ARRAY_OPEN}
        closing = {OWN_OBJECT_CLOSE, OWN_ARRAY_CLOSE}
        marks = sorted((opening | closing) - {""}, key=len, reverse=True)
        close = re.escape(ARG_STRING_CLOSE)
        string_end = close if RAW_STRINGS else r"(?P<escape>\\.)|" + close
        # (an escape stands as a mark of two characters: a backslash at the end of a
        # piece waits for the character it escapes)
        every = set(marks) | {ARG_STRING_CLOSE} | (set() if RAW_STRINGS else {"\\_"})
        found = (
            re.compile("|".join(map(re.escape, marks)) or "(?!)"),
            re.compile(string_end, re.DOTALL),
            {
                mark
                for mark in every
                if any(o != mark and o.startswith(mark) for o in every)
            },
            {mark[:size] for mark in every for size in range(1, len(mark))},
            max(map(len, every)),
        )
        _OWN_PATTERNS[key] = found
    return found


class _OwnEnd:
    """Where a value written in the template's own syntax ends, read in one piece or
    in several: a string up to its closing mark (its escapes skipped where strings
    are quoted), an object or array up to the mark that closes it, a word or number
    up to the first character that cannot be part of one. A piece that may end in
    the middle of a mark (or of a mark that more text would make a longer one) is
    read up to there (``safe``); the rest begins the next piece."""

    def __init__(self):
        found = _own_patterns()
        self.marks, self.string_end, self.longer, self.beginnings, self.reach = found
        self.depth = []  # the marks that close the open objects and arrays
        self.started = False
        self.string = False
        self.token = False
        self.safe = 0

    def _settled(self, found, text, index, final):
        """``found`` (a match from ``index`` on, or None) where more text cannot
        change it; else None, with ``safe`` where the unsettled text begins."""
        if final:
            return found
        size = len(text)
        held = size
        for at in range(max(index, size - self.reach + 1), size):
            if text[at:] in self.beginnings:
                held = at  # a mark may begin here
                break
        if found is not None and found.start() < held:
            if found.group() not in self.longer or found.start() + self.reach <= size:
                return found
            held = found.start()  # it may still become a longer mark
        self.safe = held
        return None

    def scan(self, text, at=0, final=True):
        """The end of the value in ``text`` (which goes on from earlier pieces), -1
        when it is broken, or None when it goes on past ``text``: read then up to
        ``safe``, and the text from there on must begin the next piece."""
        depth = self.depth
        size = len(text)
        index = at
        while True:
            if self.string:
                found = self.string_end.search(text, index)
                if self._settled(found, text, index, final) is None:
                    return -1 if final else None
                index = found.end()  # type: ignore[union-attr]
                if found.lastgroup == "escape":  # type: ignore[union-attr]
                    continue
                self.string = False
                if not depth:
                    return index
                continue
            if self.token:
                found = _OWN_NOT_TOKEN.search(text, index)
                if found is not None:
                    return found.start()
                self.safe = size
                return size if final else None
            if not self.started:
                if index < size and _OWN_TOKEN.match(text, index):
                    self.started = self.token = True
                    continue
                found = self.marks.match(text, index)
                if self._settled(found, text, index, final) is None:
                    if final or index < self.safe:
                        return -1  # neither a word nor a mark that opens a value
                    return None
                mark = found.group()  # type: ignore[union-attr]
                if mark not in (ARG_STRING_OPEN, OWN_OBJECT_OPEN, OWN_ARRAY_OPEN):
                    return -1
                self.started = True
            else:
                found = self.marks.search(text, index)
                if self._settled(found, text, index, final) is None:
                    return -1 if final else None
                mark = found.group()  # type: ignore[union-attr]
            index = found.end()  # type: ignore[union-attr]
            if mark == ARG_STRING_OPEN:
                self.string = True
            elif mark == OWN_OBJECT_OPEN:
                depth.append(OWN_OBJECT_CLOSE)
            elif mark == OWN_ARRAY_OPEN:
                depth.append(OWN_ARRAY_CLOSE)
            elif not depth or depth.pop() != mark:
                return -1  # a closing mark of another kind
            elif not depth:
                return index


def _own_typed(text, kind):
    """One whole value written in the template's own syntax, as ``_typed`` types a
    tagged value: a word or number by the tools' schema (a word that is no value is
    the text as written), an object or array as the value it spells (as written
    where the schema says string), a string between the string marks as a string.
    ValueError where it spells none."""
    if _OWN_TOKEN.match(text):
        if kind != "string" and text in OWN_WORDS:
            value = OWN_WORDS[text]
            return value if _stands(value, kind) else text
        if kind != "string" and text in _WORDS:
            value = _WORDS[text]
            return value if _stands(value, kind) else text
        return _typed(text, kind, LITERAL)
    if kind == "string" and not text.startswith(ARG_STRING_OPEN):
        return text
    unread: list = []
    try:
        value, end = _own_item(text, 0, unread)
    except RecursionError:
        raise ValueError("too deep") from None
    if end != len(text):
        raise ValueError("not one value")
    if unread:
        return text  # it holds a number that would not be finite
    if isinstance(value, str) or _stands(value, kind):
        return value
    return text


# How JSON and Python write null, true and false: a model may write them where the
# template writes words of its own (Gemma 4: None, inside an object too); no string
# is written bare in such a syntax, so they mean nothing else.
_WORDS = {
    "null": None,
    "true": True,
    "false": False,
    "None": None,
    "True": True,
    "False": False,
}


def _own_item(text, at, unread):
    """(value, end) of the value written at ``at`` in the template's own syntax, in a
    text that holds it whole; ValueError where none is written there. A number that
    would not be finite is its text, added to ``unread``."""
    if ARG_STRING_OPEN and text.startswith(ARG_STRING_OPEN, at):
        start = at + len(ARG_STRING_OPEN)
        string_end = _own_patterns()[1]
        while True:
            found = string_end.search(text, start)
            if found is None:
                raise ValueError("a string not closed")
            start = found.end()
            if found.lastgroup != "escape":
                break
        inner = text[at + len(ARG_STRING_OPEN) : found.start()]
        if RAW_STRINGS:
            return inner, start
        try:
            return _load(text[at:start], LITERAL), start
        except ValueError:
            return inner, start
    for opening, closing, separator in (
        (OWN_OBJECT_OPEN, OWN_OBJECT_CLOSE, OWN_MEMBER_SEPARATOR),
        (OWN_ARRAY_OPEN, OWN_ARRAY_CLOSE, OWN_ITEM_SEPARATOR),
    ):
        if not text.startswith(opening, at):
            continue
        members: dict = {}
        items: list = []
        at = _skip_space(text, at + len(opening))
        if text.startswith(closing, at):
            return (members if opening == OWN_OBJECT_OPEN else items), at + len(closing)
        while True:
            if opening == OWN_OBJECT_OPEN:
                at = _match(text, at, OWN_KEY_PREFIX)
                found = _read_to(text, at, OWN_KEY_END) if at >= 0 else None
                if found is None:
                    raise ValueError("a member without its key")
                key = text[at : found[0]]
                if not OWN_KEY_PREFIX.strip():
                    key = key.strip()  # a bare key
                if key in members:
                    raise ValueError("a key given twice")  # one value would be lost
                members[key], at = _own_item(text, _skip_space(text, found[1]), unread)
            else:
                item, at = _own_item(text, at, unread)
                items.append(item)
            after = _match(text, at, separator)
            if after >= 0:
                at = _skip_space(text, after)
                continue
            end = _match(text, at, closing)
            if end < 0:
                raise ValueError("an object or array not closed")
            return (members if opening == OWN_OBJECT_OPEN else items), end
    found = _OWN_TOKEN.match(text, at)
    word = found.group() if found else ""
    if word in OWN_WORDS:
        return OWN_WORDS[word], found.end()  # type: ignore[union-attr]
    if word in _WORDS:
        return _WORDS[word], found.end()  # type: ignore[union-attr]
    if not _OWN_NUMBER.match(word):
        raise ValueError("no value")
    try:
        return _json_loads(word), found.end()  # type: ignore[union-attr]
    except ValueError:
        unread.append(word)  # a number that would not be finite
        return word, found.end()  # type: ignore[union-attr]


def _typed(text, kind, literal):
    """A tagged value: the string as written where the tool's schema admits strings
    only (``kind`` "string"), else the JSON (or Python) value it spells where
    ``_stands`` lets it, else the string as written."""
    if kind == "string":
        return text
    try:
        value = _load(text, literal)
    except ValueError:
        return text
    return value if _stands(value, kind) else text


# The types of value that do not stand in for a string the schema also admits: the
# text a string holds as written, and a number (where "10001" may be a zip code,
# reading it as a number could only lose what the model wrote: 1.50, 1e3, 007).
_STRING_FIRST = frozenset(("string", "number", "integer"))


def _stands(value, kind):
    """Whether ``value``, which a tagged value's text spells, is the value rather
    than that text: where the schema (``kind``: the set of JSON types it admits,
    None: any) admits strings, only where it admits the value's type too and that
    is no number."""
    if kind is None or "string" not in kind:
        return True
    return _json_type(value) in kind and _json_type(value) not in _STRING_FIRST


def _json_type(value):
    """The JSON-schema type of a decoded value."""
    if type(value) is str:  # (most often: an enum's strings, at once)
        return "string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, dict):
        return "object"
    return "array" if isinstance(value, (list, tuple)) else "string"


# -- text the template writes in XML's ways: escapes, verbatim marks, elements ------


_ESCAPE_PATTERNS: dict = {}


def _unescaped(text, escapes):
    """``text`` with what the template writes for a character (``escapes``: as
    written -> the character) read back as that character, left to right in one
    pass (``&amp;quot;`` is ``&quot;``)."""
    forms = tuple(escapes)
    pattern = _ESCAPE_PATTERNS.get(forms)
    if pattern is None:
        pattern = re.compile(
            "|".join(map(re.escape, sorted(forms, key=len, reverse=True)))
        )
        _ESCAPE_PATTERNS[forms] = pattern
    return pattern.sub(lambda found: escapes[found.group()], text)


def _verbatim_end(text, at, suffix):
    """(where a string written after the verbatim opening at ``at`` ends, where the
    value's ``suffix`` after its closing mark ends): the first closing mark that the
    suffix follows (a closing mark the suffix does not follow is the string's own
    text); None where none does."""
    while True:
        close = text.find(VERBATIM_CLOSE, at)
        if close < 0:
            return None
        at = close + len(VERBATIM_CLOSE)
        end = _match(text, at, suffix)
        if end >= 0:
            return close, end


# An element's name: up to the text after it in its tag, on one line, not too long.
_ELEMENT_NAME = r"([^\n]{1,256}?)"
_ELEMENT_PATTERNS: dict = {}


def _element_patterns():
    """(a pattern matching a tag: an opening, its name in group ``open``, or a
    closing, in group ``close``; how long a tag with the separator before it may
    be; what every opening begins with) for the format's elements, made once."""
    key = (ELEMENT_OPEN, ELEMENT_CLOSE, ELEMENT_SEPARATOR)
    found = _ELEMENT_PATTERNS.get(key)
    if found is None:
        tags = []
        for group, tag in (("open", ELEMENT_OPEN), ("close", ELEMENT_CLOSE)):
            head, tail = tag.split("{key}")
            name = _ELEMENT_NAME.replace("(", "(?P<%s>" % group, 1)
            tags.append((len(head), re.escape(head) + name + re.escape(tail)))
        # Where one tag's head begins the other's, the longer is tried first.
        tags.sort(key=lambda tag: tag[0], reverse=True)
        reach = (
            len(ELEMENT_SEPARATOR) + 256 + max(len(ELEMENT_OPEN), len(ELEMENT_CLOSE))
        )
        found = (
            re.compile("|".join(pattern for _, pattern in tags), re.DOTALL),
            reach,
            ELEMENT_OPEN.split("{key}")[0],
        )
        _ELEMENT_PATTERNS[key] = found
    return found


class _ElementsEnd:
    """Where elements written one after the other (nested ones inside) end, read in
    one piece or in several: each tag found, openings and closings counted (a
    closing must name the element it closes); at the first level an element ends
    them unless the separator and another opening follow. A tag found is whole
    (its name ends at the first closing text, which both tags share); a piece is
    read up to where a tag may still begin (``safe``), and the rest begins the next
    piece."""

    def __init__(self):
        self.tags, self.reach, self.head = _element_patterns()
        self.tail = ELEMENT_CLOSE.split("{key}")[1]
        self.open = []  # the names of the elements open, innermost last
        self.started = False
        self.safe = 0

    def scan(self, text, at=0, final=True):
        """The end of the elements in ``text`` (which goes on from earlier pieces),
        -1 when they are broken, or None when they go on past ``text``: read then up
        to ``safe``, and the text from there on must begin the next piece."""
        size = len(text)
        index = self.safe = at
        while True:
            if not self.open:
                # At the first level: an opening (the first, or after the separator).
                lead = ELEMENT_SEPARATOR + self.head if self.started else self.head
                if not text.startswith(lead, index):
                    if not final and lead.startswith(text[index:]):
                        break  # an opening may still be written here
                    return index if self.started else -1
                start = index + len(lead) - len(self.head)
                found = self.tags.match(text, start)
                if found is None and not final and self._open_name(text, start):
                    break  # the tag's name may still end
                if found is None or found.group("open") is None:
                    return index if self.started else -1
                self.started = True
            else:
                found = self.tags.search(text, index)
                if found is None:
                    self.safe = max(index, size - self.reach + 1)
                    break
            index = self.safe = found.end()
            name = found.group("open")
            if name is not None:
                self.open.append(name)
            elif self.open.pop() != found.group("close"):
                return -1  # a closing that names another element
        if final:
            return index if self.started and not self.open else -1
        self.safe = min(size, self.safe)
        return None

    def _open_name(self, text, start):
        """Whether more text could still make a tag of the text at ``start`` (a head
        whose name has not met its end, a newline or its longest length)."""
        name = start + len(self.head)
        if text.find("\n", name) >= 0 or len(text) - name > 256 + len(self.tail):
            return False
        return text.find(self.tail, name + 1) < 0


def _elements_value(text, kind):
    """The object (an array, where every member is an item) that elements written
    one after the other spell, ``text`` holding them whole: a member holding
    elements is one too, any other member's text is a number, true, false or null
    where it spells one, else a string. ValueError where they spell none (a key
    given twice, text beside elements)."""
    tags = _element_patterns()[0]
    members: list = []
    outer: list = []  # (the members of each enclosing element, its name)
    at = 0
    while True:
        found = tags.match(text, at)
        if found is None or found.group("open") is None:
            raise ValueError("no element opens here")
        name = found.group("open")
        at = found.end()
        inner = tags.match(text, at)
        if inner is not None and inner.group("open") is not None:
            outer.append((members, name))
            members = []
            continue
        found = tags.search(text, at)
        if found is None or found.group("close") != name:
            raise ValueError("an element not closed")
        members.append((name, _element_text(text[at : found.start()])))
        at = found.end()
        while outer:
            # the closings of the enclosing elements that end here
            found = tags.match(text, at)
            if found is None or found.group("close") is None:
                break
            parent, name = outer.pop()
            if found.group("close") != name:
                raise ValueError("a closing that names another element")
            parent.append((name, _elements_members(members, None)))
            members = parent
            at = found.end()
        if not outer and at == len(text):
            return _elements_members(members, kind)
        if not text.startswith(ELEMENT_SEPARATOR, at):
            raise ValueError("text beside elements")
        at += len(ELEMENT_SEPARATOR)


def _elements_members(members, kind):
    """The array (every member an item, and the schema does not say object: admit
    objects and no arrays) or object that ``members`` (name, value) make."""
    says_object = kind and "object" in kind and "array" not in kind
    if not says_object and all(name == ELEMENT_ITEM for name, _ in members):
        return [value for _, value in members]
    value = dict(members)
    if len(value) != len(members):
        raise ValueError("a key given twice")
    return value


def _element_text(text):
    """An element's text: a number, true, false or null as JSON writes them, else
    the string as written."""
    if text != text.strip():
        return text
    try:
        value = _json_loads(text)
    except (ValueError, RecursionError):
        return text
    if isinstance(value, (str, list, dict)):
        return text
    return value


class _SchemaTypes:
    """Function name → argument name → how its tagged value is typed (``_kind``),
    from OpenAI tool definitions, read for a name when it is first asked for: a
    request may define many tools, and an output calls few of them. A definition
    that is not shaped as one (no mapping where one belongs) types nothing: the
    caller's mistake must not stop the model's output being read. Where two share a
    name, the last counts."""

    __slots__ = ("_tools", "_read")

    def __init__(self, tools):
        self._tools = tools if isinstance(tools, (list, tuple)) else ()
        self._read: dict = {}

    def get(self, name, default=None):
        found = self._read.get(name)
        if found is None:
            found = self._read[name] = _argument_types(self._tools, name)
        return default if found is _NO_TOOL else found


_NO_TOOL: dict = {}  # (the types of a name no tool has: compared by identity)


def _argument_types(tools, name):
    """Argument name → how the last tool named ``name`` types its value
    (``_kind``), else ``_NO_TOOL``."""
    for tool in reversed(tools):
        function = tool.get("function", tool) if isinstance(tool, dict) else None
        if not isinstance(function, dict) or function.get("name") != name:
            continue
        parameters = function.get("parameters")
        properties = (
            parameters.get("properties") if isinstance(parameters, dict) else None
        )
        if not isinstance(properties, dict):
            return {}
        return _ArgumentKinds(properties, parameters)
    return _NO_TOOL


class _ArgumentKinds:
    """Argument name → how its tagged value is typed (``_kind``), for one tool, each
    read from the schema when first asked for: an output writes few of a tool's
    arguments, and each parse reads the tools afresh."""

    __slots__ = ("_properties", "_root", "_read")

    def __init__(self, properties, root):
        self._properties = properties
        self._root = root
        self._read: dict = {}

    def get(self, key, default=None):
        found = self._read.get(key, _UNREAD)
        if found is _UNREAD:
            field = self._properties.get(key, _UNREAD)
            if field is _UNREAD:
                return default
            found = self._read[key] = _field_kind(field, self._root)
        return found


_UNREAD = object()


# What, beside ``type``, decides the types a schema admits (``_schema_kinds``).
_TYPE_DECIDING = frozenset(
    ("$ref", "const", "enum", "anyOf", "oneOf", "allOf", "nullable")
)


def _field_kind(field, root):
    """``_kind(_schema_kinds(field, root))``, at once where ``field`` names one type
    and nothing else decides (most arguments): a parse reads its tools' schemas
    again each time."""
    if isinstance(field, dict):
        kinds = field.get("type")
        if isinstance(kinds, str) and _TYPE_DECIDING.isdisjoint(field):
            return "string" if kinds == "string" else frozenset((kinds,))
    return _kind(_schema_kinds(field, root))


def _kind(kinds):
    """How a tagged value is typed, from the JSON types its schema admits: "string"
    where strings only (the common case, compared as it is), else those types as a
    frozenset, or None where any."""
    if kinds is None:
        return None
    return "string" if kinds == {"string"} else frozenset(kinds)


# How deep ``$ref``s and ``anyOf``s are followed, and how many schemas are read in
# all: a deeper or larger schema admits any value.
_SCHEMA_DEPTH = 20
_SCHEMA_STEPS = 1000
# How deeply nested a schema the grammars follow (objects, arrays, choices, $refs):
# the values below that depth are any value. Deeper than any real tool's schema;
# llguidance's JSON reader refuses a schema nested some 60 levels deep.
_DEEPEST_SCHEMA = 32


def _schema_kinds(schema, root, depth=0):
    """The JSON types (a set) of the values ``schema`` admits, None where it does not
    say; ``$ref``s (local JSON pointers and anchors) are looked up in ``root``. What a
    schema says: ``type`` (a name or a list; ``nullable``), ``enum`` and ``const``,
    ``anyOf`` and ``oneOf`` (the types of each), ``allOf`` of one schema, and
    ``properties`` or ``items`` without a type. A ``$ref`` that comes back round to
    itself with nothing read between adds no type (``{"anyOf": [{"$ref": "#"},
    {"type": "string"}]}`` admits strings); one that is nothing else says nothing."""
    found = _kinds_of(schema, root, depth, set(), [_SCHEMA_STEPS])
    return None if found is _ROUND else found


# The types of a ``$ref`` read again inside itself (compared by identity): none.
_ROUND: frozenset = frozenset()


def _kinds_of(schema, root, depth, path, steps):
    """``_schema_kinds`` of ``schema``, the ``$ref``s being read in ``path``, at most
    ``steps[0]`` more schemas read."""
    steps[0] -= 1
    if not isinstance(schema, dict) or depth > _SCHEMA_DEPTH or steps[0] < 0:
        return set() if schema is False else None
    ref = schema.get("$ref")
    if ref is not None:
        if not isinstance(ref, str):
            return None
        if ref in path:
            return _ROUND
        path.add(ref)
        found = _kinds_of(_pointed(root, ref), root, depth + 1, path, steps)
        path.discard(ref)
        return found
    if "const" in schema:
        return {_json_type(schema["const"])}
    if isinstance(schema.get("enum"), list):
        return {_json_type(value) for value in schema["enum"]}
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            found = [
                _kinds_of(option, root, depth + 1, path, steps)
                for option in schema[key]
            ]
            if None in found:
                return None
            if found and all(kinds is _ROUND for kinds in found):
                return _ROUND
            return set().union(*found)
    every = schema.get("allOf")
    if isinstance(every, list) and len(every) == 1:
        return _kinds_of(every[0], root, depth + 1, path, steps)
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if isinstance(kinds, list) and kinds and all(isinstance(k, str) for k in kinds):
        return set(kinds) | ({"null"} if schema.get("nullable") is True else set())
    if "properties" in schema or "additionalProperties" in schema:
        return {"object"}
    return {"array"} if "items" in schema or "prefixItems" in schema else None


def _pointed(root, ref):
    """What a local reference points to in ``root``: a JSON pointer (``#/$defs/name``;
    ``#``, the root itself) or a plain name, an anchor (``#zip``: the schema whose
    ``$anchor``, or draft 7's ``$id``, names it), percent-encoded or not. None for
    any other reference (to another document), or one that points to nothing."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    fragment = _unquoted(ref[1:])
    if fragment and not fragment.startswith("/"):
        return _anchored(root, fragment)
    node = root
    for part in fragment.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _unquoted(text):
    """A URI fragment with its percent-escapes (UTF-8 bytes) decoded."""
    if "%" not in text:
        return text
    try:
        return re.sub(
            rb"%([0-9A-Fa-f]{2})",
            lambda found: bytes.fromhex(found.group(1).decode("ascii")),
            text.encode("utf-8"),
        ).decode("utf-8")
    except UnicodeError:
        return text


# Keywords whose values are data, not schemas: no anchor is looked for in them.
_DATA_KEYWORDS = frozenset(("const", "enum", "default", "examples"))


def _anchored(root, name):
    """The first schema in ``root`` (read in document order, each object once) that
    an anchor names ``name``: ``"$anchor": name`` (or ``$dynamicAnchor``), or draft
    7's ``"$id": "#" + name``; None where none does."""
    todo = [root]
    seen: set = set()
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, dict):
            if name in (node.get("$anchor"), node.get("$dynamicAnchor")) or (
                node.get("$id") == "#" + name
            ):
                return node
            items = [v for k, v in node.items() if k not in _DATA_KEYWORDS]
        elif isinstance(node, list):
            items = node
        else:
            continue
        todo += [item for item in reversed(items) if isinstance(item, (dict, list))]
    return None


def _schema_choices(schema, root):
    """[("ref", a ``$ref``) or ("schema", a schema)]: ``schema`` taken apart where
    it chooses without reading any text, as the grammars read it: its ``$ref`` (one
    ``root`` resolves; else any value), ``anyOf`` or ``oneOf`` options, ``allOf`` of
    one schema; ``const`` and ``enum`` come first, ``$ref`` before all."""
    found: list = []
    todo = [schema]
    seen: set = set()  # (a schema that holds itself is read once)
    while todo:
        schema = todo.pop()
        if not isinstance(schema, dict):
            found.append(("schema", schema))
            continue
        if id(schema) in seen:
            continue
        seen.add(id(schema))
        if "$ref" in schema:
            ref = schema["$ref"]
            known = isinstance(ref, str) and _pointed(root, ref) is not None
            found.append(("ref", ref) if known else ("schema", True))
            continue
        if "const" in schema or isinstance(schema.get("enum"), list):
            found.append(("schema", schema))
            continue
        options = next(
            (schema[k] for k in ("anyOf", "oneOf") if isinstance(schema.get(k), list)),
            None,
        )
        every = schema.get("allOf")
        if options is None and isinstance(every, list) and len(every) == 1:
            options = every
        if options is None:
            found.append(("schema", schema))
        else:
            todo += reversed(options)
    return found


def _says_nothing(ref, root):
    """Whether the ``$ref`` leads, through ``_schema_choices``, to nothing but
    ``$ref``s (aliases round a loop): the grammars read it as any value."""
    todo, seen = [ref], {ref}
    while todo:
        for kind, part in _schema_choices(_pointed(root, todo.pop()), root):
            if kind != "ref":
                return False
            if part not in seen:
                seen.add(part)
                todo.append(part)
    return True


def _resolved(schema, root):
    """``schema``, or where its ``$ref`` (a chain of them) points to in ``root``: the
    first schema on the way that is no reference, else ``schema``."""
    seen: set = set()
    found = schema
    while isinstance(found, dict) and isinstance(found.get("$ref"), str):
        if found["$ref"] in seen:
            return schema
        seen.add(found["$ref"])
        found = _pointed(root, found["$ref"])
        if found is None:
            return schema
    return found


# Where a schema holds other schemas: a mapping of them, a list (or, for ``items``,
# one), one schema.
_SUBSCHEMA_MAPS = frozenset(
    ("properties", "patternProperties", "dependentSchemas", "$defs", "definitions")
)
_SUBSCHEMA_LISTS = frozenset(("anyOf", "oneOf", "allOf", "prefixItems", "items"))
_SUBSCHEMA_ONE = frozenset(
    (
        "additionalProperties additionalItems items not if then else contains"
        " propertyNames unevaluatedProperties unevaluatedItems contentSchema"
    ).split()
)
# What names a schema for a $ref: copies in _self_contained are reached by pointer.
_NAMING = frozenset(("$anchor", "$dynamicAnchor", "$id"))


def _self_contained(schema, root):
    """``schema``, a part of the JSON schema ``root`` (or all of it), as a schema of
    its own, for a consumer that reads it alone (llguidance's ``%json``, xgrammar):
    each local ``$ref`` (a pointer or an anchor) points to a copy of its target in
    ``$defs``; one to another document or to nothing is any value, as the GBNF reads
    it (``schema_gbnf``); and what is nested deeper than ``_DEEPEST_SCHEMA`` is any
    value, so that the consumer's JSON reader takes it. A copy: ``schema`` is left
    as it is."""
    names: dict = {}  # id(a target) → its name in $defs
    targets: list = []
    nothing: dict = {}  # $ref → whether it says nothing (_says_nothing)

    def pointer(ref):
        target = _pointed(root, ref) if isinstance(ref, str) else None
        if target is not None and ref not in nothing:
            nothing[ref] = _says_nothing(ref, root)
        if target is None or nothing[ref]:
            return {}
        if id(target) not in names:
            names[id(target)] = "ref-%d" % len(names)
            targets.append(target)
        return {"$ref": "#/$defs/" + names[id(target)]}

    def copy(node, depth):
        if not isinstance(node, dict):
            return node
        if depth > _DEEPEST_SCHEMA:
            return {}
        if "$ref" in node:
            return pointer(node["$ref"])
        out = {}
        for key, value in node.items():
            if key in ("$defs", "definitions") or key in _NAMING:
                continue  # every $ref now points into the new $defs
            if key in _SUBSCHEMA_MAPS and isinstance(value, dict):
                value = {name: copy(item, depth + 1) for name, item in value.items()}
            elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
                value = [copy(item, depth + 1) for item in value]
            elif key in _SUBSCHEMA_ONE:
                value = copy(value, depth + 1)
            out[key] = value
        return out

    out = copy(schema, 0)
    defs: dict = {}
    while len(defs) < len(targets):
        target = targets[len(defs)]
        defs[names[id(target)]] = copy(target, 1)
    if defs and isinstance(out, dict):
        out["$defs"] = defs
    return out


def _sorted_keys(schema):
    """A copy of ``schema`` (self-contained: ``_self_contained``) in which every
    object's ``properties`` come in the order templates that sort keys write them
    (Jinja's ``dictsort``: by the key, case aside), where that is not the schema's
    own order anywhere, else None. The grammars take the members of every object
    in the schema's order, or of every object sorted (a consumer's JSON schema
    reader follows the order ``properties`` lists)."""
    changed = []

    def copy(node, depth):
        if isinstance(node, list):
            return [copy(item, depth + 1) for item in node]
        if not isinstance(node, dict) or depth > _DEEPEST_SCHEMA:
            return node
        out = {}
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                order = sorted(value, key=str.lower)
                if order != list(value):
                    changed.append(key)
                value = {name: copy(value[name], depth + 1) for name in order}
            elif key in _SUBSCHEMA_MAPS and isinstance(value, dict):
                value = {name: copy(item, depth + 1) for name, item in value.items()}
            elif key in _SUBSCHEMA_LISTS or key in _SUBSCHEMA_ONE:
                value = copy(value, depth + 1)
            out[key] = value
        return out

    found = copy(schema, 0)
    return found if changed else None


def _check_tools(tools):
    """Say what is wrong with the tool definitions a grammar or a prompt is made
    from: TypeError where ``tools`` is no list, ValueError naming the definition and
    the keyword where one is not shaped as OpenAI's (a tool of another type than
    "function" is no function, and passes). Reading an output never asks: there the
    caller's mistake must not stop the model's text being read (``_SchemaTypes``)."""
    if tools is None:
        return
    if not isinstance(tools, (list, tuple)):
        raise TypeError("tools is a list of tool definitions, not %s" % _shown(tools))
    for index, tool in enumerate(tools):
        where = "tools[%d]" % index
        if not isinstance(tool, dict):
            raise ValueError(
                "%s is %s, not a tool definition (a dict)" % (where, _shown(tool))
            )
        if tool.get("type", "function") != "function":
            continue
        function = tool.get("function", tool)
        if not isinstance(function, dict):
            raise ValueError(
                "%s['function'] is %s, not a dict" % (where, _shown(function))
            )
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(
                "%s names no function: its name is %s" % (where, _shown(name))
            )
        if function.get("parameters") is not None:
            _check_schema(function["parameters"], "%s (%r) parameters" % (where, name))


# What the keywords that the grammars read must hold: schemas in a list, a mapping
# of names to schemas, one schema.
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "$defs", "definitions")
_SCHEMA_ONE = ("additionalProperties", "additionalItems")


def _check_schema(schema, where):
    """ValueError naming the first keyword of a JSON schema (``where`` names it)
    whose value is of a type the keyword cannot hold. One pass over the schema,
    each object once (a schema that holds itself is not followed round); the path
    to a keyword is spelt out only for the message."""
    todo: list = [(schema, (None, where))]  # (a schema, its path: (parent's, step))
    seen: set = set()
    while todo:
        schema, path = todo.pop()
        if isinstance(schema, bool):
            continue
        if not isinstance(schema, dict):
            raise ValueError(
                "%s is %s, not a JSON schema" % (_path(path), _shown(schema))
            )
        if id(schema) in seen:
            continue
        seen.add(id(schema))
        wrong = _wrong_keyword(schema)
        if wrong:
            raise ValueError("%s: %s" % (_path(path), wrong))
        for key in _SCHEMA_MAPS:
            todo += [
                (item, (path, ".%s.%s" % (key, name)))
                for name, item in (schema.get(key) or {}).items()
            ]
        items = schema.get("items")
        for key in _SCHEMA_LISTS + (("items",) if isinstance(items, list) else ()):
            todo += [
                (item, (path, ".%s[%d]" % (key, at)))
                for at, item in enumerate(schema.get(key) or ())
            ]
        for key in _SCHEMA_ONE + (() if isinstance(items, list) else ("items",)):
            if schema.get(key) is not None:
                todo.append((schema[key], (path, "." + key)))


def _wrong_keyword(schema):
    """What is wrong with the keywords of one schema object (not those inside it),
    or ""."""
    kinds = schema.get("type")
    if kinds is not None and not _names(kinds if isinstance(kinds, list) else [kinds]):
        return "'type' is %s, not a type's name or a list of them" % _shown(kinds)
    required = schema.get("required")
    if required is not None and not (isinstance(required, list) and _names(required)):
        return "'required' is %s, not a list of names" % _shown(required)
    if not isinstance(schema.get("$ref", ""), str):
        return "'$ref' is %s, not a reference" % _shown(schema["$ref"])
    for key in ("enum",) + _SCHEMA_LISTS:
        found = schema.get(key)
        if found is not None and not isinstance(found, list):
            return "'%s' is %s, not a list" % (key, _shown(found))
    for key in ("enum", "const"):
        if key not in schema:
            continue  # (json.dumps sets up an encoder per call: most of a check's cost)
        try:
            json.dumps(schema[key], allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            return "'%s' holds no JSON value" % key
    for key in _SCHEMA_MAPS:
        found = schema.get(key)
        if found is not None and not (isinstance(found, dict) and _names(found)):
            return "'%s' is %s, not names to schemas" % (key, _shown(found))
    return ""


def _path(path):
    """The text of a path ``_check_schema`` keeps as (parent's path, step)."""
    steps = []
    while path is not None:
        path, step = path
        steps.append(step)
    return "".join(reversed(steps))


def _names(values):
    """Whether every one of ``values`` is a str."""
    return all(isinstance(value, str) for value in values)


def _shown(value):
    """``value`` as a message shows it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# The json module's C scanner: the value at an index and where it ends, or
# StopIteration where none starts there (raw_decode, less its Python wrapper).
_SCAN_ONCE = _DECODER.scan_once  # type: ignore[attr-defined]
_SCAN_STRING = json.decoder.scanstring  # type: ignore[attr-defined]
# What the json module takes for whitespace between tokens (it always matches, if
# only the empty string).
_JSON_SPACE = re.compile(r"[ \t\n\r]*")
# The steps of reading an object member by member, each one match: its opening
# brace (after any whitespace at all), a key's colon, and what follows a value (the
# closing brace, group 1, or a comma), with the JSON whitespace around them.
_JSON_OPEN = re.compile(r"\s*\{[ \t\n\r]*")
_JSON_COLON = re.compile(r"[ \t\n\r]*:[ \t\n\r]*")
_JSON_NEXT = re.compile(r"[ \t\n\r]*(?:(\})|,[ \t\n\r]*)")
# json.dumps's own string encoder, without its per-call set-up.
_ENCODE_STRING = json.encoder.encode_basestring  # type: ignore[attr-defined]


def _json_object(values):
    """``json.dumps(values, ensure_ascii=False)`` for arguments read as key/value
    units. Where every key and value is a string (code, paths, prose: the common
    case) the text is put together from json's own string encoder, as json.dumps
    writes it, without the encoder it sets up per call (a few microseconds, most of
    the JSON work of a short call)."""
    for key, value in values.items():
        if not (isinstance(key, str) and isinstance(value, str)):
            return json.dumps(values, ensure_ascii=False)
    if not values:
        return "{}"
    parts: list = []
    for key, value in values.items():
        parts += (", ", _ENCODE_STRING(key), ": ", _ENCODE_STRING(value))
    parts[0] = "{"  # the first member's separator opens the object
    parts.append("}")
    return "".join(parts)  # one join: a long value is copied once


def _json_text(text):
    """``text`` as the inside of a JSON string, as ``json.dumps(...,
    ensure_ascii=False)`` writes it (escaping is per character, so the pieces of
    a string can be escaped one by one)."""
    if '"' in text or "\\" in text or not text.isprintable():
        return _ENCODE_STRING(text)[1:-1]
    return text  # nothing in it to escape


def _read_object(text, at):
    """The JSON (or Python-literal) object written at ``at``, after any whitespace:
    (value, start, end) or None."""
    at = _skip_space(text, at)
    if LITERAL == "json":
        # The json module's C scanner finds the end and decodes in one pass.
        try:
            value, end = _scanned(_SCAN_ONCE, text, at, 0)
        except (ValueError, RecursionError, StopIteration):
            return None
    else:
        end = _value_end(text, at)
        if end < 0:
            return None
        try:
            value = _load(text[at:end], LITERAL)
        except ValueError:
            return None
    return (value, at, end) if isinstance(value, dict) else None


def _read_members(text, at):
    """The JSON object written at ``at``, after any whitespace, member by member:
    ({key: (value, start, end)}, end) or None. Knowing where each value is written
    lets a call keep the model's own text; each value is decoded once, by the json
    module's C scanner. A call object that repeats a key is not well-formed."""
    opened = _JSON_OPEN.match(text, at)
    if opened is None:
        return None
    members: dict = {}
    at = opened.end()
    if text.startswith("}", at):
        return members, at + 1
    try:
        while text.startswith('"', at):
            key, at = _scanned(_SCAN_STRING, text, at, 1)
            if key in members:
                return None
            colon = _JSON_COLON.match(text, at)
            if colon is None:
                return None
            start = colon.end()
            value, at = _scanned(_SCAN_ONCE, text, start, 0)
            members[key] = (value, start, at)
            after = _JSON_NEXT.match(text, at)
            if after is None:
                return None
            if after.group(1):
                return members, after.end()
            at = after.end()
    except (ValueError, RecursionError, StopIteration):
        pass
    return None


def _scanned(scan, text, at, skip):
    """``scan(text, at + skip)``, for one of the json module's C scanners (the
    value at ``at``; the string whose quote is at ``at``, ``skip`` 1): (value,
    end), or what it raises. It reads a piece of the text from ``at`` that grows
    until the answer cannot change: json's error counts the lines of all the text
    before where it is raised, which a run of broken calls would pay at each (the
    square of the text's length). Where ``at`` is within the first piece's length
    of the start, the text is scanned whole: the lines counted are then no more than
    a piece's copy would cost, and a long value near the start is read at once."""
    if at <= _SCAN_PIECE:
        return scan(text, at + skip)
    size = _SCAN_PIECE
    while True:
        piece = text[at : at + size]
        last = at + size >= len(text)
        try:
            value, end = scan(piece, skip)
        except StopIteration as error:
            if last or error.value + _SCAN_MARGIN <= len(piece):
                raise
        except ValueError as error:
            place = getattr(error, "pos", len(piece))
            cut = str(getattr(error, "msg", "")).startswith("Unterminated")
            if last or (place + _SCAN_MARGIN <= len(piece) and not cut):
                raise
        else:
            if last or end + _SCAN_MARGIN <= len(piece):
                return value, at + end
        size *= _SCAN_GROWTH


# The first piece _scanned reads, how far past a value's end (or an error) the
# scanner may have looked to decide it (a number's exponent, a \uXXXX\uXXXX pair),
# and how much larger each next piece is: a scanner stops at the value's end, so a
# piece larger than the value costs only its copy, while each piece too short is
# scanned in vain (doubling scanned a long value about twice over).
_SCAN_PIECE = 1024
_SCAN_MARGIN = 16
_SCAN_GROWTH = 16


def _field(value, path):
    """The value at ``path`` (keys) inside ``value``, or None."""
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value
