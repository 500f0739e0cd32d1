"""The bounds of a tool's JSON schema in xgrammar's structural tag (``make
test-exports``): the calls of tests/test_schema_bounds.py, rendered by each format's
template inside the bounds and outside them. Where the arguments are JSON the tag
holds them with xgrammar's own JSON schema reader (every bound); where a value is the
format's own text (a string up to its closer) it is not counted, unlike in the GBNF
and Lark (xgrammar would take seconds to compile the rules that count it:
docs/exports.md)."""

from __future__ import annotations

import pytest

from tests import roundtrip as rt
from tests import test_call_ids as call_ids
from tests import test_schema_bounds as bounds
from tests.exports.test_structural_tag import accepts

pytest.importorskip("xgrammar")

# What the tag refuses, per format (strict, as tests/test_schema_bounds.py's REFUSED):
# xgrammar reads every JSON value by its schema; a Python literal's array and one in
# the template's own syntax (LFM2.5, Gemma 4) reach the tag as the GBNF's rules for
# them, held to their counts; their strings are quoted or raw text, uncounted (the
# GBNF and Lark count a raw one).
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


@pytest.mark.parametrize("slug", bounds._raw_slugs())
def test_a_raw_string_the_gbnf_takes_the_tag_takes(slug, monkeypatch):
    """The template's notes within maxLength are taken, as the GBNF takes them; those
    one character longer too (the tag does not count them)."""
    monkeypatch.setitem(rt.TOOLS, "note", bounds.NOTE)
    tag = rt.module(slug).structural_tag(tools=[bounds.NOTE], parallel_tool_calls=False)
    texts = [bounds._note(slug, value) for value in bounds.WITHIN + bounds.BEYOND]
    for text in filter(None, texts):
        assert accepts(tag, text), text


@pytest.mark.parametrize("slug", call_ids.COHERE)
@pytest.mark.parametrize(
    "value, taken",
    [
        ('"0"', True),
        ('"%s"' % ("7" * call_ids.LONGEST), True),
        ('"%s"' % ("7" * (call_ids.LONGEST + 1)), False),
        ("9" * call_ids.DIGITS, True),
        ("9" * (call_ids.DIGITS + 1), False),
    ],
)
def test_a_member_beside_the_call_is_short_in_the_tag(slug, value, taken):
    """As in the GBNF and Lark (tests/test_call_ids.py)."""
    tag = rt.module(slug).structural_tag(tools=[rt.TOOLS["get_weather"]])
    text = call_ids._cohere_call(slug).replace('"tool_call_id": "0"', '"tool_call_id": ' + value)
    assert accepts(tag, text) is taken, value


@pytest.mark.parametrize(
    "slug, call_id, taken",
    [
        ("upstage_solar_open_100b", "c" * call_ids.LONGEST, True),
        ("upstage_solar_open_100b", "c" * (call_ids.LONGEST + 1), False),
        ("mistral_small_3_2_24b_instruct_2506", "call00001", True),
        ("mistral_small_3_2_24b_instruct_2506", "call000012", False),
    ],
)
def test_an_id_between_markers_is_held_short_in_the_tag(slug, call_id, taken):
    tag = rt.module(slug).structural_tag(tools=[rt.TOOLS["get_weather"]])
    text = call_ids.rendered(slug, ["call00001"]).replace("call00001", call_id)
    assert accepts(tag, text) is taken, call_id


def test_mistral_nemo_s_id_is_held_to_its_form_in_the_tag():
    nemo = call_ids.NEMO
    tag = rt.module(nemo).structural_tag(tools=[rt.TOOLS["get_weather"]])
    for call_id, taken in (("abc123XYZ", True), ("abc123XYZ0", False), ("abc-23XYZ", False)):
        assert accepts(tag, call_ids.nemo([call_id])) is taken, call_id
