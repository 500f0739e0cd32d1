"""Format model → the compile-time parts of an xgrammar structural tag.

A generated module's ``structural_tag(tools, …)`` (``compiler/runtime/structural_tag.py``)
builds the structural tag (xgrammar's JSON format, pinned at xgrammar 0.2.8) at call
time, from the tools it is given and ``_STRUCTURAL_TAG``: the format's markers and the
shape of its calls, made here from the typed model (never from the raw spec) and
written into the module as data.

``_STRUCTURAL_TAG`` holds only JSON values (str, bool, list, dict, None), so that every
string that came from a template is written by ``repr`` and reaches the structural tag
as a JSON string (a ``begin``, an ``end``, a ``const_string``). The two places where
template text meets a syntax of its own are made here and escaped here: the regular
expressions of an id hole (``_regex_class``) and the EBNF of the text that may stand
where a format without call markers writes content (``gbnf``'s escaping).

What each part means:

- ``reasoning``: per thinking setting (``"on"``, ``"off"``), None (no block) or the
  block's openers, its closer, and whether the prompt opens it (``opened``: with or
  without tools; ``always``: both);
- ``calls``: None (no calls) or
  - ``triggers``: where calls begin (what a ``triggered_tags`` dispatches on);
  - ``section``: the section's begin (from its trigger on), its closers and the text
    between calls, or None where each call stands alone;
  - ``variants``: every way the format writes one call, each a list of items: a
    literal (``["text", s]``; ``["text", s, True]`` where it follows the hole before
    it as written, no other whitespace between), the tool's name (``["name"]``), an
    id or index hole (``["regex", pattern]``), the arguments (``["arguments"]``); the
    text after the arguments is a list of closers (``["end", [s, …]]``); whitespace
    stands before every literal and hole as the reader skips it;
  - ``json``: for a call written as one JSON object, where its fields are and the
    orders its top-level members may come in;
  - ``arguments``: None (one JSON value) or how key/value units are written;
  - ``bare``: for a format whose calls no marker opens, the EBNF of the content that
    cannot be a call;
  - ``unit``: only where the content is a unit of the turn
    (``Format.content_as_unit``), its opener and the separator after it that starts
    the calls;
  - ``name_escapes``: how the template writes some characters of a name.
"""

from __future__ import annotations

from .. import quoted_strings
from ..charclass import WS_CHARS, name_class
from ..model import KEY_SLOT, Calls, Format, Part
from . import gbnf

# How many ways of writing one call a format may have before the structural tag
# gives up spelling them out (each is one tag per tool).
_MAX_VARIANTS = 32


def plan(fmt: Format) -> dict:
    """The compile-time parts of ``fmt``'s structural tags (JSON values only)."""
    return {
        "reasoning": {
            "on": _reasoning(fmt, True),
            "off": _reasoning(fmt, False),
            "default": _reasoning(fmt, None),
        },
        "calls": _calls(fmt),
    }


def _reasoning(fmt: Format, enable_thinking: bool | None) -> dict | None:
    reasoning = fmt.reasoning
    if not reasoning.has_block:
        return None
    # With tools given or not: the structural tag admits what parse reads either way.
    settings = [reasoning.opened_by_prompt(enable_thinking, tools) for tools in (False, True)]
    found = {
        "starts": list(reasoning.starts),
        "end": reasoning.end,
        "opened": any(settings),
        "always": all(settings),
    }
    if None in settings:
        # The prompt may have opened the block: a closer with no opener ends it.
        found["maybe"] = True
    return found


def _closers(text: str, stops: tuple[str, ...]) -> list[str]:
    """A closing literal as the reader takes it: as written, without the whitespace
    it ends with (an output ends there), and "" where it starts with an end-of-turn
    marker, which a server stops at (the reader takes a call cut off there)."""
    core = text.strip()
    if not core:
        return [text] if text else [""]
    found = [text, text.rstrip()]
    if any(core.startswith(stop) for stop in stops if stop):
        found.append("")
    return list(dict.fromkeys(found))


def _calls(fmt: Format) -> dict | None:
    calls = fmt.calls
    if calls is None:
        return None
    stops = fmt.stop
    section = None
    if calls.opener.strip():
        trigger = calls.opener.strip()
        section = {
            "begin": calls.opener.lstrip(),
            "end": _closers(calls.section_end, stops),
            "separator": calls.separator,
        }
        start = calls.start
    else:
        trigger = calls.start.strip()
        start = calls.start if calls.bare else calls.start.lstrip()
    # Content openers that hold the trigger: where one is written, the trigger
    # there opens no call.
    content = fmt.content
    openers = []
    if trigger and content.wrapped and trigger in content.start:
        openers.append(content.start.strip())
    bare = None
    if calls.bare:
        shape = calls.output_shape
        if shape is not None:
            bare = f"root ::= {gbnf._not_starting_with(shape)}\nany ::= {gbnf.ANY_CHAR}*\n"
    found = {
        "triggers": [trigger] if trigger else [],
        "call_trigger": calls.start.strip(),
        "section": section,
        "separator": calls.separator,
        "variants": _variants(calls, start, stops, fmt.polyfills.call_ids),
        "json": _json(calls, fmt.polyfills.call_ids),
        "arguments": _arguments(calls, fmt),
        "bare": bare,
        "content_openers": openers,
        "name_escapes": [list(pair) for pair in calls.name_escapes],
    }
    if fmt.content_as_unit:
        # The content is a unit of the turn: the call separator after it starts calls
        # (the runtime reads this only under CONTENT_AS_UNIT).
        found["unit"] = {"opener": content.start, "separator": calls.separator.strip()}
    return found


def _variants(
    calls: Calls, start: str, stops: tuple[str, ...], ids: str | None
) -> list[list]:
    """Every way of writing one call, as items (see the module's docstring); ``ids``:
    the pattern the template checks call ids against (``polyfills.call_ids``)."""
    if calls.format == "json":
        return [[["text", start], ["arguments"], ["end", _closers(calls.end, stops)]]]
    found: list[list] = []

    def walk(index: int, items: list) -> None:
        if len(found) >= _MAX_VARIANTS:
            return
        part: Part = calls.parts[index]
        hole = _hole(calls, part, ids)
        if part.hole == "arguments":
            closers = [c for text in (part.after, *part.also) for c in _closers(text, stops)]
            found.append(items + [hole, ["end", list(dict.fromkeys(closers))]])
            return
        following = calls.parts[index + 1] if index + 1 < len(calls.parts) else None
        # Where a literal that is only whitespace (or none) may end a name, the reader
        # ends it at its word's end: the literal after it follows the word as written
        # (``tight``), as in the other grammars.
        options = calls.part_options[index]
        tight = part.hole != "index" and any(not text.strip() for text, _ in options)
        ending = [True] if tight else []
        for text in dict.fromkeys((part.after, *part.also)):
            walk(index + 1, items + [hole, ["text", text, *ending]])
        if following is not None and following.optional:
            for text in dict.fromkeys((following.after, *following.also)):
                walk(index + 2, items + [hole, ["text", text, *ending]])

    walk(0, [["text", start]])
    return found


def _hole(calls: Calls, part: Part, ids: str | None) -> list:
    if part.hole == "name":
        return ["name"]
    if part.hole == "arguments":
        return ["arguments"]
    if part.hole == "index":
        return ["regex", "[0-9]+"]
    # An id: the characters every such hole may hold (as the grammar has them), in
    # the form the template checks, else at most ``gbnf.ID_LONGEST`` of them.
    excluded, allowed = "", None
    for other in calls.parts:
        if other.hole == part.hole:
            negated, chars = name_class(other.after)
            if negated:
                excluded += chars
            else:
                allowed = set(chars) if allowed is None else allowed & set(chars)
    most = "{1,%d}" % gbnf.ID_LONGEST
    if allowed is None:
        held = (True, excluded)
        found = _regex_class(True, excluded) + most
    else:
        held = (False, "".join(sorted(allowed - set(excluded))))
        found = _regex_class(False, held[1]) + most
    form = gbnf._id_class(ids)
    if form is not None and gbnf._within(form, held):
        return ["regex", form]
    return ["regex", found]


def _regex_class(negated: bool, chars: str) -> str:
    """A regular-expression class of ``chars``, each written as a ``\\uXXXX`` escape (so
    no character of a template's can mean anything else there; one beyond the Basic
    Multilingual Plane, which has no such escape, as itself: none is special)."""
    body = "".join(f"\\u{ord(c):04X}" if ord(c) <= 0xFFFF else c for c in sorted(set(chars)))
    if not body:
        return "[\\s\\S]" if negated else "[^\\s\\S]"
    return "[" + ("^" if negated else "") + body + "]"


def _json(calls: Calls, ids: str | None) -> dict | None:
    """Where a JSON call keeps its fields: paths, and the orders of the top level; the
    JSON schemas of its id and of its other members, short (as in the GBNF:
    ``gbnf.ID_LONGEST``, ``gbnf.INTEGER_DIGITS``); ``ids``: the pattern the template
    checks call ids against (``polyfills.call_ids``)."""
    fields = calls.json
    if fields is None:
        return None
    if fields.name_is_key:
        return {"name_is_key": True, "orders": [[]]}
    top = list(dict.fromkeys(path[0] for path in fields.members))
    short = {"type": "string", "maxLength": gbnf.ID_LONGEST}
    largest = 10**gbnf.INTEGER_DIGITS - 1
    form = gbnf._id_class(ids)
    return {
        "name_is_key": False,
        "name": list(fields.name or ()),
        "arguments": list(fields.arguments or ()),
        "id": list(fields.id or ()),
        "id_schema": short if form is None else {"type": "string", "pattern": f"^{form}$"},
        "other_schema": {
            "anyOf": [
                short,
                {"type": "integer", "minimum": -largest, "maximum": largest},
                {"type": "boolean"},
                {"type": "null"},
            ]
        },
        "other": [
            list(path) for path in fields.members if path not in (fields.name, fields.arguments)
        ],
        "arguments_as_string": fields.arguments_as_string,
        "orders": _orders(top),
    }


def _orders(keys: list[str]) -> list[list[str]]:
    """The orders the template may write its top-level members in (it writes one, which
    the model does not record): every permutation, up to four members."""
    if len(keys) > 4:
        return [keys]
    if len(keys) <= 1:
        return [keys]
    out = []
    for index, key in enumerate(keys):
        for rest in _orders(keys[:index] + keys[index + 1 :]):
            out.append([key] + rest)
    return out


def _arguments(calls: Calls, fmt: Format) -> dict | None:
    arguments = calls.arguments
    if arguments is None or not arguments.units:
        return None
    suffix = arguments.value_suffix
    syntax = arguments.syntax
    own = None
    if syntax is not None:
        own = {
            "null": syntax.null_word,
            "true": syntax.true_word,
            "false": syntax.false_word,
            "grammar": _own_grammar(arguments.string_open, arguments.string_close, syntax),
        }
    found = {
        "key_prefix": arguments.key_prefix,
        "key_end": arguments.key_end,
        "value_start": arguments.value_start,
        # The attribute's word for each JSON type, where the analysis read them.
        "type_attributes": dict(arguments.type_attributes),
        "value_suffix": suffix,
        "key_slot": KEY_SLOT if arguments.value_suffix_names_key and KEY_SLOT in suffix else "",
        "separator": arguments.separator,
        "string_open": arguments.string_open,
        "string_close": arguments.string_close,
        # Python's other quotes a string may stand between (as the reader takes it).
        "quotes_also": list(arguments.string_quotes_also),
        "python": arguments.literal == "python",
        # Where it is, whether lists and objects are JSON all the same (tojson).
        "json_containers": arguments.containers == "json",
        "own": own,
        "elements": arguments.elements is not None,
        "key_escapes": [list(pair) for pair in arguments.key_escapes],
        "value_escapes": [list(pair) for pair in arguments.value_escapes],
        "verbatim": list(arguments.verbatim) if arguments.verbatim else None,
        # Where no suffix ends a value, what a value the schema cannot type may be.
        "value_grammar": None if arguments.suffixed else _value_grammar(arguments.literal),
    }
    if quoted_strings.strings(fmt) is not None:
        # The reader ends a string at the first quote a follower follows
        # (compiler/quoted_strings.py): a unit's string, and any value, are the GBNF's
        # rules for them (TOOL_RAW_VALUE, TOOL_ANY_VALUE), which end it there too.
        found["quoted"] = True
    return found


def _value_grammar(literal: str) -> str:
    """EBNF of any JSON value (or JSON or Python, where the template writes Python
    literals), from the grammars' own rules."""
    prefix = "py" if literal == "python" else "json"
    rules = dict(gbnf._JSON_RULES)
    if prefix == "py":
        rules.update(gbnf._PY_RULES)
    lines = [f"root ::= {prefix}-value", f"ws ::= {gbnf.WS}"]
    lines += [f"{name} ::= {body}" for name, body in rules.items()]
    return "\n".join(lines) + "\n"


def _own_grammar(string_open: str, string_close: str, syntax) -> str:
    """EBNF of any value in a value syntax of the template's own (objects, arrays,
    strings between the string marks, words and numbers), for the values whose schema
    a structural tag cannot spell in that syntax."""
    literal = gbnf.literal
    word = gbnf.char_class(
        "".join(c for c in map(chr, range(0x80)) if not (c.isalnum() or c in "_.+-")), True
    )
    stops = WS_CHARS + "".join(
        mark.strip()[:1]
        for mark in (syntax.key_end, syntax.member_separator, syntax.object_open,
                     syntax.object_close, syntax.array_open, syntax.array_close)  # fmt: skip
    )
    key = gbnf.char_class(stops, True)
    text = gbnf.without("string-text", string_close, closed="string-closed")
    lines = [
        "root ::= value",
        "value ::= string | object | array | word",
        f"string ::= {literal(string_open)} string-closed",
        f"word ::= {word}+",
        f"ws ::= {gbnf.WS}",
        (
            f"member ::= {literal(syntax.key_prefix)} {key}+ ws {literal(syntax.key_end)} ws value"
            if syntax.key_prefix
            else f"member ::= {key}+ ws {literal(syntax.key_end)} ws value"
        ),
        f"object ::= {literal(syntax.object_open)} ws ( member ( ws"
        f" {literal(syntax.member_separator)} ws member )* ws {literal(syntax.object_close)}"
        f" | {literal(syntax.object_close)} )",
        f"array ::= {literal(syntax.array_open)} ws ( value ( ws"
        f" {literal(syntax.item_separator)} ws value )* ws {literal(syntax.array_close)}"
        f" | {literal(syntax.array_close)} )",
        *text,
    ]
    return "\n".join(lines) + "\n"
