"""xgrammar's structural tag for a format's outputs, built at call time from the tools.

``_STRUCTURAL_TAG`` holds the format's parts (``compiler/codegen/structural_tag.py``
says what each means); a format module gives its own (format.py declares it). Every template string reaches the result as a JSON string, never as
code: the only syntaxes built here are xgrammar's JSON and JSON Schema.
"""

from __future__ import annotations

import copy

from .format import (
    _STRUCTURAL_TAG,
    CONTENT_AS_UNIT,
    GBNF_TOOLS,
    TOOL_ANY_VALUE,
    TOOL_RAW_VALUE,
    TOOL_TOP_VALUES,
)
from .grammar import _require, _tool_choice
from .schema_gbnf import (
    WS_LONGEST,
    WS_REGEX,
    _Arguments,
    _renamed,
    _rules,
    _written,
    ws_fits,
)
from .text import _setting
from .tools import _tools_given
from .values import _resolved, _schema_kinds, _self_contained, _sorted_keys


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


def _space(text):
    """Whitespace where a literal writes ``text``: bounded, or, where the bound does
    not take it, also as written (schema_gbnf.ws_fits)."""
    return _SPACE if ws_fits(text) else _one_of([_const(text), _SPACE])


def _lead(text):
    return text[: len(text) - len(text.lstrip())]


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


# Whitespace the reader skips around markers and values, bounded as the GBNF's ``ws``.
_SPACE = {"type": "regex", "pattern": WS_REGEX}


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
        listed = _listed(_call_tags(calls, functions), calls["separator"], parallel)
        if CONTENT_AS_UNIT:
            head = _tag(unit["opener"], _any(), unit["separator"])
            after = _sequence([_SPACE, head, _SPACE, listed])
            return _one_of([after, listed] if required else [content, after, listed])
        return listed if required else _one_of([content, listed])
    if not functions:
        return text
    tags = _call_tags(calls, functions)
    if section is not None and any(section["end"]):
        inner = _listed(tags, section["separator"], parallel)
        tags = [
            _tag(
                section["begin"],
                _sequence([_SPACE, inner, _SPACE]),
                _end(section["end"]),
            )
        ]
    elif section is not None:
        # Nothing closes the section: its opener begins the first call (whitespace
        # may stand between them).
        first = [
            dict(
                tag,
                begin=section["begin"],
                content=(
                    _sequence([_SPACE, _const(tag["begin"]), tag["content"]])
                    if tag["begin"]
                    else tag["content"]
                ),
            )
            for tag in tags
        ]
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


def _listed(tags, separator, parallel):
    """One call, or (``parallel``) calls with ``separator`` between them, whitespace
    around it as the reader skips it."""
    one = _one_of(tags)
    if not parallel:
        return one
    between = _literal(separator) or [_SPACE]
    return _sequence([one, {"type": "star", "content": _sequence(between + [one])}])


def _end(closers):
    return closers[0] if len(closers) == 1 else closers


def _escaped(text, escapes):
    return "".join(dict(escapes).get(char, char) for char in text)


def _call_tags(calls, functions):
    """One tag per way of writing a call and per function (tags that begin alike
    merged into one whose content is either). A tag begins with the call's first
    literal, up to where the reader lets whitespace stand; every later literal,
    the name and the other holes stand after any whitespace (but a literal that
    follows its hole as written), as the reader skips it."""
    tags: dict = {}
    for items in calls["variants"]:
        for name, parameters in functions:
            begin = None
            content: list = []
            for item in items:
                kind = item[0]
                if kind == "end":
                    key = (begin or "", tuple(_cores(item[1])))
                    leads = [_lead(closer) for closer in item[1]]
                    space = _one_of(
                        [_const(t) for t in dict.fromkeys(leads) if not ws_fits(t)]
                        + [_SPACE]
                    )
                    tags.setdefault(key, []).append(
                        _sequence(content + [space]) if content else space
                    )
                elif kind == "text" and begin is None:
                    begin = item[1].rstrip()
                    if begin != item[1]:
                        content.append(_space(item[1][len(begin) :]))
                elif kind == "text":
                    content += _literal(item[1], tight=len(item) > 2)
                elif kind == "name":
                    content += [_SPACE, _const(_escaped(name, calls["name_escapes"]))]
                elif kind == "regex":
                    content += [_SPACE, {"type": "regex", "pattern": item[1]}]
                else:
                    content.append(_arguments(calls, name, parameters))
    return [
        _tag(begin, _one_of(contents), _end(list(ends)))
        for (begin, ends), contents in tags.items()
    ]


def _literal(text, tight=False):
    """A literal as the reader takes it: after any whitespace (``tight``: right
    where it stands, as written), and any whitespace after it where it ends with
    some."""
    core = text.strip()
    if not core:
        return [] if tight or not text else [_space(text)]
    lead = _lead(text)
    found = [_const(lead + core)] if tight else [_space(lead), _const(core)]
    trail = text[len(text.rstrip()) :]
    return found + ([_space(trail)] if trail else [])


def _cores(closers):
    """The closers of a call without the whitespace around them (the tag's content
    takes it), "" kept (a closer a server may cut off)."""
    return list(dict.fromkeys(closer.strip() for closer in closers))


def _json(schema):
    """A value of the (self-contained) JSON ``schema``: its objects' members in the
    order its ``properties`` list them, or every object's sorted by key, as
    templates that sort keys write them (the GBNF takes the same two)."""
    found = [_json_schema(schema)]
    other = _sorted_keys(schema)
    if other is not None:
        found.append(_json_schema(other))
    return _one_of(found)


def _json_schema(schema):
    """xgrammar's JSON value of ``schema``, its whitespace runs no longer than the
    bounded whitespace's (xgrammar bounds a run's length, not its line breaks)."""
    return {
        "type": "json_schema",
        "json_schema": schema,
        "max_whitespace_cnt": WS_LONGEST,
    }


def _arguments(calls, name, parameters):
    """A call's arguments: a JSON object (or the whole call object), or key/value units."""
    shape = calls["json"]
    if shape is not None:
        # The parameters inside the call object: their $refs point to its $defs.
        inner = _self_contained(parameters, parameters)
        # The arguments' objects in the schema's key order, or every one sorted
        # (``_json``); the call object's own members in each order it may take.
        forms = [inner, _sorted_keys(inner)]
        objects = []
        for form in forms if forms[1] is not None else forms[:1]:
            defs = form.pop("$defs", None) if isinstance(form, dict) else None
            for order in shape["orders"]:
                whole = _call_object(shape, name, form, order)
                if defs:
                    whole["$defs"] = defs
                objects.append(_json_schema(whole))
        return _sequence([_SPACE, _one_of(objects), _SPACE])
    units = calls["arguments"]
    if units is None:
        schema = _self_contained(parameters, parameters)
        return _sequence([_SPACE, _json(schema), _SPACE])
    properties = parameters.get("properties")
    if not isinstance(properties, dict) or not properties:
        return _any()
    wanted = parameters.get("required")
    required = set(wanted) if isinstance(wanted, list) else set()
    written = {
        key: _unit(units, key, schema, parameters) for key, schema in properties.items()
    }
    orders = [list(properties)]
    if sorted(properties, key=str.lower) != orders[0]:
        orders.append(sorted(properties, key=str.lower))  # as templates that sort keys
    return _one_of(
        [_units_in_order(units, order, written, required) for order in orders]
    )


def _units_in_order(units, order, written, required):
    """Units in ``order``, each once, the required ones all: where a separator
    stands between units, one alternative per unit that may come first."""
    separator = units["separator"]
    if not separator.strip():
        between = [_space(separator)] if separator else []
        return _sequence(
            [_between(written[key], key in required, between) for key in order]
            or [_const("")]
        )
    mark = _literal(separator)
    options = []
    for first, key in enumerate(order):
        rest = [
            _between(written[other], other in required, mark)
            for other in order[first + 1 :]
        ]
        options.append(_sequence([written[key]] + rest))
        if key in required:
            break
    else:
        options.append(_const(""))  # every unit left out
    return _one_of(options)


def _between(unit, required, before):
    """A unit after what stands before it (a separator), left out unless required."""
    found = _sequence(before + [unit]) if before else unit
    return found if required else {"type": "optional", "content": found}


def _unit(units, key, schema, root):
    """One key/value unit as the format writes it, the value typed by its JSON
    schema: the key's literals after any whitespace, the value, its suffix."""
    written = _escaped(key, units["key_escapes"])
    suffix = units["value_suffix"]
    if units["key_slot"]:
        suffix = suffix.replace(units["key_slot"], written)
    value, kind = _value(units, schema if isinstance(schema, dict) else {}, root)
    prefix, key_end = units["key_prefix"], units["key_end"]
    head = [_space(_lead(prefix))]
    if prefix.strip():
        head.append(_const(prefix.strip()))
    head += [_SPACE, _const(written), _space(_lead(key_end)), _const(key_end.strip())]
    last = key_end
    if units["value_start"]:
        # What stands between the key and the value (an attribute naming its type):
        # the template's word for the value's type, where the analysis read them.
        start = units["value_start"].strip()
        words = units.get("type_attributes")
        if words:
            kinds = _schema_kinds(schema, root)
            if kinds is not None and "number" in kinds:
                kinds = kinds | {"integer"}
            found = [w for k, w in words.items() if kinds is None or k in kinds]
            found = list(dict.fromkeys(found or words.values()))
            head.append(_one_of([_const(word + start) for word in found]))
        else:
            head.append(_tag("", _any(), start))
        last = units["value_start"]
    trail = last[len(last.rstrip()) :]
    core = suffix.strip()
    if not core:
        return _sequence(head + [_space(trail), value])
    if kind == "raw":
        # Text as written, to the suffix (whitespace around it is its own).
        return _sequence(head + [_tag("", value, core)])
    if kind == "listed":
        # A string the schema lists is read as written: whitespace around it is only
        # what the key's literal ends with and the suffix starts with, once each.
        lead = suffix[: len(suffix) - len(suffix.lstrip())]
        around = [_optional(trail), value, _optional(lead), _const(core)]
        return _sequence(head + [item for item in around if item is not None])
    return _sequence(head + [_space(trail), value, _space(_lead(suffix)), _const(core)])


def _optional(text):
    return {"type": "optional", "content": _const(text)} if text else None


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
    # The id and the other members, held short (compiler/codegen/structural_tag.py;
    # a module built before says nothing: any string, any value).
    short = shape.get("id_schema", {"type": "string"}), shape.get("other_schema", {})
    leaves += [
        (path, short[0] if path == shape["id"] else short[1], False)
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
    ``$ref``s looked up in ``root``, the function's parameters), and how: "raw" (any
    text, the suffix ends it), "listed" (a string the schema lists, written as it
    is) or "typed" (a value that ends by itself)."""
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
    quotes = units.get("quotes_also") or ()
    quoted = units.get("quoted")
    if strings:
        if choices is None:
            if quoted:
                return _grammar(_format_rule(TOOL_RAW_VALUE)), "typed"
            if opening:
                found = [_tag(q, _any(), q) for q in quotes]
                return _one_of([_tag(opening, _any(), closing)] + found), "typed"
            return _any(), "raw"
        written = []
        for choice in choices:
            text = _escaped(choice, units["value_escapes"])
            written.append(opening + text + closing)
            for quote in quotes:
                escaped = choice.replace("\\", "\\\\").replace(quote, "\\" + quote)
                written.append(quote + escaped + quote)
            if units["verbatim"] and not opening:
                written.append(units["verbatim"][0] + choice + units["verbatim"][1])
        found = _one_of([_const(text) for text in dict.fromkeys(written)])
        return found, "typed" if opening else "listed"
    own = units["own"]
    if own is not None:
        if types in ("integer", "number"):
            return _json(_self_contained(schema, root)), "typed"
        if types == "boolean":
            return _one_of([_const(own["true"]), _const(own["false"])]), "typed"
        if types == "null":
            return _const(own["null"]), "typed"
        if types in ("object", "array"):
            grammar = _typed_value(schema, root)
            return (_grammar(grammar), "typed") if grammar else (_any(), "raw")
        return _grammar(own["grammar"]), "typed"
    if quoted:
        anything = _grammar(_format_rule(TOOL_ANY_VALUE)), "typed"
    elif units["value_grammar"] is None:
        anything = _any(), "raw"
    else:
        anything = _grammar(units["value_grammar"]), "typed"
    if units["elements"] and types in ("object", "array", None):
        return anything
    if not types and choices is None:
        return anything
    found = _json(_self_contained(schema, root))
    if units["python"]:
        # Python's words for true, false and null, where the template writes str().
        words = {"boolean": ["True", "False"], "null": ["None"]}
        kinds = types if isinstance(types, list) else [types]
        extra = [_const(w) for kind in kinds for w in words.get(kind, ())]
        containers = any(kind in ("object", "array") for kind in kinds)
        if schema.get("anyOf") or (containers and not units.get("json_containers")):
            # A Python literal (or JSON): held to the schema by the GBNF's rules for
            # one value, as EBNF (xgrammar's JSON schema reader knows no Python).
            grammar = _typed_value(schema, root)
            return (_grammar(grammar), "typed") if grammar else anything
        return _one_of([found] + extra), "typed"
    return found, "typed"


def _typed_value(schema, root):
    """EBNF of the values ``schema`` admits (its ``$ref``s looked up in ``root``) as
    the format writes them, Python literals or a syntax of its own: the GBNF's rules
    for a unit's value (schema_gbnf, on the format's own rules); None where no value
    fits."""
    rules = _rules(GBNF_TOOLS or "")
    # (a raw string's maxLength not held: xgrammar compiles the rules that hold it,
    # one per character left and place in the closer, in seconds)
    value = _Arguments(rules, "value", root, False, False, counted=False)._value(schema)
    if value is None:
        return None
    rules["root"] = _renamed(value, TOOL_TOP_VALUES)
    return _written(rules)


def _format_rule(text):
    """EBNF of the GBNF text ``text`` on the format's own rules (a unit's value)."""
    rules = _rules(GBNF_TOOLS or "")
    rules["root"] = text
    return _written(rules)
