"""The invented values the analysis renders templates with.

They are plain words no template mentions, so wherever one shows up in a render it
came from our input; and none of them may ever appear in a spec (``PROBE_STRINGS``
is what the build checks specs against).
"""

from __future__ import annotations

import json

SYSTEM = "Sysprobe guidance"
USER = "Userprobe question"
USER_2 = "Userprobe followup"
CONTENT = "Contentprobe answer"
CONTENT_2 = "Contentprobe other"
REASONING = "Reasoningprobe musing"
TOOL_RESULT = "Resultprobe value"
FUNCTION = "probe_lookup"
FUNCTION_2 = "probe_fetch"
ARGUMENT = "probe_query"
ARGUMENT_VALUE = "Valueprobe text"
# Several corpus templates insist on ids of nine alphanumerics; others take any.
CALL_ID = "pr0beCa11"
CALL_ID_2 = "pr0beCa22"
CALL_ID_FREEFORM = "call_probe_77"

TOOL = {
    "type": "function",
    "function": {
        "name": FUNCTION,
        "description": "Probe function description",
        "parameters": {
            "type": "object",
            "properties": {ARGUMENT: {"type": "string", "description": "Probe arg"}},
            "required": [ARGUMENT],
        },
    },
}

PROBE_STRINGS = (
    SYSTEM,
    USER,
    USER_2,
    CONTENT,
    CONTENT_2,
    REASONING,
    TOOL_RESULT,
    FUNCTION,
    FUNCTION_2,
    ARGUMENT,
    ARGUMENT_VALUE,
    CALL_ID,
    CALL_ID_2,
    CALL_ID_FREEFORM,
    "Probe function description",
    "Probe arg",
)


def tool_call(name: str = FUNCTION, call_id: str = CALL_ID, *, as_string=False) -> dict:
    arguments = {ARGUMENT: ARGUMENT_VALUE}
    if as_string:
        arguments = json.dumps(arguments)
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }
