"""The bounds of a tool's JSON schema in xgrammar's structural tag (``make
test-exports``): the calls of tests/test_schema_bounds.py, rendered by each format's
template inside the bounds and outside them. Where the arguments are JSON the tag
holds them with xgrammar's own JSON schema reader (every bound); where a value is the
format's own text (a string up to its closer) it is not counted, as in the GBNF."""

from __future__ import annotations

import pytest

from tests import roundtrip as rt
from tests import test_schema_bounds as bounds
from tests.exports.test_structural_tag import accepts

pytest.importorskip("xgrammar")

# What the tag refuses, per format (strict, as tests/test_schema_bounds.py's REFUSED):
# xgrammar reads every JSON value by its schema; a Python literal's array and one in
# the template's own syntax (LFM2.5, Gemma 4) reach the tag as the GBNF's rules for
# them, held to their counts; their strings are quoted or raw text, uncounted.
REFUSED = {
    slug: (
        bounds.INTEGER | bounds.ARRAY | bounds.STRINGS
        if slug in ("nousresearch_hermes_2_pro_llama_3_8b_tool_use", "qwen_qwen3_0_6b")
        else bounds.INTEGER | bounds.ARRAY
    )
    for slug in bounds.REFUSED
}


@pytest.mark.parametrize("slug", sorted(REFUSED))
def test_a_rendered_call_within_bounds_is_taken_and_one_outside_refused(slug, monkeypatch):
    monkeypatch.setitem(rt.TOOLS, "book", bounds.BOOK)
    tag = rt.module(slug).structural_tag(tools=[bounds.BOOK], parallel_tool_calls=False)
    assert accepts(tag, bounds._rendered(slug, None))
    for what in bounds.BAD:
        refused = what in REFUSED[slug]
        taken = accepts(tag, bounds._rendered(slug, what))
        verdict = "taken, though out of bounds" if refused else "refused now: add it to REFUSED"
        assert taken != refused, (what, verdict)
