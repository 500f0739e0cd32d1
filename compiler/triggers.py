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

The shapes are the model's (compiler/call_shapes.py); this module writes them as the
spec's triggers, part of the analysis.

Patterns use only the regular-expression syntax that ECMAScript (llama.cpp's
``std::regex``) and Python's ``re`` read alike: escaped literals, classes, ``*``, ``+``,
``?``, ``{m,n}`` and one group. Whitespace inside the group, which a server feeds to the
calls' grammar, is bounded as the grammar bounds it (runtime/schema_gbnf.py), so that the
grammar takes what the trigger fires on; before the group, any.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .call_shapes import content_unit_shape, head_shape, whole_output_shape
from .charclass import class_body
from .runtime.schema_gbnf import WS_REGEX

if TYPE_CHECKING:
    from .model import Calls


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
    grouped = False
    for segment in shape:
        if segment[0] == "ws":
            out.append(WS_REGEX if grouped else "[ \\t\\n\\r]*")
        elif segment[0] == "group":
            out.append("(")
            grouped = True
        elif segment[0] == "few":
            out.append("[\\s\\S]*?")
        elif segment[0] == "text":
            out.append(regex_literal(segment[1]))
        else:
            _, negated, chars, repeated = segment
            body = class_body(chars, lambda char: _regex_char(char, True))
            out.append("[" + ("^" if negated else "") + body + "]" + ("+" if repeated else ""))
    return "".join(out)
