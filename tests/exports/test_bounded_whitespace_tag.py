"""The structural tag (xgrammar) bounds whitespace in a call too
(tests/test_bounded_whitespace.py holds the GBNF and the Lark grammar): its own
whitespace is the GBNF's bound (compiler/runtime/schema_gbnf.py), and inside a JSON
value xgrammar bounds a run's length (``max_whitespace_cnt``), not its line breaks,
so a sampler held to it may write a run of line breaks that long, and no longer."""

from __future__ import annotations

import json

import pytest

from compiler.runtime.schema_gbnf import WS_LONGEST
from tests import agreement
from tests import roundtrip as rt
from tests.test_bounded_whitespace import LISTED, _slugs

xgr = pytest.importorskip("xgrammar")

from tests.exports.test_structural_tag import EOS, _compiled  # noqa: E402

NEWLINE = 10
# Far more line breaks than a few bounded runs in a row hold: a run this long means
# no bound.
ENDLESS = 4 * WS_LONGEST


@pytest.mark.parametrize("slug", _slugs())
def test_the_tag_bounds_whitespace_in_a_call(slug):
    call = agreement.call_text(slug)
    if call is None:
        pytest.skip("the template writes no call to book_table that parse reads back")
    single = dict(parallel_tool_calls=False, enable_thinking=agreement.ENABLE_THINKING)
    tag = rt.module(slug).structural_tag(LISTED, tool_choice="required", **single)
    matcher = xgr.GrammarMatcher(_compiled(json.dumps(tag, ensure_ascii=False)))
    output = (call.lead + call.text).encode("utf-8")
    # From the trigger's end on (before it, the text may still be content).
    start = len((call.lead + call.text[: max(1, len(agreement.trigger_of(slug)))]).encode())
    assert matcher.accept_string(output[:start])
    most, where = 0, b""
    for at in range(start, len(output) + 1):
        # (where the output may end, the call is whole: the tag lets any text follow)
        if not matcher.fork().accept_token(EOS):
            trial = matcher.fork()
            taken = 0
            while taken < ENDLESS and trial.accept_token(NEWLINE):
                taken += 1
            if taken > most:
                most, where = taken, output[max(0, at - 30) : at + 15]
        if at < len(output):
            assert matcher.accept_token(output[at]), (at, output)
    assert most < ENDLESS, f"line breaks without end near {where!r}"
