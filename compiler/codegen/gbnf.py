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


def without(rule: str, stop: str) -> list[str]:
    """Rules for ``rule``: any text in which ``stop`` does not occur.

    Built from the automaton that tracks how much of ``stop`` the text currently ends
    with (Knuth–Morris–Pratt); state ``i`` means the last ``i`` characters match the
    first ``i`` of ``stop``. A step that would complete ``stop`` has no rule.
    """
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
    rules = []
    for state in range(size):
        name = rule if state == 0 else f"{rule}-{state}"
        targets: dict[int, list[str]] = {}
        for char in alphabet:
            nxt = step(state, char)
            if nxt < size:
                targets.setdefault(nxt, []).append(char)
        options = [f"{char_class(alphabet, negated=True)} {rule}"]
        for nxt, chars in sorted(targets.items()):
            target = rule if nxt == 0 else f"{rule}-{nxt}"
            options.append(f"{char_class(chars)} {target}")
        rules.append(f"{name} ::= ( {' | '.join(options)} )?")
    return rules


def _alternatives(options: list[str]) -> str:
    return options[0] if len(options) == 1 else "( " + " | ".join(options) + " )"


def build(spec: dict, *, enable_thinking: bool) -> str:
    """The grammar of a whole output for one thinking setting."""
    reasoning = spec["reasoning"]
    content = spec["content"]
    stops = spec["end_of_turn"]["markers"]
    rules = ['ws ::= [ \\t\\n\\r]*', f"any ::= ( {ANY_CHAR} any )?"]

    content_rule = "any"
    if content["mode"] != "plain" and content.get("start"):
        opener = literal(content["start"])
        if content.get("end"):
            rules += without("content-body", content["end"])
            wrapped = f"{opener} content-body ( {literal(content['end'])} ws )?"
        else:
            wrapped = f"{opener} any"
        if content["mode"] == "wrapped_with_reasoning":
            rules.append(f"content ::= ws ( {wrapped} | any )")
        else:
            rules.append(f"content ::= ws {wrapped}")
        content_rule = "content"

    mode = reasoning["mode"]
    if mode == "none" or not reasoning.get("end"):
        body = content_rule
    else:
        key = "thinking_on" if enable_thinking else "thinking_off"
        opened = reasoning["opened_by_prompt"][key]
        end = literal(reasoning["end"])
        rules += without("reasoning-body", reasoning["end"])
        start = literal(reasoning["start"]) if reasoning.get("start") else None
        block = f"reasoning-body ( {end} ws {content_rule} )?"
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
