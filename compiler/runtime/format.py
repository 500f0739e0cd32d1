"""The format slots: the constants a generated module defines at its top, from the
typed format model (compiler/model.py). The values here are neutral defaults that
let the runtime be imported and tested as it is; ``compiler/codegen/module.py``
replaces every one that a module uses with the format's own, and folds the
branches they decide.
"""

from __future__ import annotations

# --- public data -------------------------------------------------------------------
SPEC: dict = {}  # the resolved spec the module was generated from
STOP: list[str] = []  # end-of-turn strings known literally
TRIGGERS: list[dict] = []  # llama.cpp's grammar_triggers
PRESERVED_TOKENS: list[str] = []
# The tokenizer's ids, where the source has a tokenizer (the spec's tokens section):
# marker → id for the markers that are one token, bos, every token that ends a turn.
TOKEN_IDS: dict[str, int] = {}
BOS_TOKEN_ID: int | None = None
EOS_TOKEN_IDS: list[int] = []
GBNF: str = ""  # the grammar of a whole output, thinking on
GBNF_TOOLS: str | None = None  # the grammar of the calls, from the trigger on
_GRAMMAR_NO_THINKING: str = ""  # the grammar of a whole output, thinking off

# --- reasoning ---------------------------------------------------------------------
HAS_REASONING: bool = False  # outputs may hold a reasoning block
REASONING_START: str = ""  # "" where no marker opens it: the output starts inside
REASONING_STARTS: tuple[
    str, ...
] = ()  # it and other openers (overrides), longest first
REASONING_END: str = ""
OPENED_BY_PROMPT: dict[bool, bool] = {True: False, False: False}  # per enable_thinking
TOOLS_CHANGE_OPENING: bool = (
    False  # the prompt opens the block otherwise with tools given
)
OPENED_WITH_TOOLS: dict[bool, bool] = {
    True: False,
    False: False,
}  # ... per enable_thinking

# --- content -----------------------------------------------------------------------
CONTENT_WRAPPED: bool = False  # a marker may open the content
CONTENT_ALWAYS_WRAPPED: bool = False  # ... and always does
CONTENT_START: str = ""
CONTENT_END: str = ""

# --- tool calls --------------------------------------------------------------------
HAS_CALLS: bool = False
BARE_CALLS: bool = False  # nothing marks a call: the whole output is calls or content
# ... or the content is one unit of the turn, in a call's place: CALL_SEPARATOR after
# it may start calls that run to the end of the output (model.Format.content_as_unit)
CONTENT_AS_UNIT: bool = False
TRIGGER: str = ""  # where calls begin
SECTION_START: str = ""
SECTION_END: str = ""
CALL_START: str = ""
# The call's start and other openers real outputs write (overrides), the template's
# first; () where there are none. TRIGGER_ALSO: what else calls begin with.
CALL_STARTS: tuple[str, ...] = ()
TRIGGER_ALSO: tuple[str, ...] = ()
CALL_END: str = ""  # after a JSON call's object
CALL_SEPARATOR: str = ""
END_AFTER_CALLS: list[str] = []  # end-of-turn markers of a turn with calls
CONTENT_AFTER_CALLS: bool = False  # the template writes content after the calls
# The section's opener where a turn with calls writes its content inside the section
# (SECTION_START is then ""): written before the content, it is dropped.
SECTION_BEFORE_CONTENT: str = ""
# What ends a turn after its content and opens a new one for the calls: dropped
# between the content and the calls.
TURN_BREAK: str = ""
LITERAL: str = "json"  # how values are written: "json", or "python" literals

# A call written as one JSON object.
JSON_CALLS: bool = False
NAME_IS_KEY: bool = False  # the call is {name: arguments}
FLAT_FIELDS: bool = True  # name, arguments and id are members of the object itself
NAME_PATH: tuple[str, ...] = ()
ARGUMENTS_PATH: tuple[str, ...] = ()
ID_PATH: tuple[str, ...] = ()
CALL_MEMBERS: tuple[tuple[str, ...], ...] = ()  # every member the template writes

# A call written as text with holes: each hole, the literal after it, and the other
# literals real outputs end it with (overrides), each with how many parts it skips.
CALL_PARTS: tuple[tuple[str, str, tuple[tuple[str, int], ...]], ...] = ()
OPTIONAL_PARTS: bool = False  # a hole real outputs may leave out (overrides)
JSON_ARGUMENTS: bool = False  # the arguments hole holds one JSON value
TYPED_VALUES: bool = False  # key/value units, typed by the tools' JSON schemas
ARG_KEY_PREFIX: str = ""
ARG_KEY_END: str = ""
ARG_VALUE_START: str = ""  # after a key's closing text that names the value's type
ARG_VALUE_SUFFIX: str = ""
ARG_SEPARATOR: str = ""
ARG_STRING_OPEN: str = ""
ARG_STRING_CLOSE: str = ""
SUFFIXED_VALUES: bool = False  # a literal after each value marks its end
VALUE_SUFFIX_NAMES_KEY: bool = False  # ... and repeats the key where it says {key}
RAW_STRINGS: bool = False  # the text between the string delimiters is the value
QUOTED_STRINGS: bool = (
    False  # ... or a quote, a string's escapes skipped to find its end
)
# Values in a syntax the template's own macro writes (tools.arguments.syntax): strings
# between ARG_STRING_OPEN and ARG_STRING_CLOSE, objects, arrays and words as these.
OWN_VALUES: bool = False
OWN_OBJECT_OPEN: str = ""
OWN_OBJECT_CLOSE: str = ""
OWN_KEY_PREFIX: str = ""
OWN_KEY_END: str = ""
OWN_MEMBER_SEPARATOR: str = ""
OWN_ARRAY_OPEN: str = ""
OWN_ARRAY_CLOSE: str = ""
OWN_ITEM_SEPARATOR: str = ""
OWN_WORDS: dict[str, object] = {}  # how null, true and false are written -> the value
# What the template writes for some characters (an attribute's &amp;, &quot;): as
# written -> the character, in a function name, an argument's key, a string value.
NAME_ESCAPES: dict[str, str] = {}
KEY_ESCAPES: dict[str, str] = {}
VALUE_ESCAPES: dict[str, str] = {}
# Marks the template writes around some string values (XML's CDATA): the text
# between them is the value as it stands.
VERBATIM_OPEN: str = ""
VERBATIM_CLOSE: str = ""
# Objects and arrays written as elements in a value: ELEMENT_OPEN, the member's
# value, ELEMENT_CLOSE ({key} the member's key), ELEMENT_SEPARATOR between members;
# an array's items are members named ELEMENT_ITEM.
ELEMENTS: bool = False
ELEMENT_OPEN: str = ""
ELEMENT_CLOSE: str = ""
ELEMENT_SEPARATOR: str = ""
ELEMENT_ITEM: str = ""

# --- grammars ----------------------------------------------------------------------
TOOL_NAME_RULE: str = "tool-name"  # the rule tool names are limited in
NAMES_IN_JSON: bool = False  # names are written inside JSON strings
# The grammars' rule ``tool-arguments``, as the tools' schemas replace it: "object"
# (a JSON object), "members" (an object's members after its opening brace), "units"
# (key/value units), "" (not typed by the schemas: arguments in a JSON string).
TOOL_ARGUMENTS: str = ""
# Units: one unit's GBNF (``tool-key`` stands for its key, ``tool-value`` for its value
# and what closes it), the separator, a string value as written (and what closes it),
# any value, what closes a value typed by a schema, the characters of a key (all but
# these where negated).
TOOL_UNIT: str = ""
TOOL_UNIT_SEPARATOR: str = ""
TOOL_RAW_VALUE: str = ""
TOOL_ANY_VALUE: str = ""
TOOL_VALUE_CLOSE: str = ""
TOOL_CLOSE: str = ""  # the rule of the call's closer, which ends the units
TOOL_RAW_KINDS: tuple[str, ...] = ()  # types a unit may write otherwise (elements)
TOOL_KEY_CHARS: tuple[bool, str, str] = (True, "", "")  # ..., and not its first ones
# The grammars of the other tool_choice and parallel_tool_calls settings: (choice,
# parallel, enable_thinking; None for GBNF_TOOLS) → the rules that differ from the
# default grammar's.
_GRAMMAR_CHOICES: dict = {}

# --- preparing messages (prepare_messages; the spec's ``polyfills``) ----------------
# Where an assistant's reasoning_content goes: another field; a typed content block
# (type, key); or into the content between the reasoning markers. All empty: it stays.
PREPARE_REASONING_FIELD: str = ""
PREPARE_REASONING_BLOCK: tuple[str, ...] = ()
PREPARE_REASONING_IN_CONTENT: bool = False
PREPARE_ARGUMENTS: str = (
    ""  # "object" or "string": the arguments as the template reads them
)
PREPARE_NON_NULL_CONTENT: bool = False  # None content becomes ""
PREPARE_TYPED_CONTENT: bool = False  # text content becomes [{"type": "text", ...}]
PREPARE_SYSTEM: bool = False  # no system role: system text joins the first user turn
PREPARE_TOOLS: bool = False  # no tools input: definitions written into the system text
PREPARE_TOOL_RESULTS: bool = False  # no tool role: results become user turns
PREPARE_TOOL_CALLS: bool = False  # past calls not rendered: written as text
# The pattern the template checks call ids against ("" where it takes any): other ids
# are replaced, the same way in a call and in the result that answers it.
PREPARE_CALL_ID_PATTERN: str = ""
