"""The GBNF and Lark grammars of the formats that read calls in our fallback format
(the template writes none: tests/fallback_outputs.py), on hand-written outputs that
``parse`` reads back: the whole-output grammars accept them, the tool-call grammar
accepts them from where a trigger fires, and a broken closing marker is refused; the
tool_choice settings hold. (The round trip's content texts of these formats are in
tests/test_grammar.py, tests/test_lark.py and tests/exports.)"""

from __future__ import annotations

import pytest

from tests import roundtrip as rt
from tests.fallback_outputs import TOOLS, broken, fallback_slugs, outputs
from tests.test_grammar import accepts, why_rejected
from tests.test_tool_grammar import trigger_start

lark = pytest.importorskip("tests.test_lark")

SLUGS = fallback_slugs()


def _named(name: str) -> dict:
    return {"type": "function", "function": {"name": name}}


def _grammars(module, **choice) -> list:
    """(accepts, grammar) for the GBNF and the Lark grammar of a setting."""
    return [
        (lambda g, t: accepts(g, t, module.__name__), module.grammar(tools=TOOLS, **choice)),
        (lark.accepts, module.lark_grammar(tools=TOOLS, **choice)),
    ]


def test_there_are_fallback_formats():
    assert len(SLUGS) >= 1


@pytest.mark.parametrize("slug", SLUGS)
def test_calls_accepted_and_broken_ones_refused(slug):
    module = rt.module(slug)
    found = outputs(slug)
    assert set(found) == {"one_call", "content_then_call", "two_calls"}, found
    calls = module.tool_call_grammar(tools=TOOLS)
    for output in found.values():
        for accepted, grammar in _grammars(module):
            assert accepted(grammar, output.text), (output.name, output.text)
            assert not accepted(grammar, broken(output)), broken(output)
        start = trigger_start(module.TRIGGERS, output.text)
        assert start is not None, output.text
        assert accepts(calls, output.text[start:], slug), why_rejected(calls, output.text[start:])
        cut = broken(output)
        assert not accepts(calls, cut[trigger_start(module.TRIGGERS, cut) or 0 :], slug)


@pytest.mark.parametrize("slug", SLUGS)
def test_tool_choice(slug):
    module = rt.module(slug)
    found = outputs(slug)
    plain = rt.make_case(slug, rt.CONTENT_KINDS[0])
    settings = [
        ({"tool_choice": "required"}, {"one_call", "content_then_call", "two_calls"}),
        ({"tool_choice": "none"}, {"plain"}),
        ({"tool_choice": _named("get_time")}, set()),
        ({"tool_choice": _named("get_weather")}, {"one_call", "content_then_call"}),
        ({"parallel_tool_calls": False}, {"one_call", "content_then_call", "plain"}),
    ]
    texts = {name: output.text for name, output in found.items()}
    if plain is not None:
        texts["plain"] = plain.text
    wrong = []
    for choice, accepted_names in settings:
        for accepted, grammar in _grammars(module, **choice):
            for name, text in texts.items():
                if accepted(grammar, text) != (name in accepted_names):
                    wrong.append((choice, name, text))
    assert not wrong, wrong
