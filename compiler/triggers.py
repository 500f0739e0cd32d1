"""Where a model's tool calls begin, derived from a format's ``Calls`` model
(compiler/model.py): the trigger a server watches for before it switches the tool-call
grammar on (llama.cpp's ``grammar_triggers``), and the same shapes for the grammar,
which keeps them out of content.

* A marker opens the calls (the section's start, else the call's start): a *word*
  trigger.
* That marker also occurs inside another marker of the format (a content or reasoning
  opener): a *pattern*, the marker followed by the call's first hole and the literal
  after it, so that the other marker does not set it off.
* Nothing marks a call (a bare JSON object; a name, then JSON): a *pattern_full*, the
  shape an output made of calls starts with. Its group opens where the calls start,
  which is where a server starts feeding the grammar.

A shape is a list of segments: ``("ws",)`` any run of whitespace, ``("text", s)``
exactly ``s``, ``("class", negated, chars, repeated)`` one (or with ``repeated`` one
or more) characters of a class, ``GROUP`` where the pattern's group opens, ``FEW``
the fewest characters that let the rest match.

Patterns use only the regular-expression syntax that ECMAScript (llama.cpp's
``std::regex``) and Python's ``re`` read alike: escaped literals, classes, ``*``, ``+``
and one group.
"""

from __future__ import annotations

import string
from typing import TYPE_CHECKING

from .charclass import NOT_IN_NAMES, class_body, name_class

if TYPE_CHECKING:
    from .model import Calls

GROUP = ("group",)
FEW = ("few",)


def hole_segment(hole: str, after: str) -> tuple:
    """The segment of a name, id or call-index hole followed by ``after``."""
    if hole == "index":
        return ("class", False, string.digits, True)
    return ("class", *name_class(after), True)


def head_shape(calls: Calls) -> list | None:
    """A tagged call's opening when no section marker precedes it: its start marker,
    the first hole (name, id or index) and the literal after that hole; else None."""
    parts = calls.parts
    if calls.format != "tagged" or calls.opener:
        return None
    if not parts or parts[0].hole == "arguments" or not calls.trigger:
        return None
    after = parts[0].after.strip()
    if not after:
        return None
    return [("text", calls.trigger), hole_segment(parts[0].hole, parts[0].after), ("text", after)]


def _quote(python: bool) -> tuple:
    return ("class", False, "\"'", False) if python else ("text", '"')


def whole_output_shape(calls: Calls | None) -> list | None:
    """What an output made of calls starts with, in a format whose calls no marker
    opens: whitespace, then the call's start, its first hole and the literal after
    it, or the JSON object's opening through the key of the name. None where a marker
    opens the calls (or there are none) or the call starts otherwise."""
    if calls is None or not calls.bare:
        return None
    shape: list = [("ws",), GROUP]
    if calls.format == "json":
        fields = calls.json
        assert fields is not None
        quote = _quote(fields.literal == "python")
        if fields.name_is_key:
            key = ("class", True, NOT_IN_NAMES + "\"'", True)
            return shape + [("text", "{"), ("ws",), quote, key, quote, ("ws",), ("text", ":"),
                            ("ws",), ("text", "{")]  # fmt: skip
        if not fields.name:
            return None
        for index, name in enumerate(fields.name):
            if index:
                shape += [("ws",), ("text", ":"), ("ws",)]
            shape += [("text", "{"), ("ws",), quote, ("text", name), quote]
        return shape + [("ws",), ("text", ":")]
    parts = calls.parts
    if not parts or parts[0].hole == "arguments":
        return None
    shape.append(hole_segment(parts[0].hole, parts[0].after))
    if parts[0].after:
        shape.append(("text", parts[0].after))
    if len(parts) > 1 and parts[1].hole == "arguments":
        if calls.arguments is not None and calls.arguments.encoding == "json":
            shape += [("ws",), ("text", "{")]
    return shape


def content_unit_shape(calls: Calls | None, opener: str) -> list | None:
    """What an output starts with whose content, a unit of the turn opened by
    ``opener``, calls follow (model.Format.content_as_unit): the opener, the content
    (the fewest characters), the call separator, then a call's shape; the group opens
    after the separator, where the calls' grammar takes over. None where no call
    shape is known or the separator is only whitespace."""
    shape = whole_output_shape(calls)
    if shape is None or calls is None or not opener.strip() or not calls.separator.strip():
        return None
    head = [("ws",), ("text", opener.strip()), FEW, ("text", calls.separator.strip()), GROUP]
    return head + [segment for segment in shape if segment != GROUP]


def triggers(calls: Calls | None, other_markers, unit_opener: str = "") -> list[dict]:
    """The spec's ``grammar.triggers`` for a format's calls (None: it has none);
    ``other_markers``: the format's reasoning, content and end-of-turn markers;
    ``unit_opener``: the content's opener where the content is a unit of the turn
    (model.Format.content_as_unit), else ""."""
    if calls is None:
        return []
    marker = calls.trigger
    if marker:
        if any(marker in other for other in other_markers if other and other != marker):
            head = head_shape(calls)
            if head is not None:
                return [{"type": "pattern", "value": regex(head)}]
        return [{"type": "word", "value": marker}]
    shape = whole_output_shape(calls)
    if shape is None:
        return []
    found = [{"type": "pattern_full", "value": regex(shape) + "[\\s\\S]*)"}]
    unit = content_unit_shape(calls, unit_opener) if unit_opener else None
    if unit is not None:
        found.append({"type": "pattern_full", "value": regex(unit) + "[\\s\\S]*)"})
    return found


# -- regular expressions --------------------------------------------------------------

_SPECIAL = set("\\^$.|?*+()[]{}/")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _regex_char(char: str, in_class: bool = False) -> str:
    if char in _NAMED:
        return _NAMED[char]
    if ord(char) < 0x20 or ord(char) == 0x7F:
        return "\\x%02X" % ord(char)
    if char in _SPECIAL or (in_class and char == "-"):
        return "\\" + char
    return char


def regex_literal(text: str) -> str:
    return "".join(_regex_char(c) for c in text)


def regex(shape: list) -> str:
    """A shape as a regular expression (``GROUP`` opens a group the caller closes)."""
    out = []
    for segment in shape:
        if segment[0] == "ws":
            out.append("[ \\t\\n\\r]*")
        elif segment[0] == "group":
            out.append("(")
        elif segment[0] == "few":
            out.append("[\\s\\S]*?")
        elif segment[0] == "text":
            out.append(regex_literal(segment[1]))
        else:
            _, negated, chars, repeated = segment
            body = class_body(chars, lambda char: _regex_char(char, True))
            out.append("[" + ("^" if negated else "") + body + "]" + ("+" if repeated else ""))
    return "".join(out)
