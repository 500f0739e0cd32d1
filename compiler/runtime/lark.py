"""``lark_grammar``: llguidance's Lark grammar of a whole output, for any tool_choice.

compiler/codegen/lark.py writes, into each module, the format's rules as ``_LARK``:
the parts that do not depend on the tools (reasoning, content, where calls begin and
end), the rule of one call with its name and arguments left open, and the pieces a
key/value argument is made of. Here, at call time, the rules for the tool_choice are
picked and one call rule is written per tool: its name as the format writes it and
its arguments constrained by its JSON schema (``%json``, or key/value units typed by
the schema's properties).

Placeholders in ``_LARK``'s templates are ``%%…%%``: no text of a template reaches a
grammar unescaped, and the escaped text never holds ``%`` (``_lark_regex``).
"""

from __future__ import annotations

import json

from .format import (
    _LARK,
    GBNF_TOOLS,
    HAS_CALLS,
    KEY_ESCAPES,
    NAME_ESCAPES,
    NAMES_IN_JSON,
)
from .grammar import _require, _terminal
from .schema_gbnf import (
    _GBNF_TOKEN,
    WS_REGEX,
    _Arguments,
    _integer_pattern,
    _integer_range,
    _rules,
    _written,
)
from .text import _setting
from .tools import _made_once, _tools_given
from .values import _resolved, _schema_kinds, _self_contained, _sorted_keys

# What every Lark grammar opens with: llguidance's own dialect.
_LARK_HEADER = "%llguidance {}\n"
# Numbers as JSON writes them.
_LARK_INTEGER = "-?(?:0|[1-9][0-9]*)"
_LARK_NUMBER = _LARK_INTEGER + "(?:\\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"
# Parametric rules keep one bit a property: past this many, keys go unchecked.
_LARK_MAX_KEYS = 60
# Characters a regular expression (Rust's syntax, between Lark's slashes) escapes;
# "%" too, so that no escaped text holds a placeholder.
_LARK_SPECIAL = frozenset("\\.+*?()|[]{}^$#&-~/%")


def lark_grammar(
    tools=None, *, enable_thinking=None, tool_choice="auto", parallel_tool_calls=True
):
    """llguidance's Lark grammar (its docs/syntax.md) of a whole output: reasoning
    as the thinking setting allows, content, and tool calls in this format's markers,
    to the functions ``tools`` names (OpenAI tool definitions; any name when it names
    none), each call's arguments constrained by its JSON schema.

    ``tool_choice``: "auto" (content, calls, or both as the format writes them),
    "none" (no call), "required" (at least one call; content only before calls), or
    ``{"type": "function", "function": {"name": …}}`` (as "required", that function
    only); ``parallel_tool_calls=False`` allows one call at most;
    ``enable_thinking`` as ``parse`` takes it (None: the template's default).
    ValueError: a choice this format or these tools cannot meet."""
    _require("lark")
    tools, compiled = _tools_given(tools)
    choice, named = _lark_choice(tool_choice)
    thinking = {None: "-default", True: "", False: "-no-thinking"}[
        _setting(enable_thinking)
    ]
    if not HAS_CALLS:
        if choice == "required":
            raise ValueError(
                "this format writes no tool calls: tool_choice %r" % (choice,)
            )
        return _LARK_HEADER + _LARK["start" + thinking] + _LARK["none"] + _LARK["rules"]
    functions = _lark_functions(tools)
    if named is not None:
        if functions is None:
            functions = [(named, None, False)]
        else:
            functions = [found for found in functions if found[0] == named]
            if not functions:
                raise ValueError(
                    "tool_choice names %r, which tools do not define" % named
                )
    required = choice == "required"
    text = _LARK_HEADER + _LARK["start" + ("-calls" if required else "") + thinking]
    text += _LARK[choice] + _LARK["rules"]
    text += _LARK["list" if parallel_tool_calls else "list-single"]
    # With no call allowed, the call rules the content's rules name stay unused.
    if choice == "none":
        functions = None
    key = (_lark_calls, named, functions is None)
    return text + _made_once(compiled, key, lambda: _lark_calls(functions))


def _lark_choice(tool_choice):
    """("auto" | "none" | "required", the function a named choice names or None)."""
    if tool_choice in ("auto", "none", "required"):
        return tool_choice, None
    function = tool_choice.get("function") if isinstance(tool_choice, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str) or not name:
        raise ValueError(
            "tool_choice is 'auto', 'none', 'required' or"
            " {'type': 'function', 'function': {'name': ...}}: %r" % (tool_choice,)
        )
    return "required", name


def _lark_functions(tools):
    """[(name, parameters, strict)] of the OpenAI tool definitions in ``tools``, or
    None where they name no function (calls to any name)."""
    found: dict = {}  # name → (name, parameters, strict), the first of each name
    for tool in tools or ():
        function = tool.get("function", tool) if isinstance(tool, dict) else None
        if not isinstance(function, dict):
            continue
        name = function.get("name")
        if isinstance(name, str) and name and name not in found:
            found[name] = (
                name,
                function.get("parameters"),
                function.get("strict") is True,
            )
    return list(found.values()) or None


def _lark_calls(functions):
    """The rules ``call_full``, ``call_rest`` and ``call_next`` (a call after each
    lead the format has, one alternative a function) and the rules they use."""
    leads = [key[len("lead-") :] for key in _LARK if key.startswith("lead-")]
    calls: dict = {lead: [] for lead in leads}
    rules = []
    for number, (name, parameters, strict) in enumerate(
        functions or [(None, None, False)]
    ):
        arguments, more = _lark_arguments("args_%d" % number, parameters, strict)
        if name is None:
            written = _LARK["name"]  # any name the format's reader takes
        else:
            if NAME_ESCAPES:
                escapes = {char: form for form, char in NAME_ESCAPES.items()}
                name = "".join(escapes.get(char, char) for char in name)
            if NAMES_IN_JSON:
                name = json.dumps(name, ensure_ascii=False)[1:-1]
            written = _lark_regex(name)
        for lead in leads:
            label = "%d_%s" % (number, lead)
            calls[lead].append("call_" + label)
            call = (
                _LARK["call"]
                .replace("%%I%%", label)
                .replace("%%LEAD%%", _LARK["lead-" + lead])
            )
            rules.append(
                call.replace("%%NAME%%", written).replace("%%ARGS%%", arguments)
            )
        rules.append(more)
    heads = ["call_%s: %s\n" % (lead, " | ".join(calls[lead])) for lead in leads]
    return "".join(heads + rules)


def _lark_arguments(rule, parameters, strict):
    """(the rule a call's arguments are, the rules it needs) for a function with
    these JSON-schema ``parameters`` (None: not given)."""
    how = _LARK["arguments"]
    if how == "json":
        schema = parameters if isinstance(parameters, dict) else {"type": "object"}
        schema = _self_contained(schema, schema)
        return rule, "%s: %s\n" % (rule, _lark_json(schema, strict))
    if how != "units":
        return how, ""  # a rule of the format's own: arguments it cannot type
    parameters = parameters if isinstance(parameters, dict) else {}
    properties = parameters.get("properties")
    separator = _LARK["separator"]
    if not isinstance(properties, dict) or len(properties) > _LARK_MAX_KEYS:
        # Any key, any value, in any number.
        unit, text = _lark_unit(rule + "_any", None, None, strict, parameters)
        more = "(%s %s)*" % (separator, unit) if separator else unit + "*"
        return rule, "%s: (%s %s)?\n%s" % (rule, unit, more, text)
    wanted = parameters.get("required")
    required = [key for key in properties if isinstance(wanted, list) and key in wanted]
    keys = required + [key for key in properties if key not in required]
    # Each key once, in any order, and the required ones all (their bits come first):
    # a rule with a parameter (llguidance's docs/parametric.md), one bit a key.
    more = rule + "_more"
    first = [] if required else ['""']
    rest = ['"" %%if is_ones([0:%d])' % len(required)] if required else ['""']
    texts = []
    for bit, key in enumerate(keys):
        unit, text = _lark_unit(
            "%s_%d" % (rule, bit), key, properties[key], strict, parameters
        )
        texts.append(text)
        first.append("%s %s::%#x" % (unit, more, 1 << bit))
        head = separator + " " + unit if separator else unit
        rest.append("%s %s::set_bit(%d) %%if bit_clear(%d)" % (head, more, bit, bit))
    lines = "%s: %s\n%s::_: %s\n" % (rule, " | ".join(first), more, " | ".join(rest))
    return rule, lines + "".join(texts)


def _lark_unit(rule, key, schema, strict, root):
    """(a rule for one key/value argument, its rules): ``key`` as the format writes
    it (None: any key), its value as the property's JSON ``schema`` types it (its
    ``$ref``s looked up in ``root``, the function's parameters)."""
    kind, value = _lark_value(_resolved(schema, root))
    if kind == "enum" and "unit-enum" not in _LARK:
        kind = "scalar"  # whitespace around a listed string is no part of it
    typed = None
    if key is not None and KEY_ESCAPES:
        escapes = {char: form for form, char in KEY_ESCAPES.items()}
        key = "".join(escapes.get(char, char) for char in key)
    if kind == "string" and key is not None and "unit-raw" in _LARK:
        # The template's text, its length bounded: the GBNF's counted rule.
        typed = _lark_typed_value(rule + "_value", _resolved(schema, root), root, key)
        kind = "raw" if typed else kind
    if kind == "json" and "unit-json" not in _LARK and "unit-typed" in _LARK:
        # An object or array the template writes as a Python literal, or in a
        # syntax of its own: the GBNF's rules for it, in Lark.
        typed = _lark_typed_value(rule + "_value", _resolved(schema, root), root)
        kind = "typed" if typed else "text"
    if "unit-" + kind not in _LARK:
        kind = "text"  # a value the format writes in no form a schema can check
    written = _LARK["key"] if key is None else _lark_regex(key)
    text = _LARK["unit-" + kind].replace("%%RULE%%", rule).replace("%%KEY%%", written)
    text = text.replace("%%VALUE%%", value)
    if "attributes" in _LARK:
        text = text.replace("%%ATTR%%", _lark_attribute(schema, root))
    if kind == "json":
        # last: the schema's text is the caller's, placeholders or not
        schema = _self_contained(schema, root)
        text = text.replace("%%JSON%%", _lark_json(schema, strict))
    if typed is not None:
        text = text.replace("%%TYPED%%", typed[0]) + typed[1]
    return rule, text


def _lark_typed_value(rule, schema, root, key=None):
    """(the rule, its rules) of the values of ``schema`` as the format writes them
    (Python literals, or a syntax of the template's own), from the GBNF's rules for
    one value (schema_gbnf, on the format's own rules): a rule llguidance reads as
    one lexeme in the GBNF is a terminal here (its name in capitals), the rest
    rules; None where no value fits. With ``key`` (the unit's, as the template
    writes it), a string as its text as written through the unit's suffix, counted
    (``raw_string``); None where it is not."""
    rules = _rules(GBNF_TOOLS or "")
    arguments = _Arguments(rules, "v", root, False, False)
    value = (
        arguments._value(schema) if key is None else arguments.raw_string(schema, key)
    )
    if value is None:
        return None
    rules["root"] = value
    rules = _rules(_written(rules))
    # A counted raw value: one regular expression (the GBNF's rules for it, one per
    # character left and place in its closer, are many).
    texts = {text: found for text, found in arguments.texts.items() if text in rules}
    for text in texts:
        for other in [other for other in rules if other.startswith(text + "-")]:
            del rules[other]
        rules[text] = '"text"'  # (a terminal: what it stands for is written below)
    terminals = _terminal(rules)

    def name(gbnf_name):
        found = "%s_%s" % (rule, gbnf_name.replace("-", "_"))
        return found.upper() if gbnf_name in terminals else found.lower()

    def token(found):
        text = found.group()
        if text[0] == '"':
            return "/%s/" % _lark_regex(_gbnf_text(text))
        if text[0] == "[":
            return "/%s/" % _lark_class(text)
        return name(text)

    lines = [
        "%s: %s\n"
        % (
            name(rule_name),
            (
                _lark_text(*texts[rule_name])
                if rule_name in texts
                else _GBNF_TOKEN.sub(token, body)
            ),
        )
        for rule_name, body in rules.items()
    ]
    return name("root"), "".join(lines)


def _lark_text(closers, forbidden, not_first, most):
    """schema_gbnf's ``_text_rules`` as one regular expression (llguidance's ``&``
    and ``~``): at most ``most`` characters, through the first of ``closers``, none of
    ``forbidden``, not starting with ``not_first``."""
    close = "(?:%s)" % "|".join(map(_lark_regex, closers))
    found = [
        "/(?s:.{0,%d})%s/" % (most, close),
        "~/(?s:.*)%s(?s:.+)/" % close,
    ]
    if forbidden:
        found.append("~/(?s:.*)(?:%s)(?s:.*)/" % "|".join(map(_lark_regex, forbidden)))
    if not_first:
        found.append("~/%s(?s:.*)/" % _lark_regex(not_first))
    return " & ".join(found)


def _gbnf_text(literal):
    """The text a GBNF string literal (schema_gbnf's escapes) stands for."""
    named = {"n": "\n", "r": "\r", "t": "\t"}
    out, at, body = [], 0, literal[1:-1]
    while at < len(body):
        char = body[at]
        if char != "\\":
            out.append(char)
            at += 1
        elif body[at + 1] == "x":
            out.append(chr(int(body[at + 2 : at + 4], 16)))
            at += 4
        else:
            out.append(named.get(body[at + 1], body[at + 1]))
            at += 2
    return "".join(out)


def _lark_class(gbnf_class):
    """A GBNF character class as a regular expression (Rust's syntax): every
    character written as its code point, ranges kept (an escaped "-" is the
    character, one written between two characters a range)."""
    body = gbnf_class[1:-1]
    negated = body.startswith("^")
    raw = body[negated:]
    chars = []  # (the character, whether it was escaped)
    at = 0
    while at < len(raw):
        if raw[at] == "\\":
            step = 4 if raw[at + 1] == "x" else 2
            chars.append((_gbnf_text('"%s"' % raw[at : at + step]), True))
            at += step
        else:
            chars.append((raw[at], False))
            at += 1
    out = []
    index = 0
    while index < len(chars):
        char = chars[index][0]
        if index + 2 < len(chars) and chars[index + 1] == ("-", False):
            out.append("\\x{%x}-\\x{%x}" % (ord(char), ord(chars[index + 2][0])))
            index += 3
        else:
            out.append("\\x{%x}" % ord(char))
            index += 1
    return "[%s%s]" % ("^" if negated else "", "".join(out))


def _lark_attribute(schema, root):
    """The attribute before a unit's value that names its type, as the template
    writes it for the types ``schema`` admits (an integer is a number too; any of
    them for no schema): a regular expression."""
    words = json.loads(_LARK["attributes"])
    kinds = None if schema is None else _schema_kinds(schema, root)
    if kinds is not None and "number" in kinds:
        kinds = kinds | {"integer"}
    found = [word for kind, word in words.items() if kinds is None or kind in kinds]
    return "(?:%s)" % "|".join(dict.fromkeys(found or words.values()))


def _lark_value(schema):
    """(how a value of this JSON schema is checked: "text", "string", "scalar",
    "enum" (a scalar the schema lists, a string among them) or "json"; for a
    scalar, the regular expression of its forms)."""
    if not isinstance(schema, dict):
        return "text", ""
    values = schema.get("enum")
    if "const" in schema:
        values = [schema["const"]]
    if isinstance(values, list) and values:
        forms = []
        for value in values:
            if isinstance(value, str):
                refused = _LARK.get("enum-refuse")
                if refused and refused in value:
                    return "string", ""
                for quote in _LARK.get("enum-also", ""):
                    escaped = value.replace("\\", "\\\\").replace(quote, "\\" + quote)
                    forms.append(_lark_regex(quote + escaped + quote))
                if _LARK.get("enum-escape") == "json":
                    value = json.dumps(value, ensure_ascii=False)[1:-1]
                forms.append(_LARK["enum"].replace("%%TEXT%%", _lark_regex(value)))
            elif value is True or value is False or value is None:
                forms.append(_LARK[json.dumps(value)])
            elif isinstance(value, (int, float)):
                forms.append(_lark_regex(json.dumps(value)))
            else:
                return "json", ""  # an object or array: the schema checks it
        strings = any(isinstance(value, str) for value in values)
        return "enum" if strings else "scalar", "|".join(forms)
    kind = schema.get("type")
    if kind == "string":
        return "string", ""
    if kind == "integer":
        # within the schema's bounds (an empty range left to the reader)
        low, high = _integer_range(schema)
        found = _integer_pattern(low, high, regex=True)
        return "scalar", found or _LARK_INTEGER
    if kind == "number":
        return "scalar", _LARK_NUMBER
    if kind in ("boolean", "null"):
        words = ("true", "false") if kind == "boolean" else ("null",)
        return "scalar", "|".join(_LARK[word] for word in words)
    if kind in ("object", "array"):
        return "json", ""
    return "text", ""  # several types, anyOf, no type: any value the format reads


def _lark_json(schema, strict):
    """``%json`` of a (self-contained) JSON schema: its objects' members in the order
    its ``properties`` list them, or, as templates that sort keys write them, every
    object's sorted (``_sorted_keys``; the GBNF takes the same two)."""
    found = "%json " + _lark_schema(schema, strict)
    other = _sorted_keys(schema)
    if other is None:
        return found
    return "(%s | %%json %s)" % (found, _lark_schema(other, strict))


def _lark_schema(schema, strict):
    """A JSON schema as the text after ``%json``: keywords llguidance does not know
    ignored rather than refused; a string's ``\\u`` escape of any character taken
    (llguidance takes only control characters' by default, and templates that write
    ASCII JSON, as tojson may, escape every other one); whitespace bounded as the
    GBNF's (schema_gbnf.WS_REGEX); with ``strict`` (OpenAI's), no member an object's
    ``properties`` do not name."""
    schema = _lark_strict(schema) if strict else dict(schema)
    options = schema.get("x-guidance")
    schema["x-guidance"] = dict(options) if isinstance(options, dict) else {}
    schema["x-guidance"].setdefault("lenient", True)
    schema["x-guidance"].setdefault("json_allow_general_unicode_escapes", True)
    if "whitespace_flexible" not in schema["x-guidance"]:
        schema["x-guidance"].setdefault("whitespace_pattern", WS_REGEX)
    return json.dumps(schema, ensure_ascii=True, separators=(",", ":"))


def _lark_strict(schema):
    """The schema with ``additionalProperties: false`` wherever an object does not
    say otherwise (OpenAI's strict mode)."""
    if isinstance(schema, list):
        return [_lark_strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _lark_strict(value) for key, value in schema.items()}
    if isinstance(schema.get("properties"), dict):
        # property names are names, not schemas
        out["properties"] = {
            k: _lark_strict(v) for k, v in schema["properties"].items()
        }
        out.setdefault("additionalProperties", False)
    return out


def _lark_regex(text):
    """``text`` as a regular expression (Rust's syntax, between Lark's slashes) that
    matches exactly it: special characters escaped, and any character that is not
    printable written as its code point."""
    out = []
    for char in text:
        if char in _LARK_SPECIAL:
            out.append("\\x25" if char == "%" else "\\" + char)
        elif char.isprintable():
            out.append(char)
        else:
            out.append("\\x{%x}" % ord(char))
    return "".join(out)
