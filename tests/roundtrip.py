"""DESIGN.md's round trip: the template is the oracle.

Render a conversation with the template, cut the model's part out of the render, parse
it with the generated parser, and compare the parsed message with the one rendered.
"""

from __future__ import annotations

import importlib
import json
import os
from dataclasses import dataclass

import yaml

from compiler.probe import reasoning_message
from compiler.render import ChatTemplate, RenderError, RenderInputs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECS = os.path.join(ROOT, "specs")

SYSTEM = "You are a helpful assistant."
USER = "What is six times seven?"


@dataclass(frozen=True)
class Kind:
    name: str
    content: str
    reasoning: str | None = None
    enable_thinking: bool = True


CONTENT_KINDS = (
    Kind("content", "The answer is 42."),
    Kind("content_thinking_off", "The answer is 42.", enable_thinking=False),
    Kind(
        "multiline_markup",
        'Here it is:\n\n```python\ndef f(x):\n    return {"a": [x, \'b\']}\n```\n'
        "<b>bold</b> & {braces} [brackets] \\ back\\slash\n- item one\n- item two",
    ),
    Kind("reasoning_content", "It is 42.", reasoning="Six sevens: 6*7 = 42. Check: 7*6."),
)


@dataclass
class Case:
    slug: str
    kind: Kind
    text: str  # what the model wrote
    full: str
    prefix: str
    message: dict


def load_spec(slug: str) -> dict:
    with open(os.path.join(SPECS, f"{slug}.yaml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def slugs() -> list[str]:
    if not os.path.isdir(SPECS):
        return []
    return sorted(name[:-5] for name in os.listdir(SPECS) if name.endswith(".yaml"))


def template_for(spec: dict) -> ChatTemplate | None:
    path = os.path.join(ROOT, spec["template"]["path"])
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        source = handle.read()
    inputs = spec["render_inputs"]
    return ChatTemplate(
        source,
        spec["template"]["path"],
        RenderInputs(inputs["bos_token"], inputs["eos_token"], inputs["variables"]),
    )


def history(spec: dict) -> list[dict]:
    user = {"role": "user", "content": USER}
    if spec["capabilities"]["system_role"]:
        return [{"role": "system", "content": SYSTEM}, user]
    return [user]


def message_for(spec: dict, kind: Kind) -> dict:
    if kind.reasoning is None:
        return {"role": "assistant", "content": kind.content}
    field = spec["capabilities"]["reasoning_field"]
    if field is None:
        return None
    return reasoning_message(field, kind.reasoning, kind.content)


def make_case(slug: str, kind: Kind) -> Case | None:
    """The case, or None when the template cannot express it."""
    spec = load_spec(slug)
    template = template_for(spec)
    if template is None:
        return None
    message = message_for(spec, kind)
    if message is None:
        return None
    try:
        prefix = template.render(
            history(spec), add_generation_prompt=True, enable_thinking=kind.enable_thinking
        )
        full = template.render(
            history(spec) + [message], enable_thinking=kind.enable_thinking
        )
    except RenderError:
        return None
    if not full.startswith(prefix):
        return None
    text = full[len(prefix) :]
    at = text.rfind(kind.content)
    if at < 0 or (kind.reasoning and kind.reasoning not in text):
        return None
    # Drop what the template writes after the content: the end of the turn.
    text = text[: at + len(kind.content)]
    return Case(slug, kind, text, full, prefix, message)


def module(slug: str):
    return importlib.import_module(f"generated.{slug}")


def check(case: Case) -> tuple[bool, str]:
    """(passed, explanation)."""
    parsed = module(case.slug).parse(case.text, enable_thinking=case.kind.enable_thinking)
    want_reasoning = (case.kind.reasoning or "").strip()
    got_reasoning = (parsed["reasoning_content"] or "").strip()
    if parsed["content"].strip() == case.kind.content.strip() and got_reasoning == want_reasoning:
        if parsed["tool_calls"] == []:
            return True, "equal"
    # A template that normalises the message passes when the parsed message renders
    # back to the same text.
    spec = load_spec(case.slug)
    template = template_for(spec)
    again = reasoning_message(
        spec["capabilities"]["reasoning_field"] if parsed["reasoning_content"] else None,
        parsed["reasoning_content"] or "",
        parsed["content"],
    )
    try:
        rerendered = template.render(
            history(spec) + [again], enable_thinking=case.kind.enable_thinking
        )
    except RenderError:
        rerendered = None
    if rerendered == case.full:
        return True, "re-renders identically"
    return False, json.dumps(
        {"text": case.text, "parsed": parsed, "expected": case.message}, ensure_ascii=False
    )
