"""A request that gives no thinking switch (most requests to a server): every corpus
template and every round-trip case it renders, rendered with the switch left undefined
and parsed with enable_thinking left out, reads as the same case rendered and parsed
with the template's recorded default (capabilities.thinking_switch.default) given
explicitly, and passes the round trip wherever that one does. Where the default is
undecided, no setting stands for it: the case must pass the round trip itself (the
parser reads the output both ways)."""

from __future__ import annotations

import dataclasses
import functools

import pytest

from tests import roundtrip as rt
from tests.test_roundtrip import KNOWN_FAILURES

CASES = [(slug, kind) for slug in rt.slugs() for kind in rt.UNSWITCHED_KINDS]


@functools.lru_cache(maxsize=None)
def standing_for_default(slug: str) -> bool | None:
    """The setting that renders the prompt as a request without the switch does: the
    recorded default's, or where the template has no switch, the setting whose prompt
    is that one; None where none is (an undecided default)."""
    spec = rt.load_spec(slug)
    switch = spec["capabilities"].get("thinking_switch")
    if switch is not None:
        return {"thinking_on": True, "thinking_off": False}.get(switch["default"])
    template = rt.template_for(spec)
    assert template is not None
    prompts = {
        value: template.render(rt.history(spec), add_generation_prompt=True, enable_thinking=value)
        for value in (None, True, False)
    }
    for value in (True, False):
        if prompts[value] == prompts[None]:
            return value
    return None


def known(slug: str, kind: rt.Kind) -> bool:
    return (slug, kind.name) in KNOWN_FAILURES


def check(slug: str, kind: rt.Kind, parser=None) -> str | None:
    """Why the unswitched case of ``kind`` fails (None: it holds, or the template
    cannot express it). ``parser``: the module's parse where it is no corpus module."""
    case = rt.make_case(slug, kind)
    if case is None:
        return None
    unswitched = rt.parse(case, parser)
    setting = standing_for_default(slug)
    if setting is not None:
        explicit = rt.make_case(slug, dataclasses.replace(kind, enable_thinking=setting))
        if explicit is not None:
            given = rt.parse(explicit, parser)
            if unswitched != given:
                return f"without the switch {unswitched!r}; with {setting}: {given!r}"
            if rt.check(explicit, parser)[0] and not rt.check(case, parser)[0]:
                return "passes the round trip with the switch given, not without it"
            return None
    passed, why = rt.check(case, parser)
    return None if passed else why


@pytest.mark.parametrize("slug,kind", CASES, ids=[f"{s}-{k.name}" for s, k in CASES])
def test_a_request_without_the_switch_reads_as_the_template_s_default(slug, kind):
    if rt.make_case(slug, kind) is None:
        pytest.skip("the template cannot express this case")
    if known(slug, kind):
        pytest.xfail("known: see tests/test_roundtrip.py KNOWN_FAILURES")
    why = check(slug, kind)
    assert why is None, why


def test_the_unswitched_round_trip_figure():
    """The figure: the round trip as most requests run it (docs/using-parsers.md)."""
    results = []
    for slug, kind in CASES:
        case = rt.make_case(slug, kind)
        if case is not None:
            results.append(rt.check(case)[0])
    if not results:
        pytest.skip("no corpus: run make templates")
    rate = sum(results) / len(results)
    print(f"round trip without the switch: {sum(results)}/{len(results)} = {rate:.1%}")
    assert len(results) >= 300, "far fewer expressible cases than the corpus gives"
    assert rate >= 0.98


@pytest.mark.parametrize("slug", rt.slugs())
def test_the_default_grammars_are_the_default_s(slug):
    """grammar(), lark_grammar() and structural_tag() without enable_thinking are the
    default's: the grammar of the setting the default names, and where the default is
    undecided, grammars that admit every unswitched text parse reads as well-formed
    (a block where its closer comes, an answer where none does)."""
    from tests.test_grammar import accepts, why_rejected
    from tests.test_lark import accepts as lark_accepts

    module = rt.module(slug)
    if module.MISSING_EXPORTS:
        pytest.skip(f"exports missing: {sorted(module.MISSING_EXPORTS)}")
    tools = [rt.TOOLS["get_weather"]]
    switch = module.SPEC["capabilities"].get("thinking_switch")
    default = switch["default"] if switch else None
    if default != "undecided":
        setting = default != "thinking_off"
        assert module.grammar(tools=tools) == module.grammar(tools=tools, enable_thinking=setting)
        assert module.GBNF == module.grammar(enable_thinking=setting)
        assert module.lark_grammar(tools=tools) == module.lark_grammar(
            tools=tools, enable_thinking=setting
        )
        assert module.structural_tag(tools) == module.structural_tag(tools, enable_thinking=setting)
        return
    checked = 0
    for kind in rt.UNSWITCHED_KINDS:
        case = rt.make_case(slug, kind)
        if case is None or known(slug, kind):
            continue
        try:
            module.parse(case.text, tools=case.tools, strict=True)
        except ValueError:
            continue  # not well-formed as the grammars have it
        checked += 1
        grammar = module.grammar(tools=case.tools)
        assert accepts(grammar, case.text, slug), why_rejected(grammar, case.text)
        assert lark_accepts(module.lark_grammar(tools=case.tools), case.text), kind.name
    assert checked


UNDECIDED = [
    slug
    for slug in rt.slugs()
    if (rt.load_spec(slug)["capabilities"].get("thinking_switch") or {}).get("default")
    == "undecided"
]


@pytest.mark.parametrize("slug", UNDECIDED)
def test_an_undecided_default_streams_as_it_parses(slug):
    """Read both ways, the stream holds text back until the closer or the end of the
    output decides: merged, its deltas are parse's message at every chunking, for each
    unswitched case and for the same texts with the block's closer or a call in them."""
    from tests.test_stream import chunkings, merge, streamed

    module = rt.module(slug)
    end = module.SPEC["reasoning"]["end"]
    texts = []
    for kind in rt.UNSWITCHED_KINDS:
        case = rt.make_case(slug, kind)
        if case is not None:
            texts += [(case.text, case.tools), ("Six sevens." + end + case.text, case.tools)]
    assert texts
    for text, tools in texts:
        whole = module.parse(text, tools=tools)
        for name, cuts in chunkings(text, f"{slug}-{text[:20]}"):
            fed, finished, abandoned = streamed(module, text, cuts, tools=tools)
            assert merge(fed + finished, abandoned) == whole, (name, text)
