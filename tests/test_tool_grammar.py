"""Tool-call grammars, checked with llguidance one token per byte (tests/test_grammar.py).

For every round-trip tool case (tests/roundtrip.py, ``TOOL_KINDS``): ``grammar(tools,
enable_thinking)`` accepts the rendered text, ``tool_call_grammar(tools)`` accepts it from
where ``TRIGGERS`` first fires, and both reject it once the last call's closing marker
is broken. The figures, per template:

    .venv/bin/python -m tests.test_tool_grammar
"""

from __future__ import annotations

import functools
import itertools
import json
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import pytest

from compiler.codegen import gbnf
from compiler.call_shapes import whole_output_shape
from compiler.triggers import regex
from tests import roundtrip as rt
from tests.test_grammar import accepts, compile_grammar, format_of, why_rejected
from tests.test_roundtrip import KNOWN_FAILURES

# Rendered texts the grammars reject for a reason outside them, with why. Strict: a
# case that starts passing must leave this list.
# (LFM2.5's tricky arguments were one until the grammars ended a string where parse
# does: compiler/quoted_strings.py.)
KNOWN_REJECTIONS: set[tuple[str, str]] = set()

ACCEPT_TARGET = 0.98
REJECT_TARGET = 0.90


def tool_slugs() -> list[str]:
    return [slug for slug in rt.slugs() if rt.module(slug).SPEC["tools"]["format"] != "none"]


TOOL_CASES = [(slug, kind) for slug in tool_slugs() for kind in rt.TOOL_KINDS]


def _one_call(slug):
    """The module and its one-call case (the test is skipped without one)."""
    case = rt.make_case(slug, rt.TOOL_KINDS[0])
    if case is None:
        pytest.skip("no one-call case")
    return rt.module(slug), case


# ---------------------------------------------------------------------------
# where a server switches the lazy grammar on, and what breaks a call


def trigger_start(triggers: list[dict], text: str) -> int | None:
    """Where a server following llama.cpp's rules starts feeding the tool-call grammar:
    a word where it first occurs, a pattern where it first matches, a whole-output
    pattern at its first group; None when no trigger fires."""
    starts = []
    for trigger in triggers:
        kind, value = trigger["type"], trigger["value"]
        if kind == 1:
            at = text.find(value)
        elif kind == 2:
            match = re.search(value, text)
            at = match.start() if match else -1
        else:
            match = re.fullmatch(value, text)
            at = (match.start(1) if match.re.groups else 0) if match else -1
        if at >= 0:
            starts.append(at)
    return min(starts) if starts else None


def closing_marker(spec: dict) -> str:
    """The literal that closes a call: its end marker, else the object's brace."""
    tools = spec["tools"]
    if tools["format"] == "json":
        return (tools["call"].get("end") or "").strip() or "}"
    return tools["call"]["parts"][-1]["after"].strip() or "}"


def corrupt(text: str, spec: dict, start: int) -> str:
    """``text`` with the last call's closing marker broken (its middle character
    replaced). A closer the end of the turn cut off (it starts with the end-of-turn
    marker) is not in the text after ``start``: the call object's last brace is."""
    marker = closing_marker(spec)
    at = text.rfind(marker)
    if at <= start:
        marker, at = "}", text.rfind("}")
    assert at > start, "no closing marker after the calls' start"
    middle = at + len(marker) // 2
    return text[:middle] + ("#" if text[middle] != "#" else "@") + text[middle + 1 :]


# ---------------------------------------------------------------------------
# one case's outcome


@dataclass(frozen=True)
class Outcome:
    accepted: bool  # grammar() accepts the text
    accepted_from_trigger: bool  # tool_call_grammar() accepts it from the trigger
    rejected: bool  # grammar() rejects the corrupted text
    rejected_from_trigger: bool  # tool_call_grammar() rejects it from the trigger
    why: str = ""


@functools.lru_cache(maxsize=None)
def outcome(slug: str, kind: rt.Kind) -> Outcome | None:
    case = rt.make_case(slug, kind)
    if case is None:
        return None
    module = rt.module(slug)
    whole = module.grammar(tools=case.tools, enable_thinking=kind.enable_thinking)
    calls = module.tool_call_grammar(tools=case.tools)
    start = trigger_start(module.TRIGGERS, case.text)
    broken = corrupt(case.text, module.SPEC, start or 0)
    broken_start = trigger_start(module.TRIGGERS, broken)
    accepted = accepts(whole, case.text, slug)
    from_trigger = start is not None and accepts(calls, case.text[start:], slug)
    rejected = not accepts(whole, broken, slug)
    rejected_from_trigger = broken_start is None or not accepts(calls, broken[broken_start:], slug)
    why = []
    if not accepted:
        why.append(f"grammar rejects the text: {why_rejected(whole, case.text)[:300]}")
    if start is None:
        why.append("no trigger fires")
    elif not from_trigger:
        why.append(f"tool_call_grammar rejects: {why_rejected(calls, case.text[start:])[:300]}")
    if not rejected:
        why.append(f"grammar accepts the corrupted text {broken[-80:]!r}")
    if not rejected_from_trigger:
        why.append(f"tool_call_grammar accepts the corrupted text {broken[-80:]!r}")
    summary = f"{case.text!r}: " + "; ".join(why) if why else ""
    return Outcome(accepted, from_trigger, rejected, rejected_from_trigger, summary)


def _passes(result: Outcome) -> bool:
    return result.accepted and result.accepted_from_trigger and result.rejected and result.rejected_from_trigger


@pytest.mark.parametrize("slug,kind", TOOL_CASES, ids=[f"{s}-{k.name}" for s, k in TOOL_CASES])
def test_tool_case(slug, kind):
    result = outcome(slug, kind)
    if result is None:
        pytest.skip("the template cannot express this case")
    if (slug, kind.name) in KNOWN_REJECTIONS:
        assert not _passes(result), "passes now: drop it from KNOWN_REJECTIONS"
        pytest.xfail("known: see KNOWN_REJECTIONS")
    if (slug, kind.name) in KNOWN_FAILURES and not _passes(result):
        pytest.xfail("a known round-trip failure (tests/test_roundtrip.py)")
    assert _passes(result), result.why


# ---------------------------------------------------------------------------
# the figures


def figures(slugs=None) -> dict:
    """Counts over the expressible tool cases: all of them, and those that are not
    known round-trip failures; with the failing cases per template."""
    counts = {
        scope: {"texts": 0, "accepted": 0, "from_trigger": 0, "rejected": 0, "rejected_from_trigger": 0}
        for scope in ("all", "not_known")
    }
    failing = defaultdict(list)
    for slug in slugs or tool_slugs():
        for kind in rt.TOOL_KINDS:
            result = outcome(slug, kind)
            if result is None:
                continue
            scopes = ["all"] + ([] if (slug, kind.name) in KNOWN_FAILURES else ["not_known"])
            for scope in scopes:
                tally = counts[scope]
                tally["texts"] += 1
                tally["accepted"] += result.accepted
                tally["from_trigger"] += result.accepted_from_trigger
                tally["rejected"] += result.rejected
                tally["rejected_from_trigger"] += result.rejected_from_trigger
            if not _passes(result):
                marks = "".join(
                    mark if ok else "-"
                    for mark, ok in zip("ATRr", (result.accepted, result.accepted_from_trigger,
                                                 result.rejected, result.rejected_from_trigger),
                                         strict=True)  # fmt: skip
                )
                known = " (known round-trip failure)" if (slug, kind.name) in KNOWN_FAILURES else ""
                failing[slug].append(f"{kind.name} {marks}{known}")
    return {"counts": counts, "failing": dict(failing)}


def report(result: dict, out=sys.stdout) -> None:
    def rate(part, whole):
        return f"{part}/{whole} = {part / whole:.1%}" if whole else "n/a"

    for scope, title in (("all", "all tool cases"), ("not_known", "without known round-trip failures")):
        tally = result["counts"][scope]
        texts = tally["texts"]
        print(f"{title} ({texts} rendered texts):", file=out)
        print(f"  grammar accepts the text:               {rate(tally['accepted'], texts)}", file=out)
        print(f"  tool_call_grammar accepts from trigger: {rate(tally['from_trigger'], texts)}", file=out)
        print(f"  grammar rejects the corrupted text:     {rate(tally['rejected'], texts)}", file=out)
        print(f"  tool_call_grammar rejects it:           {rate(tally['rejected_from_trigger'], texts)}", file=out)
    print("failing cases (A: accepted, T: accepted from the trigger, R/r: corrupted rejected):", file=out)
    for slug, cases in sorted(result["failing"].items()):
        print(f"  {slug}: {', '.join(cases)}", file=out)


def test_figures(capsys):
    """Acceptance: the grammars accept >= 98% of the rendered texts and reject >= 90% of
    the corrupted ones (known round-trip failures left out; all cases printed too)."""
    result = figures()
    with capsys.disabled():
        print()
        report(result)
    tally = result["counts"]["not_known"]
    if not tally["texts"]:
        pytest.skip("no corpus: run make templates")
    assert tally["texts"] >= 200
    for key in ("accepted", "from_trigger"):
        assert tally[key] / tally["texts"] >= ACCEPT_TARGET, (key, tally)
    for key in ("rejected", "rejected_from_trigger"):
        assert tally[key] / tally["texts"] >= REJECT_TARGET, (key, tally)


# ---------------------------------------------------------------------------
# triggers

# Regular-expression syntax that ECMAScript (llama.cpp) and Python read differently, or
# that only one of them has.
NOT_PORTABLE = re.compile(r"\(\?|\\[dDwWbBsSAZzpP](?<!\\s)|\\[0-9]|\{,")


@pytest.mark.parametrize("slug", tool_slugs())
def test_triggers(slug):
    module = rt.module(slug)
    assert module.TRIGGERS, "a format with tool calls needs a trigger"
    spec_triggers = module.SPEC["grammar"]["triggers"]
    kinds = {"word": 1, "pattern": 2, "pattern_full": 3}
    assert [t["type"] for t in module.TRIGGERS] == [kinds[t["type"]] for t in spec_triggers]
    for trigger in module.TRIGGERS:
        if trigger["type"] != 1:
            re.compile(trigger["value"])
            assert not NOT_PORTABLE.search(trigger["value"].replace("[\\s\\S]", "")), trigger
        if trigger["type"] == 3:
            assert re.compile(trigger["value"]).groups == 1


@pytest.mark.parametrize("slug", tool_slugs())
def test_content_does_not_set_off_the_trigger(slug):
    """A plain answer never switches the tool-call grammar on (the content opener of
    a format may hold its call marker: then the trigger is a pattern)."""
    module = rt.module(slug)
    checked = 0
    for kind in rt.CONTENT_KINDS:
        case = rt.make_case(slug, kind)
        if case is None or (slug, kind.name) in KNOWN_FAILURES:
            continue
        assert trigger_start(module.TRIGGERS, case.text) is None, case.text
        checked += 1
    if not checked:
        pytest.skip("no content case")


WHOLE_OUTPUT = [slug for slug in tool_slugs() if rt.module(slug).TRIGGERS[0]["type"] == 3]


@pytest.mark.parametrize("slug", WHOLE_OUTPUT)
def test_whole_output_trigger_starts_at_the_call(slug):
    module, case = _one_call(slug)
    for lead in ("", "\n  "):
        assert trigger_start(module.TRIGGERS, lead + case.text) == len(lead)
    assert trigger_start(module.TRIGGERS, "Sure. " + case.text) is None


# ---------------------------------------------------------------------------
# what the grammars refuse


def _first(kind_name: str):
    return next(kind for kind in rt.TOOL_KINDS if kind.name == kind_name)


WORD_TRIGGERED = [slug for slug in tool_slugs() if rt.module(slug).TRIGGERS[0]["type"] in (1, 2)]


@pytest.mark.parametrize("slug", WORD_TRIGGERED)
def test_trigger_in_content_needs_a_call(slug):
    """Content that holds the trigger without a well-formed call after it is refused
    (DESIGN.md); the same content followed by a call is not."""
    module = rt.module(slug)
    calls = format_of(slug).calls
    assert calls is not None
    word = calls.trigger
    case = rt.make_case(slug, _first("content_then_tool_call"))
    plain = rt.make_case(slug, rt.CONTENT_KINDS[0])
    if plain is None or (slug, "content") in KNOWN_FAILURES:
        pytest.skip("no content case")
    content = rt.CONTENT_KINDS[0].content
    broken = plain.text.replace(content, content[:10] + word + " " + content[10:])
    grammar = module.grammar(enable_thinking=True)
    assert accepts(grammar, plain.text, slug), why_rejected(grammar, plain.text)
    assert not accepts(grammar, broken, slug), broken
    if case is not None and (slug, case.kind.name) not in KNOWN_FAILURES | KNOWN_REJECTIONS:
        assert accepts(module.grammar(tools=case.tools), case.text, slug)


UNIT_CONTENT = [slug for slug in tool_slugs() if format_of(slug).content_as_unit]


@pytest.mark.parametrize("slug", UNIT_CONTENT)
def test_calls_after_content_that_is_a_unit(slug):
    """Where the content is a unit of the turn (model.Format.content_as_unit), the call
    separator after it starts calls: a trigger fires just after it, and the grammars
    take content then calls for tool_choice "auto" and "required" (not "none"), and
    refuse the separator in content when no call follows it."""
    module = rt.module(slug)
    calls = format_of(slug).calls
    assert calls is not None
    plain = rt.make_case(slug, rt.CONTENT_KINDS[0])
    one = rt.make_case(slug, rt.TOOL_KINDS[0])
    if plain is None or one is None:
        pytest.skip("no content or one-call case")
    separator = calls.separator.strip()
    call = one.text.strip()
    text = plain.text + separator + call
    assert trigger_start(module.TRIGGERS, text) == len(plain.text) + len(separator)
    parsed = module.parse(text, tools=one.tools)
    assert parsed["tool_calls"] and parsed["content"] == module.parse(plain.text)["content"]
    for choice, verdict in (("auto", True), ("required", True), ("none", False)):
        grammar = module.grammar(tools=one.tools, tool_choice=choice)
        assert accepts(grammar, text, slug) == verdict, (choice, text)
    stray = plain.text + separator + " more text"
    assert module.parse(stray)["tool_calls"] == []
    assert trigger_start(module.TRIGGERS, stray) is None
    assert not accepts(module.grammar(tools=one.tools), stray, slug)


@pytest.mark.parametrize("slug", tool_slugs())
def test_names_are_limited_to_the_tools(slug):
    module, case = _one_call(slug)
    other = case.text.replace("get_weather", "get_forecast")
    assert accepts(module.grammar(), other, slug), why_rejected(module.grammar(), other)
    assert not accepts(module.grammar(tools=case.tools), other, slug)
    start = trigger_start(module.TRIGGERS, other)
    calls = module.tool_call_grammar(tools=case.tools)
    assert start is not None and not accepts(calls, other[start:], slug)
    assert accepts(module.tool_call_grammar(), other[start:], slug)


@pytest.mark.parametrize("slug", tool_slugs())
def test_long_arguments(slug):
    """A long argument value (llguidance caps an Earley row; values are single lexemes)."""
    module, case = _one_call(slug)
    text = case.text.replace("Tokyo", "Tokyo " * 2000)
    grammar = module.grammar(tools=case.tools, enable_thinking=case.kind.enable_thinking)
    assert accepts(grammar, text, slug), why_rejected(grammar, text)


# ---------------------------------------------------------------------------
# the generated functions


HOSTILE_NAMES = ['we"ird\\name', "tab\tand\nnewline", "日本語", "x ::= root"]


@pytest.mark.parametrize("slug", tool_slugs())
def test_module_functions_match_the_generator(slug):
    module = rt.module(slug)
    fmt = format_of(slug)
    assert fmt.calls is not None
    assert module.GBNF_TOOLS == module.tool_call_grammar() == gbnf.build_tool_calls(fmt)
    tools: list[object] = [
        {"type": "function", "function": {"name": name}} for name in HOSTILE_NAMES
    ]
    tools += [{"name": "get_weather"}]
    for malformed in ("not a tool", {"function": {"name": 7}}):
        with pytest.raises(ValueError, match=r"tools\[%d\]" % len(tools)):
            module.grammar(tools=tools + [malformed])  # tests/test_caller_mistakes.py
    for thinking in (True, False):
        limited = module.grammar(tools=tools, enable_thinking=thinking)
        assert limited == gbnf.build(fmt, enable_thinking=thinking, tools=tools)
        assert module.grammar(tools=[], enable_thinking=thinking) == module.grammar(enable_thinking=thinking)
    limited = module.tool_call_grammar(tools=tools)
    assert limited == gbnf.build_tool_calls(fmt, tools=tools)
    rule = next(line for line in limited.splitlines() if line.startswith(gbnf.NAME_RULE + " ::= "))
    names = HOSTILE_NAMES + ["get_weather"]
    if fmt.calls.format == "json":
        names = [json.dumps(name, ensure_ascii=False)[1:-1] for name in names]
    assert rule == f"{gbnf.NAME_RULE} ::= " + " | ".join(map(gbnf.literal, names))
    compile_grammar(limited, slug)


def test_plain_modules_have_no_tool_grammar():
    for slug in rt.slugs():
        module = rt.module(slug)
        if module.SPEC["tools"]["format"] == "none" and not module.TRIGGERS:
            assert module.tool_call_grammar() is None and module.GBNF_TOOLS is None
            assert module.grammar(tools=[{"name": "f"}]) == module.GBNF


def test_a_hostile_name_is_one_literal():
    module = rt.module("qwen3_coder")
    name = 'we"ird\\name>'
    text = f"<tool_call>\n<function={name}>\n</function>\n</tool_call>"
    tools = [{"type": "function", "function": {"name": name}}]
    assert accepts(module.grammar(tools=tools), text)
    assert not accepts(module.grammar(tools=tools), text.replace(name, "weird"))


# ---------------------------------------------------------------------------
# a call written as one JSON object


def _call(fields: dict) -> str:
    return "<tool_call>\n" + json.dumps(fields) + "\n</tool_call>"


def test_json_call_fields_in_any_order():
    module = rt.module("qwen_qwen2_5_7b_instruct")
    grammar = module.grammar(tools=[rt.TOOLS["get_weather"]])
    arguments = {"city": "Tokyo"}
    accepted: list[dict[str, Any]] = [
        {"name": "get_weather", "arguments": arguments},
        {"arguments": arguments, "name": "get_weather"},
    ]
    for fields in accepted:
        assert accepts(grammar, _call(fields)), why_rejected(grammar, _call(fields))
    refused: list[dict[str, Any]] = [
        {"name": "get_weather"},
        {"arguments": arguments},
        {"name": "get_time", "arguments": arguments},
        {"name": "get_weather", "arguments": "{}"},
        {"name": "get_weather", "arguments": [1]},
        {"name": "get_weather", "arguments": {}},  # the schema requires "city"
        # members the template never writes: the reader refuses such a call (issue 12)
        {"id": "x", "arguments": arguments, "name": "get_weather"},
        {"arguments": arguments, "extra": [1, {"a": None}], "name": "get_weather"},
    ]
    for fields in refused:
        assert not accepts(grammar, _call(fields)), fields
    twice = _call({"name": "get_weather", "arguments": arguments})[:-len("}\n</tool_call>")]
    assert not accepts(grammar, twice + ', "name": "get_weather"}\n</tool_call>')


if __name__ == "__main__":
    report(figures())


# ---------------------------------------------------------------------------
# content that must not start like a call (formats whose calls no marker opens)

PIECES = ["{", '"', "name", '"name"', ":", " ", "\n", "x", "n", "get_weather", "é"]


@pytest.mark.parametrize("slug", WHOLE_OUTPUT)
def test_content_never_starts_like_a_call(slug):
    """Where a pattern over the whole output is the trigger, content is text that the
    pattern does not match (else a call whose closing is broken would pass as content)."""
    shape = whole_output_shape(format_of(slug).calls)
    assert shape is not None, "a whole-output trigger without a shape"
    pattern = re.compile(regex(shape) + ")")
    grammar = f"root ::= {gbnf._not_starting_with(shape)}\nany ::= {gbnf.ANY_CHAR}*\n"
    for size in range(5):
        for pieces in itertools.product(PIECES, repeat=size):
            text = "".join(pieces)
            assert accepts(grammar, text, slug) == (pattern.match(text) is None), repr(text)
