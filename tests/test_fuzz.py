"""Fuzzing every generated module with inputs built from its own markers and from
mutated round-trip texts, and with round-trip texts with a long run of whitespace or
text written beside a marker (derandomized: each module's inputs come from a
generator seeded by its name, so a failure reproduces).

For every input, and every way the stream is cut here (one character at a time,
whole, and at random places):

- neither ``parse`` nor ``StreamParser`` raises;
- nothing is lost: every letter of the input outside the format's markers (and JSON
  call field names) shows in the content, the reasoning, or a call's name, arguments
  or id (a malformed call comes back as content);
- the stream contract (DESIGN): the deltas, with the calls the stream abandoned left
  out, merge into ``parse``'s message; an abandoned call's arguments never read as
  JSON and its index is not used again.
"""

from __future__ import annotations

import collections
import random
import re

import pytest

from tests import roundtrip as rt
from tests.test_stream import merge, streamed

INPUTS_PER_MODULE = 400
# Words whose letters a reader may rightly change: Python literals are written as
# JSON (None -> null), and numbers are typed (1.50 -> 1.5, 1e5 -> 100000.0).
_REWRITTEN = re.compile(r"(?i)\b(?:none|true|false|null)\b|(?<![\w.])[-+]?\d[\w.+-]*")
_WORDS = ["get_weather", "city", "Paris", "unit", "hello world", "x", "Ünïcødé", "a\\b"]
_JSON_BITS = ["{", "}", "[", "]", '"', ":", ",", "'", "(", ")", "=", "<", ">", "/", "|"]
_SPACES = [" ", "\n", "\t", "  \n"]


def _markers(spec: dict) -> list[str]:
    """Every literal the format writes, and the field names of a JSON call."""
    reasoning, content, tools = spec["reasoning"], spec["content"], spec["tools"]
    found = [reasoning.get("start"), reasoning.get("end"), content.get("start")]
    found += list(reasoning.get("start_also") or ())
    found += [content.get("end"), *spec["end_of_turn"]["markers"]]
    section, call = tools.get("section") or {}, tools.get("call") or {}
    found += [section.get("start"), section.get("end"), call.get("start"), call.get("end")]
    found += [call.get("separator")] + [part["after"] for part in call.get("parts") or ()]
    found += [also for part in call.get("parts") or () for also in part.get("also") or ()]
    found += list(call.get("start_also") or ()) + list(call.get("prefix_also") or ())
    messages = spec.get("messages") or {}
    found += [messages.get("opener"), messages.get("header_end"), messages.get("end")]
    found += list(messages.get("content_also") or ())
    arguments = tools.get("arguments") or {}
    for key in ("key_prefix", "key_end", "value_start", "value_suffix", "separator"):
        found.append(arguments.get(key))
    found += [arguments.get("string_open"), arguments.get("string_close")]
    elements = arguments.get("elements") or {}
    for tag in ("open", "close"):  # an array's items, written as elements named item
        if elements:
            found.append(elements[tag].replace("{key}", elements["item"]))
    found += list(tools.get("end_of_turn_after_calls") or ())
    fields = tools.get("json") or {}
    for key in ("name", "arguments", "id"):
        if isinstance(fields.get(key), str):
            found += fields[key].split(".")
    for path in fields.get("other_fields") or ():
        found += path.split(".")
    for names in (fields.get("key_also") or {}).values():
        found += names
    return sorted({m for m in found if m and m.strip()}, key=len, reverse=True)


def _letters(text: str) -> collections.Counter:
    return collections.Counter(c for c in _REWRITTEN.sub(" ", text).lower() if c.isalpha())


def _outside_markers(text: str, spec: dict, markers: list[str]) -> str:
    arguments = spec["tools"].get("arguments") or {}
    if arguments.get("value_start") and arguments.get("key_end"):
        # Between a key's end and its value the format names the value's type; the
        # reader types values by the tools' schemas instead, so that text is markup.
        named = re.escape(arguments["key_end"].strip()) + ".*?" + re.escape(arguments["value_start"].strip())
        text = re.sub(named, " ", text, flags=re.S)
    closers = [(arguments.get("elements") or {}).get("close") or ""]
    if arguments.get("value_suffix_names_key"):
        closers.append(arguments.get("value_suffix") or "")
    for closer in closers:
        if "{key}" in closer:
            # The closer repeats the key, which the arguments hold once.
            before, after = (re.escape(piece.strip()) for piece in closer.split("{key}", 1))
            text = re.sub(before + r"[^\W\d]\w*" + after, " ", text)
    # The reader matches a marker's whitespace loosely, and allows whitespace
    # after each preserved token in it ('</arg_key>\n<arg_value>' for
    # '</arg_key><arg_value>'): remove its pieces, the longest first (a short one may
    # be part of a longer one), the preserved tokens among them.
    tokens = [token for token in spec["grammar"].get("preserved_tokens") or () if token.strip()]
    cut = re.compile("(%s)" % "|".join(map(re.escape, sorted(tokens, key=len, reverse=True)))) if tokens else None
    pieces = {piece for marker in markers for piece in marker.split()}
    pieces |= set(tokens)
    if cut is not None:
        pieces |= {part for piece in pieces for part in cut.split(piece) if part}
    for piece in sorted(pieces, key=len, reverse=True):
        text = text.replace(piece, " ")
    # A closer cut short at the end of the text is read as that closer (issue 26):
    # a beginning of a marker's piece that ends the text is markup.
    kept = text.rstrip()
    cut = max((n for p in pieces for n in range(1, len(p)) if kept.endswith(p[:n])), default=0)
    return kept[: len(kept) - cut] if cut else text


def _lost(module, text: str, whole: dict, markers: list[str]) -> collections.Counter:
    """The letters of ``text`` outside the format's markers that ``parse``'s
    message ``whole`` does not hold (a hole the format writes twice, twice)."""
    kept = [whole["content"] or "", whole["reasoning_content"] or ""]
    holes = [part["hole"] for part in module.SPEC["tools"].get("call", {}).get("parts") or ()]
    for call in whole["tool_calls"]:
        kept += [call["function"]["name"]] * max(1, holes.count("name"))
        kept += [call["function"]["arguments"]] + [call["id"] or ""] * max(1, holes.count("id"))
    return _letters(_outside_markers(text, module.SPEC, markers)) - _letters(" ".join(kept))


def _built(rng: random.Random, markers: list[str], texts: list[str]) -> str:
    """An input: a mutated rendered text, or a random sequence of markers and bits."""
    if texts and rng.random() < 0.5:
        text = rng.choice(texts)
        for _ in range(rng.randint(1, 4)):
            at = rng.randint(0, len(text))
            action = rng.choice(("insert", "delete", "cut", "duplicate"))
            if action == "insert":
                bit = rng.choice(markers + _JSON_BITS + _SPACES) if markers else "<"
                text = text[:at] + bit + text[at:]
            elif action == "delete":
                text = text[:at] + text[at + rng.randint(1, 8) :]
            elif action == "cut":
                text = text[:at]
            else:
                end = min(len(text), at + rng.randint(1, 40))
                text = text[:end] + text[at:end] + text[end:]
        return text
    pieces = []
    for _ in range(rng.randint(1, 14)):
        pool = rng.random()
        if pool < 0.4 and markers:
            pieces.append(rng.choice(markers))
        elif pool < 0.65:
            pieces.append(rng.choice(_WORDS))
        elif pool < 0.85:
            pieces.append(rng.choice(_JSON_BITS))
        else:
            pieces.append(rng.choice(_SPACES))
    return "".join(pieces)


def _texts(slug: str) -> list[str]:
    texts = []
    for kind in rt.ALL_KINDS:
        case = rt.make_case(slug, kind)
        if case is not None:
            texts.append(case.text)
    return texts


@pytest.mark.parametrize("slug", rt.slugs())
def test_fuzz(slug):
    module = rt.module(slug)
    markers = _markers(module.SPEC)
    rng = random.Random(slug)
    texts = _texts(slug)
    for number in range(INPUTS_PER_MODULE):
        text = _built(rng, markers, texts)
        thinking = rng.random() < 0.5
        where = f"input {number}: {text!r} (enable_thinking={thinking})"
        whole = module.parse(text, enable_thinking=thinking)
        missing = _lost(module, text, whole, markers)
        assert not missing, f"{where}: parse lost {''.join(sorted(missing.elements()))!r}"
        size = len(text)
        cuttings = [range(1, size), [], sorted(rng.sample(range(1, size), min(size - 1, 6)))] if size > 1 else [[]]
        for cuts in cuttings:
            fed, finished, abandoned = streamed(module, text, cuts, enable_thinking=thinking)
            assert merge(fed + finished, abandoned) == whole, f"{where}: cut at {list(cuts)}"


# Runs that reach past the readers' window sizes (a name's 256 characters, the
# pieces of 1,024 and 4,096 characters a reader is given): whitespace and text of
# 255 to 5,000 characters written before and after every marker of a rendered text.
RUN_LENGTHS = (255, 256, 257, 511, 512, 513, 1023, 1024, 1025, 4095, 4096, 4097, 5000)
# The stream reads each input whole and in chunks of these sizes.
RUN_CHUNKS = (1, 2, 3, 7, 64)


def _run(rng: random.Random, kind: str, length: int) -> str:
    """A run of ``length`` characters: whitespace, or text (a word longer than any
    name, prose, digits: where an index or a name is read)."""
    if kind == "whitespace":
        return "".join(rng.choice(" \n\t") for _ in range(length))
    unit = rng.choice(("x", "lorem ipsum ", "7"))
    return (unit * (length // len(unit) + 1))[:length]


def _spots(texts: list[str], markers: list[str]) -> list[tuple[str, int]]:
    """(text, place) before and after every marker, in the first text holding it."""
    found = {}
    for marker in markers:
        for text in texts:
            at = text.find(marker)
            if at >= 0:
                found[(text, at)] = found[(text, at + len(marker))] = None
                break
    return list(found)


def _calls_named(message: dict) -> list[str]:
    return [call["function"]["name"] for call in message["tool_calls"]]


@pytest.mark.parametrize("slug", rt.slugs())
def test_fuzz_long_runs(slug):
    """A run of whitespace or text longer than any window a reader keeps, around
    every marker: the stream reads what parse reads whole and in chunks of 1, 2, 3,
    7 and 64 characters, nothing is lost, and a run of whitespace reads as one
    character of it would (its length never decides whether a call is one)."""
    module = rt.module(slug)
    markers = _markers(module.SPEC)
    rng = random.Random("runs " + slug)
    for text, at in _spots(_texts(slug), markers):
        for kind in ("whitespace", "text"):
            run = _run(rng, kind, rng.choice(RUN_LENGTHS))
            changed = text[:at] + run + text[at:]
            where = f"{kind} of {len(run)} at {at}: {text[:at][-40:]!r} + run + {text[at:][:40]!r}"
            whole = module.parse(changed)
            if kind == "whitespace":
                # (the same characters, each once: a tab or a newline in a JSON
                # string makes it no string, however many there are)
                short = module.parse(text[:at] + "".join(dict.fromkeys(run)) + text[at:])
                assert _calls_named(whole) == _calls_named(short), f"{where}: the run's length decided"
            if not run[0].isdigit():  # (digits and the word after them read as a number)
                missing = _lost(module, changed, whole, markers)
                assert not missing, f"{where}: parse lost {''.join(sorted(missing.elements()))!r}"
            for size in (None,) + RUN_CHUNKS:
                cuts = range(size, len(changed), size) if size else []
                fed, finished, abandoned = streamed(module, changed, cuts)
                assert merge(fed + finished, abandoned) == whole, f"{where}: chunks of {size}"


MALFORMED_TOOLS = [
    [{"type": "function", "function": {"name": "get_weather", "parameters": "x"}}],
    [{"type": "function", "function": {"name": "get_weather", "parameters": {"properties": "x"}}}],
    [{"type": "function", "function": None}],
    [{"type": "function", "function": {"name": ["not", "a", "name"]}}],
    [None, 3, "tool"],
    {"not": "a list"},
]


@pytest.mark.parametrize("slug", rt.slugs())
def test_malformed_tools_never_raise(slug):
    """Tool definitions of the wrong shape type nothing; reading the output goes on
    (they made parse and the stream raise AttributeError). A grammar made from them
    is refused, naming them (tests/test_caller_mistakes.py)."""
    module = rt.module(slug)
    texts = _texts(slug) or ["The answer is 42."]
    for tools in MALFORMED_TOOLS:
        for text in texts:
            whole = module.parse(text, tools=tools)
            assert whole == module.parse(text), "malformed tools changed the reading"
            fed, finished, abandoned = streamed(module, text, range(1, len(text)), tools=tools)
            assert merge(fed + finished, abandoned) == whole
        for build in (module.grammar, module.tool_call_grammar):
            with pytest.raises((ValueError, TypeError), match="tools"):
                build(tools=tools)
