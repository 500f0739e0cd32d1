"""Where a JSON (or Python-literal) value written in a render ends, and what it is.

The analysis finds arguments and whole calls by scanning from an opening bracket to
its match; strings in either quote style are skipped with their escapes. One pass,
no backtracking.
"""

from __future__ import annotations

import ast
import json

_OPEN = {"{": "}", "[": "]", "(": ")"}


def value_end(text: str, at: int) -> int:
    """The end of the bracketed value or quoted string starting at ``at``; -1 if the
    text ends first or brackets do not match."""
    stack: list[str] = []
    quote = None
    index = at
    while index < len(text):
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = None
                if not stack:
                    return index + 1
        elif char in "\"'":
            quote = char
        elif char in _OPEN:
            stack.append(_OPEN[char])
        elif char in ")]}":
            if not stack or stack.pop() != char:
                return -1
            if not stack:
                return index + 1
        elif not stack:
            return -1
        index += 1
    return -1


def read(text: str) -> tuple[object, str] | None:
    """The value a literal denotes and how it is written: ``json`` or ``python``."""
    try:
        return json.loads(text), "json"
    except ValueError:
        pass
    try:
        return ast.literal_eval(text), "python"
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def find_value(text: str, wanted: object) -> tuple[int, int, str] | None:
    """The first bracketed span of ``text`` that denotes ``wanted``: (start, end,
    literal style)."""
    for at, char in enumerate(text):
        if char not in "{[":
            continue
        end = value_end(text, at)
        if end < 0:
            continue
        found = read(text[at:end])
        if found is not None and found[0] == wanted:
            return at, end, found[1]
    return None
