"""Hugging Face transformers' ``response_template``, made from the typed format model.

transformers (5.13 on; the tests pin 5.23.0) reads a model's output with a declarative
template kept in ``tokenizer_config.json``: ``parse_response`` reads it whole, a
``ResponseParser`` as it streams, and vLLM (``--tool-call-parser hf``,
``--reasoning-parser hf``), SGLang and TRL read the same templates. The language is
flat. A template names *fields*; each is a region of the output between an opening and
a closing delimiter (literals, or patterns of Python's ``regex`` module compiled with
DOTALL), whose text a content parser reads (``text``, ``json``, ``xml-inline``, …) and a
``transform`` reshapes, with the opening pattern's named groups at hand. One field may
have no opening: it takes the text no other region claims, up to its own closing. While
a region is open only its closing is looked for; between regions every opening is. The
prompt (``prefix``) is read first, from where ``start_anchor_pattern`` last matches.

How a format maps onto it (``template``):

- ``reasoning_content``: the block, opened only at the start of the output (as
  ``parse`` reads it), closed by its end marker or where calls begin (the model left
  it open). Where the prompt may open the block, the anchor keeps the opener it ends
  with, so the prefix opens the region exactly when the prompt did; otherwise the
  anchor is the end of the prompt.
- ``tool_calls``: one region per call — the call's start and the holes before the
  arguments in the opening pattern (the name a named group), the literal after the
  arguments its closing — or, where the calls are one JSON array between section
  markers, one region per section read with ``transform_each``. Arguments: JSON read as
  JSON; key/value units with ``xml-inline``, values left as text for transformers to
  type by the tools' JSON schemas, as ``parse`` types them; values in a syntax of the
  template's own (Gemma 4) cut by a recursive pattern and read as JSON once their
  strings and keys are quoted. Lists and objects written as Python literals are read
  by nothing (json.loads types them), so such a format gets no template.
- ``content``: the implicit field, its pieces joined; it closes at every marker that is
  no content: end of turn (at the end of the text), section markers, the content's own
  markers.

What the language cannot say is reported instead (``Inexpressible``: the construct's
YAML path and why), and no template is made; what it reads otherwise than ``parse``
in outputs the format allows is a caveat (``Export.caveats``). Both become review
notes of the spec (``review_notes``). Call ids are not read (transformers' tool calls
carry none). Function names are matched as written: the escapes a template may apply
to them (``&amp;``, …) touch no character OpenAI allows in a name.

Every literal from the spec is escaped for the pattern it goes into (``_escape``), and
the template is written as JSON with its keys in a fixed order: the same model gives
the same bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..charclass import marker_pieces
from ..model import Arguments, Calls, Format, JsonCall, ValueSyntax

REASONING = "reasoning_content"  # the field name transformers' server reads first
CONTENT = "content"
TOOL_CALLS = "tool_calls"

# Characters with a meaning in a pattern (outside a class), written with a backslash.
_SPECIAL = frozenset(".^$*+?{}[]|()\\")
_CONTROL = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\f": "\\f", "\v": "\\v"}
# A name, id or index as parse reads it: one word, at most 256 characters; where
# nothing but whitespace ends it, the characters of a word.
_HOLE = r"\S{1,256}?"
_WORD_HOLE = r"[\w.:-]{1,256}"
_WORD_END = r"(?![\w.:-])"


class Inexpressible(Exception):
    """The language cannot express a construct of the format."""

    def __init__(self, path: str, why: str):
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why


@dataclass(frozen=True)
class Export:
    """The template of one format, or why there is none; caveats: (YAML path, what
    transformers reads otherwise than ``parse``)."""

    template: dict | None
    inexpressible: Inexpressible | None = None
    caveats: tuple[tuple[str, str], ...] = field(default=())


def export(fmt: Format) -> Export:
    try:
        return Export(_Emitter(fmt).template(), caveats=_caveats(fmt))
    except Inexpressible as error:
        return Export(None, error)


def text(fmt: Format) -> str | None:
    """The contents of ``generated/<slug>.response_template.json`` (None: none)."""
    return as_json(export(fmt))


def as_json(made: Export) -> str | None:
    if made.template is None:
        return None
    return json.dumps(made.template, ensure_ascii=False, indent=2) + "\n"


def review_notes(fmt: Format) -> list[dict]:
    """The spec's review notes about the export: why there is none, or its caveats."""
    made = export(fmt)
    if made.inexpressible is not None:
        return [
            {
                "path": made.inexpressible.path,
                "message": "transformers' response_template cannot express this: "
                f"{made.inexpressible.why}; no {fmt.slug}.response_template.json is written",
            }
        ]
    return [
        {"path": path, "message": f"transformers' response_template: {why}"}
        for path, why in made.caveats
    ]


def _caveats(fmt: Format) -> tuple[tuple[str, str], ...]:
    calls = fmt.calls
    if calls is None or calls.arguments is None or not calls.arguments.units:
        return ()
    found = []
    if calls.arguments.literal == "python" and not calls.arguments.containers:
        # (the analysis could not tell how this template writes lists and objects)
        found.append(
            (
                "tools.arguments.literal",
                "where the template writes a list or an object as a Python literal (True, "
                "None or single quotes inside), transformers reads it as text; it types "
                "JSON lists and objects, and True, False, None standing alone",
            )
        )
    syntax = calls.arguments.syntax
    if syntax is not None and not calls.arguments.suffixed:
        found.append(
            (
                "tools.arguments.syntax",
                "a list or an object is read as JSON once its strings and keys are quoted; "
                "one that holds an object key other than letters, digits and '_'"
                + (f" or a null (written {syntax.null_word})" if syntax.null_word != "null" else "")
                + " is read as text (a value standing alone is typed by the tool's schema)",
            )
        )
    if calls.arguments.key_escapes:
        written = ", ".join(form for _, form in calls.arguments.key_escapes)
        found.append(
            (
                "tools.arguments.key_escapes",
                f"argument keys are read as written ({written} not decoded)",
            )
        )
    return tuple(found)


# --------------------------------------------------------------------------- patterns


def _escape(text: str) -> str:
    """``text`` as a pattern that matches it literally: the characters with a meaning
    escaped, control characters written as escapes, everything else as itself."""
    out = []
    for char in text:
        if char in _SPECIAL:
            out.append("\\" + char)
        elif char in _CONTROL:
            out.append(_CONTROL[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    return "".join(out)


def _either(patterns) -> str:
    """One pattern matching any of ``patterns`` (the longest first: at one place the
    first alternative that matches wins)."""
    unique = sorted(dict.fromkeys(p for p in patterns if p), key=lambda p: (-len(p), p))
    if not unique:
        return ""
    return unique[0] if len(unique) == 1 else "(?:" + "|".join(unique) + ")"


class _Emitter:
    def __init__(self, fmt: Format):
        self.fmt = fmt
        # The markers parse lets other whitespace surround (runtime/text.py _pieces).
        tokens = (token for token in fmt.preserved_tokens if token.strip())
        self.tokens = sorted(tokens, key=len, reverse=True)

    # ----------------------------------------------------------------- literals

    def _pieces(self, literal: str) -> tuple[list[str], str]:
        """(the literal's pieces, its trailing whitespace), as the reader cuts them."""
        return marker_pieces(literal, self.tokens)

    def loose(self, literal: str) -> str:
        """A marker as parse matches it: any whitespace before and between its
        pieces, its own trailing whitespace where written."""
        pieces, trail = self._pieces(literal)
        pattern = "".join(r"\s*" + _escape(piece) for piece in pieces) or r"\s*"
        if trail:
            pattern += f"(?:{_escape(trail)})?"
        return pattern

    @staticmethod
    def after_value(literal: str) -> str:
        """The literal that ends a value, as parse finds it: its core as written, the
        whitespace it starts with left out of the value where written, its trailing
        whitespace where written; a literal that is only whitespace, any."""
        core = literal.strip()
        if not core:
            return r"\s*"
        lead = literal[: len(literal) - len(literal.lstrip())]
        trail = literal[len(literal.rstrip()) :]
        pattern = _escape(core)
        if lead:
            pattern = f"(?:{_escape(lead)})?" + pattern
        if trail:
            pattern += f"(?:{_escape(trail)})?"
        return pattern

    # ----------------------------------------------------------------- the template

    def template(self) -> dict:
        fmt = self.fmt
        fields: dict[str, dict] = {}
        if fmt.reasoning.has_block:
            fields[REASONING] = self.reasoning()
        if fmt.calls is not None:
            fields[TOOL_CALLS] = self.tool_calls(fmt.calls)
        fields[CONTENT] = self.content()
        return {
            "version": 1,
            "defaults": {"role": "assistant"},
            "start_anchor_pattern": self.anchor(),
            "fields": fields,
        }

    def prompt_opens(self) -> str:
        """Whether the prompt opens the reasoning block: "always", "never" or
        "sometimes" (by the thinking setting, or with tools given)."""
        reasoning = self.fmt.reasoning
        without = (reasoning.opened_when_thinking, reasoning.opened_when_not_thinking)
        flags = without + (reasoning.opened_with_tools or without)
        return "always" if all(flags) else "never" if not any(flags) else "sometimes"

    def anchor(self) -> str:
        """Where the message starts in the prompt: the end of the prompt, or, where the
        prompt may open the reasoning block and ends with its opener, that opener (so
        the parser reads the block as open)."""
        reasoning = self.fmt.reasoning
        if not (reasoning.has_block and reasoning.starts and self.prompt_opens() != "never"):
            return r"\Z"
        openers = _either(_escape(start.strip()) for start in reasoning.starts)
        # Everything up to where only the opener and whitespace are left, or to the end:
        # one match from the start (a prompt that is only the opener is cut before it).
        return r"\A(?:(?!" + openers + r"\s*\Z)[\s\S])*"

    def reasoning(self) -> dict:
        reasoning, calls = self.fmt.reasoning, self.fmt.calls
        # Where calls begin (the model left the block open), the block ends.
        calls_begin = _escape(calls.trigger) if calls is not None and not calls.bare else ""
        if reasoning.starts:
            openers = _either(_escape(start.strip()) for start in reasoning.starts)
            opener = r"\A\s*" + _waiting_openers([start.strip() for start in reasoning.starts])
            if self.anchor() != r"\Z":
                # The prefix's opener, and the model's own where it writes one again
                # (parse reads past it): wait while what follows may still be one.
                waits = _pending([start.strip() for start in reasoning.starts])
                opener += rf"(?:\s*{openers}|\s*{waits})"
        else:
            # No marker opens the block: the output starts inside it, where the prompt
            # opens it, or else where its closer follows. (A call at the start is no
            # reasoning: the region would close where it opens, and open again.)
            opens = self.prompt_opens()
            if opens == "sometimes":
                raise Inexpressible(
                    "reasoning.opened_by_prompt",
                    "the prompt opens a reasoning block that has no opener in some settings "
                    "only, and the prompt shows no sign of which",
                )
            opener = r"\A" + (rf"(?!\s*{calls_begin})" if calls_begin else "")
            if opens == "never":
                opener += r"(?=[\s\S]*?" + _escape(reasoning.end) + ")"
        closer = _escape(reasoning.end)
        if calls_begin:
            closer = f"{closer}|(?={calls_begin})"
        return {"open_pattern": opener, "close_pattern": closer, "content": "text"}

    def content(self) -> dict:
        """The implicit field: every piece of text no region claims, joined. It closes
        at each marker that is no content."""
        fmt, calls = self.fmt, self.fmt.calls
        markers = []
        if fmt.reasoning.has_block:
            # a closer with no opener at the start: an empty block, its opener elided
            markers.append(r"\A" + self.loose(fmt.reasoning.end))
        if fmt.content.wrapped:
            # The opener where parse reads it: at the start, after the reasoning.
            markers.append(r"\A" + self.loose(fmt.content.start))
            if fmt.reasoning.has_block:
                markers.append(f"(?<={_escape(fmt.reasoning.end)})" + self.loose(fmt.content.start))
            if fmt.content.end:
                markers.append(self.loose(fmt.content.end))
        if calls is not None:
            if calls.start.strip() and calls.section_start.strip():
                markers.append(self.loose(calls.section_start))
            if calls.section_end.strip() and not self.json_array(calls):
                markers.append(self.loose(calls.section_end))
            others = (calls.turn_break, *calls.end_of_turn_after_calls)
            markers += [self.loose(marker) for marker in others if marker.strip()]
        if fmt.messages is not None and fmt.messages.end.strip():
            # A message's end and the next one's opener, between content and calls.
            markers.append(self.loose(fmt.messages.end + fmt.messages.opener))
        # An end-of-turn marker at the end of the text (parse strips one there).
        # (Up to the end of the text: while more may come, the match ends where the text
        # does, and transformers waits.)
        markers += [self.loose(stop) + r"\s*\Z" for stop in fmt.stop if stop.strip()]
        field = {"content": "text", "repeats": True, "join": ""}
        closer = _either(markers)
        if closer:
            field = {"close_pattern": closer, **field}
        return field

    # ----------------------------------------------------------------- calls

    def tool_calls(self, calls: Calls) -> dict:
        if calls.format == "json":
            assert calls.json is not None
            return self.json_calls(calls, calls.json)
        return self.tagged_calls(calls)

    @staticmethod
    def json_array(calls: Calls) -> bool:
        """Whether the calls are written as one JSON array between section markers."""
        return (
            calls.format == "json"
            and calls.section_start.rstrip().endswith("[")
            and calls.section_end.lstrip().startswith("]")
            and not calls.start.strip()
            and not calls.end.strip()
            and calls.separator.strip() == ","
        )

    def json_calls(self, calls: Calls, found: JsonCall) -> dict:
        if found.name_is_key:
            raise Inexpressible(
                "tools.json.name_is_key",
                "a call written as {name: arguments}: a transform names the members it "
                "takes, and cannot take a member's key as the name",
            )
        if found.literal != "json":
            raise Inexpressible(
                "tools.json.literal",
                "calls written as Python literals, which its json reader does not take",
            )
        if found.arguments_as_string:
            raise Inexpressible(
                "tools.json.arguments_as_string",
                "arguments written as a string holding JSON, which no transform decodes",
            )
        assert found.name is not None and found.arguments is not None
        for key, path in (("name", found.name), ("arguments", found.arguments)):
            if not all(_is_word(part) for part in path):
                raise Inexpressible(
                    f"tools.json.{key}",
                    f"the member {'.'.join(path)!r} cannot be named in a transform",
                )
        if self.json_array(calls):
            head = calls.section_start.rstrip()[:-1]
            tail = calls.section_end.lstrip()[1:]
            if calls.content_in_section or not head.strip():
                raise Inexpressible("tools.section", "content inside the JSON array's section")
            array = {
                "open_pattern": self.loose(head) + r"(?=\s*\[)",
                "close_pattern": self.loose(tail) if tail.strip() else self.turn_ends(calls),
                "content": "json",
                "transform_each": True,
                "transform": _call_transform(
                    "{%s}" % ".".join(found.name), "{%s}" % ".".join(found.arguments)
                ),
            }
            return _drop_empty(array)  # no closer: the array runs to the end of the text
        opener = self.call_opener(calls)
        opener += r"(?=\s*\{)" if not calls.start.strip() else ""
        field = {
            "open_pattern": opener,
            "close_pattern": self.loose(calls.end) if calls.end.strip() else self.followed(calls),
            "repeats": True,
            "content": "json",
            "transform": _call_transform(
                "{content.%s}" % ".".join(found.name), "{content.%s}" % ".".join(found.arguments)
            ),
        }
        return _drop_empty(field)

    def call_opener(self, calls: Calls) -> str:
        """What opens a call: its start (after a separator), or where nothing marks a
        call, the section's opener, the separator or the start of the output."""
        separator = self.loose(calls.separator) if calls.separator.strip() else ""
        if calls.start.strip():
            return (f"(?:{separator})?" if separator else "") + self.loose(calls.start)
        if calls.content_in_section:
            raise Inexpressible(
                "tools.content_in_section",
                "content inside a section whose calls have no start marker",
            )
        if not separator:
            raise Inexpressible(
                "tools.call.start",
                "calls with no marker before each and no separator between them: after "
                "the first, nothing says where the next one begins",
            )
        ways = [separator]
        if calls.section_start.strip():
            ways.append(self.loose(calls.section_start))
        elif self.fmt.reasoning.has_block:
            # The reasoning region takes its closer: what follows it is not marked.
            raise Inexpressible(
                "tools.call.start",
                "calls with nothing before them (the start of the output), after a "
                "reasoning block",
            )
        else:
            ways.append(r"\A\s*")
        opener = _either(ways)
        if self.fmt.content.wrapped:
            # what starts with the content's opener is content
            opener += f"(?!{_escape(self.fmt.content.start.strip())})"
        return opener

    def followed(self, calls: Calls) -> str:
        """Where a call that no literal closes ends: before what may follow it (the
        next call, the section's closer, the end of the turn); "" for the end of the
        text."""
        after = []
        nxt = self.loose(calls.separator) if calls.separator.strip() else ""
        if calls.start.strip():
            nxt += self.loose(calls.start)
        elif calls.format == "json" and nxt:
            nxt += r"\s*\{"
        after.append(nxt)
        if calls.section_end.strip() and not self.json_array(calls):
            after.append(self.loose(calls.section_end))
        ahead = _either([*after, *self._turn_markers(calls)])
        return rf"\s*(?={ahead})" if ahead else ""

    def _turn_markers(self, calls: Calls) -> list[str]:
        ends = (*calls.end_of_turn_after_calls, *self.fmt.stop)
        return [self.loose(marker) for marker in ends if marker.strip()]

    def turn_ends(self, calls: Calls) -> str:
        """Where the calls end that nothing closes: before the end of the turn, or at
        the end of the text ("")."""
        ahead = _either(self._turn_markers(calls))
        return rf"\s*(?={ahead})" if ahead else ""

    def tagged_calls(self, calls: Calls) -> dict:
        parts = calls.parts
        last = len(parts) - 1
        if calls.holes.index("arguments") != last:
            raise Inexpressible(
                f"tools.call.parts.{last}",
                "a hole after the arguments: a region's closing pattern cannot give "
                "its named groups to the call",
            )
        arguments = calls.arguments
        assert arguments is not None
        opener = self.call_opener(calls) + self.holes(calls, 0, named=set())
        closers = [parts[last].after, *parts[last].also]
        if all(closer.strip() for closer in closers):
            closer = _either(self.loose(c) for c in closers)
        elif any(closer.strip() for closer in closers):
            closer = _either([*(self.loose(c) for c in closers if c.strip()), self.followed(calls)])
        else:
            closer = self.followed(calls)
        field: dict = {"open_pattern": opener, "close_pattern": closer, "repeats": True}
        if arguments.units:
            if arguments.literal == "python" and arguments.containers == "python":
                raise Inexpressible(
                    "tools.arguments.containers",
                    "lists and objects written as Python literals (True, None, single "
                    "quotes inside), which none of its readers takes: transformers types a "
                    "list or an object by json.loads",
                )
            field["content"] = "xml-inline"
            field["content_args"] = {"tag_pattern": self.unit(calls)}
            if not arguments.suffixed:
                field["content_args"]["value_parser"] = _own_value_parser(arguments)
        else:
            if arguments.literal != "json":
                raise Inexpressible(
                    "tools.arguments.literal",
                    "arguments written as a Python literal, which its json reader does not take",
                )
            field["content"] = "json"
        field["transform"] = _call_transform("{name}", "{content}")
        return _drop_empty(field)

    def holes(self, calls: Calls, index: int, named: set[str]) -> str:
        """The pattern of the call's parts from ``index`` up to its arguments: each
        hole, then the literal after it (or another real outputs write; an option
        that skips an optional hole goes on after it). The first name is the group
        ``name``."""
        parts = calls.parts
        if parts[index].hole == "arguments":
            return ""
        part = parts[index]
        options = [(part.after, 0), *calls.part_options[index]]
        # One word, as parse reads it (whitespace around it is not the word's); where a
        # literal that is only whitespace may end it, up to where the word ends.
        lazy = all(literal.strip() for literal, _ in options)
        hole = _HOLE if lazy else _WORD_HOLE
        if part.hole == "name" and "name" not in named:
            hole = f"(?P<name>{hole})"
            named = named | {"name"}
        hole = r"\s*" + hole + (r"\s*" if lazy else "")
        # A literal that is only whitespace (or none) may be taken only where none of
        # the others may still be written: a shorter match would be taken at once.
        written = [literal for literal, _ in options if literal.strip()]
        ways = [
            (self.after_value(literal) if literal.strip() else _WORD_END + _undecided(written))
            + self.holes(calls, index + 1 + skip, named)
            for literal, skip in options
        ]
        return hole + (ways[0] if len(ways) == 1 else "(?:" + "|".join(ways) + ")")

    def unit(self, calls: Calls) -> str:
        """The pattern of one key/value unit of the arguments, its key in the group
        ``key``, its value, as written, in ``value``."""
        arguments = calls.arguments
        assert arguments is not None
        if not arguments.suffixed and arguments.syntax is not None and arguments.raw_strings:
            return self.own_unit(arguments)
        if not arguments.suffixed:
            raise Inexpressible(
                "tools.arguments.value_suffix",
                "key/value arguments with no literal after each value: where a value "
                "ends is up to its own syntax, which the language does not read"
                + (
                    " (null is written None)"
                    if arguments.syntax and arguments.syntax.null_word != "null"
                    else ""
                ),
            )
        for name, found in (
            ("value_suffix_names_key", arguments.value_suffix_names_key),
            ("elements", arguments.elements),
            ("value_escapes", arguments.value_escapes),
            ("string_open", arguments.string_open),
        ):
            if found:
                raise Inexpressible(f"tools.arguments.{name}", _UNIT_LIMITS[name])
        pattern = self.loose(arguments.key_prefix) + r"\s*(?P<key>\S{1,256}?)"
        pattern += self.after_value(arguments.key_end)
        if arguments.value_start:
            pattern += ".*?" + self.after_value(arguments.value_start)
        end = self.after_value(arguments.value_suffix)
        if arguments.verbatim is None:
            return pattern + "(?P<value>.*?)" + end
        opening, closing = map(_escape, arguments.verbatim)
        # A value between the verbatim marks is what they hold; any other is as written.
        return (
            f"{pattern}(?:{opening})?(?P<value>(?<={opening}).*?(?={closing}{end})"
            f"|(?<!{opening}).*?(?={end}))(?:{closing})?{end}"
        )

    def own_unit(self, arguments: Arguments) -> str:
        """The pattern of one key/value unit where the value's own syntax says where it
        ends (Gemma 4's ``key:<|"|>text<|"|>``, ``key:{k:[1,None]}``, ``key:None``): a
        key at the start or after the separator, then one whole value — a string up to
        its closing mark, an object or array up to the mark that closes it (a recursive
        group: the marks inside strings and nested values are skipped), or a word or
        number up to the separator or the end."""
        syntax = arguments.syntax
        assert syntax is not None
        _json_like(arguments, syntax)
        opening, closing = _escape(arguments.string_open), _escape(arguments.string_close)
        string = f"{opening}.*?{closing}"
        marks = _either(
            _escape(mark)
            for mark in (
                arguments.string_open,
                syntax.object_open,
                syntax.object_close,
                syntax.array_open,
                syntax.array_close,
            )
        )
        inside = f"(?:{string}|(?&nested)|(?!{marks}).)*"
        nested = (
            f"(?P<nested>{_escape(syntax.object_open)}{inside}{_escape(syntax.object_close)}"
            f"|{_escape(syntax.array_open)}{inside}{_escape(syntax.array_close)})"
        )
        separator = _escape(arguments.separator.strip())
        word = f"(?:(?!{separator}).)*?"
        pattern = rf"(?:\A|(?<={separator}))" + self.loose(arguments.key_prefix)
        pattern += r"\s*(?P<key>[^\s]{1,256}?)\s*" + _escape(arguments.key_end.strip())
        return pattern + rf"\s*(?P<value>{string}|{nested}|{word})\s*(?={separator}|\Z)"


def _json_like(arguments: Arguments, syntax: ValueSyntax) -> None:
    """A value syntax its json reader takes once strings are quoted and keys are
    (``string_delims``, ``unquoted_keys``): JSON's marks, keys written bare."""
    json_marks = {
        "object_open": "{",
        "object_close": "}",
        "key_prefix": "",
        "key_end": ":",
        "member_separator": ",",
        "array_open": "[",
        "array_close": "]",
        "item_separator": ",",
        "true_word": "true",
        "false_word": "false",
    }
    for name, mark in json_marks.items():
        if getattr(syntax, name).strip() != mark or (mark and getattr(syntax, name) != mark):
            raise Inexpressible(
                f"tools.arguments.syntax.{name}",
                f"values in a syntax of the template's own that writes {getattr(syntax, name)!r} "
                f"where JSON writes {mark!r}, which its json reader does not take",
            )
    if arguments.separator.strip() != ",":
        raise Inexpressible(
            "tools.arguments.separator",
            "arguments in a syntax of the template's own, separated otherwise than by ','",
        )


def _own_value_parser(arguments: Arguments) -> dict:
    """How each value of a unit in the template's own syntax is read: as JSON once its
    strings are quoted and its keys are; a word that is no JSON (None) as text, which
    transformers types by the tool's schema."""
    return {
        "name": "json",
        "args": {
            "unquoted_keys": True,
            "string_delims": [[arguments.string_open, arguments.string_close]],
            "allow_non_json": True,
        },
    }


_UNIT_LIMITS = {
    "value_suffix_names_key": "a value's closer that repeats its key (a backreference)",
    "elements": "objects and arrays written as elements, which xml-inline does not nest",
    "value_escapes": "values with escaped characters, which nothing decodes",
    "string_open": "string values between marks inside the units, which nothing removes",
}


def _undecided(literals: list[str]) -> str:
    """A lookahead that fails where the text ends (after whitespace) or goes on with
    what one of ``literals`` starts with: more text may make it that literal, and
    transformers takes a match that is complete at once."""
    firsts = sorted({_escape(literal.strip()[0]) for literal in literals if literal.strip()})
    return r"(?!\s*(?:" + "|".join([*firsts, r"\Z"]) + "))"


def _waiting_openers(literals: list[str]) -> str:
    """One pattern matching any of ``literals``, the longest first, where one that
    begins another (Gemma 4's ``<|channel>`` and ``<|channel>thought``) is not taken
    while the text ends in a beginning of the rest of the longer: transformers takes at
    once a complete match that ends before the text does, while the longer is still on
    its way."""
    ways = []
    for literal in sorted(dict.fromkeys(literals), key=lambda text: (-len(text), text)):
        rests = [other[len(literal) :] for other in literals if other.startswith(literal)]
        rests = [rest for rest in rests if rest]
        ways.append(_escape(literal) + (f"(?!{_beginnings(rests)}\\Z)" if rests else ""))
    return ways[0] if len(ways) == 1 else "(?:" + "|".join(ways) + ")"


def _pending(literals: list[str]) -> str:
    """A lookahead that fails where what is left of the text is whitespace and a
    beginning of one of ``literals`` (at least its first character)."""
    return r"(?!\s*" + _beginnings(literals) + r"\Z)"


def _beginnings(literals: list[str]) -> str:
    """A pattern matching a beginning of one of ``literals``, at least its first
    character."""
    chains = []
    for literal in dict.fromkeys(literals):
        chain = ""
        for char in reversed(literal):
            chain = _escape(char) + (f"(?:{chain})?" if chain else "")
        chains.append(chain)
    return "(?:" + "|".join(chains) + ")"


def _is_word(text: str) -> bool:
    return bool(text) and all(char.isalnum() or char == "_" for char in text)


def _call_transform(name: str, arguments: str) -> dict:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def _drop_empty(field: dict) -> dict:
    return {key: value for key, value in field.items() if value != ""}
