"""The generated StreamParser (DESIGN.md, "A generated module").

The templates are the oracle twice over: the round-trip texts they render are cut
into chunks of every size, and the merged deltas must equal what ``parse`` reads
from the whole text. Malformed outputs (the rendered texts mutated) must never make
the stream raise or lose text.
"""

from __future__ import annotations

import collections
import functools
import gc
import json
import os
import random
import re
import tracemalloc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import roundtrip as rt
from tests.benchmarks.linear import openings
from tests.test_roundtrip import KNOWN_FAILURES

CASES = [(slug, kind) for slug in rt.slugs() for kind in rt.ALL_KINDS]


def merge(deltas: list[dict], abandoned=()) -> dict:
    """The message a client builds from the deltas, the calls the stream abandoned
    left out (DESIGN: a server drops them)."""
    message: dict[str, Any] = {
        "role": "assistant", "content": None, "reasoning_content": None, "tool_calls": []
    }
    calls: dict[int, dict] = {}
    for delta in deltas:
        if "content" in delta:
            message["content"] = (message["content"] or "") + delta["content"]
        if "reasoning_content" in delta:
            message["reasoning_content"] = (message["reasoning_content"] or "") + delta[
                "reasoning_content"
            ]
        for part in delta.get("tool_calls", ()):
            index = part["index"]
            if index not in calls:
                assert not calls or index > max(calls), "a call index reused or out of order"
                assert "name" in part["function"], "a call's first delta has no name"
                calls[index] = {
                    "id": None, "type": "function", "function": {"name": None, "arguments": ""}
                }
            call = calls[index]
            if "id" in part:
                call["id"] = part["id"]
            if "name" in part["function"]:
                call["function"]["name"] = part["function"]["name"]
            call["function"]["arguments"] += part["function"].get("arguments", "")
    for index in abandoned:
        arguments = calls.pop(index)["function"]["arguments"]
        with pytest.raises(ValueError):
            json.loads(arguments)  # an abandoned call never reads as a valid one
    message["tool_calls"] = [calls[index] for index in sorted(calls)]
    message["content"] = message["content"] or None  # no content text: OpenAI's null
    return message


def stream(module, text: str, cuts, **options) -> tuple[list[dict], list[dict]]:
    """(deltas from feed, deltas from finish) for ``text`` cut at ``cuts``."""
    fed, finished, _ = streamed(module, text, cuts, **options)
    return fed, finished


def streamed(module, text: str, cuts, **options) -> tuple[list[dict], list[dict], list[int]]:
    """(deltas from feed, deltas from finish, the calls abandoned)."""
    parser = module.StreamParser(**options)
    fed = []
    at = 0
    for cut in list(cuts) + [len(text)]:
        fed += parser.feed(text[at:cut])
        at = cut
    finished = parser.finish()
    assert len(set(parser.abandoned)) == len(parser.abandoned), "an index abandoned twice"
    return fed, finished, parser.abandoned


def chunkings(text: str, seed: str):
    size = len(text)
    yield "1-char", range(1, size)
    yield "5-char", range(5, size, 5)
    rng = random.Random(seed)
    yield "random", sorted(rng.sample(range(1, size), min(size - 1, rng.randint(1, 12)))) if size > 1 else []


def _case(slug, kind):
    case = rt.make_case(slug, kind)
    if case is None:
        pytest.skip("the template cannot express this case")
    if (slug, kind.name) in KNOWN_FAILURES:
        pytest.skip("parse itself misreads it (KNOWN_FAILURES)")
    return case


@pytest.mark.parametrize("slug,kind", CASES, ids=[f"{s}-{k.name}" for s, k in CASES])
def test_stream_equals_parse(slug, kind):
    case = _case(slug, kind)
    module = rt.module(slug)
    options = {"tools": case.tools, "enable_thinking": kind.enable_thinking}
    whole = module.parse(case.text, **options)
    for name, cuts in chunkings(case.text, f"{slug}-{kind.name}"):
        fed, finished = stream(module, case.text, cuts, **options)
        assert merge(fed + finished) == whole, name


def _markers(spec: dict) -> list[str]:
    """Every literal the format writes (the strings the stream may hold back)."""
    found = []

    def walk(value):
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for section in ("reasoning", "content", "tools", "end_of_turn", "grammar"):
        walk(spec.get(section))
    return [marker for marker in found if marker]


def _is_bare(module) -> bool:
    """Whether no marker opens a call (the stream may then hold a call back)."""
    tools = module.SPEC["tools"]
    if tools["format"] == "none":
        return False
    section = tools.get("section") or {}
    return not (section.get("start") or tools["call"]["start"]).strip()


@pytest.mark.parametrize("slug,kind", CASES, ids=[f"{s}-{k.name}" for s, k in CASES])
def test_stream_is_incremental(slug, kind):
    """Before finish() all is sent but a tail that may still be a marker."""
    case = _case(slug, kind)
    module = rt.module(slug)
    if _is_bare(module) and kind.calls:
        pytest.skip("no marker starts a call: the stream may hold it back")
    fed, finished = stream(
        module, case.text, range(1, len(case.text)),
        tools=case.tools, enable_thinking=kind.enable_thinking,
    )  # fmt: skip
    longest = max(map(len, _markers(module.SPEC)), default=0)
    early, whole = merge(fed), merge(fed + finished)
    assert len(early["tool_calls"]) == len(whole["tool_calls"]), "a call sent only at finish()"
    late = len(whole["content"] or "") - len(early["content"] or "")
    late += len(whole["reasoning_content"] or "") - len(early["reasoning_content"] or "")
    for before, after in zip(early["tool_calls"], whole["tool_calls"], strict=True):
        late += len(after["function"]["arguments"]) - len(before["function"]["arguments"])
    assert late <= longest, f"finish() sent {late} characters"


# A long string argument, written the same in every format (nothing to escape).
LONG_VALUE = " ".join(f"step{i}" for i in range(80))
LONG_KIND = rt.Kind(
    "long_argument", "", calls=(("get_weather", {"city": LONG_VALUE, "unit": "celsius"}),)
)
_TOOL_FORMATS = [slug for slug in rt.slugs() if rt.load_spec(slug)["tools"]["format"] != "none"]


def _long_case(slug, kind=LONG_KIND):
    """(case, module, where the long value starts) for a format that streams it."""
    case = rt.build_case(slug, kind)
    if case is None:
        pytest.skip("the template cannot express this case")
    module = rt.module(slug)
    if _is_bare(module):
        pytest.skip("no marker starts a call: the stream may hold it back")
    if (module.SPEC["tools"].get("arguments") or {}).get("string_open", "")[:1] in ("'", '"'):
        pytest.skip("a quoted value is a literal whose escapes are decoded: sent once whole")
    value = kind.calls[0][1]["city"]
    start = case.text.find(value)
    if start < 0 or case.text.rfind("get_weather", 0, start) < 0:
        pytest.skip("the template does not write the name, then the value as given")
    if len(module.parse(case.text, tools=case.tools)["tool_calls"]) != 1:
        pytest.skip("parse itself does not read the call")
    return case, module, start


@pytest.mark.parametrize("slug", _TOOL_FORMATS)
def test_arguments_stream_while_they_are_written(slug):
    """Fed up to the middle of a long argument, the stream has sent its first half
    (less what may still be a marker): arguments do not wait for the call to close."""
    case, module, start = _long_case(slug)
    whole = module.parse(case.text, tools=case.tools)
    parser = module.StreamParser(tools=case.tools)
    middle = start + len(LONG_VALUE) // 2
    fed = []
    for at in range(middle):
        fed += parser.feed(case.text[at])
    sent = merge(fed)["tool_calls"]
    assert sent, "the call is not open in the middle of its arguments"
    arguments = sent[0]["function"]["arguments"]
    assert whole["tool_calls"][0]["function"]["arguments"].startswith(arguments)
    longest = max(map(len, _markers(module.SPEC)), default=0)
    assert LONG_VALUE[: len(LONG_VALUE) // 2 - longest] in arguments


VERY_LONG_KIND = rt.Kind(
    "very_long_argument",
    "",
    calls=(("get_weather", {"city": " ".join(f"step{i}" for i in range(8000)), "unit": "celsius"}),),
)


@pytest.mark.parametrize("slug", _TOOL_FORMATS)
def test_a_long_call_is_not_kept_in_as_many_pieces_as_chunks(slug):
    """The text of a call being read is kept (for a replay, should it prove broken)
    in blocks, not as one small string per chunk: memory stays near the text's size."""
    case, module, _ = _long_case(slug, VERY_LONG_KIND)
    parser = module.StreamParser(tools=case.tools)
    chunks = [case.text[at : at + 4] for at in range(0, len(case.text), 4)]
    for chunk in chunks[:-8]:
        parser.feed(chunk)
    assert len(parser._raw) <= len(chunks) // 16, f"{len(parser._raw)} pieces kept"


def test_feed_rejects_what_is_not_text():
    module = rt.module(rt.slugs()[0])
    parser = module.StreamParser()
    with pytest.raises(TypeError):
        parser.feed(b"bytes")
    parser.finish()
    with pytest.raises(ValueError):
        parser.feed("more")


# ---------------------------------------------------------------------------
# malformed outputs

TOOL_SLUGS = [slug for slug in rt.slugs() if rt.load_spec(slug)["tools"]["format"] != "none"]
_WORDS = re.compile(r"(?i)\b(?:none|true|false|null)\b")


def _letters(text: str) -> str:
    """The letters and digits of ``text``, in order (python literals aside: a
    tagged value ``None`` is sent as JSON ``null``)."""
    return "".join(char for char in _WORDS.sub(" ", text).lower() if char.isalnum())


def _covered(needle: str, haystack: str) -> bool:
    """Whether every character of ``needle`` is in ``haystack`` as many times."""
    return not collections.Counter(needle) - collections.Counter(haystack)


@functools.lru_cache(maxsize=None)
def _base_texts(slug: str) -> tuple[str, ...]:
    texts = []
    for kind in rt.ALL_KINDS:
        case = rt.make_case(slug, kind)
        if case is not None:
            texts.append(case.text)
    return tuple(texts)


def _sent(message: dict) -> str:
    """The letters and digits a message carries, wherever they are in it."""
    text = (message["content"] or "") + (message["reasoning_content"] or "")
    for call in message["tool_calls"]:
        function = call["function"]
        text += " ".join(["", function["name"] or "", function["arguments"], call["id"] or ""])
    return _letters(text)


@st.composite
def malformed(draw):
    slug = draw(st.sampled_from(TOOL_SLUGS))
    module = rt.module(slug)
    texts = _base_texts(slug)
    text = draw(st.sampled_from(texts)) if texts else ""
    pieces = [marker for marker in _markers(module.SPEC) if len(marker) < 40]
    noise = st.one_of(
        st.text(alphabet="{}[]\"':,<>/=| \n\tab1", max_size=6),
        st.sampled_from(pieces or ["<"]),
    )
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["insert", "delete", "cut"]))
        if action == "insert":
            text = text[:at] + draw(noise) + text[at:]
        elif action == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 8)) :]
        else:
            text = text[:at]
    seed = draw(st.integers(0, 2**16))
    return slug, text, seed


@settings(max_examples=int(os.environ.get('CHATFMT_EXAMPLES', 300)), deadline=None, suppress_health_check=list(HealthCheck))
@given(malformed(), st.booleans())
def test_malformed_output_never_raises_or_loses_text(drawn, thinking):
    slug, text, seed = drawn
    module = rt.module(slug)
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, 20))) if len(text) > 1 else []
    fed, finished, abandoned = streamed(module, text, cuts, enable_thinking=thinking)
    sent = merge(fed + finished)
    message = merge(fed + finished, abandoned)
    whole = module.parse(text, enable_thinking=thinking)
    # Nothing that parse keeps of the text is lost on the way.
    assert _covered(_sent(whole), _sent(sent))
    # With the abandoned calls left out, the stream reads every input as parse does.
    assert message == whole


@pytest.mark.parametrize("slug", TOOL_SLUGS)
def test_deep_nesting_never_raises(slug):
    """A value nested deeper than Python's recursion limit is not a call's value:
    parse and the stream keep the text and do not raise."""
    case = rt.make_case(slug, rt.TOOL_KINDS[0])
    if case is None or "Tokyo" not in case.text:
        pytest.skip("the template does not write the value as given")
    depth = 100_000
    text = case.text.replace("Tokyo", "[" * depth + "]" * depth, 1)
    module = rt.module(slug)
    whole = module.parse(text, tools=case.tools)
    fed, finished = stream(module, text, range(4096, len(text), 4096), tools=case.tools)
    for message in (whole, merge(fed + finished)):
        kept = (message["content"] or "") + "".join(
            call["function"]["arguments"] for call in message["tool_calls"]
        )
        assert kept.count("[") >= depth


def _closed_content_slugs():
    return [slug for slug in rt.slugs() if rt.module(slug).SPEC["content"].get("end")]


@pytest.mark.parametrize("slug", _closed_content_slugs())
def test_an_end_of_turn_marker_before_the_content_s_closer_is_text(slug):
    """``<response>x<|end_of_text|></response>``: the end-of-turn marker is not the
    output's last (the closer follows it), so parse keeps it; the stream, which takes
    the closer out as it reads, kept it too only once the closer was (found by
    tests/test_fuzz.py on Granite 3.3's wrapped answer; Command R7B's too)."""
    module = rt.module(slug)
    content = module.SPEC["content"]
    for stop in module.STOP:
        for text in (
            content["start"] + "x" + stop + content["end"],
            content["start"] + " x " + stop + " " + content["end"] + " y" + stop,
        ):
            whole = module.parse(text, enable_thinking=False)
            assert stop in (whole["content"] or ""), text
            for name, cuts in chunkings(text, text):
                fed, finished = stream(module, text, cuts, enable_thinking=False)
                assert merge(fed + finished) == whole, (name, text)


@pytest.mark.parametrize("slug", rt.slugs())
def test_a_run_of_whitespace_is_not_held_in_pending_text(slug):
    """Wherever a long run of whitespace arrives, the pending text the reader looks
    at again with each chunk stays short: streaming it stays linear (a chunk would
    otherwise re-read all the whitespace before it)."""
    module = rt.module(slug)
    texts = _base_texts(slug) or ("The answer is 42.",)
    flood = (" \n\t " * 2500)[:10_000]
    # A name may be waited for whole; nothing else that is held grows with the text.
    bound = 2 * rt.module("_runtime")._LONGEST_NAME
    for text in dict.fromkeys((texts[0], *texts[-2:])):
        for cut in sorted({len(text) * k // 8 for k in range(9)}):
            parser = module.StreamParser()
            longest = 0
            for at in range(0, cut, 4):
                parser.feed(text[at : min(at + 4, cut)])
            for at in range(0, len(flood), 4):
                parser.feed(flood[at : at + 4])
                longest = max(longest, len(parser._pending))
            parser.finish()
            assert longest <= bound, (
                f"{longest} characters pending after {text[:cut][-30:]!r} and whitespace"
            )


@pytest.mark.parametrize("slug", TOOL_SLUGS)
def test_a_run_of_call_openers_is_not_held(slug):
    """Each way the format opens a call, repeated, with nothing, a space or the
    start of a name after it: every opener is a try at calls that fails a few
    characters on. What the reader holds stays short (the content before a try was
    held with it and copied again at every try: 1 MB of Functionary v3.1's
    '<function= ' fed 4 characters at a time took 17 s); and the stream reads it
    as parse does."""
    module = rt.module(slug)
    bound = 4 * getattr(module, "_LONGEST_NAME", 256)
    for name, make in openings(slug).items():
        text = make(2_500)
        parser = module.StreamParser()
        deltas, longest = [], 0
        for at in range(0, len(text), 4):
            deltas += parser.feed(text[at : at + 4])
            held = parser._held + parser._pending + "".join(parser._raw)
            longest = max(longest, len(held))
        deltas += parser.finish()
        assert longest <= bound, f"{name}: {longest} characters held"
        assert merge(deltas, parser.abandoned) == module.parse(text), name


@pytest.mark.parametrize("space", [1, 1_100, 4_100])
def test_whitespace_after_a_name_of_any_length(space):
    """Issue 24's reproducer: whitespace after the name past the reader's old
    window sizes (1,024 characters waited for a name, 4,096 a piece of a chunk)
    made the stream send the call as content while parse read it."""
    module = rt.module("qwen3_coder")
    text = (
        "<tool_call>\n<function=get_weather" + " " * space
        + ">\n<parameter=city>\nBerlin\n</parameter>\n</function>\n</tool_call>"
    )
    whole = module.parse(text)
    assert [call["function"]["name"] for call in whole["tool_calls"]] == ["get_weather"]
    for size in (1, 2, 3, 7, 64, len(text)):
        fed, finished, abandoned = streamed(module, text, range(size, len(text), size))
        assert merge(fed + finished, abandoned) == whole, size
        assert abandoned == [], size


@pytest.mark.parametrize("slug", TOOL_SLUGS)
def test_a_call_abandoned_before_a_real_one(slug):
    """A call cut off in its arguments and followed by prose, then a real call: the
    stream sends the first in part, then abandons it (its arguments never read as
    JSON, its text comes again as content) and gives the real call an index of its
    own; with the abandoned call left out the deltas merge into parse's message."""
    case = rt.make_case(slug, rt.TOOL_KINDS[0])
    module = rt.module(slug)
    if case is None or _is_bare(module):
        pytest.skip("the template cannot express this case, or no marker starts a call")
    trigger = module.TRIGGERS[0]["value"] if module.TRIGGERS[0]["type"] == 1 else None
    start = case.text.find(trigger) if trigger else -1
    if start < 0 or "Tokyo" not in case.text[start:]:
        pytest.skip("no literal trigger before the call's arguments")
    broken = case.text[: case.text.index("Tokyo", start) + 3] + " - no, that was wrong.\n"
    text = case.text[:start] + broken[start:] + case.text[start:]
    whole = module.parse(text, tools=case.tools)
    assert len(whole["tool_calls"]) == 1, "parse reads the real call only"
    for name, cuts in chunkings(text, slug):
        fed, finished, abandoned = streamed(module, text, cuts, tools=case.tools)
        assert merge(fed + finished, abandoned) == whole, name
        if abandoned:
            indices = {p["index"] for d in fed + finished for p in d.get("tool_calls", ())}
            assert indices == {0, 1} and abandoned == [0], name


@pytest.mark.parametrize(
    "slug,text",
    [
        ("qwen3_coder", "<tool_call>\n<function=get_weather>\nThe weather is nice"),
        (
            "nousresearch_hermes_2_pro_llama_3_8b_tool_use",
            '<tool_call>\n{"name":"get_weather","arguments":{"city":"Paris"}} oops, more text',
        ),
    ],
)
def test_a_broken_call_never_streams_as_a_valid_one(slug, text):
    """Issue 12's examples: even fed whole, a call that parse does not read is never
    sent with arguments that read as JSON."""
    module = rt.module(slug)
    assert module.parse(text)["tool_calls"] == []
    for cuts in ([], range(1, len(text))):
        fed, finished, abandoned = streamed(module, text, cuts)
        assert merge(fed + finished, abandoned) == module.parse(text)
        assert abandoned == [0]


def _keyed_closer_output(module, keys: list[str]) -> str:
    """One call whose arguments are ``keys``, written with ``module``'s markers in a
    format whose value closer repeats the key (MiniMax M3's ``</city>``)."""
    assert module.VALUE_SUFFIX_NAMES_KEY
    name_end = module.CALL_PARTS[0][1]
    units = "".join(
        f"{module.ARG_KEY_PREFIX}{key}{module.ARG_KEY_END}value {at}"
        + module.ARG_VALUE_SUFFIX.replace("{key}", key)
        for at, key in enumerate(keys)
    )
    return (
        module.SECTION_START + module.CALL_START + "f" + name_end + units
        + module.CALL_PARTS[1][1] + module.END_AFTER_CALLS[0]
    )


def test_a_value_closer_that_names_its_key_costs_no_cache(monkeypatch):
    """Issue 32, item 1: MiniMax M3's value closer repeats the key, and the stream
    compiled a regex of all the closer's prefixes for each key it had not seen (a
    pattern quadratic in the key's length) and kept it in a dict with no bound. The
    issue's output, 300 distinct keys of 256 characters (163 KB): the stream took
    80 s and kept 100 MB after the parser was gone. Bounded here by steps, not time:
    the characters of every pattern compiled while streaming (some 12 million on main;
    the count stops the run as soon as it passes its bound), and the memory still
    held once the parser is gone."""
    module = rt.module("minimax_m3")
    keys = [(f"k{at:03d}" * 64)[:256] for at in range(300)]
    text = _keyed_closer_output(module, keys)
    assert len(text) > 160_000
    whole = module.parse(text)
    assert len(json.loads(whole["tool_calls"][0]["function"]["arguments"])) == 300

    compiled = 0
    compile_pattern = re.compile

    def counted(pattern, flags=0):
        nonlocal compiled
        compiled += len(pattern) if isinstance(pattern, str) else 0
        assert compiled <= len(text), f"{compiled} pattern characters compiled"
        return compile_pattern(pattern, flags)

    monkeypatch.setattr(re, "compile", counted)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        fed, finished, abandoned = streamed(module, text, range(7, len(text), 7))
        assert merge(fed + finished, abandoned) == whole
        del fed, finished
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # What stays is the runtime's size-bounded caches (a few hundred entries).
    assert held < 4_000_000, f"{held} bytes held after the stream"


STOP_SLUGS = [slug for slug in rt.slugs() if rt.module(slug).STOP]
_CHUNK_SIZES = (1, 2, 3, 7)


def _agrees_at_every_chunking(module, text: str, **options) -> dict:
    """parse's message for ``text``, after checking the stream gives it at chunk
    sizes 1, 2, 3, 7, random cuts and whole."""
    whole = module.parse(text, **options)
    cuttings = [(f"{size}-char", range(size, len(text), size)) for size in _CHUNK_SIZES]
    rng = random.Random(text)
    cuttings += [
        ("random", sorted(rng.sample(range(1, len(text)), min(len(text) - 1, 12)))),
        ("whole", []),
    ]
    for name, cuts in cuttings:
        fed, finished, abandoned = streamed(module, text, cuts, **options)
        assert merge(fed + finished, abandoned) == whole, (name, text[-60:])
    return whole


def _first_call_case(slug: str):
    for kind in rt.TOOL_KINDS:
        case = rt.make_case(slug, kind)
        if case is not None and (slug, kind.name) not in KNOWN_FAILURES:
            return case
    return None


@pytest.mark.parametrize("slug", [slug for slug in TOOL_SLUGS if slug in STOP_SLUGS])
def test_a_closer_cut_short_before_the_end_of_turn_marker(slug):
    """Issue 32, item 8: the calls' closer cut short (the model or the server
    stopped inside it) and then the end-of-turn marker. parse reads the closer as
    closing; LFM2.5's stream, cut into pieces of 1, 2, 3 or 7 characters, read a
    quote in the arguments as the string's own (what followed it, ']<' and the
    marker, was no value's end yet), took the marker into the string before it
    was whole, and sent ']<' as content. Every closer of every format, cut after
    each of its characters, once with the marker and once with it written twice."""
    module = rt.module(slug)
    case = _first_call_case(slug)
    parts = getattr(module, "CALL_PARTS", ())
    closers = [
        closer
        for closer in (
            getattr(module, "SECTION_END", ""),
            getattr(module, "CALL_END", ""),
            parts[-1][1] if parts else "",
            *getattr(module, "END_AFTER_CALLS", ()),
        )
        if closer.strip()
    ]
    if case is None or not any(closer in case.text for closer in closers):
        pytest.skip("no call with a closer the template writes")
    stop = module.STOP[0]
    for closer in closers:
        if closer not in case.text:
            continue
        at = case.text.rindex(closer)
        for size in range(1, len(closer.rstrip())):
            for end in (stop, f"{stop}\n{stop}"):
                text = case.text[:at] + closer[:size] + end
                _agrees_at_every_chunking(module, text, tools=case.tools)


def test_lfm2_5_reads_a_section_closer_cut_short_before_the_marker():
    """The issue's text: LFM2.5's section closer cut to ']<' before '<|im_end|>'."""
    module = rt.module("lfm2_5_8b_a1b")
    text = "<|tool_call_start|>[get_weather(city='Tokyo', unit='celsius')]<<|im_end|>"
    whole = _agrees_at_every_chunking(module, text)
    assert not whole["content"]
    assert [json.loads(call["function"]["arguments"]) for call in whole["tool_calls"]] == [
        {"city": "Tokyo", "unit": "celsius"}
    ]


@pytest.mark.parametrize("slug", STOP_SLUGS)
def test_the_end_of_turn_marker_written_twice(slug):
    """Issue 32, item 9: MiniMax M2/M3 text after the calls that ends with the
    end-of-turn marker twice: parse dropped both and the stream kept one, even fed
    whole (the marker '[e~[' starts as it ends: the stream held back its last
    character as a marker begun, and sent the rest). Written twice, with and
    without whitespace between, after content, after calls, and after calls and
    more text: the stream reads each as parse does."""
    module = rt.module(slug)
    stop = module.STOP[0]
    texts = []
    content = rt.make_case(slug, rt.CONTENT_KINDS[0])
    if content is not None:
        texts.append((content, content.text))
    call = _first_call_case(slug) if slug in TOOL_SLUGS else None
    if call is not None:
        texts += [(call, call.text), (call, call.text + "Done.")]
    if not texts:
        pytest.skip("the template cannot express these cases")
    for case, text in texts:
        for ending in (stop + stop, f"{stop}\n{stop} ", f"{stop} {stop}{stop}"):
            _agrees_at_every_chunking(module, text + ending, tools=case.tools)


def test_minimax_reads_the_marker_written_twice_as_parse_does():
    """The issue's texts, MiniMax M3, and the decision (DESIGN: parse strips the one
    end-of-turn marker found at the end): without calls, the marker written before
    the final one is the model's text; after calls, the markers that end the text
    are the end of a turn with calls, all dropped, as before."""
    module = rt.module("minimax_m3")
    stop = module.STOP[0]
    call = _keyed_closer_output(module, ["city"])
    assert _agrees_at_every_chunking(module, call + "done" + stop + stop)["content"] == "done"
    assert _agrees_at_every_chunking(module, "Hello" + stop + stop)["content"] == "Hello" + stop
