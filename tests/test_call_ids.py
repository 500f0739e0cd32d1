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
    digits; its calls' GBNF takes only ids of that form (a small model held to it
    once wrote an id of a hundred digits and never closed the call)."""
    from tests.test_grammar import accepts

    module = rt.module(NEMO)
    tools = [rt.TOOLS["get_weather"]]
    grammar = module.tool_call_grammar(tools, parallel_tool_calls=False)
    call = {"name": "get_weather", "arguments": {"city": "Paris"}, "id": call_id}
    text = "[TOOL_CALLS][" + json.dumps(call) + "]"
    assert accepts(grammar, text) is taken, text
    # the id read back as written where the grammar takes it
    if taken:
        message = module.parse(text, tools=tools, strict=True)
        assert message["tool_calls"][0]["id"] == call_id
