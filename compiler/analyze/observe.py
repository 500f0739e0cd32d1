"""The renders the reasoning and content analyzers share, made once per template.

For each ``enable_thinking`` setting we render the prompt (history plus generation
prompt) and the history followed by an assistant turn: content only, and content with
reasoning. Where the full render starts with the prompt, the remainder is exactly what
the model would have written; that "output" view is the one the parser will see.
Where the template renders calls, we also render, with tools, the prompt and a turn
with one call, without and with reasoning (some templates show reasoning only there).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import samples
from ..conversation import Conversation
from ..probe import Capabilities, printed_blocks, reasoning_message

SETTINGS = (True, False)


@dataclass
class Turn:
    """One assistant turn rendered after the history, for one thinking setting."""

    prompt: str
    full: str

    @property
    def output(self) -> str | None:
        """What the model wrote, if the render continues the prompt."""
        if self.full.startswith(self.prompt):
            return self.full[len(self.prompt) :]
        return None


@dataclass
class Observation:
    base: dict  # setting -> history rendered without a generation prompt
    prompt: dict  # setting -> history with the generation prompt
    content: dict  # setting -> Turn with content only
    reasoning: dict  # setting -> Turn with reasoning and content (None: no field)
    # setting -> Turn with one call, without and with reasoning (None: no calls, no
    # field, or refused); rendered with tools, after the prompt with tools.
    call: dict = field(default_factory=dict)
    reasoning_call: dict = field(default_factory=dict)
    prompt_tools: dict = field(default_factory=dict)  # setting -> prompt with tools
    # setting -> Turn with content only, rendered with tools after the prompt with
    # tools (None: refused); where the template takes tools.
    content_tools: dict = field(default_factory=dict)


def observe(talk: Conversation, caps: Capabilities) -> Observation:
    base, prompt, content, reasoning = {}, {}, {}, {}
    for thinking in SETTINGS:
        base[thinking] = talk.base(enable_thinking=thinking)
        prompt[thinking] = talk.prompt(enable_thinking=thinking)
        only = {"role": "assistant", "content": samples.CONTENT}
        content[thinking] = Turn(
            prompt[thinking], talk.full(only, enable_thinking=thinking)
        )
        if caps.reasoning_field is not None:
            message = reasoning_message(
                caps.reasoning_field, samples.REASONING, samples.CONTENT
            )
            full = talk.attempt(talk.full, message, enable_thinking=thinking)
            reasoning[thinking] = Turn(prompt[thinking], full) if full else None
        else:
            reasoning[thinking] = None
    found = Observation(base, prompt, content, reasoning)
    if caps.tools:
        _observe_content_with_tools(talk, found)
    if caps.tool_calls:
        _observe_calls(talk, caps, found)
    return found


def _observe_content_with_tools(talk: Conversation, found: Observation) -> None:
    tools = [samples.TOOL]
    only = {"role": "assistant", "content": samples.CONTENT}
    for thinking in SETTINGS:
        prompt = talk.attempt(talk.prompt, enable_thinking=thinking, tools=tools)
        full = talk.attempt(talk.full, only, enable_thinking=thinking, tools=tools)
        found.content_tools[thinking] = Turn(prompt, full) if prompt and full else None


def _observe_calls(talk: Conversation, caps: Capabilities, found: Observation) -> None:
    tools = [samples.TOOL]
    call = samples.tool_call(as_string=not caps.object_arguments)
    for thinking in SETTINGS:
        prompt = talk.attempt(talk.prompt, enable_thinking=thinking, tools=tools)
        found.prompt_tools[thinking] = prompt
        plain = {"role": "assistant", "content": "", "tool_calls": [call]}
        full = _call_turn(talk, plain, thinking)
        found.call[thinking] = Turn(prompt, full) if prompt and full else None
        found.reasoning_call[thinking] = None
        if caps.reasoning_field is not None:
            message = reasoning_message(caps.reasoning_field, samples.REASONING, "")
            message["tool_calls"] = [call]
            full = _call_turn(talk, message, thinking)
            printed = caps.reasoning_field.startswith("block:") and printed_blocks(full or "")
            if prompt and full and samples.REASONING in full and not printed:
                found.reasoning_call[thinking] = Turn(prompt, full)


def _call_turn(talk: Conversation, message: dict, thinking: bool) -> str | None:
    """The render of a turn with calls: with content "", or None where "" is refused."""
    tools = [samples.TOOL]
    full = talk.attempt(talk.full, message, enable_thinking=thinking, tools=tools)
    if full is None and message["content"] == "":
        message = dict(message, content=None)
        full = talk.attempt(talk.full, message, enable_thinking=thinking, tools=tools)
    return full
