"""``prepare_messages``: a conversation in OpenAI's canonical shape, rewritten into the
shape this template reads (the spec's ``polyfills``).

A server keeps one shape: reasoning in ``reasoning_content``, arguments as JSON text,
``content`` None beside calls, ``system`` and ``tool`` roles, tools passed apart.
Templates read less or otherwise; each rewrite here makes up for one thing the
template lacks, so that what the conversation holds still reaches the prompt. Each
can be switched off by its keyword; the format's constants decide which a module
keeps.
"""

from __future__ import annotations

import json
import re

from .format import (
    ARG_KEY_END,
    ARG_KEY_PREFIX,
    ARG_SEPARATOR,
    ARG_STRING_CLOSE,
    ARG_STRING_OPEN,
    ARG_VALUE_START,
    ARG_VALUE_SUFFIX,
    ARGUMENTS_PATH,
    CALL_END,
    CALL_PARTS,
    CALL_SEPARATOR,
    CALL_START,
    ID_PATH,
    JSON_ARGUMENTS,
    JSON_CALLS,
    NAME_IS_KEY,
    NAME_PATH,
    PREPARE_ARGUMENTS,
    PREPARE_CALL_ID_PATTERN,
    PREPARE_NON_NULL_CONTENT,
    PREPARE_REASONING_BLOCK,
    PREPARE_REASONING_FIELD,
    PREPARE_REASONING_IN_CONTENT,
    PREPARE_SYSTEM,
    PREPARE_TOOL_CALLS,
    PREPARE_TOOL_RESULTS,
    PREPARE_TOOLS,
    PREPARE_TYPED_CONTENT,
    REASONING_END,
    REASONING_START,
    SECTION_END,
    SECTION_START,
    VALUE_SUFFIX_NAMES_KEY,
)
from .tools import _tools_given
from .values import _shown


def prepare_messages(
    messages,
    *,
    tools=None,
    reasoning=True,
    arguments=True,
    content=True,
    typed_content=True,
    system=True,
    tool_definitions=True,
    tool_results=True,
    tool_calls=True,
    call_ids=True,
):
    """``messages`` (OpenAI's chat shape) as this template reads them: a new list,
    the input left as it is. ``tools``: the definitions the request passes; written
    into the system text where the template takes none. The other keywords switch
    one rewrite each off (those this template needs none of do nothing):
    ``reasoning`` (reasoning_content moved where the template reads it),
    ``arguments`` (arguments as an object or as JSON text), ``content`` (None content
    as ""), ``typed_content`` (text as typed blocks), ``system`` (system text into the
    first user turn), ``tool_definitions``, ``tool_results`` (results as user turns),
    ``tool_calls`` (past calls written as text), ``call_ids`` (ids the template
    refuses replaced by ones it takes)."""
    messages = _messages_list(messages)
    tools, _ = _tools_given(tools)
    prepared: list = []
    if PREPARE_TOOL_RESULTS and tool_results:
        names = _call_names(messages)
    for message in messages:
        message = dict(message)
        if PREPARE_CALL_ID_PATTERN and call_ids:
            message = _with_call_ids(message)
        if PREPARE_ARGUMENTS and arguments and message.get("tool_calls"):
            message["tool_calls"] = [
                _call_arguments(call) for call in message["tool_calls"]
            ]
        if PREPARE_TOOL_CALLS and tool_calls and message.get("tool_calls"):
            message = _calls_as_text(message)
        if (
            PREPARE_REASONING_FIELD
            or PREPARE_REASONING_BLOCK
            or PREPARE_REASONING_IN_CONTENT
        ):
            if reasoning and message.get("reasoning_content") is not None:
                message = _moved_reasoning(message)
        if PREPARE_TOOL_RESULTS and tool_results and message["role"] == "tool":
            message = _result_as_user(message, names)
            if prepared and prepared[-1]["role"] == "user":
                # The results of one turn's calls: one user turn, as templates that
                # want roles to alternate need.
                message["content"] = _text(prepared.pop()) + "\n\n" + message["content"]
        prepared.append(message)
    if PREPARE_TOOLS and tool_definitions and tools:
        prepared = _with_tool_instructions(prepared, tools)
    if PREPARE_SYSTEM and system:
        prepared = _system_in_first_user(prepared)
    if PREPARE_NON_NULL_CONTENT and content:
        for message in prepared:
            if message.get("content") is None:
                message["content"] = ""
    if PREPARE_TYPED_CONTENT and typed_content:
        for message in prepared:
            if isinstance(message.get("content"), str):
                message["content"] = [{"type": "text", "text": message["content"]}]
    return prepared


def _messages_list(messages):
    """``messages`` as a list (an iterator is read once, and the rewrites may read
    the conversation twice), each message checked: TypeError where it is no
    sequence of dicts with a role, ValueError naming what a message holds wrongly."""
    if isinstance(messages, (str, bytes, dict)) or not hasattr(messages, "__iter__"):
        raise TypeError("messages is a list of messages, not %s" % _shown(messages))
    messages = list(messages)
    for index, message in enumerate(messages):
        where = "messages[%d]" % index
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise TypeError(
                f"{where}: a message must be a dict with a 'role': {message!r}"
            )
        reasoning = message.get("reasoning_content")
        if reasoning is not None and not isinstance(reasoning, str):
            raise ValueError(
                f"{where}['reasoning_content'] is {_shown(reasoning)}, not text"
            )
        calls = message.get("tool_calls")
        if calls is not None and not isinstance(calls, (list, tuple)):
            raise ValueError(
                f"{where}['tool_calls'] is {_shown(calls)}, not a list of calls"
            )
        for number, call in enumerate(calls or ()):
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(call, dict) or not isinstance(
                function, (dict, type(None))
            ):
                raise ValueError(
                    f"{where}['tool_calls'][{number}] is {_shown(call)}, not a call"
                    " (a dict, its 'function' a dict)"
                )
    return messages


def _text(message):
    """A message's content as text (typed text blocks joined; None as "")."""
    value = message.get("content")
    if isinstance(value, list):
        return "".join(part.get("text", "") for part in value if isinstance(part, dict))
    return "" if value is None else str(value)


def _call_id(call_id):
    """An id the template takes: the id itself where it fits the template's pattern,
    else nine alphanumerics made from it (FNV-1a), so a call and its result still
    agree and a conversation keeps its ids as it grows."""
    if not isinstance(call_id, str) or re.fullmatch(PREPARE_CALL_ID_PATTERN, call_id):
        return call_id
    digest = 0xCBF29CE484222325
    for byte in call_id.encode("utf-8"):
        digest = ((digest ^ byte) * 0x100000001B3) % (1 << 64)
    letters = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    made = ""
    for _ in range(9):
        digest, at = divmod(digest, len(letters))
        made += letters[at]
    return made


def _with_call_ids(message):
    """A message with its calls' ids, or the id its result answers, in the template's
    pattern."""
    if message.get("tool_call_id") is not None:
        message["tool_call_id"] = _call_id(message["tool_call_id"])
    if message.get("tool_calls"):
        message["tool_calls"] = [
            dict(call, id=_call_id(call.get("id"))) if isinstance(call, dict) else call
            for call in message["tool_calls"]
        ]
    return message


def _call_arguments(call):
    """A call with its arguments as an object or as JSON text, as the template reads
    them (text that is no JSON stays as it is: the template may still show it)."""
    call = dict(call)
    function = dict(call.get("function") or {})
    value = function.get("arguments")
    if PREPARE_ARGUMENTS == "object" and isinstance(value, str):
        try:
            function["arguments"] = json.loads(value) if value.strip() else {}
        except ValueError:
            pass
    if PREPARE_ARGUMENTS == "string" and not isinstance(value, str):
        function["arguments"] = json.dumps(value, ensure_ascii=False)
    call["function"] = function
    return call


def _moved_reasoning(message):
    """``reasoning_content`` where the template reads it."""
    text = message.pop("reasoning_content")
    if PREPARE_REASONING_FIELD:
        message[PREPARE_REASONING_FIELD] = text
    if PREPARE_REASONING_BLOCK:
        kind, key = PREPARE_REASONING_BLOCK
        rest = message.get("content")
        if isinstance(rest, str):
            rest = [{"type": "text", "text": rest}] if rest else []
        message["content"] = [{"type": kind, key: text}] + list(rest or [])
    if PREPARE_REASONING_IN_CONTENT:
        message["content"] = REASONING_START + text + REASONING_END + _text(message)
    return message


def _arguments_object(call):
    value = call.get("arguments")
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return {} if value is None else value


def _call_text(name, arguments, call_id, index):
    """One call written as the format writes it (where the template writes none, the
    format is our fallback: the spec's ``polyfills.fallback_call``)."""
    if JSON_CALLS:
        if NAME_IS_KEY:
            return (
                CALL_START
                + json.dumps({name: arguments}, ensure_ascii=False)
                + CALL_END
            )
        fields: dict = {}
        for path, value in (
            (NAME_PATH, name),
            (ARGUMENTS_PATH, arguments),
            (ID_PATH, call_id),
        ):
            if path and value is not None:
                target = fields
                for key in path[:-1]:
                    target = target.setdefault(key, {})
                target[path[-1]] = value
        return CALL_START + json.dumps(fields, ensure_ascii=False) + CALL_END
    holes = {"name": name, "id": call_id or "", "index": str(index)}
    if JSON_ARGUMENTS:
        holes["arguments"] = json.dumps(arguments, ensure_ascii=False)
    else:
        units = []
        for key, value in (arguments.items() if isinstance(arguments, dict) else ()):
            if isinstance(value, str):
                value = ARG_STRING_OPEN + value + ARG_STRING_CLOSE
            else:
                value = json.dumps(value, ensure_ascii=False)
            suffix = (
                ARG_VALUE_SUFFIX.replace("{key}", key)
                if VALUE_SUFFIX_NAMES_KEY
                else ARG_VALUE_SUFFIX
            )
            units.append(
                ARG_KEY_PREFIX + key + ARG_KEY_END + ARG_VALUE_START + value + suffix
            )
        holes["arguments"] = ARG_SEPARATOR.join(units)
    text = CALL_START
    for hole, after, _ in CALL_PARTS:
        text += holes[hole] + after
    return text


def _calls_text(calls):
    """Calls (OpenAI's shape) written as text, as an output holds them."""
    written = []
    for index, call in enumerate(calls):
        function = call.get("function") or call
        written.append(
            _call_text(
                function.get("name", ""),
                _arguments_object(function),
                call.get("id"),
                index,
            )
        )
    return SECTION_START + CALL_SEPARATOR.join(written) + SECTION_END


def _calls_as_text(message):
    """An assistant turn whose calls the template cannot render, with them written
    after its content, as the model wrote them."""
    calls = message.pop("tool_calls")
    before = _text(message)
    message["content"] = before + ("\n" if before else "") + _calls_text(calls)
    return message


def _call_names(messages):
    """Call id → the function's name, over the conversation's calls."""
    names = {}
    for message in messages:
        for call in (
            (message.get("tool_calls") or ()) if isinstance(message, dict) else ()
        ):
            if isinstance(call, dict) and call.get("id"):
                names[call["id"]] = (call.get("function") or call).get("name")
    return names


def _result_as_user(message, names):
    """A tool result as a user turn that names the call it answers."""
    name = message.get("name") or names.get(message.get("tool_call_id"))
    header = f"Result of the call to {name}:" if name else "Result of a tool call:"
    return {"role": "user", "content": header + "\n" + _text(message)}


def _with_tool_instructions(messages, tools):
    """The tools' definitions and how to call them, at the end of the system text (a
    system turn is added where there is none)."""
    functions = [tool.get("function", tool) for tool in tools]
    first = functions[0] if functions else {}
    # The example's id has nine alphanumerics, the form the strictest templates want.
    example = {
        key: "..."
        for key in list((first.get("parameters") or {}).get("properties") or {})[:1]
    }
    lines = [
        "You can call these tools:",
        *(json.dumps(function, ensure_ascii=False) for function in functions),
        "",
        "To call a tool, write the call exactly like this, in place of an answer:",
        _calls_text(
            [
                {
                    "id": "a1b2c3d4e",
                    "function": {"name": first.get("name", ""), "arguments": example},
                }
            ]
        ),
    ]
    instructions = "\n".join(lines)
    messages = list(messages)
    if messages and messages[0]["role"] == "system":
        before = _text(messages[0])
        messages[0] = dict(
            messages[0], content=before + ("\n\n" if before else "") + instructions
        )
    else:
        messages.insert(0, {"role": "system", "content": instructions})
    return messages


def _system_in_first_user(messages):
    """System turns' text joined to the next user turn, for templates without a system
    role."""
    prepared, pending = [], []
    for message in messages:
        if message["role"] == "system":
            pending.append(_text(message))
            continue
        if pending and message["role"] == "user":
            message = dict(message, content="\n\n".join(pending + [_text(message)]))
            pending = []
        prepared.append(message)
    if pending:  # no user turn after them: a user turn of their own
        prepared.insert(0, {"role": "user", "content": "\n\n".join(pending)})
    return prepared
