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
from ..diff import common_prefix_length, common_suffix_length, is_marker, split, tokens
from .evidence import Evidence, Render
from .observe import SETTINGS, Observation


@dataclass
class ReasoningResult:
    mode: str = "none"
    start: str | None = None
    end: str | None = None
    opened_by_prompt: dict = field(
        default_factory=lambda: {"thinking_on": False, "thinking_off": False}
    )
    # The same for the prompt rendered with tools (None: not rendered).
    opened_with_tools: dict | None = None
    content_start: str | None = None  # text between reasoning end and content
    evidence: list[Evidence] = field(default_factory=list)

    def section(self) -> dict:
        found = {
            "mode": self.mode,
            "start": self.start,
            "end": self.end,
            "opened_by_prompt": dict(self.opened_by_prompt),
        }
        if self.opened_with_tools not in (None, self.opened_by_prompt):
            found["opened_with_tools"] = dict(self.opened_with_tools or {})
        return found


def _setting_key(thinking: bool) -> str:
    return "thinking_on" if thinking else "thinking_off"


# Labels of the renders evidence shows, so that every analyzer names them alike.
def history_render(obs: Observation, thinking: bool) -> Render:
    return Render(
        f"history, no generation prompt (enable_thinking={thinking})", obs.base[thinking]
    )


def prompt_render(obs: Observation, thinking: bool) -> Render:
    return Render(
        f"prompt: history + generation prompt (enable_thinking={thinking})",
        obs.prompt[thinking],
    )


def content_turn_render(obs: Observation, thinking: bool) -> Render:
    return Render(
        f"history + assistant turn, content only (enable_thinking={thinking})",
        obs.content[thinking].full,
    )


def _markers(result: "ReasoningResult") -> str:
    return f"reasoning.start = {result.start!r}, reasoning.end = {result.end!r}"


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
    elif opener.startswith("<|") and opener.endswith(">"):
        found.append("<" + opener[2:-1] + "|>")  # the bar moves to the other side
    if opener.startswith("<") and not opener.startswith("</"):
        found.append("</" + opener[1:].lstrip("|"))
        found.append("</" + opener[1:])
    if opener.startswith("[") and not opener.startswith("[/"):
        found.append("[/" + opener[1:])
    for old, new in (("START", "END"), ("BEGIN", "END"), ("Start", "End"), ("begin", "end"),
                     ("start", "end"), ("open", "close"), ("OPEN", "CLOSE"), ("prefix", "suffix")):
        if old in opener:
            found.append(opener.replace(old, new))
    unique = []
    for candidate in found:
        if candidate not in unique and candidate != opener:
            unique.append(candidate)
    return unique


def _cut_from_history(talk: Conversation, closer: str) -> str | None:
    """The render that shows the template cutting the reasoning off a turn at
    ``closer``, or None when it does not. (The render is the evidence.)"""
    message = {
        "role": "assistant",
        "content": samples.REASONING + closer + samples.CONTENT,
    }
    follow = {"role": "user", "content": samples.USER_2}
    for history in ([message], [message, follow]):
        render = talk.attempt(talk.template.render, talk.history() + history)
        if render and samples.CONTENT in render and samples.REASONING not in render:
            return render
    return None


def _cut_evidence(obs: Observation, closer: str, cut: str) -> Evidence:
    # _cut_from_history renders with the defaults, as obs.base[True] is rendered.
    return Evidence(
        f"reasoning.end = {closer!r}",
        f"an earlier assistant turn written as reasoning + {closer!r} + content renders "
        f"with its content only: the template cuts the reasoning at {closer!r}",
        history_render(obs, True),
        Render(f"history + earlier assistant turn 'reasoning{closer}content'", cut),
    )


def analyze(talk: Conversation, obs: Observation, content_closer: str = "") -> ReasoningResult:
    result = ReasoningResult()
    if not _from_reasoning_turns(obs, result, content_closer):
        if not _from_call_turns(obs, result):
            if not _from_prompts_only(talk, obs, result):
                _from_empty_block(obs, result)
    if result.start is None and result.end is None:
        result.evidence.append(_no_block_evidence(obs))
        return result
    for thinking in SETTINGS:
        prompt_end = obs.prompt[thinking].rstrip()
        opened = False
        opens_answer = False
        if result.start:
            opened = prompt_end.endswith(result.start)
            # The opener may open the answer too (a role separator after a role that
            # names the reasoning, or the answer): a prompt after which the answer
            # follows at once leads into the answer, not into the reasoning.
            opens_answer = opened and _opens_the_answer(obs, result.start, thinking)
            opened = opened and not opens_answer
        elif result.mode == "delimiter":
            # Where a turn with content only continues the prompt without the
            # delimiter, the history writes plain answers: text without it is content.
            # (A turn that does not continue the prompt: the prompt leads into it.)
            answer = obs.content[thinking].output
            opened = answer is None or (result.end or "") in answer
        result.opened_by_prompt[_setting_key(thinking)] = opened
        renders = (history_render(obs, thinking), prompt_render(obs, thinking))
        if opens_answer:
            why = (
                f"the prompt ends with {result.start!r}, which opens the answer as well: "
                "the turn with content only writes its content right after this prompt, "
                f"and the turn with reasoning writes {result.start!r} before its content too"
            )
            renders = (prompt_render(obs, thinking), content_turn_render(obs, thinking))
        elif result.start:
            why = f"the prompt {'ends' if opened else 'does not end'} with {result.start!r}"
        elif opened:
            why = "no marker opens the reasoning: the model starts inside it"
        else:
            why = (
                f"a turn with content only is the answer without {result.end!r}: no marker "
                "opens the reasoning, and text the delimiter does not end is content"
            )
            renders = (prompt_render(obs, thinking), content_turn_render(obs, thinking))
        result.evidence.append(
            Evidence(f"reasoning.opened_by_prompt.{_setting_key(thinking)} = {opened}", why, *renders)
        )
    _opened_with_tools(obs, result)
    result.mode = _classify(result, obs)
    result.evidence.append(
        Evidence(f"reasoning.mode = {result.mode!r}", _MODE_REASONS.get(result.mode, ""))
    )
    return result


def _opens_the_answer(obs: Observation, start: str, thinking: bool, tools: bool = False) -> bool:
    """Whether ``start``, which the prompt of this setting ends with, opens the answer
    there: the turn with content only continues that prompt with its content at once,
    and a turn with reasoning writes ``start`` right before its content too (a prompt
    that opens the reasoning and is followed by a bare answer in the history is read
    as opening it: the answer cannot be told from reasoning left open)."""
    turn = obs.content_tools.get(thinking) if tools else obs.content[thinking]
    answer = turn.output if turn is not None else None
    if answer is None or not answer.lstrip().startswith(samples.CONTENT):
        return False
    for setting in SETTINGS:
        turn = obs.reasoning[setting]
        if turn is None:
            continue
        at = turn.full.rfind(samples.CONTENT)
        if 0 <= turn.full.find(samples.REASONING) < at and turn.full[:at].rstrip().endswith(
            start.strip()
        ):
            return True
    return False


def _opened_with_tools(obs: Observation, result: ReasoningResult) -> None:
    """Whether the prompt rendered with tools opens the block, where that differs
    from the prompt without them (a template may open it only when no tools are
    given: then with tools an output without the opener is no reasoning)."""
    if not result.start or not all(obs.prompt_tools.get(t) for t in SETTINGS):
        return
    found = {}
    for thinking in SETTINGS:
        found[_setting_key(thinking)] = obs.prompt_tools[thinking].rstrip().endswith(
            result.start
        ) and not _opens_the_answer(obs, result.start, thinking, tools=True)
    result.opened_with_tools = found
    for thinking in SETTINGS:
        key = _setting_key(thinking)
        if found[key] != result.opened_by_prompt[key]:
            opened = found[key]
            result.evidence.append(
                Evidence(
                    f"reasoning.opened_with_tools.{key} = {opened}",
                    f"rendered with tools, the prompt {'ends' if opened else 'does not end'} "
                    f"with {result.start!r}; without them it "
                    f"{'does not' if opened else 'does'}",
                    prompt_render(obs, thinking),
                    Render(
                        f"prompt with tools: history + generation prompt "
                        f"(enable_thinking={thinking})",
                        obs.prompt_tools[thinking],
                    ),
                )
            )


def _no_block_evidence(obs: Observation) -> Evidence:
    for thinking in SETTINGS:
        turn = obs.reasoning[thinking]
        if turn is not None:
            return Evidence(
                "reasoning.mode = 'none'",
                "no marker stands between the reasoning and the content (or the turn drops "
                "the reasoning), and no prompt or content-only turn shows a block",
                content_turn_render(obs, thinking),
                Render(
                    f"history + assistant turn with reasoning (enable_thinking={thinking})",
                    turn.full,
                ),
            )
    return Evidence(
        "reasoning.mode = 'none'",
        "the template reads no reasoning field, and no prompt or content-only turn shows a block",
        prompt_render(obs, True),
        prompt_render(obs, False),
    )


# Why each mode follows from the decisions before it (no render of its own).
_MODE_REASONS = {
    "delimiter": "there is no start marker: reasoning runs from the output's start to the end",
    "forced_open": "a prompt ends with the start marker: the model begins inside the block",
    "forced_closed": "both prompts end with an empty block: it is closed before the model writes",
    "tag": "no prompt opens or closes the block: the model may write it or not",
    "tools_only": "the history shows reasoning only in turns with calls (a turn with content "
    "drops it); the block is read wherever the model writes it",
}


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
        why = f"the reasoning turn writes {before!r} before the reasoning and {between!r} after it"
        if content_start:
            why += f", of which {content_start!r} opens the content (as in the content-only turn)"
        result.evidence.append(
            Evidence(
                _markers(result),
                why,
                content_turn_render(obs, thinking),
                Render(
                    f"history + assistant turn with reasoning (enable_thinking={thinking})", full
                ),
            )
        )
        return True
    return False


def _from_call_turns(obs: Observation, result: ReasoningResult) -> bool:
    """Reasoning that the history shows only in a turn with calls: the markers around
    it in that turn, where the turn with the call alone writes none (or an empty
    block whose closer mirrors the opener)."""
    for thinking in SETTINGS:
        turn, plain = obs.reasoning_call.get(thinking), obs.call.get(thinking)
        if turn is None or plain is None:
            continue
        parts = split(plain.full, turn.full)
        r_in = parts.right.find(samples.REASONING)
        if r_in < 0 or parts.left.strip():
            continue
        r_at = len(parts.prefix) + r_in
        after = parts.right[r_in + len(samples.REASONING) :]
        output_at = len(turn.prompt) if turn.output is not None else len(parts.prefix)
        start = turn.full[min(output_at, r_at) : r_at].strip()
        end = after.strip()
        if not end:
            # The call alone writes the block empty: its closer is in the shared text.
            following = tokens(parts.suffix.lstrip())
            if following and following[0] in closer_candidates(start):
                end = following[0]
        if not start or not end or not _clean(start + end):
            continue
        result.start, result.end, result.mode = start, end, "tools_only"
        result.evidence.append(
            Evidence(
                _markers(result),
                f"a turn with a call writes {start!r} before the reasoning and {end!r} "
                "after it, where the turn with the call alone writes no reasoning",
                Render(f"history + assistant turn, one call (enable_thinking={thinking})",
                       plain.full),
                Render(
                    f"history + assistant turn, reasoning and one call "
                    f"(enable_thinking={thinking})",
                    turn.full,
                ),
            )
        )
        return True
    return False


def _clean(text: str) -> bool:
    return not any(probe in text for probe in samples.PROBE_STRINGS)


def _from_prompts_only(
    talk: Conversation, obs: Observation, result: ReasoningResult
) -> bool:
    on, off = obs.prompt[True], obs.prompt[False]
    gen_on, gen_off = on, off
    if not off.startswith(on):
        # The prompts may differ earlier too (a system line that turns thinking on):
        # compare what the generation prompt adds to each history.
        gen_on, gen_off = _generation_prompt(obs, True), _generation_prompt(obs, False)
    if gen_off.startswith(gen_on) and gen_off != gen_on:
        added = _solid_tokens(gen_off[len(gen_on) :])
        opener = _last_marker(gen_on)
        if 2 <= len(added) <= 3 and added[-1] in closer_candidates(added[0]):
            # Thinking off writes an empty block: its markers are ours (a word after
            # the opener names the block).
            tail = gen_off[len(gen_on) :].strip()
            result.start, result.end = tail[: -len(added[-1])].strip(), added[-1]
            result.evidence.append(
                Evidence(
                    _markers(result),
                    f"with thinking off the prompt ends with the empty block {tail!r}",
                    prompt_render(obs, True),
                    prompt_render(obs, False),
                )
            )
            return True
        if opener and len(added) == 1 and added[0] in closer_candidates(opener):
            # Thinking off closes what thinking on leaves open.
            result.start, result.end = opener, added[0]
            result.evidence.append(
                Evidence(
                    _markers(result),
                    f"both prompts end with {opener!r}; thinking off closes it with {added[0]!r}",
                    prompt_render(obs, True),
                    prompt_render(obs, False),
                )
            )
            return True
    if on.startswith(off) and off != on:
        opener = on[len(off) :].strip()
        if opener and is_marker(_solid_tokens(opener)[-1]):
            for closer in closer_candidates(opener):
                cut = _cut_from_history(talk, closer)
                if cut is not None:
                    result.start, result.end = opener, closer
                    result.evidence.append(
                        Evidence(
                            f"reasoning.start = {opener!r}",
                            f"thinking on appends {opener!r} to the prompt",
                            prompt_render(obs, False),
                            prompt_render(obs, True),
                        )
                    )
                    result.evidence.append(_cut_evidence(obs, closer, cut))
                    return True
    # The prompt ends in a marker for both settings and no turn shows reasoning.
    opener = _last_marker(on)
    if not opener or _last_marker(obs.base[True]) == opener:
        return False
    for closer in closer_candidates(opener):
        cut = _cut_from_history(talk, closer)
        if cut is not None:
            result.start, result.end = opener, closer
            result.evidence.append(
                Evidence(
                    f"reasoning.start = {opener!r}",
                    f"the generation prompt ends with the marker {opener!r}",
                    history_render(obs, True),
                    prompt_render(obs, True),
                )
            )
            result.evidence.append(_cut_evidence(obs, closer, cut))
            return True
    return False


def _generation_prompt(obs: Observation, thinking: bool) -> str:
    """What the generation prompt adds to the history ("" where it does not extend it)."""
    base, prompt = obs.base[thinking], obs.prompt[thinking]
    return prompt[len(base) :] if prompt.startswith(base) else ""


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
            result.evidence.append(
                Evidence(
                    _markers(result),
                    f"the content-only turn opens and at once closes {before!r} before content",
                    prompt_render(obs, thinking),
                    content_turn_render(obs, thinking),
                )
            )
            return True
    return False
