"""The thinking switch: which variables a template switches thinking with, which of
their values turns thinking on, and what the template does where a request gives
none (its default), each read off renders, never off a variable's name.

A variable is a thinking switch where toggling it changes the generation prompt, and
the renders say which of its two values thinks:

1. a turn rendered after the history shows its reasoning (before its answer) with one
   value and drops it with the other (the template's own ``thinking``, as Hermes 4's);
2. the turns rendered after each prompt continue it differently: with one value the
   reasoning follows the prompt at once (the prompt opened the block), or the turn
   writes its block after it, where with the other the answer follows at once (the
   prompt closed the block, or leads into the answer);
3. no turn continues a prompt (templates that drop past reasoning), but one prompt
   ends with a closer of a marker the other ends with, or of a marker just before it
   (an empty block): that value is off.

A variable whose toggling changes no generation prompt (one that keeps or drops past
thoughts, or marks a render for training) cannot change what the model writes: it is
no switch. Evidence that points both ways leaves the variable to review.

Where several variables switch (one that forces thinking on, one that skips it), each
is recorded with the values whose prompt equals the prompt of thinking on or off: a
value that renders as though none were given belongs to neither.

The default is read by rendering the generation prompt with every switch left
undefined: ``thinking_on`` or ``thinking_off`` where it equals that prompt,
``undecided`` where it equals neither or raises (the parser then reads an output both
ways: a reasoning block where its closer comes, an answer where none does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import samples
from ..conversation import Conversation
from ..diff import is_marker, tokens
from ..probe import NOT_SWITCHES, REASONING_FIELDS, reasoning_message
from ..render import ChatTemplate, RenderError, RenderLimitExceeded
from .evidence import Evidence, Render
from .reasoning import closer_candidates

ON, OFF, UNDECIDED = "thinking_on", "thinking_off", "undecided"

# The standard switch, tried first.
STANDARD = "enable_thinking"


@dataclass
class _Renders:
    """What one setting of the variables renders: the history alone and with the
    generation prompt, a turn with reasoning in each field a message may carry it in,
    and a turn with content only."""

    base: str
    prompt: str
    turns: dict[str, str | None]
    content: str | None


@dataclass
class SwitchResult:
    """``section``: capabilities.thinking_switch, None where the template has no switch;
    ``settings``: what a render sets for thinking on (True) and off (False), as
    ``ChatTemplate.thinking_switch`` takes it."""

    section: dict | None = None
    settings: dict[bool, dict[str, Any]] | None = None
    evidence: list[Evidence] = field(default_factory=list)
    review: list[dict] = field(default_factory=list)


def _render(talk: Conversation, setting: dict[str, Any]) -> _Renders | None:
    """The renders of one setting (every other switch left undefined); None where the
    history or the prompt is refused."""
    thinking = setting.get(STANDARD)
    extra = {name: value for name, value in setting.items() if name != STANDARD}
    history = talk.history()

    def render(messages: list[dict], prompt: bool = False) -> str | None:
        return talk.attempt(
            talk.template.render,
            messages,
            add_generation_prompt=prompt,
            enable_thinking=thinking,
            **extra,
        )

    base, prompt = render(history), render(history, prompt=True)
    if base is None or prompt is None:
        return None
    turns = {
        name: render(history + [reasoning_message(name, samples.REASONING, samples.CONTENT)])
        for name in REASONING_FIELDS
    }
    content = render(history + [{"role": "assistant", "content": samples.CONTENT}])
    return _Renders(base, prompt, turns, content)


def _reasoning_first(turn: str | None) -> bool:
    """Whether a turn shows its reasoning before its answer, as a model writes it (a
    template may also keep past thoughts after the answer: no switch of thinking)."""
    if turn is None:
        return False
    at = turn.find(samples.REASONING)
    return 0 <= at < turn.rfind(samples.CONTENT)


# Where a generation prompt leaves the model (_leads), ordered: more is more thinking.
INSIDE, BEFORE_BLOCK, IN_ANSWER = 2, 1, 0
_LEADS = {
    INSIDE: "inside the reasoning",
    BEFORE_BLOCK: "before a block it may write",
    IN_ANSWER: "in the answer",
}


def _leads(renders: _Renders) -> tuple[int, str] | None:
    """Where the generation prompt leaves the model, as a turn rendered after the
    history continues it, and that turn: INSIDE where a turn's reasoning follows the
    prompt at once, BEFORE_BLOCK where a turn writes something and then its reasoning,
    IN_ANSWER where the turn with content only writes its content at once; None where
    no turn continues the prompt."""
    prompt = renders.prompt
    for turn in renders.turns.values():
        if turn is None or not turn.startswith(prompt) or not _reasoning_first(turn):
            continue
        output = turn[len(prompt) :]
        before = output[: output.find(samples.REASONING)]
        return (INSIDE if not before.strip() else BEFORE_BLOCK), turn
    content = renders.content
    if content is not None and content.startswith(prompt):
        if content[len(prompt) :].lstrip().startswith(samples.CONTENT):
            return IN_ANSWER, content
    return None


# How much of a prompt's end is looked at for the markers it ends with.
_TAIL = 256


def _solid(text: str) -> list[str]:
    return [token for token in tokens(text) if not token.isspace()]


def _closes(prompt: str, other: str) -> bool:
    """Whether a prompt ends with a closer: of a marker it writes just before it (an
    empty block), or of the marker the other setting's prompt ends with (the block
    that one leaves open)."""
    mine = _solid(prompt[-_TAIL:])
    if not mine or not is_marker(mine[-1]):
        return False
    openers = [token for token in mine[-4:-1] if is_marker(token)]
    theirs = _solid(other[-_TAIL:])
    if theirs and is_marker(theirs[-1]):
        openers.append(theirs[-1])
    return any(mine[-1] in closer_candidates(opener) for opener in openers)


@dataclass
class _Vote:
    on: bool  # the value that turns thinking on
    why: str
    left: Render
    right: Render


def _shown_by(renders: dict[bool, _Renders], labels: dict[bool, str]) -> list[_Vote]:
    """Votes for the value with which a turn shows its reasoning first where the other
    value drops it, one per field a message may carry reasoning in."""
    votes = []
    for field_name in REASONING_FIELDS:
        for value in (True, False):
            shown = renders[value].turns[field_name]
            other = renders[not value].turns[field_name] or ""
            if shown is not None and _reasoning_first(shown) and samples.REASONING not in other:
                votes.append(
                    _Vote(
                        value,
                        f"a turn's reasoning ({field_name}) shows with {labels[value]} "
                        f"and is dropped with {labels[not value]}",
                        Render(f"history + turn with reasoning ({labels[not value]})", other),
                        Render(f"history + turn with reasoning ({labels[value]})", shown),
                    )
                )
    return votes


def _votes(name: str, on: _Renders, off: _Renders) -> list[_Vote]:
    """What the renders of ``name`` = True (``on``) and False (``off``) say about which
    value thinks (see the module's docstring)."""
    labels = {True: f"{name}=True", False: f"{name}=False"}
    renders = {True: on, False: off}
    votes = _shown_by(renders, labels)[:1]
    led_true, led_false = _leads(on), _leads(off)
    if led_true and led_false and led_true[0] != led_false[0]:
        value = led_true[0] > led_false[0]
        led = {True: led_true, False: led_false}
        votes.append(
            _Vote(
                value,
                f"after the prompt with {labels[value]} the model is "
                f"{_LEADS[led[value][0]]}, with {labels[not value]} "
                f"{_LEADS[led[not value][0]]}, as the turns rendered after each show",
                Render(f"history + turn ({labels[not value]})", led[not value][1]),
                Render(f"history + turn ({labels[value]})", led[value][1]),
            )
        )
    closes = {
        value: _closes(renders[value].prompt, renders[not value].prompt) for value in (True, False)
    }
    if closes[True] != closes[False]:
        value = closes[False]  # the value whose prompt leaves the block open
        votes.append(
            _Vote(
                value,
                f"the prompt with {labels[not value]} ends by closing the reasoning "
                f"block, the prompt with {labels[value]} does not",
                Render(f"prompt ({labels[not value]})", renders[not value].prompt),
                Render(f"prompt ({labels[value]})", renders[value].prompt),
            )
        )
    return votes


def _candidates(template: ChatTemplate) -> list[str]:
    """The variables a switch may be: enable_thinking, and the template's undeclared
    variables that are none of the standard inputs nor given as render inputs."""
    declared = set(template.undeclared_variables())
    others = sorted(declared - NOT_SWITCHES - set(template.inputs.variables) - {STANDARD})
    return [STANDARD, *others]


def _prompt_of(talk: Conversation, setting: dict[str, Any]) -> tuple[str | None, str]:
    """The prompt rendered with ``setting`` (other switches undefined), or None and
    why where the template refuses it."""
    thinking = setting.get(STANDARD)
    extra = {name: value for name, value in setting.items() if name != STANDARD}
    try:
        return (
            talk.template.render(
                talk.history(),
                add_generation_prompt=True,
                enable_thinking=thinking,
                **extra,
            ),
            "",
        )
    except RenderLimitExceeded:
        raise
    except RenderError as error:
        return None, str(error)


def analyze(template: ChatTemplate, tool_shape: str = "openai") -> SwitchResult:
    """Find the template's thinking switch; the template renders with it from then on
    (``template.thinking_switch``)."""
    template.thinking_switch = None  # (a template analysed again with other inputs)
    talk = Conversation(template, tool_shape, system_role=True)
    unset_prompt = talk.attempt(talk.prompt, enable_thinking=None)
    talk.system_role = unset_prompt is not None and samples.SYSTEM in unset_prompt
    result = SwitchResult()
    switches: list[tuple[str, bool, _Vote]] = []
    for name in _candidates(template):
        on, off = _render(talk, {name: True}), _render(talk, {name: False})
        if on is None or off is None or on.prompt == off.prompt:
            continue  # changes no generation prompt: not what the model is asked
        votes = _votes(name, on, off)
        if not votes:
            continue
        if len({vote.on for vote in votes}) > 1:
            result.review.append(
                {
                    "path": "capabilities.thinking_switch",
                    "message": f"{name!r} changes the generation prompt, but its renders "
                    "point both ways (" + "; ".join(vote.why for vote in votes) + "): "
                    "left out; add the switch by an override if it is one",
                }
            )
            continue
        switches.append((name, votes[0].on, votes[0]))
    if not switches:
        return result
    on_setting = {name: value for name, value, _ in switches}
    off_setting = {name: not value for name, value, _ in switches}
    on_prompt, _ = _prompt_of(talk, on_setting)
    off_prompt, _ = _prompt_of(talk, off_setting)
    if on_prompt is None or off_prompt is None or on_prompt == off_prompt:
        return result
    variables: dict[str, dict[str, Any]] = {}
    for name, value, vote in switches:
        found = {}
        for key, given, wanted in (
            (ON, value, on_prompt),
            (OFF, not value, off_prompt),
        ):
            if _prompt_of(talk, {name: given})[0] == wanted:
                found[key] = given
        if not found:
            continue  # it switches only together with the others
        variables[name] = found
        result.evidence.append(
            Evidence(
                f"capabilities.thinking_switch.variables.{name} = {found!r}",
                vote.why
                + "; "
                + " and ".join(
                    f"{name}={given} alone renders the prompt of {key.replace('_', ' ')}"
                    for key, given in found.items()
                ),
                vote.left,
                vote.right,
            )
        )
    if not variables:
        return result
    settings = {
        True: {name: found[ON] for name, found in variables.items() if ON in found},
        False: {name: found[OFF] for name, found in variables.items() if OFF in found},
    }
    default, evidence = _default(talk, settings, ", ".join(variables))
    result.evidence += evidence
    result.section = {"variables": variables, "default": default}
    result.settings = settings
    template.thinking_switch = settings
    return result


def _default(
    talk: Conversation, settings: dict[bool, dict[str, Any]], names: str
) -> tuple[str, list[Evidence]]:
    """The template's default, from the prompt rendered with every switch undefined,
    and the evidence: that prompt beside the setting's it equals (beside each where it
    equals neither)."""
    prompts = {value: _prompt_of(talk, settings[value])[0] or "" for value in (True, False)}
    unset, why = _prompt_of(talk, {})
    decision = "capabilities.thinking_switch.default = {!r}"
    without = Render(f"prompt without {names}", unset or "")
    for value, default in ((True, ON), (False, OFF)):
        if unset is not None and unset == prompts[value]:
            label = default.replace("_", " ")
            return default, [
                Evidence(
                    decision.format(default),
                    f"the prompt rendered without {names} is the prompt of {label}",
                    Render(f"prompt, {label}", prompts[value]),
                    without,
                )
            ]
    reason = (
        f"rendering the prompt without {names} raises ({why})"
        if unset is None
        else f"the prompt rendered without {names} is neither the prompt of thinking on nor "
        "that of thinking off"
    ) + (
        ": the parser reads an output both ways, as a reasoning block where its closer "
        "comes and as an answer where none does"
    )
    return UNDECIDED, [
        Evidence(
            decision.format(UNDECIDED),
            reason + f" (against thinking {'on' if value else 'off'})",
            Render(f"prompt, thinking {'on' if value else 'off'}", prompts[value]),
            without,
        )
        for value in (True, False)
    ]
