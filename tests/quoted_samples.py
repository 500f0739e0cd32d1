"""Calls whose string argument holds quotes, and what ``parse`` reads of them: the
samples the grammars are checked on (tests/test_quoted_strings.py with llguidance,
tests/exports/test_structural_tag.py with xgrammar). compiler/quoted_strings.py says
where such a string ends."""

from __future__ import annotations

import ast
import json
import random
import warnings

# format → a call f(a=<value>, b=1) as the template writes it
SHAPES = {
    "lfm2_5_8b_a1b": "<|tool_call_start|>[f(a={}, b=1)]<|tool_call_end|>",
    "pylist_raw_calls": "<|py|>[f(a={}, b=1)]<|/py|>",
    "keyword_calls": "<|calls|>f(a={}, b=1)\n<|/calls|>",
    "pyrepr_calls": "<|acts|>\n→ f(a={}, b=1)\n<|/acts|>",
    "python_calls": "⟨⟨f(a={}, b=1)⟩⟩",
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
                "required": ["a"],
            },
        },
    }
]
# ... and with no type to its values (any value the format writes)
UNTYPED = [
    {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {"type": "object", "properties": {"a": {}, "b": {}}},
        },
    }
]
# What a string is made of here: what may end it, or look as if it did.
PIECES = ["'", '"', "\\", ",", ", ", " ", ")", "]", "(", "=", "x", "b", "f", "\n", "é", "{'k'"]
# ... and whitespace the grammars take no closer or separator after (stricter there)
WIDE = PIECES + ["\u2028", "\x1c", "\u3000"]
SAMPLES = 90


def quotes(module) -> list[tuple[str, bool]]:
    """(quote, escaped) of the format's strings, as the spec says."""
    arguments = module.SPEC["tools"]["arguments"]
    found = [(arguments["string_open"], bool(arguments.get("string_escapes")))]
    return found + [(quote, True) for quote in arguments.get("string_quotes_also", [])]


def _meant(body: str, quote: str, own: bool):
    """The value ``quote + body + quote`` stands for, as the reader takes a string it
    has found the end of: JSON's reading, else Python's, else the text as written;
    between the format's own quote (``own``) any value Python reads there (a tuple,
    ``"a", "b"``, as a list), between another quote only a string."""
    written = quote + body + quote
    try:
        found = json.loads(written)
    except ValueError:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                found = json.loads(json.dumps(ast.literal_eval(written)))
        except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
            found = None
    if found is None or not (own or isinstance(found, str)):
        return body
    return found


def read_as_meant(module, text: str, body: str, quote: str, tools) -> bool:
    """Whether ``parse`` reads ``text`` as the one call f(a=<the string>, b=1)."""
    message = module.parse(text, tools=tools)
    calls = message["tool_calls"]
    if len(calls) != 1 or calls[0]["function"]["name"] != "f":
        return False
    arguments = json.loads(calls[0]["function"]["arguments"])
    own = quote == quotes(module)[0][0]
    return arguments == {"a": _meant(body, quote, own), "b": 1}


def bodies(seed: str, pieces: list[str]):
    rng = random.Random(seed)
    for _ in range(SAMPLES):
        yield "".join(rng.choice(pieces) for _ in range(rng.randint(1, 7)))
