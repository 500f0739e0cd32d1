"""Format model → llguidance's Lark grammar of a whole output (llguidance's
docs/syntax.md), for every tool_choice.

Built from a ``Format`` (compiler/model.py), never from the raw spec: here, every rule
that does not depend on the tools, and templates for those that do, which
``lark_grammar`` (compiler/runtime/lark.py) fills in at call time. ``build`` gives
them as the parts of a module's ``_LARK``:

- ``start`` (``-calls`` where a call is required; ``-no-thinking``): the root and the
  reasoning rules it uses;
- ``auto``, ``none``, ``required``: the rule ``reply``, content and calls as the
  choice allows them; ``list``, ``list-single``: how many calls; ``rules``: the rest
  (content, where calls begin and end, what may follow them);
- ``call``: one call, what comes before it (``%%LEAD%%``: ``lead-full``, ``lead-rest``
  or ``lead-next``, regular expressions), its name (``%%NAME%%``, one too), the rule of
  its arguments (``%%ARGS%%``) and its label in rule names (``%%I%%``) left open;
- ``arguments``: ``json`` (``%json`` of the tool's schema), ``units`` (key/value
  units made of the ``unit-…`` templates: ``%%RULE%%``, ``%%KEY%%``, ``%%VALUE%%``,
  ``%%JSON%%``, ``%%TYPED%%``: a Python literal's or own-syntax value's rule, or a
  string's text as written counted by its ``maxLength`` (``unit-raw``), ``%%ATTR%%``: the attribute naming the value's type, one of the
  words ``attributes`` (JSON: type → regular expression) gives), or a rule of the
  format's own (arguments no schema can type);
- ``name``, ``key``: any name, any key, as the reader takes them; ``separator``,
  ``enum`` (``%%TEXT%%``), ``enum-escape``, ``enum-refuse``, ``enum-also`` (other
  quotes a string may stand between), ``true``, ``false``,
  ``null``: how a unit's values are written.

How llguidance reads it (tests/test_lark.py runs every grammar one token per byte): a
terminal (``/…/``, or an uppercase name) is one lexeme, greedy, and the lexer backs
off at most one byte; a ``[lazy]`` rule's lexeme ends as soon as it matches. As in the
GBNF (compiler/codegen/gbnf.py), a marker is one lexeme with the whitespace around it
and the holes written beside it (a tool's name included), and free text is one lexeme
with the marker that ends it: ``/P(?s:.*)S/ & ~/P(?s:.*)(?:S|T)(?s:.+)/`` is the text
after ``P`` through the first of the stops ``S`` and ``T``, that being ``S``. A value a
suffix ends is a lazy lexeme through the suffix.

Every string from a template reaches the grammar through ``_lark_regex`` (escaped,
``%`` included, so that no template text reads as a placeholder).
"""

from __future__ import annotations

import json
import string

from ..charclass import NOT_IN_NAMES, class_body, marker_pieces, name_class
from ..model import KEY_SLOT, Format, ValueSyntax
from .. import quoted_strings
from ..quoted_strings import QUOTES, SPACES, Way
from ..runtime.lark import _lark_regex as rx
from ..runtime.schema_gbnf import WS_BLANKS, WS_REGEX, ws_fits
from .gbnf import ID_LONGEST, INTEGER_DIGITS, MARKERS_AFTER_CALLS, _copied, _id_class, _within

WS = WS_REGEX  # bounded (compiler/runtime/schema_gbnf.py says how)
# ... and at least one character of it (whitespace that separates units).
SOME_WS = f"(?:[ \\t]{{1,{WS_BLANKS}}}\\r?\\n?|\\r\\n?|\\n)[ \\t]{{0,{WS_BLANKS}}}"
ANY = "(?s:.*)"
NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"
JSON_STRING = r'"(?:[^"\\\x00-\x1f]|\\(?:["\\\/bfnrt]|u[0-9a-fA-F]{4}))*"'
PY_STRING = (
    r'"(?:[^"\\\x00-\x1f]|\\[^\x00-\x1f])*"' + "|" + r"'(?:[^'\\\x00-\x1f]|\\[^\x00-\x1f])*'"
)


def _quoted(quote: str) -> str:
    """A string between ``quote`` (one of Python's) with backslash escapes."""
    return quote + r"(?:[^" + quote + r"\\\x00-\x1f]|\\[^\x00-\x1f])*" + quote


# What ends a bare word (a value written without quotes): as in the reader.
_NOT_IN_WORDS = "".join(map(chr, range(0x21))) + "\x7f,;(){}[]\"'"
# What a word or number of a value syntax of the template's own is not made of.
_NOT_IN_OWN_WORDS = "".join(c for c in map(chr, range(0x80)) if not (c.isalnum() or c in "_.+-"))
# The parts every format has, and those of a format with calls.
PARTS = ("start", "start-no-thinking", "start-default", "none", "rules")
CALL_PARTS = ("start-calls", "start-calls-no-thinking", "start-calls-default", "auto",
              "required", "list", "list-single", "call")  # fmt: skip


class _Ref(str):
    """A rule (or terminal) named in a sequence, between regular expressions."""


def _seq(items) -> str:
    """Items in a row as Lark: runs of regular expressions joined into one
    ``/…/`` lexeme, ``_Ref`` items as they are; ``""`` for none."""
    out: list[str] = []
    run = ""
    for item in items:
        if isinstance(item, _Ref):
            if run:
                out.append(f"/{run}/")
                run = ""
            out.append(str(item))
        else:
            run += item
    if run:
        out.append(f"/{run}/")
    return " ".join(out) or '""'


def _space(text: str) -> str:
    """Whitespace where a literal writes ``text``: bounded, or, where the bound does
    not take it, also as written (schema_gbnf.ws_fits)."""
    return WS if ws_fits(text) else f"(?:{rx(text)}|{WS})"


def _gaps(literal: str, pieces: list[str]) -> list[str]:
    """The whitespace the literal writes before each of its pieces."""
    gaps, at = [], 0
    for piece in pieces:
        found = literal.index(piece, at)
        gaps.append(literal[at:found])
        at = found + len(piece)
    return gaps


def _any_of(options) -> str:
    """Regular expressions as one that matches any of them."""
    options = list(dict.fromkeys(options))
    if len(options) == 1:
        return options[0]
    return "(?:" + "|".join(options) + ")"


def _class(chars: tuple[bool, str]) -> str:
    """A class (negated, characters) as a regular expression."""
    negated, members = chars
    if not members:
        return r"[^\x{0}]" if negated else r"[\x{0}]"  # never empty: a class of one
    return "[" + ("^" if negated else "") + class_body(members, rx) + "]"


def _intersection(a: tuple[bool, str], b: tuple[bool, str]) -> tuple[bool, str]:
    (neg_a, chars_a), (neg_b, chars_b) = a, b
    if neg_a and neg_b:
        return True, "".join(sorted(set(chars_a) | set(chars_b)))
    if neg_a or neg_b:
        keep, drop = (chars_b, chars_a) if neg_a else (chars_a, chars_b)
        return False, "".join(sorted(set(keep) - set(drop)))
    return False, "".join(sorted(set(chars_a) & set(chars_b)))


def through(prefix: str, stop: str, stops: list[str]) -> str:
    """A terminal's body: ``prefix``, then text through the first of ``stops``, that
    being ``stop`` (each a regular expression)."""
    others = _any_of(stops)
    return f"/{prefix}{ANY}{stop}/ & ~/{prefix}{ANY}{others}(?s:.+)/"


def upto_end(prefix: str, stops: list[str]) -> str:
    """A terminal's body: ``prefix``, then text to the end that holds none of
    ``stops``."""
    if not stops:
        return f"/{prefix}{ANY}/"
    return f"/{prefix}{ANY}/ & ~/{prefix}{ANY}{_any_of(stops)}{ANY}/"


class _Lark:
    """The parts of one format's Lark rules, built from its model."""

    def __init__(self, fmt: Format):
        self.fmt = fmt
        self.calls = fmt.calls
        self.parts: dict[str, dict[str, str]] = {}
        self.out: dict[str, str] = {}
        # Where a reader cuts a marker into pieces (other whitespace may stand
        # between them): after each preserved token, the longest first.
        self.tokens = sorted((t for t in fmt.preserved_tokens if t.strip()), key=len)[::-1]
        # What calls are found by, which content never holds: the trigger's first piece.
        self.head = ""
        if self.calls is not None and self.calls.trigger:
            self.head = self.pieces(self.calls.trigger)[0][0]
        if fmt.content_as_unit:
            # The content is a unit of the turn: the call separator after it starts
            # the calls (model.Format.content_as_unit), so it is what content holds
            # only where calls follow it.
            assert self.calls is not None
            self.head = self.pieces(self.calls.separator)[0][0]
        stops = [rx(stop) for stop in dict.fromkeys(fmt.stop) if stop]
        end = f"{WS}(?:{_any_of(stops)}{WS})?" if stops else WS
        self.add("END", f"/{end}/")

    # rules

    def add(self, name: str, body: str, part: str = "rules", options: str = "") -> str:
        rules = self.parts.setdefault(part, {})
        line = f"{name}{options}: {body}\n"
        if rules.get(name, line) != line:
            raise ValueError(f"Lark rule {name} defined twice")
        rules[name] = line
        return name

    def text(self, part: str) -> str:
        return "".join(self.parts.get(part, {}).values())

    # literals

    def pieces(self, literal: str) -> tuple[list[str], str]:
        """(the literal's pieces, its trailing whitespace), as the reader cuts them."""
        return marker_pieces(literal, self.tokens)

    def marker(self, text: str, lead: bool = True, skip: int = 0, exact: bool = False) -> str:
        """A literal as the reader matches it: any whitespace before it (``lead``) and
        between its pieces, and after it where it ends with some (``exact``: that
        whitespace once or not at all, as the reader takes it before a value
        written as it is); less its first ``skip`` pieces."""
        pieces, trail = self.pieces(text)
        if not pieces:
            return _space(text) if text and lead else ""
        items = list(zip(_gaps(text, pieces), pieces, strict=True))[skip:]
        body = "".join(
            (_space(gap) if lead or skip or number else "") + rx(piece)
            for number, (gap, piece) in enumerate(items)
        )
        if exact:
            return body + (f"(?:{rx(trail)})?" if trail else "")
        return body + (_space(trail) if trail else "")

    def closer(self, *texts: str) -> str:
        """Literals any of which closes a call or the calls; optional where one starts
        with an end-of-turn marker, which a server stops at."""
        found = [self.marker(text) for text in texts if text]
        if not found:
            return ""
        cores = [text.strip() for text in texts]
        if any(core.startswith(stop) for core in cores for stop in self.fmt.stop if stop):
            return f"(?:{_any_of(found)})?"
        return _any_of(found)

    # values

    def values(self, python: bool) -> str:
        """Rules for any JSON (or JSON-or-Python) value; the value rule's name."""
        prefix = "py" if python else "json"
        string_rx = PY_STRING if python else JSON_STRING
        words = "true|false|null|True|False|None" if python else "true|false|null"
        self.add(f"{prefix.upper()}_STRING", f"/{string_rx}/")
        self.add("NUMBER", f"/{NUMBER}/")
        self.add(f"{prefix.upper()}_WORD", f"/{words}/")
        self.add(f"{prefix.upper()}_KEY", f"/(?:{string_rx}){WS}:{WS}/")
        value = f"{prefix}_value"
        self.add(value, f"{prefix}_object | {prefix}_array | {prefix.upper()}_STRING"
                 f" | NUMBER | {prefix.upper()}_WORD")  # fmt: skip
        comma = f"/{WS},{WS}/"
        self.add(f"{prefix}_member", f"{prefix.upper()}_KEY {value}")
        member = f"{prefix}_member"
        # (empty: the closing mark after the opening's whitespace, no more)
        self.add(f"{prefix}_object",
                 f"/\\{{{WS}/ ({member} ({comma} {member})* /{WS}\\}}/ | /\\}}/)")  # fmt: skip
        self.add(f"{prefix}_array",
                 f"/\\[{WS}/ ({value} ({comma} {value})* /{WS}\\]/ | /\\]/)")  # fmt: skip
        return value

    def own_values(self, syntax: ValueSyntax, string_rule: str) -> list[str]:
        """Rules for values in a syntax of the template's own (strings being
        ``string_rule``); the options of an argument's value: an object, an array,
        a string, or any word or number (the reader types it by the tool's schema)."""
        self.add("NUMBER", f"/{NUMBER}/")
        word = self.add("OWN_WORD", f"/{_class((True, _NOT_IN_OWN_WORDS))}+/")
        words = "|".join(rx(w) for w in (syntax.null_word, syntax.true_word, syntax.false_word))
        self.add("OWN_WORDS", f"/{words}/")
        self.add("own_value", f"{string_rule} | own_object | own_array | NUMBER | OWN_WORDS")
        marks = (syntax.key_end, syntax.member_separator, syntax.object_open,
                 syntax.object_close, syntax.array_open, syntax.array_close)  # fmt: skip
        stops = string.whitespace + "".join(mark.strip()[:1] for mark in marks)
        key = _class((True, stops)) + "+"
        head = self.marker(syntax.key_prefix) + WS + key + WS + rx(syntax.key_end.strip()) + WS
        self.add("own_member", f"/{head}/ own_value")
        for kind, opening, closing, separator, item in (
            ("object", syntax.object_open, syntax.object_close, syntax.member_separator,
             "own_member"),
            ("array", syntax.array_open, syntax.array_close, syntax.item_separator, "own_value"),
        ):  # fmt: skip
            comma = f"/{WS}{rx(separator.strip())}{WS}/"
            self.add(f"own_{kind}", f"/{rx(opening)}{WS}/ ({item} ({comma} {item})*"
                     f" /{WS}{rx(closing)}/ | /{rx(closing)}/)")  # fmt: skip
        return [string_rule, "own_object", "own_array", word]

    # calls

    def name_class(self, hole: str) -> str:
        """The characters a name or id hole may hold (every literal that may end it
        ends it), as a regular expression."""
        assert self.calls is not None
        chars = (True, QUOTES if quoted_strings.strings(self.fmt) is not None else "")
        for part, options in zip(self.calls.parts, self.calls.part_options, strict=True):
            if part.hole == hole:
                for text in (part.after, *(text for text, _ in options)):
                    chars = _intersection(chars, name_class(text))
        if hole != "id":
            return _class(chars) + "+"
        # An id as the template checks it, else short (as in the GBNF).
        form = _id_class(self.fmt.polyfills.call_ids)
        if form is not None and _within(form, chars):
            return form
        return _class(chars) + "{1,%d}" % ID_LONGEST

    def holes(self, index: int, stop: int) -> str:
        """The holes ``index`` to ``stop`` of a tagged call and the literals after
        them, as a regular expression (a part the model may leave out, and other
        literals that end a hole, as alternatives)."""
        assert self.calls is not None
        if index >= stop:
            return ""
        part = self.calls.parts[index]
        hole = {"name": "%%NAME%%", "index": "[0-9]+"}.get(part.hole) or self.name_class("id")
        options = [(part.after, 0), *self.calls.part_options[index]]
        # Where a literal that is only whitespace (or none) may end the hole, the
        # reader ends it at its word's end: whitespace after the word does, so each
        # literal follows the word as written.
        tight = part.hole != "index" and any(not text.strip() for text, _ in options)

        def ending(text: str) -> str:
            if not tight or not text.strip():
                return self.marker(text)
            lead = text[: len(text) - len(text.lstrip())]
            return rx(lead) + self.marker(text, lead=False)

        return WS + hole + _any_of(
            [ending(text) + self.holes(index + 1 + skip, stop) for text, skip in options]
        )

    def call(self) -> None:
        """The template of one call (after its start marker)."""
        calls = self.calls
        assert calls is not None
        if calls.format == "json":
            self.json_call()
            return
        holes = [part.hole for part in calls.parts]
        at = holes.index("arguments")
        part = calls.parts[at]
        closing = self.closer(part.after, *(text for text, _ in calls.part_options[at]))
        tail = closing + self.holes(at + 1, len(holes))
        arguments = calls.arguments
        assert arguments is not None
        # Whitespace before a JSON (or Python) value, as the reader skips it: in
        # the lexeme before it (%json starts at the value's first character).
        space = "" if arguments.units else WS
        items = ["%%LEAD%%" + self.holes(0, at) + space, _Ref("%%ARGS%%"), tail]
        self.add("call_%%I%%", _seq(items), part="call")
        if arguments.units:
            self.units(part.after)
        elif arguments.literal == "python":
            self.out["arguments"] = self.values(True).replace("value", "object")
        else:
            self.out["arguments"] = "json"
        self.out["name"] = self.name_class("name")

    def json_call(self) -> None:
        """A call written as one JSON (or Python-literal) object: its members in any
        order, each once; the tool's name as a string and its arguments by its
        schema."""
        assert self.calls is not None and self.calls.json is not None
        fields = self.calls.json
        python = fields.literal == "python"
        quotes = ['"', "'"] if python else ['"']
        self.out["name"] = _class((True, NOT_IN_NAMES + "\"'\\")) + "+"
        name = _any_of([rx(q) + "%%NAME%%" + rx(q) for q in quotes])
        if fields.arguments_as_string:
            self.add("ARGS_STRING", f"/{PY_STRING if python else JSON_STRING}/")
            self.out["arguments"] = "ARGS_STRING"
        elif python:
            self.out["arguments"] = self.values(True).replace("value", "object")
        else:
            self.out["arguments"] = "json"
        closing = self.closer(self.calls.end)
        opening = "%%LEAD%%" + WS + rx("{") + WS
        if fields.name_is_key:
            items = [opening + name + WS + ":" + WS, _Ref("%%ARGS%%"), WS + rx("}") + closing]
            self.add("call_%%I%%", _seq(items), part="call")
            return
        shape = fields.member_tree
        # The id and the other members, short (as in the GBNF: ``ID_LONGEST``).
        strings = [_quoted(q) for q in quotes] if python else [JSON_STRING]
        most = "{0,%d}" % ID_LONGEST  # for the "*" before each closing quote
        string = "|".join(text[:-2] + most + text[-1] for text in strings)
        words = "true|false|null|True|False|None" if python else "true|false|null"
        integer = "0|-?[1-9][0-9]{0,%d}" % (INTEGER_DIGITS - 1)
        other = self.add("SHORT_VALUE", f"/{string}|{integer}|{words}/")
        leaves = {"name": [name], "arguments": [_Ref("%%ARGS%%")], "other": [_Ref(other)]}
        if fields.id is not None:
            # The id: a string, of the form the template checks where it checks one.
            shape = _copied(shape)
            node = shape
            for key in fields.id[:-1]:
                node = node[key]
            node[fields.id[-1]] = "id"
            form = _id_class(self.fmt.polyfills.call_ids)
            ids = string if form is None else "|".join(q + form + q for q in quotes)
            leaves["id"] = [_Ref(self.add("CALL_ID", f"/{ids}/"))]
        rule = self.json_object("call_%%I%%_o", shape, opening, leaves, quotes)
        self.add("call_%%I%%", _seq([_Ref(rule), closing]), part="call")

    def json_object(self, prefix: str, shape: dict, opening: str, leaves: dict, quotes) -> str:
        """A rule for an object with the members of ``shape`` (key → leaf kind or
        sub-shape), each once, in any order, and no others; members whose leaf is
        ``other`` may be left out. One rule per set of members seen (``{prefix}_10``:
        the first seen, not the second); ``opening``: the text up to the first key.
        The object under member ``i`` is rule ``{prefix}_m{i}``, from its own brace:
        the same rule whether the member comes first or after a comma."""
        if prefix in self.parts.get("call", {}):
            return prefix
        keys = list(shape)
        required = {i for i, key in enumerate(keys) if shape[key] not in ("other", "id")}
        comma = WS + "," + WS

        def member(index: int, start: str) -> list:
            head = start + _any_of([rx(q + keys[index] + q) for q in quotes]) + WS + ":" + WS
            leaf = shape[keys[index]]
            if isinstance(leaf, dict):
                nested = self.json_object(f"{prefix}_m{index}", leaf, rx("{") + WS, leaves, quotes)
                return [head, _Ref(nested)]
            return [head, *leaves[leaf]]

        def state(seen: frozenset) -> str:
            label = f"{prefix}_" + "".join("1" if i in seen else "0" for i in range(len(keys)))
            if label not in self.parts.get("call", {}):
                unseen = [i for i in range(len(keys)) if i not in seen]
                options = [_seq(member(i, comma) + [_Ref(state(seen | {i}))]) for i in unseen]
                if required <= seen:
                    options.append(_seq([WS + rx("}")]))
                self.add(label, " | ".join(options), part="call")
            return label

        options = [_seq(member(i, opening) + [_Ref(state(frozenset([i])))]) for i in range(len(keys))]
        return self.add(prefix, " | ".join(options), part="call")

    def units(self, closing: str) -> None:
        """The templates of a key/value unit of a tool's arguments, closed by
        ``closing``."""
        assert self.calls is not None and self.calls.arguments is not None
        arguments = self.calls.arguments
        self.out["arguments"] = "units"
        # A key holds no space and does not start what may come instead of a unit.
        firsts = "".join(text.strip()[:1] for text in (arguments.separator, closing))
        if quoted_strings.strings(self.fmt) is not None:
            firsts += QUOTES  # (no quote: as the GBNF's key, compiler/codegen/gbnf.py)
        self.out["key"] = _class(_intersection(name_class(arguments.key_end), (True, firsts))) + "+"
        key_head = self.marker(arguments.key_prefix) + WS + "%%KEY%%" + WS
        start = arguments.value_start
        if start.strip():
            # What stands between the key and the value (an attribute naming its type):
            # the template's word for each type where the analysis read them (the
            # tool's schema picks one: ``%%ATTR%%``), else any text before the mark.
            key_head += self.marker(arguments.key_end, lead=False)
            words = dict(arguments.type_attributes)
            if words:
                self.out["attributes"] = json.dumps({kind: rx(word) for kind, word in words.items()})
                key_head += "%%ATTR%%"
            else:
                key_head += _class((True, start.strip()[0])) + "*"
            head = key_head + self.marker(start, lead=False)
            exact = key_head + self.marker(start, lead=False, exact=True)
        else:
            head = key_head + self.marker(arguments.key_end, lead=False)
            exact = key_head + self.marker(arguments.key_end, lead=False, exact=True)
        separator = arguments.separator
        if separator.strip():
            self.out["separator"] = f"/{self.marker(separator)}/"
        else:
            self.out["separator"] = f"/{SOME_WS}/" if separator else ""
        literal = self.calls.literal
        if arguments.syntax is not None:
            own = arguments.syntax
            forms = [rx(word) for word in (own.true_word, own.false_word, own.null_word)]
        elif literal == "python":
            forms = ["true|True", "false|False", "null|None"]
        else:
            forms = ["true", "false", "null"]
        self.out.update(zip(("true", "false", "null"), forms, strict=True))
        if arguments.suffixed:
            core = arguments.value_suffix.strip()
            if arguments.value_suffix_names_key and KEY_SLOT in core:
                before, _, after = core.partition(KEY_SLOT)
                suffix = rx(before) + "%%KEY%%" + rx(after)
            else:
                suffix = rx(core)
            self.out["unit-text"] = f"%%RULE%%[lazy]: /{head}{ANY}{suffix}/\n"
            self.out["unit-string"] = self.out["unit-text"]
            # A string whose length its schema bounds: the text through the suffix,
            # counted as the GBNF counts it (``%%TYPED%%``: compiler/runtime/lark.py).
            self.out["unit-raw"] = f"%%RULE%%: /{exact}/ %%TYPED%%\n"
            self.out["unit-scalar"] = f"%%RULE%%: /{head}{WS}(?:%%VALUE%%){WS}{suffix}/\n"
            # A string the schema lists is read as written: no whitespace around it
            # but what the key's literal ends with and the suffix starts with, once.
            lead = arguments.value_suffix[: len(arguments.value_suffix) - len(arguments.value_suffix.lstrip())]
            before = f"(?:{rx(lead)})?" if lead else ""
            self.out["unit-enum"] = f"%%RULE%%: /{exact}(?:%%VALUE%%){before}{suffix}/\n"
            if arguments.elements is None and "json" in (literal, arguments.containers):
                # Objects and arrays written as JSON, held to their schema (where the
                # template writes them as Python literals, or the analysis could not
                # tell, any value is read, as text).
                self.out["unit-json"] = f"%%RULE%%: /{head}{WS}/ %%JSON%% /{WS}{suffix}/\n"
            elif arguments.elements is None and literal == "python":
                # ... or as Python literals, held to their schema by the GBNF's rules
                # for such a value (``%%TYPED%%``: compiler/runtime/lark.py).
                self.out["unit-typed"] = f"%%RULE%%: /{head}{WS}/ %%TYPED%% /{WS}{suffix}/\n"
            self.out["enum"] = "%%TEXT%%"
            return
        # A value the reader finds the end of: a string between the format's marks
        # (or quotes), a JSON (or Python) value, a word; or values of its own syntax.
        quoted = quoted_strings.strings(self.fmt)
        if quoted is not None:
            string_rule = self.quoted_strings(quoted, self.closer(closing))
            self.out["enum-refuse"] = arguments.string_close
            self.out["enum"] = rx(arguments.string_open) + "%%TEXT%%" + rx(arguments.string_close)
            if arguments.string_quotes_also:
                self.out["enum-also"] = "".join(arguments.string_quotes_also)
        elif arguments.string_open:
            opening, close = rx(arguments.string_open), rx(arguments.string_close)
            if arguments.quoted_strings:
                quote = arguments.string_open
                body = f"(?:[^{rx(quote)}\\\\]|\\\\(?s:.))*"
                self.add("ARG_STRING", f"/{opening}{body}{close}/")
                self.out["enum-refuse"] = "\\"
            else:
                self.add("ARG_STRING", through(opening, close, [close]))
                self.out["enum-refuse"] = arguments.string_close
            self.out["enum"] = opening + "%%TEXT%%" + close
            string_rule = "ARG_STRING"
            if arguments.string_quotes_also:
                # Python's other quotes, escapes and all (as the reader takes them).
                strings = [_quoted(quote) for quote in arguments.string_quotes_also]
                self.add("ARG_STRING_ALSO", f"/{'|'.join(strings)}/")
                string_rule = "(ARG_STRING | ARG_STRING_ALSO)"
                # ... an enum's strings too, each escaped as Python escapes it there.
                self.out["enum-also"] = "".join(arguments.string_quotes_also)
        else:
            string_rule = "PY_STRING" if literal == "python" else "JSON_STRING"
            self.out["enum"] = rx('"') + "%%TEXT%%" + rx('"')
            self.out["enum-escape"] = "json"
        if arguments.syntax is not None:
            options = self.own_values(arguments.syntax, string_rule)
        else:
            value = self.values(literal == "python")
            word = self.add("ARG_WORD", f"/{_class((True, _NOT_IN_WORDS))}+/")
            if quoted is not None and len(quoted.quotes) == len(QUOTES):
                # no Python string besides the format's own (as the GBNF's py-literal)
                value = "py_object | py_array | NUMBER | PY_WORD"
            options = ([string_rule] if arguments.string_open else []) + [value, word]
        self.add("arg_value", " | ".join(options))
        self.out["unit-text"] = f"%%RULE%%: /{head}/ arg_value\n"
        self.out["unit-string"] = f"%%RULE%%: /{head}/ {string_rule}\n"
        self.out["unit-scalar"] = f"%%RULE%%: /{head}(?:%%VALUE%%)/\n"
        if arguments.syntax is not None:
            # Objects and arrays in the template's own syntax, held to their schema
            # by the GBNF's rules for such a value (``%%TYPED%%``); and a string whose
            # length its schema bounds, by the GBNF's counted rule for it.
            self.out["unit-typed"] = f"%%RULE%%: /{head}/ %%TYPED%%\n"
            self.out["unit-raw"] = self.out["unit-typed"]

    def quoted_strings(self, quoted, closer: str) -> str:
        """Rules ``arg_string…`` for the strings of units whose reader ends one at the
        first quote a follower follows (compiler/quoted_strings.py), as the GBNF's
        (compiler/codegen/gbnf.py, ``quoted_strings``): each its opening quote and
        text through its first quote (a terminal), then segments through the next
        quote (terminals) that start with no follower; the rule of them all. Here
        the separator is a lexeme of its own before the next unit's, and the call's
        closer one before the section's closer or the next call's opening: a segment
        that starts with either starts with that lexeme (``closer``: the call's)."""
        separator = self.out["separator"]
        found = []
        for index, (quote, escaped) in enumerate(quoted.quotes):
            name = f"ARG_STRING_{index}"
            mark = rx(quote)
            if escaped:
                text = f"(?:[^{mark}\\\\]|\\\\(?s:.))*"
            else:
                text = f"[^{mark}]*"
            self.add(name, f"/{mark}{text}{mark}/")
            more = []
            lead = {"plain": "", "separator": separator + " ", "closer": f"/{closer}/ "}
            for kind, ways in quoted.segments(separator_apart=True).items():
                body = f"/{text}{mark}/ & ~/{_ways(ways)}(?s:.*)/"
                more.append(lead[kind] + self.add(f"{name}_{kind.upper()}", body))
            found.append(self.add(f"arg_string_{index}", f"{name} ({' | '.join(more)})*"))
        return self.add("arg_string", " | ".join(found))

    def calls_rules(self) -> None:
        """Where the calls begin (after the trigger, or from their opener) and what
        follows them."""
        calls = self.calls
        assert calls is not None
        first = calls.opener or calls.start
        after_opener = self.marker(calls.start) if calls.opener else ""
        full = self.marker(first) + after_opener
        if calls.content_in_section:
            # With no content, the section's opener stands right before the calls.
            full = f"(?:{self.marker(calls.section_start)})?" + full
        # What comes before a call: the first from the calls' opener, or after the
        # trigger (which the content's lexeme ends with), or a further one. It is
        # written into the call's first lexeme (a lexeme of its own would race the
        # content's and the reasoning's, and lose where they run on past it).
        self.out["lead-full"] = full
        self.add("calls_full", "call_full calls_tail")
        if self.fmt.content_as_unit:
            # After the separator's first piece, which ends the content's lexeme.
            self.out["lead-rest"] = self.marker(calls.separator, skip=1) + self.marker(calls.start)
            self.add("calls_rest", "call_rest calls_tail")
        elif self.head:
            self.out["lead-rest"] = self.marker(first, skip=1) + after_opener
            self.add("calls_rest", "call_rest calls_tail")
        self.out["lead-next"] = self.marker(calls.separator) + self.marker(calls.start)
        self.add("calls_tail", "call_next* calls_more", part="list")
        self.add("calls_tail", "calls_more", part="list-single")
        closing = self.closer(calls.section_end)
        markers = [rx(m) for m in dict.fromkeys(self.fmt.stop + calls.end_of_turn_after_calls) if m]
        most = MARKERS_AFTER_CALLS
        ends = f"(?:{WS}{_any_of(markers)}){{0,{most}}}{WS}" if markers else WS
        if not calls.content_after_calls:
            self.add("calls_more", f"/{closing}{ends}/")
            return
        # Content after the calls: none, text up to an end-of-turn marker, or text to
        # the end; never the trigger (that would be a broken call): the whole of it, as
        # the GBNF's (its first piece alone opens no call: the live run's Gemma 4 wrote
        # ``<|tool_call>call_to_guests{`` there, which parse reads as content).
        word = calls.separator.strip() if self.fmt.content_as_unit else calls.trigger
        stops = markers + ([rx(word)] if word else [])
        options = [f"/{ends}/"]
        for number, marker in enumerate(markers):
            closed = self.add(f"AFTER_CLOSED_{number}", through("", marker, stops))
            options.append(f"{closed} /{ends}/")
        options.append(self.add("AFTER", upto_end("", stops)))
        self.add("calls_after", " | ".join(options))
        self.add("calls_more", f"/{closing}/ calls_after" if closing else "calls_after")

    # content and reasoning

    def region(self, name: str, end: str, opener: str, mode: str) -> list[str]:
        """Alternatives for free text after ``opener`` (a regular expression) that
        runs to the end of the output or is closed by ``end``, and holds the trigger
        only where calls follow it (and none does in mode ``none``; in mode
        ``required``, calls follow it)."""
        stops = [rx(stop) for stop in (end, self.head) if stop]
        label = name.upper() + ("_OPEN" if opener else "")
        calls = self.calls is not None and mode != "none"
        options = []
        if end:
            closed = self.add(f"{label}_CLOSED", through(opener, rx(end), stops))
            then = {"auto": "(calls_full | END)", "required": "calls_full"}
            options.append(f"{closed} {then[mode] if calls else 'END'}")
        if mode != "required":
            options.append(self.add(label, upto_end(opener, stops)))
        if self.head and self.head != end and calls:
            trig = self.add(f"{label}_TRIG", through(opener, rx(self.head), stops))
            options.append(f"{trig} calls_rest")
        return options

    def reply(self, mode: str) -> str:
        """The rule ``reply``: content and calls, as ``mode`` allows them (in mode
        ``required``, content only where calls follow it)."""
        content = self.fmt.content
        calls = self.fmt.calls
        if not content.wrapped:
            shape = calls.output_shape if calls else None
            if shape is not None:
                # No marker opens a call: content is what does not start like one.
                body = self.add("CONTENT", f"/{ANY}/ & ~/{_shape(shape)}{ANY}/")
                options = {"auto": [body, "calls_full"], "none": [body]}.get(mode, ["calls_full"])
            else:
                options = self.region("content", "", "", mode)
        else:
            opener = WS + rx(content.start)
            options = self.region("content", content.end, opener, mode)
            if any(content.opened_by_prompt):
                # The prompt may write the opener (with one thinking setting): the
                # output starts inside the content, which its closer ends.
                options += self.region("content", content.end, "", mode)
            if not content.always_wrapped:
                # The opener is written only after reasoning (or only where tools are
                # given): bare text is content too.
                options += self.region("text" if content.end else "content", "", "", mode)
            else:
                options += ["calls_full"] if calls is not None and mode != "none" else []
                options += ["END"] if mode != "required" else []
        return f"reply: {' | '.join(dict.fromkeys(options))}\n"

    def start(self, enable_thinking: bool | None, required: bool) -> str:
        """The root for one thinking setting (``required``: a call must follow; None:
        a request that gives none, the template's default), with the reasoning rules
        it uses."""
        suffix = {True: "", False: "-no-thinking", None: "-default"}[enable_thinking]
        part = "start" + ("-calls" if required else "") + suffix
        reasoning = self.fmt.reasoning
        if not reasoning.has_block:
            self.add("start", "reply", part=part)
            return part
        # With tools given or not (a prompt may open the block only without them):
        # the grammar admits what parse reads either way.
        settings = [reasoning.opened_by_prompt(enable_thinking, tools) for tools in (False, True)]
        opened, always = any(settings), all(settings)
        # (None: the prompt may have opened it, and the text is reasoning where the
        # closer comes, the answer where it does not)
        maybe = not opened and None in settings
        end = rx(reasoning.end)
        led = []
        if not opened and (not reasoning.start or maybe):
            # Without an opener the text is reasoning only where the closer comes, and
            # otherwise the answer: reasoning is text up to the closer that holds no call.
            stops = [end] + ([rx(self.head)] if self.head else [])
            self.add("REASONING_LED", through("", end, stops), part=part)
            led = ["REASONING_LED reply"]
            if not reasoning.start:
                self.add("start", "REASONING_LED reply | reply", part=part)
                return part
        opener = ""
        if reasoning.start:
            opener = WS + _any_of([rx(start) for start in reasoning.starts])
            opener = f"(?:{opener})?" if opened else opener
        self.add("REASONING", through(opener, end, [end]), part=part)
        options = ["REASONING reply"] + led
        if not required:
            # A block left open at the end of the output: reasoning.
            options.append(self.add("REASONING_OPEN", upto_end(opener, [end]), part=part))
        if not always:
            options.append("reply")
        self.add("start", " | ".join(options), part=part)
        return part

    def build(self) -> dict[str, str]:
        modes = ("auto", "none", "required") if self.calls is not None else ("none",)
        for mode in modes:
            self.out[mode] = self.reply(mode)
        for thinking in (True, False, None):
            self.start(thinking, False)
            if self.calls is not None:
                self.start(thinking, True)
        if self.calls is not None:
            self.calls_rules()
            self.call()
        parts = PARTS + (CALL_PARTS if self.calls is not None else ())
        found = {part: self.out.get(part) or self.text(part) for part in parts}
        found.update((key, value) for key, value in self.out.items() if key not in found)
        return found


def _ways(ways: tuple[Way, ...]) -> str:
    """Followers (compiler/quoted_strings.py) as a regular expression that matches
    any of them."""
    written = ["".join(_step(chars) + "*" * repeated for chars, repeated in way) for way in ways]
    return _any_of(written)


def _step(chars: tuple[bool, str]) -> str:
    """A class of a follower's step as a regular expression: one character as
    itself; ``str.isspace``'s whitespace as Unicode's (``\\s``, Rust's) and the four
    separators below the space that Python counts as whitespace too."""
    negated, members = chars
    if not negated and len(members) == 1:
        return rx(members)
    if not set(SPACES) <= set(members):
        return _class(chars)
    rest = "".join(sorted(set(members) - set(SPACES)))
    return "[" + ("^" if negated else "") + r"\s\x{1c}-\x{1f}" + class_body(rest, rx) + "]"


def _shape(shape: list) -> str:
    """A ``triggers`` shape as a regular expression (for what content does not start
    with: any whitespace, as the GBNF's content)."""
    out = []
    for segment in shape:
        if segment[0] == "ws":
            out.append(r"\s*")
        elif segment[0] == "text":
            out.append(rx(segment[1]))
        elif segment[0] == "class":
            _, negated, chars, repeated = segment
            out.append(_class((negated, chars)) + ("+" if repeated else ""))
    return "".join(out)


def build(fmt: Format) -> dict[str, str]:
    """The parts of the format's Lark rules, for a module's ``_LARK``."""
    return _Lark(fmt).build()

