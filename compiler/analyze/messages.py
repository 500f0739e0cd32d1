"""Messages: whether a turn is written as several messages, each with a header.

Where the reasoning block's end opens a new message as the generation prompt opens the
first one (the block's end ends with the prompt's own text), a turn is a sequence of
messages. The headers the format writes (the reasoning's opener, the content's, the
literal between a call's name and its arguments) then end alike: the marker they all
end with is the end of a message's header.
"""

from __future__ import annotations

from ..diff import markers_in
from .evidence import Evidence
from .observe import SETTINGS, Observation
from .reasoning import ReasoningResult, history_render, prompt_render


def _call_header(tools: dict) -> str | None:
    """The literal a tagged call writes between its name and its arguments."""
    parts = (tools.get("call") or {}).get("parts") or []
    holes = [part["hole"] for part in parts]
    if tools.get("format") != "tagged" or "name" not in holes:
        return None
    return parts[holes.index("name")]["after"]


def _opener(obs: Observation, reasoning: ReasoningResult, thinking: bool) -> str:
    """What the generation prompt of a setting writes to open the turn's first message:
    all it adds to the history, less the reasoning's opener where it opens the block
    too (a switch that forces thinking on)."""
    base, prompt = obs.base[thinking], obs.prompt[thinking]
    if not prompt.startswith(base):
        return ""
    opener = prompt[len(base) :].strip()
    if reasoning.start and opener.endswith(reasoning.start) and opener != reasoning.start:
        opener = opener[: -len(reasoning.start)].strip()
    return opener


def analyze(
    obs: Observation, reasoning: ReasoningResult, content_start: str | None, tools: dict
) -> tuple[dict | None, list[Evidence]]:
    """The spec's ``messages`` section (None where a turn is one message), and why."""
    if not reasoning.end:
        return None, []
    for thinking in SETTINGS:
        opener = _opener(obs, reasoning, thinking)
        if opener and reasoning.end.rstrip().endswith(opener):
            break
    else:
        return None, []
    headers = [text for text in (reasoning.start, content_start, _call_header(tools)) if text]
    ends = {(markers_in(text) or [""])[-1] for text in headers}
    if len(headers) < 2 or len(ends) != 1:
        return None, []
    (end,) = ends
    if not end or not all(text.rstrip().endswith(end) for text in headers):
        return None, []
    why = (
        f"the reasoning ends with {reasoning.end!r}, which opens a new message as the "
        f"prompt does ({opener!r}); the headers {headers!r} all end with {end!r}"
    )
    evidence = Evidence(
        f"messages.opener = {opener!r}, messages.header_end = {end!r}, messages.end = "
        f"{reasoning.end.rstrip()[: -len(opener)].strip() or None!r}",
        why,
        history_render(obs, thinking),
        prompt_render(obs, thinking),
    )
    ending = reasoning.end.rstrip()[: -len(opener)].strip() or None
    return {"opener": opener, "header_end": end, "end": ending}, [evidence]
