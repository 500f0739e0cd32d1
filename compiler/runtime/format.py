"""The format: every constant a format module gives the runtime, with its type and
its neutral value, which lets the runtime run on no format at all (its tests,
tests/runtime/). This list is the interface between a format module and the runtime
(``binding.INTERFACE`` numbers it); the model fills it (``compiler/codegen/module.py``
``constants``).

A format module (generated/<slug>.py) writes the constants whose values differ from
these, and ``bind`` (binding.py) runs the runtime with them: ``_given`` then finds
each in the runtime's globals. A standalone module writes them above the runtime, with
the same effect.
"""

from __future__ import annotations

from typing import Any

# The names declared here, in order: what ``bind`` takes from a format module.
FORMAT_NAMES: list[str] = []


def _given(name: str, neutral: Any) -> Any:
    """The value of the format constant ``name``: the one the runtime was run with
    (already in its globals), else ``neutral``."""
    FORMAT_NAMES.append(name)
    return globals().get(name, neutral)


# --- public data -------------------------------------------------------------------
# The resolved spec the module was generated from.
SPEC: dict = _given("SPEC", {})
# End-of-turn strings known literally, which a server may stop at; and the markers
# that end a turn's last message but a call's opener begins with (GigaChat 3's
# <|message_sep|>, after which a call may come as a message of its own): no stop
# strings, but the readers drop them at the end of the output as STOP's.
STOP: list[str] = _given("STOP", [])
TURN_END_ALSO: tuple[str, ...] = _given("TURN_END_ALSO", ())
# llama.cpp's grammar_triggers, and the markers that should stay single tokens.
TRIGGERS: list[dict] = _given("TRIGGERS", [])
PRESERVED_TOKENS: list[str] = _given("PRESERVED_TOKENS", [])
# The tokenizer's ids, where the source has a tokenizer (the spec's tokens section):
# marker → id for the markers that are one token, bos, every token that ends a turn.
TOKEN_IDS: dict[str, int] = _given("TOKEN_IDS", {})
BOS_TOKEN_ID: int | None = _given("BOS_TOKEN_ID", None)
EOS_TOKEN_IDS: list[int] = _given("EOS_TOKEN_IDS", [])
# The grammar of a whole output as a request that gives no thinking switch reads it
# (the template's default), of the calls from the trigger on, and of a whole output
# with thinking on and with thinking off.
GBNF: str = _given("GBNF", "")
GBNF_TOOLS: str | None = _given("GBNF_TOOLS", None)
_GRAMMAR_THINKING: str = _given("_GRAMMAR_THINKING", "")
_GRAMMAR_NO_THINKING: str = _given("_GRAMMAR_NO_THINKING", "")

# What every generation prompt ends with, from each marker in it on, the longest
# first: an output that starts with one of them writes it again (dropped there).
PROMPT_ENDS: tuple[str, ...] = _given("PROMPT_ENDS", ())

# --- reasoning ---------------------------------------------------------------------
# Outputs may hold a reasoning block: its opener ("" where none: the output starts
# inside it), the opener and others real outputs write (overrides), longest first,
# its closer.
HAS_REASONING: bool = _given("HAS_REASONING", False)
REASONING_START: str = _given("REASONING_START", "")
REASONING_STARTS: tuple[str, ...] = _given("REASONING_STARTS", ())
REASONING_END: str = _given("REASONING_END", "")
# Whether the prompt opens the block, per enable_thinking (True, False, and None: a
# request that gives none, read as the template's default; a None value there: the
# default is undecided, and the text is reasoning only where the closer comes);
# whether it does otherwise when tools are given, and then per enable_thinking.
OPENED_BY_PROMPT: dict[bool | None, bool | None] = _given(
    "OPENED_BY_PROMPT", {True: False, False: False, None: False}
)
TOOLS_CHANGE_OPENING: bool = _given("TOOLS_CHANGE_OPENING", False)
OPENED_WITH_TOOLS: dict[bool | None, bool | None] = _given(
    "OPENED_WITH_TOOLS", {True: False, False: False, None: False}
)

# --- content -----------------------------------------------------------------------
# A marker may open the content; it always does; the markers.
CONTENT_WRAPPED: bool = _given("CONTENT_WRAPPED", False)
CONTENT_ALWAYS_WRAPPED: bool = _given("CONTENT_ALWAYS_WRAPPED", False)
CONTENT_START: str = _given("CONTENT_START", "")
CONTENT_END: str = _given("CONTENT_END", "")
# Every opener the content may open with and its closer ("" where none), the longest
# opener first, where real outputs write others beside the template's (overrides);
# () where they do not.
CONTENT_STARTS: tuple[tuple[str, str], ...] = _given("CONTENT_STARTS", ())
# Whether the prompt writes the content's opener, per enable_thinking (as
# OPENED_BY_PROMPT): the output starts inside the content, which CONTENT_END ends.
CONTENT_OPENED: dict[bool | None, bool] = _given(
    "CONTENT_OPENED", {True: False, False: False, None: False}
)

# --- a turn written as several messages (the spec's ``messages``) -------------------
# What opens each message after the first (the prompt writes the first's), and what
# ends a message's header ("" where a turn is one message); what ends a message that
# another follows, besides STOP.
MESSAGE_OPENER: str = _given("MESSAGE_OPENER", "")
HEADER_END: str = _given("HEADER_END", "")
MESSAGE_END: str = _given("MESSAGE_END", "")
# The headers whose message is content: the content's opener, then the others real
# outputs write (overrides).
CONTENT_HEADERS: tuple[str, ...] = _given("CONTENT_HEADERS", ())

# --- tool calls --------------------------------------------------------------------
HAS_CALLS: bool = _given("HAS_CALLS", False)
# Nothing marks a call: the whole output is calls or content ...
BARE_CALLS: bool = _given("BARE_CALLS", False)
# ... or the content is one unit of the turn, in a call's place: CALL_SEPARATOR after
# it may start calls that run to the end of the output (model.Format.content_as_unit)
CONTENT_AS_UNIT: bool = _given("CONTENT_AS_UNIT", False)
# Where calls begin; the section's markers; the call's start.
TRIGGER: str = _given("TRIGGER", "")
SECTION_START: str = _given("SECTION_START", "")
# The section's opener and others real outputs write (overrides; "" where they leave
# it out), the template's first; () where there are none.
SECTION_STARTS: tuple[str, ...] = _given("SECTION_STARTS", ())
SECTION_END: str = _given("SECTION_END", "")
CALL_START: str = _given("CALL_START", "")
# The call's start and other openers real outputs write (overrides), the template's
# first; () where there are none. TRIGGER_ALSO: what else calls begin with.
CALL_STARTS: tuple[str, ...] = _given("CALL_STARTS", ())
TRIGGER_ALSO: tuple[str, ...] = _given("TRIGGER_ALSO", ())
# Markers real outputs write before a turn's calls where the template writes none
# (overrides): one is dropped there.
CALL_PREFIXES: tuple[str, ...] = _given("CALL_PREFIXES", ())
# After a JSON call's object; between calls.
CALL_END: str = _given("CALL_END", "")
CALL_SEPARATOR: str = _given("CALL_SEPARATOR", "")
# The end-of-turn markers of a turn with calls.
END_AFTER_CALLS: list[str] = _given("END_AFTER_CALLS", [])
# The template writes content after the calls.
CONTENT_AFTER_CALLS: bool = _given("CONTENT_AFTER_CALLS", False)
# The section's opener where a turn with calls writes its content inside the section
# (SECTION_START is then ""): written before the content, it is dropped.
SECTION_BEFORE_CONTENT: str = _given("SECTION_BEFORE_CONTENT", "")
# What ends a turn after its content and opens a new one for the calls: dropped
# between the content and the calls.
TURN_BREAK: str = _given("TURN_BREAK", "")
# How values are written: "json", or "python" literals.
LITERAL: str = _given("LITERAL", "json")

# A call written as one JSON object: {name: arguments}, or name, arguments and id as
# members of the object itself (flat) or at these paths; every member the template
# writes.
JSON_CALLS: bool = _given("JSON_CALLS", False)
NAME_IS_KEY: bool = _given("NAME_IS_KEY", False)
FLAT_FIELDS: bool = _given("FLAT_FIELDS", True)
NAME_PATH: tuple[str, ...] = _given("NAME_PATH", ())
ARGUMENTS_PATH: tuple[str, ...] = _given("ARGUMENTS_PATH", ())
ID_PATH: tuple[str, ...] = _given("ID_PATH", ())
CALL_MEMBERS: tuple[tuple[str, ...], ...] = _given("CALL_MEMBERS", ())
# Other names real outputs give a top-level member (overrides): name -> the key the
# template writes.
KEY_ALSO: dict[str, str] = _given("KEY_ALSO", {})

# A call written as text with holes: each hole, the literal after it, and the other
# literals real outputs end it with (overrides), each with how many parts it skips.
CALL_PARTS: tuple[tuple[str, str, tuple[tuple[str, int], ...]], ...] = _given(
    "CALL_PARTS", ()
)
# A hole real outputs may leave out (overrides); the arguments hole holds one JSON
# value; key/value units, typed by the tools' JSON schemas.
OPTIONAL_PARTS: bool = _given("OPTIONAL_PARTS", False)
JSON_ARGUMENTS: bool = _given("JSON_ARGUMENTS", False)
TYPED_VALUES: bool = _given("TYPED_VALUES", False)
ARG_KEY_PREFIX: str = _given("ARG_KEY_PREFIX", "")
ARG_KEY_END: str = _given("ARG_KEY_END", "")
# After a key's closing text that names the value's type; the name that text gives a
# string (the value is then the text as written).
ARG_VALUE_START: str = _given("ARG_VALUE_START", "")
ARG_STRING_ATTRIBUTE: str = _given("ARG_STRING_ATTRIBUTE", "")
ARG_VALUE_SUFFIX: str = _given("ARG_VALUE_SUFFIX", "")
ARG_SEPARATOR: str = _given("ARG_SEPARATOR", "")
ARG_STRING_OPEN: str = _given("ARG_STRING_OPEN", "")
ARG_STRING_CLOSE: str = _given("ARG_STRING_CLOSE", "")
# A literal after each value marks its end, and repeats the key where it says {key};
# the text between the string delimiters is the value, or a quote (a string's
# escapes skipped to find its end).
SUFFIXED_VALUES: bool = _given("SUFFIXED_VALUES", False)
VALUE_SUFFIX_NAMES_KEY: bool = _given("VALUE_SUFFIX_NAMES_KEY", False)
RAW_STRINGS: bool = _given("RAW_STRINGS", False)
QUOTED_STRINGS: bool = _given("QUOTED_STRINGS", False)
# Python's other quotes, where the values are Python literals: a string value between
# one of them is read as Python reads a string (escapes skipped to find its end).
ARG_STRING_QUOTES_ALSO: tuple[str, ...] = _given("ARG_STRING_QUOTES_ALSO", ())
# Values in a syntax the template's own macro writes (tools.arguments.syntax): strings
# between ARG_STRING_OPEN and ARG_STRING_CLOSE, objects, arrays and words as these.
OWN_VALUES: bool = _given("OWN_VALUES", False)
OWN_OBJECT_OPEN: str = _given("OWN_OBJECT_OPEN", "")
OWN_OBJECT_CLOSE: str = _given("OWN_OBJECT_CLOSE", "")
OWN_KEY_PREFIX: str = _given("OWN_KEY_PREFIX", "")
OWN_KEY_END: str = _given("OWN_KEY_END", "")
OWN_MEMBER_SEPARATOR: str = _given("OWN_MEMBER_SEPARATOR", "")
OWN_ARRAY_OPEN: str = _given("OWN_ARRAY_OPEN", "")
OWN_ARRAY_CLOSE: str = _given("OWN_ARRAY_CLOSE", "")
OWN_ITEM_SEPARATOR: str = _given("OWN_ITEM_SEPARATOR", "")
# How null, true and false are written -> the value.
OWN_WORDS: dict[str, object] = _given("OWN_WORDS", {})
# What the template writes for some characters (an attribute's &amp;, &quot;): as
# written -> the character, in a function name, an argument's key, a string value.
NAME_ESCAPES: dict[str, str] = _given("NAME_ESCAPES", {})
KEY_ESCAPES: dict[str, str] = _given("KEY_ESCAPES", {})
VALUE_ESCAPES: dict[str, str] = _given("VALUE_ESCAPES", {})
# Marks the template writes around some string values (XML's CDATA): the text
# between them is the value as it stands.
VERBATIM_OPEN: str = _given("VERBATIM_OPEN", "")
VERBATIM_CLOSE: str = _given("VERBATIM_CLOSE", "")
# Objects and arrays written as elements in a value: ELEMENT_OPEN, the member's
# value, ELEMENT_CLOSE ({key} the member's key), ELEMENT_SEPARATOR between members;
# an array's items are members named ELEMENT_ITEM.
ELEMENTS: bool = _given("ELEMENTS", False)
ELEMENT_OPEN: str = _given("ELEMENT_OPEN", "")
ELEMENT_CLOSE: str = _given("ELEMENT_CLOSE", "")
ELEMENT_SEPARATOR: str = _given("ELEMENT_SEPARATOR", "")
ELEMENT_ITEM: str = _given("ELEMENT_ITEM", "")

# --- grammars ----------------------------------------------------------------------
# The rule tool names are limited in; names are written inside JSON strings.
TOOL_NAME_RULE: str = _given("TOOL_NAME_RULE", "tool-name")
NAMES_IN_JSON: bool = _given("NAMES_IN_JSON", False)
# The grammars' rule ``tool-arguments``, as the tools' schemas replace it: "object"
# (a JSON object), "members" (an object's members after its opening brace), "units"
# (key/value units), "" (not typed by the schemas: arguments in a JSON string).
TOOL_ARGUMENTS: str = _given("TOOL_ARGUMENTS", "")
# Units: one unit's GBNF (``tool-key`` stands for its key, ``tool-value`` for its value
# and what closes it), the separator, a string value as written (and what closes it),
# any value, what closes a value typed by a schema.
TOOL_UNIT: str = _given("TOOL_UNIT", "")
TOOL_UNIT_SEPARATOR: str = _given("TOOL_UNIT_SEPARATOR", "")
TOOL_RAW_VALUE: str = _given("TOOL_RAW_VALUE", "")
TOOL_ANY_VALUE: str = _given("TOOL_ANY_VALUE", "")
TOOL_VALUE_CLOSE: str = _given("TOOL_VALUE_CLOSE", "")
# A unit and what closes its value where the value is text as written that the schema
# lists (an enum's strings): the whitespace around it exactly as the reader leaves it
# out ("" where the format has no such units: TOOL_UNIT and TOOL_VALUE_CLOSE then).
TOOL_UNIT_EXACT: str = _given("TOOL_UNIT_EXACT", "")
# Where an attribute before a unit's value names its type in a word of the
# template's (``tool-attribute`` in TOOL_UNIT): JSON type → that word and what
# ends it, GBNF.
TOOL_ATTRIBUTES: dict[str, str] = _given("TOOL_ATTRIBUTES", {})
TOOL_VALUE_CLOSE_EXACT: str = _given("TOOL_VALUE_CLOSE_EXACT", "")
# The rule of the call's closer, which ends the units; the types a unit may write
# otherwise (elements); the characters of a key (all but these where negated), and
# not its first ones.
TOOL_CLOSE: str = _given("TOOL_CLOSE", "")
TOOL_RAW_KINDS: tuple[str, ...] = _given("TOOL_RAW_KINDS", ())
TOOL_KEY_CHARS: tuple[bool, str, str] = _given("TOOL_KEY_CHARS", (True, "", ""))
# Where a unit's value (not inside a list or an object) is read otherwise than the
# same value inside one (strings the reader ends at a follower: compiler/
# quoted_strings.py), the rules that stand there for these.
TOOL_TOP_VALUES: dict[str, str] = _given("TOOL_TOP_VALUES", {})
# The grammars of the other tool_choice and parallel_tool_calls settings: (choice,
# parallel, enable_thinking as OPENED_BY_PROMPT; "tools" for GBNF_TOOLS) → the rules
# that differ from that thinking setting's grammar's.
_GRAMMAR_CHOICES: dict = _given("_GRAMMAR_CHOICES", {})
# The parts structural_tag() builds xgrammar's structural tags from (neutral: no
# reasoning, no calls).
_STRUCTURAL_TAG: dict = _given(
    "_STRUCTURAL_TAG",
    {"reasoning": {"on": None, "off": None, "default": None}, "calls": None},
)
# The format's Lark rules by part, which lark_grammar() completes with the tools
# (neutral: a format read as plain text, any output).
_LARK: dict[str, str] = _given(
    "_LARK",
    {
        "start": "start: reply\n",
        "start-no-thinking": "start: reply\n",
        "start-default": "start: reply\n",
        "none": "reply: ANY\nANY: /(?s:.*)/\n",
        "rules": "",
    },
)
# The exports the build could not make for this format: export -> why. Its functions
# (grammar and tool_call_grammar for "gbnf", structural_tag, lark_grammar) then raise
# ValueError saying so; parse and StreamParser are always there.
MISSING_EXPORTS: dict[str, str] = _given("MISSING_EXPORTS", {})

# --- preparing messages (prepare_messages; the spec's ``polyfills``) ----------------
# Where an assistant's reasoning_content goes: another field; a typed content block
# (type, key); or into the content between the reasoning markers. All empty: it stays.
PREPARE_REASONING_FIELD: str = _given("PREPARE_REASONING_FIELD", "")
PREPARE_REASONING_BLOCK: tuple[str, ...] = _given("PREPARE_REASONING_BLOCK", ())
PREPARE_REASONING_IN_CONTENT: bool = _given("PREPARE_REASONING_IN_CONTENT", False)
# "object" or "string": the arguments as the template reads them. Then: None
# content becomes ""; text content becomes [{"type": "text", ...}]; no system role
# (system text joins the first user turn); no tools input (definitions written into
# the system text); no tool role (results become user turns); past calls not
# rendered (written as text).
PREPARE_ARGUMENTS: str = _given("PREPARE_ARGUMENTS", "")
PREPARE_NON_NULL_CONTENT: bool = _given("PREPARE_NON_NULL_CONTENT", False)
PREPARE_TYPED_CONTENT: bool = _given("PREPARE_TYPED_CONTENT", False)
PREPARE_SYSTEM: bool = _given("PREPARE_SYSTEM", False)
PREPARE_TOOLS: bool = _given("PREPARE_TOOLS", False)
PREPARE_TOOL_RESULTS: bool = _given("PREPARE_TOOL_RESULTS", False)
PREPARE_TOOL_CALLS: bool = _given("PREPARE_TOOL_CALLS", False)
# The pattern the template checks call ids against ("" where it takes any): other ids
# are replaced, the same way in a call and in the result that answers it.
PREPARE_CALL_ID_PATTERN: str = _given("PREPARE_CALL_ID_PATTERN", "")
