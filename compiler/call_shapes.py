"""The shapes a format's tool calls start with, derived from its ``Calls`` model
(compiler/model.py): facts of the format that the grammars' emitters read (through the
model: ``Calls.output_shape``) and the analysis writes triggers from
(compiler/triggers.py).

A shape is a list of segments: ``("ws",)`` any run of whitespace, ``("text", s)``
exactly ``s``, ``("class", negated, chars, repeated)`` one (or with ``repeated`` one
or more) characters of a class, ``GROUP`` where the pattern's group opens, ``FEW``
the fewest characters that let the rest match.
"""

from __future__ import annotations

import string
from typing import TYPE_CHECKING

from .charclass import NOT_IN_NAMES, name_class

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
