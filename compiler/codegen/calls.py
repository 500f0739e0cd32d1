"""Spec → the tool-call reading part of a generated parser module.

The reader is written for its one format: ``_read_call`` is straight-line code that
walks the call's literals and holes in the order the spec gives them, with the
literals as named constants. The small helpers every format shares (matching a
literal with tolerance for whitespace, finding where a JSON value ends, typing a
tagged value) are emitted only into modules whose format needs tool calls.

Every scan moves forward from where the last one stopped, so reading the calls of a
text costs time linear in its length.
"""

from __future__ import annotations

import textwrap

_HELPERS_TEXT = '''

def _skip_space(text, at):
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def _match(text, at, literal):
    """The end of ``literal`` written at ``at`` — exactly, or with other whitespace
    around it — or -1."""
    if text.startswith(literal, at):
        return at + len(literal)
    core = literal.strip()
    at = _skip_space(text, at)
    if not text.startswith(core, at):
        return -1
    at += len(core)
    trail = literal[len(literal.rstrip()) :]
    return at + len(trail) if trail and text.startswith(trail, at) else at


def _seek(text, at, literal):
    """Where the next ``literal`` (less its surrounding whitespace) begins, or -1."""
    core = literal.strip()
    return text.find(core, at) if core else at


def _before(value, literal):
    """A value read up to ``literal``, less the whitespace the literal starts with."""
    lead = literal[: len(literal) - len(literal.lstrip())]
    if lead and value.endswith(lead):
        return value[: len(value) - len(lead)]
    return value


%(value_end)s


def _load(text, literal):
    """The value a JSON (or, where the format writes them, Python) literal denotes;
    ValueError when it denotes none (too deep a nesting included)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        if literal != "python":
            raise ValueError("not a JSON value") from None
    try:
        return ast.literal_eval(text.strip())
    except (SyntaxError, MemoryError, RecursionError, TypeError) as error:
        raise ValueError(str(error)) from None


def _typed(text, kind, literal):
    """A tagged value: a string where the tool's schema says so, else the JSON (or
    Python) value it spells, else the string as written."""
    if kind == "string":
        return text
    try:
        return _load(text, literal)
    except ValueError:
        return text


def _good_name(name):
    """Whether ``name`` can be a function name: short, and one word."""
    return len(name) <= 256 and name.split() == [name]


def _read_object(text, at):
    """The JSON (or Python-literal) object written at ``at``, after any whitespace:
    (value, start, end) or None."""
    at = _skip_space(text, at)
    if LITERAL == "json":
        # The json module's C scanner finds the end and decodes in one pass.
        try:
            value, end = _DECODE(text, at)
        except (ValueError, RecursionError):
            return None
    else:
        end = _value_end(text, at)
        if end < 0:
            return None
        try:
            value = _load(text[at:end], LITERAL)
        except ValueError:
            return None
    return (value, at, end) if isinstance(value, dict) else None


_DECODE = json.JSONDecoder().raw_decode
_SCAN_STRING = json.decoder.scanstring
# What the json module takes for whitespace between tokens.
_JSON_SPACE = re.compile(r"[ \\t\\n\\r]*")


def _read_members(text, at):
    """The JSON object written at ``at``, after any whitespace, member by member:
    ({key: (value, start, end)}, end) or None. Knowing where each value is written
    lets a call keep the model's own text; each value is decoded once, by the json
    module's C scanner. A call object that repeats a key is not well-formed."""
    at = _skip_space(text, at)
    if not text.startswith("{", at):
        return None
    members = {}
    at = _JSON_SPACE.match(text, at + 1).end()
    if text.startswith("}", at):
        return members, at + 1
    try:
        while text.startswith('"', at):
            key, at = _SCAN_STRING(text, at + 1)
            if key in members:
                return None
            at = _JSON_SPACE.match(text, at).end()
            if not text.startswith(":", at):
                return None
            start = _JSON_SPACE.match(text, at + 1).end()
            value, at = _DECODE(text, start)
            members[key] = (value, start, at)
            at = _JSON_SPACE.match(text, at).end()
            if text.startswith("}", at):
                return members, at + 1
            if not text.startswith(",", at):
                return None
            at = _JSON_SPACE.match(text, at + 1).end()
    except (ValueError, RecursionError):
        pass
    return None
'''


_VALUE_END = r'''
# A string, or what is left of one: characters other than its quote and backslash,
# and escapes. One match jumps over it, however long.
_STRING_REST = {
    '"': re.compile(r'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL),
    "'": re.compile(r"[^'\\]*(?:\\.[^'\\]*)*", re.DOTALL),
}
_NESTED_MARK = re.compile(r"[\"'(){}\[\]]")
_TOP_MARK = re.compile(r"[\"'(){}\[\],;\s]")
_CLOSING = {"{": "}", "[": "]", "(": ")"}


class _ValueEnd:
    """Where a JSON (or Python) literal ends, read in one piece or in several:
    strings skipped with their escapes, brackets counted. Regular expressions jump
    to the next character that matters, so the cost is a few steps per bracket or
    string, not per character."""

    def __init__(self):
        self.depth = []
        self.quote = None
        self.escaped = False
        self.read = 0  # characters read in earlier pieces

    def copy(self):
        twin = _ValueEnd()
        twin.depth = list(self.depth)
        twin.quote, twin.escaped, twin.read = self.quote, self.escaped, self.read
        return twin

    def scan(self, text, at=0, final=True):
        """The end of the literal in ``text`` (which goes on from earlier pieces),
        -1 when it is broken, or None when it goes on past ``text``."""
        depth = self.depth
        index = at
        size = len(text)
        while index < size:
            if self.quote:
                if self.escaped:
                    self.escaped = False
                    index += 1
                    continue
                index = _STRING_REST[self.quote].match(text, index).end()
                if index == size:
                    break
                if text[index] != self.quote:
                    # a backslash that ends the piece: it escapes what comes next
                    self.escaped = True
                    index += 1
                    continue
                self.quote = None
                index += 1
                if not depth:
                    return index
                continue
            found = (_NESTED_MARK if depth else _TOP_MARK).search(text, index)
            if found is None:
                index = size
                break
            index = found.start()
            char = text[index]
            if char in _CLOSING:
                depth.append(_CLOSING[char])
            elif char in ")]}":
                if not depth or depth.pop() != char:
                    return index if not depth and (index > at or self.read) else -1
                if not depth:
                    return index + 1
            elif char in "\"'":
                self.quote = char
            else:  # whitespace or a separator after a bare literal
                return index if index > at or self.read else -1
            index += 1
        self.read += size - at
        if not final:
            return None
        return size if not depth and not self.quote and self.read else -1


def _value_end(text, at):
    """The end of the JSON or Python literal starting at ``at``, or -1."""
    return _ValueEnd().scan(text, at)
'''

HELPERS = _HELPERS_TEXT % {'value_end': _VALUE_END}

_SCHEMA_TYPES = '''

def _schema_types(tools):
    """Function name → argument name → JSON-schema type, from OpenAI tool definitions."""
    types = {}
    for tool in tools or ():
        function = tool.get("function", tool) if isinstance(tool, dict) else {}
        parameters = function.get("parameters") or {}
        properties = parameters.get("properties") or {}
        types[function.get("name")] = {
            key: (field.get("type") if isinstance(field, dict) else None)
            for key, field in properties.items()
        }
    return types
'''


def _const(name: str, value) -> str:
    return f"{name} = {value!r}\n"


def _path(dotted: str | None):
    return tuple(dotted.split(".")) if dotted else None


def constants(tools: dict) -> str:
    """The format's literals, each a named string constant."""
    section = tools.get("section") or {}
    call = tools["call"]
    lines = [
        _const("SECTION_START", section.get("start") or ""),
        _const("SECTION_END", section.get("end") or ""),
        _const("CALL_START", call["start"]),
        _const("CALL_SEPARATOR", call["separator"]),
        _const("END_AFTER_CALLS", list(tools.get("end_of_turn_after_calls") or [])),
        _const("CONTENT_AFTER_CALLS", bool(tools.get("content_after_calls"))),
    ]
    if tools["format"] == "json":
        fields = tools["json"]
        lines += [
            _const("CALL_END", call.get("end", "")),
            _const("NAME_PATH", _path(fields["name"])),
            _const("ARGUMENTS_PATH", _path(fields["arguments"])),
            _const("ID_PATH", _path(fields["id"])),
            _const("LITERAL", fields["literal"]),
        ]
    else:
        for index, part in enumerate(call["parts"]):
            lines.append(_const(f"AFTER_PART_{index}", part["after"]))
        arguments = tools["arguments"]
        lines.append(_const("LITERAL", arguments["literal"]))
        if arguments["encoding"] == "tagged":
            for key in ("key_prefix", "key_end", "value_start", "value_suffix", "separator",
                        "string_open", "string_close"):  # fmt: skip
                lines.append(_const("ARG_" + key.upper(), arguments.get(key, "")))
    return "".join(lines)


def _json_reader(tools: dict) -> str:
    fields = tools["json"]
    if fields["literal"] == "json":
        return _json_members_reader(fields)
    return _json_value_reader(fields)


_FIELD = textwrap.dedent(
    '''

    def _field(value, path):
        for key in path:
            if not isinstance(value, dict) or key not in value:
                return None
            value = value[key]
        return value
    '''
)

# What a call's fields must be, once read.
_CHECK_CALL = textwrap.dedent(
    """
    if not isinstance(name, str) or not _good_name(name):
        return None
    if arguments is None:
        return None
    if call_id is not None and not isinstance(call_id, str):
        call_id = None
    return _call(name, arguments, call_id), _close(text, end, CALL_END)
    """
)


def _json_members_reader(fields: dict) -> str:
    """A call written in JSON: its object read member by member, so that the
    arguments are the model's own text."""
    if fields["name_is_key"]:
        pick = textwrap.dedent(
            """
            if len(members) != 1:
                return None
            ((name, (value, start, stop)),) = members.items()
            arguments = _arguments_text(text, value, start, stop)
            call_id = None
            """
        )
    else:
        nested = len(_path(fields["arguments"])) > 1
        pick = textwrap.dedent(
            """
            name = _member(members, NAME_PATH)
            call_id = _member(members, ID_PATH) if ID_PATH else None
            """
        )
        if nested:
            # Nested arguments have no span of their own here: they are re-encoded.
            pick += textwrap.dedent(
                """
                value = _member(members, ARGUMENTS_PATH)
                arguments = _arguments_text(json.dumps(value, ensure_ascii=False), value, 0, None)
                """
            )
        else:
            pick += textwrap.dedent(
                """
                value, start, stop = members.get(ARGUMENTS_PATH[0], (None, 0, 0))
                arguments = _arguments_text(text, value, start, stop)
                """
            )
    return (
        _FIELD
        + textwrap.dedent(
            '''

            def _member(members, path):
                """The value at ``path`` in an object read by ``_read_members``."""
                if path[0] not in members:
                    return None
                return _field(members[path[0]][0], path[1:])


            def _arguments_text(text, value, start, stop):
                """A call's arguments as JSON text: the model's own where it wrote an
                object (``text[start:stop]``), the string's content where it wrote a
                string holding JSON, else None."""
                if isinstance(value, dict):
                    return text[start:stop]
                if isinstance(value, str):
                    try:
                        json.loads(value)
                    except (ValueError, RecursionError):
                        return None
                    return value
                return None
            '''
        )
        + _call_head("a JSON object", "_read_members", "members, end")
        + textwrap.indent(pick, "    ")
        + textwrap.indent(_CHECK_CALL, "    ")
    )


def _json_value_reader(fields: dict) -> str:
    """A call written as a Python literal: decoded whole, its arguments re-encoded
    as JSON (the model did not write JSON)."""
    if fields["name_is_key"]:
        pick = textwrap.dedent(
            """
            if len(value) != 1:
                return None
            ((name, arguments),) = value.items()
            call_id = None
            """
        )
    else:
        pick = textwrap.dedent(
            """
            name = _field(value, NAME_PATH)
            arguments = _field(value, ARGUMENTS_PATH)
            call_id = _field(value, ID_PATH) if ID_PATH else None
            """
        )
    pick += textwrap.dedent(
        """
        if isinstance(arguments, dict):
            arguments = json.dumps(arguments, ensure_ascii=False)
        elif isinstance(arguments, str):
            try:
                json.loads(arguments)
            except (ValueError, RecursionError):
                arguments = None
        else:
            arguments = None
        """
    )
    return (
        _FIELD
        + _call_head("an object", "_read_object", "value, _, end")
        + textwrap.indent(pick, "    ")
        + textwrap.indent(_CHECK_CALL, "    ")
    )


def _call_head(what: str, reader: str, unpack: str) -> str:
    """The start of a JSON call's ``_read_call``: its opening literal, then the
    object ``reader`` reads, unpacked into ``unpack``."""
    return textwrap.dedent(
        f'''

        def _read_call(text, at, types):
            """One call written as {what} at ``at``: (call, end) or None."""
            at = _match(text, at, CALL_START)
            if at < 0:
                return None
            found = {reader}(text, at)
            if found is None:
                return None
            {unpack} = found
        '''
    )


def _hole_code(index: int, hole: str, arguments: dict) -> str:
    after = f"AFTER_PART_{index}"
    if hole == "arguments" and arguments["encoding"] == "json":
        return textwrap.dedent(
            f"""
            # the arguments: one JSON value
            found = _read_object(text, at)
            if found is None:
                return None
            value, start, end = found
            arguments = text[start:end] if LITERAL == "json" else json.dumps(value, ensure_ascii=False)
            at = _close(text, end, {after})
            """
        )
    if hole == "arguments":
        return textwrap.dedent(
            f"""
            # the arguments: key/value units
            found = _read_arguments(text, at, types.get(name, {{}}), {after})
            if found is None:
                return None
            values, at = found
            arguments = json.dumps(values, ensure_ascii=False)
            at = _close(text, at, {after})
            """
        )
    if hole == "index":
        return textwrap.dedent(
            f"""
            # the call's index (0, 1, ...): not kept
            at = _skip_space(text, at)
            start = at
            while at < len(text) and text[at].isdigit():
                at += 1
            if at == start:
                return None
            at = _match(text, at, {after})
            if at < 0:
                return None
            """
        )
    target = "name" if hole == "name" else "call_id"
    return textwrap.dedent(
        f"""
        # the {'function name' if hole == 'name' else 'call id'}
        at = _skip_space(text, at)
        end = _seek(text, at, {after}) if {after}.strip() else _word_end(text, at)
        if end < 0:
            return None
        {target} = text[at:end].strip()
        if not _good_name({target}):
            return None
        at = _match(text, end, {after}) if {after}.strip() else end
        """
    )


def _tagged_reader(tools: dict) -> str:
    call = tools["call"]
    arguments = tools["arguments"]
    holes = [part["hole"] for part in call["parts"]]
    body = [
        "at = _match(text, at, CALL_START)\n",
        "if at < 0:\n    return None\n",
        "name, call_id, arguments = None, None, '{}'\n",
    ]
    for index, hole in enumerate(holes):
        if hole == "name" and holes.index("name") != index:
            # The name is written twice; the first one counts.
            body.append("first_name = name\n")
            body.append(_hole_code(index, hole, arguments))
            body.append("name = first_name\n")
            continue
        body.append(_hole_code(index, hole, arguments))
    body.append("return _call(name, arguments, call_id), at\n")
    code = [
        textwrap.dedent(
            '''

            def _word_end(text, at):
                """The end of a name written with nothing after it but the next marker."""
                end = at
                while end < len(text) and (text[end].isalnum() or text[end] in "_-.:"):
                    end += 1
                return end if end > at else -1


            def _read_call(text, at, types):
                """One call at ``at``, its parts in the order the format writes them:
                (call, end) or None."""
            '''
        ).rstrip("\n")
        + "\n",
        textwrap.indent("".join(body), "    "),
    ]
    if arguments["encoding"] == "tagged":
        code.append(_arguments_reader(arguments))
    return "".join(code)


def _arguments_reader(arguments: dict) -> str:
    if arguments.get("value_suffix", "").strip():
        suffix = "ARG_VALUE_SUFFIX"
        value = ""
        if arguments.get("value_suffix_names_key"):
            # The closing text repeats the key.
            value = 'suffix = ARG_VALUE_SUFFIX.replace("{key}", key)\n'
            suffix = "suffix"
        value += textwrap.dedent(
            f"""
            end = _seek(text, at, {suffix})
            if end < 0:
                return None
            raw = _before(text[at:end], {suffix})
            at = _match(text, end, {suffix})
            values[key] = _typed(raw, types.get(key), LITERAL)
            """
        )
    else:
        value = textwrap.dedent(
            """
            if ARG_STRING_OPEN and text.startswith(ARG_STRING_OPEN, at):
                end = text.find(ARG_STRING_CLOSE, at + len(ARG_STRING_OPEN))
                if end < 0:
                    return None
                raw = text[at : end + len(ARG_STRING_CLOSE)]
                at = end + len(ARG_STRING_CLOSE)
                try:
                    values[key] = _load(raw, LITERAL)
                except ValueError:
                    values[key] = raw[len(ARG_STRING_OPEN) : len(raw) - len(ARG_STRING_CLOSE)]
            else:
                end = _value_end(text, at)
                if end < 0:
                    return None
                values[key] = _typed(text[at:end], types.get(key), LITERAL)
                at = end
            """
        )
    if arguments.get("value_start"):
        start = textwrap.dedent(
            """
            # the key's closing text names the value's type; skip to the value
            end = _seek(text, at, ARG_VALUE_START)
            if end < 0:
                return None
            at = _match(text, end, ARG_VALUE_START)
            """
        )
    else:
        start = ""
    return (
        textwrap.dedent(
            '''

            def _read_arguments(text, at, types, stop):
                """Key/value units up to ``stop`` or the first text that does not
                start one: (values, end), or None when a unit starts but is broken."""
                values = {}
                while True:
                    unit = at
                    if stop.strip() and _match(text, at, stop) >= 0:
                        return values, unit
                    if values:
                        at = _match(text, at, ARG_SEPARATOR)
                        if at < 0:
                            return values, unit
                    at = _match(text, at, ARG_KEY_PREFIX)
                    if at < 0:
                        return values, unit
                    end = _seek(text, at, ARG_KEY_END)
                    key = text[at:end].strip() if end >= 0 else ""
                    if not _good_name(key):
                        return values, unit
                    at = _match(text, end, ARG_KEY_END)
            '''
        )
        + textwrap.indent(start + value, "        ")
        + "        if at < 0:\n            return None\n"
    )


def reader(tools: dict) -> str:
    """``_read_calls`` and what it needs, for a format with tool calls."""
    shared = textwrap.dedent(
        '''

        def _call(name, arguments, call_id):
            return {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }


        def _close(text, at, literal):
            """The end of a call's closing ``literal``; a text that ends instead (the
            server cut the stop marker) closes it too."""
            if at < 0:
                return -1
            end = _match(text, at, literal)
            if end < 0 and not text[at:].strip():
                return len(text)
            return end


        def _read_calls(text, at, types):
            """The calls written from ``at`` on: (calls, end), or None."""
            if SECTION_START:
                at = _match(text, at, SECTION_START)
                if at < 0:
                    return None
            calls = []
            while True:
                before = at
                if calls:
                    at = _match(text, at, CALL_SEPARATOR)
                    if at < 0:
                        at = before
                        break
                found = _read_call(text, at, types) if at >= 0 else None
                if found is None or found[1] < 0:
                    at = before
                    break
                call, at = found
                calls.append(call)
            if not calls:
                return None
            if SECTION_END:
                at = _close(text, at, SECTION_END)
                if at < 0:
                    return None
            for marker in END_AFTER_CALLS:
                end = _match(text, at, marker)
                if end >= 0:
                    at = end
                    break
            return calls, at
        '''
    )
    if tools["format"] == "json":
        specific = _json_reader(tools)
    else:
        specific = _tagged_reader(tools)
    schema = _SCHEMA_TYPES if typed_values(tools) else ""
    return HELPERS + schema + shared + specific + _finder(tools)


def typed_values(tools: dict) -> bool:
    """Whether the format writes argument values as text for the tools' JSON
    schemas to type (key/value units), rather than as JSON."""
    return tools["format"] != "json" and tools["arguments"]["encoding"] == "tagged"


def trigger(tools: dict) -> str:
    section = tools.get("section") or {}
    return (section.get("start") or tools["call"]["start"]).strip()


def _finder(tools: dict) -> str:
    if trigger(tools):
        return textwrap.dedent(
            '''

            TRIGGER = SECTION_START.strip() or CALL_START.strip()
            # A trigger that turns out not to start well-formed calls is content; a
            # few more occurrences are tried, so prose that quotes the marker does
            # not hide calls after it.
            _ATTEMPTS = 8


            def _find_calls(text, types, strict):
                """(text before the calls, calls, text after them)."""
                at = 0
                for _ in range(_ATTEMPTS):
                    at = text.find(TRIGGER, at)
                    if at < 0:
                        break
                    start = at
                    while start > 0 and text[start - 1].isspace():
                        start -= 1
                    found = _read_calls(text, start, types)
                    if found is not None:
                        calls, end = found
                        return text[:start], calls, text[end:]
                    if strict:
                        raise ValueError("malformed tool call at offset %d" % at)
                    at += len(TRIGGER)
                return text, [], ""
            '''
        )
    return textwrap.dedent(
        '''

        def _find_calls(text, types, strict):
            """(text before the calls, calls, text after them). Nothing marks a call
            here: the whole output is calls or it is content."""
            found = _read_calls(text, _skip_space(text, 0), types)
            if found is not None and not _trailing(text[found[1] :]):
                return "", found[0], ""
            return text, [], ""
        '''
    )
