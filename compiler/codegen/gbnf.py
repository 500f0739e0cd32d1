"""Spec → GBNF grammars, in the dialect DESIGN.md fixes (llama.cpp's, no ``.``).

Every string from a template reaches the grammar through ``literal`` or ``char_class``,
which escape it; nothing else writes template text into a grammar.
"""

from __future__ import annotations

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
    body = "".join(_escape_char(c, True) for c in sorted(set(chars)))
    return "[" + ("^" if negated else "") + body + "]"


ANY_CHAR = "[^\\x00]"


def without(rule: str, stop: str, closed: str | None = None) -> list[str]:
    """Rules for ``rule``: any text in which ``stop`` does not occur; with ``closed``, also
    a rule of that name: such a text followed by ``stop`` (text through the first ``stop``).

    Built from the automaton that tracks how much of ``stop`` the text currently ends
    with (Knuth–Morris–Pratt): state ``k`` means the last ``k`` characters match the
    first ``k`` of ``stop``. ``{rule}-{k}-{q}`` is a return: a walk that leaves state
    ``k``, stays above it, and first comes back to ``k`` or below at ``q``. A text is a
    sequence of returns to 0, then possibly a step up to 1 and returns to 1, and so on.

    Written with ``*`` and no recursion, so that each rule is one regular expression:
    llguidance lexes it as one lexeme (the body together with its closing marker, instead
    of single characters racing the marker's literal, which fails on a text holding two
    or more characters of the marker) and its Earley parser never meets right recursion
    (which it caps at a few thousand items a row).
    """
    if not stop:
        raise ValueError("without(): empty stop string")
    size = len(stop)
    fail = [0] * (size + 1)
    k = 0
    for i in range(1, size):
        while k and stop[i] != stop[k]:
            k = fail[k]
        if stop[i] == stop[k]:
            k += 1
        fail[i + 1] = k

    def step(state: int, char: str) -> int:
        while state and stop[state] != char:
            state = fail[state]
        return state + 1 if stop[state] == char else 0

    alphabet = sorted(set(stop))
    # (k, q) -> the options of the return, each a list of items: a character of
    # ``stop`` (a 1-tuple) or GBNF text. A return with one option, reached without a
    # loop, is written inline rather than as a rule of its own.
    returns: dict[tuple[int, int], list[list]] = {}

    def name(state: int, target: int) -> str:
        return f"{rule}-{state}-{target}"

    def loops(state: int) -> list:
        return [f"{name(state, state)}*"] if (state, state) in returns else []

    def going_up(state: int, target: int) -> list:
        up = [(stop[state],)] + loops(state + 1)
        rest = returns[(state + 1, target)]
        if len(up) == 1 and len(rest) == 1:
            return up + rest[0]
        return up + [name(state + 1, target)]

    for state in range(size - 1, -1, -1):
        for target in range(state + 1):
            options = []
            if target == 0:
                kept = [c for c in alphabet if c == stop[state] or step(state, c) != 0]
                options.append([char_class(kept, negated=True)])
            else:
                chars = [c for c in alphabet if c != stop[state] and step(state, c) == target]
                if chars:
                    options.append([char_class(chars)])
            if state + 1 < size and (state + 1, target) in returns:
                options.append(going_up(state, target))
            if options:
                returns[(state, target)] = options

    tail: list = []
    for state in range(size - 2, -1, -1):
        tail = ["(", (stop[state],)] + loops(state + 1) + tail + [")?"]
    rules = {rule: [loops(0) + tail]}
    if closed is not None:
        # Returns to 0, then each character of ``stop`` followed by the returns to the
        # state it reaches (none after the last: that would be a second ``stop``).
        items = loops(0)
        for state in range(size):
            items += ([] if state == 0 else loops(state)) + [(stop[state],)]
        rules[closed] = [items]
    # Emit the returns the rules above name (a name always points to a higher state).
    named = _named(rules[rule] + rules.get(closed, []))
    for (state, target), options in sorted(returns.items()):
        if name(state, target) in named:
            rules[name(state, target)] = options
            named |= _named(options)
    return [f"{label} ::= {' | '.join(map(_render, options))}" for label, options in rules.items()]


def _named(options: list[list]) -> set[str]:
    return {item.rstrip("*") for option in options for item in option if isinstance(item, str)}


def _render(items: list) -> str:
    """Items as GBNF, runs of characters merged into one literal."""
    out, run = [], ""
    for item in items:
        if isinstance(item, tuple):
            run += item[0]
            continue
        if run:
            out.append(literal(run))
            run = ""
        out.append(item)
    if run:
        out.append(literal(run))
    return " ".join(out)


def _alternatives(options: list[str]) -> str:
    return options[0] if len(options) == 1 else "( " + " | ".join(options) + " )"


def build(spec: dict, *, enable_thinking: bool) -> str:
    """The grammar of a whole output for one thinking setting."""
    reasoning = spec["reasoning"]
    content = spec["content"]
    stops = spec["end_of_turn"]["markers"]
    rules = ["ws ::= [ \\t\\n\\r]*", f"any ::= {ANY_CHAR}*"]

    # A rule made only of strings, classes and non-recursive rules is one lexeme in
    # llguidance, and a lexeme that dies more than one byte after a rival could have
    # ended loses the text: so ``content`` starts at its opener, never with ``ws`` (a
    # "ws + opener" lexeme would outrun the ``ws`` in front of the reasoning opener).
    content_name, content_rule = "any", "any"
    if content["mode"] != "plain" and content.get("start"):
        opener = literal(content["start"])
        if content.get("end"):
            rules += without("content-body", content["end"], closed="content-closed")
            wrapped = f"{opener} ( content-closed ws | content-body )"
        else:
            wrapped = f"{opener} any"
        if content["mode"] == "wrapped_with_reasoning":
            rules.append(f"content ::= {wrapped} | any")
        else:
            # ``parse`` reads an output without the wrapper as empty content.
            rules.append(f"content ::= ( {wrapped} )?")
        content_name, content_rule = "content", "ws content"

    mode = reasoning["mode"]
    if mode == "none" or not reasoning.get("end"):
        body = content_rule
    else:
        key = "thinking_on" if enable_thinking else "thinking_off"
        opened = reasoning["opened_by_prompt"][key]
        rules += without("reasoning-body", reasoning["end"], closed="reasoning-closed")
        start = literal(reasoning["start"]) if reasoning.get("start") else None
        block = f"( reasoning-closed ws {content_name} | reasoning-body )"
        if opened:
            body = f"ws {start + '? ' if start else ''}{block}"
        else:
            body = _alternatives([f"ws {start} {block}", content_rule])
    if stops:
        stop = _alternatives([literal(s) for s in stops])
        root = f"root ::= {body} ( {stop} ws )?"
    else:
        root = f"root ::= {body}"
    return "\n".join([root] + rules) + "\n"
