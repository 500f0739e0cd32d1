"""Tool calls: how a model writes them, read off renders of assistant turns with calls.

The renders (all of the history plus one assistant turn, tools declared):

* ``empty``: no calls, empty content — the baseline the others are diffed against;
* ``one``: one call; ``two``: two calls (second name and id of the same length);
* ``wide``: one call with two string arguments; ``typed``/``flag``: the second
  argument an integer / a boolean.

``one`` against ``two`` splits the calls' block into section head, call, separator
and section tail (``repeat.py``). The call is then either a JSON value that holds the
name and the arguments (``json`` format: the analysis records the field paths), or
text with holes (``tagged`` format): literals around the name, the id, a call index,
and the arguments — a JSON value, or a list of key/value units whose shape ``one``
against ``wide`` gives. No marker of any model is written here: every literal in the
spec is a slice of a render.
"""

from __future__ import annotations

import ast
import itertools
import json
import re
from dataclasses import dataclass, field

from .. import samples
from ..conversation import Conversation
from ..diff import common_prefix_length, markers_in, split
from ..probe import Capabilities
from ..render import BOS_PLACEHOLDER, EOS_PLACEHOLDER
from . import literal
from .evidence import Evidence, Render
from .reasoning import closer_candidates, trailing_run
from .repeat import repeated

ARGS = {samples.ARGUMENT: samples.ARGUMENT_VALUE}
WIDE = {samples.ARGUMENT: samples.ARGUMENT_VALUE, samples.ARGUMENT_2: samples.ARGUMENT_VALUE_2}
NUMBER = 7531
TYPED = {samples.ARGUMENT: samples.ARGUMENT_VALUE, samples.ARGUMENT_2: NUMBER}
FLAG = {samples.ARGUMENT: samples.ARGUMENT_VALUE, samples.ARGUMENT_2: True}
# Calls whose arguments hold a string, a null, the booleans, a number and a nested
# object: how the template writes each (``_python_keywords``).
KEYWORD_PROBES = (
    {samples.ARGUMENT: samples.ARGUMENT_VALUE, samples.ARGUMENT_2: None},
    {samples.ARGUMENT: False, samples.ARGUMENT_2: True},
    {
        samples.ARGUMENT: samples.ARGUMENT_VALUE,
        samples.ARGUMENT_2: {
            samples.ARGUMENT: [None, True, False, NUMBER],
            samples.ARGUMENT_2: samples.ARGUMENT_VALUE_2,
        },
    },
)
# The quotes a Python string may be written between.
PYTHON_QUOTES = ("'", '"')
# Stands for the argument's key in a value suffix that repeats it.
KEY_SLOT = "{key}"


class NotUnderstood(Exception):
    """The renders do not fit any shape this analysis knows; the spec says so."""


@dataclass
class ToolsResult:
    section: dict = field(default_factory=lambda: {"format": "none"})
    end_of_turn: list[str] = field(default_factory=list)
    preserved: list[str] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    review: list[dict] = field(default_factory=list)
    # An empty reasoning block that only turns with calls write: (start, end).
    reasoning_block: tuple[str, str] | None = None


@dataclass
class _Renders:
    talk: Conversation
    string_arguments: bool

    def turn(self, *calls: dict, content="") -> str | None:
        message = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = list(calls)
        tools = samples.TOOLS_WIDE
        found = self.talk.attempt(self.talk.full, message, tools=tools)
        if found is None and content == "":
            message["content"] = None
            found = self.talk.attempt(self.talk.full, message, tools=tools)
        if found is None and not calls:
            # A template that refuses an empty turn: the history alone is the baseline.
            found = self.talk.attempt(self.talk.base, tools=tools)
        return found

    def call(self, name=samples.FUNCTION, call_id=samples.CALL_ID, arguments=None) -> dict:
        return samples.tool_call(
            name, call_id, as_string=self.string_arguments, arguments=arguments or ARGS
        )


def analyze(
    talk: Conversation,
    caps: Capabilities,
    reasoning_markers=(),
    end_of_turn=(),
    content_markers=(),
) -> ToolsResult:
    """``reasoning_markers``: the reasoning block's start and end, when known (a turn
    may open with an empty block before its calls); ``end_of_turn``: the markers that
    end a content turn; ``content_markers``: the content's wrapper, when it has one (a
    turn may write it empty before its calls)."""
    if not caps.tool_calls:
        return ToolsResult()
    try:
        return _analyze(talk, caps, reasoning_markers, end_of_turn, content_markers)
    except NotUnderstood as problem:
        result = ToolsResult()
        result.review.append(
            {
                "path": "tools",
                "message": f"the template renders tool calls, but the analysis could not "
                f"read their format ({problem}); describe it with an override",
            }
        )
        return result


def _analyze(talk, caps, reasoning_markers, end_of_turn, content_markers) -> ToolsResult:
    renders = _Renders(talk, not caps.object_arguments)
    empty = renders.turn()
    one = renders.turn(renders.call())
    if empty is None or one is None:
        raise NotUnderstood("a turn with one call does not render")
    result = ToolsResult()
    prompt = talk.prompt(tools=samples.TOOLS_WIDE)
    block = _calls_block(prompt, empty, one, reasoning_markers)
    result.evidence.append(
        Evidence(
            "tools: the calls' block",
            "what a turn with one call writes where an empty turn writes nothing",
            Render("assistant turn, empty content", empty),
            Render("assistant turn, one call", one),
        )
    )

    head, unit, separator, tail, second = "", block, "", "", None
    two = renders.turn(renders.call(), renders.call(samples.FUNCTION_2, samples.CALL_ID_2))
    if caps.parallel_tool_calls and two is not None:
        both = _calls_block(prompt, empty, two, reasoning_markers)
        found = repeated(block, both, same=_second_as_first)
        if found is not None:
            head, unit, separator, tail = found.head, found.unit, found.separator, found.tail
            second = found.second
            result.evidence.append(
                Evidence(
                    f"tools.call.separator = {separator!r}",
                    "two calls repeat the one call's text; what lies between is the separator",
                    Render("assistant turn, one call", one),
                    Render("assistant turn, two calls", two),
                )
            )
    head, reasoning_block = _leading_empty_block(head)
    if not head.strip() and reasoning_block is None:
        unit, reasoning_block = _leading_empty_block(unit)  # one call: no head of its own
    head = _without_empty_content(head, content_markers)
    replaced = split(empty, one).left
    section_end, after_calls = _split_tail(head, tail, end_of_turn, replaced)
    for shared in _shared_end(replaced, end_of_turn):
        if shared not in after_calls:
            after_calls.append(shared)
    shape = _json_call(unit) or _tagged_call(
        unit, second, renders, (prompt, reasoning_markers), result
    )
    section = {"format": shape.pop("format")}
    start = head.strip()
    if start or section_end:
        section["section"] = {"start": start or None, "end": section_end or None}
    section.update(shape)
    section["call"]["separator"] = separator
    mixed = _content_after_calls(renders, end_of_turn)
    if mixed is not None:
        section["content_after_calls"] = True
        result.evidence.append(
            Evidence(
                "tools.content_after_calls = true",
                "a turn with content and a call writes the content after the call",
                Render("assistant turn, one call", one),
                Render("assistant turn, content and one call", mixed),
            )
        )
    else:
        section.update(_content_with_calls(renders, one, prompt, section, end_of_turn, result))
    result.section = section
    result.end_of_turn = after_calls
    result.reasoning_block = reasoning_block
    result.preserved = _unique(m for m in markers_in(head + unit + tail) if _clean(m))
    _check_clean(section)
    return result


def _second_as_first(text: str) -> str:
    return text.replace(samples.FUNCTION_2, samples.FUNCTION).replace(
        samples.CALL_ID_2, samples.CALL_ID
    )


def _clean(text: str) -> bool:
    return not any(
        probe in text
        for probe in samples.PROBE_STRINGS + (BOS_PLACEHOLDER, EOS_PLACEHOLDER)
    )


def _check_clean(value, path="tools") -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _check_clean(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_clean(item, f"{path}.{index}")
    elif isinstance(value, str) and not _clean(value):
        raise NotUnderstood(f"{path} would hold a probe value")


def _unique(items) -> list:
    seen = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return seen


def _calls_block(prompt: str, empty: str, turn: str, reasoning_markers) -> str:
    """The part of ``turn`` that writes its calls, as the model writes it: from where
    the model's output begins (after the prompt) or where ``turn`` leaves ``empty``,
    whichever is later, to where it rejoins ``empty``. Text the model writes before
    its calls that the empty turn writes too (a header naming the recipient) belongs
    to the calls; an empty reasoning block does not."""
    parts = split(empty, turn)
    start = len(parts.prefix)
    end = len(turn) - len(parts.suffix)
    output_at = common_prefix_length(prompt, turn)
    opener, closer = reasoning_markers if len(reasoning_markers) == 2 else (None, None)
    if output_at >= start:
        return _after_empty_block(turn[output_at:end], opener, closer)
    lead = turn[output_at:start]
    if lead.strip() and prompt.rstrip().endswith(lead.strip()):
        # What the generation prompt itself ends with, where the turn's render does not
        # continue the prompt (Command R+ writes a system turn after the conversation,
        # and the assistant's header after that): the model's output follows it.
        return turn[start:end]
    if opener and closer and opener in lead and closer in lead:
        lead = lead[lead.rfind(closer) + len(closer) :]
    elif closer and closer in lead:
        lead = lead[lead.rfind(closer) + len(closer) :]
    if lead.strip() and _clean(lead):
        return lead + turn[start:end] + _lead_closer(lead, turn[end:])
    return turn[start:end]


def _lead_closer(lead: str, rest: str) -> str:
    """The closer of the last marker of ``lead`` (text before the calls that the empty
    turn writes too) where ``rest``, what both turns write after the calls, starts
    with it: an empty turn that writes the section's opener writes its closer too."""
    marks = markers_in(lead)
    for closer in closer_candidates(marks[-1]) if marks else ():
        if rest.startswith(closer):
            return closer
    return ""


def _after_empty_block(text: str, opener: str | None, closer: str | None) -> str:
    """``text`` less the empty reasoning block (``opener``, ``closer``, whitespace
    around them) that a turn with calls writes before them."""
    if opener and closer:
        inner = text.lstrip()
        if inner.startswith(opener) and inner[len(opener) :].lstrip().startswith(closer):
            return inner[len(opener) :].lstrip()[len(closer) :].lstrip()
    return text


def _leading_empty_block(head: str) -> tuple[str, tuple[str, str] | None]:
    """A head that opens and at once closes a pair of markers before the calls (an
    empty reasoning block written only in turns with calls)."""
    marks = markers_in(head)
    if len(marks) >= 2 and marks[1] in closer_candidates(marks[0]):
        rest = _after_empty_block(head, marks[0], marks[1])
        if rest != head:
            return rest, (marks[0], marks[1])
    return head, None


def _content_after_calls(renders, end_of_turn) -> str | None:
    """The render of a turn with content and a call, where it writes the content
    after the call in the same turn (DeepSeek R1 writes it after the turn's end, as a
    turn of its own: not content the model writes after its calls); else None."""
    mixed = renders.turn(renders.call(), content=samples.CONTENT)
    if mixed is None:
        return None
    call, content = mixed.rfind(samples.FUNCTION), mixed.rfind(samples.CONTENT)
    if not 0 <= call < content:
        return None
    between = mixed[call:content]
    return None if any(marker and marker in between for marker in end_of_turn) else mixed


def _content_with_calls(renders, one, prompt, section, end_of_turn, result) -> dict:
    """Where a turn with content and a call writes the content, where that is not
    before the calls in the same turn: inside the section, between its opener and
    the first call (``content_in_section``), or in a turn of its own that the
    template ends and follows with a new one for the calls (``turn_break``: what it
    writes between the content and the calls, the end-of-turn marker first and then
    the header the generation prompt opens a turn with). Read off where the content
    goes in the turn with one call; {} where it goes before the calls."""
    mixed = renders.turn(renders.call(), content=samples.CONTENT)
    if mixed is None:
        return {}
    parts = split(one, mixed)
    if parts.left.strip() or parts.right.count(samples.CONTENT) != 1:
        return {}
    at = parts.right.find(samples.CONTENT)
    before, after = parts.right[:at], parts.right[at + len(samples.CONTENT) :]
    point = len(parts.prefix)  # where the content goes in the turn with one call
    lead, follow = one[common_prefix_length(prompt, one) : point], one[point:].lstrip()
    opener = ((section.get("section") or {}).get("start") or "").strip()
    start = section["call"]["start"].strip()
    shown = (Render("assistant turn, one call", one), Render("assistant turn, content and one call", mixed))
    if opener and start and not (before + after).strip():
        if lead.rstrip().endswith(opener) and follow.startswith(start):
            result.evidence.append(
                Evidence(
                    "tools.content_in_section = true",
                    f"a turn with content and a call writes the content after {opener!r},"
                    f" before the call's {start!r}",
                    *shown,
                )
            )
            return {"content_in_section": True}
    between = after.strip()
    if not (between and _clean(between) and follow.startswith(opener or start)):
        return {}
    base = renders.talk.attempt(renders.talk.base, tools=samples.TOOLS_WIDE) or ""
    header = prompt[len(base) :] if prompt.startswith(base) else ""
    for marker in end_of_turn:
        reopen = between[len(marker) :].strip()
        if marker and between.startswith(marker) and reopen and reopen in header:
            result.evidence.append(
                Evidence(
                    f"tools.turn_break = {between!r}",
                    f"a turn with content and a call ends with {marker!r} after the content"
                    f" and opens a new turn ({reopen!r}, as the generation prompt does)"
                    " for the call",
                    *shown,
                )
            )
            return {"turn_break": between}
    return {}


def _without_empty_content(head: str, content_markers) -> str:
    """The head less an empty content block written before the calls (Kimi K3 writes
    ``<|open|>response<|sep|><|close|>response<|sep|>`` when the content is empty):
    those are the content's markers, and content may fill them."""
    start, end = (tuple(content_markers) + ("", ""))[:2]
    text = head.lstrip()
    if start and end and text.startswith(start) and text[len(start) :].lstrip().startswith(end):
        rest = text[len(start) :].lstrip()[len(end) :]
        if rest.strip():
            return rest
    return head


def _split_tail(head: str, tail: str, end_of_turn, replaced: str) -> tuple[str, list[str]]:
    """The section's closing marker, and the end-of-turn marker(s) a turn with calls
    writes where a content turn writes its usual one."""
    text = tail.replace(EOS_PLACEHOLDER, "").strip()
    for marker in end_of_turn:
        if marker and text.endswith(marker):
            text = text[: len(text) - len(marker)].strip()
    if not text:
        return "", []
    candidates = []
    for count in (3, 2, 1):
        run = trailing_run(head, count)
        if run:
            candidates += closer_candidates(run)
    for closer in candidates:
        at = text.find(closer)
        if at >= 0:
            at += len(closer)
            return text[:at].strip(), _first_marker(text[at:])
    marks = markers_in(text)
    if not head.strip():
        # No section: what follows the last call ends the turn.
        return "", _first_marker(text)
    if marks and text.endswith(marks[-1]) and (replaced.strip() or text == marks[-1]):
        # The turn with calls ends in its own marker where a content turn writes
        # another one.
        return text[: len(text) - len(marks[-1])].strip(), [marks[-1]]
    return text, []


def _shared_end(replaced: str, end_of_turn) -> list[str]:
    """The end of an end-of-turn marker that a turn with calls writes too, outside
    what differs between the two turns: where a content turn's own text ends with
    the first markers of a combined end-of-turn marker (Command R writes
    <|END_TEXT|> where a turn with calls writes <|END_ACTION|>; both then write
    <|END_OF_TURN_TOKEN|>)."""
    own = replaced.strip()
    shared = []
    for marker in end_of_turn:
        marks = markers_in(marker)
        if "".join(marks) != marker:
            continue
        for cut in range(1, len(marks)):
            if own.endswith("".join(marks[:cut])):
                shared.append("".join(marks[cut:]))
                break
    return shared


def _first_marker(text: str) -> list[str]:
    text = text.strip()
    marks = markers_in(text)
    if marks and text.startswith(marks[0]) and _clean(marks[0]):
        return [marks[0]]
    return [text] if text and _clean(text) and "\n" not in text else []


# -- a call written as one JSON value -------------------------------------------------


def _json_call(unit: str) -> dict | None:
    for at, char in enumerate(unit):
        if char not in "{[":
            continue
        end = literal.value_end(unit, at)
        if end < 0:
            continue
        found = literal.read(unit[at:end])
        if found is None:
            continue
        value, style = found
        if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
            continue  # the array around a lone call: read the object inside it
        if not isinstance(value, dict):
            continue
        fields = _json_fields(value)
        if fields is None:
            continue
        return {
            "format": "json",
            "call": {"start": unit[:at], "end": unit[end:]},
            "json": {**fields, "literal": style},
        }
    return None


def _path_of(value, wanted, path=()) -> tuple | None:
    if value == wanted and path:
        return path
    if isinstance(value, dict):
        for key, item in value.items():
            found = _path_of(item, wanted, path + (key,))
            if found:
                return found
    return None


def _json_fields(call: dict) -> dict | None:
    if samples.FUNCTION in call and call[samples.FUNCTION] == ARGS:
        return {"name": None, "arguments": None, "id": None, "name_is_key": True}
    name = _path_of(call, samples.FUNCTION)
    if name is None:
        return None
    arguments = _path_of(call, ARGS)
    as_string = False
    if arguments is None:
        arguments = _string_arguments_path(call)
        as_string = arguments is not None
    if arguments is None:
        return None
    call_id = _path_of(call, samples.CALL_ID)
    known = [path for path in (name, arguments, call_id) if path]
    return {
        "name": ".".join(name),
        "arguments": ".".join(arguments),
        "id": ".".join(call_id) if call_id else None,
        "name_is_key": False,
        "arguments_as_string": as_string,
        "other_fields": [".".join(path) for path in _other_fields(call, known)],
    }


def _other_fields(value: dict, known: list, prefix: tuple = ()) -> list:
    """The members the template writes in a call object beside its name, arguments
    and id (an index, a type): a model's call holding any member outside these is
    not one the template writes."""
    found = []
    for key, item in value.items():
        path = prefix + (key,)
        if path in known:
            continue
        if isinstance(item, dict) and any(whole[: len(path)] == path for whole in known):
            found += _other_fields(item, known, path)
        else:
            found.append(path)
    return found


def _string_arguments_path(value, path=()) -> tuple | None:
    if isinstance(value, str):
        found = literal.read(value)
        return path if found and found[0] == ARGS else None
    if isinstance(value, dict):
        for key, item in value.items():
            found = _string_arguments_path(item, path + (key,))
            if found:
                return found
    return None


# -- a call written as text with holes ------------------------------------------------


@dataclass(frozen=True)
class _Hole:
    start: int
    end: int
    kind: str  # name, id, index, arguments


def _tagged_call(unit: str, second: str | None, renders: _Renders, where, result) -> dict:
    holes = [_Hole(m.start(), m.end(), "name") for m in re.finditer(re.escape(samples.FUNCTION), unit)]
    holes += [_Hole(m.start(), m.end(), "id") for m in re.finditer(re.escape(samples.CALL_ID), unit)]
    if not any(h.kind == "name" for h in holes):
        raise NotUnderstood("the call's text does not hold its name")
    arguments = None
    json_args = literal.find_value(unit, ARGS)
    if json_args is not None:
        at, end, style = json_args
        holes.append(_Hole(at, end, "arguments"))
        arguments = {"encoding": "json", "literal": style}
    else:
        arguments, span = _tagged_arguments(unit, renders, where, result)
        holes.append(_Hole(span[0], span[1], "arguments"))
    if second is not None:
        holes += _index_holes(unit, second, holes)
    holes.sort(key=lambda hole: hole.start)
    for before, after in itertools.pairwise(holes):
        if after.start < before.end:
            raise NotUnderstood("the call's parts overlap")
    parts = []
    for index, hole in enumerate(holes):
        stop = holes[index + 1].start if index + 1 < len(holes) else len(unit)
        parts.append({"hole": hole.kind, "after": unit[hole.end : stop]})
    call: dict = {"start": unit[: holes[0].start], "parts": parts}
    escapes = _name_escapes(renders, where, result)
    if escapes:
        call["name_escapes"] = escapes
    return {"format": "tagged", "call": call, "arguments": arguments}


def _index_holes(unit: str, second: str, holes: list[_Hole]) -> list[_Hole]:
    """Numbers that count the calls (0, 1 or 1, 2): where the second call differs from
    the first in digits alone."""
    if len(unit) != len(second):
        return []
    found = []
    for match in re.finditer(r"\d+", unit):
        other = second[match.start() : match.end()]
        inside = any(h.start <= match.start() < h.end for h in holes)
        if other != match.group(0) and other.isdigit() and not inside:
            found.append(_Hole(match.start(), match.end(), "index"))
    return found


def _call_text(renders: _Renders, arguments: dict, where, unit: str, one_block: str) -> str | None:
    """The call's text in a turn with one call with ``arguments``: the block less the
    head and tail that the one-argument call's block has around ``unit``."""
    prompt, reasoning_markers = where
    turn = renders.turn(renders.call(arguments=arguments))
    if turn is None:
        return None
    empty = renders.turn()
    assert empty is not None  # rendered before, in _analyze
    block = _calls_block(prompt, empty, turn, reasoning_markers)
    at = one_block.find(unit)
    head, tail = one_block[:at], one_block[at + len(unit) :]
    if at < 0 or not (block.startswith(head) and block.endswith(tail)):
        return None
    return block[len(head) : len(block) - len(tail)]


def _tagged_arguments(unit: str, renders: _Renders, where, result) -> tuple[dict, tuple[int, int]]:
    prompt, reasoning_markers = where
    empty, one = renders.turn(), renders.turn(renders.call())
    assert empty is not None and one is not None  # rendered before, in _analyze
    one_block = _calls_block(prompt, empty, one, reasoning_markers)
    wide = _call_text(renders, WIDE, where, unit, one_block)
    if wide is None:
        raise NotUnderstood("a call with two arguments does not render alike")
    found = repeated(unit, wide, same=_second_argument_as_first)
    if found is None:
        raise NotUnderstood("two arguments do not repeat the one argument's text")
    result.evidence.append(
        Evidence(
            f"tools.arguments: unit {found.unit!r}, separator {found.separator!r}",
            "a call with two arguments repeats the one argument's text",
            Render("assistant turn, one call with one argument", one),
            Render("assistant turn, one call with two arguments", wide),
        )
    )
    item = found.unit
    key_at = item.find(samples.ARGUMENT)
    value_at = item.find(samples.ARGUMENT_VALUE)
    if key_at < 0 or value_at < key_at:
        raise NotUnderstood("an argument's text does not hold its key before its value")
    key_prefix = item[:key_at]
    key_suffix = item[key_at + len(samples.ARGUMENT) : value_at]
    value_suffix = item[value_at + len(samples.ARGUMENT_VALUE) :]
    names_key = samples.ARGUMENT in value_suffix
    if names_key:
        # The value's closing tag repeats the key (<key>value</key>).
        value_suffix = value_suffix.replace(samples.ARGUMENT, KEY_SLOT)
    arguments: dict[str, str | bool | dict | list] = {
        "encoding": "tagged",
        "key_prefix": key_prefix,
        "key_end": key_suffix,
        "value_start": "",
        "value_suffix": value_suffix,
        "separator": found.separator,
        "literal": "json",
    }
    if names_key:
        arguments["value_suffix_names_key"] = True
    typed = _second_value_text(renders, TYPED, where, unit, one_block, found, key_prefix)
    if typed is not None:
        typed_suffix, typed_value_suffix, text = typed
        if typed_suffix != key_suffix:
            # The key's closing text depends on the value's type (an attribute naming
            # it): keep the part all types share on either side.
            common = _common_prefix(typed_suffix, key_suffix)
            rest_a, rest_b = key_suffix[len(common) :], typed_suffix[len(common) :]
            shared_tail = _common_suffix(rest_a, rest_b)
            while shared_tail and shared_tail[0].isalnum() and rest_a[: len(rest_a) - len(shared_tail)][-1:].isalnum():
                shared_tail = shared_tail[1:]  # "true"/"false" share an "e", not a marker
            arguments["key_end"] = common
            arguments["value_start"] = rest_a[len(rest_a) - len(shared_tail) :] if shared_tail else ""
            if typed_value_suffix != value_suffix and value_suffix.endswith(typed_value_suffix):
                # Strings are quoted, other values are not.
                arguments["string_open"] = rest_a[: len(rest_a) - len(shared_tail)]
                arguments["string_close"] = value_suffix[: len(value_suffix) - len(typed_value_suffix)]
                arguments["value_suffix"] = typed_value_suffix
            elif shared_tail.strip() and rest_a[: len(rest_a) - len(shared_tail)]:
                # The attribute's word for a string, which the model writes too.
                arguments["string_attribute"] = rest_a[: len(rest_a) - len(shared_tail)]
                words = _type_attributes(
                    renders, where, unit, one_block, found, key_prefix, common, shared_tail
                )
                if words is not None:
                    words["string"] = arguments["string_attribute"]
                    arguments["type_attributes"] = dict(sorted(words.items()))
        if not arguments["key_end"]:
            raise NotUnderstood("nothing ends an argument's key")
    flag = _second_value_text(renders, FLAG, where, unit, one_block, found, key_prefix)
    keywords = None
    if flag is None or flag[2].strip() != "True":
        keywords = _python_keywords(renders, where, unit, one_block, found)
    if (flag is not None and flag[2].strip() == "True") or keywords is not None:
        arguments["literal"] = "python"
        containers = _containers(renders, where, unit, one_block, found, key_prefix)
        if containers is not None:
            arguments["containers"] = containers
    if keywords is not None:
        result.evidence.append(
            Evidence(
                "tools.arguments.literal = 'python'",
                "the template writes the arguments as Python's keyword arguments "
                "(key=value, ...), its values in JSON's spelling: a model writes Python's "
                "values there (True, None, a string in either quote), and JSON's are read too",
                Render("assistant turn, one call with a null, booleans and a nested object",
                       keywords),
            )
        )
    if _string_escapes(renders, where, unit, one_block, found, key_prefix, arguments):
        arguments["string_escapes"] = True
    syntax = _value_syntax(renders, where, unit, one_block, found, key_prefix, arguments)
    if syntax is not None:
        arguments["syntax"] = syntax
        result.evidence.append(
            Evidence(
                "tools.arguments.syntax: objects "
                f"{syntax['object_open']!r}{syntax['key_prefix']!r}key{syntax['key_end']!r}value"
                f"{syntax['member_separator']!r}...{syntax['object_close']!r}, arrays "
                f"{syntax['array_open']!r}...{syntax['item_separator']!r}...{syntax['array_close']!r}",
                "the template writes a null, booleans, an array and an object (nested ones too)"
                " in a syntax of its own, neither JSON nor Python",
                Render("assistant turn, one call with two arguments", one),
            )
        )
    quotes = _other_quotes(arguments)
    if quotes and syntax is None:
        arguments["string_quotes_also"] = quotes
        result.evidence.append(
            Evidence(
                f"tools.arguments.string_quotes_also = {quotes!r}",
                f"the template writes Python values, a string between {arguments['string_open']!r}: "
                "Python writes a string between either quote, and so does a model",
                Render("assistant turn, one call with one argument", one),
            )
        )
    arguments.update(_written_text(renders, where, unit, one_block, found, key_prefix, arguments, result))
    span = (len(found.head), len(unit) - len(found.tail))
    return arguments, span


# A value of each JSON type but a string (an object and an array of a string each),
# to read the attribute the template names that type with.
TYPE_SAMPLES = {
    "integer": NUMBER,
    "number": 2.5,
    "boolean": True,
    "null": None,
    "object": {samples.ARGUMENT: samples.ARGUMENT_VALUE_2},
    "array": [samples.ARGUMENT_VALUE_2],
}


def _type_attributes(renders, where, unit, one_block, found, key_prefix, common, tail):
    """JSON type → the word the template's attribute names it with (the text between
    ``common`` and ``tail`` before the value), for the types but a string; None where
    a call with such a value does not render alike or writes no such word."""
    words = {}
    for kind, value in TYPE_SAMPLES.items():
        call = {samples.ARGUMENT: samples.ARGUMENT_VALUE, samples.ARGUMENT_2: value}
        rest = _second_rest(renders, call, where, unit, one_block, found, key_prefix)
        if rest is None or not rest.startswith(common):
            return None
        # The value after the attribute (whose word may spell it: type="null").
        ends = [rest.find(tail + form, len(common)) for form in (literal.json.dumps(value), str(value))]
        ends = [at for at in ends if at >= 0]
        if not ends:
            return None
        word = rest[len(common) : min(ends)]
        if not word.strip() or samples.probe_in(word) is not None:
            return None
        words[kind] = word
    return words


def _second_value_text(renders, arguments, where, unit, one_block, found, key_prefix):
    """How the second argument of a call with ``arguments`` is written: the text
    between its key and its value, after its value, and the value itself."""
    rest = _second_rest(renders, arguments, where, unit, one_block, found, key_prefix)
    if rest is None:
        return None
    value = arguments[samples.ARGUMENT_2]
    for written in (str(value), literal.json.dumps(value)):
        at = rest.find(written)
        if at >= 0:
            after = rest[at + len(written) :].replace(samples.ARGUMENT_2, KEY_SLOT)
            return rest[:at], after, written
    return None


def _python_keywords(renders, where, unit, one_block, found) -> str | None:
    """The render of a call whose arguments the template writes as Python's keyword
    arguments (``key=value, ...``), each value reading back as itself in JSON's or
    Python's spelling, for every call of ``KEYWORD_PROBES``; None where one is
    written otherwise (or refused)."""
    shown = None
    for arguments in KEYWORD_PROBES:
        call = _call_text(renders, arguments, where, unit, one_block)
        if call is None or not (call.startswith(found.head) and call.endswith(found.tail)):
            return None
        region = call[len(found.head) : len(call) - len(found.tail)]
        if not _keyword_arguments(region, arguments):
            return None
        shown = shown or renders.turn(renders.call(arguments=arguments))
    return shown


def _keyword_arguments(region: str, arguments: dict) -> bool:
    """Whether ``region`` is Python's keyword arguments that spell ``arguments`` (the
    text is only parsed, never run)."""
    source = "_(" + region + ")"
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    call = tree.body
    if not isinstance(call, ast.Call) or call.args or len(call.keywords) != len(arguments):
        return False
    for keyword in call.keywords:
        if keyword.arg not in arguments:
            return False
        read = literal.read(ast.get_source_segment(source, keyword.value) or "")
        if read is None or not _same_value(read[0], arguments[keyword.arg]):
            return False
    return True


def _same_value(found: object, wanted: object) -> bool:
    """Whether a value read off a render is ``wanted``, compared as JSON (where True
    is no 1)."""
    try:
        return json.dumps(found, sort_keys=True) == json.dumps(wanted, sort_keys=True)
    except (TypeError, ValueError):
        return False  # no JSON value (a set, bytes)


def _other_quotes(arguments: dict) -> list[str]:
    """Python's other quote, where the template writes Python values and a string
    between one of Python's quotes, with nothing after a value to end it."""
    opening = arguments.get("string_open", "")
    if (
        arguments["literal"] != "python"
        or opening not in PYTHON_QUOTES
        or arguments.get("string_close") != opening
        or arguments["value_start"]
        or str(arguments["value_suffix"]).strip()
    ):
        return []
    return [quote for quote in PYTHON_QUOTES if quote != opening]


def _containers(renders, where, unit, one_block, found, key_prefix) -> str | None:
    """How a template that writes True and None as Python does writes a list and an
    object, each holding a boolean and a null: both as JSON (tojson: Qwen3-Coder), or
    one of them as a Python literal (the value as text: Seed-OSS; LFM2.5 writes its
    lists so); None where they render neither way."""
    styles = set()
    for value in (
        [samples.ARGUMENT_VALUE_2, True, None],
        {samples.ARGUMENT: True, samples.ARGUMENT_2: None},
    ):
        call = {samples.ARGUMENT: samples.ARGUMENT_VALUE, samples.ARGUMENT_2: value}
        written = _second_value_text(renders, call, where, unit, one_block, found, key_prefix)
        read = literal.read(written[2]) if written is not None else None
        if read is None or read[0] != value:
            return None
        styles.add(read[1])
    return "python" if "python" in styles else "json"


def _second_rest(renders, arguments, where, unit, one_block, found, key_prefix):
    """The text of the second argument of a call with ``arguments`` after its key."""
    call = _call_text(renders, arguments, where, unit, one_block)
    if call is None or not (call.startswith(found.head) and call.endswith(found.tail)):
        return None
    region = call[len(found.head) : len(call) - len(found.tail)]
    first = found.unit + found.separator
    last = found.separator + found.unit
    if region.startswith(first):
        item = region[len(first) :]
    elif region.endswith(last):
        item = region[: len(region) - len(last)]  # the template sorts the keys
    else:
        return None
    prefix = key_prefix + samples.ARGUMENT_2
    if not item.startswith(prefix):
        return None
    return item[len(prefix) :]


def _written_value(renders, value, where, unit, one_block, found, key_prefix, arguments):
    """How the second argument is written when it is ``value``, where nothing after
    a value marks its end: the text between the key's closing text and the next
    argument (or the call's end); None where it does not render so."""
    key_end, suffix = str(arguments["key_end"]), str(arguments["value_suffix"])
    if arguments["value_start"] or suffix.strip():
        return None
    call = {samples.ARGUMENT: samples.ARGUMENT_VALUE, samples.ARGUMENT_2: value}
    rest = _second_rest(renders, call, where, unit, one_block, found, key_prefix)
    if rest is None or len(rest) < len(key_end) + len(suffix):
        return None
    if not (rest.startswith(key_end) and rest.endswith(suffix)):
        return None
    return rest[len(key_end) : len(rest) - len(suffix)]


def _string_escapes(renders, where, unit, one_block, found, key_prefix, arguments) -> bool:
    """Whether the template escapes a string that holds its closing quote and a
    backslash (tojson does), so that a string's end is found by skipping escapes;
    a macro that writes the text as it stands between quotes does not."""
    opening, closing = str(arguments.get("string_open", "")), str(arguments.get("string_close", ""))
    if not opening:
        return False
    value = samples.ARGUMENT_VALUE_2 + closing + "\\"
    text = _written_value(renders, value, where, unit, one_block, found, key_prefix, arguments)
    if text is None or text == opening + value + closing:
        return False
    found_value = literal.read(text)
    return found_value is not None and found_value[0] == value


def _value_syntax(renders, where, unit, one_block, found, key_prefix, arguments) -> dict | None:
    """A value syntax of the template's own (``literal.own_syntax``), looked for where
    nothing after a value marks its end and strings have marks of their own: how the
    second argument is written when it is a null, a boolean, an array, an object."""
    opening, closing = str(arguments.get("string_open", "")), str(arguments.get("string_close", ""))
    if not opening:
        return None
    values = literal.probes(samples.ARGUMENT_VALUE_2, NUMBER, samples.ARGUMENT, samples.ARGUMENT_2)
    texts = {}
    for name, value in values.items():
        text = _written_value(renders, value, where, unit, one_block, found, key_prefix, arguments)
        if text is None:
            return None
        texts[name] = text
    return literal.own_syntax(texts, values, opening, closing)


def _second_argument_as_first(text: str) -> str:
    return text.replace(samples.ARGUMENT_2, samples.ARGUMENT).replace(
        samples.ARGUMENT_VALUE_2, samples.ARGUMENT_VALUE
    )


def _common_prefix(a: str, b: str) -> str:
    size = 0
    while size < min(len(a), len(b)) and a[size] == b[size]:
        size += 1
    return a[:size]


def _common_suffix(a: str, b: str) -> str:
    size = 0
    while size < min(len(a), len(b)) and a[-1 - size] == b[-1 - size]:
        size += 1
    return a[len(a) - size :]


# -- text written in XML's ways: escapes, verbatim marks, elements -------------------
#
# A template may write some characters of a name, a key or a value otherwise (an
# attribute's &amp; and &quot;), wrap some string values in marks that keep them as
# they stand (XML's CDATA, when a value holds < or &), or write nested values as
# elements. Each is read off renders of calls whose name, key or value holds those
# characters, or whose value is an array or an object.

# The characters a template may escape; a newline may make it wrap a value too.
_SPECIAL = ("&", "<", ">", '"', "'")
_WRAPPING = _SPECIAL + ("\n",)


def _between_twice(text: str, word: str) -> str | None:
    """What ``text`` writes between ``word`` and the next ``word`` (a probe word
    written twice around one character), or None."""
    found = re.search(re.escape(word) + "(.{1,16}?)" + re.escape(word), text, re.DOTALL)
    return found.group(1) if found else None


def _name_escapes(renders: _Renders, where, result) -> dict[str, str]:
    """How the template writes each special character in a function name: the text
    between the two halves of a name that holds it, in the calls' block."""
    prompt, reasoning_markers = where
    empty = renders.turn()
    escapes: dict[str, str] = {}
    for char in _SPECIAL:
        turn = renders.turn(renders.call(name=samples.FUNCTION + char + samples.FUNCTION))
        if empty is None or turn is None:
            continue
        written = _between_twice(_calls_block(prompt, empty, turn, reasoning_markers), samples.FUNCTION)
        if written is not None and written != char and _clean(written):
            escapes[char] = written
            result.evidence.append(
                Evidence(
                    f"tools.call.name_escapes: {char!r} written {written!r}",
                    "a call whose name holds the character writes this in its place",
                    Render("assistant turn, one call named with the character", turn),
                )
            )
    return escapes


def _written_text(renders, where, unit, one_block, found, key_prefix, arguments, result) -> dict:
    """The key escapes, value escapes, verbatim marks and elements of key/value
    arguments whose values a suffix ends (only where the template writes them)."""
    if arguments["encoding"] != "tagged" or not str(arguments["value_suffix"]).strip():
        return {}
    written: dict = {}
    escapes: dict[str, str] = {}
    for char in _SPECIAL:
        key = samples.ARGUMENT + char + samples.ARGUMENT
        text = _call_text(renders, {key: samples.ARGUMENT_VALUE}, where, unit, one_block)
        between = _between_twice(text or "", samples.ARGUMENT)
        if between is not None and between != char and _clean(between):
            escapes[char] = between
    if escapes:
        written["key_escapes"] = escapes
        result.evidence.append(
            Evidence(
                f"tools.arguments.key_escapes = {escapes!r}",
                "calls whose key holds each character write these in its place",
            )
        )
    if not arguments.get("string_open"):
        written.update(_value_marks(renders, where, unit, one_block, result))
    if not arguments.get("value_start"):
        elements = _elements(renders, where, unit, one_block, found, key_prefix, arguments)
        if elements is not None:
            written["elements"] = elements
            result.evidence.append(
                Evidence(
                    "tools.arguments.elements: members "
                    f"{elements['open']!r} value {elements['close']!r}, items named {elements['item']!r}",
                    "calls whose value is an array, an object and both nested write them as"
                    " elements, one per member or item",
                )
            )
    return written


def _value_marks(renders, where, unit, one_block, result) -> dict:
    """Value escapes and verbatim marks: how a call writes a string value that holds
    a special character, against the same call with a plain value."""
    value = samples.ARGUMENT_VALUE
    plain = _call_text(renders, ARGS, where, unit, one_block)
    if plain is None or plain.count(value) != 1:
        return {}
    before, after = plain.split(value)
    escapes: dict[str, str] = {}
    wraps = set()
    evidence = ""
    for char in _WRAPPING:
        text = _call_text(renders, {samples.ARGUMENT: value + char + value}, where, unit, one_block)
        if text is None or not (text.startswith(before) and text.endswith(after)):
            continue
        middle = text[len(before) : len(text) - len(after)]
        first, last = middle.find(value), middle.rfind(value)
        if first < 0 or first == last:
            continue
        opening, between, closing = middle[:first], middle[first + len(value) : last], middle[last + len(value) :]
        if opening or closing:
            wraps.add((opening, closing, between == char))
            if opening and closing and between == char:
                evidence = text
        elif between != char and char in _SPECIAL and _clean(between):
            escapes[char] = between
    found: dict = {}
    if escapes:
        found["value_escapes"] = escapes
        result.evidence.append(
            Evidence(
                f"tools.arguments.value_escapes = {escapes!r}",
                "calls whose value holds each character write these in its place",
            )
        )
    if len(wraps) == 1:
        ((opening, closing, as_it_stands),) = wraps
        if opening.strip() and closing.strip() and as_it_stands and _clean(opening + closing):
            found["verbatim"] = {"open": opening, "close": closing}
            result.evidence.append(
                Evidence(
                    f"tools.arguments.verbatim: {opening!r} ... {closing!r}",
                    "a call whose value holds a special character writes the value as it"
                    " stands between these marks",
                    Render("assistant turn, one call, plain value", plain),
                    Render("assistant turn, one call, value with a special character", evidence),
                )
            )
    return found


def _elements(renders, where, unit, one_block, found, key_prefix, arguments) -> dict | None:
    """How the template writes an array and an object as the second argument's
    value, where it writes them as elements (``open``, the member's value,
    ``close``, ``{key}`` the member's key; an array's items named ``item``): read
    off an object of two members and an array, checked against a nested value."""
    key_end = str(arguments["key_end"])
    suffix = str(arguments["value_suffix"]).replace(KEY_SLOT, samples.ARGUMENT_2)
    string, number = samples.ARGUMENT_VALUE_2, NUMBER
    values = {
        "array": [string, number],
        "object": {samples.ARGUMENT: string, samples.ARGUMENT_2: number},
        "nested": {
            samples.ARGUMENT: [number, {samples.ARGUMENT_2: False}],
            samples.ARGUMENT_2: {samples.ARGUMENT: [string, True]},
        },
    }
    texts = {}
    for name, value in values.items():
        call = {samples.ARGUMENT: samples.ARGUMENT_VALUE, samples.ARGUMENT_2: value}
        rest = _second_rest(renders, call, where, unit, one_block, found, key_prefix)
        if rest is None or not (rest.startswith(key_end) and rest.endswith(suffix)):
            return None
        texts[name] = rest[len(key_end) : len(rest) - len(suffix)]
    members, array = texts["object"], texts["array"]
    first, second = sorted((samples.ARGUMENT, samples.ARGUMENT_2), key=members.find)
    leaf = {samples.ARGUMENT: string, samples.ARGUMENT_2: str(number)}
    at = members.find(first)
    value_at = members.find(leaf[first], at + len(first))
    close_at = members.find(first, value_at + len(leaf[first])) if value_at >= 0 else -1
    if at <= 0 or close_at < 0:
        return None
    open_head, open_tail = members[:at], members[at + len(first) : value_at]
    close_head = members[value_at + len(leaf[first]) : close_at]
    rest = members[close_at + len(first) :]
    next_at = rest.find(open_head + second + open_tail)
    last_at = rest.rfind(close_head + second)
    if next_at < 0 or last_at < next_at:
        return None
    close_tail = rest[last_at + len(close_head + second) :]
    if not rest[:next_at].startswith(close_tail):
        return None
    tail_at = array.find(open_tail, len(open_head))
    elements = {
        "open": open_head + KEY_SLOT + open_tail,
        "close": close_head + KEY_SLOT + close_tail,
        "separator": rest[len(close_tail) : next_at],
        "item": array[len(open_head) : tail_at] if array.startswith(open_head) and tail_at > 0 else "",
    }
    if not (open_head.strip() and open_tail and close_tail and elements["item"]):
        return None
    if not _clean("".join(elements.values())):
        return None  # an item named after its array's key: no name of the template's own
    for name, value in values.items():
        if texts[name] not in (_write_elements(value, elements, False), _write_elements(value, elements, True)):
            return None
    return elements


def _write_elements(value, elements: dict, sort: bool) -> str:
    """``value`` written as ``elements`` say (object keys sorted where ``sort``);
    numbers, true and false as JSON writes them, strings as they stand."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        members = sorted(value.items()) if sort else list(value.items())
    elif isinstance(value, list):
        members = [(elements["item"], item) for item in value]
    else:
        return literal.json.dumps(value)
    return elements["separator"].join(
        elements["open"].replace(KEY_SLOT, key)
        + _write_elements(item, elements, sort)
        + elements["close"].replace(KEY_SLOT, key)
        for key, item in members
    )
