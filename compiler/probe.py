"""Capabilities: what a template can express, found by rendering small conversations.

Each probe renders one variant and looks for our own invented values in the output; a
template that raises on a variant cannot express it. Nothing here knows any model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TypeGuard

from . import samples
from .conversation import Conversation
from .render import ChatTemplate

# Inputs every chat template may read; anything else it reads undeclared is reported.
STANDARD_VARIABLES = frozenset(
    {
        "messages",
        "tools",
        "add_generation_prompt",
        "bos_token",
        "eos_token",
        "enable_thinking",
        "raise_exception",
        "strftime_now",
        "range",
        "namespace",
        "dict",
        "lipsum",
        "cycler",
        "joiner",
        "documents",
        "tool_choice",
        "builtin_tools",
        "custom_tools",
        "tools_in_user_message",
        "date_string",
        "reasoning_effort",
        "thinking",
        "chat_template_kwargs",
        "add_vision_id",
    }
)

# Inputs of their own that a template reads: never its thinking switch (``thinking`` may
# be one, as enable_thinking is).
NOT_SWITCHES = STANDARD_VARIABLES - {"thinking"}

# Where a message may carry its reasoning, in the order we prefer them: fields first,
# then typed content blocks. These are input conventions, not output markers.
REASONING_FIELDS = ("reasoning_content", "reasoning", "thinking", "thought")
REASONING_BLOCKS = (("thinking", "thinking"), ("thoughts", "text"))


@dataclass
class Capabilities:
    system_role: bool = True
    tools: bool = False
    tool_calls: bool = False
    tool_responses: bool = False
    parallel_tool_calls: bool = False
    tool_call_id: bool = False
    tool_call_id_pattern: str | None = None
    object_arguments: bool = False
    string_arguments: bool = False
    requires_non_null_content: bool = False
    typed_content_blocks: bool = False
    reasoning_field: str | None = None
    thinking_toggle: bool = False
    undeclared_variables: list[str] = field(default_factory=list)
    # The variables the template switches thinking with and its default
    # (compiler/analyze/switch.py, which the analysis runs before the probe: the
    # template renders with it); None: no switch.
    thinking_switch: dict | None = None

    def as_dict(self) -> dict:
        found = dict(self.__dict__)
        if found["thinking_switch"] is None:
            del found["thinking_switch"]  # a template that switches no thinking
        return found


def reasoning_message(field_name: str | None, reasoning: str, content: str) -> dict:
    """An assistant message carrying ``reasoning`` the way the template reads it."""
    if field_name is None:
        return {"role": "assistant", "content": content}
    if field_name.startswith("block:"):
        block_type, key = field_name[len("block:") :].split("/")
        return {
            "role": "assistant",
            "content": [
                {"type": block_type, key: reasoning},
                {"type": "text", "text": content},
            ],
        }
    return {"role": "assistant", "content": content, field_name: reasoning}


def _contains(render: str | None, *needles: str) -> TypeGuard[str]:
    """Whether the render exists and holds every needle (then it is a str)."""
    return render is not None and all(needle in render for needle in needles)


def _encoded_twice(as_string: str | None, as_object: str | None) -> bool:
    """Whether arguments given as JSON text render as a JSON string of that text
    (``arguments | tojson`` on a string) where the object renders as JSON: the
    template shows them, but not as the model writes them."""
    twice = json.dumps(json.dumps(samples.tool_call()["function"]["arguments"]))[1:-1]
    return _contains(as_string, twice) and not _contains(as_object, twice)


def probe(template: ChatTemplate, tool_shape: str = "openai") -> Capabilities:
    caps = Capabilities()
    declared = set(template.undeclared_variables())
    caps.undeclared_variables = sorted(declared - STANDARD_VARIABLES)

    talk = Conversation(template, tool_shape, system_role=True)
    caps.system_role = _contains(talk.attempt(talk.prompt), samples.SYSTEM)
    talk.system_role = caps.system_role

    with_tools = talk.attempt(talk.prompt, tools=[samples.TOOL])
    caps.tools = _contains(with_tools, samples.FUNCTION)

    def call_message(*calls, content=""):
        return {"role": "assistant", "content": content, "tool_calls": list(calls)}

    def renders_call(message) -> str | None:
        return talk.attempt(talk.full, message, tools=[samples.TOOL])

    as_object = renders_call(call_message(samples.tool_call()))
    as_string = renders_call(call_message(samples.tool_call(as_string=True)))
    caps.object_arguments = _contains(as_object, samples.FUNCTION, samples.ARGUMENT_VALUE)
    caps.string_arguments = _contains(
        as_string, samples.FUNCTION, samples.ARGUMENT_VALUE
    ) and not _encoded_twice(as_string, as_object)
    caps.tool_calls = caps.object_arguments or caps.string_arguments
    string_args = not caps.object_arguments

    if caps.tool_calls:
        one = renders_call(call_message(samples.tool_call(as_string=string_args)))
        caps.tool_call_id = _contains(one, samples.CALL_ID)
        freeform = renders_call(
            call_message(
                samples.tool_call(call_id=samples.CALL_ID_FREEFORM, as_string=string_args)
            )
        )
        if freeform is None:
            # The template accepts our nine-alphanumeric id but not a free-form one.
            caps.tool_call_id_pattern = "[a-zA-Z0-9]{9}"
        two = renders_call(
            call_message(
                samples.tool_call(as_string=string_args),
                samples.tool_call(
                    samples.FUNCTION_2, samples.CALL_ID_2, as_string=string_args
                ),
            )
        )
        caps.parallel_tool_calls = _contains(two, samples.FUNCTION, samples.FUNCTION_2)
        null_content = renders_call(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [samples.tool_call(as_string=string_args)],
            }
        )
        # Some templates read content only where the turn is not the last one.
        null_then_result = talk.attempt(
            talk.template.render,
            talk.history()
            + [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [samples.tool_call(as_string=string_args)],
                },
                {
                    "role": "tool",
                    "tool_call_id": samples.CALL_ID,
                    "name": samples.FUNCTION,
                    "content": samples.TOOL_RESULT,
                },
            ],
            tools=talk.tools([samples.TOOL]),
        )
        caps.requires_non_null_content = (
            null_content is None
            or "None" in null_content
            or null_then_result is None
            or "None" in null_then_result
        )

    response = talk.attempt(
        talk.template.render,
        talk.history()
        + [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [samples.tool_call(as_string=string_args)],
            },
            {
                "role": "tool",
                "tool_call_id": samples.CALL_ID,
                "name": samples.FUNCTION,
                "content": samples.TOOL_RESULT,
            },
        ],
        tools=talk.tools([samples.TOOL]),
    )
    caps.tool_responses = _contains(response, samples.TOOL_RESULT)

    blocks = talk.attempt(
        talk.full,
        {"role": "assistant", "content": [{"type": "text", "text": samples.CONTENT}]},
    )
    caps.typed_content_blocks = _contains(blocks, samples.CONTENT) and (
        "'type'" not in blocks and '"type"' not in blocks
    )

    caps.reasoning_field = find_reasoning_field(talk)
    if caps.reasoning_field is None and caps.tool_calls:
        caps.reasoning_field = find_reasoning_field(
            talk, samples.tool_call(as_string=string_args)
        )

    on = talk.attempt(talk.prompt, enable_thinking=True)
    off = talk.attempt(talk.prompt, enable_thinking=False)
    caps.thinking_toggle = on is not None and off is not None and on != off
    return caps


def find_reasoning_field(talk: Conversation, call: dict | None = None) -> str | None:
    """The field the template reads reasoning from, in a turn with content (or, with
    ``call``, in a turn with that call: some templates show reasoning only there; a
    typed block there is too often printed with the text blocks to tell)."""
    candidates = list(REASONING_FIELDS)
    if call is None:
        candidates += [f"block:{block_type}/{key}" for block_type, key in REASONING_BLOCKS]
    tools = [samples.TOOL] if call else None
    shown = samples.FUNCTION if call else samples.CONTENT
    for name in candidates:
        message = reasoning_message(name, samples.REASONING, samples.CONTENT)
        if call:
            message["tool_calls"] = [call]
        for thinking in (True, False):
            render = talk.attempt(talk.full, message, enable_thinking=thinking, tools=tools)
            if not _contains(render, samples.REASONING, shown):
                continue
            if name.startswith("block:") and printed_blocks(render):
                continue  # the template printed our list, it did not read it
            return name
    return None


def printed_blocks(render: str) -> bool:
    """Whether the turn after our user message shows typed blocks printed as text
    (tool definitions before it may name types of their own). A template that shows no
    user text is read whole: a type a definition names counts, so it errs towards
    no typed block."""
    turn = render[max(render.rfind(samples.USER), 0) :]
    return "'type'" in turn or '"type"' in turn
