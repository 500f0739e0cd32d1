"""The typed format model: one validated spec as frozen objects, the format's one
source of truth for every emitter (parser module, stream reader, grammars, triggers).

A spec is built into a ``Format`` once, after the schema has checked its shape. The
model then enforces what the schema cannot say (rules across fields) and names the
spec file and YAML path of what breaks one; it also names, as properties, the facts
that emitters would otherwise re-derive from the raw mapping ("has a reasoning
block", "has calls", "where calls begin").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from . import call_shapes, polyfills as polyfill_rules
from .spec import SpecError

HOLES = ("name", "id", "index", "arguments")
# llama.cpp's numbers for grammar_triggers types.
TRIGGER_TYPES = {"word": 1, "pattern": 2, "pattern_full": 3}
# llama.cpp's token trigger (common_grammar_trigger_type's first member): a word that is
# one token, matched by its id.
TOKEN_TRIGGER = 0


class _Where:
    """Errors that name the spec file and the YAML path inside it."""

    def __init__(self, origin: str):
        self.origin = origin

    def fail(self, path: str, message: str) -> SpecError:
        return SpecError(f"{self.origin}: {path}: {message}")


# The template's default where a request gives no thinking switch
# (capabilities.thinking_switch.default).
THINKING_ON, THINKING_OFF, UNDECIDED = "thinking_on", "thinking_off", "undecided"


def by_setting(pair: tuple[bool, bool], enable_thinking: bool | None, default: str | None):
    """Of a (thinking on, thinking off) pair of flags, the one ``enable_thinking``
    picks; for None (a request that gives no switch) the template's ``default``'s.
    None where the default is undecided (or the template has no switch) and the two
    differ: the output is read both ways."""
    on, off = pair
    if enable_thinking is not None:
        return on if enable_thinking else off
    if on == off or default == THINKING_ON:
        return on
    if default == THINKING_OFF:
        return off
    return None


@dataclass(frozen=True)
class Reasoning:
    """Where the model writes its reasoning."""

    mode: str
    start: str  # "" where no marker opens the block
    end: str  # "" where the format has no block
    opened_when_thinking: bool
    opened_when_not_thinking: bool
    # (thinking on, thinking off) where the prompt rendered with tools opens the block
    # otherwise; None: as without tools.
    opened_with_tools: tuple[bool, bool] | None = None
    start_also: tuple[str, ...] = ()  # other openers real outputs write (overrides)
    # The template's default (THINKING_ON, THINKING_OFF, UNDECIDED), None: no switch.
    default: str | None = None

    @property
    def starts(self) -> tuple[str, ...]:
        """Every opener the reader takes, the longest first (it wins where two match)."""
        found = dict.fromkeys((self.start, *self.start_also)) if self.start else {}
        return tuple(sorted(found, key=len, reverse=True))

    @property
    def has_block(self) -> bool:
        """Whether outputs may hold a reasoning block the parser reads."""
        return self.mode != "none" and bool(self.end)

    @property
    def tools_change_opening(self) -> bool:
        """Whether the prompt opens the block otherwise when tools are given."""
        return self.opened_with_tools is not None and self.opened_with_tools != (
            self.opened_when_thinking,
            self.opened_when_not_thinking,
        )

    def opened_by_prompt(self, enable_thinking: bool | None, tools: bool = False) -> bool | None:
        """Whether the prompt of that setting opens the block (``by_setting``: None
        where it may or may not, and the output is read both ways)."""
        pair = (self.opened_when_thinking, self.opened_when_not_thinking)
        if tools and self.opened_with_tools is not None:
            pair = self.opened_with_tools
        return by_setting(pair, enable_thinking, self.default)

    def describe(self) -> str:
        if not self.has_block:
            return "none"
        if not self.start:
            return f"from the start of the output up to {self.end!r}"
        opened = [
            label
            for label, flag in (
                ("thinking on", self.opened_when_thinking),
                ("thinking off", self.opened_when_not_thinking),
            )
            if flag
        ]
        text = f"{self.start!r} ... {self.end!r}"
        if self.start_also:
            text += f" (also opened by {', '.join(map(repr, self.start_also))})"
        if opened:
            text += f" (the prompt opens the block with {' and '.join(opened)})"
        maybe = [
            label
            for label, tools in (("without tools", False), ("with tools", True))
            if self.opened_by_prompt(None, tools) is None
        ]
        if maybe:
            where = "" if len(maybe) == 2 else f" {maybe[0]}"
            text += (
                f" (with no switch given{where}, the template's default is undecided: text"
                f" before {self.end!r} is reasoning where it comes, an answer where it"
                " does not)"
            )
        if self.tools_change_opening and self.opened_with_tools is not None:
            labels = ("thinking on", "thinking off")
            with_tools = [
                label for label, flag in zip(labels, self.opened_with_tools, strict=True) if flag
            ]
            text += "; with tools given, the prompt opens it " + (
                f"with {' and '.join(with_tools)}" if with_tools else "never"
            )
        return text


@dataclass(frozen=True)
class Content:
    """How the model writes the answer."""

    mode: str
    start: str  # "" where content is bare
    end: str  # "" where no marker closes it
    # Whether the prompt writes the opener, (thinking on, thinking off).
    opened_by_prompt: tuple[bool, bool] = (False, False)
    # Other wrappers real outputs write (overrides): (opener, closer; "" where none
    # closes it).
    start_also: tuple[tuple[str, str], ...] = ()
    # The template's default (as Reasoning.default).
    default: str | None = None

    def opened(self, enable_thinking: bool | None) -> bool:
        """Whether the output may start inside the content, for that setting. Where
        it may or may not (an undecided default), it may: the content's closer then
        ends it, and text without the closer reads the same either way."""
        return by_setting(self.opened_by_prompt, enable_thinking, self.default) is not False

    @property
    def wrapped(self) -> bool:
        """Whether a marker may open the content."""
        return self.mode != "plain" and bool(self.start)

    @property
    def wrappers(self) -> tuple[tuple[str, str], ...]:
        """Every (opener, closer) the reader takes, the longest opener first (it wins
        where two match); () where the content is not wrapped."""
        if not self.wrapped:
            return ()
        found = dict.fromkeys(((self.start, self.end), *self.start_also))
        return tuple(sorted(found, key=lambda pair: len(pair[0]), reverse=True))

    @property
    def always_wrapped(self) -> bool:
        return self.wrapped and self.mode == "always_wrapped"

    def describe(self) -> str:
        if not self.wrapped:
            return "plain text"
        closer = f" ... {self.end!r}" if self.end else ""
        when = {
            "always_wrapped": "always",
            "wrapped_with_tools": "where tools are given",
        }.get(self.mode, "after reasoning")
        also = "".join(
            f", or {start!r}" + (f" ... {end!r}" if end else "") for start, end in self.start_also
        )
        return f"{self.start!r}{closer} ({when}){also}"


@dataclass(frozen=True)
class Part:
    """One hole of a tagged call and the literal written after it."""

    hole: str
    after: str
    also: tuple[str, ...] = ()  # other spellings real outputs use (overrides)
    optional: bool = False  # real outputs may leave out the hole and the literal before it


@dataclass(frozen=True)
class JsonCall:
    """Where a call written as one JSON (or Python-literal) object keeps its parts."""

    name: tuple[str, ...] | None
    arguments: tuple[str, ...] | None
    id: tuple[str, ...] | None
    name_is_key: bool
    literal: str  # "json" or "python"
    arguments_as_string: bool = False  # the arguments are a string holding JSON
    other: tuple[tuple[str, ...], ...] = ()  # members written beside these (an index)
    # Other names real outputs give a top-level member (overrides): (key, names).
    key_also: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def members(self) -> tuple[tuple[str, ...], ...]:
        """The path of every member the template writes in a call object."""
        paths = (self.name, self.arguments, self.id) + self.other
        return tuple(path for path in paths if path)

    @property
    def member_tree(self) -> dict:
        """The call object's members as a tree, for the grammars: each key maps to the
        members under it, or, at a leaf, to what it holds ("name", "arguments", or
        "other" for an id or index the template writes beside them)."""
        assert self.name is not None and self.arguments is not None
        tree: dict = {}
        kinds = [(self.name, "name"), (self.arguments, "arguments")]
        kinds += [(path, "other") for path in self.members[2:]]
        for keys, leaf in kinds:
            node = tree
            for key in keys[:-1]:
                node = node.setdefault(key, {})
            node[keys[-1]] = leaf
        return tree

    @property
    def flat(self) -> bool:
        """Whether every field is a member of the call object itself (no nesting)."""
        return all(path is None or len(path) == 1 for path in (self.name, self.arguments, self.id))


@dataclass(frozen=True)
class ValueSyntax:
    """Values in a syntax the template's own macro writes (Gemma 4's ``{key:<|"|>text<|"|>}``):
    objects and arrays between these marks, the words it writes for null, true and
    false, numbers as JSON writes them; strings between the arguments' string marks."""

    object_open: str
    object_close: str
    key_prefix: str
    key_end: str
    member_separator: str
    array_open: str
    array_close: str
    item_separator: str
    null_word: str
    true_word: str
    false_word: str

    @property
    def words(self) -> dict[str, object]:
        """Each word as written → the value it stands for."""
        return {self.null_word: None, self.true_word: True, self.false_word: False}


@dataclass(frozen=True)
class Elements:
    """Objects and arrays written as elements (MiniMax M3): each member as ``open``,
    its value, ``close`` (``{key}`` standing for its key), members one after the
    other with ``separator`` between; an array's items are members named ``item``."""

    open: str
    close: str
    separator: str
    item: str

    @property
    def open_head(self) -> str:
        """What every element's opening begins with: the text before its key."""
        return self.open.split(KEY_SLOT)[0]


# Stands for a key in a literal that repeats it (a value suffix, an element's tags).
KEY_SLOT = "{key}"


@dataclass(frozen=True)
class Arguments:
    """How a tagged call writes its arguments: one JSON value, or key/value units."""

    encoding: str  # "json" or "tagged"
    literal: str  # "json" or "python": how non-string values are written
    # Where literal is python: how lists and objects are written ("json": tojson's
    # JSON; "python": Python literals, True and single quotes inside); "" not known.
    containers: str = ""
    key_prefix: str = ""
    key_end: str = ""
    value_start: str = ""
    # What the text before value_start (an attribute naming the value's type) holds
    # for a string value: a value so marked is the text as written.
    string_attribute: str = ""
    # What it holds for a value of each JSON type: (type, word), where the analysis
    # read them (the grammars write the one the tool's schema gives a value).
    type_attributes: tuple[tuple[str, str], ...] = ()
    value_suffix: str = ""
    separator: str = ""
    string_open: str = ""
    string_close: str = ""
    value_suffix_names_key: bool = False
    string_escapes: bool = False  # the template escapes a quote inside a string
    # Python's other quotes a string value may be written between, where the values are
    # Python literals: read as Python reads a string.
    string_quotes_also: tuple[str, ...] = ()
    syntax: ValueSyntax | None = None  # values in the template's own syntax
    # How the template writes some characters of a key / a string value: character
    # -> as written (an attribute's &amp;, &quot;).
    key_escapes: tuple[tuple[str, str], ...] = ()
    value_escapes: tuple[tuple[str, str], ...] = ()
    verbatim: tuple[str, str] | None = None  # marks around a string as it stands (CDATA)
    elements: Elements | None = None  # objects and arrays written as elements

    @property
    def units(self) -> bool:
        """Whether the arguments are key/value units (values typed by the tools' schemas)."""
        return self.encoding == "tagged"

    @property
    def suffixed(self) -> bool:
        """Whether a literal after each value marks where it ends."""
        return bool(self.value_suffix.strip())

    @property
    def raw_strings(self) -> bool:
        """Whether a string value's delimiters make no JSON or Python literal (Gemma 4's
        ``<|"|>``): the text between them is then the value as it stands. Quotes make a
        literal whose escapes are decoded."""
        first = self.string_open.lstrip()[:1]
        return (
            bool(self.string_open)
            and self.string_close == self.string_close.strip()
            and not (first.isalnum() or first in "\"'{[(-+.")
        )

    @property
    def quoted_strings(self) -> bool:
        """Whether strings are written between quotes (one character, the same on
        both sides) with escapes, which must be skipped to find where one ends."""
        return (
            self.string_escapes
            and self.string_open in ('"', "'")
            and self.string_close == self.string_open
        )


@dataclass(frozen=True)
class Calls:
    """How the model writes tool calls: section markers around the calls of a turn,
    then each call as JSON (``json``) or as text with holes (``tagged``)."""

    format: str  # "json" or "tagged"
    section_start: str
    section_end: str
    start: str
    end: str  # json: the literal after the object
    separator: str
    parts: tuple[Part, ...]  # tagged
    json: JsonCall | None
    arguments: Arguments | None  # tagged
    end_of_turn_after_calls: tuple[str, ...]
    content_after_calls: bool
    # How the template writes some characters of a function name: character -> as written.
    name_escapes: tuple[tuple[str, str], ...] = ()
    # A turn with calls writes its content inside the section, after its opener and
    # before the first call: the calls begin at the first call's start.
    content_in_section: bool = False
    # What a turn with content writes between the content and its calls where it ends
    # the turn there and opens a new one for them ("" where the calls follow in the
    # same turn): not content.
    turn_break: str = ""
    # Other openers real outputs start a call with (overrides): tried after ``start``.
    start_also: tuple[str, ...] = ()
    # Markers real outputs write before a turn's calls where the template writes
    # none (overrides): dropped there.
    prefix_also: tuple[str, ...] = ()
    # Other openers real outputs write for the section (overrides), "" for none: the
    # calls then begin at a call's start.
    section_start_also: tuple[str, ...] = ()

    @property
    def output_shape(self) -> list | None:
        """What an output made of these calls starts with where no marker opens them
        (None where one does): ``call_shapes.whole_output_shape``."""
        return call_shapes.whole_output_shape(self)

    @property
    def opener(self) -> str:
        """The section's opener as the calls' reader meets it before the first call:
        none where the content stands between them (``content_in_section``)."""
        return "" if self.content_in_section else self.section_start

    @property
    def trigger(self) -> str:
        """The text a call section begins with ("" where nothing marks a call)."""
        return self.opener.strip() or self.start.strip()

    @property
    def starts(self) -> tuple[str, ...]:
        """Every opener a call is read by, the template's first; () where real outputs
        write no other."""
        return tuple(dict.fromkeys((self.start, *self.start_also))) if self.start_also else ()

    @property
    def section_starts(self) -> tuple[str, ...]:
        """Every opener the section is read by, the template's first; () where real
        outputs write no other."""
        if not self.section_start_also:
            return ()
        return tuple(dict.fromkeys((self.opener, *self.section_start_also)))

    @property
    def triggers_also(self) -> tuple[str, ...]:
        """What else calls begin with, besides ``trigger``: the other call openers,
        where no section opener comes before the first call (or real outputs leave it
        out), and the section's other openers."""
        prefixes = [text.strip() for text in self.prefix_also]
        if self.opener.strip():
            others = [text.strip() for text in self.section_start_also if text]
            if "" in self.section_start_also:
                others += [text.strip() for text in (self.start, *self.start_also)]
            return tuple(
                dict.fromkeys(text for text in others + prefixes if text != self.trigger)
            )
        return tuple(
            dict.fromkeys(
                text
                for text in [t.strip() for t in self.start_also] + prefixes
                if text != self.trigger
            )
        )

    @property
    def bare(self) -> bool:
        """Whether nothing marks a call: the whole output is calls or content."""
        return not self.trigger

    @property
    def typed_values(self) -> bool:
        """Whether argument values are text for the tools' JSON schemas to type."""
        return self.format == "tagged" and self.arguments is not None and self.arguments.units

    @property
    def literal(self) -> str:
        """How the format writes non-string values: "json" or "python"."""
        if self.json is not None:
            return self.json.literal
        assert self.arguments is not None
        return self.arguments.literal

    @property
    def holes(self) -> tuple[str, ...]:
        return tuple(part.hole for part in self.parts)

    @property
    def part_options(self) -> tuple[tuple[tuple[str, int], ...], ...]:
        """Per part, the other literals that may end its hole besides ``after``, each
        with how many parts it skips: the part's ``also``, then, where the next part
        is optional, that part's literals (reading one skips the optional hole)."""
        options = []
        for index, part in enumerate(self.parts):
            found = [(text, 0) for text in part.also]
            following = self.parts[index + 1] if index + 1 < len(self.parts) else None
            if following is not None and following.optional:
                found += [(text, 1) for text in (following.after, *following.also)]
            kept = [option for option in found if option != (part.after, 0)]
            options.append(tuple(dict.fromkeys(kept)))
        return tuple(options)

    def describe(self) -> str:
        if self.format == "json":
            assert self.json is not None
            where = (
                "{name: arguments}"
                if self.json.name_is_key
                else ", ".join(
                    f"{field} at {'.'.join(path)}"
                    for field, path in (
                        ("name", self.json.name),
                        ("arguments", self.json.arguments),
                        ("id", self.json.id),
                    )
                    if path
                )
            )
            shape = f"{self.start!r} + a {self.json.literal} object ({where}) + {self.end!r}"
        else:
            shape = repr(self.start) + "".join(
                f" + <{part.hole}> + {part.after!r}" for part in self.parts
            )
        section = ""
        if self.section_start or self.section_end:
            section = f"; section {self.section_start!r} ... {self.section_end!r}"
        if self.content_in_section:
            section += ", content inside it before the calls"
        if self.turn_break:
            section += f"; after content, {self.turn_break!r} opens a new turn for the calls"
        also = [f"the section opened by {text!r}" for text in self.section_start_also if text]
        if "" in self.section_start_also:
            also.append("calls with no section opener")
        also += [f"starting {text!r}" for text in self.start_also]
        also += [f"{text!r} before the calls" for text in self.prefix_also]
        if self.json is not None:
            also += [
                f"{name!r} for {key!r}" for key, names in self.json.key_also for name in names
            ]
        for part in self.parts:
            also += [f"{text!r} after <{part.hole}>" for text in part.also]
            if part.optional:
                also.append(f"no <{part.hole}>")
        if also:
            section += "; real outputs also (overrides): " + ", ".join(also)
        return f"{self.format}: {shape}, separated by {self.separator!r}{section}"


@dataclass(frozen=True)
class Trigger:
    type: str  # word, pattern, pattern_full
    value: str

    def as_llama_cpp(self, token_ids: dict[str, int] | None = None) -> dict:
        """llama.cpp's server JSON for one of ``grammar_triggers``: a word that is one
        token of the tokenizer (``token_ids``) becomes a token trigger, type 0, as
        llama.cpp's server makes one of such a word itself."""
        token = (token_ids or {}).get(self.value) if self.type == "word" else None
        if token is not None:
            return {"type": TOKEN_TRIGGER, "value": self.value, "token": token}
        return {"type": TRIGGER_TYPES[self.type], "value": self.value}


@dataclass(frozen=True)
class Tokens:
    """The spec's ``tokens`` section: what a server filters and triggers on by id."""

    source: str  # where they were read: "tokenizer.json" or "gguf"
    bos_id: int | None
    eos_id: int | None
    eos_text: str | None
    # Every token that ends a turn (eos first), and the texts of those that have one.
    eos_ids: tuple[int, ...]
    eos_texts: tuple[str, ...]
    # Marker → id, for the format's markers that are one token, in the spec's order.
    ids: tuple[tuple[str, int], ...]

    def describe(self) -> str:
        eos = f"eos {self.eos_text!r} = {self.eos_id}" if self.eos_text else "no eos"
        ones = ", ".join(f"{text!r} = {token_id}" for text, token_id in self.ids)
        return f"{eos}; one token each: {ones or 'no marker'} (from {self.source})"


@dataclass(frozen=True)
class Polyfills:
    """What ``prepare_messages`` rewrites for this template (the spec's ``polyfills``):
    each names what the template lacks; all off, a conversation passes as it is."""

    reasoning: str | None = None  # a field, "block:<type>/<key>", or "content"
    arguments: str | None = None  # "object" or "string"
    non_null_content: bool = False
    typed_content: bool = False
    system: bool = False
    tool_definitions: bool = False
    tool_results: bool = False
    tool_calls: bool = False
    call_ids: str | None = None  # the pattern the template checks call ids against
    fallback_call: tuple[str, str] | None = None  # our call's opener and closer

    @property
    def reasoning_block(self) -> tuple[str, str] | None:
        if not self.reasoning or not self.reasoning.startswith("block:"):
            return None
        kind, key = self.reasoning[len("block:") :].split("/")
        return kind, key

    def applied(self) -> list[str]:
        """The names of the rewrites this template needs, in the switches' order."""
        flags = (
            ("reasoning", self.reasoning is not None),
            ("arguments", self.arguments is not None),
            ("content", self.non_null_content),
            ("typed_content", self.typed_content),
            ("system", self.system),
            ("tool_definitions", self.tool_definitions),
            ("tool_results", self.tool_results),
            ("tool_calls", self.tool_calls),
            ("call_ids", self.call_ids is not None),
        )
        return [name for name, on in flags if on]


@dataclass(frozen=True)
class Messages:
    """A turn written as several messages, each with a header (the spec's
    ``messages``)."""

    opener: str  # opens each message after the first
    header_end: str  # ends a message's header
    content_also: tuple[str, ...] = ()  # other headers of content (overrides)
    end: str = ""  # ends a message another follows ("" where only end-of-turn markers do)

    def describe(self) -> str:
        text = f"several messages, each after the first opened by {self.opener!r}, headers ending {self.header_end!r}"
        if self.content_also:
            text += "; content also under " + ", ".join(map(repr, self.content_also))
        return text


@dataclass(frozen=True)
class ThinkingSwitch:
    """The variables a request switches thinking with, and what the template does
    where it gives none (capabilities.thinking_switch)."""

    # (name, value for thinking on, value for thinking off); a value is MISSING where
    # none of the variable's renders the prompt of that setting.
    variables: tuple[tuple[str, Any, Any], ...]
    default: str  # THINKING_ON, THINKING_OFF, UNDECIDED

    def setting(self, enable_thinking: bool) -> dict[str, Any]:
        """What a render sets for thinking on (True) or off (False)."""
        return {
            name: values[0 if enable_thinking else 1]
            for name, *values in self.variables
            if values[0 if enable_thinking else 1] is not MISSING
        }

    def describe(self) -> str:
        pieces = []
        for name, on, off in self.variables:
            values = [f"{value!r} on" for value in (on,) if value is not MISSING]
            values += [f"{value!r} off" for value in (off,) if value is not MISSING]
            pieces.append(f"{name} ({', '.join(values)})")
        default = {
            THINKING_ON: "thinking on",
            THINKING_OFF: "thinking off",
            UNDECIDED: "undecided, the output read both ways",
        }[self.default]
        if [name for name, *_ in self.variables] == ["enable_thinking"]:
            switched = f"switched by {pieces[0]}"
        else:
            switched = (
                f"switched by the template's {' and '.join(pieces)}, which"
                " enable_thinking=True/False stands for"
            )
        return f"{switched}; a request that gives none: {default} (enable_thinking=None)"


# A switch value the spec does not give.
MISSING: Any = object()


@dataclass(frozen=True)
class Format:
    """One chat format: what the parser, the stream reader and the grammars read."""

    slug: str
    origin: str  # the spec file, for messages
    reasoning: Reasoning
    content: Content
    calls: Calls | None
    stop: tuple[str, ...]  # end-of-turn strings known literally
    tokenizer_eos: bool
    triggers: tuple[Trigger, ...]
    preserved_tokens: tuple[str, ...]
    spec: dict  # the resolved spec, as written to the module's SPEC
    tokens: Tokens | None = None  # where the source has a tokenizer
    polyfills: Polyfills = Polyfills()
    # How a request switches thinking (capabilities.thinking_switch); None: it cannot.
    thinking_switch: ThinkingSwitch | None = None
    messages: Messages | None = None  # a turn of several messages (the spec's messages)
    # What every generation prompt ends with, from each marker in it on (the spec's
    # prompt.ends_with), the longest first: written again at the output's start.
    prompt_ends: tuple[str, ...] = ()

    @property
    def stop_strings(self) -> tuple[str, ...]:
        """The end-of-turn strings a server may stop at (the module's ``STOP``): all
        of ``stop`` but a marker that a call's opener begins with. GigaChat 3 ends
        every message with ``<|message_sep|>``, and a call is a message of its own
        after it: a server stopping there would never see the call. The readers
        drop such a marker at the end of the output all the same (``stop``)."""
        openers = [trigger.value for trigger in self.triggers if trigger.type == "word"]
        if self.calls is not None:
            calls = self.calls
            openers += [calls.trigger, calls.start, *calls.start_also, calls.section_start]
            openers += list(calls.section_start_also)
        cores = [opener.strip() for opener in openers if opener.strip()]
        return tuple(
            stop for stop in self.stop if not any(core.startswith(stop) for core in cores)
        )

    @property
    def token_ids(self) -> dict[str, int]:
        """Marker → id, for the markers that are one token of the tokenizer."""
        return dict(self.tokens.ids) if self.tokens else {}

    def llama_cpp_triggers(self) -> list[dict]:
        """``grammar_triggers`` as llama.cpp's server reads them (DESIGN.md)."""
        return [trigger.as_llama_cpp(self.token_ids) for trigger in self.triggers]

    @property
    def has_calls(self) -> bool:
        return self.calls is not None

    @property
    def content_as_unit(self) -> bool:
        """Whether the content is written as one more unit of the turn, in a call's
        place: nothing marks a call (the prompt writes what opens the first unit),
        the content always opens with a marker of its own where a call would start,
        and no marker closes it, so the separator written between units is what
        ends it and the calls follow (a turn writes content, then calls). Where this
        holds a separator after the content may start calls."""
        return content_as_unit(self.content, self.calls)

    @property
    def fallback(self) -> bool:
        """Whether the calls are read in our fallback format (the template has none)."""
        return self.calls is not None and self.spec["tools"]["format"] == "none"

    def describe(self) -> list[str]:
        """The format in a few lines, for a module's docstring."""
        lines = [
            f"Reasoning: {self.reasoning.describe()}.",
            f"Content: {self.content.describe()}.",
            f"Tool calls: {self.calls.describe() if self.calls else 'none'}"
            + (" (our fallback format: the template writes none)." if self.fallback else "."),
        ]
        stop = ", ".join(map(repr, self.stop))
        if self.tokenizer_eos:
            stop = (stop + ", " if stop else "") + "the tokenizer's eos token"
        lines.append(f"End of turn: {stop or 'not marked'}.")
        if self.messages:
            lines.append(f"A turn: {self.messages.describe()}.")
        if self.thinking_switch:
            lines.append(f"Thinking: {self.thinking_switch.describe()}.")
        if self.tokens:
            lines.append(f"Tokens: {self.tokens.describe()}.")
        return lines


def build(spec: dict[str, Any], *, slug: str, origin: str) -> Format:
    """The model of a schema-valid spec; SpecError names the file and the YAML path of
    a rule across fields that the spec breaks."""
    where = _Where(origin)
    polyfills = _polyfills(spec.get("polyfills"), spec, where)
    tools = spec["tools"]
    triggers = tuple(Trigger(t["type"], t["value"]) for t in spec["grammar"]["triggers"])
    if tools["format"] == "none" and polyfills.fallback_call:
        # The template writes no calls; prepare_messages tells the model to write them
        # in our format, and this module reads that.
        tools = polyfill_rules.fallback_tools(spec["polyfills"]["fallback_call"])
        triggers += (Trigger("word", polyfills.fallback_call[0]),)
    tokens = _tokens(spec.get("tokens"))
    switch = thinking_switch(spec["capabilities"].get("thinking_switch"))
    default = switch.default if switch else None
    return Format(
        slug=slug,
        origin=origin,
        reasoning=_reasoning(spec["reasoning"], where, default),
        content=_content(spec["content"], where, default),
        calls=_calls(tools, where),
        stop=_stop(spec, tokens),
        tokenizer_eos=bool(spec["end_of_turn"]["tokenizer_eos"]),
        triggers=triggers,
        preserved_tokens=tuple(spec["grammar"]["preserved_tokens"]),
        spec=spec,
        polyfills=polyfills,
        tokens=tokens,
        thinking_switch=switch,
        messages=_messages(spec, where),
        prompt_ends=tuple(
            sorted(
                dict.fromkeys(t for t in (spec.get("prompt") or {}).get("ends_with") or () if t),
                key=len,
                reverse=True,
            )
        ),
    )


def _stop(spec: dict, tokens: Tokens | None) -> tuple[str, ...]:
    """The end-of-turn strings known literally: the spec's markers; the eos the
    template was rendered with, where the source gave it (``--eos-token``); the
    tokenizer's end tokens where the source has a tokenizer, else the headers of the
    messages that may follow the turn (which a model without its tokenizer's stop
    tokens may write next)."""
    section = spec["end_of_turn"]
    found = list(section["markers"])
    found.append((spec.get("render_inputs") or {}).get("eos_token") or "")
    if tokens is not None:
        found += tokens.eos_texts
    else:
        found += section.get("next_headers") or ()
    return tuple(dict.fromkeys(text for text in found if text))


def _messages(spec: dict, where: _Where) -> Messages | None:
    section = spec.get("messages")
    if not section:
        return None
    found = Messages(
        section["opener"],
        section["header_end"],
        tuple(section.get("content_also") or ()),
        section.get("end") or "",
    )
    for path, text in (("messages.opener", found.opener), ("messages.header_end", found.header_end)):
        if not text.strip():
            raise where.fail(path, "a marker must write more than whitespace")
    if found.content_also and not spec["content"].get("start"):
        raise where.fail("messages.content_also", "other content headers need the content's opener")
    for number, text in enumerate(found.content_also):
        if not text.rstrip().endswith(found.header_end.strip()):
            raise where.fail(f"messages.content_also.{number}", "a header ends with header_end")
    return found


def _tokens(section: dict | None) -> Tokens | None:
    if section is None:
        return None
    eos = section.get("eos") or {}
    bos = section.get("bos") or {}
    ends = section["eos_tokens"]
    return Tokens(
        source=section["source"],
        bos_id=bos.get("id"),
        eos_id=eos.get("id"),
        eos_text=eos.get("text"),
        eos_ids=tuple(token["id"] for token in ends),
        # The eos text even where it is no token of the vocabulary (no id to stop on).
        eos_texts=tuple(
            dict.fromkeys(text for text in (eos.get("text"), *(t["text"] for t in ends)) if text)
        ),
        ids=tuple(
            (token["text"], token["id"]) for token in section["markers"] if token["id"] is not None
        ),
    )


def content_as_unit(content: Content, calls: Calls | None) -> bool:
    """``Format.content_as_unit`` of a format's content and calls (the analysis asks
    it before the rest of the spec exists, for the triggers)."""
    return (
        calls is not None
        and calls.bare
        and bool(calls.separator.strip())
        and content.always_wrapped
        and not content.end
    )


def content_model(content_section: dict[str, Any], origin: str) -> Content:
    """The model of a spec's ``content`` section alone (see ``calls_model``)."""
    return _content(content_section, _Where(origin))


def calls_model(tools_section: dict[str, Any], origin: str) -> Calls | None:
    """The model of a spec's ``tools`` section alone (None where the format has no
    calls), for the analysis, which decides the spec's triggers from its calls before
    the rest of the spec exists; SpecError names ``origin`` and the YAML path."""
    return _calls(tools_section, _Where(origin))


def _polyfills(section: dict | None, spec: dict, where: _Where) -> Polyfills:
    if not section:
        return Polyfills()
    fallback = section.get("fallback_call")
    found = Polyfills(
        section.get("reasoning"),
        section.get("arguments"),
        bool(section.get("non_null_content")),
        bool(section.get("typed_content")),
        bool(section.get("system")),
        bool(section.get("tool_definitions")),
        bool(section.get("tool_results")),
        bool(section.get("tool_calls")),
        section.get("call_ids"),
        (fallback["start"], fallback["end"]) if fallback else None,
    )
    reasoning = spec["reasoning"]
    if found.reasoning == "content" and not (reasoning.get("start") and reasoning.get("end")):
        raise where.fail(
            "polyfills.reasoning", "reasoning written into content needs both reasoning markers"
        )
    writes_calls = found.tool_definitions or found.tool_calls
    if writes_calls and spec["tools"]["format"] == "none" and found.fallback_call is None:
        raise where.fail(
            "polyfills.fallback_call", "a format without calls of its own needs our call format"
        )
    return found


def thinking_switch(section: dict | None) -> ThinkingSwitch | None:
    """The model of capabilities.thinking_switch (None: no switch)."""
    if section is None:
        return None
    variables = tuple(
        (name, values.get(THINKING_ON, MISSING), values.get(THINKING_OFF, MISSING))
        for name, values in section["variables"].items()
    )
    return ThinkingSwitch(variables, section["default"])


def _reasoning(section: dict, where: _Where, default: str | None = None) -> Reasoning:
    mode = section["mode"]
    start, end = section.get("start") or "", section.get("end") or ""
    if mode in ("tag", "forced_open", "forced_closed") and not (start and end):
        missing = "reasoning.start" if not start else "reasoning.end"
        raise where.fail(missing, f"reasoning mode {mode!r} needs a start and an end marker")
    if mode == "delimiter" and not end:
        raise where.fail("reasoning.end", "reasoning mode 'delimiter' needs an end marker")
    if section.get("start_also") and not start:
        raise where.fail("reasoning.start_also", "other openers need an opener")
    opened = section["opened_by_prompt"]
    with_tools = section.get("opened_with_tools")
    for key, flags in (("opened_by_prompt", opened), ("opened_with_tools", with_tools or {})):
        if (flags.get("thinking_on") or flags.get("thinking_off")) and not end:
            raise where.fail(
                f"reasoning.{key}", "the prompt cannot open a block that has no end marker"
            )
    return Reasoning(
        mode,
        start,
        end,
        bool(opened["thinking_on"]),
        bool(opened["thinking_off"]),
        None
        if with_tools is None
        else (bool(with_tools["thinking_on"]), bool(with_tools["thinking_off"])),
        tuple(section.get("start_also") or ()),
        default,
    )


def _content(section: dict, where: _Where, default: str | None = None) -> Content:
    mode = section["mode"]
    start, end = section.get("start") or "", section.get("end") or ""
    if mode != "plain" and not start:
        raise where.fail("content.start", f"content mode {mode!r} needs a start marker")
    if mode == "plain" and (start or end):
        raise where.fail("content.mode", "plain content has no markers; say always_wrapped")
    opened = section.get("opened_by_prompt") or {}
    opened_by_prompt = (bool(opened.get("thinking_on")), bool(opened.get("thinking_off")))
    if any(opened_by_prompt) and not (mode == "always_wrapped" and end):
        raise where.fail(
            "content.opened_by_prompt", "a content the prompt opens needs its closer"
        )
    also = tuple((item["start"], item.get("end") or "") for item in section.get("start_also") or ())
    if also and not start:
        raise where.fail("content.start_also", "other openers need an opener")
    for number, (other, _) in enumerate(also):
        if not other.strip():
            raise where.fail(f"content.start_also.{number}.start", "an opener must write more than whitespace")
        if other == start or other in [item[0] for item in also[:number]]:
            raise where.fail(f"content.start_also.{number}.start", "an opener is given once")
    return Content(mode, start, end, opened_by_prompt, also, default)


def _syntax(section: dict | None, where: _Where) -> ValueSyntax | None:
    """The value syntax of ``tools.arguments.syntax``: marks that tell the kinds of
    value apart where each begins."""
    if section is None:
        return None
    syntax = ValueSyntax(**section)
    opens = (syntax.object_open, syntax.array_open)
    if syntax.object_open == syntax.array_open:
        raise where.fail("tools.arguments.syntax", "objects and arrays open alike")
    words = (syntax.null_word, syntax.true_word, syntax.false_word)
    if len(set(words)) < 3:
        raise where.fail("tools.arguments.syntax", "null, true and false are written alike")
    for name, word in zip(("null_word", "true_word", "false_word"), words, strict=True):
        if not _WORD.fullmatch(word):
            raise where.fail(f"tools.arguments.syntax.{name}", "a word is letters, digits, '_', '.', '+', '-'")
    for name, mark in (("object_open", opens[0]), ("array_open", opens[1]),
                       ("object_close", syntax.object_close), ("array_close", syntax.array_close)):  # fmt: skip
        if _WORD.match(mark):
            raise where.fail(f"tools.arguments.syntax.{name}", "a mark may not begin as a word does")
    return syntax


# What a word or number is made of, in a value syntax of the template's own (a mark
# must not begin as one does: the reader tells them apart by the first character).
_WORD = re.compile(r"[\w.+-]+")


def _escapes(section: dict | None, path: str, where: _Where) -> tuple[tuple[str, str], ...]:
    """``{character: as written}`` as pairs; each written form must read back as one
    character, so no form may be another's beginning."""
    pairs = tuple((section or {}).items())
    written = [form for _, form in pairs]
    for char, form in pairs:
        if form == char:
            raise where.fail(f"{path}.{char}", "a character written as itself is no escape")
        if any(other != form and other.startswith(form) for other in written):
            raise where.fail(f"{path}.{char}", "one escape begins another")
    return pairs


def _verbatim(section: dict | None) -> tuple[str, str] | None:
    return None if section is None else (section["open"], section["close"])


def _elements(section: dict | None, where: _Where) -> Elements | None:
    if section is None:
        return None
    elements = Elements(section["open"], section["close"], section["separator"], section["item"])
    for name in ("open", "close"):
        text = getattr(elements, name)
        head, _, tail = text.partition(KEY_SLOT)
        if KEY_SLOT in tail or not head.strip() or not tail:
            raise where.fail(
                f"tools.arguments.elements.{name}",
                f"an element's tag is marks, {KEY_SLOT} once, then marks",
            )
    (open_head, _, open_tail), (close_head, _, close_tail) = (
        elements.open.partition(KEY_SLOT),
        elements.close.partition(KEY_SLOT),
    )
    if open_head == close_head:
        raise where.fail("tools.arguments.elements", "an element opens and closes alike")
    if open_tail != close_tail:
        # A name ends at the first such text: a tag found is then whole.
        raise where.fail("tools.arguments.elements", "the tags must end alike after {key}")
    return elements


def _check_written_values(arguments: Arguments, where: _Where) -> None:
    """Escapes, verbatim marks and elements are read in values that a literal after
    each value ends (the text between key and suffix is the value's own)."""
    for name, found in (
        ("value_escapes", arguments.value_escapes),
        ("verbatim", arguments.verbatim),
        ("elements", arguments.elements),
    ):
        if found and not (arguments.units and arguments.suffixed):
            raise where.fail(
                f"tools.arguments.{name}", "read only where a value suffix ends each value"
            )
    if arguments.value_escapes and arguments.string_open:
        raise where.fail(
            "tools.arguments.value_escapes", "strings between marks are decoded as literals"
        )
    if arguments.string_quotes_also:
        # Read where the value's own text says where it ends, as Python's strings.
        if not arguments.units or arguments.suffixed or arguments.syntax is not None:
            raise where.fail(
                "tools.arguments.string_quotes_also",
                "read only in key/value arguments with nothing after a value to end it "
                "and no value syntax of the template's own",
            )
        if arguments.literal != "python":
            raise where.fail(
                "tools.arguments.string_quotes_also", "Python's quotes: literal must be python"
            )
        if arguments.string_open in arguments.string_quotes_also:
            raise where.fail(
                "tools.arguments.string_quotes_also", "the template's own quote is string_open"
            )


def _check_key_also(call: JsonCall, where: _Where) -> None:
    """Other names are read for members the template writes at the top of a call
    object, and name no member it writes."""
    written = {path[0] for path in call.members}
    seen: set[str] = set()
    for key, names in call.key_also:
        if call.name_is_key or key not in written:
            raise where.fail(
                f"tools.json.key_also.{key}",
                "not a member the template writes at the top of the call object",
            )
        for name in names:
            if name in written or name in seen:
                raise where.fail(
                    f"tools.json.key_also.{key}", f"{name!r} names another member already"
                )
            seen.add(name)


def _path(dotted: str | None) -> tuple[str, ...] | None:
    return tuple(dotted.split(".")) if dotted else None


def _calls(section: dict, where: _Where) -> Calls | None:
    kind = section["format"]
    if kind == "none":
        return None
    call = section.get("call")
    if call is None:
        raise where.fail("tools.call", f"tool format {kind!r} needs a call section")
    json_call = arguments = None
    parts: tuple[Part, ...] = ()
    if kind == "json":
        fields = section.get("json")
        if fields is None:
            raise where.fail("tools.json", "tool format 'json' needs a json section")
        if not fields["name_is_key"] and not (fields.get("name") and fields.get("arguments")):
            missing = "tools.json.name" if not fields.get("name") else "tools.json.arguments"
            raise where.fail(missing, "a call that is not {name: arguments} needs this field path")
        json_call = JsonCall(
            name=_path(fields.get("name")),
            arguments=_path(fields.get("arguments")),
            id=_path(fields.get("id")),
            name_is_key=bool(fields["name_is_key"]),
            literal=fields["literal"],
            arguments_as_string=bool(fields.get("arguments_as_string")),
            other=tuple(tuple(path.split(".")) for path in fields.get("other_fields") or ()),
            key_also=tuple(
                (key, tuple(names)) for key, names in (fields.get("key_also") or {}).items()
            ),
        )
        _check_key_also(json_call, where)
    else:
        if not call.get("parts"):
            raise where.fail("tools.call.parts", "tool format 'tagged' needs the call's parts")
        parts = tuple(
            Part(
                part["hole"],
                part["after"],
                tuple(part.get("also") or ()),
                bool(part.get("optional")),
            )
            for part in call["parts"]
        )
        holes = [part.hole for part in parts]
        for number, part in enumerate(parts):
            before = parts[number - 1].hole if number else None
            if part.optional and (part.hole not in ("id", "index") or before not in ("name", "id")):
                raise where.fail(
                    f"tools.call.parts.{number}.optional",
                    "only an id or index hole right after a name or id may be optional",
                )
            if part.also and part.hole == "index":
                raise where.fail(f"tools.call.parts.{number}.also", "not read after an index")
        for hole in ("name", "arguments"):
            if hole not in holes:
                raise where.fail("tools.call.parts", f"a tagged call needs a {hole!r} hole")
        if holes.count("arguments") > 1:
            raise where.fail("tools.call.parts", "a tagged call has one 'arguments' hole")
        if holes.index("name") > holes.index("arguments"):
            raise where.fail("tools.call.parts", "the name must come before the arguments")
        found = section.get("arguments")
        if found is None:
            raise where.fail("tools.arguments", "tool format 'tagged' needs an arguments section")
        arguments = Arguments(
            encoding=found["encoding"],
            literal=found["literal"],
            containers=found.get("containers") or "",
            key_prefix=found.get("key_prefix") or "",
            key_end=found.get("key_end") or "",
            value_start=found.get("value_start") or "",
            string_attribute=found.get("string_attribute") or "",
            type_attributes=tuple((found.get("type_attributes") or {}).items()),
            value_suffix=found.get("value_suffix") or "",
            separator=found.get("separator") or "",
            string_open=found.get("string_open") or "",
            string_close=found.get("string_close") or "",
            value_suffix_names_key=bool(found.get("value_suffix_names_key")),
            string_escapes=bool(found.get("string_escapes")),
            string_quotes_also=tuple(found.get("string_quotes_also") or ()),
            syntax=_syntax(found.get("syntax"), where),
            key_escapes=_escapes(found.get("key_escapes"), "tools.arguments.key_escapes", where),
            value_escapes=_escapes(
                found.get("value_escapes"), "tools.arguments.value_escapes", where
            ),
            verbatim=_verbatim(found.get("verbatim")),
            elements=_elements(found.get("elements"), where),
        )
        _check_written_values(arguments, where)
        if arguments.containers and arguments.literal != "python":
            raise where.fail(
                "tools.arguments.containers", "told apart only where literal is python"
            )
        if arguments.units:
            for number, part in enumerate(parts):
                if part.hole == "arguments" and part.also:
                    raise where.fail(
                        f"tools.call.parts.{number}.also",
                        "other closers are read after JSON arguments only",
                    )
            if not arguments.key_end.strip():
                raise where.fail("tools.arguments.key_end", "key/value arguments need this marker")
            if arguments.string_open and not arguments.string_close:
                raise where.fail(
                    "tools.arguments.string_close", "a string opener needs a closer"
                )
            if arguments.string_attribute and not arguments.value_start.strip():
                raise where.fail(
                    "tools.arguments.string_attribute", "read before value_start, which has no text"
                )
            words = dict(arguments.type_attributes)
            if words and words.get("string") != arguments.string_attribute:
                raise where.fail(
                    "tools.arguments.type_attributes", "a string's word is string_attribute"
                )
        if arguments.syntax is not None and not (
            arguments.units and not arguments.suffixed and arguments.string_open
        ):
            raise where.fail(
                "tools.arguments.syntax",
                "a value syntax of the template's own is read where key/value units have"
                " no value suffix, and needs the string marks (string_open)",
            )
        if arguments.syntax is not None and _WORD.match(arguments.string_open):
            raise where.fail("tools.arguments.string_open", "a mark may not begin as a word does")
    section_markers = section.get("section") or {}
    if section.get("content_in_section") and not (
        (section_markers.get("start") or "").strip() and call["start"].strip()
    ):
        raise where.fail(
            "tools.content_in_section",
            "content inside the section needs the section's opener and the call's start",
        )
    if section.get("turn_break") and not (
        (section_markers.get("start") or "").strip() or call["start"].strip()
    ):
        raise where.fail(
            "tools.turn_break", "a new turn for the calls needs a marker that starts them"
        )
    start_also = tuple(call.get("start_also") or ())
    if start_also and not call["start"].strip():
        raise where.fail("tools.call.start_also", "other openers need the call's start")
    if any(not text.strip() for text in start_also):
        raise where.fail("tools.call.start_also", "an opener must write more than whitespace")
    prefix_also = tuple(call.get("prefix_also") or ())
    if any(not text.strip() for text in prefix_also):
        raise where.fail("tools.call.prefix_also", "a marker must write more than whitespace")
    section_start_also = tuple(section_markers.get("start_also") or ())
    if section_start_also and (
        not (section_markers.get("start") or "").strip() or section.get("content_in_section")
    ):
        raise where.fail(
            "tools.section.start_also",
            "other openers need the section's opener before the first call",
        )
    if any(text and not text.strip() for text in section_start_also):
        raise where.fail(
            "tools.section.start_also", "an opener writes more than whitespace, or is ''"
        )
    return Calls(
        format=kind,
        section_start=section_markers.get("start") or "",
        section_end=section_markers.get("end") or "",
        start=call["start"],
        end=call.get("end") or "",
        separator=call["separator"],
        parts=parts,
        json=json_call,
        arguments=arguments,
        end_of_turn_after_calls=tuple(section.get("end_of_turn_after_calls") or ()),
        content_after_calls=bool(section.get("content_after_calls")),
        content_in_section=bool(section.get("content_in_section")),
        turn_break=section.get("turn_break") or "",
        name_escapes=_escapes(call.get("name_escapes"), "tools.call.name_escapes", where),
        start_also=start_also,
        prefix_also=prefix_also,
        section_start_also=section_start_also,
    )
