"""Texts the exports of a format must agree on, without a model (issue 33: the live
run's findings). Used by tests/test_export_agreement.py (GBNF, Lark, ``parse``) and
tests/exports/test_agreement.py (xgrammar's structural tag).

- ``call_text``: the template's own text of one call to the live run's
  ``book_table`` (tests/live/tools.py), from the calls' trigger on;
- ``spaced``: that text with a line break written at a place where a model held to
  the GBNF may write one (between a marker and what follows it, around a value):
  SmolLM2 wrote ``\\n\\n`` wherever the GBNF let it;
- ``LIVE_OUTPUTS`` (tests/live/first_run.json): outputs of the first live run (token
  ids decoded; the run stopped at the token cap for most), each of which one export
  refused while the GBNF took it, or which the GBNF took though ``parse`` read no
  valid call from it.

The rule the checks hold every export to: what the GBNF takes (``tool_call_grammar``
from the trigger on), the Lark grammar and the structural tag take too, and where
the GBNF takes a whole output, ``parse`` (strict) reads one call from it, valid
under the tool's JSON schema.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass

import jsonschema

from tests import roundtrip as rt
from tests.fallback_outputs import format_of
from tests.live.tools import SCHEMAS, TOOLS

ARGUMENTS = {
    "restaurant": "Luigi",
    "guests": 4,
    "outdoor": True,
    "time": "19:30",
    "contact": {"name": "Ada", "phone": "555-0100"},
    "requests": ["high chair"],
}
ENABLE_THINKING = False
HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass(frozen=True)
class Call:
    slug: str
    lead: str  # what an output writes before the trigger (a reasoning block's closer)
    text: str  # from the trigger on


def slugs() -> list[str]:
    return [slug for slug in rt.slugs() if format_of(slug).has_calls]


def trigger_of(slug: str) -> str:
    """The literal the calls' grammar starts from ("" for a pattern trigger)."""
    module = rt.module(slug)
    literal = [t["value"] for t in module.TRIGGERS if t["type"] in (0, 1)]
    return literal[0] if literal else ""


def lead_of(slug: str) -> str:
    """What the live run prefills before the trigger: a reasoning block's closer where
    the prompt opens a block that thinking off leaves open."""
    fmt = format_of(slug)
    opened = fmt.reasoning.has_block and fmt.reasoning.opened_by_prompt(
        ENABLE_THINKING, tools=True
    )
    return fmt.reasoning.end if opened else ""


@functools.cache
def call_text(slug: str) -> Call | None:
    """The template's text of one call to book_table with ``ARGUMENTS``, from the
    trigger on (our fallback format's call, for a template without calls); None
    where the template writes none that ``parse`` reads back as that call."""
    fmt = format_of(slug)
    trigger = trigger_of(slug)
    if fmt.fallback:
        start, end = fmt.polyfills.fallback_call
        text = start + json.dumps({"name": "book_table", "arguments": ARGUMENTS}) + end
        candidates = [text]
    else:
        candidates = _template_calls(slug, trigger)
    for text in candidates:
        found = Call(slug, lead_of(slug), text)
        if reads_the_call(found):
            return found
    return None


def _template_calls(slug: str, trigger: str) -> list[str]:
    """The template's render of the call from the trigger on, cut as the round trip
    cuts it: the render after the generation prompt, up to the end of the turn
    (content "" first, None where the template refuses ""). Where the render does
    not start with the generation prompt (one that opens a reasoning block thinking
    off leaves open; a system text written after the messages), each place the
    trigger stands in the render."""
    spec = rt.load_spec(slug)
    template = rt.template_for(spec)
    if template is None or not trigger:
        return []
    kind = rt.Kind(
        "agreement", "", enable_thinking=ENABLE_THINKING, calls=(("book_table", ARGUMENTS),)
    )
    tools = rt.template_tools(spec, TOOLS)
    markers = rt.end_of_turn_markers(spec, template)
    found = []
    for content in ("", None):
        message = rt.message_for(spec, kind, content)
        try:
            prefix, full = rt._render_pair(spec, template, message, kind, tools)
        except rt.RenderError:
            continue
        if full.startswith(prefix):
            starts = [full.find(trigger, len(prefix))]
        else:
            starts = [at for at in range(len(full)) if full.startswith(trigger, at)]
        for at in starts:
            if at < 0:
                continue
            # The turn ends at its first marker (Cohere writes its instructions
            # after the messages, the trigger and the values among them).
            ends = [end for end in (full.find(m, at) for m in markers) if end >= 0]
            found.append(rt.cut_tool_text(full[at : min(ends, default=len(full))], kind, markers))
    return [text for text in found if text.startswith(trigger)]


def reads_the_call(call: Call) -> bool:
    """Whether ``parse`` reads the text, strictly, as the one call it was made of."""
    try:
        message = rt.module(call.slug).parse(
            call.lead + call.text, tools=TOOLS, enable_thinking=ENABLE_THINKING, strict=True
        )
    except ValueError:
        return False
    calls = message["tool_calls"]
    return (
        len(calls) == 1
        and calls[0]["function"]["name"] == "book_table"
        and rt.json_equal(json.loads(calls[0]["function"]["arguments"]), ARGUMENTS)
    )


def valid_call(slug: str, text: str) -> str:
    """Why ``parse`` (strict) does not read ``text`` as one call valid under its
    tool's schema ("" where it does)."""
    try:
        message = rt.module(slug).parse(
            text, tools=TOOLS, enable_thinking=ENABLE_THINKING, strict=True
        )
    except ValueError as error:
        return f"parse: {error}"
    calls = message["tool_calls"]
    if len(calls) != 1:
        return f"{len(calls)} calls"
    name = calls[0]["function"]["name"]
    if name not in SCHEMAS:
        return f"a call to {name!r}"
    arguments = json.loads(calls[0]["function"]["arguments"])
    errors = list(jsonschema.Draft202012Validator(SCHEMAS[name]).iter_errors(arguments))
    return f"schema: {errors[0].message}" if errors else ""


def spaced(text: str, start: int) -> list[tuple[int, str]]:
    """(where, the text with a line break written there), for each place from
    ``start`` on next to a character that is no letter, digit or "_" (a marker's
    edge, a value's)."""
    found = []
    for at in range(start, len(text) + 1):
        around = text[max(0, at - 1) : at + 1]
        if any(not (char.isalnum() or char == "_") for char in around):
            found.append((at, text[:at] + "\n" + text[at:]))
    return found


def grammars(slug: str) -> dict[str, object]:
    """The grammars of one call to the live tools: the calls' GBNF (from the
    trigger on), and the whole output's Lark grammar and structural tag with a
    call required, one at most, thinking off."""
    module = rt.module(slug)
    single = dict(parallel_tool_calls=False, enable_thinking=ENABLE_THINKING)
    return {
        "gbnf": module.tool_call_grammar(TOOLS, parallel_tool_calls=False),
        "lark": module.lark_grammar(TOOLS, tool_choice="required", **single),
        "tag": module.structural_tag(TOOLS, tool_choice="required", **single),
    }


@functools.cache
def live_outputs() -> list[dict]:
    with open(os.path.join(HERE, "live", "first_run.json"), encoding="utf-8") as handle:
        return json.load(handle)["outputs"]
