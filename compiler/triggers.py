"""Where a model's tool calls begin, derived from a spec's tools section: the trigger a
server watches for before it switches the tool-call grammar on (llama.cpp's
``grammar_triggers``), and the same shapes for the grammar, which keeps them out of
content.

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
or more) characters of a class, ``GROUP`` where the pattern's group opens.

Patterns use only the regular-expression syntax that ECMAScript (llama.cpp's
``std::regex``) and Python's ``re`` read alike: escaped literals, classes, ``*``, ``+``
and one group.
"""

from __future__ import annotations

import string

WS_CHARS = " \t\n\r"
# A name followed by nothing but whitespace ends where these characters do (the
# generated reader's word end, its ASCII part).
WORD_CHARS = string.ascii_letters + string.digits + "_.:-"
# Characters no name contains: control characters, the space and DEL.
NOT_IN_NAMES = "".join(map(chr, range(0x21))) + "\x7f"
GROUP = ("group",)


def word(tools: dict) -> str:
    """The marker that opens a turn's calls (stripped), or '' when there is none."""
    if tools.get("format", "none") == "none":
        return ""
    section = tools.get("section") or {}
    return (section.get("start") or tools["call"]["start"]).strip()


def name_class(after: str | None) -> tuple[bool, str]:
    """The characters of a name or id hole as (negated, chars), given the literal that
    follows it: with no text in that literal the reader takes word characters; else
    anything but spaces, control characters and the literal's first character."""
    core = (after or "").strip()
    if not core:
        return False, WORD_CHARS
    return True, NOT_IN_NAMES + core[0]


def hole_segment(hole: str, after: str) -> tuple:
    """The segment of a name, id or call-index hole followed by ``after``."""
    if hole == "index":
        return ("class", False, string.digits, True)
    return ("class", *name_class(after), True)


def head_shape(tools: dict) -> list | None:
    """A tagged call's opening when no section marker precedes it: its start marker,
    the first hole (name, id or index) and the literal after that hole; else None."""
    parts = (tools.get("call") or {}).get("parts") or []
    if tools.get("format") != "tagged" or (tools.get("section") or {}).get("start"):
        return None
    if not parts or parts[0]["hole"] == "arguments" or not word(tools):
        return None
    after = parts[0]["after"].strip()
    if not after:
        return None
    return [("text", word(tools)), hole_segment(parts[0]["hole"], parts[0]["after"]), ("text", after)]


def _quote(python: bool) -> tuple:
    return ("class", False, "\"'", False) if python else ("text", '"')


def whole_output_shape(tools: dict) -> list | None:
    """What an output made of calls starts with, in a format whose calls no marker
    opens: whitespace, then the call's start, its first hole and the literal after
    it, or the JSON object's opening through the key of the name. None where a marker
    opens the calls or the call starts otherwise."""
    if tools.get("format", "none") == "none" or word(tools):
        return None
    shape: list = [("ws",), GROUP]
    if tools["format"] == "json":
        fields = tools["json"]
        quote = _quote(fields.get("literal") == "python")
        if fields.get("name_is_key"):
            key = ("class", True, NOT_IN_NAMES + "\"'", True)
            return shape + [("text", "{"), ("ws",), quote, key, quote, ("ws",), ("text", ":"),
                            ("ws",), ("text", "{")]  # fmt: skip
        if not fields.get("name"):
            return None
        for index, key in enumerate(fields["name"].split(".")):
            if index:
                shape += [("ws",), ("text", ":"), ("ws",)]
            shape += [("text", "{"), ("ws",), quote, ("text", key), quote]
        return shape + [("ws",), ("text", ":")]
    parts = tools["call"].get("parts") or []
    if not parts or parts[0]["hole"] == "arguments":
        return None
    shape.append(hole_segment(parts[0]["hole"], parts[0]["after"]))
    if parts[0]["after"]:
        shape.append(("text", parts[0]["after"]))
    if len(parts) > 1 and parts[1]["hole"] == "arguments":
        if (tools.get("arguments") or {}).get("encoding") == "json":
            shape += [("ws",), ("text", "{")]
    return shape


def triggers(tools: dict, other_markers) -> list[dict]:
    """The spec's ``grammar.triggers`` for a tools section; ``other_markers``: the
    format's reasoning, content and end-of-turn markers."""
    marker = word(tools)
    if marker:
        if any(marker in other for other in other_markers if other and other != marker):
            head = head_shape(tools)
            if head is not None:
                return [{"type": "pattern", "value": regex(head)}]
        return [{"type": "word", "value": marker}]
    shape = whole_output_shape(tools)
    if shape is None:
        return []
    return [{"type": "pattern_full", "value": regex(shape) + "[\\s\\S]*)"}]


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


def runs(chars) -> list[tuple[str, str]]:
    """Distinct characters as (first, last) runs of consecutive code points."""
    out: list[list[str]] = []
    for char in sorted(set(chars)):
        if out and ord(char) == ord(out[-1][1]) + 1:
            out[-1][1] = char
        else:
            out.append([char, char])
    return [(first, last) for first, last in out]


def class_body(chars, escape) -> str:
    """A class's characters, runs of three or more written as ranges."""
    parts = []
    for first, last in runs(chars):
        if ord(last) - ord(first) >= 2:
            parts.append(escape(first) + "-" + escape(last))
        else:
            parts.extend(escape(chr(code)) for code in range(ord(first), ord(last) + 1))
    return "".join(parts)


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
        elif segment[0] == "text":
            out.append(regex_literal(segment[1]))
        else:
            _, negated, chars, repeated = segment
            body = class_body(chars, lambda char: _regex_char(char, True))
            out.append("[" + ("^" if negated else "") + body + "]" + ("+" if repeated else ""))
    return "".join(out)
