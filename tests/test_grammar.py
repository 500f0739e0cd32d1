"""The GBNF grammars, checked with llguidance one token per byte (DESIGN.md, "GBNF dialect").

Every committed grammar must compile; every output the round trip produces must be
accepted by the grammar for its thinking setting, and so must every output ``parse``
reads as well-formed, of any length; the ``without`` automaton must reject exactly the
texts containing its stop string; ``literal``/``char_class`` must keep any template text
inside one literal or class.

llguidance reads GBNF through ``llguidance.gbnf_to_lark``: every named rule built only from
strings, classes and other such rules becomes ONE greedy lexeme, string literals are
lexemes, and the lexer backs off at most one byte. A grammar that is right in the
abstract can still lose texts there, which is why these tests run the grammars rather
than read them.
"""

from __future__ import annotations

import functools
import glob
import inspect
import itertools
import os
import re

import pytest

llguidance = pytest.importorskip("llguidance")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from llguidance.gbnf_to_lark import (  # noqa: E402
    AlternativeNode,
    GrammarParser,
    LiteralNode,
    RepetitionNode,
    RuleRefNode,
    SequenceNode,
)

from compiler import model  # noqa: E402
from compiler.codegen import gbnf  # noqa: E402
from compiler.runtime.schema_gbnf import ws_fits  # noqa: E402
from tests import roundtrip as rt  # noqa: E402

GENERATED = os.path.join(rt.ROOT, "generated")


def format_of(slug: str) -> model.Format:
    """The typed model (compiler/model.py) of a generated module's spec."""
    origin = os.path.join(rt.SPECS, f"{slug}.yaml")
    return model.build(rt.module(slug).SPEC, slug=slug, origin=origin)


# ---------------------------------------------------------------------------
# llguidance with one token per byte


class _ByteTokenizer:
    """Token i < 256 is the single byte i; token 256 is EOS."""

    eos_token_id = 256
    bos_token_id = None
    tokens = [bytes([i]) for i in range(256)] + [b"<|eos|>"]
    special_token_ids = [256]

    def __call__(self, text):
        return list(text.encode("utf-8") if isinstance(text, str) else text)


TOKENIZER = llguidance.LLTokenizer(llguidance.TokenizerWrapper(_ByteTokenizer()), slices=[])
EOS = _ByteTokenizer.eos_token_id


class GrammarError(AssertionError):
    pass


@functools.lru_cache(maxsize=None)
def _compiled(grammar_text: str):
    """A fresh matcher for the grammar, or the reason it does not compile."""
    try:
        compiled = llguidance.grammar_from("gbnf", grammar_text)
    except ValueError as error:
        return f"grammar does not convert: {error}"
    matcher = llguidance.LLMatcher(TOKENIZER, compiled, log_level=0)
    if matcher.is_error():
        return f"grammar does not compile: {matcher.get_error()}"
    return matcher


def _matcher(grammar_text: str, name: str):
    """A fresh matcher for the grammar; fails naming ``name`` if it does not compile."""
    matcher = _compiled(grammar_text)
    if isinstance(matcher, str):
        raise GrammarError(f"{name}: {matcher}")
    return matcher


def compile_grammar(grammar_text: str, name: str = "grammar") -> None:
    _matcher(grammar_text, name)


def accepts(grammar_text: str, text: str, name: str = "grammar") -> bool:
    """Whether the grammar's root matches all of ``text`` (fed byte by byte) and may end."""
    matcher = _matcher(grammar_text, name).deep_copy()
    data = text.encode("utf-8")
    if matcher.try_consume_tokens(list(data)) != len(data):
        return False
    return matcher.is_accepting() and matcher.consume_token(EOS)


def why_rejected(grammar_text: str, text: str) -> str:
    matcher = _matcher(grammar_text, "grammar").deep_copy()
    for at, byte in enumerate(text.encode("utf-8")):
        if not matcher.consume_token(byte):
            return f"byte {at} of {text.encode('utf-8')!r}: {matcher.get_error()[:200]}"
    return "all bytes consumed, but the grammar cannot end there"


def left_recursive(grammar_text: str) -> set[str]:
    """The rules of a GBNF grammar that can reach themselves before reading any text
    (llama.cpp refuses such a grammar: "left recursion detected"), the grammar read
    by llguidance's own GBNF parser. llguidance itself takes them (Earley)."""
    rules = GrammarParser().parse(grammar_text)
    nullable: dict[str, bool] = {name: False for name in rules}

    def empty(node) -> bool:
        if isinstance(node, LiteralNode):
            return node.value == ""
        if isinstance(node, RuleRefNode):
            return nullable.get(node.name, False)
        if isinstance(node, RepetitionNode):
            return node.min_times == 0 or empty(node.node)
        if isinstance(node, SequenceNode):
            return all(empty(item) for item in node.nodes)
        if isinstance(node, AlternativeNode):
            return any(empty(item) for item in node.alternatives)
        return False  # a character class

    changed = True
    while changed:
        changed = False
        for name, rule in rules.items():
            if not nullable[name] and empty(rule.alternatives):
                nullable[name] = changed = True

    def first(node) -> set[str]:
        """The rules ``node`` may begin with."""
        if isinstance(node, RuleRefNode):
            return {node.name}
        if isinstance(node, RepetitionNode):
            return first(node.node)
        if isinstance(node, AlternativeNode):
            return set().union(*(first(item) for item in node.alternatives))
        if isinstance(node, SequenceNode):
            found: set[str] = set()
            for item in node.nodes:
                found |= first(item)
                if not empty(item):
                    break
            return found
        return set()

    edges = {name: first(rule.alternatives) for name, rule in rules.items()}
    looped = set()
    for name in rules:
        todo, seen = list(edges[name]), set()
        while todo:
            other = todo.pop()
            if other == name:
                looped.add(name)
                break
            if other not in seen and other in edges:
                seen.add(other)
                todo += edges[other]
    return looped


def test_helper_sanity():
    assert left_recursive('root ::= a\na ::= b "x"\nb ::= "y"? a | "z"\n') == {"a", "b"}
    assert left_recursive('root ::= "(" root ")" | "x"\n') == set()
    grammar = 'root ::= "ab" [c-e]* | "x"\n'
    assert accepts(grammar, "ab") and accepts(grammar, "abcde") and accepts(grammar, "x")
    assert not accepts(grammar, "a") and not accepts(grammar, "abf") and not accepts(grammar, "")
    with pytest.raises(GrammarError, match="broken"):
        compile_grammar('root ::= undefined-rule\n', "broken")


# ---------------------------------------------------------------------------
# 1. committed grammars compile and equal the modules' constants

GBNF_FILES = sorted(glob.glob(os.path.join(GENERATED, "*.gbnf")))


@pytest.mark.parametrize("path", GBNF_FILES, ids=os.path.basename)
def test_committed_grammar_compiles_and_matches_module(path):
    name = os.path.basename(path)
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    compile_grammar(text, name)
    assert left_recursive(text) == set(), name  # llama.cpp refuses it
    if name.endswith(".tools.gbnf"):
        slug = name[: -len(".tools.gbnf")]
        assert rt.module(slug).GBNF_TOOLS == text, f"{name} differs from GBNF_TOOLS"
    else:
        slug = name[: -len(".gbnf")]
        assert rt.module(slug).GBNF == text, f"{name} differs from GBNF"


@pytest.mark.parametrize("slug", rt.slugs())
def test_module_grammars_compile(slug):
    module = rt.module(slug)
    assert module.GBNF == module.grammar()
    for thinking in (True, False):
        compile_grammar(module.grammar(enable_thinking=thinking), f"{slug} thinking={thinking}")
    tools_file = os.path.join(GENERATED, f"{slug}.tools.gbnf")
    assert os.path.exists(os.path.join(GENERATED, f"{slug}.gbnf")), f"{slug}.gbnf missing"
    assert (module.GBNF_TOOLS is None) == (not os.path.exists(tools_file))


# ---------------------------------------------------------------------------
# 2. every round-trip output is accepted
#
# "committed" is the module's grammar(); "built" is what compiler/codegen/gbnf.py emits
# now for the module's SPEC (the same text once generated/ is rebuilt).

CASES = [(slug, kind) for slug in rt.slugs() for kind in rt.CONTENT_KINDS]
SOURCES = ("committed", "built")


@functools.lru_cache(maxsize=None)
def _case(slug, kind):
    return rt.make_case(slug, kind)


@functools.lru_cache(maxsize=None)
def grammar_for(slug: str, thinking: bool, source: str = "committed") -> str:
    module = rt.module(slug)
    if source == "committed":
        return module.grammar(enable_thinking=thinking)
    return gbnf.build(format_of(slug), enable_thinking=thinking)


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("slug,kind", CASES, ids=[f"{s}-{k.name}" for s, k in CASES])
def test_round_trip_output_is_accepted(slug, kind, source):
    case = _case(slug, kind)
    if case is None:
        pytest.skip("the template cannot express this case")
    module = rt.module(slug)
    grammar = grammar_for(slug, kind.enable_thinking, source)
    name = f"{slug} ({source}, thinking={kind.enable_thinking})"
    texts = [case.text] + ([case.text + module.STOP[0]] if module.STOP else [])
    rejected = [text for text in texts if not accepts(grammar, text, name)]
    for text in rejected:
        pytest.fail(f"{name} rejects {text!r}: {why_rejected(grammar, text)}")


# ---------------------------------------------------------------------------
# 3. what the grammar rejects


def _spec(slug):
    return rt.module(slug).SPEC


WRAPPED_WITH_END = [
    slug
    for slug in rt.slugs()
    if _spec(slug)["content"]["mode"] == "always_wrapped" and _spec(slug)["content"].get("end")
]


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("slug", WRAPPED_WITH_END)
def test_nothing_but_whitespace_after_content_end(slug, source):
    module = rt.module(slug)
    end = module.SPEC["content"]["end"]
    checked = 0
    for kind in rt.CONTENT_KINDS:
        case = _case(slug, kind)
        if case is None:
            continue
        grammar = grammar_for(slug, kind.enable_thinking, source)
        closed = case.text + end
        assert accepts(grammar, closed, slug), why_rejected(grammar, closed)
        assert accepts(grammar, closed + "\n \t", slug)
        if module.STOP:
            assert accepts(grammar, closed + "\n" + module.STOP[0], slug)
        for junk in ("x", "\nmore text", end, " " + case.kind.content):
            assert not accepts(grammar, closed + junk, slug), f"accepts {closed + junk!r}"
        checked += 1
    if not checked:
        pytest.skip("no expressible case")


REASONING_WITH_END = [slug for slug in rt.slugs() if _spec(slug)["reasoning"].get("end")]
REASONING_KIND = next(k for k in rt.CONTENT_KINDS if k.reasoning)


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("slug", REASONING_WITH_END)
def test_reasoning_end_twice(slug, source):
    """The reasoning end marker written twice, with text between: where ``parse`` (strict)
    does not read that as well-formed, the grammar must reject it too."""
    module = rt.module(slug)
    end = module.SPEC["reasoning"]["end"]
    case = _case(slug, REASONING_KIND)
    if case is None or case.text.count(end) != 1:
        pytest.skip("no reasoning case with one end marker")
    doubled = case.text.replace(end, end + "More thought." + end)
    thinking = case.kind.enable_thinking
    try:
        module.parse(doubled, enable_thinking=thinking, strict=True)
    except ValueError:
        pass
    else:
        pytest.skip("parse reads the doubled marker as well-formed")
    grammar = grammar_for(slug, thinking, source)
    assert accepts(grammar, case.text, slug)
    assert not accepts(grammar, doubled, slug), f"accepts {doubled!r}"


# ---------------------------------------------------------------------------
# 4. without(): the KMP automaton rejects exactly the texts containing the stop

STOPS = ["</think>", "aab", "<|close|>x<|sep|>", "ababc"]
OTHER = "é"  # in no stop above; multi-byte, so UTF-8 is exercised too


HAS_CLOSED = "closed" in inspect.signature(gbnf.without).parameters


def _without_grammar(stop, closed=False):
    """``root ::= body`` (text without ``stop``), or with ``closed`` the closing rule:
    text through the first ``stop``."""
    if not closed:
        return "\n".join(["root ::= body"] + gbnf.without("body", stop)) + "\n"
    rules = gbnf.without("body", stop, closed="body-closed")
    return "\n".join(["root ::= body-closed"] + rules) + "\n"


def _closes_once(text, stop):
    return text.endswith(stop) and text.find(stop) == len(text) - len(stop)


def _pieces(stop):
    """Single characters of the alphabet, and prefixes/suffixes of the stop, so that
    near misses and overlapping occurrences are common."""
    chars = sorted(set(stop)) + [OTHER]
    parts = {stop[:i] for i in range(1, len(stop) + 1)} | {stop[i:] for i in range(len(stop))}
    return st.lists(st.sampled_from(chars + sorted(parts)), max_size=8).map("".join)


@pytest.mark.parametrize("stop", STOPS)
def test_without_compiles(stop):
    compile_grammar(_without_grammar(stop), f"without({stop!r})")
    if HAS_CLOSED:
        compile_grammar(_without_grammar(stop, closed=True), f"without({stop!r}, closed)")


@pytest.mark.parametrize("stop", STOPS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_without_accepts_iff_stop_absent(stop, data):
    alphabet = "".join(sorted(set(stop))) + OTHER
    text = data.draw(
        st.one_of(st.text(alphabet=alphabet, max_size=12), _pieces(stop)), label="text"
    )
    grammar = _without_grammar(stop)
    assert accepts(grammar, text, f"without({stop!r})") == (stop not in text), repr(text)
    if HAS_CLOSED:
        closed = _without_grammar(stop, closed=True)
        for candidate in (text, text + stop):
            assert accepts(closed, candidate) == _closes_once(candidate, stop), repr(candidate)


@pytest.mark.parametrize("stop", ["aab", "ababc", "aa", "x"])
def test_without_exhaustive_short_texts(stop):
    body = _without_grammar(stop)
    closed = _without_grammar(stop, closed=True) if HAS_CLOSED else None
    alphabet = sorted(set(stop)) + [OTHER]
    for size in range(7):
        for chars in itertools.product(alphabet, repeat=size):
            text = "".join(chars)
            assert accepts(body, text) == (stop not in text), repr(text)
            if closed:
                assert accepts(closed, text) == _closes_once(text, stop), repr(text)


# Several stops at once (content that neither closes nor holds the tool-call trigger):
# pairs that share prefixes, overlap, hold one another, or move between branches of the
# automaton without passing its root ("abx"/"bby": "ab" + "b" continues "bby").
STOP_SETS = [["ab", "bb"], ["abx", "bby"], ["aab", "ab"], ["xaz", "ab"], ["abc", "b"],
             ["abab", "baa"], ["<|a|>", "<|b|>"], ["</x>", "<x>"], ["ab", "xaby"]]  # fmt: skip


def _first_stop(text, stops):
    """The stop whose first occurrence ends first in ``text``, if that is at its end."""
    ends = [(text.find(s) + len(s), s) for s in stops if s in text]
    end = min(ends)[0] if ends else None
    return {s for e, s in ends if e == end == len(text)}


@pytest.mark.parametrize("stops", STOP_SETS, ids=str)
def test_without_several_stops_exhaustive(stops):
    closing = {stop: f"closed-{index}" for index, stop in enumerate(stops)}
    lines = gbnf.without("body", stops, closed=closing)
    made = {line.split(" ::= ")[0] for line in lines}
    body = "\n".join(["root ::= body"] + lines) + "\n"
    closed = {s: "\n".join([f"root ::= {name}"] + lines) + "\n" for s, name in closing.items() if name in made}
    alphabet = sorted(set("".join(stops))) + [OTHER]
    for size in range(6):
        for chars in itertools.product(alphabet, repeat=size):
            text = "".join(chars)
            assert accepts(body, text) == (not any(s in text for s in stops)), repr(text)
            ending = _first_stop(text, stops)
            for stop in stops:
                if stop not in closed:
                    assert stop not in ending, (stop, text)
                else:
                    assert accepts(closed[stop], text) == (stop in ending), (stop, text)


def _nesting(rule: str) -> int:
    """How deeply a rule's groups nest (strings and classes skipped)."""
    depth = deepest = 0
    for token in re.findall(r'"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|[()]', rule):
        depth += {"(": 1, ")": -1}.get(token, 0)
        deepest = max(deepest, depth)
    return deepest


def test_without_long_stops_nest_in_named_rules():
    """A reader caps how deeply groups nest (lark: about 30): long markers are cut into
    rules every few levels, and still match exactly."""
    stops = ["<|message_sep|>\n\nfunction call<|role_sep|>", "<|open|>response<|sep|><|close|>x"]
    lines = gbnf.without("body", stops, closed={stops[0]: "closed"})
    assert max(map(_nesting, lines)) <= 20
    body = "\n".join(["root ::= body"] + lines) + "\n"
    closed = "\n".join(["root ::= closed"] + lines) + "\n"
    for stop in stops:
        for cut in range(len(stop) + 1):
            text = "a" + stop[:cut] + "b"
            assert accepts(body, text) == (cut < len(stop)), repr(text)
    assert accepts(closed, "x" + stops[0]) and not accepts(closed, "x" + stops[0] + "y")


def test_without_rejects_an_empty_stop():
    if not HAS_CLOSED:
        pytest.skip("the recursive without() returns no rule for an empty stop")
    with pytest.raises(ValueError):
        gbnf.without("body", "")
    with pytest.raises(ValueError):
        gbnf.without("body", ["a", ""])


# ---------------------------------------------------------------------------
# 4b. what llguidance needs beyond the GBNF text (checked on the grammars gbnf.py builds
# now): outputs of any length (llguidance's Earley parser caps a row at a few thousand
# items, which right recursion reaches after ~2000 bytes), and text that merely starts
# like a marker (see LEXER_RACE_FAILURES).

REASONING_CASES = [slug for slug in rt.slugs() if _case(slug, REASONING_KIND) is not None]


@pytest.mark.parametrize("slug", REASONING_CASES)
def test_long_output_is_accepted(slug):
    case = _case(slug, REASONING_KIND)
    kind = case.kind
    text = case.text.replace(kind.reasoning, kind.reasoning * 150).replace(
        kind.content, kind.content * 300
    )
    assert len(text) > 7500
    grammar = grammar_for(slug, kind.enable_thinking, "built")
    assert accepts(grammar, text, slug), why_rejected(grammar, text)


def _markers(module):
    spec = module.SPEC
    found = [spec["reasoning"].get("start"), spec["reasoning"].get("end")]
    found += [spec["content"].get("start"), spec["content"].get("end")] + list(module.STOP)
    return sorted({m for m in found if m})


@functools.lru_cache(maxsize=None)
def _fragments(slug):
    """Markers, their proper prefixes and suffixes, and a few plain characters."""
    markers = _markers(rt.module(slug))
    parts = set(markers)
    for marker in markers:
        parts |= {marker[:i] for i in range(1, len(marker))}
        parts |= {marker[i:] for i in range(1, len(marker))}
    return sorted(parts) + ["a", " ", "\n", "é", "<", "/", "|"]


def _beyond_the_bound(text: str) -> bool:
    """Whether ``text`` holds a run of whitespace the grammars' bound does not take."""
    return any(not ws_fits(run) for run in re.findall(r"\s+", text))


@pytest.mark.parametrize("slug", rt.slugs())
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_grammar_accepts_what_parse_reads_as_well_formed(slug, data):
    """DESIGN.md: grammar() accepts every output that parse reads as well-formed, its
    whitespace between lexemes within the grammars' bound (docs/exports.md): one that
    holds a run of whitespace the bound does not take the grammar may refuse."""
    module = rt.module(slug)
    text = data.draw(
        st.lists(st.sampled_from(_fragments(slug)), max_size=8).map("".join), label="text"
    )
    for thinking in (True, False):
        try:
            module.parse(text, enable_thinking=thinking, strict=True)
        except ValueError:
            continue
        grammar = grammar_for(slug, thinking, "built")
        assert accepts(grammar, text, slug) or _beyond_the_bound(text), (
            f"thinking={thinking}: parse reads {text!r} as well-formed, the grammar rejects "
            "it: " + why_rejected(grammar, text)
        )


# ---------------------------------------------------------------------------
# 5. literal / char_class escaping

HOSTILE = [
    '"\\" ::= root\n',
    '"\\" ::= root\\n',
    'x" | [^a] ::= root\r\n# comment',
    "]\\]\"[",
    "tab\there\x00nul\x01\x1f\x7fdel",
    "<｜end▁of▁sentence｜>",
    "日本語 émoji 🙂",
]


def _one_gbnf_literal(source: str) -> bool:
    """Whether ``source`` is exactly one GBNF string literal (escapes skipped)."""
    if len(source) < 2 or source[0] != '"':
        return False
    at = 1
    while at < len(source) and source[at] != '"':
        at += 2 if source[at] == "\\" else 1
    return at == len(source) - 1


def test_literal_escapes():
    assert gbnf.literal('"') == '"\\""'
    assert gbnf.literal("\\") == '"\\\\"'
    assert gbnf.literal("\n\r\t") == '"\\n\\r\\t"'
    assert gbnf.literal("\x00\x1b\x7f") == '"\\x00\\x1B\\x7F"'
    assert gbnf.literal("]") in ('"]"', '"\\]"')
    assert gbnf.literal("日") == '"日"'  # multi-byte written as itself


def test_char_class_escapes():
    assert gbnf.char_class("]") == "[\\]]"
    assert gbnf.char_class('"') == '["]' or gbnf.char_class('"') == '[\\"]'
    assert gbnf.char_class("\\") == "[\\\\]"
    assert gbnf.char_class("\n") == "[\\n]"
    assert gbnf.char_class("\x01") == "[\\x01]"
    assert gbnf.char_class("a", negated=True) == "[^a]"
    for source in (gbnf.char_class(HOSTILE[2] + "^-"), gbnf.char_class("^", negated=True)):
        assert "\n" not in source and "\r" not in source


@pytest.mark.parametrize("marker", HOSTILE, ids=repr)
def test_literal_is_one_literal_matching_exactly(marker):
    source = gbnf.literal(marker)
    assert _one_gbnf_literal(source), source
    assert all(ord(c) >= 0x20 and c != "\x7f" for c in source), source
    grammar = f"root ::= {source}\n"
    rules = GrammarParser().parse(grammar)
    assert list(rules) == ["root"], rules
    node = rules["root"].alternatives.simplify()
    assert isinstance(node, LiteralNode), node
    name = f"literal({marker!r})"
    compile_grammar(grammar, name)
    assert accepts(grammar, marker, name), why_rejected(grammar, marker)
    for other in ("", marker[:-1], marker + "x", "x" + marker, marker.replace("\\", "/")):
        if other != marker:
            assert not accepts(grammar, other, name), repr(other)


@pytest.mark.parametrize("marker", HOSTILE, ids=repr)
def test_char_class_matches_exactly_its_chars(marker):
    chars = set(marker) | set("^-[]")
    grammar = f"root ::= {gbnf.char_class(chars)}\nnot ::= {gbnf.char_class(chars, True)}\n"
    positive = f"root ::= {gbnf.char_class(chars)}\n"
    negative = f"root ::= {gbnf.char_class(chars, negated=True)}\n"
    name = f"char_class({marker!r})"
    compile_grammar(grammar, name)
    for char in sorted(chars) + ["a", "z", "0", "é", "日", " "]:
        inside = char in chars
        assert accepts(positive, char, name) == inside, repr(char)
        if char != "\x00":  # NUL: whether an engine's negated class admits it varies
            assert accepts(negative, char, name) != inside, repr(char)
    assert not accepts(positive, "", name)
