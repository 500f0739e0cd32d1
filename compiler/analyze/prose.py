"""Tag pairs that a switch's prompt text names, where no render shows a block.

A template may switch thinking on by adding words to the system prompt alone, which
tell the model the tags to write ("write your thoughts between <x></x> and your
response between <y></y>"): no turn it renders shows them, so the reasoning analysis
finds nothing. The text a variable adds is read off the generation prompt rendered
with it on and with it off; in that text, an opener followed at once by a closer of
its shape (``closer_candidates``), with nothing between them but whitespace or an
ellipsis, is a pair the template names. The first named holds the reasoning, as a model
writes it first; a second, the answer. More than two, or a pair that the prompt also
names with the switch off, is no such instruction and nothing is read.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import samples
from ..conversation import Conversation
from ..diff import is_marker, split, tokens
from ..probe import NOT_SWITCHES
from .evidence import Evidence, Render
from .reasoning import closer_candidates

# What may stand between an opener and its closer where prose names the pair.
_BETWEEN = ("", "...", "…")


@dataclass(frozen=True)
class NamedPairs:
    variable: str  # the variable whose text names them
    reasoning: tuple[str, str]
    answer: tuple[str, str] | None
    evidence: list[Evidence]


def named_pairs(talk: Conversation, taken: set[str]) -> NamedPairs | None:
    """The pairs the text one variable adds to the generation prompt names (none of
    them a marker in ``taken``, which the format uses already); None where no variable
    names one, or where two variables name different ones."""
    template = talk.template
    names = ["enable_thinking"] + sorted(
        set(template.undeclared_variables()) - NOT_SWITCHES - set(template.inputs.variables)
    )
    user = {"role": "user", "content": samples.USER}
    histories = [[user]]
    if talk.system_role:
        histories.append(talk.history())
    found: list[NamedPairs] = []
    for name in names:
        for history in histories:
            named = _named_by(talk, name, history, taken)
            if named is not None:
                found.append(named)
                break
    pairs = {(named.reasoning, named.answer) for named in found}
    return found[0] if len(pairs) == 1 else None


def _named_by(
    talk: Conversation, name: str, history: list[dict], taken: set[str]
) -> NamedPairs | None:
    def render(value: bool) -> str | None:
        switch = {"enable_thinking": value} if name == "enable_thinking" else {name: value}
        return talk.attempt(
            talk.template.render, history, add_generation_prompt=True, **switch
        )

    on, off = render(True), render(False)
    if on is None or off is None or on == off:
        return None
    added = split(off, on).right
    pairs = _pairs(added)
    if not pairs or len(pairs) > 2:
        return None
    markers = {marker for pair in pairs for marker in pair}
    if markers & taken or any(marker in off for marker in markers):
        return None
    system = "" if len(history) == 1 else "system message and "
    shown = (
        Render(f"prompt: {system}user message + generation prompt ({name}=False)", off),
        Render(f"prompt: {system}user message + generation prompt ({name}=True)", on),
    )
    reasoning = pairs[0]
    answer = pairs[1] if len(pairs) > 1 else None
    evidence = [
        Evidence(
            f"reasoning.start = {reasoning[0]!r}, reasoning.end = {reasoning[1]!r}, "
            "reasoning.mode = 'tag'",
            f"no render shows a reasoning block, but with {name} on the prompt adds text "
            f"that names {_listed(pairs)}: the first named holds the reasoning (a model "
            "writes it first), written where the model chooses",
            *shown,
        )
    ]
    if answer is not None:
        evidence.append(
            Evidence(
                f"content.mode = 'wrapped_with_reasoning', content.start = {answer[0]!r}, "
                f"content.end = {answer[1]!r}",
                f"the same text names {answer[0] + answer[1]!r} second: the answer's "
                "wrapper, read where it is written and not required",
                *shown,
            )
        )
    return NamedPairs(name, reasoning, answer, evidence)


def _pairs(text: str) -> list[tuple[str, str]]:
    """The openers in ``text`` followed at once by a closer of their shape, in the
    order named, each pair once."""
    pieces = tokens(text)
    found: list[tuple[str, str]] = []
    for at, piece in enumerate(pieces):
        if not is_marker(piece):
            continue
        closers = closer_candidates(piece)
        between = ""
        for later in pieces[at + 1 :]:
            if is_marker(later):
                if later in closers and between.strip() in _BETWEEN:
                    if (piece, later) not in found:
                        found.append((piece, later))
                break
            between += later
            if len(between) > 8:
                break
    return found


def _listed(pairs: list[tuple[str, str]]) -> str:
    return " and ".join(repr(opener + closer) for opener, closer in pairs)
