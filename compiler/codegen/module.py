"""Format model → the text of its format module, generated/<slug>.py, and of its
grammar files: the format's constants and data, and one line that runs the runtime
(generated/_runtime.py, ``runtime_module``) on them. Or, on request, one standalone
module: the same constants, then the runtime's text.

Each export (the GBNF grammars, the structural tag's parts, the Lark rules, the
response template) is made on its own: one that fails is listed in the module's
``MISSING_EXPORTS`` with why, its functions raise ``ValueError`` saying so, and the
module is written all the same, ``parse`` and ``StreamParser`` in it.

Every string that came from a template is written with ``repr``, so it can only ever
be a string literal.
"""

from __future__ import annotations

import ast
import functools
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import black

from .. import model as models
from ..runtime import binding
from ..runtime import format as format_constants
from . import gbnf
from . import lark as lark_rules
from . import response_template as response_templates
from . import runtime_module
from . import structural_tag as structural_tags

_MODE = black.Mode(line_length=88, target_versions={black.TargetVersion.PY311})
# The module's public data, besides the functions bind hands back (binding.PUBLIC).
PUBLIC_DATA = (
    "GBNF",
    "GBNF_TOOLS",
    "TRIGGERS",
    "PRESERVED_TOKENS",
    "STOP",
    "TOKEN_IDS",
    "BOS_TOKEN_ID",
    "EOS_TOKEN_IDS",
    "SPEC",
    "MISSING_EXPORTS",
)
PUBLIC = binding.PUBLIC + PUBLIC_DATA
# How a format module finds its runtime: the package's, or, where its folder is on
# sys.path (a plain folder, no package), the _runtime.py beside its own file, loaded
# once per folder under its path. Never one found by name: ``import _runtime`` takes
# the first on sys.path, another folder's, which runs this format just as silently
# while both have one interface (issue 32).
RUNTIME_IMPORT = """\
if __package__:
    from . import _runtime
else:  # a plain folder: the runtime beside this file, not the first one on sys.path
    import sys
    from importlib.util import module_from_spec, spec_from_file_location
    from os import path

    _RUNTIME_FILE = path.join(path.dirname(path.abspath(__file__)), "_runtime.py")
    _runtime = sys.modules.get(_RUNTIME_FILE)  # type: ignore[assignment]
    if _runtime is None:
        _found = spec_from_file_location(_RUNTIME_FILE, _RUNTIME_FILE)
        _runtime = module_from_spec(_found)  # type: ignore[arg-type]
        _found.loader.exec_module(_runtime)  # type: ignore[union-attr]
        sys.modules[_RUNTIME_FILE] = _runtime
"""
# The thinking settings the format's tables hold: on, off, and a request that gives
# none (the template's default).
SETTINGS = (True, False, None)
# Constants written at the module's top whatever their value: its public format data.
ALWAYS = ("STOP", "TRIGGERS", "PRESERVED_TOKENS", "TOKEN_IDS", "BOS_TOKEN_ID", "EOS_TOKEN_IDS")
# Data written after the format's constants (large, and no part of its first screen).
TRAILING = (
    "SPEC",
    "GBNF",
    "_GRAMMAR_THINKING",
    "_GRAMMAR_NO_THINKING",
    "GBNF_TOOLS",
    "_GRAMMAR_CHOICES",
    "_STRUCTURAL_TAG",
    "_LARK",
)


@dataclass(frozen=True)
class Generated:
    """Everything generated for one format: its module's text, its grammar files
    (None: no file), its response template, and the exports that could not be made
    (export → why)."""

    module: str
    grammar: str | None
    tool_grammar: str | None
    response_template: str | None = None
    missing: dict[str, str] = field(default_factory=dict)

    def files(self, slug: str) -> dict[str, str | None]:
        return {
            f"{slug}.py": self.module,
            f"{slug}.gbnf": self.grammar,
            f"{slug}.tools.gbnf": self.tool_grammar,
            f"{slug}.response_template.json": self.response_template,
        }


@functools.cache
def _declarations() -> dict[str, str]:
    """Format constant → its annotation, as ``format.py`` declares it."""
    path = runtime_module.RUNTIME / "format.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.target.id: ast.unparse(node.annotation)
        for node in tree.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    }


def constants(fmt: models.Format) -> dict[str, Any]:
    """The values of the format constants (``compiler/runtime/format.py``) for ``fmt``,
    but those of its exports (``exports``): neutral where the format does not set them."""
    values = {name: getattr(format_constants, name) for name in format_constants.FORMAT_NAMES}
    reasoning, content, calls = fmt.reasoning, fmt.content, fmt.calls
    values.update(
        SPEC=fmt.spec,
        STOP=list(fmt.stop_strings),
        TURN_END_ALSO=tuple(stop for stop in fmt.stop if stop not in fmt.stop_strings),
        TRIGGERS=fmt.llama_cpp_triggers(),
        PRESERVED_TOKENS=list(fmt.preserved_tokens),
        TOKEN_IDS=fmt.token_ids,
        BOS_TOKEN_ID=fmt.tokens.bos_id if fmt.tokens else None,
        EOS_TOKEN_IDS=list(fmt.tokens.eos_ids) if fmt.tokens else [],
        PROMPT_ENDS=fmt.prompt_ends,
        HAS_REASONING=reasoning.has_block,
        REASONING_START=reasoning.start if reasoning.has_block else "",
        REASONING_STARTS=reasoning.starts if reasoning.has_block else (),
        REASONING_END=reasoning.end if reasoning.has_block else "",
        OPENED_BY_PROMPT={
            setting: reasoning.opened_by_prompt(setting) for setting in SETTINGS
        },
        TOOLS_CHANGE_OPENING=reasoning.has_block and reasoning.tools_change_opening,
        OPENED_WITH_TOOLS={
            setting: reasoning.opened_by_prompt(setting, tools=True) for setting in SETTINGS
        },
        CONTENT_WRAPPED=content.wrapped,
        CONTENT_ALWAYS_WRAPPED=content.always_wrapped,
        CONTENT_START=content.start if content.wrapped else "",
        CONTENT_END=content.end if content.wrapped else "",
        CONTENT_STARTS=content.wrappers if content.start_also else (),
        CONTENT_OPENED={setting: content.opened(setting) for setting in SETTINGS},
        HAS_CALLS=calls is not None,
        MESSAGE_OPENER=fmt.messages.opener if fmt.messages else "",
        HEADER_END=fmt.messages.header_end if fmt.messages else "",
        MESSAGE_END=fmt.messages.end if fmt.messages else "",
        CONTENT_HEADERS=(
            (content.start, *fmt.messages.content_also)
            if fmt.messages and content.wrapped
            else ()
        ),
    )
    values.update(_prepare_slots(fmt.polyfills))
    if calls is None:
        return values
    values.update(
        BARE_CALLS=calls.bare,
        CONTENT_AS_UNIT=fmt.content_as_unit,
        TRIGGER=calls.trigger,
        SECTION_START=calls.opener,
        SECTION_STARTS=calls.section_starts,
        SECTION_END=calls.section_end,
        CALL_START=calls.start,
        CALL_STARTS=calls.starts,
        TRIGGER_ALSO=calls.triggers_also,
        CALL_PREFIXES=calls.prefix_also,
        CALL_END=calls.end,
        CALL_SEPARATOR=calls.separator,
        END_AFTER_CALLS=list(calls.end_of_turn_after_calls),
        CONTENT_AFTER_CALLS=calls.content_after_calls,
        SECTION_BEFORE_CONTENT=calls.section_start if calls.content_in_section else "",
        TURN_BREAK=calls.turn_break,
        LITERAL=calls.literal,
        JSON_CALLS=calls.format == "json",
        NAMES_IN_JSON=calls.format == "json",
        TYPED_VALUES=calls.typed_values,
        NAME_ESCAPES={written: char for char, written in calls.name_escapes},
    )
    if calls.json is not None:
        values.update(
            NAME_IS_KEY=calls.json.name_is_key,
            FLAT_FIELDS=calls.json.flat,
            NAME_PATH=calls.json.name or (),
            ARGUMENTS_PATH=calls.json.arguments or (),
            ID_PATH=calls.json.id or (),
            CALL_MEMBERS=calls.json.members,
            KEY_ALSO={name: key for key, names in calls.json.key_also for name in names},
        )
    arguments = calls.arguments
    if arguments is not None:
        values.update(
            CALL_PARTS=tuple(
                (part.hole, part.after, options)
                for part, options in zip(calls.parts, calls.part_options, strict=True)
            ),
            OPTIONAL_PARTS=any(part.optional for part in calls.parts),
            JSON_ARGUMENTS=not arguments.units,
            ARG_KEY_PREFIX=arguments.key_prefix,
            ARG_KEY_END=arguments.key_end,
            ARG_VALUE_START=arguments.value_start,
            ARG_STRING_ATTRIBUTE=arguments.string_attribute,
            ARG_VALUE_SUFFIX=arguments.value_suffix,
            ARG_SEPARATOR=arguments.separator,
            ARG_STRING_OPEN=arguments.string_open,
            ARG_STRING_CLOSE=arguments.string_close,
            SUFFIXED_VALUES=arguments.suffixed,
            VALUE_SUFFIX_NAMES_KEY=arguments.value_suffix_names_key,
            RAW_STRINGS=arguments.raw_strings,
            QUOTED_STRINGS=arguments.quoted_strings,
            ARG_STRING_QUOTES_ALSO=arguments.string_quotes_also,
        )
        syntax = arguments.syntax
        if syntax is not None:
            values.update(
                OWN_VALUES=True,
                OWN_OBJECT_OPEN=syntax.object_open,
                OWN_OBJECT_CLOSE=syntax.object_close,
                OWN_KEY_PREFIX=syntax.key_prefix,
                OWN_KEY_END=syntax.key_end,
                OWN_MEMBER_SEPARATOR=syntax.member_separator,
                OWN_ARRAY_OPEN=syntax.array_open,
                OWN_ARRAY_CLOSE=syntax.array_close,
                OWN_ITEM_SEPARATOR=syntax.item_separator,
                OWN_WORDS=syntax.words,
            )
        values.update(
            KEY_ESCAPES={written: char for char, written in arguments.key_escapes},
            VALUE_ESCAPES={written: char for char, written in arguments.value_escapes},
            VERBATIM_OPEN=arguments.verbatim[0] if arguments.verbatim else "",
            VERBATIM_CLOSE=arguments.verbatim[1] if arguments.verbatim else "",
        )
        elements = arguments.elements
        if elements is not None:
            values.update(
                ELEMENTS=True,
                ELEMENT_OPEN=elements.open,
                ELEMENT_CLOSE=elements.close,
                ELEMENT_SEPARATOR=elements.separator,
                ELEMENT_ITEM=elements.item,
            )
    return values


def _prepare_slots(polyfills: models.Polyfills) -> dict[str, Any]:
    """The constants ``prepare_messages`` branches on (``runtime/prepare.py``)."""
    block = polyfills.reasoning_block
    return {
        "PREPARE_REASONING_FIELD": (
            polyfills.reasoning
            if polyfills.reasoning and not block and polyfills.reasoning != "content"
            else ""
        ),
        "PREPARE_REASONING_BLOCK": block or (),
        "PREPARE_REASONING_IN_CONTENT": polyfills.reasoning == "content",
        "PREPARE_ARGUMENTS": polyfills.arguments or "",
        "PREPARE_NON_NULL_CONTENT": polyfills.non_null_content,
        "PREPARE_TYPED_CONTENT": polyfills.typed_content,
        "PREPARE_SYSTEM": polyfills.system,
        "PREPARE_TOOLS": polyfills.tool_definitions,
        "PREPARE_TOOL_RESULTS": polyfills.tool_results,
        "PREPARE_TOOL_CALLS": polyfills.tool_calls,
        "PREPARE_CALL_ID_PATTERN": polyfills.call_ids or "",
    }


def _grammar_constant(name: str, text: str) -> str:
    """A grammar as one string literal per rule, so it reads like the .gbnf file."""
    lines = [repr(line) for line in text.splitlines(keepends=True)]
    return f"{name} = (\n" + "\n".join(lines) + "\n)\n"


def _lark_constant(parts: dict[str, str]) -> str:
    """``_LARK``: each part as one string literal per rule, like the grammars."""
    items = []
    for key, text in parts.items():
        lines = text.split("\n")
        pieces = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
        if len(pieces) < 2:
            items.append(f"    {key!r}: {text!r},\n")
        else:
            items.append(f"    {key!r}: (\n" + "\n".join(map(repr, pieces)) + "\n    ),\n")
    return "_LARK = {\n" + "".join(items) + "}\n"


def _docstring(fmt: models.Format, standalone: bool) -> str:
    lines = [
        f"Output parser for the {fmt.slug!r} chat format.",
        "",
        *fmt.describe(),
        "",
        "parse(text) reads a whole output into an OpenAI assistant message;",
        "StreamParser reads it as it arrives; grammar(tools) and tool_call_grammar(tools)",
        "give GBNF for constrained decoding, TRIGGERS where a server switches the latter",
        "on; structural_tag(tools) the same as an xgrammar structural tag, lark_grammar(tools)",
        "as llguidance's Lark. Each takes tools first, its settings by keyword only.",
        "prepare_messages(messages, tools=) rewrites an OpenAI conversation into the shape",
        f"this template reads ({', '.join(fmt.polyfills.applied()) or 'nothing to rewrite'}).",
        "compile_tools(tools) checks and copies tool definitions once, for all of these.",
        "",
        f"Generated by `chatfmt build` from the spec {Path(fmt.origin).name}.",
        "Do not edit it: add an override to the spec and rebuild.",
        *(
            [
                "Standalone (`chatfmt export standalone`): the format's",
                "constants, then the runtime (compiler/runtime/) that reads them.",
            ]
            if standalone
            else [
                "This module is the format's data; the code that reads it is the runtime,",
                "_runtime.py beside it, run on this format by the last line (bind).",
            ]
        ),
    ]
    text = "\n".join(lines).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return '"""' + text + '\n"""\n'




def _gbnf(fmt: models.Format) -> dict[str, Any]:
    values: dict[str, Any] = {
        "GBNF": gbnf.build(fmt, enable_thinking=None),
        "_GRAMMAR_THINKING": gbnf.build(fmt, enable_thinking=True),
        "_GRAMMAR_NO_THINKING": gbnf.build(fmt, enable_thinking=False),
        "GBNF_TOOLS": gbnf.build_tool_calls(fmt),
    }
    if fmt.has_calls:
        values["_GRAMMAR_CHOICES"] = gbnf.choices(fmt)
        values.update(gbnf.hooks(fmt))
    return values


def _response_template(fmt: models.Format) -> dict[str, Any]:
    return {"response_template": response_templates.text(fmt)}


# Each export: the format → the constants it gives the module (``response_template``:
# the text of its file, not a constant). One that raises is missing, alone.
EXPORTS: dict[str, Callable[[models.Format], dict[str, Any]]] = {
    "gbnf": _gbnf,
    "structural_tag": lambda fmt: {"_STRUCTURAL_TAG": structural_tags.plan(fmt)},
    "lark": lambda fmt: {"_LARK": lark_rules.build(fmt)},
    "response_template": _response_template,
}


def exports(fmt: models.Format) -> tuple[dict[str, Any], dict[str, str]]:
    """(the constants of the exports that could be made, export → why for each that
    could not)."""
    made: dict[str, Any] = {}
    missing: dict[str, str] = {}
    for name, make in EXPORTS.items():
        try:
            made.update(make(fmt))
        except Exception as error:  # an emitter's failure costs its export only
            missing[name] = f"{type(error).__name__}: {error}"
    if "gbnf" in missing:  # no grammar files for a module whose grammar() refuses
        made.update(GBNF=None, GBNF_TOOLS=None)
    return made, missing


def _constant(name: str, value: Any) -> str:
    return f"{name}: {_declarations()[name]} = {value!r}\n"


def _format_section(values: dict[str, Any]) -> str:
    """The format's constants that differ from their neutral values (and its public
    data, whatever its value), in the order format.py declares them."""
    lines = []
    for name in format_constants.FORMAT_NAMES:
        if name in TRAILING or name == "MISSING_EXPORTS":
            continue
        if name in ALWAYS or values[name] != getattr(format_constants, name):
            lines.append(_constant(name, values[name]))
    lines.append(_constant("MISSING_EXPORTS", values["MISSING_EXPORTS"]))
    return "# The format.\n" + "".join(lines)


def _data_section(fmt: models.Format, values: dict[str, Any]) -> str:
    grammar = values["GBNF"]
    tools = values["GBNF_TOOLS"]
    parts = [
        "# The resolved spec this module was generated from.\n" + f"SPEC = {fmt.spec!r}\n",
        "# The grammar of a whole output where a request gives no thinking switch (the\n"
        "# template's default; also the .gbnf file).\n"
        + ("GBNF = None\n" if grammar is None else _grammar_constant("GBNF", grammar)),
    ]
    for name, label in (("_GRAMMAR_THINKING", "thinking on"), ("_GRAMMAR_NO_THINKING", "thinking off")):
        text = values[name]
        if text != getattr(format_constants, name):
            parts.append(
                f"# ... with {label}.\n"
                + (f"{name} = GBNF\n" if text == grammar else _grammar_constant(name, text))
            )
    parts.append(
        "# The grammar of the tool calls, from where TRIGGERS fire on.\n"
        + ("GBNF_TOOLS = None\n" if tools is None else _grammar_constant("GBNF_TOOLS", tools))
    )
    if values["_GRAMMAR_CHOICES"] != format_constants._GRAMMAR_CHOICES:
        parts.append(
            "# The rules of the grammars for other tool_choice and parallel_tool_calls"
            " settings\n# that differ from the default's.\n"
            + f"_GRAMMAR_CHOICES = {values['_GRAMMAR_CHOICES']!r}\n"
        )
    if values["_STRUCTURAL_TAG"] != format_constants._STRUCTURAL_TAG:
        parts.append(
            "# The parts structural_tag() builds xgrammar's structural tags from.\n"
            + f"_STRUCTURAL_TAG: dict = {values['_STRUCTURAL_TAG']!r}\n"
        )
    if values["_LARK"] != format_constants._LARK:
        parts.append(
            "# The format's Lark rules, which lark_grammar() completes with the tools.\n"
            + _lark_constant(values["_LARK"])
        )
    return "\n".join(parts)


def _values(fmt: models.Format) -> tuple[dict[str, Any], str | None]:
    """(every format constant's value, the response template's text)."""
    values = constants(fmt)
    made, missing = exports(fmt)
    response_template = made.pop("response_template", None)
    values.update(made)
    values["MISSING_EXPORTS"] = missing
    undeclared = set(values) - set(format_constants.FORMAT_NAMES)
    if undeclared:  # the runtime would never see them: format.py declares what it reads
        raise RuntimeError(f"format constants not declared in format.py: {sorted(undeclared)}")
    return values, response_template


def _all() -> str:
    return f"__all__ = {list(PUBLIC)!r}\n"


def generate(fmt: models.Format) -> Generated:
    """The format module of ``fmt``, its grammar files and response template."""
    values, response_template = _values(fmt)
    binds = ", ".join(binding.PUBLIC)
    text = "\n".join(
        [
            _docstring(fmt, standalone=False),
            "from __future__ import annotations\n",
            RUNTIME_IMPORT,
            _all(),
            _format_section(values),
            _data_section(fmt, values),
            "# The parsers and exports: the runtime (_runtime.py) run on this format.\n"
            f"({binds},) = _runtime.bind(globals(), {binding.INTERFACE})\n",
        ]
    )
    return Generated(
        black.format_str(text, mode=_MODE),
        values["GBNF"],
        values["GBNF_TOOLS"],
        response_template,
        values["MISSING_EXPORTS"],
    )


def standalone(fmt: models.Format) -> str:
    """One self-contained module for ``fmt``: its format's constants and data, then the
    runtime that reads them (standard library only)."""
    values, _ = _values(fmt)
    imports, sections = runtime_module.standalone_parts()
    head = "\n".join(
        [
            _docstring(fmt, standalone=True),
            "from __future__ import annotations\n",
            imports,
            _all(),
            _format_section(values),
            _data_section(fmt, values),
        ]
    )
    # The runtime's text is black's already (runtime_module.shared).
    return black.format_str(head, mode=_MODE) + "\n\n" + sections


def load(fmt: models.Format) -> types.ModuleType:
    """The parser of ``fmt`` as a module made in memory, written nowhere: the format's
    constants, and the runtime bound to them (what its format module holds, without
    generating or formatting any text)."""
    values, _ = _values(fmt)
    parser = types.ModuleType(f"chatfmt_{fmt.slug}")
    parser.__dict__.update(values, __all__=list(PUBLIC))
    functions = runtime_module.in_memory().bind(parser.__dict__, binding.INTERFACE)
    parser.__dict__.update(zip(binding.PUBLIC, functions, strict=True))
    return parser
