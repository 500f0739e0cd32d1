"""Which rewrites ``prepare_messages`` makes for a template: the spec's ``polyfills``,
decided from what the probes found it can render (``capabilities``), the format, and
the inputs the analysis had to render it with.

Each rewrite makes up for one thing the template lacks; where the template has the
thing, the conversation passes as it is.
"""

from __future__ import annotations

# Our own call format, for templates whose model has none we know of: one JSON object
# {"name", "arguments"} between these. The tool instructions state it, and past calls
# are written in it.
FALLBACK_CALL = {"start": "<call>", "end": "</call>"}


def decide(body: dict, content_as_parts: bool = False) -> dict:
    """The ``polyfills`` section of a spec with this analysis ``body``."""
    caps = body["capabilities"]
    reasoning = body["reasoning"]
    has_calls = body["tools"]["format"] != "none"
    field = caps.get("reasoning_field")
    where = None
    if field and field != "reasoning_content":
        where = field
    elif field is None and reasoning["mode"] not in ("none", "tools_only"):
        if reasoning.get("start") and reasoning.get("end"):
            where = "content"  # the template reads no field: the markers in the content
    arguments = None
    if caps["tool_calls"] and caps["object_arguments"] != caps["string_arguments"]:
        arguments = "object" if caps["object_arguments"] else "string"
    definitions = not caps["tools"]
    calls_as_text = not caps["tool_calls"]
    return {
        "reasoning": where,
        "arguments": arguments,
        "non_null_content": bool(caps["requires_non_null_content"]),
        "typed_content": bool(content_as_parts),
        "system": not caps["system_role"],
        "tool_definitions": definitions,
        "tool_results": not caps["tool_responses"],
        "tool_calls": calls_as_text,
        "call_ids": caps.get("tool_call_id_pattern"),
        "fallback_call": (
            dict(FALLBACK_CALL)
            if not has_calls and (definitions or calls_as_text)
            else None
        ),
    }


def fallback_tools(call: dict) -> dict:
    """A spec ``tools`` section for our call format (``fallback_call``): what the
    parser and grammars read where the template writes no calls of its own."""
    return {
        "format": "json",
        "call": {"start": call["start"], "end": call["end"], "separator": "\n"},
        "json": {
            "name": "name",
            "arguments": "arguments",
            "id": None,
            "name_is_key": False,
            "arguments_as_string": False,
            "other_fields": [],
            "literal": "json",
        },
        "end_of_turn_after_calls": [],
    }
