"""The grammars a module exposes, for a ``tool_choice`` and ``parallel_tool_calls``
setting, with tool names limited to the ``tools`` given and their arguments held
to the tools' JSON schemas (compiler/runtime/schema_gbnf.py)."""

from __future__ import annotations

import json

from .format import (
    _GRAMMAR_CHOICES,
    _GRAMMAR_NO_THINKING,
    _GRAMMAR_THINKING,
    GBNF,
    GBNF_TOOLS,
    HAS_CALLS,
    MISSING_EXPORTS,
    NAMES_IN_JSON,
    TOOL_ARGUMENTS,
    TOOL_NAME_RULE,
)
from .schema_gbnf import (
    _Arguments,
    _either,
    _gbnf_literal,
    _refs,
    _renamed,
    _rules,
    _written,
)
from .text import _setting
from .tools import _made_once, _tools_given
from .values import _self_contained, _sorted_keys

# The rules that hold one whole call (and what follows it): a copy of each per tool
# whose arguments a schema types.
_CALL_RULES = ("calls-full", "calls-rest", "calls-root", "call-next")


def grammar(
    tools=None, *, enable_thinking=None, tool_choice="auto", parallel_tool_calls=True
):
    """GBNF whose root accepts the outputs ``parse`` reads as well-formed, calls
    included: to the functions ``tools`` names (when it names any), their arguments
    held to the functions' JSON schemas. ``tool_choice``: "auto", "none" (no call),
    "required" (at least one call), or ``{"type": "function", "function": {"name":
    …}}`` (calls to that function only, at least one); ``parallel_tool_calls=False``:
    at most one call. ``enable_thinking``: as ``parse`` takes it (None: the
    template's default)."""
    _require("gbnf")
    tools, compiled = _tools_given(tools)
    choice, named = _tool_choice(tool_choice)
    thinking = _setting(enable_thinking)
    text = {None: GBNF, True: _GRAMMAR_THINKING, False: _GRAMMAR_NO_THINKING}[thinking]
    if not HAS_CALLS:
        if choice == "required":
            raise ValueError("this format writes no tool calls")
        return text
    setting = (choice, bool(parallel_tool_calls) or choice == "none")
    changes = _GRAMMAR_CHOICES.get(
        setting + (thinking,), _GRAMMAR_CHOICES.get(setting + (True,), {})
    )
    return _for_tools(text, changes, tools, named, compiled)


def tool_call_grammar(tools=None, *, tool_choice="auto", parallel_tool_calls=True):
    """GBNF whose root accepts the tool calls of an output from where ``TRIGGERS``
    fires on: the grammar a server switches on then (None: this format has no
    tool calls, or ``tool_choice`` is "none"). The keywords are ``grammar``'s; a
    required call is the whole grammar's to demand."""
    _require("gbnf")
    tools, compiled = _tools_given(tools)
    choice, named = _tool_choice(tool_choice)
    if not HAS_CALLS or choice == "none":
        return None
    changes = _GRAMMAR_CHOICES.get(("auto", bool(parallel_tool_calls), "tools"), {})
    return _for_tools(GBNF_TOOLS, changes, tools, named, compiled)


def _require(export):
    """Refuse (ValueError) an export the build could not make for this format."""
    why = MISSING_EXPORTS.get(export)
    if why is not None:
        raise ValueError(
            "this module has no %s export: the build could not make it (%s)"
            % (export, why)
        )


def _tool_choice(tool_choice):
    """("auto" | "none" | "required", the function named or None)."""
    if tool_choice is None or tool_choice in ("auto", "none", "required"):
        return tool_choice or "auto", None
    function = tool_choice.get("function") if isinstance(tool_choice, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str) or not name:
        raise ValueError(
            "tool_choice is 'auto', 'none', 'required' or "
            "{'type': 'function', 'function': {'name': ...}}"
        )
    return "required", name


def _for_tools(text, changes, tools, named, compiled=None):
    """The grammar ``text`` with ``changes`` (rules) made, its calls limited to the
    functions of ``tools`` (to ``named`` where given) and their arguments to their
    schemas; made once per setting where ``tools`` are ``compiled``'s."""
    if compiled is None:
        return _tools_grammar(text, changes, tools, named)
    key = (_tools_grammar, text, tuple(sorted(changes.items())), named)
    return _made_once(
        compiled, key, lambda: _tools_grammar(text, changes, tools, named)
    )


def _tools_grammar(text, changes, tools, named):
    """``_for_tools``' grammar, made."""
    table: dict = {}  # name → (parameters, strict), the first definition of each
    for tool in tools or ():
        function = tool.get("function", tool) if isinstance(tool, dict) else None
        if not isinstance(function, dict):
            continue
        name = function.get("name")
        if isinstance(name, str) and name and name not in table:
            table[name] = (function.get("parameters"), function.get("strict") is True)
    if named is not None:
        if table and named not in table:
            raise ValueError(f"tool_choice names {named!r}, a function not in tools")
        table = {named: table.get(named, (None, False))}
    rules = _rules(text)
    rules.update(changes)
    # One group per function whose schema types its arguments, and one for the rest.
    typed = [
        (name, parameters, strict)
        for name, (parameters, strict) in table.items()
        if TOOL_ARGUMENTS and isinstance(parameters, dict)
    ]
    made, found = _typed_arguments(typed, False)
    free = [_written_name(name) for name in table if found.get(name) is None]
    # Where the arguments of one function (or the free ones) are no lexeme, none are:
    # llguidance could lose a call whose arguments race another's of a different kind.
    candidates = [rule for rule in found.values() if rule] + (
        ["tool-arguments"] if free else []
    )
    if typed and not set(candidates) <= _terminal({**made, **rules}):
        made, found = _typed_arguments(typed, True)
    for rule, body in made.items():
        rules.setdefault(rule, body)
    groups: list = [
        (_gbnf_literal(_written_name(name)), found[name])
        for name in table
        if found.get(name) is not None
    ]
    names = _either(map(_gbnf_literal, free))
    if not groups:
        if names and TOOL_NAME_RULE in rules:
            rules[TOOL_NAME_RULE] = names.removeprefix("( ").removesuffix(" )")
        return _written(rules)
    if names:
        groups.append((names, "tool-arguments"))
    # The rules of one call that name the function or hold its arguments: a copy
    # per group, the call rules made of one copy or another.
    marks = {TOOL_NAME_RULE, "tool-arguments"}
    users = _users(rules)
    copied: set = set()
    todo = list(marks)
    while todo:
        for user in users.get(todo.pop(), ()):
            if user not in marks and user not in copied and user not in _CALL_RULES:
                copied.add(user)
                todo.append(user)
    swaps = []
    for index, (name, arguments) in enumerate(groups):
        swap = {rule: f"{rule}-fn{index}" for rule in copied}
        swap.update({TOOL_NAME_RULE: name, "tool-arguments": arguments})
        swaps.append(swap)
    for rule in sorted(copied):
        for swap in swaps:
            rules[swap[rule]] = _renamed(rules[rule], swap)
    for rule in _CALL_RULES:
        if rule in rules and _refs(rules[rule]) & (marks | copied):
            rules[rule] = " | ".join(_renamed(rules[rule], swap) for swap in swaps)
    return _written(rules)


def _typed_arguments(typed, split):
    """(the rules made, function name → the rule of its arguments, None where its
    schema leaves them free) for (name, parameters, strict) of each function."""
    made: dict = {}
    found = {}
    for index, (name, parameters, strict) in enumerate(typed):
        arguments = _Arguments(made, f"tool{index}", parameters, strict, split)
        found[name] = rule = arguments.arguments()
        if rule and _sorted_keys(_self_contained(parameters, parameters)) is not None:
            # The members of every object sorted by key, as templates that sort
            # them write them: the other order a call may take (the exports' too).
            other = _Arguments(
                made, f"tool{index}s", parameters, strict, split, sort=True
            ).arguments()
            if other and other != rule:
                found[name] = f"tool{index}-either"
                made[found[name]] = f"{rule} | {other}"
    return made, found


def _terminal(rules):
    """The rules llguidance takes for lexemes: those made of strings, classes and such
    rules only (no recursion). Each rule waits for the rules it refers to, and is
    one once they all are: a chain of rules costs its length, not its square."""
    waiting = {name: len(_refs(body)) for name, body in rules.items()}
    users = _users(rules)
    todo = [name for name, count in waiting.items() if not count]
    terminal: set = set()
    while todo:
        name = todo.pop()
        terminal.add(name)
        for user in users.get(name, ()):
            waiting[user] -= 1
            if not waiting[user]:
                todo.append(user)
    return terminal


def _users(rules):
    """Rule name → the names of the rules that refer to it."""
    users: dict = {}
    for name, body in rules.items():
        for ref in _refs(body):
            users.setdefault(ref, []).append(name)
    return users


def _written_name(name):
    """A function name as the format writes it (inside a JSON string: escaped)."""
    return json.dumps(name, ensure_ascii=False)[1:-1] if NAMES_IN_JSON else name
