"""Tool definitions compiled once: ``compile_tools``.

Every ``parse``, ``StreamParser`` and export reads the tools it is given afresh: the
exports check their shape, and a parse reads each called function's argument kinds
from its JSON schema. A server that serves one request with several of them, or a
client that sends the same tools with every request, can compile them once instead:
checked as the exports check them, copied (the caller's dicts, changed later, change
nothing), and each function's argument kinds read from the copy when first needed and
kept. Everything that takes a tools list takes the compiled value too, and reads it
as it reads the list; the exports keep, per compiled value, what they made from it.
"""

from __future__ import annotations

import copy

from .values import _ArgumentKinds, _check_tools, _SchemaTypes

# Marks a compiled value for every format of this runtime. Each format module runs the
# runtime in a namespace of its own (binding.bind), so each has a CompiledTools class
# of its own: a value compiled by one module is read by another through this mark.
# Changed with CompiledTools' fields.
_TOOLS_LAYOUT = 1

# How many texts an export keeps per compiled value (a grammar per setting): past
# that, it makes them afresh each time.
_MADE_MAX = 32


class CompiledTools:
    """OpenAI tool definitions compiled by ``compile_tools``: a frozen copy of them,
    checked, and what reading an output needs of them. Pass it wherever a tools list
    is taken; ``tools`` gives the definitions back (a fresh copy each time)."""

    __slots__ = ("_definitions", "_types", "_made")
    _definitions: tuple
    _types: dict
    _made: dict
    _chatfmt_tools = _TOOLS_LAYOUT

    def __init__(self, definitions):
        # ``definitions``: checked, and copied from the caller's.
        store = object.__setattr__
        store(self, "_definitions", tuple(definitions))
        store(self, "_types", _function_types(self._definitions))
        store(self, "_made", {})  # an export's key → its text (``_made_once``)

    def __setattr__(self, name, value):
        raise AttributeError("compiled tools are frozen: compile the new definitions")

    def __delattr__(self, name):
        raise AttributeError("compiled tools are frozen")

    def __len__(self):
        return len(self._definitions)

    def __repr__(self):
        return "<compiled tools: %s>" % (", ".join(self._types) or "none")

    def __copy__(self):
        return self  # nothing in it changes

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        return compile_tools, (list(self._definitions),)

    @property
    def tools(self):
        """The definitions compiled, as a new list (a deep copy)."""
        return _copied(list(self._definitions))


def compile_tools(tools):
    """``tools`` (OpenAI tool definitions, a list; or None) compiled once, for
    ``parse``, ``StreamParser`` and every export of any format module to take in its
    place: checked as the exports check them (TypeError or ValueError naming what is
    wrong), and copied, so that changing the caller's dicts later changes nothing.
    Compiled tools are given back as they are."""
    if _compiled(tools) is not None:
        return tools
    _check_tools(tools)
    return CompiledTools(_copied(list(tools or ())))


# What a copy shares with its original: values that cannot change.
_UNCHANGING = (str, int, float, bool, type(None))


def _copied(value):
    """A deep copy of ``value``, as ``copy.deepcopy`` makes it (a dict or list that
    holds itself included), made faster for what JSON holds and one level at a time
    (a schema nested however deep is copied: deepcopy recurses)."""
    memo: dict = {}  # id of an original → its copy
    todo: list = []  # (a dict or list, its copy, still empty)

    def copy_of(item):
        kind = type(item)
        if kind in _UNCHANGING:
            return item
        if kind is not dict and kind is not list:
            return copy.deepcopy(item, memo)
        found = memo.get(id(item))
        if found is None:
            found = memo[id(item)] = {} if kind is dict else []
            todo.append((item, found))
        return found

    made = copy_of(value)
    while todo:
        original, empty = todo.pop()
        if type(original) is dict:
            for key, item in original.items():
                empty[key] = copy_of(item)
        else:
            empty.extend(copy_of(item) for item in original)
    return made


def _function_types(definitions):
    """Function name → how its arguments' tagged values are typed (``_SchemaTypes``
    reads one name at a time, afresh for each output; here every name is looked up
    once, and each argument's kind is read when first asked for). Where two share a
    name, the last counts."""
    types: dict = {}
    for tool in definitions:
        function = tool.get("function", tool) if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            continue
        parameters = function.get("parameters")
        properties = (
            parameters.get("properties") if isinstance(parameters, dict) else None
        )
        types[function["name"]] = (
            _ArgumentKinds(properties, parameters)
            if isinstance(properties, dict)
            else {}
        )
    return types


def _compiled(tools):
    """``tools`` where they are compiled (by this module's ``compile_tools`` or any
    other's of this runtime), else None. TypeError for tools compiled by a runtime
    that keeps them otherwise."""
    if type(tools) is CompiledTools:
        return tools
    if tools is None or isinstance(tools, (list, tuple)):
        return None
    layout = getattr(type(tools), "_chatfmt_tools", None)
    if layout is None:
        return None
    if layout != _TOOLS_LAYOUT:
        raise TypeError(
            "these tools were compiled by another version of the runtime: "
            "compile them with this module's compile_tools"
        )
    return tools


def _schema_types(tools):
    """How the tagged values of the functions in ``tools`` are typed, for reading one
    output: compiled tools' own, else read from the list as the output needs them."""
    if type(tools) is CompiledTools:
        return tools._types  # (the common case, at once)
    compiled = _compiled(tools)
    return _SchemaTypes(tools) if compiled is None else compiled._types


def _tools_given(tools):
    """(the definitions an export reads, the compiled value or None): a list is
    checked (``_check_tools``) each time; compiled tools were, when compiled."""
    compiled = _compiled(tools)
    if compiled is None:
        _check_tools(tools)
        return tools, None
    return compiled._definitions, compiled


def _made_once(compiled, key, make):
    """``make()``, kept in ``compiled`` (where it is not None) under ``key``, so that
    an export makes its text from compiled tools once per setting. ``key`` holds the
    export's own function, which is each format's own."""
    if compiled is None:
        return make()
    made = compiled._made
    found = made.get(key)
    if found is None:
        found = make()
        if len(made) < _MADE_MAX:
            made[key] = found
    return found
