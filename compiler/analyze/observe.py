"""The renders the reasoning and content analyzers share, made once per template.

For each ``enable_thinking`` setting we render the prompt (history plus generation
prompt) and the history followed by an assistant turn: content only, and content with
reasoning. Where the full render starts with the prompt, the remainder is exactly what
the model would have written; that "output" view is the one the parser will see.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import samples
from ..conversation import Conversation
from ..probe import Capabilities, reasoning_message

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
    return Observation(base, prompt, content, reasoning)
