"""Analysis: one template in, the body of its format spec out.

Each analyzer compares chosen renders and returns its part; this module runs them in
order (capabilities, reasoning, content, tool calls; where no render shows a reasoning
block, the tag pairs a switch's prompt text names) and assembles the spec body. No marker
string of any model is written here or below: every marker comes out of a render.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import model, triggers
from ..conversation import Conversation
from ..probe import probe
from ..render import ChatTemplate
from . import content as content_analysis
from . import messages as messages_analysis
from . import headers as headers_analysis
from . import prose
from . import reasoning as reasoning_analysis
from . import switch as switch_analysis
from . import tools as tools_analysis
from .evidence import Evidence
from .observe import observe

LONG_MARKER = 64


@dataclass
class Analysis:
    body: dict
    evidence: list[Evidence] = field(default_factory=list)
    review: list[dict] = field(default_factory=list)


def analyze(template: ChatTemplate, tool_shape: str = "openai") -> Analysis:
    switch = switch_analysis.analyze(template, tool_shape)  # renders use it from here on
    caps = probe(template, tool_shape)
    caps.thinking_switch = switch.section
    talk = Conversation(template, tool_shape, system_role=caps.system_role)
    obs = observe(talk, caps)
    ending = content_analysis.analyze_ending(obs)
    reasoning = reasoning_analysis.analyze(talk, obs, ending.closer)
    content = content_analysis.analyze(obs, reasoning, ending)

    end_of_turn = [m for m in content.end_of_turn if m]
    tools = tools_analysis.analyze(
        talk, caps, (reasoning.start, reasoning.end), end_of_turn,
        (content.start, content.end) if content.mode != "plain" else (),
    )
    if tools.reasoning_block and reasoning.mode == "none":
        # Reasoning the template writes only in turns with calls.
        reasoning.mode = "tools_only"
        reasoning.start, reasoning.end = tools.reasoning_block
    if reasoning.mode == "none":
        _named_in_prompt(talk, reasoning, content, [*end_of_turn, *tools.preserved])
    tools_section = dict(tools.section)
    if tools_section["format"] != "none":
        tools_section["end_of_turn_after_calls"] = [
            m for m in tools.end_of_turn if m not in end_of_turn
        ]
    end_of_turn += _cut_ends(end_of_turn, tools_section.get("end_of_turn_after_calls") or [])
    messages, messages_evidence = messages_analysis.analyze(obs, reasoning, content.start, tools_section)
    ends = [
        *end_of_turn,
        *(tools_section.get("end_of_turn_after_calls") or []),
        content.end or "",
        (messages or {}).get("end") or "",
    ]
    next_headers, headers_evidence = headers_analysis.following(talk, caps, [e for e in ends if e])
    prompt_ends, prompt_evidence = headers_analysis.prompt_ends(obs)
    preserved = []
    for marker in (
        reasoning.start, reasoning.end, content.start, content.end, *end_of_turn,
        *tools.preserved,
    ):
        if marker and marker not in preserved:
            preserved.append(marker)
    # The word that opens the calls, or where another marker holds it (or nothing marks
    # a call) a pattern over the spec's call shape (compiler/triggers.py).
    other_markers = [reasoning.start, reasoning.end, content.start, content.end, *end_of_turn]
    calls = model.calls_model(tools_section, template.path)
    # Where the content is a unit of the turn, calls may also follow it.
    unit = model.content_as_unit(model.content_model(content.section(), template.path), calls)
    body = {
        "capabilities": caps.as_dict(),
        "reasoning": reasoning.section(),
        "content": content.section(),
        "tools": tools_section,
        "end_of_turn": {
            "markers": end_of_turn,
            "tokenizer_eos": content.tokenizer_eos,
            "next_headers": next_headers,
        },
        **({"messages": messages} if messages else {}),
        **({"prompt": {"ends_with": prompt_ends}} if prompt_ends else {}),
        "grammar": {
            "triggers": triggers.triggers(
                calls, other_markers, (content.start or "") if unit else ""
            ),
            "preserved_tokens": preserved,
        },
    }
    analysis = Analysis(
        body,
        switch.evidence
        + reasoning.evidence
        + content.evidence
        + tools.evidence
        + messages_evidence
        + headers_evidence
        + prompt_evidence,
    )
    analysis.review.extend(switch.review)
    analysis.review.extend(content.review)
    analysis.review.extend(tools.review)
    analysis.review.extend(_review(body))
    return analysis


def _named_in_prompt(
    talk: Conversation,
    reasoning: reasoning_analysis.ReasoningResult,
    content: content_analysis.ContentResult,
    markers: list[str],
) -> None:
    """Where no render shows a block, the tag pairs a switch's prompt text names
    (``prose``): the first the reasoning's, a second the answer's wrapper."""
    taken = {marker for marker in (*markers, content.start, content.end) if marker}
    named = prose.named_pairs(talk, taken)
    if named is None:
        return
    reasoning.mode = "tag"
    reasoning.start, reasoning.end = named.reasoning
    reasoning.evidence = [e for e in reasoning.evidence if not e.decision.startswith("reasoning.mode")]
    reasoning.evidence.append(named.evidence[0])
    if named.answer is not None and content.mode == "plain":
        content.mode = "wrapped_with_reasoning"
        content.start, content.end = named.answer
        content.evidence = [e for e in content.evidence if not e.decision.startswith("content.mode")]
        content.evidence.extend(named.evidence[1:])


def _cut_ends(end_of_turn: list[str], after_calls: list[str]) -> list[str]:
    """What is left of an end-of-turn marker that ends in another end-of-turn marker
    (of a turn with calls, or of this list) when the output stops before that one: a
    server that stops on it leaves the rest, which ends the turn too
    ('<|END_TEXT|>' of '<|END_TEXT|><|END_OF_TURN_TOKEN|>')."""
    cut: list[str] = []
    for marker in end_of_turn:
        for end in after_calls + end_of_turn:
            if end.strip() and end != marker and marker.endswith(end):
                head = marker[: len(marker) - len(end)].strip()
                if head and head not in end_of_turn + cut:
                    cut.append(head)
    return cut


def _strings(value, path=""):
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}.{index}")
    elif isinstance(value, str):
        yield path, value


def _review(body: dict) -> list[dict]:
    notes = []
    patterns = {
        f"grammar.triggers.{index}.value"
        for index, trigger in enumerate(body["grammar"]["triggers"])
        if trigger["type"] != "word"
    }
    for path, text in _strings(body):
        if path.startswith("capabilities.") or path in patterns:
            continue
        if len(text) > LONG_MARKER:
            notes.append(
                {
                    "path": path,
                    "message": f"marker of {len(text)} characters: it may have swallowed "
                    "template prose; check it against the template",
                }
            )
    return notes

