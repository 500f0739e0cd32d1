"""A call id the model repeats (issue 24): the first call that has it keeps it, a later
call repeating it gets none (a server gives it one of its own), in ``parse`` and in
the stream at every chunking — a call abandoned by the stream never held an id.

Mistral Small 3.2 and Solar render the repeated ids themselves (the template is the
oracle); Mistral Nemo's calls are written from its spec.
"""

from __future__ import annotations

import json

import pytest

from tests import roundtrip as rt
from tests.test_value_types import read

RENDERED = ("mistral_small_3_2_24b_instruct_2506", "upstage_solar_open_100b")
NEMO = "mistralai_mistral_nemo_instruct_2407"


def rendered(slug, ids):
    """The template's text of a turn with one call per id in ``ids``."""
    spec = rt.load_spec(slug)
    kind = rt.Kind(
        "ids", "", calls=tuple(("get_weather", {"city": f"c{n}"}) for n in range(len(ids)))
    )
    calls = [
        rt.tool_call(spec, n, name, arguments, call_id)
        for n, ((name, arguments), call_id) in enumerate(zip(kind.calls, ids, strict=True))
    ]
    message = rt.assistant_message(spec, "", None, calls)
    tools = rt.template_tools(spec, rt.tool_definitions(kind))
    prefix, full = rt._render_pair(spec, rt.template_for(spec), message, kind, tools)
    assert full.startswith(prefix)
    template = rt.template_for(spec)
    assert template is not None
    return rt.cut_end_of_turn(full[len(prefix) :], rt.end_of_turn_markers(spec, template))


def nemo(ids):
    """Mistral Nemo's calls, one per id, from its spec's literals."""
    tools = rt.load_spec(NEMO)["tools"]
    objects = [
        json.dumps({"name": "get_weather", "arguments": {"city": f"c{n}"}, "id": call_id})
        for n, call_id in enumerate(ids)
    ]
    section = tools["section"]
    return section["start"] + tools["call"]["separator"].join(objects) + section["end"]


CASES = [(slug, rendered) for slug in RENDERED] + [(NEMO, lambda _slug, ids: nemo(ids))]


def ids_read(slug, text):
    message = read(rt.module(slug), text)
    return [call["id"] for call in message["tool_calls"]]


@pytest.mark.parametrize("slug,write", CASES, ids=[slug for slug, _ in CASES])
def test_the_first_call_keeps_a_repeated_id(slug, write):
    assert ids_read(slug, write(slug, ["call00001", "call00002"])) == ["call00001", "call00002"]
    assert ids_read(slug, write(slug, ["call00001", "call00001"])) == ["call00001", None]
    found = ids_read(slug, write(slug, ["abcdefghi", "call00001", "abcdefghi", "abcdefghi"]))
    assert found == ["abcdefghi", "call00001", None, None]


@pytest.mark.parametrize("slug", RENDERED)
def test_an_id_of_a_call_that_proved_malformed_is_free(slug):
    """A first call whose arguments never close is content; the stream sent it and
    abandoned it. The well-formed call after it that repeats its id keeps the id."""
    text = rendered(slug, ["call00001"])
    broken = text.replace('{"city": "c0"}', '{"city": "c0"', 1)
    message = read(rt.module(slug), broken + "\n" + text.replace("c0", "c1"))
    assert [call["id"] for call in message["tool_calls"]] == ["call00001"], message
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"city": "c1"}
    assert message["content"].startswith(broken)


@pytest.mark.parametrize(
    "call_id, taken",
    [("abc123XYZ", True), ("abc123XYZ0", False), ("abc12XYZ", False), ("abc-23XYZ", False)],
)
def test_the_grammar_holds_an_id_to_the_form_the_template_checks(call_id, taken):
    """Mistral Nemo's template raises on a call id that is not nine letters or
    digits; its calls' GBNF and Lark grammar take only ids of that form (a small
    model held to it once wrote an id of a hundred digits and never closed the
    call)."""
    from tests.test_grammar import accepts
    from tests.test_lark import accepts as lark_accepts

    module = rt.module(NEMO)
    tools = [rt.TOOLS["get_weather"]]
    grammar = module.tool_call_grammar(tools, parallel_tool_calls=False)
    call = {"name": "get_weather", "arguments": {"city": "Paris"}, "id": call_id}
    text = "[TOOL_CALLS][" + json.dumps(call) + "]"
    assert accepts(grammar, text) is taken, text
    assert lark_accepts(module.lark_grammar(tools), text, NEMO) is taken, text
    # the id read back as written where the grammar takes it
    if taken:
        message = module.parse(text, tools=tools, strict=True)
        assert message["tool_calls"][0]["id"] == call_id


# A call id, or another member the template writes beside a call (an index, a type),
# in no form the template checks: held short in every grammar (the live run: Command
# R7B and Cohere2MoE wrote a `tool_call_id` of a hundred digits and never closed the
# call). compiler/codegen/gbnf.py's ID_LONGEST, INTEGER_DIGITS: 64 characters, 18
# digits; written out here, so that a change to them is a change to this test.
LONGEST, DIGITS = 64, 18
COHERE = ("cohere2moe", "cohereforai_c4ai_command_r7b_12_2024_tool_use")


def _exports(slug, tools):
    """export → whether it takes an output (from the trigger on, for the GBNF)."""
    from tests.test_grammar import accepts
    from tests.test_lark import accepts as lark_accepts
    from tests.test_tool_grammar import trigger_start

    module = rt.module(slug)
    gbnf = module.tool_call_grammar(tools, parallel_tool_calls=False)
    lark = module.lark_grammar(tools)

    def lazy(text):
        return text[trigger_start(module.TRIGGERS, text) :]

    return {
        "gbnf": lambda text: accepts(gbnf, lazy(text), slug),
        "lark": lambda text: lark_accepts(lark, text, slug),
    }


def _cohere_call(slug):
    from tests.test_tool_choice_gbnf import _call_kind, _output

    text = _output(slug, _call_kind("get_weather", {"city": "Paris"}))
    assert text is not None and text.count('"tool_call_id": "0"') == 1, text
    return text


@pytest.mark.parametrize("slug", COHERE)
@pytest.mark.parametrize(
    "value, taken",
    [
        ('"0"', True),  # the template's own: its counter
        ('"%s"' % ("7" * LONGEST), True),
        ('"%s"' % ("7" * (LONGEST + 1)), False),
        ('"chatcmpl-tool-%s"' % ("ab12" * 8), True),  # vLLM's
        ("3", True),
        ("9" * DIGITS, True),
        ("9" * (DIGITS + 1), False),
        ("null", True),
        ('{"a": 1}', False),
    ],
)
def test_a_member_the_template_writes_beside_the_call_is_short(slug, value, taken):
    tools = [rt.TOOLS["get_weather"]]
    text = _cohere_call(slug).replace('"tool_call_id": "0"', '"tool_call_id": ' + value)
    for export, takes in _exports(slug, tools).items():
        assert takes(text) is taken, (export, value)
    # parse reads the call whatever the member holds
    assert rt.module(slug).parse(text, tools=tools)["tool_calls"], text


@pytest.mark.parametrize(
    "slug, call_id, taken",
    [
        ("upstage_solar_open_100b", "call00001", True),
        ("upstage_solar_open_100b", "c" * LONGEST, True),
        ("upstage_solar_open_100b", "c" * (LONGEST + 1), False),
        # Mistral Small 3.2's template checks ids as Nemo's does: nine letters or digits
        ("mistral_small_3_2_24b_instruct_2506", "call00001", True),
        ("mistral_small_3_2_24b_instruct_2506", "call000012", False),
        ("mistral_small_3_2_24b_instruct_2506", "call-0001", False),
    ],
)
def test_an_id_written_between_markers_is_held_short(slug, call_id, taken):
    tools = [rt.TOOLS["get_weather"]]
    text = rendered(slug, ["call00001"]).replace("call00001", call_id)
    for export, takes in _exports(slug, tools).items():
        assert takes(text) is taken, (export, call_id)
    if taken:
        assert ids_read(slug, text) == [call_id]
