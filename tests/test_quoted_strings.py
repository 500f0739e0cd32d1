"""Strings written between quotes with a quote inside them left as it is
(compiler/quoted_strings.py): the grammars end one where ``parse`` does.

``parse`` ends such a string at the first quote that what the template writes after a
value follows (the next key, the closer and the section's closer or the next call).
The GBNF and the Lark grammar say the same quote by quote. Checked with llguidance
(one token per byte) against ``parse`` itself, on calls ``f(a=<string>, b=1)`` whose
string is made of pieces that matter here (quotes, escapes, separators, closers, the
section's closer, keys), in LFM2.5's format and in four invented templates of the
same kind (tests/invented/: strings between single quotes as written, or between
double quotes with escapes, with and without a section around the calls):

- what a grammar accepts, ``parse`` reads as that one call, the string as written
  (a grammar never ends a string where ``parse`` does not, nor goes on past its end);
- what ``parse`` reads so, both grammars accept, where the string's whitespace is
  ASCII (beyond it the grammars may refuse more: compiler/quoted_strings.py);
- a string cut anywhere a grammar can still go on can still be closed there.
"""

from __future__ import annotations


import pytest

pytest.importorskip("llguidance")

from compiler.loader import load_generated  # noqa: E402
from tests import roundtrip as rt  # noqa: E402
from tests.test_grammar import GrammarError  # noqa: E402
from tests.test_grammar import _matcher as gbnf_matcher  # noqa: E402
from tests.test_grammar import accepts as gbnf_accepts  # noqa: E402
from tests.test_lark import _matcher as lark_matcher  # noqa: E402
from tests.test_lark import accepts as lark_accepts  # noqa: E402
from tests.quoted_samples import (
    UNTYPED,
    PIECES,
    SAMPLES,
    SHAPES,
    TOOLS,
    WIDE,
    bodies,
    quotes,
    read_as_meant,
)  # noqa: E402,E501

INVENTED = [slug for slug in SHAPES if slug != "lfm2_5_8b_a1b"]


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    """The formats, the invented ones compiled as a user's templates are."""
    out = tmp_path_factory.mktemp("quoted")
    rt.build_invented(out, INVENTED)
    found = {name: load_generated(out / "generated", name) for name in INVENTED}
    found["lfm2_5_8b_a1b"] = rt.module("lfm2_5_8b_a1b")
    return found


def _grammars(module, tools):
    return [
        ("gbnf", module.grammar(tools), gbnf_accepts),
        ("lark", module.lark_grammar(tools), lark_accepts),
    ]


@pytest.mark.parametrize("tools", [TOOLS, UNTYPED, None], ids=["typed", "any value", "no tools"])
@pytest.mark.parametrize("slug", list(SHAPES))
def test_the_grammars_end_a_string_where_parse_does(modules, slug, tools):
    module = modules[slug]
    typed = "typed" if tools is TOOLS else "any" if tools else "none"
    first = quotes(module)[0][0]
    plain = SHAPES[slug].format(first + "x" + first)
    assert read_as_meant(module, plain, "x", first, tools), plain  # the shape is right
    grammars = _grammars(module, tools)
    for quote, _ in quotes(module):
        for wide, pieces in ((False, PIECES), (True, WIDE)):
            for body in bodies(f"{slug} {quote} {typed} {wide}", pieces):
                text = SHAPES[slug].format(quote + body + quote)
                read = read_as_meant(module, text, body, quote, tools)
                for name, grammar, accepts in grammars:
                    taken = accepts(grammar, text, name)
                    assert read or not taken, f"{name} takes what parse reads otherwise: {text!r}"
                    if not wide:
                        assert taken or not read, f"{name} refuses what parse reads: {text!r}"


@pytest.mark.parametrize("slug", list(SHAPES))
def test_a_call_cut_where_a_grammar_goes_on_can_be_finished(modules, slug):
    """A model held to the grammar never comes to a point where nothing finishes the
    call: wherever the grammar takes the text so far (a string's text, which may have
    ended at a quote and gone on with the next key, the closer, a next call), one of a
    few endings is taken: a quote and the rest of the call (a character first, where
    a backslash would escape the quote), the value of ``b`` and the rest, a next call's
    arguments, or nothing more. Most cuts are inside the string, where the quote ends
    it."""
    module = modules[slug]
    head, tail = SHAPES[slug].split("{}")
    rest = tail[tail.index("1") + 1 :]  # after b's value
    inside = 0
    closed = [{**TOOLS[0], "function": {**TOOLS[0]["function"], "strict": True}}]  # a, b only
    for name, grammar, accepts in _grammars(module, closed):
        for quote, _ in quotes(module):
            endings = ["", quote + tail, "x" + quote + tail, "1" + rest]
            endings.append("a=" + quote + "y" + quote + tail)
            for body in bodies(f"{slug} {quote} cut", PIECES):
                matcher = _fresh(name, grammar)
                data = (head + quote + body).encode("utf-8")
                if matcher.try_consume_tokens(list(data)) != len(data):
                    continue  # the grammar refused the text before the cut
                taken = [e for e in endings if accepts(grammar, head + quote + body + e, name)]
                assert taken, f"{name}: nothing finishes {head + quote + body!r}"
                inside += taken[0] in endings[1:3]
    assert inside > SAMPLES


def _fresh(name: str, grammar: str):
    """A matcher of its own for the grammar."""
    if name == "gbnf":
        return gbnf_matcher(grammar, name).deep_copy()
    return lark_matcher(grammar, name)


def test_an_unclosed_string_is_refused(modules):
    for slug, module in modules.items():
        for name, grammar, accepts in _grammars(module, TOOLS):
            text = SHAPES[slug].format(quotes(module)[0][0] + "x")
            assert not accepts(grammar, text, name), (slug, name)


def test_the_grammars_compile(modules):
    for module in modules.values():
        for name, grammar, accepts in _grammars(module, None):
            try:
                accepts(grammar, "", name)
            except GrammarError as error:  # pragma: no cover - the failure itself
                pytest.fail(str(error))


def test_a_long_string_with_many_quotes_is_taken(modules):
    """Quote by quote, a string is as many lexemes as it holds quotes, in one
    repetition: thousands of them stay within llguidance's limits (its Earley parser
    caps the items a row holds), as parse reads them."""
    module = modules["lfm2_5_8b_a1b"]
    body = "print('a', 'b', x[f('k')])\n" * 2000
    text = SHAPES["lfm2_5_8b_a1b"].format("'" + body + "'")
    assert read_as_meant(module, text, body, "'", TOOLS)
    for name, grammar, accepts in _grammars(module, TOOLS):
        assert accepts(grammar, text, name), name
