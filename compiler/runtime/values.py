"""Reading values: where a JSON (or Python) literal ends, decoding it, typing a
tagged value by the tools' JSON schemas, and encoding text as JSON."""

from __future__ import annotations

import ast
import json
import re

from .format import LITERAL
from .text import _skip_space

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


def _load(text, literal):
    """The value a JSON (or, where the format writes them, Python) literal denotes;
    ValueError when it denotes none (too deep a nesting included)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        if literal != "python":
            raise ValueError("not a JSON value") from None
    try:
        value = ast.literal_eval(text.strip())
        json.dumps(value)  # a set, bytes or a complex number is no JSON value
    except (SyntaxError, MemoryError, RecursionError, TypeError, ValueError) as error:
        raise ValueError(str(error)) from None
    return value


def _typed(text, kind, literal):
    """A tagged value: a string where the tool's schema says so, else the JSON (or
    Python) value it spells, else the string as written."""
    if kind == "string":
        return text
    try:
        return _load(text, literal)
    except ValueError:
        return text


def _schema_types(tools):
    """Function name → argument name → JSON-schema type, from OpenAI tool definitions.
    A definition that is not shaped as one (no mapping where one belongs) types
    nothing: the caller's mistake must not stop the model's output being read."""
    types = {}
    for tool in tools if isinstance(tools, (list, tuple)) else ():
        function = tool.get("function", tool) if isinstance(tool, dict) else None
        if not isinstance(function, dict):
            continue
        parameters = function.get("parameters")
        properties = (
            parameters.get("properties") if isinstance(parameters, dict) else None
        )
        if not isinstance(properties, dict):
            properties = {}
        name = function.get("name")
        if not isinstance(name, str):
            continue
        types[name] = {
            key: (field.get("type") if isinstance(field, dict) else None)
            for key, field in properties.items()
        }
    return types


# The json module's C scanner: the value at an index and where it ends, or
# StopIteration where none starts there (raw_decode, less its Python wrapper).
_SCAN_ONCE = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
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
            value, end = _SCAN_ONCE(text, at)
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
            key, at = _SCAN_STRING(text, at + 1)
            if key in members:
                return None
            colon = _JSON_COLON.match(text, at)
            if colon is None:
                return None
            start = colon.end()
            value, at = _SCAN_ONCE(text, start)
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


def _field(value, path):
    """The value at ``path`` (keys) inside ``value``, or None."""
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value
