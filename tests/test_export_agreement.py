"""The GBNF, the Lark grammar and ``parse`` agree on what a model held to the GBNF
writes (issue 33: the first live run found the exports refusing what the GBNF took,
and the GBNF taking what the schema refuses). llguidance reads both grammars, one
token per byte; tests/agreement.py has the texts, tests/exports/test_agreement.py
holds the structural tag (xgrammar) to the same.

- every corpus format's own call, a line break written at each place a model may
  write one: where the GBNF takes the text, Lark takes it and ``parse`` reads one
  call valid under the schema;
- the first live run's outputs: what the GBNF takes of each (whole, or as far as the
  run went), Lark takes; where the GBNF takes one whole, ``parse`` reads a valid
  call; and the cases that run found, each refused or taken as it should be.
"""

from __future__ import annotations

import functools

import pytest

llguidance = pytest.importorskip("llguidance")

from tests import agreement  # noqa: E402
from tests.test_grammar import EOS  # noqa: E402
from tests.test_grammar import _matcher as gbnf_matcher  # noqa: E402
from tests.test_lark import _matcher as lark_matcher  # noqa: E402

SLUGS = agreement.slugs()


def _taken(matcher, text: str) -> tuple[bool, bool]:
    """(whether the matcher takes every byte of ``text``, and whether it may end
    there)."""
    data = text.encode("utf-8")
    if matcher.try_consume_tokens(list(data)) != len(data):
        return False, False
    return True, matcher.is_accepting() and matcher.consume_token(EOS)


@functools.cache
def _grammars(slug: str) -> dict:
    return agreement.grammars(slug)


def gbnf(slug: str, text: str) -> tuple[bool, bool]:
    """The calls' GBNF over ``text`` (from the trigger on)."""
    return _taken(gbnf_matcher(_grammars(slug)["gbnf"], slug).deep_copy(), text)


def lark(slug: str, text: str) -> tuple[bool, bool]:
    """The whole output's Lark grammar over ``text`` (an output)."""
    return _taken(lark_matcher(_grammars(slug)["lark"], slug), text)


# Formats whose GBNF does not yet hold every value to its schema, with the cause.
UNTYPED = {
    "minimax_m3": "an object MiniMax M3 writes as nested markup (<contact>]<]minimax[>[<name>"
    "...) is any text to the GBNF; parse reads it as an object only when the markup follows"
    " the key's marker at once",
}


@pytest.mark.parametrize(
    "slug",
    [
        pytest.param(slug, marks=pytest.mark.xfail(reason=UNTYPED[slug], strict=True))
        if slug in UNTYPED
        else slug
        for slug in SLUGS
    ],
)
def test_a_spaced_call_is_read_alike(slug):
    call = agreement.call_text(slug)
    if call is None:
        pytest.skip("the template writes no call to book_table that parse reads back")
    assert gbnf(slug, call.text) == (True, True), "the GBNF refuses the template's call"
    trigger = agreement.trigger_of(slug)
    disagree = []
    for at, text in agreement.spaced(call.text, len(trigger)):
        if gbnf(slug, text) != (True, True):
            continue
        output = call.lead + text
        why = []
        if lark(slug, output) != (True, True):
            why.append("Lark refuses it")
        problem = agreement.valid_call(slug, output)
        if problem:
            why.append(problem)
        if why:
            disagree.append((text[max(0, at - 20) : at + 12], why))
    assert not disagree, f"the GBNF takes a line break here, and: {disagree[:5]}"


def test_most_formats_have_a_call_to_check():
    found = [slug for slug in SLUGS if agreement.call_text(slug) is not None]
    assert len(found) >= 0.85 * len(SLUGS), sorted(set(SLUGS) - set(found))


@pytest.mark.parametrize(
    "index", range(len(agreement.live_outputs())), ids=lambda i: agreement.live_outputs()[i]["slug"]
)
def test_the_first_live_runs_outputs(index):
    """Where the GBNF takes an output of the first live run (whole, or as far as the
    run went), Lark takes it too; where the GBNF takes it whole, parse reads one
    valid call from it."""
    found = agreement.live_outputs()[index]
    slug, output = found["slug"], found["output"]
    trigger = agreement.trigger_of(slug)
    at = output.find(trigger) if trigger else 0
    assert at >= 0
    taken, whole = gbnf(slug, output[at:])
    if not taken:
        return  # the GBNF refuses it now (test_what_the_first_run_found says where)
    assert lark(slug, output)[0], f"Lark refuses what the GBNF takes ({found['found']})"
    if whole:
        assert agreement.valid_call(slug, output) == ""


# What the first live run found, each case refused or taken now, and why.
FOUND = [
    # (slug, text from the trigger on, whether the grammars take it whole, whether
    # parse reads one valid call from it (None: not asked), why)
    (
        "qwen3_coder",
        "<tool_call>\n<function=book_table>\n<parameter=restaurant>\nLuigi\n</parameter>\n"
        "<parameter=guests>\n4\n</parameter>\n<parameter=time>\n\n18:00\n</parameter>\n"
        "</function>\n</tool_call>",
        False,
        False,
        "an enum's string after a blank line is '\\n18:00' to parse, outside the enum",
    ),
    (
        "qwen3_coder",
        "<tool_call>\n<function=book_table>\n<parameter=restaurant>\nLuigi\n</parameter>\n"
        "<parameter=guests>\n4\n</parameter>\n<parameter=time>18:00</parameter>\n"
        "</function>\n</tool_call>",
        True,
        True,
        "the enum's string with none of the whitespace the template writes around it",
    ),
    (
        "deepseek_ai_deepseek_v3_2",
        '<｜DSML｜function_calls>\n<｜DSML｜invoke name="book_table">\n<｜DSML｜parameter'
        ' name="restaurant" string="Ada\'s restaurant" />\n<｜DSML｜parameter name="guests"'
        ' string="false">4</｜DSML｜parameter>\n<｜DSML｜parameter name="time" string="true">'
        "19:30</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
        False,
        None,
        "the attribute names the value's type in the template's words, no other text",
    ),
    (
        "deepseek_ai_deepseek_v3_2",
        '<｜DSML｜function_calls>\n<｜DSML｜invoke name="book_table">\n<｜DSML｜parameter'
        ' name="restaurant" string="true">Luigi</｜DSML｜parameter>\n<｜DSML｜parameter'
        ' name="guests" string="false">4</｜DSML｜parameter>\n<｜DSML｜parameter name="time"'
        ' string="true">19:30</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>',
        True,
        True,
        "a string marked true, a number false",
    ),
    (
        "deepseek_ai_deepseek_v3_2",
        '<｜DSML｜function_calls>\n<｜DSML｜invoke name="book_table">\n<｜DSML｜parameter'
        ' name="restaurant" string="true">Luigi</｜DSML｜parameter>\n<｜DSML｜parameter'
        ' name="guests" string="true">4</｜DSML｜parameter>\n<｜DSML｜parameter name="time"'
        ' string="true">19:30</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>',
        False,
        True,
        "an integer marked as a string",
    ),
    (
        "kimi_k3",
        '<|open|>tools<|sep|><|open|>call tool="book_table" index="1"<|sep|><|open|>argument'
        ' key="restaurant" type="string"<|sep|>Luigi<|close|>argument<|sep|><|open|>argument'
        ' key="guests" type="number"<|sep|>4<|close|>argument<|sep|><|open|>argument'
        ' key="time" type="string"<|sep|>19:30<|close|>argument<|sep|><|open|>argument'
        ' key="requests" type="integer"<|sep|>[]<|close|>argument<|sep|>'
        "<|close|>call<|sep|><|close|>tools<|sep|>",
        False,
        True,
        "K3 names an array's type 'array' (the model wrote 'integer')",
    ),
    (
        "mistralai_ministral_3_14b_reasoning_2512",
        '[TOOL_CALLS]book_table\n[ARGS]{"restaurant": "Luigi", "guests": 4, "time": "19:30"}',
        False,
        False,
        "parse ends the name at its word's end and reads no call",
    ),
    (
        "nousresearch_hermes_3_llama_3_1_8b_tool_use",
        '<tool_call>\n{"name": "book_table", "arguments": {"contact": {"name": "Ada", "phone":'
        ' "555-0100"}, "guests": 4, "outdoor": true, "restaurant": "Luigi", "time": "19:30"}}'
        "\n</tool_call>",
        True,
        True,
        "the arguments' keys sorted, as templates that sort keys write them",
    ),
    (
        "nousresearch_hermes_3_llama_3_1_8b_tool_use",
        '<tool_call>\n{"name": "book_table", "arguments": {"guests": 4, "restaurant": "Luigi",'
        ' "time": "19:30", "contact": {"phone": "555-0100", "name": "Ada"}}}\n</tool_call>',
        False,
        True,
        "keys in neither the schema's order nor sorted",
    ),
    (
        "bytedance_seed_oss",
        "<seed:tool_call>\n<function=book_table>\n<parameter=restaurant>Luigi</parameter>\n"
        "<parameter=guests>4</parameter>\n<parameter=time>19:30</parameter>\n"
        "<parameter=contact>{'name': 'Ada'}</parameter>\n</function>\n</seed:tool_call>",
        True,
        True,
        "an object written as a Python dict",
    ),
    (
        "bytedance_seed_oss",
        "<seed:tool_call>\n<function=book_table>\n<parameter=restaurant>Luigi</parameter>\n"
        "<parameter=guests>4</parameter>\n<parameter=time>19:30</parameter>\n"
        "<parameter=contact>Paris</parameter>\n</function>\n</seed:tool_call>",
        False,
        False,
        "text for an object-typed argument",
    ),
    (
        "google_gemma_4_31b_it",
        '<|tool_call>call:book_table{guests:4,requests:<|"|>a chair<|"|>,restaurant:'
        '<|"|>Luigi<|"|>,time:<|"|>19:30<|"|>}<tool_call|>',
        False,
        False,
        "a string for an array-typed argument",
    ),
    (
        "google_gemma_4_31b_it",
        '<|tool_call>call:book_table{guests:4,requests:[<|"|>a chair<|"|>],restaurant:'
        '<|"|>Luigi<|"|>,time:<|"|>19:30<|"|>}<tool_call|>',
        True,
        True,
        "the array in Gemma's own syntax, its keys sorted as the template sorts them",
    ),
    (
        "lfm2_5_8b_a1b",
        '<|tool_call_start|>[\nbook_table\n(\nguests\n=1\n,\nrestaurant\n="Ada"'
        '\n,\ntime\n="19:30"\n)\n]<|tool_call_end|>',
        True,
        True,
        "strings in Python's other quote, an enum's too",
    ),
    (
        "lfm2_5_8b_a1b",
        '<|tool_call_start|>[\n\nbook_table\n\n(\n\nguests\n\n=1\n\n,\n\nrestaurant\n\n="Ada"'
        '\n\n,\n\ntime\n\n="19:30"\n\n)\n\n]<|tool_call_end|>',
        False,
        True,
        "a blank line between every two lexemes (as the first run wrote it): more whitespace"
        " than the grammars' bound (one line break), which parse reads all the same",
    ),
]


@pytest.mark.parametrize(
    "slug,text,taken,read,why", FOUND, ids=[f"{s}: {w}" for s, _, _, _, w in FOUND]
)
def test_what_the_first_run_found(slug, text, taken, read, why):
    """Each is taken by the GBNF and Lark alike or refused by both; a text the
    grammars take parse reads as one valid call (the reader may take more: the
    grammars hold a model to the template's own form)."""
    assert not taken or read, "a case the grammars take must be read"
    lead = agreement.lead_of(slug)
    assert gbnf(slug, text)[1] == taken, why
    assert lark(slug, lead + text)[1] == taken, why
    if read is not None:
        assert (agreement.valid_call(slug, lead + text) == "") == read, why
