"""Builds the conversations the analysis renders, and renders them through the sandbox.

Every comparison the analyzers make is between two of these renders; keeping their
construction in one place keeps the variants honest (they differ in one thing only).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import samples
from .render import ChatTemplate, RenderError, RenderLimitExceeded


def to_tool_shape(tool: dict, shape: str) -> dict:
    """OpenAI's tool shape, or another one a template reads (declared per template)."""
    if shape == "openai":
        return tool
    function = tool["function"]
    if shape == "flat":
        return dict(function)
    if shape == "cohere":
        properties = function.get("parameters", {}).get("properties", {})
        required = function.get("parameters", {}).get("required", [])
        return {
            "name": function["name"],
            "description": function.get("description", ""),
            "parameter_definitions": {
                name: {
                    "description": field.get("description", ""),
                    "type": field.get("type", "string"),
                    "required": name in required,
                }
                for name, field in properties.items()
            },
        }
    raise ValueError(f"unknown tool shape {shape!r}")


@dataclass
class Conversation:
    template: ChatTemplate
    tool_shape: str = "openai"
    system_role: bool = True

    def history(self) -> list[dict]:
        if self.system_role:
            return [
                {"role": "system", "content": samples.SYSTEM},
                {"role": "user", "content": samples.USER},
            ]
        return [{"role": "user", "content": samples.USER}]

    def tools(self, tools: list[dict] | None) -> list[dict] | None:
        if tools is None:
            return None
        return [to_tool_shape(tool, self.tool_shape) for tool in tools]

    # enable_thinking: True or False as a request sets it; None: left undefined.
    def prompt(self, *, enable_thinking=True, tools=None) -> str:
        return self.template.render(
            self.history(),
            tools=self.tools(tools),
            add_generation_prompt=True,
            enable_thinking=enable_thinking,
        )

    def full(self, message: dict, *, enable_thinking=True, tools=None) -> str:
        return self.template.render(
            self.history() + [message],
            tools=self.tools(tools),
            add_generation_prompt=False,
            enable_thinking=enable_thinking,
        )

    def base(self, *, enable_thinking=True, tools=None) -> str:
        """The history alone, without a generation prompt."""
        return self.template.render(
            self.history(),
            tools=self.tools(tools),
            add_generation_prompt=False,
            enable_thinking=enable_thinking,
        )

    def attempt(self, render, *args, **kwargs) -> str | None:
        """A render that the template may refuse; ``None`` when it does."""
        try:
            return render(*args, **kwargs)
        except RenderLimitExceeded:
            raise  # a template that runs away does so for every variant: stop now
        except RenderError:
            return None  # includes TemplateRaised: the template refuses this variant
