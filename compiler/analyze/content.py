"""Content: whether the content is wrapped in markers, and how a turn ends.

The content-only turn is compared with the reasoning analysis: what stands before our
content value, once an (empty) reasoning block is set aside, is a content opener; what
stands after it up to the end-of-turn marker is a content closer. The end-of-turn marker
is the one the template writes after the user's message too, where it writes one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .. import samples
from ..diff import common_prefix_length, markers_in, tokens
from ..render import BOS_PLACEHOLDER, EOS_PLACEHOLDER
from .evidence import Evidence, Render
from .observe import SETTINGS, Observation
from .reasoning import ReasoningResult, content_turn_render, history_render, prompt_render


@dataclass
class ContentResult:
    mode: str = "plain"
    start: str | None = None
    end: str | None = None
    end_of_turn: list[str] = field(default_factory=list)
    tokenizer_eos: bool = False
    # Per enable_thinking setting, whether the prompt ends with the opener (the model
    # starts inside the content); written only where one does.
    opened_by_prompt: dict = field(default_factory=dict)
    evidence: list[Evidence] = field(default_factory=list)
    review: list[dict] = field(default_factory=list)

    def section(self) -> dict:
        found: dict = {"mode": self.mode, "start": self.start, "end": self.end}
        if any(self.opened_by_prompt.values()):
            found["opened_by_prompt"] = {
                "thinking_on": self.opened_by_prompt[True],
                "thinking_off": self.opened_by_prompt[False],
            }
        return found


def _without_reasoning_block(text: str, reasoning: ReasoningResult) -> str:
    """``text`` less a leading empty reasoning block (or a lone closer) it may hold."""
    if reasoning.end is None:
        return text
    pattern = r"^\s*(?:%s)?\s*%s\s*" % (
        re.escape(reasoning.start) if reasoning.start else "",
        re.escape(reasoning.end),
    )
    return re.sub(pattern, "", text, count=1)


def _pre_content(obs: Observation, thinking: bool) -> tuple[str, str] | None:
    """(text before the content, text after it) in the model's output view."""
    turn = obs.content[thinking]
    output = turn.output
    if output is None:
        # The prompt is not a prefix; compare with the prompt as far as they agree.
        base = obs.base[thinking]
        if not turn.full.startswith(base):
            return None
        output = turn.full[len(base) :]
        header = obs.prompt[thinking][len(base) :] if obs.prompt[thinking].startswith(
            base
        ) else ""
        if header and output.startswith(header):
            output = output[len(header) :]
        else:
            return None
    at = output.rfind(samples.CONTENT)
    if at < 0:
        return None
    return output[:at], output[at + len(samples.CONTENT) :]


def _turn_tail(text: str, obs: Observation) -> str:
    """Cut ``text`` before the header of a next turn, where a render runs on into one."""
    heads = [m for m in markers_in(obs.base[True]) if m not in (BOS_PLACEHOLDER,)][:1]
    cut = len(text)
    for head in heads:
        at = text.find(head)
        if 0 < at < cut and text[:at].strip():
            cut = at
    return text[:cut]


def _user_tail(obs: Observation) -> str:
    base = obs.base[True]
    at = base.rfind(samples.USER)
    return base[at + len(samples.USER) :] if at >= 0 else ""


@dataclass
class Ending:
    """How a content turn ends: text that closes the content, then the end-of-turn."""

    closer: str = ""
    end_of_turn: str = ""
    tokenizer_eos: bool = False


def analyze_ending(obs: Observation) -> Ending:
    found = None
    for thinking in SETTINGS:
        found = _pre_content(obs, thinking)
        if found is not None:
            break
    if found is None:
        full = obs.content[True].full
        at = full.rfind(samples.CONTENT)
        after = full[at + len(samples.CONTENT) :] if at >= 0 else ""
    else:
        after = found[1]
    ending = Ending(tokenizer_eos=EOS_PLACEHOLDER in after)
    tail = after.replace(EOS_PLACEHOLDER, "\n").replace(BOS_PLACEHOLDER, "\n")
    user_tail = _user_tail(obs)
    user_markers = set(markers_in(user_tail))
    tokens_after = tokens(tail)
    # The end-of-turn marker is the longest run of tokens that the user's turn ends
    # with as well; what precedes it closes the content.
    best = None
    offset = 0
    for token in tokens_after:
        if token in user_markers:
            rest = tail[offset:]
            from_user = user_tail[user_tail.find(token) :]
            shared = rest[: common_prefix_length(rest, from_user)]
            if best is None or len(shared) > len(best[1]):
                best = (offset, shared)
        offset += len(token)
    if best is not None:
        at, shared = best
        shared = _turn_tail(shared.split("\n")[0] or shared, obs)
        ending.closer = tail[:at].strip()
        ending.end_of_turn = shared.strip()
        return ending
    stripped = tail.strip()
    markers = markers_in(stripped)
    before_eos = after.split(EOS_PLACEHOLDER)[0].strip()
    if ending.tokenizer_eos and before_eos and not after.strip().startswith(EOS_PLACEHOLDER):
        # The turn ends with the tokenizer's eos; what the template writes before it
        # closes the content (or, with no content opener, ends the turn).
        ending.closer = before_eos
        return ending
    if markers and stripped.startswith(markers[0]):
        ending.end_of_turn = markers[0]
    elif stripped and len(stripped) <= LONG and "\n" not in stripped:
        ending.end_of_turn = stripped
    elif stripped:
        # Longer than a marker token (or over several lines): the end of the turn is
        # still what the user's turn ends with too, however long (a marker over
        # LONG characters is then reported for review, not dropped).
        rest = tail.lstrip()
        from_user = user_tail.lstrip()
        shared = rest[: common_prefix_length(rest, from_user)].split("\n")[0].strip()
        ending.end_of_turn = _turn_tail(shared, obs).strip()
    return ending


LONG = 64


def analyze(obs: Observation, reasoning: ReasoningResult, ending: Ending) -> ContentResult:
    result = ContentResult()
    found = None
    for thinking in SETTINGS:
        found = _pre_content(obs, thinking)
        if found is not None:
            break
    before = found[0] if found is not None else ""
    opener = _without_reasoning_block(before, reasoning).strip()
    echoed = samples.probe_in(opener)
    if echoed is not None:
        # The turn repeats something we passed (the system message, say) before the
        # content: that is no marker, and the model writes its own text there. The
        # opener is what precedes it; the repeated text is read as content.
        opener = opener[: echoed[0]].strip()
        result.review.append(
            {
                "path": "content.start",
                "message": "the turn repeats text of the conversation (a message or a "
                "value given to the template) before the content: content.start is what "
                "precedes it, and the repeated text is read as part of the content",
            }
        )
    if reasoning.content_start and not opener:
        opener = reasoning.content_start
        result.mode = "wrapped_with_reasoning"
    if opener:
        result.start = opener
        if result.mode == "plain":
            result.mode = "always_wrapped"
    else:
        label = _label_with_tools(obs, reasoning)
        if label is not None:
            result.start, result.mode = label[0], "wrapped_with_tools"
            result.evidence.append(_label_evidence(obs, *label))
    if result.start and result.mode == "always_wrapped":
        result.opened_by_prompt = {
            thinking: obs.prompt[thinking].rstrip().endswith(result.start.strip())
            for thinking in SETTINGS
        }
    end_of_turn = ending.end_of_turn
    if ending.closer and result.start:
        result.end = ending.closer
    elif ending.closer:
        # A closer without an opener belongs to the end of the turn.
        end_of_turn = ending.closer + end_of_turn
    result.end_of_turn = [end_of_turn] if end_of_turn else []
    result.tokenizer_eos = ending.tokenizer_eos
    result.evidence.extend(_evidence(obs, thinking, before, result, ending))
    return result


def _label_with_tools(obs: Observation, reasoning: ReasoningResult) -> tuple[str, bool] | None:
    """(the text a content-only turn writes before the content where tools are given
    and nowhere else, the thinking setting that shows it), or None: an answer label
    written only with tools, which the content analysed without them never shows."""
    for thinking in SETTINGS:
        turn = obs.content_tools.get(thinking)
        output = turn.output if turn is not None else None
        at = output.rfind(samples.CONTENT) if output is not None else -1
        if at < 0:
            continue
        label = _without_reasoning_block(output[:at], reasoning).strip()  # type: ignore[index]
        if label and len(label) <= LONG and samples.probe_in(label) is None:
            return label, thinking
    return None


def _label_evidence(obs: Observation, label: str, thinking: bool) -> Evidence:
    turn = obs.content_tools[thinking]
    return Evidence(
        f"content.mode = 'wrapped_with_tools', content.start = {label!r}",
        f"without tools the turn writes nothing before the content; with tools, {label!r}",
        content_turn_render(obs, thinking),
        Render(
            f"history + assistant turn, content only, with tools (enable_thinking={thinking})",
            turn.full,
        ),
    )


def _evidence(
    obs: Observation, thinking: bool, before: str, result: ContentResult, ending: Ending
) -> list[Evidence]:
    # The content's markers come from the model's output view: the content-only turn
    # against the prompt, or against the bare history where the prompt is no prefix.
    if obs.content[thinking].output is not None:
        shown = prompt_render(obs, thinking)
    else:
        shown = history_render(obs, thinking)
    if result.mode == "wrapped_with_reasoning":
        why = (
            f"the content-only turn writes {before!r} before the content; after reasoning, "
            f"{result.start!r} opens it"
        )
    elif result.start:
        why = f"less any empty reasoning block, the turn writes {result.start!r} before content"
    elif before.strip():
        why = f"before the content the turn writes {before!r}: a reasoning block, no opener"
    else:
        why = "nothing stands before the content"
    if result.end:
        why += f"; {result.end!r} closes it"
    content = Evidence(
        f"content.mode = {result.mode!r}, content.start = {result.start!r}, "
        f"content.end = {result.end!r}",
        why,
        shown,
        content_turn_render(obs, thinking),
    )
    if ending.closer and not result.end:
        why = (
            f"after the content the turn writes {ending.closer!r}, then {ending.end_of_turn!r}: "
            "with no content opener, both end the turn"
        )
    elif ending.end_of_turn:
        why = f"after the content (and its closer) the turn ends with {ending.end_of_turn!r}"
    else:
        why = "after the content the turn writes no marker of its own"
    if ending.tokenizer_eos:
        why += "; the template writes the tokenizer's eos token there"
    end_of_turn = Evidence(
        f"end_of_turn.markers = {result.end_of_turn!r}, "
        f"end_of_turn.tokenizer_eos = {result.tokenizer_eos}",
        why,
        history_render(obs, thinking),
        content_turn_render(obs, thinking),
    )
    return [content, end_of_turn]
