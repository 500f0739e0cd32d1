"""Reasoning: where a model's reasoning starts and ends, and whether the prompt opens it.

Evidence, strongest first:
1. an assistant turn rendered with reasoning: the text around our reasoning value gives
   the start and end markers (the end is what separates it from the content);
2. the prompts for ``enable_thinking`` on and off: a prompt that ends with the start
   marker leaves the model inside the reasoning block;
3. for templates whose history never shows reasoning, a prompt that ends in a marker
   and a closer of the same shape that the template cuts out of earlier turns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .. import samples
from ..conversation import Conversation
from ..diff import common_prefix_length, common_suffix_length, is_marker, tokens
from .observe import SETTINGS, Observation


@dataclass
class ReasoningResult:
    mode: str = "none"
    start: str | None = None
    end: str | None = None
    opened_by_prompt: dict = field(
        default_factory=lambda: {"thinking_on": False, "thinking_off": False}
    )
    content_start: str | None = None  # text between reasoning end and content
    evidence: list[str] = field(default_factory=list)

    def section(self) -> dict:
        return {
            "mode": self.mode,
            "start": self.start,
            "end": self.end,
            "opened_by_prompt": dict(self.opened_by_prompt),
        }


def _setting_key(thinking: bool) -> str:
    return "thinking_on" if thinking else "thinking_off"


def _solid_tokens(text: str) -> list[str]:
    return [token for token in tokens(text) if not token.isspace()]


def trailing_run(text: str, count: int) -> str:
    """The last ``count`` non-space tokens of ``text``, with what lies between them."""
    text = text.rstrip()
    pieces = tokens(text)
    taken = 0
    index = len(pieces)
    while index > 0 and taken < count:
        index -= 1
        if pieces[index].isspace():
            break
        taken += 1
    return "".join(pieces[index:]).strip() if taken else ""


def _last_marker(text: str) -> str:
    stripped = text.rstrip()
    pieces = tokens(stripped)
    return pieces[-1] if pieces and is_marker(pieces[-1]) else ""


def mirrored_opener(prompt_tail: str, end: str | None) -> str:
    """The opener at the end of ``prompt_tail``: as many tokens as the closer has
    (closers mirror their openers: ``<x>``/``</x>``, ``<|open|>x<|sep|>``/``<|close|>x<|sep|>``)."""
    if end:
        run = trailing_run(prompt_tail, len(_solid_tokens(end)))
        if run and run != end:
            return run
    return _last_marker(prompt_tail)


def closer_candidates(opener: str) -> list[str]:
    """Closers shaped like ``opener``; each is checked by rendering before use."""
    found = []
    if opener.startswith("<|") and opener.endswith("|>"):
        found.append("<|/" + opener[2:])
    if opener.startswith("<") and not opener.startswith("</"):
        found.append("</" + opener[1:].lstrip("|"))
        found.append("</" + opener[1:])
    if opener.startswith("[") and not opener.startswith("[/"):
        found.append("[/" + opener[1:])
    for old, new in (("START", "END"), ("BEGIN", "END"), ("Start", "End"), ("begin", "end"),
                     ("start", "end"), ("open", "close"), ("OPEN", "CLOSE")):
        if old in opener:
            found.append(opener.replace(old, new))
    unique = []
    for candidate in found:
        if candidate not in unique and candidate != opener:
            unique.append(candidate)
    return unique


def _cut_from_history(talk: Conversation, closer: str) -> bool:
    """Does the template cut the reasoning off a turn at ``closer``?"""
    message = {
        "role": "assistant",
        "content": samples.REASONING + closer + samples.CONTENT,
    }
    follow = {"role": "user", "content": samples.USER_2}
    for history in ([message], [message, follow]):
        render = talk.attempt(talk.template.render, talk.history() + history)
        if render and samples.CONTENT in render and samples.REASONING not in render:
            return True
    return False


def analyze(talk: Conversation, obs: Observation, content_closer: str = "") -> ReasoningResult:
    result = ReasoningResult()
    if not _from_reasoning_turns(obs, result, content_closer):
        if not _from_prompts_only(talk, obs, result):
            _from_empty_block(obs, result)
    if result.start is None and result.end is None:
        return result
    for thinking in SETTINGS:
        prompt_end = obs.prompt[thinking].rstrip()
        opened = False
        if result.start:
            opened = prompt_end.endswith(result.start)
        elif result.mode == "delimiter":
            opened = True
        result.opened_by_prompt[_setting_key(thinking)] = opened
    result.mode = _classify(result, obs)
    return result


def _classify(result: ReasoningResult, obs: Observation) -> str:
    if not result.start:
        return "delimiter"
    if any(result.opened_by_prompt.values()):
        return "forced_open"
    closed_block = re.compile(
        re.escape(result.start) + r"\s*" + re.escape(result.end or "") + r"\s*$"
    )
    if all(closed_block.search(obs.prompt[t]) for t in SETTINGS):
        return "forced_closed"
    return result.mode if result.mode != "none" else "tag"


def _from_reasoning_turns(
    obs: Observation, result: ReasoningResult, content_closer: str
) -> bool:
    for thinking in SETTINGS:
        turn = obs.reasoning[thinking]
        if turn is None:
            continue
        full = turn.full
        r_at = full.rfind(samples.REASONING)
        c_at = full.rfind(samples.CONTENT)
        if r_at < 0 or c_at < r_at:
            continue
        content_turn = obs.content[thinking]
        c_only = content_turn.full
        c_only_at = c_only.rfind(samples.CONTENT)
        output = turn.output
        if output is not None:
            before = full[len(turn.prompt) : r_at]
        else:
            shared = common_prefix_length(full, c_only)
            before = full[min(shared, r_at) : r_at]
        start = before.strip()
        between = full[r_at + len(samples.REASONING) : c_at].strip()
        if not between:
            continue  # reasoning printed into the content: nothing marks it

        # Where the content-only render starts its content: after the prompt when it
        # continues the prompt, else after what it shares with the reasoning render.
        if content_turn.output is not None:
            pre_content = c_only[len(content_turn.prompt) : c_only_at].strip()
        else:
            shared = common_prefix_length(full, c_only)
            pre_content = c_only[min(shared, c_only_at) : c_only_at].strip()

        # The closer is what separates reasoning from content, less any content opener
        # that the content-only turn shows as well.
        tail = common_suffix_length(between, pre_content)
        content_start = ""
        if 0 < tail < len(between) and not pre_content.endswith(between):
            content_start = between[len(between) - tail :].strip()
            end = between[: len(between) - tail].strip()
        elif content_closer and pre_content == between:
            # The content has an opener that mirrors its closer; what precedes it
            # closes the reasoning.
            content_start = trailing_run(between, len(_solid_tokens(content_closer)))
            end = between[: len(between) - len(content_start)].strip()
            if not end:
                end, content_start = between, ""
        else:
            end = between
        if not start:
            candidate = mirrored_opener(full[:r_at], end)
            header = c_only[:c_only_at].rstrip()
            if candidate and not header.endswith(candidate):
                start = candidate
        result.start = start or None
        result.end = end or None
        result.content_start = content_start or None
        result.mode = "tag" if start else "delimiter"
        result.evidence.append(
            f"reasoning turn (enable_thinking={thinking}): before={before!r} between={between!r}"
        )
        return True
    return False


def _from_prompts_only(
    talk: Conversation, obs: Observation, result: ReasoningResult
) -> bool:
    on, off = obs.prompt[True], obs.prompt[False]
    if off.startswith(on) and off != on:
        added = _solid_tokens(off[len(on) :])
        opener = _last_marker(on)
        if len(added) == 2 and added[1] in closer_candidates(added[0]):
            # Thinking off writes an empty block: its two markers are ours.
            result.start, result.end = added
            result.evidence.append(f"thinking off appends the empty block {added!r}")
            return True
        if opener and len(added) == 1 and added[0] in closer_candidates(opener):
            # Thinking off closes what thinking on leaves open.
            result.start, result.end = opener, added[0]
            result.evidence.append(f"thinking off appends {added[0]!r} to the prompt")
            return True
    if on.startswith(off) and off != on:
        opener = on[len(off) :].strip()
        if opener and is_marker(_solid_tokens(opener)[-1]):
            for closer in closer_candidates(opener):
                if _cut_from_history(talk, closer):
                    result.start, result.end = opener, closer
                    result.evidence.append(f"thinking on appends {opener!r}")
                    return True
    # The prompt ends in a marker for both settings and no turn shows reasoning.
    opener = _last_marker(on)
    if not opener or _last_marker(obs.base[True]) == opener:
        return False
    for closer in closer_candidates(opener):
        if _cut_from_history(talk, closer):
            result.start, result.end = opener, closer
            result.evidence.append(
                f"prompt ends with {opener!r}; earlier turns are cut at {closer!r}"
            )
            return True
    return False


def _from_empty_block(obs: Observation, result: ReasoningResult) -> bool:
    """A content-only turn that opens and at once closes a mirrored pair of markers
    before the content shows an empty reasoning block."""
    for thinking in SETTINGS:
        turn = obs.content[thinking]
        output = turn.output
        if output is None:
            continue
        before = output[: output.rfind(samples.CONTENT)].strip()
        pieces = _solid_tokens(before)
        if len(pieces) == 2 and pieces[1] in closer_candidates(pieces[0]):
            result.start, result.end = pieces
            result.evidence.append(f"content-only turn opens and closes {before!r}")
            return True
    return False
