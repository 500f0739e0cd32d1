"""Whitespace between lexemes is bounded in the grammars (issue 33: SmolLM2, held to a
GBNF whose ``ws`` ran without bound, wrote line breaks until its token cap inside a
call's JSON, after a marker, after the call). compiler/runtime/schema_gbnf.py declares
the bound: one line break, with a bounded run of spaces or tabs on each side.

Each corpus format's own call to the live run's ``book_table`` (tests/agreement.py),
its strings listed in the tool's schema (so that no value is free text, which holds
what it likes): at every place in the call, a sampler held to the calls' GBNF may
write at most one line break more than the text already has there (or as many as the
template writes in one run, where it writes more), and held to the Lark grammar, a
bounded number. llguidance reads both, one token per byte.
"""

from __future__ import annotations

import copy
import functools
import re

import pytest

llguidance = pytest.importorskip("llguidance")

from compiler.runtime.schema_gbnf import ws_fits  # noqa: E402
from tests import agreement  # noqa: E402
from tests import roundtrip as rt  # noqa: E402
from tests.fallback_outputs import format_of  # noqa: E402
from tests.live.tools import TOOLS  # noqa: E402
from tests.test_export_agreement import UNTYPED  # noqa: E402
from tests.test_grammar import _matcher as gbnf_matcher  # noqa: E402
from tests.test_lark import _matcher as lark_matcher  # noqa: E402

NEWLINE = 10
# More line breaks than any place takes: a run this long means no bound.
ENDLESS = 12


def _listed_tools() -> list[dict]:
    """The live tools with each string of the call's arguments listed (an enum)."""
    tools = copy.deepcopy(TOOLS)
    properties = tools[0]["function"]["parameters"]["properties"]
    arguments = agreement.ARGUMENTS
    properties["restaurant"] = {"type": "string", "enum": [arguments["restaurant"]]}
    contact = properties["contact"]["properties"]
    for key in ("name", "phone"):
        contact[key] = {"type": "string", "enum": [arguments["contact"][key]]}
    properties["requests"]["items"] = {"type": "string", "enum": arguments["requests"]}
    return tools


LISTED = _listed_tools()


def _slugs():
    return [
        pytest.param(slug, marks=pytest.mark.xfail(reason=UNTYPED[slug], strict=True))
        if slug in UNTYPED
        else slug
        for slug in agreement.slugs()
    ]


def _longest_runs(matcher, text: str, start: int, after_end: bool) -> tuple[int, str]:
    """(the most line breaks the matcher takes at one place of ``text`` from
    ``start`` on, up to ``ENDLESS``; where): the matcher fed ``text[:start]`` already;
    places where the output may end are left out unless ``after_end``."""
    most, where = 0, ""
    for at in range(start, len(text) + 1):
        if after_end or not matcher.is_accepting():
            trial = matcher.deep_copy()
            taken = trial.try_consume_tokens([NEWLINE] * ENDLESS)
            if taken > most:
                most, where = taken, text[max(0, at - 30) : at] + "|" + text[at : at + 15]
        if at < len(text):
            data = list(text[at].encode("utf-8"))
            assert matcher.try_consume_tokens(data) == len(data), (at, text)
    return most, where


def _template_breaks(text: str) -> int:
    """The most line breaks the template itself writes in one run of whitespace."""
    runs = re.findall(r"\s+", text)
    return max([1] + [run.count("\n") for run in runs if not ws_fits(run)])


@functools.cache
def _call(slug: str):
    call = agreement.call_text(slug)
    if call is None:
        pytest.skip("the template writes no call to book_table that parse reads back")
    return call


@pytest.mark.parametrize("slug", _slugs())
def test_the_calls_gbnf_takes_one_line_break_between_lexemes(slug):
    call = _call(slug)
    grammar = rt.module(slug).tool_call_grammar(LISTED, parallel_tool_calls=False)
    matcher = gbnf_matcher(grammar, slug).deep_copy()
    # After the call, where the format writes content there, the content holds any.
    after_end = not format_of(slug).calls.content_after_calls
    most, where = _longest_runs(matcher, call.text, 0, after_end)
    assert most <= _template_breaks(call.text), f"{most} line breaks at {where!r}"


@pytest.mark.parametrize("slug", _slugs())
def test_the_lark_grammar_bounds_whitespace_in_a_call(slug):
    """The Lark grammar spells the same bound; where a marker's whitespace and the
    next one's meet, both stand (tests/exports hold the structural tag)."""
    call = _call(slug)
    single = dict(parallel_tool_calls=False, enable_thinking=agreement.ENABLE_THINKING)
    grammar = rt.module(slug).lark_grammar(LISTED, tool_choice="required", **single)
    matcher = lark_matcher(grammar, slug)
    # From the trigger's end on (before it, the text may still be content).
    start = len(call.lead) + max(1, len(agreement.trigger_of(slug)))
    output = call.lead + call.text
    data = list(output[:start].encode("utf-8"))
    assert matcher.try_consume_tokens(data) == len(data)
    after_end = not format_of(slug).calls.content_after_calls
    most, where = _longest_runs(matcher, output, start, after_end)
    assert most < ENDLESS, f"line breaks without end at {where!r}"


def _markers_taken(matcher, marker: str) -> int:
    """How many ``marker``s in a row (no whitespace between) the matcher takes, up to
    ``ENDLESS``."""
    data = list(marker.encode("utf-8"))
    for count in range(ENDLESS):
        if matcher.try_consume_tokens(data) != len(data):
            return count
    return ENDLESS


def _after_calls(slug: str) -> str | None:
    """The first end-of-turn marker the format takes after its calls, or None."""
    fmt = format_of(slug)
    if fmt.calls.content_after_calls:
        return None  # content there: text may hold the marker, then end with one
    markers = [m for m in (*fmt.stop, *fmt.calls.end_of_turn_after_calls) if m]
    return markers[0] if markers else None


@pytest.mark.parametrize("slug", _slugs())
def test_end_markers_after_the_call_are_bounded(slug):
    """After the call, end-of-turn markers written one after another: the reader
    drops any number, the grammars take a bounded run (MARKERS_AFTER_CALLS: the live
    run's MiniMax M3 wrote ``</tool_call>`` until its token cap), at least one."""
    from compiler.codegen.gbnf import MARKERS_AFTER_CALLS

    call = _call(slug)
    marker = _after_calls(slug)
    if marker is None:
        pytest.skip("no end-of-turn marker after the calls, or content there")
    module = rt.module(slug)
    single = dict(parallel_tool_calls=False, enable_thinking=agreement.ENABLE_THINKING)
    gbnf = module.tool_call_grammar(LISTED, parallel_tool_calls=False)
    lark = module.lark_grammar(LISTED, tool_choice="required", **single)
    for name, matcher, text in (
        ("gbnf", gbnf_matcher(gbnf, slug).deep_copy(), call.text),
        ("lark", lark_matcher(lark, slug), call.lead + call.text),
    ):
        data = list(text.encode("utf-8"))
        assert matcher.try_consume_tokens(data) == len(data), name
        taken = _markers_taken(matcher, marker)
        assert 1 <= taken <= MARKERS_AFTER_CALLS, (name, marker, taken)


@pytest.mark.parametrize(
    "slug", ["google_gemma_4_31b_it", "google_gemma_4_31b_it_interleaved"]
)
def test_content_after_the_call_may_hold_the_triggers_first_piece(slug):
    """Where content follows the calls, it holds no trigger, but the trigger's first
    piece alone opens no call: parse reads it as content, and the GBNF and the Lark
    grammar both take it (the live run: SmolLM2 under Gemma 4's GBNF wrote
    ``<|tool_call>call_to_guests{`` after its call, which the Lark grammar refused)."""
    from tests.test_lark import accepts

    call = _call(slug)
    module = rt.module(slug)
    trigger = module.TRIGGERS[0]["value"]
    after = "\n" + trigger.replace("call:", "call_to_guests{")
    assert trigger not in after
    closer = "<tool_call|>"  # the call's own closer; the content goes after it
    cut = call.text.rindex(closer) + len(closer)
    text = call.text[:cut] + after + call.text[cut:]
    output = call.lead + text
    read = module.parse(output, tools=LISTED, enable_thinking=agreement.ENABLE_THINKING)
    assert len(read["tool_calls"]) == 1 and "call_to_guests" in (read["content"] or "")
    single = dict(parallel_tool_calls=False, enable_thinking=agreement.ENABLE_THINKING)
    lark = module.lark_grammar(LISTED, tool_choice="required", **single)
    assert accepts(lark, output, slug)
    gbnf = module.tool_call_grammar(LISTED, parallel_tool_calls=False)
    matcher = gbnf_matcher(gbnf, slug).deep_copy()
    data = list(text.encode("utf-8"))
    assert matcher.try_consume_tokens(data) == len(data)
