"""Format model → a standalone parser module (standard library only), formatted by
black.

A module is made of three parts, in this order:

1. the format: a docstring that states it, and its constants (markers, field paths,
   a tagged call's holes), named as ``compiler/runtime/format.py`` declares them;
2. the runtime: the definitions of ``compiler/runtime/`` that this format reaches,
   copied from their source with the branches its constants decide folded
   (``specialize.fold``) — no Python is written here as text;
3. the data: ``SPEC`` and the grammar texts.

Every string that came from a template is written with ``repr``, so it can only ever
be a string literal.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import black

from .. import model as models
from ..runtime import format as slots_module
from . import gbnf
from . import lark as lark_rules
from . import structural_tag as structural_tags
from .specialize import fold

_MODE = black.Mode(line_length=88, target_versions={black.TargetVersion.PY311})
RUNTIME = Path(__file__).resolve().parent.parent / "runtime"
# The runtime modules, in the order their definitions are written (each after those
# it uses at import time).
RUNTIME_MODULES = ("text", "values", "calls", "parse", "stream", "schema_gbnf", "grammar", "structural_tag", "lark", "prepare")
PUBLIC = (
    "parse",
    "StreamParser",
    "grammar",
    "tool_call_grammar",
    "structural_tag",
    "lark_grammar",
    "prepare_messages",
    "GBNF",
    "GBNF_TOOLS",
    "TRIGGERS",
    "PRESERVED_TOKENS",
    "STOP",
    "TOKEN_IDS",
    "BOS_TOKEN_ID",
    "EOS_TOKEN_IDS",
    "SPEC",
)
# Format constants written after the runtime rather than before it: data, not format.
TRAILING = ("SPEC", "GBNF", "_GRAMMAR_NO_THINKING", "GBNF_TOOLS", "_GRAMMAR_CHOICES", "_STRUCTURAL_TAG", "_LARK")
STDLIB = ("ast", "json", "re")


@dataclass(frozen=True)
class Generated:
    """Everything generated for one format: file name → text (None: no file)."""

    module: str
    grammar: str
    tool_grammar: str | None

    def files(self, slug: str) -> dict[str, str | None]:
        return {
            f"{slug}.py": self.module,
            f"{slug}.gbnf": self.grammar,
            f"{slug}.tools.gbnf": self.tool_grammar,
        }


@dataclass(frozen=True)
class _Unit:
    """One top-level statement of the runtime, with the comments written above it; a
    class is its head (the class line, docstring and attributes) and its methods, each
    a unit of its own written at top level, so that each is folded and formatted
    apart."""

    text: str
    defines: frozenset[str]
    slots: frozenset[str]  # the format constants it reads
    methods: tuple[_Unit, ...] = ()


def _names_defined(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return {node.name}
    names = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
            names.add(child.id)
    return names


@functools.cache
def _slot_declarations() -> dict[str, str]:
    """Format constant → its annotation, as ``format.py`` declares it."""
    tree = ast.parse((RUNTIME / "format.py").read_text(encoding="utf-8"))
    return {
        node.target.id: ast.unparse(node.annotation)
        for node in tree.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    }


def _first_line(lines: list[str], node: ast.stmt) -> int:
    """Where a statement's text begins: its decorators and the comments above it."""
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    while first > 1 and lines[first - 2].lstrip().startswith("#"):
        first -= 1
    return first


def _slots_read(node: ast.AST) -> frozenset[str]:
    """The format constants a definition reads that the folding may decide on (the
    data written after the runtime is not known to it)."""
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    return frozenset(names & set(_slot_declarations()) - set(TRAILING))


def _class_unit(lines: list[str], node: ast.ClassDef) -> _Unit:
    methods = [item for item in node.body if isinstance(item, ast.FunctionDef)]
    if not methods or any(
        not isinstance(item, ast.FunctionDef) for item in node.body[node.body.index(methods[0]) :]
    ):
        raise ValueError(f"runtime class {node.name}: methods must come last")
    head_end = _first_line(lines, methods[0]) - 1
    head = "".join(lines[_first_line(lines, node) - 1 : head_end]).rstrip("\n") + "\n"
    units = []
    for method in methods:
        text = "".join(lines[_first_line(lines, method) - 1 : method.end_lineno])
        dedented = "".join(
            line[4:] if line.strip() else line.lstrip(" ")
            for line in text.splitlines(keepends=True)
        )
        units.append(_Unit(dedented, frozenset({method.name}), _slots_read(method)))
    head_slots = _slots_read(
        ast.Module(body=node.body[: node.body.index(methods[0])], type_ignores=[])
    )
    return _Unit(head, frozenset({node.name}), head_slots, tuple(units))


@functools.cache
def runtime_units() -> tuple[_Unit, ...]:
    """Every top-level definition of the runtime modules, in writing order."""
    units = []
    for name in RUNTIME_MODULES:
        text = (RUNTIME / f"{name}.py").read_text(encoding="utf-8")
        lines = text.splitlines(keepends=True)
        tree = ast.parse(text)
        for position, node in enumerate(tree.body):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if not position and isinstance(node, ast.Expr):
                continue  # the module's docstring
            if _names_defined(node) & set(TRAILING):
                continue  # data a module writes after the runtime, with its own values
            if isinstance(node, ast.ClassDef) and any(
                isinstance(item, ast.FunctionDef) for item in node.body
            ):
                units.append(_class_unit(lines, node))
                continue
            source = "".join(lines[_first_line(lines, node) - 1 : node.end_lineno])
            units.append(_Unit(source, frozenset(_names_defined(node)), _slots_read(node)))
    return tuple(units)


def slots(fmt: models.Format) -> dict[str, Any]:
    """The values of the format constants (``compiler/runtime/format.py``) for ``fmt``."""
    values = {name: getattr(slots_module, name) for name in _slot_declarations()}
    reasoning, content, calls = fmt.reasoning, fmt.content, fmt.calls
    values.update(
        STOP=list(fmt.stop),
        TRIGGERS=fmt.llama_cpp_triggers(),
        PRESERVED_TOKENS=list(fmt.preserved_tokens),
        TOKEN_IDS=fmt.token_ids,
        BOS_TOKEN_ID=fmt.tokens.bos_id if fmt.tokens else None,
        EOS_TOKEN_IDS=list(fmt.tokens.eos_ids) if fmt.tokens else [],
        HAS_REASONING=reasoning.has_block,
        REASONING_START=reasoning.start if reasoning.has_block else "",
        REASONING_STARTS=reasoning.starts if reasoning.has_block else (),
        REASONING_END=reasoning.end if reasoning.has_block else "",
        OPENED_BY_PROMPT={
            True: reasoning.opened_when_thinking,
            False: reasoning.opened_when_not_thinking,
        },
        TOOLS_CHANGE_OPENING=reasoning.has_block and reasoning.tools_change_opening,
        OPENED_WITH_TOOLS={
            True: reasoning.opened_by_prompt(True, tools=True),
            False: reasoning.opened_by_prompt(False, tools=True),
        },
        CONTENT_WRAPPED=content.wrapped,
        CONTENT_ALWAYS_WRAPPED=content.always_wrapped,
        CONTENT_START=content.start if content.wrapped else "",
        CONTENT_END=content.end if content.wrapped else "",
        CONTENT_OPENED=dict(zip((True, False), content.opened_by_prompt, strict=True)),
        HAS_CALLS=calls is not None,
        MESSAGE_OPENER=fmt.messages.opener if fmt.messages else "",
        HEADER_END=fmt.messages.header_end if fmt.messages else "",
        MESSAGE_END=fmt.messages.end if fmt.messages else "",
        CONTENT_HEADERS=(content.start, *fmt.messages.content_also) if fmt.messages and content.wrapped else (),
        TOOL_NAME_RULE=gbnf.NAME_RULE,
    )
    values.update(_prepare_slots(fmt.polyfills))
    if calls is None:
        return values
    values.update(
        BARE_CALLS=calls.bare,
        CONTENT_AS_UNIT=fmt.content_as_unit,
        TRIGGER=calls.trigger,
        SECTION_START=calls.opener,
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
        **gbnf.hooks(fmt),
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
            ARG_VALUE_SUFFIX=arguments.value_suffix,
            ARG_SEPARATOR=arguments.separator,
            ARG_STRING_OPEN=arguments.string_open,
            ARG_STRING_CLOSE=arguments.string_close,
            SUFFIXED_VALUES=arguments.suffixed,
            VALUE_SUFFIX_NAMES_KEY=arguments.value_suffix_names_key,
            RAW_STRINGS=arguments.raw_strings,
            QUOTED_STRINGS=arguments.quoted_strings,
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


# A method is formatted at top level with four columns less, then indented.
_METHOD_MODE = black.Mode(line_length=84, target_versions={black.TargetVersion.PY311})


@functools.lru_cache(maxsize=4096)
def _formatted(text: str, method: bool = False) -> str:
    return black.format_str(text, mode=_METHOD_MODE if method else _MODE)


# (unit, the values of the constants it reads) → its specialized text: the folding
# depends on nothing else, and most formats share most answers.
_SPECIALIZED: dict[tuple, str] = {}


def _specialized(unit: _Unit, values: dict[str, Any], method: bool = False) -> str:
    """A unit's text with the branches the format's constants decide folded."""
    key = (unit, tuple(sorted((name, _frozen(values[name])) for name in unit.slots)))
    text = _SPECIALIZED.get(key)
    if text is None:
        folded = fold(unit.text, {name: values[name] for name in unit.slots})
        text = unit.text if folded == unit.text else _formatted(folded, method)
        _SPECIALIZED[key] = text
    return text


@functools.lru_cache(maxsize=8192)
def _references(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """(names read, attributes of ``self`` read) in ``text``."""
    names, attributes = set(), set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            attributes.add(node.attr)
    return frozenset(names), frozenset(attributes)


def _class_text(unit: _Unit, values: dict[str, Any]) -> str:
    """A class with its methods specialized, less the private ones no kept method
    calls."""
    methods = {
        next(iter(method.defines)): _specialized(method, values, method=True)
        for method in unit.methods
    }
    kept = {name for name in methods if not name.startswith("_") or name.startswith("__")}
    work = list(kept)
    while work:
        for name in _references(methods[work.pop()])[1] & set(methods) - kept:
            kept.add(name)
            work.append(name)
    bodies = [
        "".join("    " + line if line.strip() else line for line in text.splitlines(keepends=True))
        for name, text in methods.items()
        if name in kept
    ]
    return unit.text + "\n" + "\n".join(bodies)


def _reachable(units: list[tuple[str, frozenset[str]]]) -> list[str]:
    """The texts of the units that the public names reach, in their order."""
    references = [_references(text)[0] for text, _ in units]
    kept: set[int] = set()
    wanted = set(PUBLIC)
    changed = True
    while changed:
        changed = False
        for index, (_, defines) in enumerate(units):
            if index not in kept and defines & wanted:
                kept.add(index)
                wanted |= references[index]
                changed = True
    return [units[index][0] for index in sorted(kept)]


def _constant(name: str, value: Any) -> str:
    return f"{name}: {_slot_declarations()[name]} = {value!r}\n"


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


def _docstring(fmt: models.Format) -> str:
    lines = [
        f"Output parser for the {fmt.slug!r} chat format.",
        "",
        *fmt.describe(),
        "",
        "parse(text) reads a whole output into an OpenAI assistant message;",
        "StreamParser reads it as it arrives; grammar() and tool_call_grammar() give",
        "GBNF for constrained decoding, TRIGGERS where a server switches the latter on.",
        "structural_tag(tools) gives the same as an xgrammar structural tag.",
        "lark_grammar() gives llguidance's Lark, for any tool_choice.",
        "prepare_messages(messages, tools=) rewrites an OpenAI conversation into the shape",
        f"this template reads ({', '.join(fmt.polyfills.applied()) or 'nothing to rewrite'}).",
        "",
        f"Generated by `python -m compiler build` from the spec {Path(fmt.origin).name}.",
        "Do not edit it: add an override to the spec and rebuild. The code after the",
        "format's constants is compiler/runtime/, specialized to this format.",
    ]
    text = "\n".join(lines).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return '"""' + text + '\n"""\n'


def generate(fmt: models.Format) -> Generated:
    """The module text and grammar files of one format."""
    grammar = gbnf.build(fmt, enable_thinking=True)
    no_thinking = gbnf.build(fmt, enable_thinking=False)
    tool_grammar = gbnf.build_tool_calls(fmt)
    values = slots(fmt)
    units = []
    for unit in runtime_units():
        text = _class_text(unit, values) if unit.methods else _specialized(unit, values)
        units.append((text, unit.defines))
    body = _reachable(units)
    used: set[str] = set()
    for text in body:
        used |= _references(text)[0]
    used |= set(PUBLIC)
    leading = [name for name in _slot_declarations() if name in used and name not in TRAILING]
    head = [
        _docstring(fmt),
        "from __future__ import annotations\n",
        "".join(f"import {name}\n" for name in STDLIB if name in used),
        f"__all__ = {list(PUBLIC)!r}\n",
        "# The format.\n" + "".join(_constant(name, values[name]) for name in leading),
    ]
    tail = [
        "# The resolved spec this module was generated from.\n" + f"SPEC = {fmt.spec!r}\n",
        "# The grammar of a whole output, thinking on (also the .gbnf file).\n"
        + _grammar_constant("GBNF", grammar),
        "# ... and thinking off.\n"
        + (
            "_GRAMMAR_NO_THINKING = GBNF\n"
            if no_thinking == grammar
            else _grammar_constant("_GRAMMAR_NO_THINKING", no_thinking)
        ),
        "# The grammar of the tool calls, from where TRIGGERS fire on.\n"
        + (
            "GBNF_TOOLS = None\n"
            if tool_grammar is None
            else _grammar_constant("GBNF_TOOLS", tool_grammar)
        ),
        (
            "# The rules of the grammars for other tool_choice and parallel_tool_calls"
            " settings\n# that differ from the default's.\n"
            + f"_GRAMMAR_CHOICES = {gbnf.choices(fmt)!r}\n"
            if fmt.has_calls
            else ""
        ),
        "# The parts structural_tag() builds xgrammar's structural tags from.\n"
        + f"_STRUCTURAL_TAG: dict = {structural_tags.plan(fmt)!r}\n",
        "# The format's Lark rules, which lark_grammar() completes with the tools.\n"
        + _lark_constant(lark_rules.build(fmt)),
    ]
    module = (
        _formatted("\n".join(head))
        + "\n\n"
        + "\n\n".join(text.rstrip("\n") + "\n" for text in body)
        + "\n\n"
        + _formatted("\n".join(tail))
    )
    return Generated(module, grammar, tool_grammar)


def _frozen(value: Any) -> Any:
    """A hashable stand-in for a constant's value, for the folding cache."""
    if isinstance(value, dict):
        return tuple(sorted((repr(k), _frozen(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_frozen(item) for item in value)
    return value
