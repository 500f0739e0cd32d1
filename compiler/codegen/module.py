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
from .specialize import fold

_MODE = black.Mode(line_length=88, target_versions={black.TargetVersion.PY311})
RUNTIME = Path(__file__).resolve().parent.parent / "runtime"
# The runtime modules, in the order their definitions are written (each after those
# it uses at import time).
RUNTIME_MODULES = ("text", "values", "calls", "parse", "stream", "grammar")
PUBLIC = (
    "parse",
    "StreamParser",
    "grammar",
    "tool_call_grammar",
    "GBNF",
    "GBNF_TOOLS",
    "TRIGGERS",
    "PRESERVED_TOKENS",
    "STOP",
    "SPEC",
)
# Format constants written after the runtime rather than before it: data, not format.
TRAILING = ("SPEC", "GBNF", "_GRAMMAR_NO_THINKING", "GBNF_TOOLS")
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
    """One top-level statement of the runtime, with the comments written above it."""

    text: str
    defines: frozenset[str]
    slots: frozenset[str]  # the format constants it reads


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


@functools.cache
def runtime_units() -> tuple[_Unit, ...]:
    """Every top-level definition of the runtime modules, in writing order."""
    declared = set(_slot_declarations())
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
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            while first > 1 and lines[first - 2].lstrip().startswith("#"):
                first -= 1
            source = "".join(lines[first - 1 : node.end_lineno])
            used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} & declared
            units.append(_Unit(source, frozenset(_names_defined(node)), frozenset(used)))
    return tuple(units)


def slots(fmt: models.Format) -> dict[str, Any]:
    """The values of the format constants (``compiler/runtime/format.py``) for ``fmt``."""
    values = {name: getattr(slots_module, name) for name in _slot_declarations()}
    reasoning, content, calls = fmt.reasoning, fmt.content, fmt.calls
    values.update(
        STOP=list(fmt.stop),
        TRIGGERS=[trigger.as_llama_cpp() for trigger in fmt.triggers],
        PRESERVED_TOKENS=list(fmt.preserved_tokens),
        HAS_REASONING=reasoning.has_block,
        REASONING_START=reasoning.start if reasoning.has_block else "",
        REASONING_END=reasoning.end if reasoning.has_block else "",
        OPENED_BY_PROMPT={
            True: reasoning.opened_when_thinking,
            False: reasoning.opened_when_not_thinking,
        },
        CONTENT_WRAPPED=content.wrapped,
        CONTENT_ALWAYS_WRAPPED=content.always_wrapped,
        CONTENT_START=content.start if content.wrapped else "",
        CONTENT_END=content.end if content.wrapped else "",
        HAS_CALLS=calls is not None,
        TOOL_NAME_RULE=gbnf.NAME_RULE,
    )
    if calls is None:
        return values
    values.update(
        BARE_CALLS=calls.bare,
        TRIGGER=calls.trigger,
        SECTION_START=calls.section_start,
        SECTION_END=calls.section_end,
        CALL_START=calls.start,
        CALL_END=calls.end,
        CALL_SEPARATOR=calls.separator,
        END_AFTER_CALLS=list(calls.end_of_turn_after_calls),
        CONTENT_AFTER_CALLS=calls.content_after_calls,
        LITERAL=calls.literal,
        JSON_CALLS=calls.format == "json",
        NAMES_IN_JSON=calls.format == "json",
        TYPED_VALUES=calls.typed_values,
    )
    if calls.json is not None:
        values.update(
            NAME_IS_KEY=calls.json.name_is_key,
            FLAT_FIELDS=calls.json.flat,
            NAME_PATH=calls.json.name or (),
            ARGUMENTS_PATH=calls.json.arguments or (),
            ID_PATH=calls.json.id or (),
        )
    arguments = calls.arguments
    if arguments is not None:
        values.update(
            CALL_PARTS=tuple((part.hole, part.after) for part in calls.parts),
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
        )
    return values


@functools.lru_cache(maxsize=4096)
def _formatted(text: str) -> str:
    return black.format_str(text, mode=_MODE)


# (unit, the values of the constants it reads) → its specialized text: the folding
# depends on nothing else, and most formats share most answers.
_SPECIALIZED: dict[tuple, str] = {}


def _specialized(unit: _Unit, values: dict[str, Any]) -> str:
    """A unit's text with the branches the format's constants decide folded."""
    key = (unit, tuple(sorted((name, _frozen(values[name])) for name in unit.slots)))
    text = _SPECIALIZED.get(key)
    if text is None:
        folded = fold(unit.text, {name: values[name] for name in unit.slots})
        text = _SPECIALIZED[key] = unit.text if folded == unit.text else _formatted(folded)
    return text


def _references(text: str) -> tuple[set[str], set[str]]:
    """(names read, attributes of ``self`` read) in ``text``."""
    tree = ast.parse(text)
    names, attributes = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            attributes.add(node.attr)
    return names, attributes


def _prune_methods(text: str) -> str:
    """A class's text less the private methods no kept method calls."""
    lines = text.splitlines(keepends=True)
    (cls,) = ast.parse(text).body
    assert isinstance(cls, ast.ClassDef)
    methods = {node.name: node for node in cls.body if isinstance(node, ast.FunctionDef)}
    kept = {name for name in methods if not name.startswith("_") or name.startswith("__")}
    work = list(kept)
    while work:
        node = methods[work.pop()]
        _, attributes = _references(ast.get_source_segment(text, node) or "")
        for name in attributes & set(methods) - kept:
            kept.add(name)
            work.append(name)
    dropped = [node for name, node in methods.items() if name not in kept]
    for node in sorted(dropped, key=lambda n: n.lineno, reverse=True):
        first, last = node.lineno, node.end_lineno or node.lineno
        while first > 1 and lines[first - 2].lstrip().startswith("#"):
            first -= 1
        if last < len(lines) and not lines[last].strip():
            last += 1  # the blank line after it
        del lines[first - 1 : last]
    return "".join(lines)


def _reachable(units: list[tuple[str, frozenset[str]]]) -> list[str]:
    """The texts of the units that the public names reach, in their order."""
    references = []
    for text, _ in units:
        names, _ = _references(text)
        references.append(names)
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


def _docstring(fmt: models.Format) -> str:
    lines = [
        f"Output parser for the {fmt.slug!r} chat format.",
        "",
        *fmt.describe(),
        "",
        "parse(text) reads a whole output into an OpenAI assistant message;",
        "StreamParser reads it as it arrives; grammar() and tool_call_grammar() give",
        "GBNF for constrained decoding, TRIGGERS where a server switches the latter on.",
        "",
        f"Generated by `python -m compiler build` from the spec {Path(fmt.origin).name};",
        "do not edit:",
        "change the spec's overrides and rebuild instead. The code below the format's",
        "constants is compiler/runtime/, specialized to this format.",
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
        text = _specialized(unit, values)
        if text.startswith("class ") or "\nclass " in text:
            text = _prune_methods(text)
        units.append((text, unit.defines))
    body = _reachable(units)
    used = set()
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
