"""xgrammar's structural tag for a format's outputs, built at call time from the tools.

``_STRUCTURAL_TAG`` holds the format's parts (``compiler/codegen/structural_tag.py``
says what each means); a format module gives its own (format.py declares it). Every template string reaches the result as a JSON string, never as
code: the only syntaxes built here are xgrammar's JSON and JSON Schema.
"""

from __future__ import annotations

import copy

from .format import _STRUCTURAL_TAG, CONTENT_AS_UNIT
from .grammar import _require, _tool_choice
from .text import _setting
from .tools import _tools_given
from .values import _resolved, _self_contained


def structural_tag(
    tools=None, *, enable_thinking=None, tool_choice="auto", parallel_tool_calls=True
):
    """An xgrammar structural tag (``{"type": "structural_tag", "format": …}``, JSON
    ready) accepting the outputs ``parse`` reads as well-formed, calls limited to the
    functions of ``tools`` (OpenAI tool definitions) with their arguments constrained
    by each function's JSON schema. ``tool_choice``: ``"auto"``, ``"none"`` (no
    call), ``"required"`` (at least one call) or ``{"type": "function", "function":
    {"name": …}}`` (calls to that function only, at least one);
    ``parallel_tool_calls=False``: at most one call. A structural tag names each
    function it lets the model call, so without ``tools`` (None or []) it admits no
    call. ``enable_thinking`` as ``parse`` takes it (None: the template's default)."""
    _require("structural_tag")
    tools, compiled = _tools_given(tools)
    calls = _STRUCTURAL_TAG["calls"]
    functions = _functions(tools)
    if compiled is not None:
        # The tag holds the schemas: copies, so that it may be changed freely.
        functions = copy.deepcopy(functions)
    choice, wanted = _tool_choice(tool_choice)
    if wanted is not None:
        functions = [f for f in functions if f[0] == wanted]
        if not functions:
            raise ValueError(f"tool_choice names {wanted!r}, which is not in tools")
    required = choice == "required"
    if choice == "none":
        functions = []
    if required and (calls is None or not functions):
        raise ValueError("a call is required, but this format or these tools have none")
    if calls is None:
        body = {"type": "any_text"}
    else:
        body = _body(calls, functions, required, parallel_tool_calls)
        for opener in calls["content_openers"]:
            # The trigger inside the content's opener opens no call.
            body = _one_of([_sequence([_SPACE, _const(opener), body]), body])
    setting = _setting(enable_thinking)
    reasoning = _STRUCTURAL_TAG["reasoning"][
        "default" if setting is None else ("on" if setting else "off")
    ]
    if reasoning is not None:
        body = _with_reasoning(reasoning, body, required)
    return {"type": "structural_tag", "format": body}


def _functions(tools):
    """(name, parameters schema) of each function in ``tools``, once per name."""
    found: dict = {}
    for tool in tools or ():
        function = tool.get("function", tool) if isinstance(tool, dict) else None
        if not isinstance(function, dict):
            continue
        name = function.get("name")
        if isinstance(name, str) and name and name not in found:
            parameters = function.get("parameters")
            if not isinstance(parameters, dict):
                parameters = {"type": "object", "properties": {}}
            found[name] = parameters
    return list(found.items())


def _one_of(formats):
    return formats[0] if len(formats) == 1 else {"type": "or", "elements": formats}


def _sequence(formats):
    formats = [f for f in formats if f is not None]
    return (
        formats[0] if len(formats) == 1 else {"type": "sequence", "elements": formats}
    )


def _grammar(text):
    return {"type": "grammar", "grammar": text}


def _const(text):
    return {"type": "const_string", "value": text}


def _any(excludes=()):
    found: dict = {"type": "any_text"}
    if excludes:
        found["excludes"] = list(excludes)
    return found


def _tag(begin, content, end):
    return {"type": "tag", "begin": begin, "content": content, "end": end}


# Whitespace the reader skips around markers and values.
_SPACE = {"type": "regex", "pattern": "[ \\t\\n\\r]*"}


def _with_reasoning(reasoning, body, required):
    """The body after the reasoning block that may open the output."""
    end = reasoning["end"]
    opened = reasoning["opened"]
    starts = reasoning["starts"]
    closed = []
    if starts:
        # The reader skips whitespace before an opener.
        closed.append(
            _sequence([_SPACE, _one_of([_tag(s, _any(), end) for s in starts])])
        )
    # (a prompt that may have opened the block: a closer with no opener ends it)
    if opened or reasoning.get("maybe") or not starts:
        closed.append(_tag("", _any(), end))
    closed = _one_of(closed)
    options = [_sequence([closed, body])]
    if not required:
        # Reasoning left open at the end of the output is reasoning.
        options += [_sequence([_const(s), _any([end])]) for s in starts]
        if opened:
            options.append(_any([end]))
    if not reasoning["always"]:
        options.append(body)
    return _one_of(options)


def _body(calls, functions, required, parallel):
    """Content and calls: calls where the triggers fire, free text elsewhere."""
    triggers = calls["triggers"]
    section = calls["section"]
    if section is not None and not any(section["end"]) and calls["call_trigger"]:
        # Nothing closes the section: a call's start begins each call after the first.
        triggers = list(dict.fromkeys(triggers + [calls["call_trigger"]]))
    text = _any(triggers)
    if calls["bare"] is not None or not triggers:
        # No marker opens a call: the output is content or calls.
        content = (
            {"type": "grammar", "grammar": calls["bare"]} if calls["bare"] else _any()
        )
        if CONTENT_AS_UNIT:
            # The content opens with its own marker, and the call separator after it
            # starts calls (model.Format.content_as_unit): content holds the
            # separator only where calls follow it.
            unit = calls["unit"]
            content = _sequence(
                [_SPACE, _const(unit["opener"]), _any([unit["separator"]])]
            )
        if not functions:
            return content
        listed = {
            "type": "tags_with_separator",
            "tags": _call_tags(calls, functions),
            "separator": calls["separator"],
            "at_least_one": True,
            "stop_after_first": not parallel,
        }
        if CONTENT_AS_UNIT:
            head = _tag(unit["opener"], _any(), unit["separator"])
            after = _sequence([_SPACE, head, _SPACE, listed])
            return _one_of([after, listed] if required else [content, after, listed])
        return listed if required else _one_of([content, listed])
    if not functions:
        return text
    tags = _call_tags(calls, functions)
    if section is not None and any(section["end"]):
        inner = {
            "type": "tags_with_separator",
            "tags": tags,
            "separator": section["separator"],
            "at_least_one": True,
            "stop_after_first": not parallel,
        }
        tags = [
            _tag(
                section["begin"],
                _sequence([_SPACE, inner, _SPACE]),
                _end(section["end"]),
            )
        ]
    elif section is not None:
        # Nothing closes the section: its opener begins the first call.
        first = [dict(tag, begin=section["begin"] + tag["begin"]) for tag in tags]
        if parallel and calls["call_trigger"]:
            tags = first + [dict(tag, begin=tag["begin"].lstrip()) for tag in tags]
        else:
            tags = first
    if not parallel:
        once = _sequence([text, _one_of(tags), text])
        return once if required else _one_of([text, once])
    found = {"type": "triggered_tags", "triggers": triggers, "tags": tags}
    if required:
        found["at_least_one"] = True
        return _sequence([text, found])
    return found


def _end(closers):
    return closers[0] if len(closers) == 1 else closers


def _escaped(text, escapes):
    return "".join(dict(escapes).get(char, char) for char in text)


def _call_tags(calls, functions):
    """One tag per way of writing a call and per function (tags that begin alike
    merged into one whose content is either)."""
    tags: dict = {}
    for items in calls["variants"]:
        for name, parameters in functions:
            begin = ""
            content: list = []
            literal = True
            for item in items:
                kind = item[0]
                if kind == "end":
                    key = (begin, tuple(item[1]))
                    tags.setdefault(key, []).append(
                        _sequence(content) if content else _const("")
                    )
                    continue
                if kind == "text" or kind == "name":
                    text = (
                        item[1]
                        if kind == "text"
                        else _escaped(name, calls["name_escapes"])
                    )
                    if literal:
                        begin += text
                    elif text:
                        content.append(_const(text))
                    continue
                literal = False
                if kind == "regex":
                    content.append({"type": "regex", "pattern": item[1]})
                else:
                    content.append(_arguments(calls, name, parameters))
    return [
        _tag(begin, _one_of(contents), _end(list(ends)))
        for (begin, ends), contents in tags.items()
    ]


def _arguments(calls, name, parameters):
    """A call's arguments: a JSON object (or the whole call object), or key/value units."""
    shape = calls["json"]
    if shape is not None:
        # The parameters inside the call object: their $refs point to its $defs.
        inner = _self_contained(parameters, parameters)
        defs = inner.pop("$defs", None) if isinstance(inner, dict) else None
        objects = []
        for order in shape["orders"]:
            whole = _call_object(shape, name, inner, order)
            if defs:
                whole["$defs"] = defs
            objects.append({"type": "json_schema", "json_schema": whole})
        return _sequence([_SPACE, _one_of(objects), _SPACE])
    units = calls["arguments"]
    if units is None:
        schema = _self_contained(parameters, parameters)
        return _sequence(
            [_SPACE, {"type": "json_schema", "json_schema": schema}, _SPACE]
        )
    properties = parameters.get("properties")
    if not isinstance(properties, dict) or not properties:
        return _any()
    tags = []
    for key, schema in properties.items():
        suffix = units["value_suffix"]
        written = _escaped(key, units["key_escapes"])
        if units["key_slot"]:
            suffix = suffix.replace(units["key_slot"], written)
        value = _value(units, schema if isinstance(schema, dict) else {}, parameters)
        if units["value_start"]:
            # What stands between the key and the value (an attribute naming its type).
            value = _sequence([_tag("", _any(), units["value_start"]), value])
        tags.append(
            _tag(units["key_prefix"] + written + units["key_end"], value, suffix)
        )
    return {
        "type": "tags_with_separator",
        "tags": tags,
        "separator": units["separator"],
    }


def _call_object(shape, name, parameters, order):
    """The JSON schema of a whole call object to ``name``, its top-level members in
    ``order``."""
    if shape["name_is_key"]:
        return {
            "type": "object",
            "properties": {name: parameters},
            "required": [name],
            "additionalProperties": False,
        }
    arguments = {"type": "string"} if shape["arguments_as_string"] else parameters
    root: dict = {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }
    for key in order:
        root["properties"][key] = {}
    leaves = [
        (shape["name"], {"const": name}, True),
        (shape["arguments"], arguments, True),
    ]
    leaves += [
        (path, {"type": "string"} if path == shape["id"] else {}, False)
        for path in shape["other"]
    ]
    for path, leaf, required in leaves:
        node = root
        for key in path[:-1]:
            child: dict = node["properties"].get(key) or {}
            if not child:
                child = {
                    "type": "object",
                    "properties": {},
                    "required": [],
                    "additionalProperties": False,
                }
                node["properties"][key] = child
            if required and key not in node["required"]:
                node["required"].append(key)
            node = child
        node["properties"][path[-1]] = leaf
        if required and path[-1] not in node["required"]:
            node["required"].append(path[-1])
    return root


def _value(units, schema, root):
    """One argument's value as the format writes it, typed by its JSON schema (its
    ``$ref``s looked up in ``root``, the function's parameters)."""
    schema = _resolved(schema, root)
    if not isinstance(schema, dict):
        schema = {}
    types = schema.get("type")
    choices = schema["enum"] if isinstance(schema.get("enum"), list) else None
    if "const" in schema:
        choices = [schema["const"]]
    strings = types == "string" or (
        choices is not None and choices and all(isinstance(c, str) for c in choices)
    )
    opening, closing = units["string_open"], units["string_close"]
    if strings:
        if choices is None:
            if opening:
                return _tag(opening, _any(), closing)
            return _any()
        written = []
        for choice in choices:
            text = _escaped(choice, units["value_escapes"])
            written.append(opening + text + closing)
            if units["verbatim"] and not opening:
                written.append(units["verbatim"][0] + choice + units["verbatim"][1])
        return _one_of([_const(text) for text in dict.fromkeys(written)])
    own = units["own"]
    if own is not None:
        if types in ("integer", "number"):
            return {"type": "json_schema", "json_schema": _self_contained(schema, root)}
        if types == "boolean":
            return _one_of([_const(own["true"]), _const(own["false"])])
        if types == "null":
            return _const(own["null"])
        return _grammar(own["grammar"])
    anything = (
        _any() if units["value_grammar"] is None else _grammar(units["value_grammar"])
    )
    if units["elements"] and types in ("object", "array", None):
        return anything
    if not types and choices is None:
        return anything
    found = {"type": "json_schema", "json_schema": _self_contained(schema, root)}
    if units["python"]:
        # Python's words for true, false and null, where the template writes str().
        words = {"boolean": ["True", "False"], "null": ["None"]}
        kinds = types if isinstance(types, list) else [types]
        extra = [_const(w) for kind in kinds for w in words.get(kind, ())]
        containers = any(kind in ("object", "array") for kind in kinds)
        if schema.get("anyOf") or (containers and not units.get("json_containers")):
            return anything  # a Python literal (or JSON) the schema cannot type
        return _one_of([found] + extra)
    return found
