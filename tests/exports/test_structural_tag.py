"""Every module's ``structural_tag`` through xgrammar itself (``make test-exports``).

xgrammar needs torch, so this runs only where it is installed (``.venv-exports``);
elsewhere the whole file is skipped. The structural tags are compiled with xgrammar's
grammar compiler over a vocabulary of one token per byte (and an end-of-sequence
token), made here: no tokenizer is downloaded. A text is accepted when the matcher
takes all its bytes and then the end-of-sequence token.

- Acceptance: every round-trip text (tests/roundtrip.py) that ``parse`` reads as
  well-formed (the case passes and ``strict=True`` raises nothing), KNOWN_FAILURES of
  tests/test_roundtrip.py left out, is accepted with the default settings, with the
  case's tools (and, for the content kinds, with none and with all the tools).
- Rejection (≥ 98% of the corruptions): a call to a function not in ``tools`` (the
  same text with the other tools only, and the text with the name changed), an
  argument that breaks its schema (a value outside an enum; a string where the
  format writes JSON arguments replaced by a number), a closing marker with one
  character changed.
- ``tool_choice``: "required" rejects a reply without a call, a named function
  rejects a call to another, ``parallel_tool_calls=False`` rejects a second call,
  "none" rejects a call; each accepts the round-trip texts it should.
"""

from __future__ import annotations

import functools
import json

import pytest

from tests import quoted_samples as quoted
from tests import roundtrip as rt
from tests.fallback_outputs import TOOLS as FALLBACK_TOOLS
from tests.fallback_outputs import broken, fallback_slugs, format_of, outputs
from tests.test_lark import OPTIONS, json_container_slugs
from tests.test_lark import KNOWN_REJECTIONS
from tests.test_roundtrip import KNOWN_FAILURES

xgr = pytest.importorskip("xgrammar")

EOS = 256
ALL_TOOLS = [rt.TOOLS[name] for name in ("get_weather", "get_time", "run_code")]
KINDS = {kind.name: kind for kind in rt.ALL_KINDS}


@functools.cache
def _compiler():
    vocabulary = [bytes([byte]) for byte in range(256)] + [b"</s>"]
    info = xgr.TokenizerInfo(vocabulary, xgr.VocabType.RAW, stop_token_ids=[EOS])
    return xgr.GrammarCompiler(info, max_threads=1)


@functools.lru_cache(maxsize=512)
def _compiled(tag_json: str):
    return _compiler().compile_structural_tag(tag_json)


def accepts(tag: dict, text: str) -> bool:
    matcher = xgr.GrammarMatcher(_compiled(json.dumps(tag, ensure_ascii=False)))
    return matcher.accept_string(text.encode("utf-8")) and matcher.accept_token(EOS)


@functools.cache
def _case(slug: str, kind_name: str):
    """The case when ``parse`` reads its text as well-formed, else None."""
    if (slug, kind_name) in KNOWN_FAILURES:
        return None
    case = rt.make_case(slug, KINDS[kind_name])
    if case is None or not rt.check(case)[0]:
        return None
    try:
        rt.module(slug).parse(
            case.text, tools=case.tools, enable_thinking=case.kind.enable_thinking, strict=True
        )
    except ValueError:
        return None
    return case


def _named(name: str) -> dict:
    return {"type": "function", "function": {"name": name}}


def _tag(slug, tools, **settings):
    return rt.module(slug).structural_tag(tools, **settings)


def _has_calls(slug: str) -> bool:
    """Whether the module reads calls: the template's own, or our fallback format."""
    return format_of(slug).has_calls


SLUGS = rt.slugs()
CALL_SLUGS = [slug for slug in SLUGS if _has_calls(slug)]


# --- acceptance ---------------------------------------------------------------------


@pytest.mark.parametrize("slug", SLUGS)
def test_accepts_every_round_trip_text(slug):
    missed, checked = [], 0
    for kind in rt.ALL_KINDS:
        case = _case(slug, kind.name)
        if case is None:
            continue
        toolsets = [case.tools] if case.tools else [None, ALL_TOOLS]
        for tools in toolsets:
            checked += 1
            tag = _tag(slug, tools, enable_thinking=kind.enable_thinking)
            taken = accepts(tag, case.text)
            if (slug, kind.name) in KNOWN_REJECTIONS:
                # the Lark's and the GBNF's known rejection (a quote the template
                # leaves inside a Python string): the tag holds strings alike
                assert not taken, f"{kind.name}: accepted now; leave KNOWN_REJECTIONS"
            elif not taken:
                missed.append((kind.name, "no tools" if tools is None else len(tools), case.text))
    if not checked:
        pytest.skip("no well-formed round-trip text")
    assert not missed, missed


@pytest.mark.parametrize("slug", json_container_slugs())
def test_an_object_argument_takes_json_not_text(slug):
    """As tests/test_lark.py's: an object-typed argument of a format that writes
    objects as JSON is held to its schema; text there is refused."""
    case = _case(slug, "tool_call_tricky_arguments")
    if case is None or OPTIONS not in case.text:
        pytest.skip("no tricky-arguments text with the options object as JSON")
    tag = _tag(slug, case.tools, enable_thinking=case.kind.enable_thinking)
    assert accepts(tag, case.text)
    assert not accepts(tag, case.text.replace(OPTIONS, "<timeout>30</timeout>"))


UNDECIDED = [
    slug
    for slug in SLUGS
    if (rt.load_spec(slug)["capabilities"].get("thinking_switch") or {}).get("default")
    == "undecided"
]


@pytest.mark.parametrize("slug", UNDECIDED)
def test_an_undecided_default_s_tag_admits_both_readings(slug):
    """A request that gives no thinking switch, to a template whose default is
    undecided: every round-trip text rendered with the switch undefined that parse,
    with enable_thinking left out, reads as well-formed, and that the tag of thinking
    on or of thinking off accepts, the tag made with enable_thinking left out accepts
    too (a decided default's tag is that setting's: tests/test_default_thinking.py)."""
    missed, checked = [], 0
    module = rt.module(slug)
    end = module.SPEC["reasoning"]["end"]
    for kind in rt.UNSWITCHED_KINDS:
        case = rt.make_case(slug, kind)
        if (slug, kind.name) in KNOWN_FAILURES or case is None or not rt.check(case)[0]:
            continue
        tools = case.tools or ALL_TOOLS
        # as rendered, and with reasoning the prompt may have opened before it
        for text in (case.text, "Six sevens." + end + case.text):
            try:
                module.parse(text, tools=case.tools, strict=True)
            except ValueError:
                continue
            if not any(accepts(_tag(slug, tools, enable_thinking=on), text) for on in (True, False)):
                continue
            checked += 1
            if not accepts(_tag(slug, tools), text):
                missed.append((kind.name, text))
    assert checked, "no well-formed round-trip text"
    assert not missed, missed


# --- rejection ------------------------------------------------------------------------


def _closers(spec: dict) -> list[str]:
    """The literals that close a call or the calls, innermost first."""
    tools = spec["tools"]
    found = []
    parts = tools["call"].get("parts") or ()
    if parts:
        found.append(parts[-1]["after"])
    found.append(tools["call"].get("end") or "")
    found.append((tools.get("section") or {}).get("end") or "")
    return [text.strip() for text in found if text and text.strip()]


def _changed(text: str) -> str:
    middle = len(text) // 2
    return text[:middle] + ("X" if text[middle] != "X" else "Y") + text[middle + 1 :]


def _json_arguments(spec: dict) -> bool:
    tools = spec["tools"]
    return tools["format"] == "json" or (tools.get("arguments") or {}).get("encoding") == "json"


def corruptions(slug: str, case) -> list[tuple[str, list, str]]:
    """(what, tools, text) for each corruption of a call case's text."""
    spec = rt.load_spec(slug)
    called = [name for name, _ in case.kind.calls]
    others = [tool for tool in ALL_TOOLS if tool["function"]["name"] not in called]
    text = case.text
    found = [("tool not in tools", others, text)]
    renamed = text.replace(called[0], called[0][:-2] + "zz")
    if renamed != text:
        found.append(("tool renamed", case.tools, renamed))
    arguments = case.kind.calls[0][1]
    enum = {"unit": ("celsius", "fahrenheit"), "language": ("python", "bash")}
    for key, values in enum.items():
        value = arguments.get(key)
        at = text.rfind(value) if value in values else -1
        if at >= 0:
            broken = text[:at] + "kelvin" + text[at + len(value) :]
            found.append(("value outside enum", case.tools, broken))
            break
    else:
        if _json_arguments(spec):
            for value in arguments.values():
                quoted = json.dumps(value, ensure_ascii=False)
                if isinstance(value, str) and quoted in text:
                    at = text.rfind(quoted)
                    broken = text[:at] + "42" + text[at + len(quoted) :]
                    found.append(("string written as a number", case.tools, broken))
                    break
    # The closing markers after the last call's name (one the output was cut at is
    # not there to corrupt).
    after = text.rfind(called[-1])
    for closer in _closers(spec):
        at = text.rfind(closer)
        if at > after:
            broken = text[:at] + _changed(closer) + text[at + len(closer) :]
            found.append(("closing marker changed", case.tools, broken))
            break
    return found


def _rejections():
    results = []
    for slug in CALL_SLUGS:
        for kind in rt.TOOL_KINDS:
            case = _case(slug, kind.name)
            if case is None:
                continue
            for what, tools, text in corruptions(slug, case):
                tag = _tag(slug, tools, enable_thinking=kind.enable_thinking)
                results.append((slug, kind.name, what, not accepts(tag, text), text))
    return results


def test_rejects_corruptions():
    results = _rejections()
    if not results:
        pytest.skip("no call cases")
    rejected = sum(ok for *_, ok, _ in results)
    by_what: dict[str, list[int]] = {}
    for _, _, what, ok, _ in results:
        by_what.setdefault(what, [0, 0])[ok] += 1
    print(f"\nstructural tags: {rejected}/{len(results)} corruptions rejected "
          f"({rejected / len(results):.1%})")  # fmt: skip
    for what, (kept, refused) in sorted(by_what.items()):
        print(f"  {what}: {refused}/{kept + refused}")
    for slug, kind, what, ok, text in results:
        if not ok:
            print(f"  accepted: {slug} {kind} {what}: {text[-160:]!r}")
    assert rejected / len(results) >= 0.98


# --- tool_choice ------------------------------------------------------------------------


@pytest.mark.parametrize("slug", CALL_SLUGS)
def test_tool_choice(slug):
    # Cases that call get_weather once, call it and get_time, call nothing.
    ones = (
        "tool_call",
        "tool_call_thinking_off",
        "content_then_tool_call",
        "reasoning_then_tool_call",
    )
    plains = ("content", "content_thinking_off", "multiline_markup", "reasoning_content")
    one = next(filter(None, (_case(slug, name) for name in ones)), None)
    two = _case(slug, "parallel_tool_calls")
    plain = next(filter(None, (_case(slug, name) for name in plains)), None)
    if one is None:
        pytest.skip("no well-formed one-call text")
    thinking = one.kind.enable_thinking
    wrong = []

    def expect(verdict, text, case_thinking, **settings):
        tag = _tag(slug, ALL_TOOLS, enable_thinking=case_thinking, **settings)
        if accepts(tag, text) != verdict:
            wrong.append((settings, "should accept" if verdict else "should reject", text))

    expect(True, one.text, thinking, tool_choice="required")
    expect(True, one.text, thinking, tool_choice=_named("get_weather"))
    expect(False, one.text, thinking, tool_choice=_named("get_time"))
    expect(True, one.text, thinking, parallel_tool_calls=False)
    expect(False, one.text, thinking, tool_choice="none")
    if plain is not None:
        expect(False, plain.text, plain.kind.enable_thinking, tool_choice="required")
        expect(False, plain.text, plain.kind.enable_thinking, tool_choice=_named("get_weather"))
        expect(True, plain.text, plain.kind.enable_thinking, tool_choice="none")
        expect(True, plain.text, plain.kind.enable_thinking, parallel_tool_calls=False)
    if two is not None:
        two_thinking = two.kind.enable_thinking
        expect(False, two.text, two_thinking, parallel_tool_calls=False)
        expect(False, two.text, two_thinking, tool_choice="required", parallel_tool_calls=False)
        expect(True, two.text, two_thinking, tool_choice="required")
        expect(False, two.text, two_thinking, tool_choice=_named("get_weather"))
    assert not wrong, wrong


# --- every setting compiles, awkward schemas included --------------------------------

# Keys, enum values and a name holding what JSON, regular expressions and EBNF treat
# specially: they reach the structural tag as JSON strings and must compile.
AWKWARD = {
    "type": "function",
    "function": {
        "name": "odd-name_2",
        "parameters": {
            "type": "object",
            "properties": {
                'k"ey\\': {"type": "string", "enum": ['a"b', "c\\d", "e\nf", "]^-[", "<|x|>"]},
                "n[1]": {"type": "integer"},
                "flag": {"type": "boolean"},
                "obj": {"type": "object", "properties": {"x": {"type": "number"}}},
            },
            "required": ["n[1]"],
        },
    },
}
SETTINGS = [
    {},
    {"tool_choice": "none"},
    {"tool_choice": "required"},
    {"tool_choice": _named("odd-name_2")},
    {"parallel_tool_calls": False},
    {"tool_choice": "required", "parallel_tool_calls": False},
]


@pytest.mark.parametrize("slug", SLUGS)
def test_every_setting_compiles(slug):
    for thinking in (True, False):
        settings = SETTINGS if _has_calls(slug) else SETTINGS[:2]
        for setting in settings:
            tag = _tag(slug, ALL_TOOLS + [AWKWARD], enable_thinking=thinking, **setting)
            _compiled(json.dumps(tag, ensure_ascii=False))


def test_acceptance_figure():
    """The acceptance figure over the corpus, for the report."""
    accepted = total = known = 0
    for slug in SLUGS:
        for kind in rt.ALL_KINDS:
            case = _case(slug, kind.name)
            if case is None:
                continue
            for tools in [case.tools] if case.tools else [None, ALL_TOOLS]:
                if (slug, kind.name) in KNOWN_REJECTIONS:
                    known += 1  # refused, as by the Lark (tests/test_lark.py)
                    continue
                total += 1
                tag = _tag(slug, tools, enable_thinking=kind.enable_thinking)
                accepted += accepts(tag, case.text)
    if not total:
        pytest.skip("no corpus: run make templates")
    slugs = sum(1 for slug in SLUGS if any(_case(slug, k.name) for k in rt.ALL_KINDS))
    print(f"\nstructural tags: {accepted}/{total} round-trip texts accepted ({slugs} formats);"
          f" {known} more the Lark's known rejections, refused alike")  # fmt: skip
    assert accepted == total


# --- formats that read calls in our fallback format -----------------------------------


@pytest.mark.parametrize("slug", fallback_slugs())
def test_fallback_calls(slug):
    """Where the template writes no calls and the module reads our fallback format
    (tests/fallback_outputs.py): the hand-written calls are accepted, a broken closing
    marker is not, and the tool_choice settings hold."""
    found = outputs(slug)
    assert set(found) == {"one_call", "content_then_call", "two_calls"}, found
    plain = _case(slug, "content")
    texts = {name: output.text for name, output in found.items()}
    if plain is not None:
        texts["plain"] = plain.text
    settings = [
        ({}, set(texts)),
        ({"tool_choice": "required"}, {"one_call", "content_then_call", "two_calls"}),
        ({"tool_choice": "none"}, {"plain"}),
        ({"tool_choice": _named("get_time")}, set()),
        ({"tool_choice": _named("get_weather")}, {"one_call", "content_then_call"}),
        ({"parallel_tool_calls": False}, {"one_call", "content_then_call", "plain"}),
    ]
    wrong = []
    for settings_, accepted_names in settings:
        tag = _tag(slug, FALLBACK_TOOLS, **settings_)
        for name, text in texts.items():
            if accepts(tag, text) != (name in accepted_names):
                wrong.append((settings_, name, text))
    tag = _tag(slug, FALLBACK_TOOLS)
    wrong += [("broken", o.name, broken(o)) for o in found.values() if accepts(tag, broken(o))]
    assert not wrong, wrong


# --- strings with a quote inside (compiler/quoted_strings.py) --------------------------


@pytest.mark.parametrize("typed", [True, False], ids=["typed", "any value"])
def test_a_string_ends_where_parse_ends_it(typed):
    """As tests/test_quoted_strings.py's, through xgrammar, for LFM2.5 (strings between
    single quotes as written, or double quotes with escapes): what the tag accepts,
    ``parse`` reads as that one call, its string as written; what ``parse`` reads so,
    the tag accepts where the string's whitespace is ASCII."""
    slug = "lfm2_5_8b_a1b"
    module = rt.module(slug)
    tools = quoted.TOOLS if typed else quoted.UNTYPED
    tag = _tag(slug, tools)
    for quote, _ in quoted.quotes(module):
        for wide, pieces in ((False, quoted.PIECES), (True, quoted.WIDE)):
            for body in quoted.bodies(f"{slug} {quote} {typed} {wide}", pieces):
                text = quoted.SHAPES[slug].format(quote + body + quote)
                read = quoted.read_as_meant(module, text, body, quote, tools)
                taken = accepts(tag, text)
                assert read or not taken, f"the tag takes what parse reads otherwise: {text!r}"
                assert taken or not read or wide, f"the tag refuses what parse reads: {text!r}"
