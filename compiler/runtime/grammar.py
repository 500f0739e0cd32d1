"""The grammars a module exposes, with tool names limited to the ``tools`` given."""

from __future__ import annotations

import json

from .format import (
    _GRAMMAR_NO_THINKING,
    GBNF,
    GBNF_TOOLS,
    HAS_CALLS,
    NAMES_IN_JSON,
    TOOL_NAME_RULE,
)


def grammar(*, tools=None, enable_thinking=True):
    """GBNF whose root accepts the outputs ``parse`` reads as well-formed, calls
    included: to the functions ``tools`` names (when it names any)."""
    text = GBNF if enable_thinking else _GRAMMAR_NO_THINKING
    return _with_tool_names(text, tools) if HAS_CALLS else text


def tool_call_grammar(*, tools=None):
    """GBNF whose root accepts the tool calls of an output from where ``TRIGGERS``
    fires on: the grammar a server switches on then (None: this format has no
    tool calls)."""
    if not HAS_CALLS:
        return None
    return _with_tool_names(GBNF_TOOLS, tools)


def _with_tool_names(text, tools):
    """The grammar with its tool-name rule limited to the functions in ``tools``."""
    names = []
    for tool in tools or ():
        function = tool.get("function", tool) if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str) and name:
            # Names inside JSON strings are written JSON-escaped.
            names.append(
                json.dumps(name, ensure_ascii=False)[1:-1] if NAMES_IN_JSON else name
            )
    names = list(dict.fromkeys(names))
    head = TOOL_NAME_RULE + " ::= "
    if not names or "\n" + head not in text:
        return text
    rule = head + " | ".join(map(_gbnf_literal, names)) + "\n"
    lines = text.splitlines(keepends=True)
    return "".join(rule if line.startswith(head) else line for line in lines)


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
