"""Headers of turns, read off renders: the one the generation prompt ends with, and
those of the messages that may follow an assistant turn (user, tool, system).

The prompt's header is the text the model's output follows; an engine may hand the
parser its last marker with the output (``<|start|>assistant<|channel|>final…``),
which is then no part of the output (``prompt.ends_with``).

Where a template writes no marker of its own after a turn (GLM ends an answer with
nothing, the next message's ``<|user|>`` or ``<|observation|>`` follows), what a
model writes once its turn is over is the next message's header, and a server stops
there on the tokenizer's stop tokens. Without a tokenizer the spec knows no such
tokens; the template shows these headers, and the format model counts them as
end-of-turn strings then (``end_of_turn.next_headers``).
"""

from __future__ import annotations

import re

from .. import samples
from ..conversation import Conversation
from ..diff import common_prefix_length, common_suffix_length, is_marker, tokens
from ..probe import Capabilities
from ..render import BOS_PLACEHOLDER, EOS_PLACEHOLDER
from .evidence import Evidence, Render
from .observe import SETTINGS, Observation
from .reasoning import history_render, prompt_render

# A header longer than this is prose of the template's, no header.
LONG = 64


def prompt_ends(obs: Observation) -> tuple[list[str], list[Evidence]]:
    """What every generation prompt ends with (thinking on and off, with tools and
    without), from each marker in it on, the longest first; and the evidence. The
    header is what the prompt writes after the history; where the settings' headers
    differ, only the end they share counts."""
    headers = [
        obs.prompt[thinking][len(obs.base[thinking]) :]
        for thinking in SETTINGS
        if obs.prompt[thinking].startswith(obs.base[thinking])
    ]
    if not headers:
        return [], []
    shared = headers[0]
    for header in headers[1:]:
        shared = shared[len(shared) - common_suffix_length(shared, header) :]
    prompts = [obs.prompt[t] for t in SETTINGS] + [p for p in obs.prompt_tools.values() if p]
    found: list[str] = []
    at = 0
    for token in tokens(shared):
        tail = shared[at:].strip()
        if (
            is_marker(token)
            and tail
            and tail not in found
            and samples.probe_in(tail) is None
            and all(prompt.rstrip().endswith(tail) for prompt in prompts)
        ):
            found.append(tail)
        at += len(token)
    evidence = [
        Evidence(
            f"prompt.ends_with = {found!r}",
            f"every generation prompt ends with {found[0]!r}: an output that starts with"
            " it (or with its part from a later marker on) repeats the prompt",
            history_render(obs, True),
            prompt_render(obs, True),
        )
    ] if found else []
    return found, evidence


def following(talk: Conversation, caps: Capabilities, ends: list[str]) -> tuple[list[str], list[Evidence]]:
    """The first line of each header (user, then tool, then system: each once), and
    the evidence; ``ends``: what the analysis found ends a turn (the end-of-turn
    markers, those after calls, the content's closer, a message's end), which
    stands before a header and is no part of it."""
    answer = {"role": "assistant", "content": samples.CONTENT}
    followers: list[tuple[str, dict, dict, list | None]] = [
        ("user", answer, {"role": "user", "content": samples.USER_2}, None)
    ]
    if caps.tool_calls and caps.tool_responses:
        call = samples.tool_call(as_string=not caps.object_arguments)
        asks = {"role": "assistant", "content": "", "tool_calls": [call]}
        result = {
            "role": "tool",
            "tool_call_id": samples.CALL_ID,
            "name": samples.FUNCTION,
            "content": samples.USER_2,
        }
        followers.append(("tool", asks, result, [samples.TOOL]))
    if caps.system_role:
        followers.append(("system", answer, {"role": "system", "content": samples.USER_2}, None))
    found: list[str] = []
    evidence: list[Evidence] = []
    for role, turn, message, tools in followers:
        before = _render(talk, [turn], tools)
        after = _render(talk, [turn, message], tools)
        if before is None or after is None:
            continue
        if turn is answer:
            # The header follows the answer's content and what ends the turn.
            at = after.find(samples.CONTENT)
            at = at + len(samples.CONTENT) if at >= 0 else len(after)
        else:
            # The call's text ends where the render leaves the turn's own render,
            # after the call's value at least (a template may write the turn
            # otherwise where a message follows it).
            at = _back_over_shared(before, after, common_prefix_length(before, after), ends)
            if at < after.rfind(samples.ARGUMENT_VALUE) + len(samples.ARGUMENT_VALUE):
                continue
        header = _header(after, at, ends)
        if header is None or header in found:
            continue
        found.append(header)
        evidence.append(
            Evidence(
                f"end_of_turn.next_headers: {header!r}",
                f"a {role} message after an assistant turn opens with {header!r}",
                Render("history + assistant turn", before),
                Render(f"history + assistant turn + {role} message", after),
            )
        )
    return found, evidence


def _render(talk: Conversation, messages: list[dict], tools) -> str | None:
    """The history and ``messages`` rendered (no generation prompt), or None where
    the template refuses them (a turn with calls and content "" is tried with None)."""
    found = talk.attempt(talk.template.render, talk.history() + messages, tools=talk.tools(tools))
    if found is None and messages[0].get("content") == "":
        first = dict(messages[0], content=None)
        found = talk.attempt(
            talk.template.render, talk.history() + [first, *messages[1:]], tools=talk.tools(tools)
        )
    return found


def _header(after: str, at: int, ends: list[str]) -> str | None:
    """What ``after`` writes from ``at`` for its last message before that message's
    text, less what ends the turn: its first line, up to the start of a JSON value,
    or to whitespace or punctuation after a marker. None where that is no header:
    empty, long, with no marker (a word the answer itself may end with), or holding
    a value we gave."""
    stop = after.find(samples.USER_2, at)
    if stop < 0:
        return None
    head = after[at:stop].replace(BOS_PLACEHOLDER, "").replace(EOS_PLACEHOLDER, "")
    while True:
        stripped = head.lstrip()
        for end in ends:
            if end.strip() and stripped.startswith(end.strip()):
                stripped = stripped[len(end.strip()) :]
                break
        else:
            break
        head = stripped
    line, marked = "", False
    for token in tokens(head.strip()):
        if token in _VALUE_STARTS or "\n" in token:
            break
        if marked and not (is_marker(token) or _WORD.fullmatch(token)):
            break  # after a marker, whitespace or punctuation ends the header
        marked = marked or is_marker(token)
        line += token
    line = line.strip()
    if not any(map(is_marker, tokens(line))) or len(line) > LONG or samples.probe_in(line):
        return None
    return line


# Where a header's line gives way to the message's value (a tool result as JSON).
_VALUE_STARTS = ("{", "[", '"', "'")
_WORD = re.compile(r"\w+")


def _back_over_shared(before: str, after: str, at: int, ends: list[str]) -> int:
    """``at`` moved back over the markers right before it where both renders go on
    from it at once with other text (the shared beginning of two turns' headers),
    to the end of the turn: whitespace, other text or one of ``ends`` before them."""
    cores = tuple(end.strip() for end in ends if end.strip())
    if at >= len(before) or at >= len(after) or before[at].isspace() or after[at].isspace():
        return at
    for token in reversed(tokens(after[:at])):
        if not is_marker(token) or after.endswith(cores, 0, at):
            break
        at -= len(token)
    return at
